//! Child processes of the report: finding the binaries and the repository, and running
//! one command under a time limit with nothing left behind.
//!
//! Contract of [`run`]: the child starts in a process group of its own with stdin from
//! /dev/null, stdout and stderr into the given files (stderr lines are also handed to a
//! callback as they arrive), and `PR_SET_PDEATHSIG(SIGTERM)` so it is told to end if the
//! report dies. It returns when the child has exited and its group has been emptied: on
//! its time limit, or when the report receives SIGINT, SIGTERM or SIGHUP (see
//! [`install_signal_handlers`]), the group gets SIGTERM (the launcher ends its ranks,
//! which live in groups of their own and die with it in any case), then SIGKILL after
//! [`GRACE`]. Whatever the child left in its group is killed when it exits. Nothing here
//! panics on a child's behaviour; every failure is a [`StepError`].

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Time between SIGTERM and SIGKILL when a child is stopped.
pub const GRACE: Duration = Duration::from_secs(5);
/// How often a running child is polled.
const POLL: Duration = Duration::from_millis(20);

/// The termination signal the report received (0: none yet).
static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALLED.store(sig, Ordering::SeqCst);
}

/// Makes SIGINT, SIGTERM and SIGHUP stop the running child and the suite instead of
/// killing the report outright (which would leave the child's job running).
pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe;
        // `signal` takes no pointers to our memory.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// The termination signal received so far, if any.
pub fn signalled() -> Option<i32> {
    match SIGNALLED.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// Why a step did not produce its output.
#[derive(Debug)]
#[non_exhaustive]
pub enum StepError {
    /// The program could not be started.
    Spawn(io::Error),
    /// The output files could not be created or read.
    Io(io::Error),
    /// Still running at its time limit: stopped.
    Timeout(Duration),
    /// The report was told to stop (the signal's number); the child was stopped.
    Interrupted(i32),
    /// Ended with a failure status.
    Failed(ExitStatus),
    /// Ran to success but printed no table the report could read.
    NoTable,
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepError::Spawn(e) => write!(f, "could not be started: {e}"),
            StepError::Io(e) => write!(f, "output files: {e}"),
            StepError::Timeout(t) => write!(f, "timed out after {} s and was stopped", t.as_secs()),
            StepError::Interrupted(sig) => write!(f, "stopped by signal {sig}"),
            StepError::Failed(status) => write!(f, "failed ({status})"),
            StepError::NoTable => write!(f, "printed no result table"),
        }
    }
}

impl std::error::Error for StepError {}

/// Where a child's output goes.
pub struct Outputs<'a> {
    /// The child's stdout.
    pub stdout: &'a Path,
    /// The child's stderr (a copy; lines also go to `on_stderr`).
    pub stderr: &'a Path,
}

/// Runs `cmd` to its end or its time limit (see the module's contract); `on_stderr` sees
/// every line the child writes to stderr, in order, from the calling thread.
pub fn run(
    mut cmd: Command,
    limit: Duration,
    out: &Outputs<'_>,
    on_stderr: &mut dyn FnMut(&str),
) -> Result<(), StepError> {
    let stdout = File::create(out.stdout).map_err(StepError::Io)?;
    let mut err_copy = File::create(out.stderr).map_err(StepError::Io)?;
    // SAFETY: getpid takes no arguments and cannot fail.
    let parent = unsafe { libc::getpid() };
    cmd.stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid, _exit); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(127);
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(StepError::Spawn)?;
    let (tx, rx) = mpsc::channel::<String>();
    let reader = child.stderr.take().map(|pipe| {
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
    });
    let mut forward = |line: String| {
        use std::io::Write;
        let _ = writeln!(err_copy, "{line}");
        on_stderr(&line);
    };
    let start = Instant::now();
    let ended = loop {
        for line in rx.try_iter() {
            forward(line);
        }
        match exit_of(&child) {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(StepError::Io(e)),
        }
        if let Some(sig) = signalled() {
            stop(&mut child);
            break Err(StepError::Interrupted(sig));
        }
        if start.elapsed() > limit {
            stop(&mut child);
            break Err(StepError::Timeout(limit));
        }
        std::thread::sleep(POLL);
    };
    // The child has exited but is not reaped, so its group id is still its own: empty it.
    signal_group(&child, libc::SIGKILL);
    let _ = child.wait();
    if let Some(reader) = reader {
        // The pipe closes when the last process holding it is gone (killed above).
        let _ = reader.join();
    }
    for line in rx.try_iter() {
        forward(line);
    }
    match ended {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(StepError::Failed(status)),
        Err(e) => Err(e),
    }
}

/// SIGTERM to the child's group, SIGKILL after [`GRACE`] if the child is still there;
/// returns once the child has exited (not reaped).
fn stop(child: &mut Child) {
    signal_group(child, libc::SIGTERM);
    let start = Instant::now();
    while start.elapsed() < GRACE {
        if !matches!(exit_of(child), Ok(None)) {
            return;
        }
        std::thread::sleep(POLL);
    }
    signal_group(child, libc::SIGKILL);
    let deadline = Instant::now() + GRACE;
    while matches!(exit_of(child), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
}

/// Sends `sig` to the child's process group (its pid: it leads the group).
fn signal_group(child: &Child, sig: libc::c_int) {
    // SAFETY: kill takes no pointers; the group id is our unreaped child's pid, which
    // cannot have been reused.
    unsafe {
        libc::kill(-(child.id() as libc::pid_t), sig);
    }
}

/// How `child` ended, if it has, without reaping it (`waitid` with `WNOWAIT`), so that
/// its pid and group id stay ours until [`Child::wait`].
fn exit_of(child: &Child) -> io::Result<Option<ExitStatus>> {
    use std::os::unix::process::ExitStatusExt;
    // SAFETY: a zeroed siginfo_t is valid for waitid to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid, writable siginfo_t; the pid is our child's.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            child.id() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: waitid filled `info`; si_pid is 0 when the child has not changed state.
    let (pid, code, status) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
    if pid == 0 {
        return Ok(None);
    }
    Ok(Some(if code == libc::CLD_EXITED {
        ExitStatus::from_raw((status & 0xff) << 8)
    } else {
        ExitStatus::from_raw(status & 0x7f)
    }))
}

/// The `phalanx` launcher: next to this executable, else on `$PATH`.
pub fn launcher() -> Result<PathBuf, String> {
    let here = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    if let Some(path) = here
        .parent()
        .map(|d| d.join("phalanx"))
        .filter(|p| p.is_file())
    {
        return Ok(path);
    }
    on_path("phalanx").ok_or_else(|| {
        format!(
            "the phalanx launcher is neither next to {} nor on $PATH \
             (build it: cargo build --release -p phalanx-cli)",
            here.display()
        )
    })
}

/// Where the example programs of the launcher's build are: `<launcher dir>/examples`
/// (cargo puts `target/<profile>/examples/<name>` beside `target/<profile>/phalanx`).
pub fn examples(launcher: &Path) -> PathBuf {
    launcher
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("examples")
}

/// This benchmark program, to run under the launcher.
pub fn bench() -> Result<PathBuf, String> {
    let here = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    if here.is_file() {
        return Ok(here);
    }
    on_path("phalanx-bench").ok_or_else(|| "phalanx-bench is not on $PATH".to_string())
}

/// The repository holding `bench/compare.sh`: `$PHALANX_REPO`, else the first directory
/// above this executable that has it.
pub fn repo() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PHALANX_REPO") {
        return Some(PathBuf::from(dir));
    }
    let here = std::env::current_exe().ok()?;
    here.ancestors()
        .skip(1)
        .find(|d| d.join("bench/compare.sh").is_file())
        .map(Path::to_path_buf)
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_sh(script: &str, limit: Duration) -> (Result<(), StepError>, Vec<String>) {
        let dir = std::env::temp_dir().join(format!("phalanx-runner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (o, e) = (dir.join("out"), dir.join("err"));
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        let mut lines = Vec::new();
        let r = run(
            cmd,
            limit,
            &Outputs {
                stdout: &o,
                stderr: &e,
            },
            &mut |l| lines.push(l.to_string()),
        );
        (r, lines)
    }

    #[test]
    fn status_and_stderr_lines() {
        let (r, lines) = run_sh(
            "echo one >&2; echo two >&2; exit 0",
            Duration::from_secs(20),
        );
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(lines, ["one", "two"]);
        let (r, _) = run_sh("exit 3", Duration::from_secs(20));
        assert!(matches!(r, Err(StepError::Failed(s)) if s.code() == Some(3)));
    }

    #[test]
    fn a_child_over_its_limit_is_stopped_with_what_it_started() {
        // The background sleep holds stderr open: unless it is killed with the group,
        // this hangs until the test runner's own limit.
        let (r, _) = run_sh("sleep 1000 & sleep 1000", Duration::from_millis(200));
        assert!(matches!(r, Err(StepError::Timeout(_))), "{r:?}");
    }
}
