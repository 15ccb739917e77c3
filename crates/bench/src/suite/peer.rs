//! `--peer openmpi`: the suite's OSU tests on Open MPI, through `bench/compare.sh`.
//!
//! compare.sh runs the same C source (`bench/c/osu_like.c`) built with `phalanx cc` and
//! with Open MPI's `mpicc`, in alternating pairs (installing Open MPI if `mpirun` is
//! missing), and `bench/compare.py` writes the medians to `summary.json`. One invocation
//! per rank count ([`invocations`]): the point-to-point tests at p = 2, the collectives at
//! every p; each gets the suite's own arguments (`ARGS_<test>`), `RUST=0` (the report
//! measures `phalanx-bench` itself), `RUN_TIMEOUT` = the step limit and `RESULTS_DIR`
//! under the report's directory. Both runtimes use the same medium ([`Transport`]): shared
//! memory by default (Open MPI's `vader,self`, phalanx's `shm`), TCP against phalanx's UDP
//! with `PEER_BTL=tcp,self`; the report runs its own `phalanx-bench` jobs on phalanx's
//! side of that choice. Everything else in the environment reaches compare.sh untouched
//! (`NETNS`, `SKIP_BUILD`, `PHALANX_*`, ...). [`import`] turns a summary into rows of
//! runtime [`PHALANX_C`] and [`OPENMPI`].

use super::plan::{Ranks, Spec};
use super::results::{Row, OPENMPI, PHALANX_C};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// compare.sh's time to build (cargo, mpicc), on top of its runs' limits.
const BUILD_ALLOWANCE: Duration = Duration::from_secs(1800);

/// The medium of both runtimes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transport {
    /// `PHALANX_TRANSPORT` of phalanx's jobs (`shm`, `udp`).
    pub phalanx: String,
    /// Open MPI's BTLs (`PEER_BTL`).
    pub btl: String,
}

impl Transport {
    /// `$PEER_BTL` (default `vader,self`: shared memory, as phalanx's jobs on one host use
    /// by default) and `$PHALANX_TRANSPORT`, else the one that matches the BTLs (as
    /// compare.sh chooses: `udp` against TCP, `shm` otherwise).
    pub fn from_env() -> Transport {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let btl = var("PEER_BTL").unwrap_or_else(|| "vader,self".into());
        let phalanx = var("PHALANX_TRANSPORT")
            .unwrap_or_else(|| if btl.contains("tcp") { "udp" } else { "shm" }.into());
        Transport { phalanx, btl }
    }
}

/// One compare.sh invocation.
#[derive(Debug)]
pub struct Invocation {
    /// Ranks (`NP`).
    pub p: usize,
    /// The tests (`TESTS`).
    pub tests: Vec<&'static Spec>,
    /// Its `RESULTS_DIR`.
    pub dir: PathBuf,
}

impl Invocation {
    /// Single runs it makes: every test, `pairs` times, on both runtimes.
    pub fn runs(&self, pairs: usize) -> usize {
        self.tests.len() * pairs * 2
    }
}

/// The invocations for the OSU tests among `tests` at the rank counts `np`, their results
/// under `out/peer/np<p>`.
pub fn invocations(tests: &[&'static Spec], np: &[usize], out: &Path) -> Vec<Invocation> {
    let mut ps: Vec<usize> = np.to_vec();
    if tests.iter().any(|s| s.osu && s.ranks == Ranks::Pair) && !ps.contains(&2) {
        ps.insert(0, 2);
    }
    ps.into_iter()
        .map(|p| Invocation {
            p,
            tests: tests
                .iter()
                .copied()
                .filter(|s| s.osu && (s.ranks == Ranks::Each || p == 2))
                .collect(),
            dir: out.join("peer").join(format!("np{p}")),
        })
        .filter(|inv| !inv.tests.is_empty())
        .collect()
}

/// The command of one invocation; `skip_build` once an earlier one has built.
pub fn command(
    repo: &Path,
    inv: &Invocation,
    transport: &Transport,
    quick: bool,
    pairs: usize,
    run_timeout: Duration,
    skip_build: bool,
) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(repo.join("bench/compare.sh"))
        .current_dir(repo)
        .env(
            "TESTS",
            inv.tests
                .iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(" "),
        )
        .env("NP", inv.p.to_string())
        .env("PAIRS", pairs.to_string())
        .env("RUST", "0")
        .env("RUN_TIMEOUT", run_timeout.as_secs().max(1).to_string())
        .env("RESULTS_DIR", &inv.dir)
        .env("PEER_BTL", &transport.btl)
        .env("PHALANX_TRANSPORT", &transport.phalanx);
    for spec in &inv.tests {
        cmd.env(format!("ARGS_{}", spec.name), spec.args(quick).join(" "));
    }
    // compare.sh runs <CARGO_TARGET_DIR>/release/*: the binaries beside this one when
    // this is a release build.
    if std::env::var_os("CARGO_TARGET_DIR").is_none() {
        if let Some(target) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
            .filter(|d| d.file_name().is_some_and(|n| n == "release"))
            .and_then(|d| d.parent().map(Path::to_path_buf))
        {
            cmd.env("CARGO_TARGET_DIR", target);
        }
    }
    if skip_build {
        cmd.env("SKIP_BUILD", "1");
    }
    cmd
}

/// The time limit of one invocation: every run at its limit, plus the build.
pub fn limit(inv: &Invocation, pairs: usize, run_timeout: Duration) -> Duration {
    BUILD_ALLOWANCE + (run_timeout + Duration::from_secs(5)) * inv.runs(pairs) as u32
}

/// True for compare.sh's line announcing a run (`== bcast pair 1/3: Open MPI`).
pub fn is_run_start(line: &str) -> bool {
    line.starts_with("== ") && line.contains(" pair ")
}

/// One entry of compare.py's `summary.json` (the fields the report reads).
#[derive(Debug, Deserialize)]
struct Summary {
    test: String,
    size: usize,
    unit: String,
    phalanx_median: Option<f64>,
    ompi_median: Option<f64>,
}

/// The medians of an invocation's `summary.json` as rows.
pub fn import(inv: &Invocation) -> Result<Vec<Row>, String> {
    let path = inv.dir.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let entries: Vec<Summary> =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = Vec::new();
    for e in entries {
        let unit = super::table::unit_of(&e.unit);
        for (runtime, value) in [(PHALANX_C, e.phalanx_median), (OPENMPI, e.ompi_median)] {
            if let Some(value) = value {
                rows.push(Row {
                    test: e.test.clone(),
                    p: inv.p,
                    size: e.size,
                    value,
                    unit: unit.clone(),
                    runtime: runtime.into(),
                    variant: String::new(),
                });
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::super::plan::select;
    use super::*;

    #[test]
    fn invocations_per_rank_count() {
        let tests = select(Some("latency,bcast,ring"), false).unwrap();
        let invs = invocations(&tests, &[4, 8], Path::new("/r"));
        let got: Vec<(usize, Vec<&str>)> = invs
            .iter()
            .map(|i| (i.p, i.tests.iter().map(|s| s.name).collect()))
            .collect();
        assert_eq!(
            got,
            [
                (2, vec!["latency", "bcast"]),
                (4, vec!["bcast"]),
                (8, vec!["bcast"])
            ]
        );
        assert_eq!(invs[0].dir, Path::new("/r/peer/np2"));
        assert_eq!(invs[0].runs(3), 12);
        assert!(is_run_start("== bcast pair 1/3: Open MPI"));
        assert!(!is_run_start("compare.sh: installing Open MPI"));
    }

    #[test]
    fn summary_rows() {
        let dir = std::env::temp_dir().join(format!("phalanx-peer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("summary.json"),
            r#"[{"test": "latency", "size": 1, "unit": "Latency (us)", "phalanx_median": 0.5,
                 "ompi_median": 1.0, "ratio": 0.5, "np": 2},
                {"test": "barrier", "size": 0, "unit": "Avg Latency(us)",
                 "phalanx_median": null, "ompi_median": 2.0}]"#,
        )
        .unwrap();
        let inv = Invocation {
            p: 2,
            tests: vec![],
            dir: dir.clone(),
        };
        let rows = import(&inv).unwrap();
        let got: Vec<(&str, usize, f64, &str, &str)> = rows
            .iter()
            .map(|r| {
                (
                    r.test.as_str(),
                    r.size,
                    r.value,
                    r.unit.as_str(),
                    r.runtime.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("latency", 1, 0.5, "us", PHALANX_C),
                ("latency", 1, 1.0, "us", OPENMPI),
                ("barrier", 0, 2.0, "us", OPENMPI)
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
