//! Command-line interface of the `phalanx` binary.
//!
//! Contract: parsing only; `phalanx run` turns into a [`job::Config`](crate::job::Config).
//! Everything after the program name is passed to the program verbatim, even arguments that
//! look like `phalanx run` options (`phalanx run -n 2 ./x -n 5`).

use crate::hosts::{parse_hostfile, place, total_slots, Host};
use crate::job::Config;
use crate::spawn::Program;
use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

/// phalanx: MPI-style message passing in pure Rust.
#[derive(Parser, Debug)]
#[command(name = "phalanx", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start N ranks of a program on this host, its network namespaces or ssh hosts, and
    /// supervise them.
    #[command(after_help = RUN_AFTER_HELP)]
    Run(Box<RunArgs>),
    /// Compile and link a C program against phalanx's MPI ABI (like mpicc); all arguments
    /// go to the compiler ($PHALANX_CC, default cc). `--show` prints the command.
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Cc {
        /// Compiler arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// The job manager: gang-scheduled jobs sharing this machine's nodes (`up`, `submit`,
    /// `queue`, `matrix`, `nodes`, `cancel`, `logs`, `down`).
    Gang(crate::gang::GangArgs),
    /// A host's agent for `phalanx run --launcher ssh` (started over ssh; speaks the
    /// agent protocol on stdin and stdout).
    #[command(hide = true)]
    Proxy,
}

const RUN_AFTER_HELP: &str = "\
Each rank gets PHALANX_RANK, PHALANX_SIZE and PHALANX_BOOT in its environment.
With --hostfile, ranks placed on a `netns:NAME` host run in that network namespace, and
ranks on any other host (but localhost) are started over ssh by `phalanx proxy` there.
If a rank fails (non-zero exit, killed by a signal, or exit without completing Finalize),
all other ranks are terminated (SIGTERM, then SIGKILL after the grace period).
Ctrl-Z (SIGTSTP) halts every rank's network traffic, then stops the job; SIGCONT (fg)
resumes it.

Exit status: 0 when every rank completed Finalize and exited 0; the failed rank's exit code
(128+N if it was killed by signal N); 124 when --timeout expired; 128+N when phalanx itself
got signal N (130 for Ctrl-C); 2 when the program cannot be started; 1 otherwise.

Example: phalanx run -n 4 --tag-output ./target/release/my-solver --grid 512";

/// Options of `phalanx run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Number of ranks to start (default with --hostfile: its total slots).
    #[arg(short = 'n', long = "np", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub ranks: Option<u32>,

    /// Hosts to run ranks on, one per line: `HOST [slots=N]` or `HOST:N` (over ssh),
    /// `localhost`, or `netns:NAME` (a network namespace of this machine: ranks start as
    /// `ip netns exec NAME prog…`). Ranks fill each host's slots in order.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,

    /// Allow more ranks than the hostfile has slots (placement wraps around).
    #[arg(long, requires = "hostfile")]
    pub oversubscribe: bool,

    /// The launcher's address as seen from namespace and ssh hosts (default: for a
    /// namespace the address of this host on its subnet, e.g. its bridge; for an ssh
    /// host the address this host sends from toward it).
    #[arg(long, value_name = "IP", requires = "hostfile")]
    pub boot_ip: Option<Ipv4Addr>,

    /// Who starts the ranks: `local` (this launcher, on this host and its namespaces),
    /// `ssh` (every host of the hostfile but namespaces over ssh, `localhost` too),
    /// `slurm` (srun with PMI-2, inside an allocation), `auto` (Slurm inside an
    /// `salloc`/`sbatch` allocation without a hostfile; else ssh for the hostfile's
    /// remote hosts and this launcher for the rest).
    #[arg(long, value_name = "auto|local|ssh|slurm", default_value = "auto",
          value_parser = ["auto", "local", "ssh", "slurm"])]
    pub launcher: String,

    /// The remote shell for ssh hosts, with its options (split like a shell would):
    /// the host and the remote command are appended to it.
    #[arg(
        long,
        value_name = "CMD",
        default_value = "ssh -x -o BatchMode=yes -o ConnectTimeout=10"
    )]
    pub launcher_cmd: String,

    /// Where `phalanx` is on the ssh hosts (default: the path of this one, which must
    /// then exist there too).
    #[arg(long, value_name = "PATH")]
    pub remote_phalanx: Option<PathBuf>,

    /// Forward an environment variable to every rank (repeatable): `-x VAR` passes this
    /// environment's value, `-x VAR=VALUE` sets one. Variables named PHALANX_* are
    /// forwarded to ssh hosts without it.
    #[arg(short = 'x', value_name = "VAR[=VALUE]", value_parser = parse_forward)]
    pub forward: Vec<(String, Option<String>)>,

    /// The secret file of the job manager's cluster, for `node:` hosts (their agents).
    #[arg(long, value_name = "FILE", hide = true)]
    pub agent_secret: Option<PathBuf>,

    /// Prefix every output line with "\[rank\] ".
    #[arg(long)]
    pub tag_output: bool,
    /// Write the launcher's exit code to this file when it ends (for a job manager that
    /// may outlive its child relationship with the launcher).
    #[arg(long, value_name = "FILE", hide = true)]
    pub status_file: Option<PathBuf>,

    /// Print the job's statistics at exit (on stderr): per rank and in total, messages and
    /// bytes by kind, retransmissions, duplicates, drops by reason, time blocked in waits,
    /// and the algorithm each collective ran with; `--stats=json` prints them as JSON,
    /// `--stats=json:FILE` writes that to FILE.
    #[arg(long, value_name = "table|json|json:FILE", num_args = 0..=1, require_equals = true,
          default_missing_value = "table", value_parser = crate::job_stats::parse_stats_out)]
    pub stats: Option<crate::job_stats::StatsOut>,

    /// Record the job's timeline and write it to FILE at exit: a Chrome trace-event file
    /// for Perfetto's UI (every rank a process: its calls, messages as flows, collectives
    /// with their algorithms, retransmissions; the launcher's events). Also
    /// `PHALANX_TRACE=FILE`; `PHALANX_TRACE_EVENTS` bounds each rank's ring.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,

    /// Stop the job after SECONDS: print what every rank is waiting on, then terminate all
    /// (at most a year, 31536000; so are the other times).
    #[arg(long, value_name = "SECONDS", value_parser = parse_secs)]
    pub timeout: Option<Duration>,

    /// Limit for all ranks to connect to the launcher at start-up.
    #[arg(long, value_name = "SECONDS", value_parser = parse_secs, default_value = "60")]
    pub startup_timeout: Duration,

    /// Time between SIGTERM and SIGKILL when terminating ranks.
    #[arg(long, value_name = "SECONDS", value_parser = parse_secs, default_value = "3")]
    pub kill_grace: Duration,

    /// Rank placement: `core` binds rank r to the r-th CPU (round robin over the CPUs the
    /// launcher may use), so ranks spread evenly and do not migrate — also when there are
    /// more ranks than CPUs; `none` leaves placement to the kernel.
    #[arg(long = "bind-to", value_name = "core|none", default_value = "core",
          value_parser = ["core", "none"])]
    pub bind_to: String,

    /// Set an environment variable for every rank (repeatable).
    #[arg(long = "env", value_name = "K=V", value_parser = parse_env)]
    pub env: Vec<(String, String)>,

    /// The program to run, followed by its arguments (passed verbatim).
    #[arg(value_name = "PROG [ARGS]...", required = true, num_args = 1..,
          trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// Whether srun starts the ranks (`--launcher`); `Err` for `slurm` outside an
    /// allocation.
    pub fn use_slurm(&self) -> Result<bool, String> {
        match self.launcher.as_str() {
            "slurm" if !crate::slurm::in_allocation() => Err(
                "--launcher slurm: not inside a Slurm allocation (salloc or an sbatch script)"
                    .into(),
            ),
            "slurm" => Ok(true),
            // Only where the allocation can take the ranks (else the local launcher, as
            // before, e.g. `phalanx run -n 4` inside `salloc -n 1`).
            "ssh" if self.hostfile.is_none() => {
                Err("--launcher ssh needs a --hostfile naming the hosts".into())
            }
            "auto" => Ok(self.hostfile.is_none()
                && crate::slurm::in_allocation()
                && match self.ranks {
                    None => true,
                    Some(n) => n <= crate::slurm::allocated_tasks()?.unwrap_or(0),
                }),
            _ => Ok(false),
        }
    }

    /// The srun job this invocation describes (see [`crate::slurm`]); `Err` for `-x VAR`
    /// of a variable that is not set.
    pub fn into_srun(self) -> Result<crate::slurm::SrunJob, String> {
        let mut env = self.env;
        for (k, v) in self.forward {
            let v = match v {
                Some(v) => v,
                None => std::env::var(&k).map_err(|_| {
                    format!("-x {k}: {k} is not set in this environment (or not UTF-8)")
                })?,
            };
            env.push((k, v));
        }
        Ok(crate::slurm::SrunJob {
            ranks: self.ranks,
            tag_output: self.tag_output,
            env,
            timeout: self.timeout,
            kill_grace: self.kill_grace,
            command: self.command,
        })
    }

    /// The job this invocation describes; `Err` for a bad hostfile, a missing `-n`, more
    /// ranks than slots, or an ssh host with `--launcher local`.
    pub fn into_config(self) -> Result<Config, String> {
        let (size, mut hosts) = match &self.hostfile {
            None => {
                let n = self.ranks.ok_or("-n N is required without --hostfile")?;
                (n, vec![Host::Local; n as usize])
            }
            Some(path) => {
                let text = read_hostfile(path)?;
                let entries =
                    parse_hostfile(&text).map_err(|e| format!("{}: {e}", path.display()))?;
                let n = self
                    .ranks
                    .unwrap_or_else(|| total_slots(&entries).min(65536));
                let hosts = place(&entries, n, self.oversubscribe)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                (n, hosts)
            }
        };
        for h in hosts.iter_mut() {
            match (self.launcher.as_str(), &*h) {
                ("ssh", Host::Local) => *h = Host::Ssh("localhost".into()),
                ("local", Host::Ssh(t)) => {
                    return Err(format!(
                        "host {t} is reached over ssh: not with --launcher local"
                    ))
                }
                // This machine by another name: started here, as Open MPI does.
                ("auto", Host::Ssh(t)) if is_this_host(t) => *h = Host::Local,
                _ => {}
            }
        }
        let mut env: Vec<(OsString, OsString)> = self
            .env
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        for (k, v) in self.forward {
            let v = match v {
                Some(v) => OsString::from(v),
                None => std::env::var_os(&k)
                    .ok_or_else(|| format!("-x {k}: {k} is not set in this environment"))?,
            };
            env.push((k.into(), v));
        }
        let trace = self.trace.clone().or_else(|| {
            std::env::var_os("PHALANX_TRACE")
                .filter(|v| !v.is_empty() && v != "0")
                .map(PathBuf::from)
        });
        if let Some(t) = &trace {
            // Said now rather than after the job: where the file cannot be made.
            std::fs::File::create(t)
                .map_err(|e| format!("--trace {}: cannot create it: {e}", t.display()))?;
            // The ranks record and send their timelines at Finalize.
            env.push(("PHALANX_TRACE".into(), t.clone().into()));
        }
        if self.stats.is_some() {
            // The ranks send their counters at Finalize.
            env.push(("PHALANX_JOB_STATS".into(), "1".into()));
        }
        if let Some(figures) = crate::cost::job_figures(&env)? {
            env.push(("PHALANX_COST".into(), figures.into()));
        }
        // Ranks sharing CPUs: one figure for the whole job (its collectives' trees depend
        // on it), unless the user gave one. Either way it travels in the program's
        // environment, which every rank gets (node agents' ranks inherit nothing).
        let share = crate::spawn::ENV_RANKS_PER_CPU;
        if !env.iter().any(|(k, _)| k == share) {
            let value = match std::env::var_os(share) {
                Some(v) => Some(v),
                None => crate::hosts::ranks_per_cpu(&hosts, crate::spawn::allowed_cpus().len())
                    .map(|r| format!("{r}").into()),
            };
            if let Some(v) = value {
                env.push((share.into(), v));
            }
        }
        let ssh = if hosts.iter().any(|h| matches!(h, Host::Ssh(_))) {
            let cmd = shlex::split(&self.launcher_cmd)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("--launcher-cmd {:?}: not a command", self.launcher_cmd))?;
            let exe = match self.remote_phalanx {
                Some(p) => p,
                None => std::env::current_exe()
                    .map_err(|e| format!("cannot find this phalanx's path: {e}"))?,
            };
            Some(crate::agents::SshSettings { cmd, exe })
        } else {
            None
        };
        let mut command = self.command.into_iter();
        // clap guarantees at least one value (`required = true`, `num_args = 1..`).
        let prog = command.next().unwrap_or_default();
        Ok(Config {
            size,
            hosts,
            boot_ip: self.boot_ip,
            program: Program {
                prog,
                args: command.collect(),
                env,
                cpus: if self.bind_to == "core" {
                    crate::spawn::allowed_cpus()
                } else {
                    Vec::new()
                },
                cwd: None,
            },
            agent_secret: self.agent_secret,
            ssh,
            halt_report: self.status_file.as_ref().map(|f| f.with_extension("halt")),
            stats: self.stats,
            trace,
            tag_output: self.tag_output,
            timeout: self.timeout,
            startup_timeout: self.startup_timeout,
            kill_grace: self.kill_grace,
        })
    }
}

/// Longest hostfile read (one line per host: far more than any cluster needs).
pub const MAX_HOSTFILE: u64 = 1 << 20;

/// Reads a hostfile: at most [`MAX_HOSTFILE`] bytes of UTF-8, else a clear error (a
/// device such as /dev/urandom is not read forever).
fn read_hostfile(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_HOSTFILE + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read hostfile {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_HOSTFILE {
        return Err(format!(
            "hostfile {} is larger than {} KiB",
            path.display(),
            MAX_HOSTFILE >> 10
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("hostfile {} is not text (UTF-8)", path.display()))
}

/// Longest time option (`--timeout`, `--startup-timeout`, `--kill-grace`): a year, in
/// seconds. Far beyond it, the deadline `now + SECONDS` overflowed `Instant` (a panic at
/// `--timeout 1e19`).
pub const MAX_SECS: f64 = 365.0 * 86_400.0;

fn parse_secs(s: &str) -> Result<Duration, String> {
    use crate::bounds::shown;
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{} is not a number of seconds", shown(s)))?;
    if !(0.0..=MAX_SECS).contains(&v) {
        return Err(format!(
            "{} is not a number of seconds from 0 to {MAX_SECS} (a year)",
            shown(s)
        ));
    }
    Duration::try_from_secs_f64(v)
        .map_err(|_| format!("{} is not a valid number of seconds", shown(s)))
}

/// Whether an ssh target names this machine (`127.0.0.1` or its host name).
fn is_this_host(target: &str) -> bool {
    if target.contains('@') {
        return false; // another user's login: ssh was asked for
    }
    if target == "127.0.0.1" {
        return true;
    }
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    rc == 0 && &buf[..len] == target.as_bytes()
}

fn parse_forward(s: &str) -> Result<(String, Option<String>), String> {
    let (k, v) = match s.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (s, None),
    };
    let ok = !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok((k.to_string(), v))
    } else {
        Err(format!("{s:?} is not VAR or VAR=VALUE"))
    }
}

/// Longest `-x KEY=VALUE` (the kernel takes no longer environment string:
/// `MAX_ARG_STRLEN`, 32 pages).
pub const MAX_ENV_ARG: usize = 128 << 10;

fn parse_env(s: &str) -> Result<(String, String), String> {
    if s.len() > MAX_ENV_ARG {
        return Err(format!(
            "{} is {} bytes long, more than {MAX_ENV_ARG}",
            crate::bounds::shown(s),
            s.len()
        ));
    }
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !k.contains('\0') && !v.contains('\0') => {
            Ok((k.to_string(), v.to_string()))
        }
        _ => Err(format!(
            "{} is not of the form KEY=VALUE",
            crate::bounds::shown(s)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut v = vec!["phalanx", "run"];
        v.extend(args);
        Cli::try_parse_from(v).map(|c| match c.command {
            Command::Run(r) => *r,
            Command::Cc { .. } | Command::Gang(_) | Command::Proxy => {
                unreachable!("parse() builds `phalanx run` lines")
            }
        })
    }

    #[test]
    fn trailing_args_are_verbatim() {
        let r = parse(&[
            "-n",
            "2",
            "--env",
            "A=b=c",
            "./x",
            "-n",
            "5",
            "--tag-output",
            "--foo",
        ])
        .unwrap();
        assert_eq!(r.ranks, Some(2));
        assert!(!r.tag_output);
        assert_eq!(r.env, [("A".to_string(), "b=c".to_string())]);
        assert_eq!(r.command, ["./x", "-n", "5", "--tag-output", "--foo"]);
        let cfg = r.into_config().unwrap();
        assert_eq!(cfg.hosts, [Host::Local, Host::Local]);
        assert_eq!(cfg.program.prog, "./x");
        assert_eq!(cfg.program.args.len(), 4);
    }

    #[test]
    fn binding() {
        let bound = parse(&["-n", "2", "prog"]).unwrap().into_config().unwrap();
        assert_eq!(bound.program.cpus, crate::spawn::allowed_cpus());
        assert!(
            !bound.program.cpus.is_empty(),
            "this process may run somewhere"
        );
        let free = parse(&["-n", "2", "--bind-to", "none", "prog"]).unwrap();
        assert!(free.into_config().unwrap().program.cpus.is_empty());
        assert!(parse(&["-n", "2", "--bind-to", "socket", "prog"]).is_err());
    }

    #[test]
    fn options() {
        let r = parse(&["-n", "3", "--tag-output", "--timeout", "1.5", "prog"]).unwrap();
        assert!(r.tag_output);
        assert_eq!(r.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(r.startup_timeout, Duration::from_secs(60));
        assert_eq!(r.kill_grace, Duration::from_secs(3));
        assert!(parse(&["-n", "0", "prog"]).is_err());
        assert!(parse(&["-n", "2"]).is_err());
        assert!(parse(&["prog"]).unwrap().into_config().is_err());
        assert!(parse(&["-n", "2", "--boot-ip", "10.0.0.1", "prog"]).is_err());
        let e = parse(&["--hostfile", "/nonexistent/hf", "prog"])
            .unwrap()
            .into_config()
            .err()
            .unwrap();
        assert!(e.contains("/nonexistent/hf"), "{e}");
        // Endless or binary input: a bounded read and a clear error.
        for (path, want) in [
            ("/dev/zero", "larger than"),
            ("/dev/urandom", "larger than"),
        ] {
            let e = parse(&["--hostfile", path, "prog"])
                .unwrap()
                .into_config()
                .err()
                .unwrap();
            assert!(e.contains(want), "{path}: {e}");
        }
        let bin = std::env::temp_dir().join(format!("phx-hostfile-{}", std::process::id()));
        std::fs::write(&bin, [0xff, 0xfe, b'\n']).unwrap();
        let e = parse(&["--hostfile", bin.to_str().unwrap(), "prog"])
            .unwrap()
            .into_config()
            .err()
            .unwrap();
        assert!(e.contains("not text"), "{e}");
        let _ = std::fs::remove_file(&bin);
        assert!(parse(&["-n", "2", "--env", "novalue", "prog"]).is_err());
        assert!(parse(&["-n", "2", "--env", "=value", "prog"]).is_err());
        let edge = format!("K={}", "v".repeat(MAX_ENV_ARG - 2));
        assert!(parse(&["-n", "2", "--env", &edge, "prog"]).is_ok());
        let past = format!("K={}", "v".repeat(MAX_ENV_ARG - 1));
        let e = parse(&["-n", "2", "--env", &past, "prog"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than"), "{e}");
        assert!(parse(&["-n", "2", "--timeout", "-1", "prog"]).is_err());
    }

    #[test]
    fn times_are_bounded() {
        let r = parse(&["-n", "1", "--timeout", "31536000", "prog"]).unwrap();
        assert_eq!(r.timeout, Some(Duration::from_secs(31_536_000)));
        for flag in ["--timeout", "--startup-timeout", "--kill-grace"] {
            for v in [
                "31536000.5",
                "1e19",
                "18446744073709551615",
                "1e308",
                "inf",
                "NaN",
            ] {
                let e = parse(&["-n", "1", flag, v, "prog"])
                    .err()
                    .unwrap()
                    .to_string();
                assert!(e.contains(flag) && e.contains("a year"), "{flag} {v}: {e}");
            }
        }
        // clap quotes the whole argument (the kernel bounds one to 128 KiB); ours is cut.
        let long = "1".repeat(1 << 20);
        let e = parse(&["-n", "1", "--timeout", &long, "prog"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("--timeout") && e.contains("(1048576 bytes)"),
            "{e:.200}"
        );
    }
}
