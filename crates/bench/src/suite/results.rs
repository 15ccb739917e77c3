//! The report's measurements as rows, and the files that hold them.
//!
//! A [`Row`] is one figure: test, ranks, message size in bytes (0 for barrier and the
//! applications; seed-003 words converted to bytes), value, unit, the runtime that
//! produced it (see [`PHALANX`], [`PHALANX_C`], [`OPENMPI`]) and a variant for the tests
//! with more than one figure per size and p: `allgather_k`'s `k=1`, `k=2`, ... and
//! `default` (the default algorithm, time in µs), and `applications`' example name (two
//! rows per run: unit [`SPEEDUP`], the speed-up over 1 rank, and unit `s`, the parallel
//! time); empty for every other row. `results.csv` has the header
//! `test,p,size,value,unit,runtime,variant` and one line per row; `results.json` is an
//! array of the same rows as objects (`variant` may be missing when reading: empty). No
//! field holds a comma, a quote or a newline (test names, units, runtimes and variants are
//! fixed words), so the CSV needs no quoting.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;

/// `phalanx-bench` itself: the loops through phalanx's Rust API (one run per figure, or
/// the median of `bench/compare.sh`'s runs).
pub const PHALANX: &str = "phalanx";
/// `bench/c/osu_like.c` built with `phalanx cc` (median of `bench/compare.sh`'s runs).
pub const PHALANX_C: &str = "phalanx-c";
/// The same C source built with Open MPI's `mpicc` (median of `bench/compare.sh`'s runs).
pub const OPENMPI: &str = "openmpi";

/// The unit of a speed-up (sequential time / parallel time).
pub const SPEEDUP: &str = "speed-up";

/// The runtimes in the order plots and tables show them.
pub const RUNTIME_ORDER: [&str; 3] = [PHALANX, PHALANX_C, OPENMPI];

/// One figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Test name (`latency`, `allreduce`, ...).
    pub test: String,
    /// Ranks.
    pub p: usize,
    /// Message size in bytes (0: no size, barrier).
    pub size: usize,
    /// The measurement.
    pub value: f64,
    /// Its unit (`us`, `MB/s`, `Messages/s`, `ms`).
    pub unit: String,
    /// Which runtime and program measured it.
    pub runtime: String,
    /// `k=4`, `default` (allgather_k), the example (applications); else empty.
    #[serde(default)]
    pub variant: String,
}

/// Writes `results.csv` and `results.json` into `dir`.
pub fn write(dir: &Path, rows: &[Row]) -> io::Result<()> {
    let mut csv = String::from("test,p,size,value,unit,runtime,variant\n");
    for r in rows {
        csv.push_str(&format!(
            "{},{},{},{},{},{},{}\n",
            r.test, r.p, r.size, r.value, r.unit, r.runtime, r.variant
        ));
    }
    std::fs::write(dir.join("results.csv"), csv)?;
    let json = serde_json::to_string_pretty(rows).map_err(io::Error::other)?;
    std::fs::write(dir.join("results.json"), json + "\n")
}

/// A display name of a runtime.
pub fn runtime_name(runtime: &str) -> &str {
    match runtime {
        PHALANX => "phalanx (Rust API)",
        PHALANX_C => "phalanx (C, osu_like.c)",
        OPENMPI => "Open MPI (C, osu_like.c)",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_round_trip() {
        let dir = std::env::temp_dir().join(format!("phalanx-results-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rows = vec![Row {
            test: "latency".into(),
            p: 2,
            size: 8,
            value: 0.25,
            unit: "us".into(),
            runtime: PHALANX.into(),
            variant: String::new(),
        }];
        write(&dir, &rows).unwrap();
        let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
        assert_eq!(
            csv,
            "test,p,size,value,unit,runtime,variant\nlatency,2,8,0.25,us,phalanx,\n"
        );
        let json = std::fs::read_to_string(dir.join("results.json")).unwrap();
        assert_eq!(serde_json::from_str::<Vec<Row>>(&json).unwrap(), rows);
        let old = r#"[{"test":"bw","p":2,"size":1,"value":1.5,"unit":"MB/s","runtime":"phalanx"}]"#;
        assert_eq!(
            serde_json::from_str::<Vec<Row>>(old).unwrap()[0].variant,
            ""
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
