//! Seed 002 on this host's UDP transport, without the launcher (one process, loopback):
//!
//! * `calibrate`: the cost model's lines (seed 002 §2 and appendix). For packet sizes
//!   from 64 B to the largest datagram: `send` = one `send_to` (one system call, one
//!   destination), `xmit` = what each further destination adds to a multi-send
//!   (`sendmmsg` to 8 destinations minus to 1, over 7, less the receiving of the extra
//!   copies), `recv` = taking one waiting datagram alone (`recv_batch`). These are the
//!   transport's costs (system calls and the kernel's loopback path); the library's own
//!   per-packet work comes on top. Each is the median of several blocks of timed repetitions;
//!   the lines are least-squares fits, and λ per message size follows
//!   (`phalanx::coll::cost`). With `--save` the figures go to this host's cache, where
//!   jobs read them.
//! * `multisend`: one datagram of each size (up to 16 KiB) to k = 1 … 15 destinations as
//!   one multi-send (one `sendmmsg`) against k separate sends (k `sendto`), timed until
//!   the last destination has it; prints both latencies, the factor, and the system calls
//!   of each (the transport's own counters).
//!
//! Timings are medians of alternating blocks (multi, separate, multi, …): the machine is
//! shared and noisy.

use phalanx::coll::cost::{CostModel, Line};
use phalanx_transport::{Transport, UdpTransport};
use std::net::Ipv4Addr;
use std::time::Instant;

/// Destinations of the `xmit` measurement.
const XMIT_DESTS: usize = 8;
/// Most destinations of `multisend`.
const MAX_DESTS: usize = 15;
/// Timed repetitions per block, and blocks per point.
const REPS: usize = 200;
const BLOCKS: usize = 7;

struct Net {
    tx: UdpTransport,
    rx: Vec<UdpTransport>,
    buf: Vec<u8>,
}

impl Net {
    fn new(dests: usize) -> std::io::Result<Net> {
        let tx = UdpTransport::bind(Ipv4Addr::LOCALHOST)?;
        let rx: Vec<UdpTransport> = (0..dests)
            .map(|_| UdpTransport::bind(Ipv4Addr::LOCALHOST))
            .collect::<std::io::Result<_>>()?;
        let mut tx = tx;
        // Rank 0 is the sender itself; ranks 1.. are the receivers.
        let mut peers = vec![tx.local_addr()];
        peers.extend(rx.iter().map(|r| r.local_addr()));
        tx.set_peers(peers);
        Ok(Net {
            tx,
            rx,
            buf: Vec::new(),
        })
    }

    fn max(&self) -> usize {
        self.tx.max_datagram()
    }

    /// Reads everything waiting at receiver `i`; how many datagrams.
    fn drain(&mut self, i: usize) -> usize {
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
    fn take_one(&mut self, i: usize) {
        loop {
            if let Ok(k) = self.rx[i].recv_batch(&mut |_, _| {}) {
                if k > 0 {
                    return;
                }
            }
            std::hint::spin_loop();
        }
    }

    fn payload(&mut self, m: usize) -> &[u8] {
        self.buf.resize(m, 0xa5);
        &self.buf[..m]
    }
}

fn median(mut v: Vec<f64>) -> f64 {
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

fn sizes(max: usize, limit: usize) -> Vec<usize> {
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

/// `phalanx-bench calibrate [--save]` (module docs).
pub fn calibrate(save: bool) -> std::io::Result<()> {
    let mut net = Net::new(XMIT_DESTS)?;
    let all: Vec<u32> = (1..=XMIT_DESTS as u32).collect();
    let (mut send, mut xmit, mut recv) = (Vec::new(), Vec::new(), Vec::new());
    println!("# phalanx-bench calibrate: loopback UDP, medians of {BLOCKS} blocks of {REPS}");
    println!(
        "# {:>8} {:>10} {:>10} {:>10}",
        "Size", "send(us)", "xmit(us)", "recv(us)"
    );
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
        let multi = |net: &mut Net, k: usize| {
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
        println!("  {m:>8} {t_send:>10.2} {t_xmit:>10.2} {t_recv:>10.2}");
        send.push((m, t_send));
        xmit.push((m, t_xmit));
        recv.push((m, t_recv));
    }
    let model = CostModel {
        send: fit(&send),
        xmit: fit(&xmit),
        recv: fit(&recv),
    };
    println!("# fitted lines (us = a + b*bytes):");
    for (name, l) in [
        ("send", model.send),
        ("xmit", model.xmit),
        ("recv", model.recv),
    ] {
        println!("#   {name}: {:.3} + {:.6} * m", l.a, l.b);
    }
    println!(
        "# lambda per message size (packets of at most {} bytes):",
        net.max()
    );
    println!("# {:>8} {:>6}", "Size", "lambda");
    for m in [1usize, 64, 1024, 4096, 16384, 65536, 1 << 20] {
        println!("  {m:>8} {:>6}", model.lambda(m, net.max()));
    }
    println!("PHALANX_COST={}", model.format());
    if save {
        let path = phalanx::coll::cost::cache_path().ok_or_else(|| {
            std::io::Error::other("no cache directory (set HOME or XDG_CACHE_HOME)")
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, model.format() + "\n")?;
        println!("# saved to {}", path.display());
    }
    Ok(())
}

/// `phalanx-bench multisend` (module docs).
pub fn multisend(max_size: usize) -> std::io::Result<()> {
    let mut net = Net::new(MAX_DESTS)?;
    let all: Vec<u32> = (1..=MAX_DESTS as u32).collect();
    println!("# phalanx-bench multisend: one multi-send (sendmmsg) vs k sends (sendto),");
    println!("# time until the last destination has the datagram, medians of {BLOCKS} alternating blocks of {REPS}");
    println!(
        "# {:>8} {:>4} {:>12} {:>12} {:>8} {:>14} {:>14}",
        "Size", "k", "multi(us)", "separate(us)", "factor", "calls/multi", "calls/separate"
    );
    for m in sizes(net.max(), max_size.min(16384)) {
        let data = net.payload(m).to_vec();
        for k in 1..=MAX_DESTS {
            let (mut mt, mut st) = (Vec::new(), Vec::new());
            let (mut m_calls, mut s_calls) = (0u64, 0u64);
            for _ in 0..BLOCKS {
                let before = net.tx.stats();
                let t = Instant::now();
                for _ in 0..REPS {
                    let _ = net.tx.multi_send(&data, &all[..k]);
                    net.take_one(k - 1);
                }
                mt.push(t.elapsed().as_secs_f64() * 1e6 / REPS as f64);
                m_calls += net.tx.stats().send_calls - before.send_calls;
                for i in 0..k - 1 {
                    net.drain(i);
                }
                let before = net.tx.stats();
                let t = Instant::now();
                for _ in 0..REPS {
                    for p in &all[..k] {
                        let _ = net.tx.send_to(*p, &data);
                    }
                    net.take_one(k - 1);
                }
                st.push(t.elapsed().as_secs_f64() * 1e6 / REPS as f64);
                s_calls += net.tx.stats().send_calls - before.send_calls;
                for i in 0..k - 1 {
                    net.drain(i);
                }
            }
            let (mm, sm) = (median(mt), median(st));
            let ops = (BLOCKS * REPS) as f64;
            println!(
                "  {m:>8} {k:>4} {mm:>12.2} {sm:>12.2} {:>8.2} {:>14.1} {:>14.1}",
                sm / mm,
                m_calls as f64 / ops,
                s_calls as f64 / ops
            );
        }
    }
    Ok(())
}
