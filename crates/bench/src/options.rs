//! Command-line options, with OSU's defaults and the size/iteration plan they produce.
//!
//! OSU semantics: `-m max` or `-m min:max` bounds the message sizes (powers of two, plus
//! size 0 for latency when the minimum is 0); `-i` and `-x` set the iteration and warm-up
//! counts for every size, otherwise sizes above [`LARGE_MESSAGE_SIZE`] use the smaller
//! "large" defaults. Collective tests default to OSU's collective plan: 1 B … 1 MiB (4 B
//! minimum for the `f32` reductions), 1000 timed / 200 warm-up calls per size, 100 / 10
//! above 8 KiB.

use clap::{Parser, ValueEnum};

/// Messages above this size use the large-message iteration counts (OSU's threshold).
pub const LARGE_MESSAGE_SIZE: usize = 8192;
/// OSU's default largest message: 4 MiB.
pub const DEFAULT_MAX_SIZE: usize = 1 << 22;
/// OSU's default largest message of the collective tests: 1 MiB.
pub const DEFAULT_MAX_COLL_SIZE: usize = 1 << 20;

/// Which measurement to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Test {
    /// Ping-pong one-way latency (osu_latency).
    Latency,
    /// Windowed unidirectional bandwidth (osu_bw).
    Bw,
    /// Windowed bidirectional bandwidth (osu_bibw).
    Bibw,
    /// Multi-pair bandwidth and message rate: ranks r < p/2 send to r + p/2 (osu_mbw_mr).
    #[value(name = "mbw_mr")]
    MbwMr,
    /// Broadcast, root round-robin (osu_bcast).
    Bcast,
    /// All-gather, `size` bytes per rank (osu_allgather).
    Allgather,
    /// Gather, `size` bytes per rank, root round-robin (osu_gather).
    Gather,
    /// Scatter, `size` bytes per rank, root round-robin (osu_scatter).
    Scatter,
    /// Barrier: one line (osu_barrier).
    Barrier,
    /// Sum-reduce of `size / 4` f32, root round-robin (osu_reduce).
    Reduce,
    /// Sum-all-reduce of `size / 4` f32 (osu_allreduce).
    Allreduce,
    /// All-to-all, `size` bytes per pair (osu_alltoall).
    Alltoall,
    /// Seed 003: a token around all ranks, per-hop latency for 1..2000 8-byte words.
    Ring,
    /// Seed 003: rank 0 streams through ranks 1..p-2 to rank p-1; throughput.
    Chain,
    /// Seed 003: every rank sends `-n` messages of `-k` fragments to every other rank
    /// before receiving anything; completion time.
    Flood,
    /// Seed 002: this host's send, transmit and receive cost lines and λ (no launcher).
    Calibrate,
    /// Seed 002: one multi-send against separate sends to 1–15 destinations (no
    /// launcher).
    Multisend,
}

impl Test {
    /// True for the two-rank point-to-point tests.
    pub fn is_point_to_point(self) -> bool {
        matches!(self, Test::Latency | Test::Bw | Test::Bibw)
    }

    /// True for the seed-003 tests (sizes in 8-byte words from [`SEED003_WORDS`]).
    pub fn is_seed003(self) -> bool {
        matches!(self, Test::Ring | Test::Chain | Test::Flood)
    }
}

/// OSU-style micro-benchmarks for phalanx (latency, bw and bibw with exactly 2 ranks,
/// mbw_mr with 2 or more, collectives with any number).
#[derive(Debug, Parser)]
#[command(
    name = "phalanx-bench",
    version,
    args_override_self = true,
    after_help = "Whole suites with plots and a page: phalanx-bench report --help"
)]
pub struct Cli {
    /// The measurement.
    #[arg(value_enum)]
    pub test: Test,
    /// Message sizes: `max` or `min:max` bytes (default min: 0 latency, 4 reduce and
    /// allreduce, 1 otherwise; default max: 4 MiB point-to-point, 1 MiB collectives).
    #[arg(short = 'm', long = "message-size", value_parser = parse_size_range)]
    pub sizes: Option<SizeRange>,
    /// Timed iterations per size (default 10000 latency / 100 bw, bibw, mbw_mr / 1000
    /// collectives; 1000 / 20 / 100 above 8 KiB).
    #[arg(short = 'i', long = "iterations")]
    pub iterations: Option<usize>,
    /// Warm-up iterations per size (default 100 latency / 10 bw, bibw, mbw_mr / 200
    /// collectives; 10 / 2 / 10 above 8 KiB).
    #[arg(short = 'x', long = "warmup")]
    pub warmup: Option<usize>,
    /// Messages in flight per bandwidth iteration (bw, bibw: each way; mbw_mr: per pair).
    #[arg(short = 'W', long = "window-size", default_value_t = 64)]
    pub window: usize,
    /// ring, chain: read and write every payload word at each hop ("with processing").
    #[arg(long = "touch")]
    pub touch: bool,
    /// flood: messages each rank sends to every other rank before receiving.
    #[arg(short = 'n', long = "messages", default_value_t = 200)]
    pub messages: usize,
    /// flood: fragments (separate sends of one size) per message.
    #[arg(short = 'k', long = "fragments", default_value_t = 64)]
    pub fragments: usize,
    /// calibrate: write the figures to this host's cache, where jobs read them.
    #[arg(long)]
    pub save: bool,
}

/// Payloads of the seed-003 tests, in 8-byte words (the paper's 1 … 2000 words).
pub const SEED003_WORDS: [usize; 6] = [1, 10, 100, 500, 1000, 2000];
/// Bytes per word of the seed-003 tests.
pub const WORD: usize = 8;
/// Default largest fragment of the flood test (bytes): n·k fragments of it are in flight
/// from every rank to every other, so the default keeps memory modest.
pub const DEFAULT_MAX_FLOOD_SIZE: usize = 800;

/// The `-m` argument: an optional minimum and a maximum message size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeRange {
    min: Option<usize>,
    max: usize,
}

impl SizeRange {
    /// The largest size asked for.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// What to measure for each size.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Message sizes in bytes, ascending.
    pub sizes: Vec<usize>,
    /// Bandwidth window (ignored by latency); the chain's bound on sends in flight.
    pub window: usize,
    /// Seed-003 tests: touch every word at each hop.
    pub touch: bool,
    /// Flood: messages per destination.
    pub messages: usize,
    /// Flood: fragments per message.
    pub fragments: usize,
    iterations: Option<usize>,
    warmup: Option<usize>,
    small: (usize, usize),
    large: (usize, usize),
}

impl Plan {
    /// `(timed iterations, warm-up iterations)` for a message of `size` bytes.
    pub fn counts(&self, size: usize) -> (usize, usize) {
        let (iters, skip) = if size > LARGE_MESSAGE_SIZE {
            self.large
        } else {
            self.small
        };
        (
            self.iterations.unwrap_or(iters),
            self.warmup.unwrap_or(skip),
        )
    }

    /// The largest size (for allocating buffers once).
    pub fn max_size(&self) -> usize {
        self.sizes.last().copied().unwrap_or(0)
    }
}

impl Cli {
    /// The size list and iteration counts for the chosen test.
    pub fn plan(&self) -> Plan {
        let (default_min, default_max, small, large) = match self.test {
            Test::Latency => (0, DEFAULT_MAX_SIZE, (10_000, 100), (1_000, 10)),
            Test::Bw | Test::Bibw | Test::MbwMr => (1, DEFAULT_MAX_SIZE, (100, 10), (20, 2)),
            Test::Reduce | Test::Allreduce => (4, DEFAULT_MAX_COLL_SIZE, (1_000, 200), (100, 10)),
            Test::Ring => (1, usize::MAX, (1_000, 100), (500, 50)),
            Test::Chain => (1, usize::MAX, (1_000, 10), (1_000, 10)),
            Test::Flood => (1, DEFAULT_MAX_FLOOD_SIZE, (5, 1), (5, 1)),
            _ => (1, DEFAULT_MAX_COLL_SIZE, (1_000, 200), (100, 10)),
        };
        let (min, max) = match self.sizes {
            Some(r) => (r.min.unwrap_or(default_min), r.max),
            None => (default_min, default_max),
        };
        let sizes = if self.test.is_seed003() {
            SEED003_WORDS
                .iter()
                .map(|w| w * WORD)
                .filter(|b| (min..=max).contains(b))
                .collect()
        } else {
            size_list(min, max)
        };
        Plan {
            sizes,
            window: self.window.max(1),
            touch: self.touch,
            messages: self.messages.max(1),
            fragments: self.fragments.max(1),
            iterations: self.iterations.map(|n| n.max(1)),
            warmup: self.warmup,
            small,
            large,
        }
    }
}

/// 0 (if `min` is 0), then the powers of two from `max(min, 1)` up to `max`.
fn size_list(min: usize, max: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    if min == 0 {
        sizes.push(0);
    }
    let mut s = 1usize;
    while s <= max {
        if s >= min {
            sizes.push(s);
        }
        s *= 2;
    }
    sizes
}

/// Parses `max` or `min:max`.
fn parse_size_range(s: &str) -> Result<SizeRange, String> {
    let num = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|e| format!("bad size {t:?}: {e}"))
    };
    let (min, max) = match s.split_once(':') {
        Some((lo, hi)) => (Some(num(lo)?), num(hi)?),
        None => (None, num(s)?),
    };
    match min {
        Some(min) if min > max => Err(format!("minimum {min} is larger than maximum {max}")),
        _ => Ok(SizeRange { min, max }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_ranges() {
        let range = |min, max| Ok(SizeRange { min, max });
        assert_eq!(parse_size_range("1024"), range(None, 1024));
        assert_eq!(parse_size_range("4:64"), range(Some(4), 64));
        assert!(parse_size_range("64:4").is_err());
        assert_eq!(size_list(0, 8), vec![0, 1, 2, 4, 8]);
        assert_eq!(size_list(3, 20), vec![4, 8, 16]);
    }

    #[test]
    fn osu_defaults() {
        let cli = Cli::parse_from(["phalanx-bench", "latency"]);
        let plan = cli.plan();
        assert_eq!(plan.sizes.first(), Some(&0));
        assert_eq!(plan.max_size(), 1 << 22);
        assert_eq!(plan.counts(8192), (10_000, 100));
        assert_eq!(plan.counts(16384), (1_000, 10));
        let cli = Cli::parse_from(["phalanx-bench", "bw", "-m", "1:64", "-i", "5"]);
        let plan = cli.plan();
        assert_eq!(plan.sizes, vec![1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(plan.counts(8), (5, 10));
        assert_eq!(plan.window, 64);
        let cli = Cli::parse_from(["phalanx-bench", "bw", "-m", "4"]);
        assert_eq!(cli.plan().sizes, vec![1, 2, 4]);
        let cli = Cli::parse_from(["phalanx-bench", "latency", "-m", "4"]);
        assert_eq!(cli.plan().sizes, vec![0, 1, 2, 4]);
        for test in ["bibw", "mbw_mr"] {
            let plan = Cli::parse_from(["phalanx-bench", test, "-m", "8", "-W", "16"]).plan();
            assert_eq!(plan.sizes, vec![1, 2, 4, 8]);
            assert_eq!(plan.counts(8192), (100, 10));
            assert_eq!(plan.counts(16384), (20, 2));
            assert_eq!(plan.window, 16);
        }
        assert_eq!(
            Cli::parse_from(["phalanx-bench", "mbw_mr"]).test,
            Test::MbwMr
        );
        assert!(Test::Bibw.is_point_to_point() && !Test::MbwMr.is_point_to_point());
    }

    #[test]
    fn collective_defaults() {
        let plan = Cli::parse_from(["phalanx-bench", "bcast"]).plan();
        assert_eq!(plan.sizes.first(), Some(&1));
        assert_eq!(plan.max_size(), 1 << 20);
        assert_eq!(plan.counts(8192), (1_000, 200));
        assert_eq!(plan.counts(65536), (100, 10));
        let plan = Cli::parse_from(["phalanx-bench", "allreduce"]).plan();
        assert_eq!(plan.sizes.first(), Some(&4));
        let plan = Cli::parse_from(["phalanx-bench", "alltoall", "-m", "8:64", "-i", "3"]).plan();
        assert_eq!(plan.sizes, vec![8, 16, 32, 64]);
        assert_eq!(plan.counts(64), (3, 200));
        assert!(Test::Bw.is_point_to_point() && !Test::Barrier.is_point_to_point());
        // A repeated option overrides (compare.sh appends its extra arguments).
        let plan = Cli::parse_from(["phalanx-bench", "bcast", "-m", "4", "-m", "8:16"]).plan();
        assert_eq!(plan.sizes, vec![8, 16]);
    }

    #[test]
    fn seed003_defaults() {
        let plan = Cli::parse_from(["phalanx-bench", "ring", "--touch"]).plan();
        assert_eq!(plan.sizes, vec![8, 80, 800, 4000, 8000, 16000]);
        assert!(plan.touch);
        assert_eq!(plan.counts(8), (1_000, 100));
        let plan = Cli::parse_from(["phalanx-bench", "chain", "-m", "100:8000"]).plan();
        assert_eq!(plan.sizes, vec![800, 4000, 8000]);
        let plan = Cli::parse_from(["phalanx-bench", "flood", "-n", "50", "-k", "32"]).plan();
        assert_eq!(plan.sizes, vec![8, 80, 800]);
        assert_eq!((plan.messages, plan.fragments), (50, 32));
        assert!(Test::Flood.is_seed003() && !Test::Flood.is_point_to_point());
    }
}
