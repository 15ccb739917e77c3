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
    /// Start N ranks of a program on this host (or its network namespaces) and supervise them.
    #[command(after_help = RUN_AFTER_HELP)]
    Run(RunArgs),
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
}

const RUN_AFTER_HELP: &str = "\
Each rank gets PHALANX_RANK, PHALANX_SIZE and PHALANX_BOOT in its environment.
With --hostfile, ranks placed on a `netns:NAME` host run in that network namespace.
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

    /// Hosts to run ranks on, one per line: `localhost [slots=N]` or `netns:NAME
    /// [slots=N]` (a network namespace: ranks start as `ip netns exec NAME prog…` with
    /// PHALANX_IP=auto). Ranks fill each host's slots in order.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,

    /// The launcher's address as seen from namespace hosts (default: the address of this
    /// host on each namespace's subnet, e.g. its bridge).
    #[arg(long, value_name = "IP", requires = "hostfile")]
    pub boot_ip: Option<Ipv4Addr>,

    /// Who starts the ranks: `local` (this launcher), `slurm` (srun with PMI-2, inside an
    /// allocation), `auto` (Slurm inside an `salloc`/`sbatch` allocation without a
    /// hostfile, else local).
    #[arg(long, value_name = "auto|local|slurm", default_value = "auto",
          value_parser = ["auto", "local", "slurm"])]
    pub launcher: String,

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

    /// Stop the job after SECONDS: print what every rank is waiting on, then terminate all.
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
            "auto" => Ok(self.hostfile.is_none()
                && crate::slurm::in_allocation()
                && self
                    .ranks
                    .is_none_or(|n| n <= crate::slurm::allocated_tasks())),
            _ => Ok(false),
        }
    }

    /// The srun job this invocation describes (see [`crate::slurm`]).
    pub fn into_srun(self) -> crate::slurm::SrunJob {
        crate::slurm::SrunJob {
            ranks: self.ranks,
            tag_output: self.tag_output,
            env: self.env,
            timeout: self.timeout,
            kill_grace: self.kill_grace,
            command: self.command,
        }
    }

    /// The job this invocation describes; `Err` for a bad hostfile or a missing `-n`.
    pub fn into_config(self) -> Result<Config, String> {
        let (size, hosts) = match &self.hostfile {
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
                (n, place(&entries, n))
            }
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
                env: self
                    .env
                    .into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
                cpus: if self.bind_to == "core" {
                    crate::spawn::allowed_cpus()
                } else {
                    Vec::new()
                },
                cwd: None,
            },
            agent_secret: self.agent_secret,
            halt_report: self.status_file.as_ref().map(|f| f.with_extension("halt")),
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

fn parse_secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(v).map_err(|_| format!("{s:?} is not a valid number of seconds"))
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not of the form KEY=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut v = vec!["phalanx", "run"];
        v.extend(args);
        Cli::try_parse_from(v).map(|c| match c.command {
            Command::Run(r) => r,
            Command::Cc { .. } | Command::Gang(_) => {
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
        assert!(parse(&["-n", "2", "--timeout", "-1", "prog"]).is_err());
    }
}
