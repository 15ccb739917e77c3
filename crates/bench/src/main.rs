//! `phalanx-bench`: OSU-style micro-benchmarks for phalanx.
//!
//! Run under the launcher; the point-to-point tests need exactly two ranks, the
//! collectives any number:
//!
//! ```text
//! phalanx run -n 2 phalanx-bench latency [-m [min:]max] [-i iters] [-x warmup]
//! phalanx run -n 2 phalanx-bench bw      [-m [min:]max] [-i iters] [-x warmup] [-W window]
//! phalanx run -n 2 phalanx-bench bibw    [-m [min:]max] [-i iters] [-x warmup] [-W window]
//! phalanx run -n P phalanx-bench mbw_mr  [-m [min:]max] [-i iters] [-x warmup] [-W window]
//! phalanx run -n P phalanx-bench bcast|allgather|gather|scatter|reduce|allreduce|alltoall
//!                                        [-m [min:]max] [-i iters] [-x warmup]
//! phalanx run -n P phalanx-bench barrier [-i iters] [-x warmup]
//! phalanx run -n P phalanx-bench ring  [--touch] [-m [min:]max] [-i laps] [-x warmup]
//! phalanx run -n P phalanx-bench chain [--touch] [-m [min:]max] [-i msgs] [-x warmup] [-W window]
//! phalanx run -n P phalanx-bench flood [-n messages] [-k fragments] [-m [min:]max] [-i runs] [-x warmup]
//! phalanx-bench calibrate [--save]       (seed 002 cost lines and λ; no launcher)
//! phalanx-bench multisend [-m max]       (seed 002 multi-send vs separate sends; no launcher)
//! ```
//!
//! ring, chain and flood are the seed-003 experiments (see `seed003.rs`); their sizes are
//! 8-byte words (1 … 2000), and ring and flood print `# Words` in the first column.
//!
//! Rank 0 prints an OSU-shaped table (`# Size  Latency (us)`, `# Size  Bandwidth (MB/s)`,
//! `# Size  Avg Latency(us)`, mbw_mr `# Size  MB/s  Messages/s`; barrier prints
//! `# Avg Latency(us)` and one value) that `bench/compare.py` parses next to the C
//! benchmark's output under Open MPI.
//!
//! # `report`: a whole suite, plots and a page
//!
//! ```text
//! phalanx-bench report [--peer openmpi] [--out DIR] [--quick] [--np 2,4,8]
//!                      [--tests latency,bcast,...] [--pairs N] [--step-timeout S] [--no-plots]
//! ```
//!
//! Runs without the launcher and starts real jobs itself, one per test and rank count:
//! `phalanx run -n P <this program> TEST -m a:b -i N -x W` (the launcher next to this
//! program, else on `$PATH`). The suite: latency, bw and mbw_mr (message rate) at p = 2;
//! bcast, allgather, gather, scatter, reduce, allreduce, alltoall and barrier, and the
//! seed-003 ring, chain and flood at every p of `--np` (default 2,4,8); `allgather_k`,
//! the all-gather of 64 KiB per rank with `PHALANX_COLL_ALLGATHER=mcast2` at k = 1, 2, 4,
//! 8 and with the default algorithm, at p = 4; `applications`, the examples matmul, spmv
//! and jacobi (`target/<profile>/examples/`, built with `cargo build --release -p phalanx
//! --examples`) at p = 1 and every p of `--np`, each printing its speed-up over 1 rank.
//! `--quick` is a tiny suite (sizes to 4 KiB, a few iterations, p = 2, no applications)
//! of seconds. `--peer openmpi` also
//! runs the OSU tests through `bench/compare.sh` (the same C source on phalanx and on Open
//! MPI, medians of `--pairs` alternating runs) and adds ratio plots. DIR (default
//! `bench/results/report-<UTC time>`) gets `results.csv`/`results.json` (test, p, size,
//! value, unit, runtime, variant), an SVG and a PNG per test (log-scaled size axis; log
//! value axis for times; speed-up against p with the ideal; time against k), `index.html` with every plot and the headline numbers, and each job's raw
//! output. Every job has a time limit (`--step-timeout`), is stopped with its ranks on it
//! or on Ctrl-C, and a failed job is named and skipped. PNG text needs a TrueType font
//! (DejaVu Sans, `fonts-dejavu-core`, or `PHALANX_REPORT_FONT`). See `suite/mod.rs`.

mod bw;
mod coll;
mod latency;
mod mbw_mr;
mod options;
mod report;
mod seed003;
mod suite;
mod sync;
mod transport_cost;

use clap::Parser;
use options::{Cli, Test};
use phalanx::traits::*;

fn main() {
    // `report` has options of its own and runs no benchmark in this process.
    if std::env::args_os().nth(1).is_some_and(|a| a == "report") {
        std::process::exit(suite::main(std::env::args_os().skip(1)));
    }
    let cli = Cli::parse();
    // Seed 002's transport measurements: one process, no launcher.
    if matches!(cli.test, Test::Calibrate | Test::Multisend) {
        let r = if cli.test == Test::Calibrate {
            transport_cost::calibrate(cli.save)
        } else {
            transport_cost::multisend(cli.sizes.map_or(16384, |s| s.max()))
        };
        if let Err(e) = r {
            eprintln!("phalanx-bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    let plan = cli.plan();
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    if cli.test.is_point_to_point() && world.size() != 2 {
        if world.rank() == 0 {
            eprintln!("phalanx-bench: this test requires exactly two processes");
        }
        std::process::exit(1);
    }
    if cli.test == Test::MbwMr && world.size() < 2 {
        eprintln!("phalanx-bench: this test requires at least two processes");
        std::process::exit(1);
    }
    match cli.test {
        Test::Latency => latency::run(&world, &plan),
        Test::Bw => bw::run(&world, &plan),
        Test::Bibw => bw::run_bibw(&world, &plan),
        Test::MbwMr => mbw_mr::run(&world, &plan),
        test if test.is_seed003() => seed003::run(&world, test, &plan),
        test => coll::run(&world, test, &plan),
    }
}
