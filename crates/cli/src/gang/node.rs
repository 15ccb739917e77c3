//! `phalanx gang node`: the node daemon — one per node, living in the node's network
//! namespace (with `up --netns`), starting and watching the ranks the job launchers
//! place on its node.
//!
//! Contract:
//! * It registers with the master ([`Request::RegisterNode`]: its index, its agent's
//!   address, its pid) over the master's authenticated port, then sends
//!   [`Request::Beat`] every [`BEAT`]. When the master goes away it reconnects every
//!   [`BEAT`] (reading the master's port afresh: a restarted master has a new one); it
//!   exits on [`Reply::Stop`] or SIGTERM, killing the process groups of every rank it
//!   started first. Its pid is in `DIR/nodes/N.pid`.
//! * Its agent listens on `--listen IP` (the node's address) for job launchers, at most
//!   [`MAX_JOBS`] at a time. Each connection must start with the cluster secret
//!   ([`Hello`], within [`HELLO_TIMEOUT`] in all; at most [`MAX_UNAUTHENTICATED`]
//!   connections may be saying hello at once); then it carries
//!   [`AgentRequest`]s in and [`AgentEvent`]s out. A rank is started exactly as
//!   `phalanx run` starts a local one ([`spawn_rank`]: own process group, PDEATHSIG,
//!   CPU binding, stdin from /dev/null) plus its working directory and, in a namespace,
//!   `PHALANX_IP=auto`; its output lines go back as events (cut so that an event,
//!   JSON-escaped, stays within [`MAX_LINE`]), and `Exited` follows the last of them
//!   (bounded by [`OUTPUT_DRAIN`], without holding up other requests). At most
//!   [`MAX_RANKS`] ranks per job.
//! * The connection is the job's lifeline on this node: when it closes (the launcher
//!   ended or died), the process group of every rank it started — ended ones too — gets
//!   SIGKILL and the ranks are reaped. When the daemon itself is killed with SIGKILL its
//!   ranks die with it (PDEATHSIG of the thread that forked them); what a rank forked
//!   into its own group is then left to the master, which kills a lost node's daemon
//!   and whose launchers kill the job's groups.

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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    install_termination();
    loop {
        match master_session(&cfg, &secret, agent) {
            Ok(()) => break,
            Err(e) => eprintln!("phalanx gang node {}: {e}; retrying", cfg.node),
        }
        if TERMINATE.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(BEAT);
    }
    // Told to stop: the ranks' groups go first (PDEATHSIG would only take the ranks).
    kill_all_groups();
    Ok(())
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
        if TERMINATE.load(Ordering::SeqCst) {
            return Ok(());
        }
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

/// Connections still proving themselves (their hello), at most this many at a time.
pub const MAX_UNAUTHENTICATED: usize = 16;

/// Process groups of every rank this daemon started and has not seen killed: what a
/// stop (`Reply::Stop`, SIGTERM) kills before the daemon exits.
static GROUPS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Set by SIGTERM/SIGINT: the daemon ends (its ranks' groups first).
static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_terminate(_: libc::c_int) {
    TERMINATE.store(true, Ordering::SeqCst);
}

/// SIGTERM and SIGINT end the daemon at its next beat, after its ranks' groups.
fn install_termination() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(
            libc::SIGTERM,
            on_terminate as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGINT,
            on_terminate as *const () as libc::sighandler_t,
        );
    }
}

/// SIGKILL to every group this daemon started (module docs).
fn kill_all_groups() {
    let groups = GROUPS.lock().unwrap_or_else(|p| p.into_inner());
    for &g in groups.iter() {
        signal_group(g, libc::SIGKILL);
    }
}

/// The agent: one thread per job launcher, at most [`MAX_JOBS`] authenticated ones
/// and [`MAX_UNAUTHENTICATED`] still saying hello.
fn accept_jobs(listener: TcpListener, secret: &str, netns: bool) {
    let jobs = Arc::new(AtomicUsize::new(0));
    let hellos = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if hellos.load(Ordering::SeqCst) >= MAX_UNAUTHENTICATED {
            continue; // dropped: a real launcher fails to reach this node and says so
        }
        hellos.fetch_add(1, Ordering::SeqCst);
        let (secret, jobs, hellos) = (secret.to_string(), jobs.clone(), hellos.clone());
        let spawned = std::thread::Builder::new()
            .name("job".into())
            .spawn(move || {
                let ok = hello(&stream, &secret);
                hellos.fetch_sub(1, Ordering::SeqCst);
                if let Some(reader) = ok {
                    if jobs.fetch_add(1, Ordering::SeqCst) < MAX_JOBS {
                        serve_job(stream, reader, netns);
                    }
                    jobs.fetch_sub(1, Ordering::SeqCst);
                }
            });
        if spawned.is_err() {
            eprintln!("phalanx gang node: cannot start a thread for a job launcher");
        }
    }
}

/// Reads the launcher's [`Hello`] within [`HELLO_TIMEOUT`] in all (however slowly its
/// bytes come); if it carries the cluster secret, the reader (with whatever followed
/// the hello already buffered).
fn hello(stream: &TcpStream, secret: &str) -> Option<LineReader> {
    let deadline = Instant::now() + HELLO_TIMEOUT;
    let mut reader = LineReader::new(1024);
    let mut s = stream;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return None;
        }
        match reader.next_msg::<Hello, _>(&mut s) {
            Ok(Next::Msg(h)) if same_secret(&h.secret, secret) => {
                reader.set_limit(MAX_LINE);
                return Some(reader);
            }
            Ok(Next::Pending) => continue,
            Ok(Next::Msg(_) | Next::Eof) | Err(_) => return None,
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
    /// Its exit status and until when its output may still drain, once it ended.
    ended: Option<(i32, Instant)>,
}

/// Serves one authenticated job launcher until its connection closes (module docs).
fn serve_job(stream: TcpStream, mut reader: LineReader, netns: bool) {
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut stream = stream;
    let writer = Arc::new(Mutex::new(write_half));
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
    // Every group started for this launcher, also of ranks that ended: what they left
    // behind goes when the lifeline is cut.
    let mut groups: Vec<u32> = Vec::new();
    'serve: loop {
        let mut fds = [pollfd(stream.as_raw_fd())];
        let _ = wait_readable(&mut fds, Duration::from_millis(20));
        loop {
            match reader.next_msg::<AgentRequest, _>(&mut stream) {
                Ok(Next::Msg(AgentRequest::Spawn(spec))) => {
                    let ev = if groups.len() >= MAX_RANKS {
                        AgentEvent::SpawnFailed {
                            rank: spec.rank,
                            message: format!("more than {MAX_RANKS} ranks on one node"),
                        }
                    } else {
                        match start(&spec, &cpus, netns, &writer) {
                            Ok(l) => {
                                let pid = l.child.id();
                                groups.push(pid);
                                GROUPS.lock().unwrap_or_else(|p| p.into_inner()).push(pid);
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
        // Ended ranks: `Exited` once their output is all out (or its bound passed),
        // without holding up the requests of the others.
        let now = Instant::now();
        let mut i = 0;
        while i < ranks.len() {
            let l = &mut ranks[i];
            if l.ended.is_none() {
                if let Ok(Some(st)) = l.child.try_wait() {
                    l.ended = Some((st.into_raw(), now + OUTPUT_DRAIN));
                }
            }
            while l.outputs > 0 && l.done.try_recv().is_ok() {
                l.outputs -= 1;
            }
            match l.ended {
                Some((status, until)) if l.outputs == 0 || now >= until => {
                    let ev = AgentEvent::Exited {
                        rank: l.rank,
                        status,
                    };
                    ranks.swap_remove(i);
                    if send(&writer, &ev).is_err() {
                        break 'serve;
                    }
                }
                _ => i += 1,
            }
        }
    }
    // The lifeline is cut: nothing this launcher started survives it.
    for &g in &groups {
        signal_group(g, libc::SIGKILL);
    }
    for l in &mut ranks {
        let _ = l.child.kill();
        let _ = l.child.wait();
    }
    GROUPS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|g| !groups.contains(g));
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
                // Lines cut so that, escaped as JSON (a control byte takes six), the
                // event still fits in a line.
                copy_lines(pipe, &[], (MAX_LINE as u64 - 1024) / 6, |line| {
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
        ended: None,
    })
}

/// Writes one event under the writer's lock.
fn send(writer: &Mutex<TcpStream>, ev: &AgentEvent) -> std::io::Result<()> {
    let line = encode(ev);
    let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
    w.write_all(&line)
}
