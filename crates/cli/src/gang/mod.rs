//! `phalanx gang …`: the job manager's commands (seed 001) in Slurm's conventions.
//!
//! Contract: `up` creates the cluster's state directory (`--dir`, else
//! `$PHALANX_GANG_DIR`, else `/tmp/phalanx-gang-<uid>`) with a fresh secret readable only
//! by its owner, starts the master and one node daemon per node in the background (with
//! `--netns` each daemon in a network namespace of its own, see [`mod@nodes`]) and returns
//! once every node has registered. Run again after the master died, it starts a new
//! master (and any node daemon that died) on the same secret and network; the new
//! master takes the jobs over. `down` stops the master, every job and every node
//! daemon and removes the namespaces, also when the master is gone. Every other command reads the secret and the master's port
//! from that directory and sends one request ([`phalanx_gang::proto`]). Bad input —
//! an unknown job, more nodes than the cluster has, a program that does not exist, a
//! second `up` — gets a one-line error and a non-zero exit.

mod launchers;
mod master;
mod node;
mod nodes;

use clap::{Args, Subcommand};
use phalanx_gang::proto::{Reply, Request, MAX_LINE};
use phalanx_gang::{JobRecord, JobState};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `phalanx gang` and its subcommands.
#[derive(Args, Debug)]
pub struct GangArgs {
    /// The cluster's state directory (default `$PHALANX_GANG_DIR`, else
    /// `/tmp/phalanx-gang-<uid>`).
    #[arg(long, global = true)]
    dir: Option<PathBuf>,
    #[command(subcommand)]
    command: GangCommand,
}

/// Most node daemons `gang up` starts (and a master takes).
const MAX_NODES: i64 = 256;
/// Longest time slice (ms): an hour.
const MAX_QUANTUM_MS: u64 = 3_600_000;
/// Most time slots of the gang matrix.
const MAX_SLOTS: i64 = 1024;

#[derive(Subcommand, Debug)]
enum GangCommand {
    /// Start the master and N node daemons (in the background).
    Up {
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=MAX_NODES))]
        nodes: u32,
        /// Each node daemon (and its ranks) in a network namespace of its own, on a
        /// bridge: ranks on different nodes talk over UDP and multicast.
        #[arg(long)]
        netns: bool,
        /// Time slice of each slot, in milliseconds (1 to an hour).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=MAX_QUANTUM_MS))]
        quantum: u64,
        /// Time slots of the gang matrix (1 to 1024).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=MAX_SLOTS))]
        slots: u32,
        /// Communication memory of each node (bytes, `k`/`m`/`g` suffix): shared-memory
        /// rings and go-back-n windows of the jobs on it (seed 001's buffer budget).
        #[arg(long, value_parser = parse_size)]
        comm_budget: Option<u64>,
        /// `switched`: the running job gets the whole budget (its buffers are switched
        /// with it); `partitioned`: every job gets budget / slots, as in FM.
        #[arg(long, default_value = "switched", value_parser = ["switched", "partitioned"])]
        buffers: String,
    },
    /// Stop the master and every job.
    Down,
    /// Submit a job; prints its id.
    Submit {
        /// Ranks.
        #[arg(short = 'n', long = "ranks")]
        ranks: u32,
        /// Nodes (default: as many as the ranks, at most the cluster's).
        #[arg(long)]
        nodes: Option<u32>,
        #[arg(long, default_value = "")]
        name: String,
        /// Stay attached: stream the job's output, exit with its exit code.
        #[arg(long)]
        wait: bool,
        /// The program and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        argv: Vec<String>,
    },
    /// Every job: JOBID NAME ST SLOT NODES TIME.
    Queue {
        #[arg(long)]
        json: bool,
    },
    /// The gang matrix: slots × nodes.
    Matrix {
        #[arg(long)]
        json: bool,
    },
    /// The nodes and their jobs.
    Nodes {
        #[arg(long)]
        json: bool,
    },
    /// End a job.
    Cancel { id: u64 },
    /// The last context switches: the time of each stage (halt, buffer switch, release).
    Switches {
        #[arg(long, default_value_t = 20)]
        last: u32,
        #[arg(long)]
        json: bool,
    },
    /// A job's output (`-f`: follow until it ends).
    Logs {
        id: u64,
        #[arg(short = 'f')]
        follow: bool,
    },
    /// Run the master in the foreground (what `up` starts).
    #[command(hide = true)]
    Master {
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_NODES))]
        nodes: u32,
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_QUANTUM_MS))]
        quantum: u64,
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_SLOTS))]
        slots: u32,
        /// Listen for node daemons on this address too (the nodes' bridge).
        #[arg(long)]
        node_ip: Option<std::net::Ipv4Addr>,
        #[arg(long)]
        comm_budget: Option<u64>,
        #[arg(long)]
        partitioned: bool,
    },
    /// Run a node daemon in the foreground (what `up` starts).
    #[command(hide = true)]
    Node {
        #[arg(long)]
        node: u32,
        /// The master's address (default 127.0.0.1).
        #[arg(long, default_value = "127.0.0.1")]
        master: std::net::Ipv4Addr,
        /// The address the agent listens on (default 127.0.0.1).
        #[arg(long, default_value = "127.0.0.1")]
        listen: std::net::Ipv4Addr,
        /// The daemon lives in a network namespace of its own.
        #[arg(long)]
        netns: bool,
    },
}

/// `PHALANX_GANG_DIR` (at most [`crate::bounds::MAX_PATH_LEN`] bytes), else
/// `/tmp/phalanx-gang-UID`.
fn default_dir() -> Result<PathBuf, String> {
    Ok(crate::bounds::path_var("PHALANX_GANG_DIR")?.map_or_else(
        // SAFETY: getuid(2) cannot fail.
        || PathBuf::from(format!("/tmp/phalanx-gang-{}", unsafe { libc::getuid() })),
        PathBuf::from,
    ))
}

/// Runs a `phalanx gang` command; its exit code.
pub fn run(args: GangArgs) -> i32 {
    let dir = match args.dir.map_or_else(default_dir, Ok) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("phalanx gang: {e}");
            return 2;
        }
    };
    let r = match args.command {
        GangCommand::Up {
            nodes,
            netns,
            quantum,
            slots,
            comm_budget,
            buffers,
        } => up(
            &dir,
            nodes,
            netns,
            quantum,
            slots,
            comm_budget.map(|b| (b, buffers == "partitioned")),
        ),
        GangCommand::Master {
            nodes,
            quantum,
            slots,
            node_ip,
            comm_budget,
            partitioned,
        } => {
            return master::run(master::MasterConfig {
                dir,
                nodes,
                slots,
                quantum: Duration::from_millis(quantum.max(10)),
                node_ip,
                budget: comm_budget.map(|bytes| launchers::Budget {
                    bytes,
                    partitioned,
                    slots,
                }),
            })
        }
        GangCommand::Node {
            node,
            master,
            listen,
            netns,
        } => {
            let port_file = dir.join(if master.is_loopback() {
                "port"
            } else {
                "node-port"
            });
            return node::run(node::NodeConfig {
                dir,
                node,
                master_ip: master,
                port_file,
                listen_ip: listen,
                netns,
            });
        }
        GangCommand::Down => down(&dir),
        GangCommand::Submit {
            ranks,
            nodes,
            name,
            wait,
            argv,
        } => submit(&dir, ranks, nodes, name, wait, argv),
        GangCommand::Queue { json } => queue(&dir, json),
        GangCommand::Matrix { json } => matrix(&dir, json),
        GangCommand::Nodes { json } => nodes(&dir, json),
        GangCommand::Cancel { id } => request(&dir, &Request::Cancel { id }).map(|_| 0),
        GangCommand::Switches { last, json } => switches(&dir, last, json),
        GangCommand::Logs { id, follow } => logs(&dir, id, follow).map(|(code, _)| code),
    };
    r.unwrap_or_else(|e| {
        eprintln!("phalanx gang: {e}");
        1
    })
}

fn up(
    dir: &PathBuf,
    nodes: u32,
    netns: bool,
    quantum: u64,
    slots: u32,
    budget: Option<(u64, bool)>,
) -> Result<i32, String> {
    if nodes == 0 || nodes > nodes::MAX_NODES {
        return Err(format!(
            "--nodes must be between 1 and {}",
            nodes::MAX_NODES
        ));
    }
    if request(dir, &Request::Queue).is_ok() {
        return Err(format!("a cluster is already up in {}", dir.display()));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let _ = std::fs::remove_file(dir.join("port"));
    let _ = std::fs::remove_file(dir.join("node-port"));
    // A restart (the master died; node daemons may live on) keeps the cluster's secret
    // and network; a fresh cluster gets new ones.
    let restart = nodes::any_alive(dir, nodes);
    if !restart {
        write_secret(dir)?;
    }
    let net = nodes::network(dir, nodes, netns, restart)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.join("master.log")).map_err(|e| e.to_string())?;
    let mut cmd = std::process::Command::new(&exe);
    launchers::new_session(&mut cmd);
    let child = cmd
        .arg("gang")
        .arg("--dir")
        .arg(dir)
        .arg("master")
        .args(["--nodes", &nodes.to_string()])
        .args(["--quantum", &quantum.to_string()])
        .args(["--slots", &slots.to_string()])
        .args(net.as_ref().map(|n| format!("--node-ip={}", n.bridge_ip)))
        .args(budget.map(|(b, _)| format!("--comm-budget={b}")))
        .args(budget.filter(|(_, p)| *p).map(|_| "--partitioned"))
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start the master: {e}"))?;
    nodes::start_daemons(dir, &exe, nodes, net.as_ref())?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let up = match request(dir, &Request::Nodes) {
            Ok(Reply::Nodes { nodes }) => nodes.iter().filter(|n| n.up).count(),
            _ => 0,
        };
        if up == nodes as usize {
            let port = std::fs::read_to_string(dir.join("port")).unwrap_or_default();
            println!(
                "phalanx gang: master pid {} on 127.0.0.1:{} with {nodes} nodes{} (state in {})",
                child.id(),
                port.trim(),
                match &net {
                    Some(n) => format!(" in network namespaces {}", n.names.join(", ")),
                    None => String::new(),
                },
                dir.display()
            );
            return Ok(0);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Nothing of a cluster that did not come up stays behind.
    // SAFETY: kill(2) on the master this call started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    nodes::clean_up(dir);
    Err(format!(
        "the cluster did not come up; see {} and {}",
        dir.join("master.log").display(),
        dir.join("nodes").display()
    ))
}

/// A fresh cluster secret, readable only by its owner.
fn write_secret(dir: &std::path::Path) -> Result<(), String> {
    let secret = phalanx_boot::auth::Secret::new()
        .map_err(|e| format!("no randomness for the secret: {e}"))?
        .to_hex();
    let path = dir.join("secret");
    let _ = std::fs::remove_file(&path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(secret.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Stops the master (which ends every job and tells the node daemons to exit), then
/// makes sure nothing is left: node daemons by their pid files, the namespaces.
fn down(dir: &std::path::Path) -> Result<i32, String> {
    let master_pid: Option<i32> = std::fs::read_to_string(dir.join("pid"))
        .ok()
        .and_then(|p| p.trim().parse().ok());
    let asked = request(dir, &Request::Shutdown);
    if let Some(pid) = master_pid.filter(|_| asked.is_ok()) {
        let t = Instant::now();
        // Its jobs end one by one (each bounded); then it exits.
        // SAFETY: kill(pid, 0) only checks that the master still exists.
        while unsafe { libc::kill(pid, 0) } == 0 && t.elapsed() < Duration::from_secs(120) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let left = nodes::clean_up(dir);
    match (asked, left) {
        (Ok(_), _) => {
            println!("phalanx gang: stopped");
            Ok(0)
        }
        (Err(_), true) => {
            println!("phalanx gang: the master was not running; cleaned up what was left");
            Ok(0)
        }
        (Err(e), false) => Err(e),
    }
}

/// Sends one request to the master of `dir`; its reply (an error reply is an `Err`).
fn request(dir: &std::path::Path, req: &Request) -> Result<Reply, String> {
    let secret = std::fs::read_to_string(dir.join("secret"))
        .map_err(|_| format!("no cluster in {} (phalanx gang up)", dir.display()))?;
    let port: u16 = std::fs::read_to_string(dir.join("port"))
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| format!("no cluster is up in {}", dir.display()))?;
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| format!("cannot reach the master on port {port}: {e}"))?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
    let ch = phalanx_gang::proto::read_challenge(&mut s)
        .map_err(|e| format!("no challenge from the master: {e}"))?;
    let hello = phalanx_gang::proto::proof(&secret, &ch.nonce);
    let mut text = serde_json::to_string(&hello).map_err(|e| e.to_string())?;
    text.push('\n');
    text += &serde_json::to_string(req).map_err(|e| e.to_string())?;
    text.push('\n');
    s.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(s.take(2 * MAX_LINE as u64))
        .read_line(&mut line)
        .map_err(|e| format!("no answer from the master: {e}"))?;
    match serde_json::from_str::<Reply>(&line) {
        Ok(Reply::Error { message }) => Err(message),
        Ok(r) => Ok(r),
        Err(_) => Err("no answer from the master".into()),
    }
}

fn submit(
    dir: &std::path::Path,
    ranks: u32,
    nodes: Option<u32>,
    name: String,
    wait: bool,
    argv: Vec<String>,
) -> Result<i32, String> {
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let nodes = match nodes {
        Some(n) => n,
        None => match request(dir, &Request::Nodes)? {
            Reply::Nodes { nodes } => ranks.min(nodes.iter().filter(|n| n.up).count() as u32),
            _ => ranks,
        },
    };
    let req = Request::Submit {
        name,
        ranks,
        nodes,
        argv,
        cwd: cwd.to_string_lossy().into_owned(),
    };
    let Reply::Submitted { id } = request(dir, &req)? else {
        return Err("unexpected answer".into());
    };
    println!("{id}");
    if !wait {
        return Ok(0);
    }
    let (_, job) = logs(dir, id, true)?;
    Ok(job.and_then(|j| j.exit_code).unwrap_or(1))
}

/// Prints job `id`'s output (following it until the job ends); the exit code for
/// `logs` and the job as it ended.
fn logs(dir: &std::path::Path, id: u64, follow: bool) -> Result<(i32, Option<JobRecord>), String> {
    let mut from = 0;
    loop {
        let Reply::Log {
            text,
            next,
            finished,
        } = request(dir, &Request::Logs { id, from })?
        else {
            return Err("unexpected answer".into());
        };
        print!("{text}");
        let _ = std::io::stdout().flush();
        let more = next > from;
        from = next;
        // The whole log in chunks; with -f until the job ended and nothing is left.
        if !more && (!follow || finished) {
            let job = jobs(dir)?.into_iter().find(|j| j.id == id);
            return Ok((0, job));
        }
        if !more {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn jobs(dir: &std::path::Path) -> Result<Vec<JobRecord>, String> {
    match request(dir, &Request::Queue)? {
        Reply::Jobs { jobs } => Ok(jobs),
        _ => Err("unexpected answer".into()),
    }
}

fn queue(dir: &std::path::Path, json: bool) -> Result<i32, String> {
    let jobs = jobs(dir)?;
    if json {
        println!(
            "{}",
            serde_json::to_string(&jobs).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    println!(
        "{:>6} {:<16} {:>2} {:>4} {:<12} {:>9}",
        "JOBID", "NAME", "ST", "SLOT", "NODES", "TIME"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    for j in jobs {
        let slot = j
            .placement
            .as_ref()
            .map_or("-".to_string(), |p| p.slot.to_string());
        let nodes = j.placement.as_ref().map_or("-".to_string(), |p| {
            p.nodes
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",")
        });
        let time = j.started_ms.map_or("0:00".to_string(), |s| {
            let end = j.ended_ms.unwrap_or(now);
            let secs = end.saturating_sub(s) / 1000;
            format!("{}:{:02}", secs / 60, secs % 60)
        });
        let name: String = j.name.chars().take(16).collect();
        println!(
            "{:>6} {:<16} {:>2} {:>4} {:<12} {:>9}",
            j.id,
            name,
            j.state.code(),
            slot,
            nodes,
            time
        );
        if matches!(j.state, JobState::Failed | JobState::Cancelled) {
            if let Some(m) = &j.message {
                println!("{:>6} {m}", "");
            }
        }
    }
    Ok(0)
}

fn matrix(dir: &std::path::Path, json: bool) -> Result<i32, String> {
    let Reply::Matrix { cells, current } = request(dir, &Request::Matrix)? else {
        return Err("unexpected answer".into());
    };
    if json {
        let v = serde_json::json!({ "cells": cells, "current": current });
        println!("{v}");
        return Ok(0);
    }
    let width = cells.first().map_or(0, |r| r.len());
    print!("{:>6}", "SLOT");
    for n in 0..width {
        print!(" {:>6}", format!("node{n}"));
    }
    println!();
    for (s, row) in cells.iter().enumerate() {
        let mark = if s as u32 == current { "*" } else { " " };
        print!("{:>5}{mark}", s);
        for c in row {
            print!(" {:>6}", c.map_or("-".to_string(), |j| j.to_string()));
        }
        println!();
    }
    Ok(0)
}

fn switches(dir: &std::path::Path, last: u32, json: bool) -> Result<i32, String> {
    let Reply::Switches { switches } = request(dir, &Request::Switches { last })? else {
        return Err("unexpected answer".into());
    };
    if json {
        println!(
            "{}",
            serde_json::to_string(&switches).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    println!(
        "{:>5} {:>5} {:>10} {:>10} {:>10} {:>9} {:>10}",
        "FROM", "TO", "HALT_us", "SWITCH_us", "RELEASE_us", "DGRAMS", "BYTES"
    );
    for s in switches {
        println!(
            "{:>5} {:>5} {:>10} {:>10} {:>10} {:>9} {:>10}{}",
            s.from_slot,
            s.to_slot,
            s.halt_us,
            s.switch_us,
            s.release_us,
            s.datagrams,
            s.bytes,
            s.warning.map_or(String::new(), |w| format!("  {w}"))
        );
    }
    Ok(0)
}

fn nodes(dir: &std::path::Path, json: bool) -> Result<i32, String> {
    let Reply::Nodes { nodes } = request(dir, &Request::Nodes)? else {
        return Err("unexpected answer".into());
    };
    if json {
        println!(
            "{}",
            serde_json::to_string(&nodes).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    println!(
        "{:>5} {:<8} {:>8} {:<22} {:>17} JOBS",
        "NODE", "STATE", "PID", "AGENT", "BUDGET_KiB"
    );
    for n in nodes {
        let jobs: Vec<String> = n.jobs.iter().map(|j| j.to_string()).collect();
        let budget = n.budget.map_or("-".into(), |b| {
            format!("{}/{}", n.budget_in_use >> 10, b >> 10)
        });
        println!(
            "{:>5} {:<8} {:>8} {:<22} {:>17} {}",
            n.node,
            n.state,
            n.pid.map_or("-".into(), |p| p.to_string()),
            n.agent.as_deref().unwrap_or("-"),
            budget,
            jobs.join(",")
        );
        if let Some(m) = &n.message {
            println!("{:>5} {m}", "");
        }
    }
    Ok(0)
}

/// A size in bytes with an optional `k`, `m` or `g` suffix.
fn parse_size(v: &str) -> Result<u64, String> {
    let t = v.trim().to_ascii_lowercase();
    let (num, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        _ => (t.as_str(), 0),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{v:?} is not a positive size in bytes"))
}
