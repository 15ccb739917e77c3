//! The cost model of seed 002 §2: the time a sender spends on a packet (`send`), the
//! time each further destination of a multi-send adds (`xmit`, the transmit time) and
//! the time from the wire to the receiver's program (`recv`), each a line `a + b·m` in
//! the packet size `m` (µs, µs per byte); from them λ, the postal model's ratio.
//!
//! Contract:
//! * λ for a message of `len` bytes sent in packets of at most `packet` bytes is the
//!   ratio of one hop — sender's work, transmission, receiver's work — to the time a
//!   sender spends per destination, for one packet of `min(len, packet)` bytes:
//!   `round((send + xmit + recv) / xmit)`, clamped to `1..=`[`MAX_LAMBDA`].
//! * The figures come from, first found: `PHALANX_COST`
//!   (`send=A+B,xmit=A+B,recv=A+B`), the file `PHALANX_COST_FILE` or the host's cache
//!   (`$XDG_CACHE_HOME/phalanx/cost`, else `~/.cache/phalanx/cost`; one line in the same
//!   form, written by `phalanx-bench calibrate`), else [`CostModel::DEFAULT`] (measured
//!   on a 2-core VM over loopback UDP). A malformed variable is an error naming it; a
//!   malformed cache file is ignored with a warning.
//! * λ decides the broadcast tree, so every rank of a job must use the same figures:
//!   the signature of a tree broadcast carries its λ, and ranks whose figures differ
//!   get a mismatch error (set `PHALANX_COST` or `PHALANX_COLL_LAMBDA` for the job).

use std::path::PathBuf;

/// Largest λ used (it travels in 4 bits of a call's signature; beyond it trees for the
/// group sizes of interest are flat anyway).
pub const MAX_LAMBDA: u32 = 15;

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

    /// Parses `send=A+B,xmit=A+B,recv=A+B` (µs, µs per byte; any order, all three).
    pub fn parse(text: &str) -> Result<CostModel, String> {
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
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| format!("{s:?} is not a non-negative number"))
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

    /// The figures this process uses (module docs); `Err` names a malformed variable.
    pub fn from_env() -> Result<CostModel, String> {
        if let Ok(v) = std::env::var("PHALANX_COST") {
            return CostModel::parse(&v).map_err(|e| format!("PHALANX_COST={v:?}: {e}"));
        }
        let Some(path) = cache_path() else {
            return Ok(CostModel::DEFAULT);
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(CostModel::parse(&text).unwrap_or_else(|e| {
                tracing::warn!(
                    "phalanx: warning: ignoring the cost figures in {}: {e}",
                    path.display()
                );
                CostModel::DEFAULT
            })),
            Err(_) => Ok(CostModel::DEFAULT),
        }
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

static MODEL: std::sync::OnceLock<CostModel> = std::sync::OnceLock::new();

/// Installs the figures read at initialization (the first installation wins).
pub(crate) fn install(m: CostModel) {
    let _ = MODEL.set(m);
}

/// The figures installed at initialization (the defaults if none were).
pub(crate) fn model() -> &'static CostModel {
    MODEL.get_or_init(|| CostModel::DEFAULT)
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
}
