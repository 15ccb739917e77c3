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
//!   [`MAX_JOBS`] at a time. Each connection must start with the proof of the cluster
//!   secret for the daemon's challenge and the launcher's own nonce ([`Hello`], within
//!   [`HELLO_TIMEOUT`] in all; at most [`MAX_UNAUTHENTICATED`] connections may be saying
//!   hello at once); then it carries [`AgentRequest`](phalanx_gang::proto::AgentRequest)s
//!   in and [`AgentEvent`](phalanx_gang::proto::AgentEvent)s out, every line sealed under
//!   the connection's key ([`phalanx_gang::seal`]: the ranks' environment, with the
//!   job's secret, is never readable on the wire), served by [`serve_launcher`] (its
//!   contract: ranks started as `phalanx run` starts them, plus `PHALANX_IP` (the node's
//!   address toward the launcher) in a namespace; output and exits as events; the
//!   connection is the job's lifeline on this node). A line that does not open (altered, replayed, reordered,
//!   dropped) or breaks the protocol ends the connection — and so the job's ranks here —
//!   with a line on the daemon's stderr naming the launcher's address and the reason.
//! * When the daemon itself is killed with SIGKILL its ranks die with it (PDEATHSIG of
//!   the thread that forked them); what a rank forked into its own group is then left
//!   to the master, which kills a lost node's daemon and whose launchers kill the job's
//!   groups.

use crate::serve::{serve_launcher, EventSink, Requests, ServeOptions};
use crate::signals::{pollfd, wait_readable};
use crate::spawn::{allowed_cpus, signal_group};
use phalanx_boot::frame::{encode, LineReader, Next};
use phalanx_gang::proto::{
    challenge, proof, read_challenge, Hello, Reply, Request, BEAT, MAX_LINE,
};
use phalanx_gang::seal::{accept, Opener, Sealer, MAX_SEALED_LINE};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Job launchers served at once.
pub const MAX_JOBS: usize = 64;
/// Bound on a launcher's first line.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon's settings.
pub struct NodeConfig {
    pub dir: PathBuf,
    pub node: u32,
    /// The master's address (its port is read from `port_file`).
    pub master_ip: Ipv4Addr,
    pub port_file: PathBuf,
    /// The address the agent listens on.
    pub listen_ip: Ipv4Addr,
    /// In a network namespace: ranks get `PHALANX_IP` (see `ServeOptions::ip_auto`).
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
    let ch = read_challenge(&mut s).map_err(|e| format!("no challenge from the master: {e}"))?;
    let mut hello = encode(&proof(secret, &ch.nonce));
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
                if let Some((reader, sealer, opener)) = ok {
                    if jobs.fetch_add(1, Ordering::SeqCst) < MAX_JOBS {
                        serve_job(stream, reader, sealer, opener, netns);
                    }
                    jobs.fetch_sub(1, Ordering::SeqCst);
                }
            });
        if spawned.is_err() {
            eprintln!("phalanx gang node: cannot start a thread for a job launcher");
        }
    }
}

/// Sends the launcher a challenge and reads its [`Hello`] within [`HELLO_TIMEOUT`] in
/// all (however slowly its bytes come); if it proves the cluster secret and carries the
/// launcher's nonce, the reader (with whatever followed the hello already buffered,
/// taking sealed lines) and this end of the sealed channel.
fn hello(stream: &TcpStream, secret: &str) -> Option<(LineReader, Sealer, Opener)> {
    let deadline = Instant::now() + HELLO_TIMEOUT;
    let mut reader = LineReader::new(1024);
    let mut s = stream;
    // The challenge first: the secret itself never travels.
    let ch = challenge().ok()?;
    s.set_write_timeout(Some(HELLO_TIMEOUT)).ok()?;
    s.write_all(&encode(&ch)).ok()?;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return None;
        }
        match reader.next_msg::<Hello, _>(&mut s) {
            Ok(Next::Msg(h)) => {
                let (sealer, opener) = accept(secret, &ch, &h)?;
                reader.set_limit(MAX_SEALED_LINE);
                // The challenge's short bound is not the session's.
                s.set_write_timeout(None).ok()?;
                return Some((reader, sealer, opener));
            }
            Ok(Next::Pending) => continue,
            Ok(Next::Eof) | Err(_) => return None,
        }
    }
}

/// Serves one authenticated job launcher until its connection closes
/// ([`serve_launcher`]), its lines sealed.
fn serve_job(
    mut stream: TcpStream,
    reader: LineReader,
    sealer: Sealer,
    opener: Opener,
    netns: bool,
) {
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "unknown address".into(), |a| a.to_string());
    // Reads give up at once when nothing is there (the poll in `serve_launcher` waits);
    // writes, from several threads under the writer's lock, block. (O_NONBLOCK would be
    // shared by both halves: a read timeout is not.)
    if stream
        .set_read_timeout(Some(Duration::from_millis(1)))
        .is_err()
    {
        return;
    }
    let writer = EventSink::sealed(Box::new(write_half), sealer);
    let opts = ServeOptions {
        cpus: allowed_cpus(),
        ip_auto: netns,
        stop: &TERMINATE,
        groups: &GROUPS,
    };
    if let Err(e) = serve_launcher(&mut stream, Requests::sealed(reader, opener), writer, &opts) {
        eprintln!(
            "phalanx gang node: closed the connection of the job launcher at {peer}, killing its ranks here: {e}"
        );
    }
}
