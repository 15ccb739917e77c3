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
//!   (N defaults to the allocation's `SLURM_NTASKS`, which must be a number from 1 to
//!   [`MAX_TASKS`] when it is used) with the `--env` variables added to
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

/// Largest `SLURM_NTASKS` taken (`phalanx run -n` allows as many).
pub const MAX_TASKS: u32 = 65536;

/// The tasks of the allocation (`SLURM_NTASKS`; `None` when unset or blank); a value
/// that is not a number from 1 to [`MAX_TASKS`] is an error naming the variable.
pub fn allocated_tasks() -> Result<Option<u32>, String> {
    ntasks(std::env::var_os("SLURM_NTASKS").as_deref())
}

fn ntasks(v: Option<&std::ffi::OsStr>) -> Result<Option<u32>, String> {
    let Some(v) = v else {
        return Ok(None);
    };
    let t = v.to_string_lossy();
    if t.trim().is_empty() {
        return Ok(None);
    }
    t.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_TASKS).contains(n))
        .map(Some)
        .ok_or_else(|| {
            format!(
                "SLURM_NTASKS={} is not a number from 1 to {MAX_TASKS}",
                crate::bounds::shown(&t)
            )
        })
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
    let ranks = match job.ranks {
        Some(n) => Some(n),
        None => match allocated_tasks() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("phalanx: {e}");
                return 2;
            }
        },
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn ntasks_is_bounded() {
        let n = |v: &str| ntasks(Some(OsStr::new(v)));
        assert_eq!(ntasks(None), Ok(None));
        assert_eq!(n(" "), Ok(None));
        assert_eq!(n("65536"), Ok(Some(MAX_TASKS)));
        let long = "1".repeat(1 << 20);
        for bad in ["0", "65537", "18446744073709551615", "x", &long] {
            let e = n(bad).unwrap_err();
            assert!(e.contains("SLURM_NTASKS") && e.len() < 200, "{e}");
        }
    }
}
