//! The suite `phalanx-bench report` runs: which tests, at which rank counts, with which
//! arguments.
//!
//! Every test of the suite is a [`Spec`] in [`SPECS`]: the point-to-point tests (latency,
//! bw, mbw_mr) run at p = 2, the collectives and the seed-003 experiments at every p of
//! `--np`. The full suite's arguments are `bench/compare.sh`'s short defaults (sizes to
//! 1 MiB, 200 calls per collective size) and `bench/seed003.sh`'s; `--quick` takes sizes
//! to 4 KiB and a few iterations, seconds in all. [`steps`] expands a selection into the
//! ordered list of jobs; it is pure (no I/O).

/// What a test's values are: it decides the plot's axes and which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A time per operation against message size (lower is better; log–log plot).
    Time,
    /// A rate against message size (higher is better; log-x plot).
    Rate,
    /// One time per rank count, no size (barrier; plotted against p).
    Barrier,
}

/// At which rank counts a test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranks {
    /// p = 2 only.
    Pair,
    /// Every p of `--np`.
    Each,
}

/// One test of the suite.
#[derive(Debug)]
pub struct Spec {
    /// The `phalanx-bench` (and `osu_like`) test name.
    pub name: &'static str,
    /// A title for plots and the page.
    pub title: &'static str,
    /// What the value is, for the value axis (`Hop latency`).
    pub quantity: &'static str,
    /// What its values are.
    pub kind: Kind,
    /// Where it runs.
    pub ranks: Ranks,
    /// Also a test of `bench/c/osu_like.c`, so `bench/compare.sh` can run it on Open MPI.
    pub osu: bool,
    /// The column read from a table of several (mbw_mr: the message rate).
    pub column: Option<&'static str>,
    full: &'static str,
    quick: &'static str,
}

impl Spec {
    /// The benchmark's arguments after the test name.
    pub fn args(&self, quick: bool) -> Vec<String> {
        let args = if quick { self.quick } else { self.full };
        args.split_whitespace().map(String::from).collect()
    }
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
        osu: true,
        column: None,
        full: COLL_FULL,
        quick: COLL_QUICK,
    }
}

/// Every test of the suite, in the order run and shown.
pub const SPECS: [Spec; 14] = [
    Spec {
        name: "latency",
        title: "Ping-pong latency (one way)",
        quantity: "One-way latency",
        kind: Kind::Time,
        ranks: Ranks::Pair,
        osu: true,
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
        osu: true,
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
        osu: true,
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
        osu: true,
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
        osu: false,
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
        osu: false,
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
        osu: false,
        column: None,
        full: "-n 200 -k 64 -i 1 -x 1",
        quick: "-m 8:80 -n 5 -k 4 -i 1 -x 0",
    },
];

/// The spec of a test name.
pub fn spec(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.name == name)
}

/// The tests named in a comma-separated list (all of them for `None`), in suite order.
pub fn select(names: Option<&str>) -> Result<Vec<&'static Spec>, String> {
    let Some(names) = names else {
        return Ok(SPECS.iter().collect());
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

/// One job of the suite: `phalanx run -n p phalanx-bench <test> <args>`.
#[derive(Debug, Clone)]
pub struct Step {
    /// The test.
    pub spec: &'static Spec,
    /// Ranks.
    pub p: usize,
    /// Arguments after the test name.
    pub args: Vec<String>,
}

impl Step {
    /// A short name: `allreduce p=4`.
    pub fn label(&self) -> String {
        format!("{} p={}", self.spec.name, self.p)
    }

    /// A file-name stem: `allreduce-p4`.
    pub fn stem(&self) -> String {
        format!("{}-p{}", self.spec.name, self.p)
    }
}

/// The jobs for `tests` at the rank counts `np`, test by test in suite order.
pub fn steps(tests: &[&'static Spec], np: &[usize], quick: bool) -> Vec<Step> {
    let mut steps = Vec::new();
    for &spec in tests {
        let ps: &[usize] = match spec.ranks {
            Ranks::Pair => &[2],
            Ranks::Each => np,
        };
        for &p in ps {
            steps.push(Step {
                spec,
                p,
                args: spec.args(quick),
            });
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
            for quick in [false, true] {
                let mut argv = vec!["phalanx-bench".to_string(), spec.name.to_string()];
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
        let tests = select(Some("bcast,latency")).unwrap();
        assert_eq!(
            tests.iter().map(|s| s.name).collect::<Vec<_>>(),
            ["latency", "bcast"]
        );
        assert!(select(Some("nope")).unwrap_err().contains("nope"));
        let steps = steps(&tests, &[2, 4], true);
        let labels: Vec<String> = steps.iter().map(Step::label).collect();
        assert_eq!(labels, ["latency p=2", "bcast p=2", "bcast p=4"]);
        assert_eq!(select(None).unwrap().len(), SPECS.len());
    }
}
