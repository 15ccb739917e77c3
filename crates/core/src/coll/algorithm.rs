//! Collective algorithms by name, and the choices the environment forces.
//!
//! Contract: every algorithm has one exact 4-bit code ([`Algorithm::code`]); a call's
//! signature carries the code of the algorithm it runs (and, for the k-concurrency
//! all-gather, its k), so ranks that chose differently are told apart exactly, never by
//! a hash. [`Choices`] is parsed once, at initialization, from the `PHALANX_COLL_*`
//! variables: an unknown collective, an algorithm that collective does not have, or a
//! malformed `PHALANX_COLL_ALLGATHER_K` is an error naming the variable.

use super::CollKind;

/// A collective algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Algorithm {
    /// On the shared-memory board.
    Shm = 1,
    /// Hierarchical: boards inside hosts, the network among leaders (point-to-point).
    Hier = 2,
    /// Hierarchical, with multicast among the leaders.
    HierMcast = 3,
    /// Multicast-based.
    Mcast = 4,
    /// Binomial tree.
    Binomial = 5,
    /// Linear (root talks to everyone, or a chain for scans).
    Linear = 6,
    /// Dissemination barrier.
    Dissemination = 7,
    /// All-gather: every rank multicasts in turn.
    Mcast1 = 8,
    /// All-gather: k concurrent multicasters (seed 000).
    Mcast2 = 9,
    /// Ring.
    Ring = 10,
    /// Recursive doubling.
    Rd = 11,
    /// All-reduce as a reduce followed by a broadcast.
    ReduceBcast = 12,
    /// Pairwise exchange.
    Pairwise = 13,
    /// Along the postal model's optimal tree for the measured λ (seed 002): a broadcast
    /// with multi-send at inner nodes and packet-wise pipelining; a reduction or a
    /// gather along the same tree backwards.
    Tree = 14,
    /// All-reduce as a reduce-scatter by recursive halving and an all-gather by
    /// recursive doubling (Rabenseifner).
    Rsag = 15,
}

const ALL: [Algorithm; 15] = [
    Algorithm::Shm,
    Algorithm::Hier,
    Algorithm::HierMcast,
    Algorithm::Mcast,
    Algorithm::Binomial,
    Algorithm::Linear,
    Algorithm::Dissemination,
    Algorithm::Mcast1,
    Algorithm::Mcast2,
    Algorithm::Ring,
    Algorithm::Rd,
    Algorithm::ReduceBcast,
    Algorithm::Pairwise,
    Algorithm::Tree,
    Algorithm::Rsag,
];

impl Algorithm {
    /// Every algorithm, in code order.
    pub fn all() -> [Algorithm; 15] {
        ALL
    }

    /// The exact code carried in signatures (1..=15; 0 means "none").
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The algorithm of a code, if any.
    pub fn from_code(c: u8) -> Option<Algorithm> {
        ALL.iter().copied().find(|a| a.code() == c)
    }

    /// The name used in `PHALANX_COLL_*` and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Shm => "shm",
            Algorithm::Hier => "hier",
            Algorithm::HierMcast => "hier+mcast",
            Algorithm::Mcast => "mcast",
            Algorithm::Binomial => "binomial",
            Algorithm::Linear => "linear",
            Algorithm::Dissemination => "dissemination",
            Algorithm::Mcast1 => "mcast1",
            Algorithm::Mcast2 => "mcast2",
            Algorithm::Ring => "ring",
            Algorithm::Rd => "rd",
            Algorithm::ReduceBcast => "reduce_bcast",
            Algorithm::Pairwise => "pairwise",
            Algorithm::Tree => "tree",
            Algorithm::Rsag => "rsag",
        }
    }
}

/// The collectives that can be forced, their variable suffix and what they accept
/// besides `shm` (every collective) and `hier` (those with a hierarchical form).
const FORCEABLE: [(CollKind, &str, &[Algorithm], bool); 15] = [
    (
        CollKind::Bcast,
        "BCAST",
        &[Algorithm::Mcast, Algorithm::Binomial, Algorithm::Tree],
        true,
    ),
    (
        CollKind::Allgather,
        "ALLGATHER",
        &[
            Algorithm::Mcast,
            Algorithm::Mcast1,
            Algorithm::Mcast2,
            Algorithm::Ring,
            Algorithm::Rd,
        ],
        false,
    ),
    (
        CollKind::Gather,
        "GATHER",
        &[Algorithm::Linear, Algorithm::Binomial, Algorithm::Tree],
        false,
    ),
    (
        CollKind::Scatter,
        "SCATTER",
        &[Algorithm::Mcast, Algorithm::Binomial, Algorithm::Linear],
        false,
    ),
    (
        CollKind::Barrier,
        "BARRIER",
        &[Algorithm::Mcast, Algorithm::Dissemination],
        true,
    ),
    (
        CollKind::Allreduce,
        "ALLREDUCE",
        &[Algorithm::Rd, Algorithm::ReduceBcast, Algorithm::Rsag],
        true,
    ),
    (
        CollKind::Reduce,
        "REDUCE",
        &[Algorithm::Binomial, Algorithm::Tree],
        true,
    ),
    (
        CollKind::Alltoall,
        "ALLTOALL",
        &[Algorithm::Pairwise],
        false,
    ),
    (CollKind::Scan, "SCAN", &[Algorithm::Linear], false),
    (CollKind::Exscan, "EXSCAN", &[Algorithm::Linear], false),
    (CollKind::Gatherv, "GATHERV", &[Algorithm::Linear], false),
    (CollKind::Scatterv, "SCATTERV", &[Algorithm::Linear], false),
    (
        CollKind::Allgatherv,
        "ALLGATHERV",
        &[Algorithm::Linear],
        false,
    ),
    (
        CollKind::Alltoallv,
        "ALLTOALLV",
        &[Algorithm::Linear],
        false,
    ),
    (
        CollKind::ReduceScatterBlock,
        "REDUCE_SCATTER_BLOCK",
        &[Algorithm::Linear],
        false,
    ),
];

/// Default k of the k-concurrency multicast all-gather.
pub const DEFAULT_ALLGATHER_K: u16 = 4;

/// The algorithms forced by the environment (`PHALANX_COLL_<NAME>=<algorithm>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choices {
    forced: Vec<(CollKind, Algorithm)>,
    /// k of the `mcast2` all-gather (`PHALANX_COLL_ALLGATHER_K`, default 4).
    pub allgather_k: u16,
    /// λ of the postal trees, instead of the cost model's (`PHALANX_COLL_LAMBDA`,
    /// 1 to 15).
    pub lambda: Option<u32>,
    /// Inner nodes of a tree broadcast forward each packet as it arrives
    /// (`PHALANX_COLL_PIPELINE`, default on).
    pub pipeline: bool,
    /// The shared-memory board's size thresholds, in bytes (`PHALANX_COLL_BOARD_*`).
    pub board: BoardLimits,
}

/// Scatter blocks from which the root's pieces are pulled by the readers when there are 8
/// members or more (on a 2-core machine, µs streamed / pulled: p = 8, 128 KiB 42 / 35,
/// 1 MiB 552 / 316; p = 4, 128 KiB 18.5 / 24, 4 MiB 1150 / 1203; all-to-all streamed
/// faster at p = 2, 4 and 8 from 16 KiB to 1 MiB).
pub const SCATTER_PULL: usize = 128 << 10;

/// Where the shared-memory board changes method (bytes; see `collective/board.rs`, and the
/// README for the measurements behind the defaults). Every rank must use the same values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoardLimits {
    /// All-reduces of at least this many bytes, on two members or more, split the
    /// combining (reduce-scatter then all-gather on the board). `PHALANX_COLL_BOARD_SPLIT`.
    pub split: usize,
    /// Scatter and all-to-all blocks of at least this many bytes are pulled with one copy
    /// (`process_vm_readv`) instead of streamed through the board
    /// (`PHALANX_COLL_BOARD_PULL`). Unset: scatters of [`SCATTER_PULL`] bytes or more
    /// among 8 members or more; all-to-all never (streaming measured faster there).
    pub pull: Option<usize>,
    /// Reductions of more than two contributions totalling at most this many bytes
    /// take them in any order first. `PHALANX_COLL_BOARD_STASH`.
    pub stash: usize,
    /// Calls whose largest publication exceeds this take the point-to-point schedules.
    /// `PHALANX_COLL_BOARD_MAX`.
    pub max: usize,
}

impl Default for BoardLimits {
    fn default() -> Self {
        BoardLimits {
            split: 8 << 10,
            pull: None,
            stash: 32 << 10,
            max: 64 << 20,
        }
    }
}

impl Default for Choices {
    fn default() -> Self {
        Choices {
            forced: Vec::new(),
            allgather_k: DEFAULT_ALLGATHER_K,
            lambda: None,
            pipeline: true,
            board: BoardLimits::default(),
        }
    }
}

impl Choices {
    /// Parses the `PHALANX_COLL_*` variables among `vars`; an error names the variable.
    pub fn parse<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, String> {
        let mut c = Choices::default();
        for (key, value) in vars {
            let Some(suffix) = key.strip_prefix("PHALANX_COLL_") else {
                continue;
            };
            let value = value.trim();
            if suffix == "ALLGATHER_K" {
                c.allgather_k = value
                    .parse::<u16>()
                    .ok()
                    .filter(|k| (1..0xffff).contains(k))
                    .ok_or_else(|| {
                        format!("{key}={value:?}: must be a whole number from 1 to 65534")
                    })?;
                continue;
            }
            if suffix == "LAMBDA" {
                c.lambda = Some(
                    value
                        .parse::<u32>()
                        .ok()
                        .filter(|l| (1..=super::cost::MAX_LAMBDA).contains(l))
                        .ok_or_else(|| {
                            format!("{key}={value:?}: must be a whole number from 1 to 15")
                        })?,
                );
                continue;
            }
            let limit = match suffix {
                "BOARD_SPLIT" => Some(&mut c.board.split),
                "BOARD_PULL" => Some(c.board.pull.insert(0)),
                "BOARD_STASH" => Some(&mut c.board.stash),
                "BOARD_MAX" => Some(&mut c.board.max),
                _ => None,
            };
            if let Some(limit) = limit {
                *limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n <= 1 << 40)
                    .ok_or_else(|| format!("{key}={value:?}: must be a number of bytes"))?;
                continue;
            }
            if suffix == "PIPELINE" {
                c.pipeline = match value {
                    "1" | "on" | "true" | "yes" => true,
                    "0" | "off" | "false" | "no" => false,
                    _ => return Err(format!("{key}={value:?}: must be 0 or 1")),
                };
                continue;
            }
            let Some((kind, _, own, hier)) = FORCEABLE.iter().find(|f| f.1 == suffix) else {
                let names: Vec<&str> = FORCEABLE.iter().map(|f| f.1).collect();
                return Err(format!(
                    "{key}: no collective {suffix} (one of {}, or ALLGATHER_K, LAMBDA, PIPELINE, BOARD_SPLIT, BOARD_PULL, \
                     BOARD_STASH, BOARD_MAX)",
                    names.join(", ")
                ));
            };
            let mut allowed: Vec<Algorithm> = vec![Algorithm::Shm];
            if *hier {
                allowed.push(Algorithm::Hier);
            }
            allowed.extend_from_slice(own);
            let Some(a) = allowed.iter().copied().find(|a| a.name() == value) else {
                let names: Vec<&str> = allowed.iter().map(|a| a.name()).collect();
                return Err(format!(
                    "{key}={value:?}: not an algorithm of {suffix} (one of {})",
                    names.join(", ")
                ));
            };
            c.forced.retain(|(k, _)| k != kind);
            c.forced.push((*kind, a));
        }
        Ok(c)
    }

    /// The algorithm forced for `kind`, if any.
    pub fn forced(&self, kind: CollKind) -> Option<Algorithm> {
        self.forced
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, a)| *a)
    }
}

static CHOICES: std::sync::OnceLock<Choices> = std::sync::OnceLock::new();

/// Installs the choices parsed at initialization (the first installation wins: the
/// environment of a process does not change between initializations).
pub(crate) fn install(c: Choices) {
    let _ = CHOICES.set(c);
}

/// The choices installed at initialization (defaults if none were).
#[inline]
pub(crate) fn choices() -> &'static Choices {
    // Installed already (every call after initialization): a load and a test, with the
    // initialization's frame out of line (inlined, a byte it stores on the stack and
    // reloads wide stalled every collective: store forwarding).
    match CHOICES.get() {
        Some(c) => c,
        None => default_choices(),
    }
}

#[cold]
#[inline(never)]
fn default_choices() -> &'static Choices {
    CHOICES.get_or_init(Choices::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_exact_and_round_trip() {
        for a in ALL {
            assert!((1..=15).contains(&a.code()));
            assert_eq!(Algorithm::from_code(a.code()), Some(a));
            assert_eq!(ALL.iter().filter(|b| b.name() == a.name()).count(), 1);
        }
        assert_eq!(Algorithm::from_code(0), None);
    }

    #[test]
    fn parse_accepts_known_and_names_bad_variables() {
        let c = Choices::parse([
            ("PHALANX_COLL_BCAST", "binomial"),
            ("PHALANX_COLL_ALLGATHER_K", "3"),
            ("PHALANX_COLL_REDUCE", "hier"),
            ("PATH", "/bin"),
        ])
        .unwrap();
        assert_eq!(c.forced(CollKind::Bcast), Some(Algorithm::Binomial));
        assert_eq!(c.forced(CollKind::Reduce), Some(Algorithm::Hier));
        assert_eq!(c.forced(CollKind::Gather), None);
        assert_eq!(c.allgather_k, 3);
        let e = Choices::parse([("PHALANX_COLL_BCAST", "ring")]).unwrap_err();
        assert!(
            e.contains("PHALANX_COLL_BCAST") && e.contains("binomial"),
            "{e}"
        );
        let e = Choices::parse([("PHALANX_COLL_SCAN", "hier")]).unwrap_err();
        assert!(e.contains("not an algorithm of SCAN"), "{e}");
        let e = Choices::parse([("PHALANX_COLL_BCASTT", "mcast")]).unwrap_err();
        assert!(e.contains("no collective BCASTT"), "{e}");
        let e = Choices::parse([("PHALANX_COLL_ALLGATHER_K", "0")]).unwrap_err();
        assert!(e.contains("PHALANX_COLL_ALLGATHER_K"), "{e}");
        let c = Choices::parse([
            ("PHALANX_COLL_BCAST", "tree"),
            ("PHALANX_COLL_LAMBDA", "3"),
            ("PHALANX_COLL_PIPELINE", "0"),
        ])
        .unwrap();
        assert_eq!(c.forced(CollKind::Bcast), Some(Algorithm::Tree));
        assert_eq!((c.lambda, c.pipeline), (Some(3), false));
        let c = Choices::parse([
            ("PHALANX_COLL_BOARD_SPLIT", "0"),
            ("PHALANX_COLL_BOARD_PULL", "1048576"),
        ])
        .unwrap();
        assert_eq!((c.board.split, c.board.pull), (0, Some(1 << 20)));
        assert_eq!(c.board.stash, BoardLimits::default().stash);
        for (k, v) in [
            ("PHALANX_COLL_BOARD_MAX", "lots"),
            ("PHALANX_COLL_BOARD_STASH", "-1"),
            ("PHALANX_COLL_LAMBDA", "0"),
            ("PHALANX_COLL_LAMBDA", "16"),
            ("PHALANX_COLL_PIPELINE", "maybe"),
        ] {
            assert!(Choices::parse([(k, v)]).unwrap_err().contains(k));
        }
    }
}
