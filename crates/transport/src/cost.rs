//! The cost model of seed 002 §2 for this transport, and its measurement: the time a
//! sender spends on a packet (`send`), the time each further destination of a
//! multi-send adds (`xmit`, the transmit time) and the time from the wire to the
//! receiver's program (`recv`), each a line `a + b·m` in the packet size `m` (µs, µs per
//! byte); from them λ, the postal model's ratio.
//!
//! Contract:
//! * λ for a message of `len` bytes sent in packets of at most `packet` bytes is the
//!   ratio of one hop — sender's work, transmission, receiver's work — to the time a
//!   sender spends per destination, for one packet of `min(len, packet)` bytes:
//!   `round((send + xmit + recv) / xmit)`, clamped to `1..=`[`MAX_LAMBDA`].
//! * Figures travel as one line, `send=A+B,xmit=A+B,recv=A+B` ([`CostModel::format`],
//!   [`CostModel::parse`]): in `PHALANX_COST` and in this host's cache file
//!   ([`cache_path`]: `PHALANX_COST_FILE`, else `$XDG_CACHE_HOME/phalanx/cost`, else
//!   `~/.cache/phalanx/cost`). [`CostModel::DEFAULT`] was measured on a 2-core VM.
//!   Bounds: the line is at most [`MAX_COST_LEN`] bytes, every figure a finite number
//!   from 0 to [`MAX_FIGURE`], the cache file's path at most [`MAX_PATH_LEN`] bytes and
//!   only its first [`MAX_COST_LEN`] bytes are read; past a bound, an error.
//! * [`measure`] times this host's loopback UDP (one process, about a second): `send`
//!   = one `send_to` (one system call, one destination); `xmit` = what each further
//!   destination adds to a multi-send (`sendmmsg` to 8 destinations minus to 1, over
//!   7, less the receiving of the extra copies); `recv` = taking one waiting datagram
//!   alone. These are the transport's costs; the library's own per-packet work comes
//!   on top. Each is the median of blocks of timed repetitions; the lines are
//!   least-squares fits. [`Loopback`] is its harness: one sender and N receivers on
//!   127.0.0.1.

use crate::{Transport, UdpTransport};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Instant;

/// Largest λ used (it travels in 4 bits of a call's signature; beyond it trees for the
/// group sizes of interest are flat anyway).
pub const MAX_LAMBDA: u32 = 15;

/// Longest cost line ([`CostModel::parse`]; a formatted one takes about 70 bytes).
pub const MAX_COST_LEN: usize = 4096;
/// Largest figure of a line: µs for `a`, µs per byte for `b` (a second either way).
pub const MAX_FIGURE: f64 = 1e6;
/// Longest path of the cache file (Linux's `PATH_MAX`).
pub const MAX_PATH_LEN: usize = 4096;

/// `a + b·m` µs for a packet of `m` bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    /// Fixed cost, µs.
    pub a: f64,
    /// Cost per byte, µs.
    pub b: f64,
}

impl Line {
    /// The line's value at `m` bytes.
    pub fn at(&self, m: usize) -> f64 {
        self.a + self.b * m as f64
    }
}

/// Send, transmit and receive lines (module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// The sender's work for one packet (to its first destination).
    pub send: Line,
    /// What each further destination of a multi-send adds.
    pub xmit: Line,
    /// Wire to the receiving program.
    pub recv: Line,
}

impl CostModel {
    /// Figures of `phalanx-bench calibrate` on a 2-core VM over loopback UDP.
    pub const DEFAULT: CostModel = CostModel {
        send: Line {
            a: 5.26,
            b: 0.000_081_5,
        },
        xmit: Line {
            a: 3.48,
            b: 0.000_043_3,
        },
        recv: Line {
            a: 1.68,
            b: 0.000_018_0,
        },
    };

    /// λ for a `len`-byte message in packets of at most `packet` bytes (module docs).
    pub fn lambda(&self, len: usize, packet: usize) -> u32 {
        let m = len.min(packet.max(1));
        let x = self.xmit.at(m).max(1e-3);
        let r = (self.send.at(m) + x + self.recv.at(m)) / x;
        (r.round() as u32).clamp(1, MAX_LAMBDA)
    }

    /// Parses `send=A+B,xmit=A+B,recv=A+B` (µs, µs per byte; any order, all three; each
    /// figure from 0 to [`MAX_FIGURE`], the text at most [`MAX_COST_LEN`] bytes).
    pub fn parse(text: &str) -> Result<CostModel, String> {
        if text.len() > MAX_COST_LEN {
            return Err(format!(
                "{} bytes long, more than {MAX_COST_LEN}",
                text.len()
            ));
        }
        let mut lines: [Option<Line>; 3] = [None; 3];
        for item in text.trim().split(',') {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?} is not NAME=A+B"))?;
            let slot = match key.trim() {
                "send" => 0,
                "xmit" => 1,
                "recv" => 2,
                k => return Err(format!("{k:?} is not send, xmit or recv")),
            };
            let (a, b) = value
                .trim()
                .split_once('+')
                .ok_or_else(|| format!("{value:?} is not A+B"))?;
            let num = |s: &str| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| (0.0..=MAX_FIGURE).contains(v))
                    .ok_or_else(|| format!("{s:?} is not a number from 0 to {MAX_FIGURE}"))
            };
            lines[slot] = Some(Line {
                a: num(a)?,
                b: num(b)?,
            });
        }
        match lines {
            [Some(send), Some(xmit), Some(recv)] => Ok(CostModel { send, xmit, recv }),
            _ => Err("send, xmit and recv are all needed".into()),
        }
    }

    /// The form [`parse`](Self::parse) reads.
    pub fn format(&self) -> String {
        let l = |l: &Line| format!("{:.4}+{:.7}", l.a, l.b);
        format!(
            "send={},xmit={},recv={}",
            l(&self.send),
            l(&self.xmit),
            l(&self.recv)
        )
    }
}

/// Where this host's figures are cached (module docs).
pub fn cache_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PHALANX_COST_FILE") {
        return Some(p.into());
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("phalanx").join("cost"))
}

/// This host's cached figures: `Ok(None)` when there are none, `Err` naming the file
/// when they are malformed.
pub fn read_cache() -> Result<Option<CostModel>, String> {
    use std::io::Read;
    let Some(path) = cache_path() else {
        return Ok(None);
    };
    if path.as_os_str().len() > MAX_PATH_LEN {
        return Err(format!(
            "the cost cache path (PHALANX_COST_FILE, XDG_CACHE_HOME or HOME) is {} bytes \
             long, more than {MAX_PATH_LEN}",
            path.as_os_str().len()
        ));
    }
    let Ok(file) = std::fs::File::open(&path) else {
        return Ok(None);
    };
    // One byte past the bound tells a file that is too long.
    let mut bytes = Vec::new();
    if file
        .take(MAX_COST_LEN as u64 + 1)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return Ok(None);
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("the cost figures in {}: not UTF-8", path.display()))?;
    CostModel::parse(&text)
        .map(Some)
        .map_err(|e| format!("the cost figures in {}: {e}", path.display()))
}

/// Destinations of the `xmit` measurement.
const XMIT_DESTS: usize = 8;
/// Timed repetitions per block.
pub const REPS: usize = 200;
/// Blocks per point.
pub const BLOCKS: usize = 7;

/// One sender (rank 0) and receivers (ranks 1..) on 127.0.0.1, in this process.
pub struct Loopback {
    /// The sender.
    pub tx: UdpTransport,
    rx: Vec<UdpTransport>,
    buf: Vec<u8>,
}

impl Loopback {
    /// A sender and `dests` receivers.
    pub fn new(dests: usize) -> std::io::Result<Loopback> {
        let tx = UdpTransport::bind(Ipv4Addr::LOCALHOST)?;
        let rx: Vec<UdpTransport> = (0..dests)
            .map(|_| UdpTransport::bind(Ipv4Addr::LOCALHOST))
            .collect::<std::io::Result<_>>()?;
        let mut tx = tx;
        // Rank 0 is the sender itself; ranks 1.. are the receivers.
        let mut peers = vec![tx.local_addr()];
        peers.extend(rx.iter().map(|r| r.local_addr()));
        tx.set_peers(peers);
        Ok(Loopback {
            tx,
            rx,
            buf: Vec::new(),
        })
    }

    /// The largest datagram.
    pub fn max(&self) -> usize {
        self.tx.max_datagram()
    }

    /// Reads everything waiting at receiver `i`; how many datagrams.
    pub fn drain(&mut self, i: usize) -> usize {
        let mut n = 0;
        while let Ok(k) = self.rx[i].recv_batch(&mut |_, _| {}) {
            if k == 0 {
                break;
            }
            n += k;
        }
        n
    }

    /// Waits until receiver `i` has a datagram and takes what is waiting there.
    pub fn take_one(&mut self, i: usize) {
        loop {
            if let Ok(k) = self.rx[i].recv_batch(&mut |_, _| {}) {
                if k > 0 {
                    return;
                }
            }
            std::hint::spin_loop();
        }
    }

    /// `m` bytes to send.
    pub fn payload(&mut self, m: usize) -> &[u8] {
        self.buf.resize(m, 0xa5);
        &self.buf[..m]
    }
}

/// The median of `v` (not empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// µs per repetition of `f`, median over blocks.
fn time_us(mut f: impl FnMut()) -> f64 {
    let mut blocks = Vec::with_capacity(BLOCKS);
    for _ in 0..BLOCKS {
        let t = Instant::now();
        for _ in 0..REPS {
            f();
        }
        blocks.push(t.elapsed().as_secs_f64() * 1e6 / REPS as f64);
    }
    median(blocks)
}

/// The packet sizes measured: powers of two from 64 B to `max.min(limit)`, and it.
pub fn sizes(max: usize, limit: usize) -> Vec<usize> {
    let mut v: Vec<usize> = [64usize, 256, 1024, 4096, 8192, 16384, 32768, 65536]
        .into_iter()
        .filter(|&s| s <= max.min(limit))
        .collect();
    if v.last() != Some(&max.min(limit)) {
        v.push(max.min(limit));
    }
    v
}

/// Least-squares line through `(m, µs)` points.
fn fit(points: &[(usize, f64)]) -> Line {
    let n = points.len() as f64;
    let sx: f64 = points.iter().map(|p| p.0 as f64).sum();
    let sy: f64 = points.iter().map(|p| p.1).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 as f64).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| p.0 as f64 * p.1).sum();
    let d = n * sxx - sx * sx;
    let b = if d.abs() < f64::EPSILON {
        0.0
    } else {
        (n * sxy - sx * sy) / d
    };
    let a = (sy - b * sx) / n;
    Line {
        a: a.max(0.0),
        b: b.max(0.0),
    }
}

/// Measures this host's lines (module docs); `row(size, send, xmit, recv)` sees every
/// point (µs).
pub fn measure(mut row: impl FnMut(usize, f64, f64, f64)) -> std::io::Result<CostModel> {
    let mut net = Loopback::new(XMIT_DESTS)?;
    let all: Vec<u32> = (1..=XMIT_DESTS as u32).collect();
    let (mut send, mut xmit, mut recv) = (Vec::new(), Vec::new(), Vec::new());
    for m in sizes(net.max(), usize::MAX) {
        let data = net.payload(m).to_vec();
        let one = time_us(|| {
            let _ = net.tx.send_to(1, &data);
            net.drain(0);
        });
        let drain_only = time_us(|| {
            net.drain(0);
        });
        let t_send = (one - drain_only).max(0.01);
        let multi = |net: &mut Loopback, k: usize| {
            time_us(|| {
                let _ = net.tx.multi_send(&data, &all[..k]);
                for i in 0..k {
                    net.drain(i);
                }
            })
        };
        // Receiving is timed apart: queue, then take.
        let t1 = multi(&mut net, 1);
        let tk = multi(&mut net, XMIT_DESTS);
        // Each extra destination costs its copy and its drain; take the drain out.
        // One datagram waiting, taken alone (as a tree's inner node takes its packet).
        let t_recv = {
            let mut blocks = Vec::new();
            for _ in 0..BLOCKS {
                let mut total = 0.0;
                for _ in 0..REPS {
                    let _ = net.tx.send_to(1, &data);
                    let t = Instant::now();
                    net.take_one(0);
                    total += t.elapsed().as_secs_f64();
                }
                blocks.push(total * 1e6 / REPS as f64);
            }
            median(blocks)
        };
        let t_xmit = ((tk - t1) / (XMIT_DESTS - 1) as f64 - t_recv).max(0.01);
        row(m, t_send, t_xmit, t_recv);
        send.push((m, t_send));
        xmit.push((m, t_xmit));
        recv.push((m, t_recv));
    }
    Ok(CostModel {
        send: fit(&send),
        xmit: fit(&xmit),
        recv: fit(&recv),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambda_follows_the_lines() {
        let m = CostModel {
            send: Line { a: 2.0, b: 0.0 },
            xmit: Line { a: 1.0, b: 0.0 },
            recv: Line { a: 3.0, b: 0.0 },
        };
        assert_eq!(m.lambda(100, 1000), 6);
        // Transmission dominating: λ = 1.
        let wire = CostModel {
            send: Line { a: 0.1, b: 0.0 },
            xmit: Line { a: 0.0, b: 0.01 },
            recv: Line { a: 0.1, b: 0.0 },
        };
        assert_eq!(wire.lambda(65536, 65536), 1);
        // Only one packet counts; never above MAX_LAMBDA.
        assert_eq!(wire.lambda(1 << 30, 1000), wire.lambda(1000, 1000));
        let cheap = CostModel {
            send: Line { a: 100.0, b: 0.0 },
            xmit: Line { a: 0.0, b: 0.0 },
            recv: Line { a: 100.0, b: 0.0 },
        };
        assert_eq!(cheap.lambda(10, 10), MAX_LAMBDA);
    }

    #[test]
    fn parse_round_trips_and_names_errors() {
        let m = CostModel::DEFAULT;
        assert_eq!(
            CostModel::parse(&m.format()).unwrap().lambda(1000, 1472),
            m.lambda(1000, 1472)
        );
        let p = CostModel::parse(" recv=1+0.5, send=2+0 ,xmit=3+0.25").unwrap();
        assert_eq!(p.xmit, Line { a: 3.0, b: 0.25 });
        for bad in [
            "",
            "send=1+2",
            "send=1,xmit=1+1,recv=1+1",
            "send=1+2,xmit=-1+0,recv=1+1",
            "sned=1+1",
        ] {
            assert!(CostModel::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parse_is_bounded() {
        let edge = CostModel::parse("send=1000000+1000000,xmit=0+0,recv=1+1").unwrap();
        assert_eq!(
            edge.send,
            Line {
                a: MAX_FIGURE,
                b: MAX_FIGURE
            }
        );
        assert!((1..=MAX_LAMBDA).contains(&edge.lambda(65536, 65536)));
        for bad in [
            "send=1000000.1+0,xmit=1+1,recv=1+1",
            "send=1+1e308,xmit=1+1,recv=1+1",
            "send=inf+0,xmit=1+1,recv=1+1",
            "send=NaN+0,xmit=1+1,recv=1+1",
            "send=18446744073709551615+0,xmit=1+1,recv=1+1",
        ] {
            let e = CostModel::parse(bad).unwrap_err();
            assert!(e.contains("1000000"), "{bad}: {e}");
        }
        let padded = format!(
            "{:<width$}",
            CostModel::DEFAULT.format(),
            width = MAX_COST_LEN
        );
        assert!(CostModel::parse(&padded).is_ok());
        let e = CostModel::parse(&format!("{padded} ")).unwrap_err();
        assert!(e.contains("4096") && e.len() < 100, "{e}");
        let e = CostModel::parse(&"x".repeat(1 << 20)).unwrap_err();
        assert!(e.len() < 100, "{e}");
    }
}
