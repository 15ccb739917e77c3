//! Ranks started by Slurm (`srun --mpi=pmi2`, four emulated nodes on this machine, see
//! `.ci/slurm.sh`): they bootstrap through PMI-2 (or PMI-1 with `PHALANX_PMI=1`), run
//! correctly across the nodes, and a rank that fails ends the step instead of leaving
//! the others waiting; a rank started by Slurm without PMI says how to launch.
//!
//! These tests need the Slurm of `.ci/slurm.sh start`. With `PHALANX_TEST_SLURM=1` (CI
//! sets it) its absence is a failure; without it they say they were skipped and why.

mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

/// Whether the Slurm of `.ci/slurm.sh` answers; panics if CI requires it and it does not.
fn slurm() -> bool {
    let up = Command::new("sinfo")
        .args(["-h", "-o", "%T %D"])
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("idle"));
    let required = std::env::var("PHALANX_TEST_SLURM").is_ok_and(|v| v == "1");
    if !up {
        assert!(
            !required,
            "PHALANX_TEST_SLURM=1 but no Slurm answers (start it with .ci/slurm.sh start)"
        );
        eprintln!("skipped: no Slurm here (.ci/slurm.sh start makes one; CI requires it)");
    }
    up
}

fn srun(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new("srun");
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.env_remove("PHALANX_BOOT");
    run_cmd(cmd, Duration::from_secs(120))
}

#[test]
fn mr_slurm_pmi2_runs_jobs_across_four_nodes() {
    if !slurm() {
        return;
    }
    let stress = example("stress").display().to_string();
    let r = srun(
        &["-N", "4", "-n", "8", "--mpi=pmi2", &stress, "5", "100", "1"],
        &[],
    );
    assert!(r.ok(), "{}", r.dump());
    assert_eq!(
        r.stdout.matches("all checksums ok").count(),
        8,
        "{}",
        r.dump()
    );
    // Over UDP between the ranks too, and the collectives.
    let coll = example("collectives").display().to_string();
    let r = srun(
        &["-N", "4", "-n", "4", "--mpi=pmi2", &coll],
        &[("PHALANX_TRANSPORT", "udp")],
    );
    assert!(r.ok(), "{}", r.dump());
    assert_eq!(
        r.stdout.matches("all collectives ok").count(),
        4,
        "{}",
        r.dump()
    );
}

#[test]
fn mr_slurm_pmi1_simple_works_too() {
    if !slurm() {
        return;
    }
    let ring = example("ring").display().to_string();
    let r = srun(
        &["-N", "2", "-n", "4", "--mpi=pmi2", &ring],
        &[("PHALANX_PMI", "1")],
    );
    assert!(r.ok() && r.stdout.contains("ring: 4 ranks"), "{}", r.dump());
}

#[test]
fn mr_slurm_failures_end_the_step() {
    if !slurm() {
        return;
    }
    let crash = example("crash").display().to_string();
    // A panic, an exit without Finalize, a mismatched collective: the whole step ends
    // (it would otherwise wait for the lost rank until srun's bound here kills it).
    for mode in ["panic", "exit3", "nofinalize", "mismatch"] {
        let r = srun(&["-N", "2", "-n", "4", "--mpi=pmi2", &crash, mode], &[]);
        assert!(!r.ok(), "{mode}: {}", r.dump());
        assert!(
            r.stderr.contains("Killed") || r.stderr.contains("CANCELLED"),
            "{mode}: the step was not ended\n{}",
            r.dump()
        );
    }
    // Started by Slurm without PMI: a clear error saying how to launch.
    let hello = example("hello").display().to_string();
    let r = srun(&["-n", "2", "--mpi=none", &hello], &[]);
    assert!(
        !r.ok() && r.stderr.contains("srun --mpi=pmi2"),
        "{}",
        r.dump()
    );
}
