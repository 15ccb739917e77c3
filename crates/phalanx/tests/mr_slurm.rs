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

/// Waits (bounded) until job `id` has left the queue.
fn wait_for(id: &str) {
    let t = std::time::Instant::now();
    loop {
        let q = Command::new("squeue")
            .args(["-h", "-o", "%i", "-j", id])
            .output()
            .expect("squeue runs");
        if !String::from_utf8_lossy(&q.stdout).contains(id) {
            return;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let _ = Command::new("scancel").arg(id).status();
            panic!("job {id} did not finish");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
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

/// Two jobs that each need the whole cluster, gang-scheduled by Slurm (`PreemptMode=
/// GANG`, 5 s slices: SIGTSTP, SIGSTOP, SIGCONT): both are suspended and resumed and
/// finish with correct results; their ranks halt their links on SIGTSTP, move their
/// timers past the stop on SIGCONT and exchange "running again" with their peers before
/// sending (the counters are printed for the record).
#[test]
fn mr_slurm_gang_suspension_keeps_jobs_correct() {
    if !slurm() {
        return;
    }
    let stress = example("stress").display().to_string();
    let dir = std::env::temp_dir().join(format!("phalanx-slurm-gang-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut jobs = Vec::new();
    for seed in ["1", "2"] {
        let out = dir.join(format!("job-{seed}.out"));
        // Over UDP, where a stop without halting would show as retransmissions. 40
        // rounds: each job spans several of Slurm's 5 s slices after its start-up, so
        // some suspension finds its ranks mid-traffic (with 24, two CI runs in a row
        // saw every suspension land before a safe point: timers moved, no exchange). The
        // script sleeps first: the second job is suspended the moment it is allocated,
        // and an srun that meets a suspended job backs off for up to minutes ("step
        // creation temporarily disabled"); after the sleep srun runs inside a slice.
        let wrap = format!(
            "sleep 2; PHALANX_TRANSPORT=udp PHALANX_STATS=1 srun --mpi=pmi2 {stress} 40 200 {seed}"
        );
        let o = Command::new("sbatch")
            .args(["--parsable", "-N", "4", "-n", "8", "-o"])
            .arg(&out)
            .args(["--wrap", &wrap])
            .output()
            .expect("sbatch runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
        jobs.push((id, out));
    }
    let t = std::time::Instant::now();
    let mut suspended = false;
    let mut resumes = 0;
    loop {
        let q = Command::new("squeue")
            .args(["-h", "-o", "%i %T"])
            .output()
            .expect("squeue runs");
        let q = String::from_utf8_lossy(&q.stdout).to_string();
        suspended |= q.contains("SUSPENDED");
        if !jobs.iter().any(|(id, _)| q.contains(&format!("{id} "))) {
            break;
        }
        if t.elapsed() > Duration::from_secs(240) {
            for (id, _) in &jobs {
                let _ = Command::new("scancel").arg(id).status();
            }
            panic!("the jobs did not finish: {q}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for (id, out) in &jobs {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        assert_eq!(
            text.matches("all checksums ok").count(),
            8,
            "job {id}:\n{text}"
        );
        let sum = |key: &str| -> u64 {
            text.split_whitespace()
                .filter_map(|w| w.strip_prefix(key))
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        };
        eprintln!(
            "job {id}: over its 8 ranks {} datagrams, {} retransmitted, {} timeouts, \
             {} resume announcements, {} peers silent after a resume",
            sum("sent="),
            sum("retransmits="),
            sum("timeouts="),
            sum("resume_sent="),
            sum("resume_missing=")
        );
        resumes += sum("resume_sent=");
    }
    assert!(suspended, "Slurm never suspended either job");
    // A suspension halted the ranks and their resume exchange ran.
    assert!(resumes > 0, "no rank ran a resume exchange");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Inside an allocation (`sbatch`), `phalanx run -n 8 prog` starts its ranks through
/// srun with PMI-2 and exits with the step's code; outside one, `--launcher slurm` is
/// a clear error.
#[test]
fn mr_slurm_phalanx_run_inside_an_allocation_uses_srun() {
    if !slurm() {
        return;
    }
    let p = phalanx().display().to_string();
    let (stress, crash) = (
        example("stress").display().to_string(),
        example("crash").display().to_string(),
    );
    let dir = std::env::temp_dir().join(format!("phalanx-slurm-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let batch = |name: &str, script: &str| -> (String, String) {
        let out = dir.join(format!("{name}.out"));
        let o = Command::new("sbatch")
            .args(["--parsable", "-N", "4", "-n", "8", "-o"])
            .arg(&out)
            .args(["--wrap", script])
            .output()
            .expect("sbatch runs");
        let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
        wait_for(&id);
        (
            String::from_utf8_lossy(&o.stderr).into_owned(),
            std::fs::read_to_string(&out).unwrap_or_default(),
        )
    };
    let (err, out) = batch(
        "ok",
        &format!("{p} run -n 8 --tag-output {stress} 5 100 1; echo exit=$?"),
    );
    assert_eq!(out.matches("all checksums ok").count(), 8, "{err}\n{out}");
    assert!(out.contains("exit=0"), "{out}");
    // A rank that fails ends the step; phalanx run exits non-zero.
    let (err, out) = batch("fail", &format!("{p} run -n 4 {crash} exit3; echo exit=$?"));
    assert!(
        out.contains("exit=") && !out.contains("exit=0"),
        "{err}\n{out}"
    );
    // Outside an allocation, Slurm cannot be asked for.
    let mut cmd = Command::new(phalanx());
    cmd.args(["run", "--launcher", "slurm", "-n", "2", &stress])
        .env_remove("SLURM_JOB_ID");
    let r = run_cmd(cmd, Duration::from_secs(30));
    assert!(
        !r.ok() && r.stderr.contains("not inside a Slurm allocation"),
        "{}",
        r.dump()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
