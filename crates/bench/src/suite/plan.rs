//! The suite `phalanx-bench report` runs: which tests, at which rank counts, with which
//! arguments and environment.
//!
//! Every test of the suite is a [`Spec`] in [`SPECS`]: the point-to-point tests (latency,
//! bw, mbw_mr) run at p = 2, the collectives and the seed-003 experiments at every p of
//! `--np`. The full suite's arguments are `bench/compare.sh`'s short defaults (sizes to
//! 1 MiB, 200 calls per collective size) and `bench/seed003.sh`'s; `--quick` takes sizes
//! to 4 KiB and a few iterations, seconds in all. Two tests are not one benchmark each:
//! `allgather_k` is `phalanx-bench allgather` of one size with the k-concurrency multicast
//! (`PHALANX_COLL_ALLGATHER=mcast2`) at each k of [`KS`] and once with the default
//! algorithm (seed 000's Allgather-vs-k figure, as `bench/allgather_k.sh`), at p = 4 or
//! the nearest `--np` ([`Ranks::Near`]); `applications` runs the example programs of
//! [`APPS`] (matmul, spmv, jacobi: each prints its speed-up over 1 rank) at p = 1 and
//! every p of `--np`. `applications` is left out of `--quick` unless named in `--tests`
//! (the examples are built apart from the benchmark). [`steps`] expands a selection into
//! the ordered list of jobs; it is pure (no I/O).

/// What a test's values are: it decides the plot's axes and which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A time per operation against message size (lower is better; log–log plot).
    Time,
    /// A rate against message size (higher is better; log-x plot).
    Rate,
    /// One time per rank count, no size (barrier; plotted against p).
    Barrier,
    /// One time per k of the multicast all-gather, and one of the default algorithm
    /// (plotted against k, the default as a level line).
    AgainstK,
    /// Speed-up over 1 rank of each application (plotted against p with the ideal, p).
    Speedup,
}

/// At which rank counts a test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranks {
    /// p = 2 only.
    Pair,
    /// Every p of `--np`.
    Each,
    /// p = 1 and every p of `--np`.
    OneAndEach,
    /// One p: this one when `--np` has it, else the largest of `--np` below it, else the
    /// smallest of `--np`.
    Near(usize),
}

/// What a test's jobs run under the launcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// `phalanx-bench <test>` with the spec's arguments.
    Bench(&'static str),
    /// Each example program of [`APPS`] with its own arguments.
    Apps,
}

/// One test of the suite.
#[derive(Debug)]
pub struct Spec {
    /// The test's name in `--tests`, the results and the files (for most tests also the
    /// `phalanx-bench` and `osu_like` test name).
    pub name: &'static str,
    /// A title for plots and the page.
    pub title: &'static str,
    /// What the value is, for the value axis (`Hop latency`).
    pub quantity: &'static str,
    /// What its values are.
    pub kind: Kind,
    /// Where it runs.
    pub ranks: Ranks,
    /// What runs.
    pub program: Program,
    /// Also a test of `bench/c/osu_like.c`, so `bench/compare.sh` can run it on Open MPI.
    pub osu: bool,
    /// Part of the `--quick` suite when `--tests` does not choose.
    pub in_quick: bool,
    /// The column read from a table of several (mbw_mr: the message rate).
    pub column: Option<&'static str>,
    full: &'static str,
    quick: &'static str,
}

impl Spec {
    /// The benchmark's arguments after the test name.
    pub fn args(&self, quick: bool) -> Vec<String> {
        words(if quick { self.quick } else { self.full })
    }
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// An example application of the `applications` test: `<launcher dir>/examples/<name>`
/// (`cargo build --release -p phalanx --examples`), whose rank 0 prints one line
/// `<name>: ..., time T s ..., speed-up over 1 rank S ...`.
#[derive(Debug)]
pub struct App {
    /// The example's name.
    pub name: &'static str,
    full: (&'static str, &'static str),
    quick: (&'static str, &'static str),
}

impl App {
    /// The example's arguments.
    pub fn args(&self, quick: bool) -> Vec<String> {
        words(if quick { self.quick.0 } else { self.full.0 })
    }

    /// Those arguments in words, for plots and the page.
    pub fn problem(&self, quick: bool) -> &'static str {
        if quick {
            self.quick.1
        } else {
            self.full.1
        }
    }
}

/// The applications, in the order run and shown, with their arguments (and those in
/// words). Sizes keep each run to a second or two on a small machine (1 to 8 ranks on
/// 2 cores).
pub const APPS: [App; 3] = [
    App {
        name: "matmul",
        full: ("512 3", "512 × 512, mean of 3"),
        quick: ("128 1", "128 × 128"),
    },
    App {
        name: "spmv",
        full: ("20000 0.02 100", "n = 20000, 100 iterations"),
        quick: ("2000 0.05 20", "n = 2000, 20 iterations"),
    },
    App {
        name: "jacobi",
        full: ("256 500", "256 × 256 grid, 500 sweeps"),
        quick: ("32 50", "32 × 32 grid, 50 sweeps"),
    },
];

/// The k of the multicast all-gather that `allgather_k` measures (besides the default).
pub const KS: [u16; 4] = [1, 2, 4, 8];

/// The variables `allgather_k` sets (and removes for its default-algorithm run).
pub const ALLGATHER_VARS: [&str; 2] = ["PHALANX_COLL_ALLGATHER", "PHALANX_COLL_ALLGATHER_K"];

/// The variant of `allgather_k`'s run with the default algorithm.
pub const DEFAULT_VARIANT: &str = "default";

/// The variant of `allgather_k`'s run at `k`.
pub fn k_variant(k: u16) -> String {
    format!("k={k}")
}

/// The k of an `allgather_k` variant (`None` for the default algorithm's).
pub fn variant_k(variant: &str) -> Option<u16> {
    variant.strip_prefix("k=")?.parse().ok()
}

const P2P_FULL: &str = "-m 1:1048576 -i 30 -x 3";
const P2P_QUICK: &str = "-m 1:4096 -i 20 -x 2";
const COLL_FULL: &str = "-m 1:1048576 -i 200 -x 20";
const COLL_QUICK: &str = "-m 1:4096 -i 20 -x 2";

const fn coll(name: &'static str, title: &'static str) -> Spec {
    Spec {
        name,
        title,
        quantity: "Average latency per call",
        kind: Kind::Time,
        ranks: Ranks::Each,
        program: Program::Bench(name),
        osu: true,
        in_quick: true,
        column: None,
        full: COLL_FULL,
        quick: COLL_QUICK,
    }
}

/// Every test of the suite, in the order run and shown.
pub const SPECS: [Spec; 16] = [
    Spec {
        name: "latency",
        title: "Ping-pong latency (one way)",
        quantity: "One-way latency",
        kind: Kind::Time,
        ranks: Ranks::Pair,
        program: Program::Bench("latency"),
        osu: true,
        in_quick: true,
        column: None,
        full: "-m 1:1048576 -i 1000 -x 100",
        quick: P2P_QUICK,
    },
    Spec {
        name: "bw",
        title: "Unidirectional bandwidth (window of 64)",
        quantity: "Bandwidth",
        kind: Kind::Rate,
        ranks: Ranks::Pair,
        program: Program::Bench("bw"),
        osu: true,
        in_quick: true,
        column: None,
        full: P2P_FULL,
        quick: P2P_QUICK,
    },
    Spec {
        name: "mbw_mr",
        title: "Message rate (windows of 64)",
        quantity: "Message rate",
        kind: Kind::Rate,
        ranks: Ranks::Pair,
        program: Program::Bench("mbw_mr"),
        osu: true,
        in_quick: true,
        column: Some("Messages/s"),
        full: P2P_FULL,
        quick: P2P_QUICK,
    },
    coll("bcast", "Broadcast"),
    coll("allgather", "All-gather"),
    coll("gather", "Gather"),
    coll("scatter", "Scatter"),
    coll("reduce", "Reduce (f32 sum)"),
    coll("allreduce", "All-reduce (f32 sum)"),
    coll("alltoall", "All-to-all"),
    Spec {
        name: "barrier",
        title: "Barrier",
        quantity: "Average latency per call",
        kind: Kind::Barrier,
        ranks: Ranks::Each,
        program: Program::Bench("barrier"),
        osu: true,
        in_quick: true,
        column: None,
        full: "-i 1000 -x 100",
        quick: "-i 50 -x 5",
    },
    Spec {
        name: "ring",
        title: "Seed 003 ring: one-hop latency of a token around all ranks",
        quantity: "Hop latency",
        kind: Kind::Time,
        ranks: Ranks::Each,
        program: Program::Bench("ring"),
        osu: false,
        in_quick: true,
        column: None,
        full: "-i 1000 -x 100",
        quick: "-m 8:800 -i 20 -x 2",
    },
    Spec {
        name: "chain",
        title: "Seed 003 chain: throughput of a stream through all ranks",
        quantity: "Throughput",
        kind: Kind::Rate,
        ranks: Ranks::Each,
        program: Program::Bench("chain"),
        osu: false,
        in_quick: true,
        column: None,
        full: "-i 1000 -x 10",
        quick: "-m 8:800 -i 20 -x 2",
    },
    Spec {
        name: "flood",
        title: "Seed 003 flood: every rank sends to every other before receiving",
        quantity: "Completion time",
        kind: Kind::Time,
        ranks: Ranks::Each,
        program: Program::Bench("flood"),
        osu: false,
        in_quick: true,
        column: None,
        full: "-n 200 -k 64 -i 1 -x 1",
        quick: "-m 8:80 -n 5 -k 4 -i 1 -x 0",
    },
    Spec {
        name: "allgather_k",
        title: "All-gather with the k-concurrency multicast (mcast2) against k",
        quantity: "Average latency per call",
        kind: Kind::AgainstK,
        ranks: Ranks::Near(4),
        program: Program::Bench("allgather"),
        osu: false,
        in_quick: true,
        column: None,
        full: "-m 65536:65536 -i 100 -x 10",
        quick: "-m 4096:4096 -i 20 -x 2",
    },
    Spec {
        name: "applications",
        title: "Applications: speed-up over 1 rank (matmul, spmv, jacobi)",
        quantity: "Speed-up over 1 rank",
        kind: Kind::Speedup,
        ranks: Ranks::OneAndEach,
        program: Program::Apps,
        osu: false,
        in_quick: false,
        column: None,
        full: "",
        quick: "",
    },
];

/// The spec of a test name.
pub fn spec(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.name == name)
}

/// The tests named in a comma-separated list, in suite order; for `None` every test, or
/// with `quick` those of the quick suite.
pub fn select(names: Option<&str>, quick: bool) -> Result<Vec<&'static Spec>, String> {
    let Some(names) = names else {
        return Ok(SPECS.iter().filter(|s| s.in_quick || !quick).collect());
    };
    let wanted: Vec<&str> = names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    if let Some(bad) = wanted.iter().find(|n| spec(n).is_none()) {
        let all: Vec<&str> = SPECS.iter().map(|s| s.name).collect();
        return Err(format!(
            "unknown test {bad:?} (the suite has: {})",
            all.join(", ")
        ));
    }
    Ok(SPECS.iter().filter(|s| wanted.contains(&s.name)).collect())
}

/// Parses `--np`: a comma-separated list of rank counts, each at least 2.
pub fn parse_np(s: &str) -> Result<Vec<usize>, String> {
    let mut np = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let p: usize = part
            .parse()
            .map_err(|e| format!("bad rank count {part:?}: {e}"))?;
        if p < 2 {
            return Err(format!("rank count {p}: every test needs at least 2 ranks"));
        }
        if !np.contains(&p) {
            np.push(p);
        }
    }
    if np.is_empty() {
        return Err("no rank count given".into());
    }
    np.sort_unstable();
    Ok(np)
}

/// What one job runs under the launcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// `phalanx-bench <test>`.
    Bench(&'static str),
    /// An example program, `<launcher dir>/examples/<name>`.
    Example(&'static str),
}

/// One job of the suite: `phalanx run -n p <program> <args>` in the report's environment
/// changed by `env`.
#[derive(Debug, Clone)]
pub struct Step {
    /// The test.
    pub spec: &'static Spec,
    /// Ranks.
    pub p: usize,
    /// What runs.
    pub job: Job,
    /// Arguments after the program (after the test name for `phalanx-bench`).
    pub args: Vec<String>,
    /// Variables set (`Some`) or removed (`None`) for the job.
    pub env: Vec<(&'static str, Option<String>)>,
    /// What tells this step's rows from the test's others at the same p: `k=4` or
    /// `default` (allgather_k), the example's name (applications); empty for the rest.
    pub variant: String,
}

impl Step {
    /// A short name: `allreduce p=4`, `allgather_k k=2 p=4`.
    pub fn label(&self) -> String {
        if self.variant.is_empty() {
            format!("{} p={}", self.spec.name, self.p)
        } else {
            format!("{} {} p={}", self.spec.name, self.variant, self.p)
        }
    }

    /// A file-name stem: `allreduce-p4`, `allgather_k-k2-p4`, `applications-matmul-p1`.
    pub fn stem(&self) -> String {
        let variant: String = self
            .variant
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if variant.is_empty() {
            format!("{}-p{}", self.spec.name, self.p)
        } else {
            format!("{}-{variant}-p{}", self.spec.name, self.p)
        }
    }
}

/// The rank counts of `ranks` given `--np` (sorted, at least one).
pub fn rank_counts(ranks: Ranks, np: &[usize]) -> Vec<usize> {
    match ranks {
        Ranks::Pair => vec![2],
        Ranks::Each => np.to_vec(),
        Ranks::OneAndEach => std::iter::once(1).chain(np.iter().copied()).collect(),
        Ranks::Near(p) => {
            let below = np.iter().copied().filter(|&q| q <= p).max();
            vec![below.or_else(|| np.first().copied()).unwrap_or(p)]
        }
    }
}

/// The jobs for `tests` at the rank counts `np`, test by test in suite order (then by
/// example, then by p; allgather_k by k, the default algorithm last).
pub fn steps(tests: &[&'static Spec], np: &[usize], quick: bool) -> Vec<Step> {
    let mut steps = Vec::new();
    for &spec in tests {
        let ps = rank_counts(spec.ranks, np);
        match (spec.program, spec.kind) {
            (Program::Apps, _) => {
                for app in &APPS {
                    for &p in &ps {
                        steps.push(Step {
                            spec,
                            p,
                            job: Job::Example(app.name),
                            args: app.args(quick),
                            env: Vec::new(),
                            variant: app.name.to_string(),
                        });
                    }
                }
            }
            (Program::Bench(test), Kind::AgainstK) => {
                for &p in &ps {
                    for k in KS.iter().copied().map(Some).chain([None]) {
                        let (env, variant) = match k {
                            Some(k) => (
                                vec![
                                    (ALLGATHER_VARS[0], Some("mcast2".to_string())),
                                    (ALLGATHER_VARS[1], Some(k.to_string())),
                                ],
                                k_variant(k),
                            ),
                            None => (
                                ALLGATHER_VARS.iter().map(|v| (*v, None)).collect(),
                                DEFAULT_VARIANT.to_string(),
                            ),
                        };
                        steps.push(Step {
                            spec,
                            p,
                            job: Job::Bench(test),
                            args: spec.args(quick),
                            env,
                            variant,
                        });
                    }
                }
            }
            (Program::Bench(test), _) => {
                for &p in &ps {
                    steps.push(Step {
                        spec,
                        p,
                        job: Job::Bench(test),
                        args: spec.args(quick),
                        env: Vec::new(),
                        variant: String::new(),
                    });
                }
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{Cli, Test};
    use clap::Parser;

    #[test]
    fn every_spec_is_a_benchmark_with_valid_arguments() {
        for spec in &SPECS {
            let Program::Bench(test) = spec.program else {
                continue;
            };
            for quick in [false, true] {
                let mut argv = vec!["phalanx-bench".to_string(), test.to_string()];
                argv.extend(spec.args(quick));
                let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                assert!(!matches!(cli.test, Test::Calibrate | Test::Multisend));
                assert_eq!(spec.kind == Kind::Barrier, cli.test == Test::Barrier);
            }
        }
    }

    #[test]
    fn selection_and_expansion() {
        assert_eq!(parse_np("8, 2,4,2").unwrap(), vec![2, 4, 8]);
        assert!(parse_np("1").is_err() && parse_np("x").is_err() && parse_np("").is_err());
        let tests = select(Some("bcast,latency"), false).unwrap();
        assert_eq!(
            tests.iter().map(|s| s.name).collect::<Vec<_>>(),
            ["latency", "bcast"]
        );
        assert!(select(Some("nope"), false).unwrap_err().contains("nope"));
        let steps = steps(&tests, &[2, 4], true);
        let labels: Vec<String> = steps.iter().map(Step::label).collect();
        assert_eq!(labels, ["latency p=2", "bcast p=2", "bcast p=4"]);
        assert_eq!(select(None, false).unwrap().len(), SPECS.len());
        let quick = select(None, true).unwrap();
        assert!(quick.iter().any(|s| s.name == "allgather_k"));
        assert!(!quick.iter().any(|s| s.name == "applications"));
        assert_eq!(select(Some("applications"), true).unwrap().len(), 1);
    }

    #[test]
    fn applications_and_allgather_k() {
        assert_eq!(rank_counts(Ranks::OneAndEach, &[2, 4, 8]), [1, 2, 4, 8]);
        assert_eq!(rank_counts(Ranks::Near(4), &[2, 4, 8]), [4]);
        assert_eq!(rank_counts(Ranks::Near(4), &[2, 3, 8]), [3]);
        assert_eq!(rank_counts(Ranks::Near(4), &[2]), [2]);
        assert_eq!(rank_counts(Ranks::Near(4), &[8, 16]), [8]);
        let tests = select(Some("applications,allgather_k"), false).unwrap();
        let steps = steps(&tests, &[2, 4], false);
        let labels: Vec<String> = steps.iter().map(Step::label).collect();
        assert_eq!(
            labels,
            [
                "allgather_k k=1 p=4",
                "allgather_k k=2 p=4",
                "allgather_k k=4 p=4",
                "allgather_k k=8 p=4",
                "allgather_k default p=4",
                "applications matmul p=1",
                "applications matmul p=2",
                "applications matmul p=4",
                "applications spmv p=1",
                "applications spmv p=2",
                "applications spmv p=4",
                "applications jacobi p=1",
                "applications jacobi p=2",
                "applications jacobi p=4",
            ]
        );
        let k2 = &steps[1];
        assert_eq!(k2.job, Job::Bench("allgather"));
        assert_eq!(k2.stem(), "allgather_k-k2-p4");
        assert_eq!(
            k2.env,
            [
                ("PHALANX_COLL_ALLGATHER", Some("mcast2".to_string())),
                ("PHALANX_COLL_ALLGATHER_K", Some("2".to_string()))
            ]
        );
        assert_eq!(k2.args, ["-m", "65536:65536", "-i", "100", "-x", "10"]);
        assert!(steps[4].env.iter().all(|(_, v)| v.is_none()));
        assert_eq!(steps[4].env.len(), 2);
        assert_eq!(variant_k(&k2.variant), Some(2));
        assert_eq!(variant_k(&steps[4].variant), None);
        assert_eq!(steps[5].job, Job::Example("matmul"));
        assert_eq!(steps[5].args, ["512", "3"]);
        assert_eq!(steps[5].stem(), "applications-matmul-p1");
    }
}
