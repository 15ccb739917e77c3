//! `phalanx run` inside a Slurm allocation (`salloc`, an `sbatch` script): the ranks are
//! started by `srun`, as `mpirun` does, and bootstrap through PMI-2.
//!
//! Contract:
//! * [`in_allocation`]: `SLURM_JOB_ID` is set and `SLURM_STEP_ID` is not (a batch script
//!   or an `salloc` shell, not a task of a step). `phalanx run` then uses Slurm when the
//!   allocation can take its ranks (`-n` at most `SLURM_NTASKS`), unless `--launcher
//!   local` or a hostfile says otherwise; `--launcher slurm` outside an allocation is
//!   an error.
//! * [`run`] starts `srun --mpi=pmi2 --export=ALL --kill-on-bad-exit=1 -n N [--label]
//!   prog args…`
//!   (N defaults to the allocation's `SLURM_NTASKS`) with the `--env` variables added to
//!   its environment (srun passes the environment on), and exits with srun's code.
//!   `--timeout S` ends the step after S seconds (SIGTERM to srun, which cancels it;
//!   SIGKILL after the grace period) with exit 124. Output goes straight through srun
//!   (`--tag-output` becomes srun's `--label`, `N: ` prefixes).

use std::ffi::OsString;
use std::process::Command;
use std::time::{Duration, Instant};

/// Whether this process runs in a Slurm allocation and not inside a step (module docs).
pub fn in_allocation() -> bool {
    std::env::var_os("SLURM_JOB_ID").is_some() && std::env::var_os("SLURM_STEP_ID").is_none()
}

/// The tasks of the allocation (`SLURM_NTASKS`; 0 when unknown).
pub fn allocated_tasks() -> u32 {
    std::env::var("SLURM_NTASKS")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// What `phalanx run` passes on to srun.
pub struct SrunJob {
    pub ranks: Option<u32>,
    pub tag_output: bool,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    pub kill_grace: Duration,
    pub command: Vec<OsString>,
}

/// Runs the job through srun; the exit code (module docs).
pub fn run(job: SrunJob) -> i32 {
    let ranks = job.ranks.or_else(|| {
        std::env::var("SLURM_NTASKS")
            .ok()
            .and_then(|n| n.trim().parse().ok())
    });
    let Some(ranks) = ranks else {
        eprintln!("phalanx: -n N is required (the allocation does not say SLURM_NTASKS)");
        return 2;
    };
    let mut cmd = Command::new("srun");
    cmd.arg("--mpi=pmi2")
        .arg("--export=ALL")
        .arg("--kill-on-bad-exit=1")
        .arg("-n")
        .arg(ranks.to_string());
    if job.tag_output {
        cmd.arg("--label");
    }
    cmd.args(&job.command)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .env_remove(phalanx_boot::ENV_BOOT);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("phalanx: cannot start srun inside the Slurm allocation: {e}");
            return 2;
        }
    };
    let started = Instant::now();
    let mut ended_by_timeout = false;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                if ended_by_timeout {
                    eprintln!("phalanx: timeout expired: the step was cancelled");
                    return 124;
                }
                return if st.success() {
                    0
                } else {
                    crate::status::describe(st).1
                };
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("phalanx: cannot wait for srun: {e}");
                return 1;
            }
        }
        if let Some(t) = job.timeout {
            let over = started.elapsed().saturating_sub(t);
            if !over.is_zero() && !ended_by_timeout {
                ended_by_timeout = true;
                // SAFETY: kill(2) on the srun this call started.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            } else if ended_by_timeout && over > job.kill_grace {
                let _ = child.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
