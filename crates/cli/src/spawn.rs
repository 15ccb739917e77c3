//! Starting rank processes and signalling them.
//!
//! Contract: every rank runs in its own process group (pgid = its pid), so the launcher can
//! signal a rank together with anything it forked, and a terminal's Ctrl-C reaches only the
//! launcher. Every rank gets `PR_SET_PDEATHSIG(SIGKILL)`, so it dies when the launcher does,
//! even if the launcher is SIGKILLed; the race with a launcher dying before the `prctl` is
//! closed by checking `getppid()` afterwards. PDEATHSIG fires when the *thread* that forked
//! exits, so ranks must be spawned from the launcher's main thread. Ranks read stdin from
//! /dev/null (a background process group reading the terminal would be stopped) and write
//! stdout/stderr to pipes.
//!
//! With `--bind-to core` (the default) rank r is bound to the (r mod n)-th of the n CPUs
//! the launcher may use, before exec (inherited through `ip netns exec`).
//!
//! A rank on a [`Host::Netns`] is started as `ip netns exec NAME prog args…`: `ip` enters
//! the namespace and execs the program, so the pid, the process group and PDEATHSIG (kept
//! across exec, as no credentials change) are the rank's own. It gets `PHALANX_IP=auto`
//! unless `--env PHALANX_IP=…` says otherwise.

use crate::hosts::Host;
use std::ffi::OsString;
use std::io;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// What every rank of the job is started with.
#[derive(Clone)]
pub struct Program {
    /// The executable (looked up in PATH like a shell would).
    pub prog: OsString,
    /// Its arguments, verbatim.
    pub args: Vec<OsString>,
    /// Extra environment (`--env K=V`), applied before the PHALANX_* variables.
    pub env: Vec<(OsString, OsString)>,
    /// CPUs to bind ranks to, round robin by rank (`--bind-to core`); empty: no binding.
    pub cpus: Vec<usize>,
    /// Working directory (default: the launcher's).
    pub cwd: Option<std::path::PathBuf>,
}

/// The CPUs this process may run on (its affinity mask), ascending; empty if unknown.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity writes only into the zeroed set we pass, of the size given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Environment variable with the number of CPUs bound ranks are spread over (the
/// library's spin-or-yield choice compares it with the ranks of its host).
pub const ENV_CPUS: &str = "PHALANX_CPUS";

/// Environment variable with the number of the job's ranks on this machine when some run
/// in test hosts (network namespaces): they share its CPUs, which the library's
/// spin-or-yield choice needs to know.
pub const ENV_MACHINE_RANKS: &str = "PHALANX_MACHINE_RANKS";

/// Environment variable with the ranks per CPU of the launcher's machine (its own and its
/// test hosts' ranks), the same for every rank: the library widens its collective trees
/// by it
/// ([`crate::hosts::ranks_per_cpu`]).
pub const ENV_RANKS_PER_CPU: &str = "PHALANX_RANKS_PER_CPU";

/// Environment variable with the rank's bind address (read by the phalanx library).
pub const ENV_IP: &str = "PHALANX_IP";

/// Starts rank `rank` of `size` on `host`, pointing it at the launcher's `boot` address.
pub fn spawn_rank(
    p: &Program,
    rank: u32,
    size: u32,
    boot: SocketAddr,
    host: &Host,
) -> io::Result<Child> {
    let launcher = std::process::id() as libc::pid_t;
    let nofile = original_nofile();
    // Built before the fork: the child only passes it to the system call.
    let bind = (!p.cpus.is_empty()).then(|| {
        let cpu = p.cpus[rank as usize % p.cpus.len()];
        // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET stays within it
        // (cpu < CPU_SETSIZE, from sched_getaffinity).
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            set
        }
    });
    let mut cmd = match host {
        Host::Node { label, .. } => {
            return Err(io::Error::other(format!(
                "ranks on {label} are started by its node daemon"
            )))
        }
        Host::Ssh(target) => {
            return Err(io::Error::other(format!(
                "ranks on {target} are started by its ssh proxy"
            )))
        }
        Host::Local => Command::new(&p.prog),
        Host::Netns(name) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", name]).arg(&p.prog);
            if !p.env.iter().any(|(k, _)| k == ENV_IP) {
                c.env(ENV_IP, "auto");
            }
            c
        }
    };
    cmd.args(&p.args)
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .env(phalanx_boot::ENV_RANK, rank.to_string())
        .env(phalanx_boot::ENV_SIZE, size.to_string())
        .env(phalanx_boot::ENV_BOOT, boot.to_string())
        .envs((!p.cpus.is_empty()).then(|| (ENV_CPUS, p.cpus.len().to_string())))
        .stdin(Stdio::null())
        .current_dir(p.cwd.as_deref().unwrap_or(std::path::Path::new(".")))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid, setrlimit, sched_setaffinity, _exit);
    // it allocates nothing and touches no locks.
    unsafe {
        cmd.pre_exec(move || {
            die_with_launcher(launcher)?;
            if let Some(lim) = nofile {
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
            if let Some(set) = &bind {
                // Best effort: a CPU that went away leaves the rank unbound.
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// For a forked child before exec: it gets SIGKILL when the thread that forked it (in
/// `launcher`, a pid) ends, and exits at once if the launcher died before that took
/// effect (nobody would reap it). Only async-signal-safe calls (prctl, getppid, _exit).
pub(crate) fn die_with_launcher(launcher: libc::pid_t) -> io::Result<()> {
    // SAFETY: prctl and getppid take no pointers; _exit never returns.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != launcher {
            libc::_exit(127);
        }
    }
    Ok(())
}

/// How `child` ended, if it has — without reaping it (`waitid` with `WNOWAIT`): while it
/// stays a zombie its pid, and so its process group's id, cannot be reused, so a later
/// [`signal_group`] on it reaches only what it left behind. [`Child::wait`] reaps it.
pub fn exit_of(child: &Child) -> io::Result<Option<std::process::ExitStatus>> {
    use std::os::unix::process::ExitStatusExt;
    // SAFETY: a zeroed siginfo_t is valid for waitid to fill; the pid is our child's.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
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
    // SAFETY: waitid filled `info` for a child event (or left si_pid 0: none yet).
    let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if pid == 0 {
        return Ok(None);
    }
    // The raw wait status of that ending.
    let raw = match info.si_code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        libc::CLD_DUMPED => (status & 0x7f) | 0x80,
        _ => status & 0x7f,
    };
    Ok(Some(std::process::ExitStatus::from_raw(raw)))
}

/// Sends `sig` to the process group `pgid` (a rank and whatever it forked). A group that no
/// longer exists is not an error. Linux never reuses a pid while a process group of that
/// id exists, so this cannot hit an unrelated process group.
pub fn signal_group(pgid: u32, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe { libc::kill(-(pgid as libc::pid_t), sig) };
}

static ORIGINAL_NOFILE: std::sync::OnceLock<Option<libc::rlimit>> = std::sync::OnceLock::new();

fn original_nofile() -> Option<libc::rlimit> {
    ORIGINAL_NOFILE.get().copied().flatten()
}

/// Raises the launcher's soft open-file limit to the hard limit (it holds three fds per
/// rank); the ranks get the original limit back.
pub fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the valid, exclusively borrowed `lim`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    let original = lim;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: setrlimit reads the valid `lim`.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
            let _ = ORIGINAL_NOFILE.set(Some(original));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// Polls [`exit_of`] (bounded) until `child` has ended.
    fn ended(child: &Child) -> std::process::ExitStatus {
        for _ in 0..1000 {
            if let Some(st) = exit_of(child).unwrap() {
                return st;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("the child did not end");
    }

    #[test]
    fn exit_of_reports_without_reaping() {
        let mut c = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
        let st = ended(&c);
        assert_eq!(st.code(), Some(3));
        // Still a zombie: its pid (and group id) cannot be reused yet.
        // SAFETY: signal 0 only checks that the pid exists.
        assert_eq!(unsafe { libc::kill(c.id() as libc::pid_t, 0) }, 0);
        assert_eq!(exit_of(&c).unwrap().and_then(|s| s.code()), Some(3));
        assert_eq!(c.wait().unwrap().code(), Some(3));
        let c = Command::new("sh")
            .args(["-c", "kill -9 $$"])
            .spawn()
            .unwrap();
        assert_eq!(ended(&c).signal(), Some(libc::SIGKILL));
        let mut c = c;
        let _ = c.wait();
        let mut c = Command::new("sleep").arg("5").spawn().unwrap();
        assert!(exit_of(&c).unwrap().is_none());
        c.kill().unwrap();
        assert_eq!(ended(&c).signal(), Some(libc::SIGKILL));
        let _ = c.wait();
    }
}
