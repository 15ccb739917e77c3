//! `phalanx gang node`: the node daemon — one per node, living in the node's network
//! namespace (with `up --netns`), starting and watching the ranks the job launchers
//! place on its node.
//!
//! Contract:
//! * It registers with the master ([`Request::RegisterNode`]: its index, its agent's
//!   address, its pid) over the master's authenticated port, then sends
//!   [`Request::Beat`] every [`BEAT`]. When the master goes away it reconnects every
//!   [`BEAT`] (reading the master's port afresh: a restarted master has a new one); it
//!   exits on [`Reply::Stop`] or SIGTERM. Its pid is in `DIR/nodes/N.pid`.
//! * Its agent listens on `--listen IP` (the node's address) for job launchers, at most
//!   [`MAX_JOBS`] at a time. Each connection must start with the cluster secret
//!   ([`Hello`], within [`HELLO_TIMEOUT`]); then it carries
//!   [`AgentRequest`]s in and [`AgentEvent`]s out. A rank is started exactly as
//!   `phalanx run` starts a local one ([`spawn_rank`]: own process group, PDEATHSIG,
//!   CPU binding, stdin from /dev/null) plus its working directory and, in a namespace,
//!   `PHALANX_IP=auto`; its output lines go back as events, and `Exited` follows the
//!   last of them (bounded by [`OUTPUT_DRAIN`]). At most [`MAX_RANKS`] ranks per job.
//! * The connection is the job's lifeline on this node: when it closes (the launcher
//!   ended or died), every rank it started gets SIGKILL and is reaped. When the daemon
//!   itself dies, even by SIGKILL, its ranks die with it (PDEATHSIG of the thread that
//!   forked them): a node that goes down leaves no orphan.

use crate::output::copy_lines;
use crate::signals::{pollfd, wait_readable};
use crate::spawn::{allowed_cpus, signal_group, spawn_rank, Program, ENV_IP};
use phalanx_boot::frame::{encode, LineReader, Next};
use phalanx_gang::proto::{
    same_secret, AgentEvent, AgentRequest, Hello, Reply, Request, SpawnSpec, BEAT, MAX_LINE,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Job launchers served at once.
pub const MAX_JOBS: usize = 64;
/// Ranks one job may start on this node.
pub const MAX_RANKS: usize = 4096;
/// Bound on a launcher's first line.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an ended rank's output may take to reach EOF before `Exited` is sent.
pub const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// The daemon's settings.
pub struct NodeConfig {
    pub dir: PathBuf,
    pub node: u32,
    /// The master's address (its port is read from `port_file`).
    pub master_ip: Ipv4Addr,
    pub port_file: PathBuf,
    /// The address the agent listens on.
    pub listen_ip: Ipv4Addr,
    /// In a network namespace: ranks get `PHALANX_IP=auto`.
    pub netns: bool,
}

/// Runs the node daemon until told to stop; its exit code.
pub fn run(cfg: NodeConfig) -> i32 {
    match serve(cfg) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("phalanx gang node: {e}");
            1
        }
    }
}

fn serve(cfg: NodeConfig) -> Result<(), String> {
    let secret = std::fs::read_to_string(cfg.dir.join("secret"))
        .map_err(|e| format!("cannot read the cluster secret: {e}"))?
        .trim()
        .to_string();
    let listener = TcpListener::bind((cfg.listen_ip, 0))
        .map_err(|e| format!("cannot listen on {}: {e}", cfg.listen_ip))?;
    let agent = listener.local_addr().map_err(|e| e.to_string())?;
    let nodes = cfg.dir.join("nodes");
    std::fs::create_dir_all(&nodes).map_err(|e| e.to_string())?;
    std::fs::write(
        nodes.join(format!("{}.pid", cfg.node)),
        std::process::id().to_string(),
    )
    .map_err(|e| e.to_string())?;
    let (s, netns) = (secret.clone(), cfg.netns);
    std::thread::Builder::new()
        .name("agent".into())
        .spawn(move || accept_jobs(listener, &s, netns))
        .map_err(|e| e.to_string())?;
    eprintln!(
        "phalanx gang node {}: pid {}, agent on {agent}",
        cfg.node,
        std::process::id()
    );
    loop {
        match master_session(&cfg, &secret, agent) {
            Ok(()) => return Ok(()),
            Err(e) => eprintln!("phalanx gang node {}: {e}; retrying", cfg.node),
        }
        std::thread::sleep(BEAT);
    }
}

/// One connection to the master: register, then beat until it closes (`Err`) or says
/// stop (`Ok`).
fn master_session(cfg: &NodeConfig, secret: &str, agent: SocketAddr) -> Result<(), String> {
    let port: u16 = std::fs::read_to_string(&cfg.port_file)
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .ok_or("the master's port is not known yet")?;
    let addr = SocketAddr::from((cfg.master_ip, port));
    let mut s = TcpStream::connect_timeout(&addr, HELLO_TIMEOUT)
        .map_err(|e| format!("cannot reach the master at {addr}: {e}"))?;
    let _ = s.set_write_timeout(Some(HELLO_TIMEOUT));
    let _ = s.set_read_timeout(Some(HELLO_TIMEOUT));
    let mut hello = encode(&Hello {
        secret: secret.to_string(),
    });
    hello.extend(encode(&Request::RegisterNode {
        node: cfg.node,
        agent: agent.to_string(),
        pid: std::process::id(),
    }));
    s.write_all(&hello).map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new((&s).take(MAX_LINE as u64))
        .read_line(&mut line)
        .map_err(|e| format!("no answer from the master: {e}"))?;
    match serde_json::from_str::<Reply>(&line) {
        Ok(Reply::Ok) => {}
        Ok(Reply::Error { message }) => return Err(format!("the master refused: {message}")),
        _ => return Err("no answer from the master".into()),
    }
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut reader = LineReader::new(MAX_LINE);
    let beat = encode(&Request::Beat);
    loop {
        let mut fds = [pollfd(s.as_raw_fd())];
        let _ = wait_readable(&mut fds, BEAT);
        loop {
            match reader.next_msg::<Reply, _>(&mut s) {
                Ok(Next::Msg(Reply::Stop)) => return Ok(()),
                Ok(Next::Msg(_)) => {}
                Ok(Next::Pending) => break,
                Ok(Next::Eof) => return Err("the master closed the connection".into()),
                Err(e) => return Err(format!("the master connection failed: {e}")),
            }
        }
        phalanx_boot::frame::send_line_blocking(&mut s, &beat, HELLO_TIMEOUT, true)
            .map_err(|e| format!("cannot reach the master: {e}"))?;
    }
}

/// The agent: one thread per job launcher, at most [`MAX_JOBS`].
fn accept_jobs(listener: TcpListener, secret: &str, netns: bool) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if active.load(Ordering::SeqCst) >= MAX_JOBS {
            continue; // dropped: the launcher fails to reach this node and says so
        }
        active.fetch_add(1, Ordering::SeqCst);
        let (secret, active) = (secret.to_string(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("job".into())
            .spawn(move || {
                serve_job(stream, &secret, netns);
                active.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            eprintln!("phalanx gang node: cannot start a thread for a job launcher");
        }
    }
}

/// A rank this node started for one launcher.
struct Local {
    rank: u32,
    child: Child,
    /// Output pipes that have not reached EOF yet, and their end notices.
    outputs: usize,
    done: Receiver<()>,
}

/// Serves one job launcher until its connection closes (module docs).
fn serve_job(stream: TcpStream, secret: &str, netns: bool) {
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut stream = stream;
    let writer = Arc::new(Mutex::new(write_half));
    let mut reader = LineReader::new(MAX_LINE);
    let _ = stream.set_read_timeout(Some(HELLO_TIMEOUT));
    let hello = reader.next_msg::<Hello, _>(&mut stream);
    if !matches!(hello, Ok(Next::Msg(ref h)) if same_secret(&h.secret, secret)) {
        return; // not authenticated: closed without a word
    }
    // Reads give up at once when nothing is there (the poll above them waits); writes,
    // from several threads under the writer's lock, block. (O_NONBLOCK would be shared
    // by both halves: a read timeout is not.)
    if stream
        .set_read_timeout(Some(Duration::from_millis(1)))
        .is_err()
    {
        return;
    }
    let cpus = allowed_cpus();
    let mut ranks: Vec<Local> = Vec::new();
    'serve: loop {
        let mut fds = [pollfd(stream.as_raw_fd())];
        let _ = wait_readable(&mut fds, Duration::from_millis(20));
        loop {
            match reader.next_msg::<AgentRequest, _>(&mut stream) {
                Ok(Next::Msg(AgentRequest::Spawn(spec))) => {
                    let ev = if ranks.len() >= MAX_RANKS {
                        AgentEvent::SpawnFailed {
                            rank: spec.rank,
                            message: format!("more than {MAX_RANKS} ranks on one node"),
                        }
                    } else {
                        match start(&spec, &cpus, netns, &writer) {
                            Ok(l) => {
                                let pid = l.child.id();
                                ranks.push(l);
                                AgentEvent::Spawned {
                                    rank: spec.rank,
                                    pid,
                                }
                            }
                            Err(e) => AgentEvent::SpawnFailed {
                                rank: spec.rank,
                                message: e.to_string(),
                            },
                        }
                    };
                    if send(&writer, &ev).is_err() {
                        break 'serve;
                    }
                }
                Ok(Next::Msg(AgentRequest::Signal { rank, sig })) => {
                    if let Some(l) = ranks.iter().find(|l| l.rank == rank) {
                        signal_group(l.child.id(), sig);
                    }
                }
                Ok(Next::Pending) => break,
                Ok(Next::Eof) | Err(_) => break 'serve,
            }
        }
        let mut i = 0;
        while i < ranks.len() {
            match ranks[i].child.try_wait() {
                Ok(Some(st)) => {
                    let mut l = ranks.swap_remove(i);
                    let deadline = Instant::now() + OUTPUT_DRAIN;
                    while l.outputs > 0 {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if l.done.recv_timeout(left).is_err() {
                            break;
                        }
                        l.outputs -= 1;
                    }
                    let ev = AgentEvent::Exited {
                        rank: l.rank,
                        status: st.into_raw(),
                    };
                    if send(&writer, &ev).is_err() {
                        break 'serve;
                    }
                }
                _ => i += 1,
            }
        }
    }
    // The lifeline is cut: nothing this launcher started survives it.
    for l in &mut ranks {
        signal_group(l.child.id(), libc::SIGKILL);
        let _ = l.child.kill();
        let _ = l.child.wait();
    }
}

/// Starts one rank with its output forwarded as events.
fn start(
    spec: &SpawnSpec,
    cpus: &[usize],
    netns: bool,
    writer: &Arc<Mutex<TcpStream>>,
) -> std::io::Result<Local> {
    let boot: SocketAddr = spec.boot.parse().map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad rendezvous address")
    })?;
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> =
        spec.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    if netns && !spec.env.iter().any(|(k, _)| k == ENV_IP) {
        env.push((ENV_IP.into(), "auto".into()));
    }
    let program = Program {
        prog: spec.prog.clone().into(),
        args: spec.args.iter().map(Into::into).collect(),
        env,
        cpus: if spec.bind { cpus.to_vec() } else { Vec::new() },
        cwd: Some(spec.cwd.clone().into()),
    };
    let mut child = spawn_rank(
        &program,
        spec.rank,
        spec.size,
        boot,
        &crate::hosts::Host::Local,
    )?;
    let (tx, done) = channel();
    let mut outputs = 0;
    let pipes: [(Option<Box<dyn Read + Send>>, bool); 2] = [
        (child.stdout.take().map(|p| Box::new(p) as _), false),
        (child.stderr.take().map(|p| Box::new(p) as _), true),
    ];
    for (pipe, stderr) in pipes {
        let Some(pipe) = pipe else { continue };
        let (writer, tx, rank) = (writer.clone(), tx.clone(), spec.rank);
        let ok = std::thread::Builder::new()
            .name(format!("out-{rank}"))
            .spawn(move || {
                copy_lines(pipe, &[], crate::output::MAX_LINE, |line| {
                    let ev = AgentEvent::Output {
                        rank,
                        stderr,
                        line: String::from_utf8_lossy(line).into_owned(),
                    };
                    // A lost launcher ends the job: the pipe is still drained.
                    let _ = send(&writer, &ev);
                });
                let _ = tx.send(());
            })
            .is_ok();
        if ok {
            outputs += 1;
        }
    }
    Ok(Local {
        rank: spec.rank,
        child,
        outputs,
        done,
    })
}

/// Writes one event under the writer's lock.
fn send(writer: &Mutex<TcpStream>, ev: &AgentEvent) -> std::io::Result<()> {
    let line = encode(ev);
    let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
    w.write_all(&line)
}
