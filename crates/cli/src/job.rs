//! The launcher's job: spawn the ranks, run the rendezvous, supervise, finalize, tear down.
//!
//! Contract:
//! - [`run`] returns the launcher's exit code only after every rank has been reaped and every
//!   rank's process group has been sent SIGKILL (so nothing a rank forked survives either).
//! - Ranks run where `cfg.hosts` says: on this host, in network namespaces of it, or on
//!   agents' hosts (node daemons, ssh). With other hosts the rendezvous listens on
//!   0.0.0.0, each rank is told the address that reaches the launcher from its host, and
//!   the ranks of this host bind that address too (`PHALANX_IP`, unless set), so the
//!   others can reach them.
//! - Start-up: all ranks must say hello within the start-up timeout, on alike hosts; then
//!   every rank gets the same table. A rank that exits 0 without ever connecting is taken for
//!   a non-phalanx program: fine if no rank connects (`phalanx run -n 2 hostname`), a failure
//!   otherwise.
//! - The first failure wins and is named on stderr as `phalanx: rank R <reason>`: a non-zero
//!   exit, death by a signal, exit 0 without `Drained`, or the rank's connection closing
//!   before `Drained`. Then every rank is sent `Abort`, its group SIGTERM, and SIGKILL after
//!   the grace period (at once on a second Ctrl-C). Exit code: the rank's code, 128+signal,
//!   else 1; 128+signal for a signal to the launcher; 124 for `--timeout`; 2 if the program
//!   cannot be spawned.
//! - Shared memory: after the table, each host's ranks get one decision
//!   (`LauncherMsg::Shm`) from their reports: against it as soon as one failed (said once),
//!   for it when all joined; a rank that had to join (`PHALANX_TRANSPORT=shm`) and could
//!   not fails the job.
//! - Finalize: once every rank has sent `Drained`, every rank gets `Release`; the job
//!   succeeds when all ranks then exit 0. Finalize warnings and stats lines are printed at
//!   the end.
//! - `--timeout`: every connected rank gets `Query`; statuses are collected for up to
//!   [`QUERY_WINDOW`] and printed one line per rank, then the job is torn down.

#[path = "job_spawn.rs"]
mod job_spawn;
#[path = "remote.rs"]
mod remote;
#[path = "stuck.rs"]
mod stuck;
#[path = "suspend.rs"]
mod suspend;

use crate::agents::Agents;
use crate::hosts::Host;
use crate::output::{self, Dest};
use crate::rendezvous;
use crate::signals::{pollfd, wait_readable, Signals};
use crate::spawn::{self, spawn_rank, Program};
use crate::status::{describe, signal_text};
use phalanx_boot::frame::{encode, send_line_blocking, LineReader, Next};
use phalanx_boot::{
    auth, check_hosts, BootError, Endpoint, HostInfo, LauncherMsg, RankMsg, Secret, ShmOutcome,
    Table, MAX_LINE,
};
use rand::RngCore;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// Longest sleep of the event loop (SIGCHLD and socket readiness wake it earlier).
const TICK: Duration = Duration::from_millis(100);
/// How long `--timeout` waits for the ranks' status replies.
pub const QUERY_WINDOW: Duration = Duration::from_secs(1);
/// How long a closed connection may precede the rank's exit before it counts as the failure
/// itself (so a crash is reported by its exit status, not as a lost connection).
const CONN_LOSS_GRACE: Duration = Duration::from_millis(500);
/// Bound on writing one control message to a rank.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait to hand a new connection its challenge (a few dozen bytes).
const CHALLENGE_SEND: Duration = Duration::from_millis(100);
/// Bound on writing `Abort` to a rank during teardown.
const ABORT_SEND_TIMEOUT: Duration = Duration::from_millis(100);
/// How long output threads may take to reach EOF once all ranks are gone.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);
/// Messages read from one connection per loop iteration (fairness bound).
const MAX_MSGS_PER_READ: usize = 256;

/// Everything `phalanx run` was asked to do.
pub struct Config {
    /// Number of ranks.
    pub size: u32,
    /// The host of every rank (`size` entries).
    pub hosts: Vec<Host>,
    /// `--boot-ip`: the launcher's address for namespace hosts.
    pub boot_ip: Option<Ipv4Addr>,
    /// What to run.
    pub program: Program,
    /// Prefix forwarded lines with `[rank] `.
    pub tag_output: bool,
    /// `--timeout`: wall-clock limit of the whole job.
    pub timeout: Option<Duration>,
    /// Limit for all ranks to connect.
    pub startup_timeout: Duration,
    /// Time between SIGTERM and SIGKILL when tearing down.
    pub kill_grace: Duration,
    /// The job manager's cluster secret, for `node:` hosts.
    pub agent_secret: Option<std::path::PathBuf>,
    /// How ssh hosts are reached (set when the job has any).
    pub ssh: Option<crate::agents::SshSettings>,
    /// Where a halt's figures go (JSON: `ms`, `datagrams`, `bytes`, `save_us`), for the
    /// job manager's switch records.
    pub halt_report: Option<std::path::PathBuf>,
    /// `--stats`: the per-job summary at exit ([`crate::job_stats`]).
    pub stats: Option<crate::job_stats::StatsOut>,
    /// `--trace FILE`: the job's timeline ([`crate::job_trace`]).
    pub trace: Option<std::path::PathBuf>,
}

/// Why the job failed, and the launcher's exit code.
struct Failure {
    msg: String,
    code: i32,
}

impl Failure {
    fn new(msg: impl Into<String>, code: i32) -> Failure {
        Failure {
            msg: msg.into(),
            code,
        }
    }
}

struct Conn {
    stream: TcpStream,
    reader: LineReader,
    /// The challenge this connection must answer before it is a rank's.
    nonce: String,
}

impl Conn {
    fn new(stream: TcpStream, nonce: String) -> Conn {
        Conn {
            stream,
            reader: LineReader::new(MAX_LINE),
            nonce,
        }
    }
}

/// The launcher's view of one rank.
struct Rank {
    /// The process, when the launcher started it (else `agent` did).
    child: Option<Child>,
    /// The node daemon that started it.
    agent: Option<usize>,
    pid: u32,
    exit: Option<ExitStatus>,
    endpoint: Option<Endpoint>,
    conn: Option<Conn>,
    conn_lost: Option<Instant>,
    drained: bool,
    warning: Option<String>,
    /// Its counters, sent at Finalize under `--stats`.
    stats: Option<phalanx_boot::RankStats>,
    status: Option<String>,
    /// With `status`: the ranks whose part it waits for in a collective.
    waits_for: Vec<u32>,
    /// What the rank reported about joining its host's shared memory.
    shm: Option<ShmOutcome>,
    /// Its answer to the last halt (see [`suspend`]).
    halted: Option<suspend::Halted>,
    /// Started by a spawn request (it reports no shared-memory outcome).
    spawned: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Rendezvous,
    Running,
    Released,
}

struct Job {
    cfg: Config,
    signals: Signals,
    /// The rendezvous listeners (none once every rank has connected).
    listeners: Vec<TcpListener>,
    pending: Vec<Conn>,
    ranks: Vec<Rank>,
    job_key: u64,
    /// The job's secret, which every rank proves it knows at start-up.
    secret: Secret,
    /// Boot connections refused for a wrong or missing proof.
    refused: u32,
    phase: Phase,
    started: Instant,
    query_until: Option<Instant>,
    /// Ranks left waiting by a rank in Finalize ([`stuck`]).
    watch: stuck::Watch,
    outputs: usize,
    outputs_done: Receiver<()>,
    /// The ranks of each host (known once the table is sent), and whether that host's
    /// shared-memory decision has been sent.
    host_groups: Vec<(Vec<usize>, bool)>,
    /// The node daemons that started ranks of this job.
    agents: Option<Agents>,
    /// Each rank's launcher address (spawned ranks use their requester's).
    boots: Vec<SocketAddr>,
    /// What ranks on this host run with (spawned ones replace program and arguments).
    local_program: Program,
    /// For the output threads of spawned ranks.
    done_tx: Option<std::sync::mpsc::Sender<()>>,
    /// The spawn in progress, and those waiting ([`job_spawn`]).
    spawning: Option<job_spawn::Spawning>,
    spawn_queue: std::collections::VecDeque<(usize, phalanx_boot::SpawnRequest)>,
    /// `--trace`: the timeline being gathered.
    timeline: Option<crate::job_trace::Timeline>,
}

/// Runs the job described by `cfg`; returns the launcher's exit code.
pub fn run(cfg: Config) -> i32 {
    spawn::raise_nofile_limit();
    let signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => return fatal(&format!("cannot install signal handlers: {e}")),
    };
    // One listener per address the ranks reach us at, and only those.
    let (listeners, boots) = match rendezvous::listen(&cfg) {
        Ok(x) => x,
        Err(e) => return fatal(&e),
    };
    // Ranks of this machine in a job with other hosts must be reachable from them: they
    // bind the address the others reach the launcher at, not loopback (their own copy
    // of the program's environment: not for the agents' ranks).
    // The job's secret reaches every rank in its environment, never on the wire.
    let secret = match Secret::new() {
        Ok(s) => s,
        Err(e) => return fatal(&format!("cannot make the job's secret: {e}")),
    };
    let mut cfg = cfg;
    (cfg.program.env).push((phalanx_boot::ENV_SECRET.into(), secret.to_hex().into()));
    if cfg.hosts.iter().any(|h| matches!(h, Host::Netns(_))) {
        // Ranks in this machine's namespaces share its CPUs with its own ranks.
        let here = cfg
            .hosts
            .iter()
            .filter(|h| matches!(h, Host::Local | Host::Netns(_)))
            .count();
        let v = (spawn::ENV_MACHINE_RANKS.into(), here.to_string().into());
        cfg.program.env.push(v);
    }
    let mut local_program = cfg.program.clone();
    if let Some(out) = boots
        .iter()
        .map(SocketAddr::ip)
        .find(|ip| !ip.is_loopback())
    {
        let ip = spawn::ENV_IP;
        let set = local_program.env.iter().any(|(k, _)| k == ip) || std::env::var_os(ip).is_some();
        if !set {
            local_program.env.push((ip.into(), out.to_string().into()));
        }
    }
    let (done_tx, outputs_done) = channel();
    let mut job = Job {
        signals,
        listeners,
        pending: Vec::new(),
        ranks: Vec::with_capacity(cfg.size as usize),
        job_key: rand::rngs::OsRng.next_u64(),
        secret,
        refused: 0,
        phase: Phase::Rendezvous,
        started: Instant::now(),
        query_until: None,
        watch: stuck::Watch::default(),
        outputs: 0,
        outputs_done,
        host_groups: Vec::new(),
        agents: None,
        boots: boots.clone(),
        local_program: local_program.clone(),
        done_tx: Some(done_tx.clone()),
        spawning: None,
        spawn_queue: Default::default(),
        timeline: (cfg.trace.clone())
            .map(|p| crate::job_trace::Timeline::new(p, cfg.size as usize)),
        cfg,
    };
    let (secret, ssh) = (job.cfg.agent_secret.as_deref(), job.cfg.ssh.as_ref());
    let of_rank = match Agents::connect(&job.cfg.hosts, secret, ssh, job.cfg.tag_output) {
        Ok((agents, of_rank)) => {
            job.agents = Some(agents);
            of_rank
        }
        Err(e) => return job.finish(Some(Failure::new(e, 2))),
    };
    for rank in 0..job.cfg.size {
        let (boot, host) = (boots[rank as usize], &job.cfg.hosts[rank as usize]);
        if let (Some(i), Some(agents)) = (of_rank[rank as usize], job.agents.as_mut()) {
            let spec = remote::spec(&job.cfg, rank, boot, agents.is_ssh(i));
            if let Err(e) = agents.spawn(i, spec) {
                // The agent's own account (ssh's words, say) says more than a write
                // that failed: it is on its way, give it a moment.
                let f = job.loss_reason().unwrap_or_else(|| Failure::new(e, 2));
                return job.finish(Some(f));
            }
            job.ranks.push(Rank::new(None, Some(i), 0));
            continue;
        }
        let program = if *host == Host::Local {
            &local_program
        } else {
            &job.cfg.program
        };
        let mut child = match spawn_rank(program, rank, job.cfg.size, boot, host) {
            Ok(c) => c,
            Err(e) => {
                let prog = job.cfg.program.prog.to_string_lossy().into_owned();
                let f = Failure::new(format!("cannot start {prog} (rank {rank}): {e}"), 2);
                return job.finish(Some(f));
            }
        };
        let pipes = pipes_of(&mut child);
        let pid = child.id();
        job.ranks.push(Rank::new(Some(child), None, pid));
        for (src, dest) in pipes {
            if let Err(e) = output::forward(rank, src, dest, job.cfg.tag_output, done_tx.clone()) {
                return job.finish(Some(Failure::new(
                    format!("cannot start output thread: {e}"),
                    1,
                )));
            }
            job.outputs += 1;
        }
    }
    drop(done_tx);
    let outcome = job.supervise();
    job.finish(outcome.err())
}

/// A rank's stdout and stderr, for the output threads.
fn pipes_of(child: &mut Child) -> Vec<(Box<dyn std::io::Read + Send>, Dest)> {
    let out = child
        .stdout
        .take()
        .map(|p| (Box::new(p) as Box<dyn std::io::Read + Send>, Dest::Stdout));
    let err = child
        .stderr
        .take()
        .map(|p| (Box::new(p) as Box<dyn std::io::Read + Send>, Dest::Stderr));
    out.into_iter().chain(err).collect()
}

fn fatal(msg: &str) -> i32 {
    eprintln!("phalanx: {msg}");
    1
}

impl Job {
    /// The event loop; returns when the job succeeded or on the first failure.
    fn supervise(&mut self) -> Result<(), Failure> {
        loop {
            self.wait_events();
            if self.signals.take_suspend() {
                self.suspend()?;
            }
            if let Some(sig) = self.signals.take_termination() {
                return Err(Failure::new(
                    format!("interrupted by {}; terminating all ranks", signal_text(sig)),
                    128 + sig,
                ));
            }
            self.accept();
            self.read_pending()?;
            for r in 0..self.ranks.len() {
                self.read_rank(r)?;
            }
            self.reap()?;
            self.agent_events()?;
            self.decide_shm()?;
            self.check_lost()?;
            if self.phase == Phase::Rendezvous && self.ranks.iter().all(|r| r.endpoint.is_some()) {
                self.send_table()?;
            }
            self.spawn_progress()?;
            if self.phase == Phase::Running && self.ranks.iter().all(|r| r.drained) {
                let release = encode(&LauncherMsg::Release);
                self.broadcast(&release, SEND_TIMEOUT);
                self.phase = Phase::Released;
                if let Some(t) = self.timeline.as_mut() {
                    t.mark("every rank drained: released");
                }
            }
            if self.ranks.iter().all(|r| r.exit.is_some()) {
                // Every exit was classified as fine by `reap`, or it would have failed.
                return Ok(());
            }
            self.watch_stuck()?;
            self.check_deadlines()?;
        }
    }

    /// Sleeps until a signal, a socket event or the next deadline (at most [`TICK`]).
    fn wait_events(&mut self) {
        let mut fds = vec![pollfd(self.signals.fd())];
        fds.extend(self.listeners.iter().map(|l| pollfd(l.as_raw_fd())));
        fds.extend(self.pending.iter().map(|c| pollfd(c.stream.as_raw_fd())));
        fds.extend(
            self.ranks
                .iter()
                .filter_map(|r| r.conn.as_ref())
                .map(|c| pollfd(c.stream.as_raw_fd())),
        );
        let now = Instant::now();
        let wait = self
            .deadlines()
            .into_iter()
            .map(|d| d.saturating_duration_since(now))
            .fold(TICK, Duration::min);
        if let Err(e) = wait_readable(&mut fds, wait) {
            eprintln!("phalanx: poll failed: {e}");
            std::thread::sleep(wait);
        }
        self.signals.drain();
    }

    fn deadlines(&self) -> Vec<Instant> {
        let mut d = Vec::new();
        if self.phase == Phase::Rendezvous {
            d.push(self.started + self.cfg.startup_timeout);
        }
        if let Some(t) = self.cfg.timeout {
            d.push(self.started + t);
        }
        d.extend(self.query_until);
        d.extend(self.watch.next);
        d.extend(
            self.ranks
                .iter()
                .filter_map(|r| r.conn_lost)
                .map(|t| t + CONN_LOSS_GRACE),
        );
        d
    }

    fn accept(&mut self) {
        for i in 0..self.listeners.len() {
            self.accept_on(i);
        }
    }

    fn accept_on(&mut self, i: usize) {
        loop {
            match self.listeners[i].accept() {
                Ok((stream, _)) => {
                    // More pending connections than ranks can only be strangers.
                    if self.pending.len() >= self.ranks.len() + 16 {
                        continue;
                    }
                    // The challenge first: nothing else goes to a connection that has
                    // not proved it knows the job's secret.
                    let Ok(nonce) = auth::new_nonce() else {
                        continue;
                    };
                    let challenge = LauncherMsg::Challenge {
                        nonce: nonce.clone(),
                    };
                    let mut stream = stream;
                    if send_line_blocking(&mut stream, &encode(&challenge), CHALLENGE_SEND, false)
                        .is_ok()
                        && stream.set_nonblocking(true).is_ok()
                    {
                        let _ = stream.set_nodelay(true);
                        self.pending.push(Conn::new(stream, nonce));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    eprintln!("phalanx: warning: accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Reads `Hello` from connections not yet tied to a rank.
    fn read_pending(&mut self) -> Result<(), Failure> {
        let mut i = 0;
        while i < self.pending.len() {
            let conn = &mut self.pending[i];
            match conn.reader.next_msg::<RankMsg, _>(&mut conn.stream) {
                Ok(Next::Pending) => i += 1,
                Ok(Next::Msg(RankMsg::Hello(h))) => {
                    let conn = self.pending.swap_remove(i);
                    if !auth::check(&self.secret, &conn.nonce, h.rank, &h.proof) {
                        self.refused += 1;
                        let from = conn.stream.peer_addr().map(|a| a.to_string());
                        eprintln!(
                            "phalanx: warning: refused a boot connection from {} claiming rank {}: it does not know the job's secret ({} refused)",
                            from.unwrap_or_else(|_| "?".into()),
                            h.rank,
                            self.refused
                        );
                        continue;
                    }
                    let r = h.rank as usize;
                    if r >= self.ranks.len() || self.ranks[r].endpoint.is_some() {
                        eprintln!(
                            "phalanx: warning: ignoring a boot connection claiming rank {} (out of range or already connected)",
                            h.rank
                        );
                        continue;
                    }
                    if let Some(f) = self.non_phalanx_exit() {
                        return Err(f);
                    }
                    if let Some(t) = self.timeline.as_mut() {
                        let host = &h.endpoint.host;
                        t.hello(r, &host.boot_id, host.netns_ino, h.clock_ns);
                    }
                    self.ranks[r].endpoint = Some(h.endpoint);
                    self.ranks[r].conn = Some(conn);
                }
                Ok(Next::Msg(other)) => {
                    eprintln!(
                        "phalanx: warning: ignoring a boot connection that began with {other:?}"
                    );
                    self.pending.swap_remove(i);
                }
                Ok(Next::Eof) | Err(BootError::LauncherGone) => {
                    self.pending.swap_remove(i);
                }
                Err(e) => {
                    eprintln!("phalanx: warning: ignoring a boot connection: {e}");
                    self.pending.swap_remove(i);
                }
            }
        }
        Ok(())
    }

    /// Reads whatever rank `r` has sent.
    fn read_rank(&mut self, r: usize) -> Result<(), Failure> {
        let rank = &mut self.ranks[r];
        let Some(conn) = rank.conn.as_mut() else {
            return Ok(());
        };
        for _ in 0..MAX_MSGS_PER_READ {
            match conn.reader.next_msg::<RankMsg, _>(&mut conn.stream) {
                Ok(Next::Msg(RankMsg::Status { text, waits_for })) => {
                    rank.status = Some(text);
                    rank.waits_for = waits_for;
                }
                Ok(Next::Msg(RankMsg::Halted {
                    datagrams,
                    bytes,
                    ms,
                    save_us,
                    error,
                })) => {
                    rank.halted = Some(suspend::Halted {
                        datagrams,
                        bytes,
                        ms,
                        save_us,
                        error,
                    })
                }
                Ok(Next::Msg(RankMsg::Drained { warning })) => {
                    rank.drained = true;
                    rank.warning = warning;
                }
                Ok(Next::Msg(RankMsg::Trace(chunk))) => {
                    if let Some(t) = self.timeline.as_mut() {
                        t.chunk(r, chunk);
                    }
                }
                Ok(Next::Msg(RankMsg::Stats(st))) => {
                    rank.stats = Some(st.bounded());
                }
                Ok(Next::Msg(RankMsg::Spawn(req))) => {
                    self.spawn_requested(r, req)?;
                    return Ok(());
                }
                Ok(Next::Msg(RankMsg::Shm(outcome))) => {
                    if rank.spawned || rank.shm.is_some() {
                        return Err(Failure::new(
                            format!("rank {r} reported its shared-memory join twice"),
                            1,
                        ));
                    }
                    rank.shm = Some(outcome);
                }
                Ok(Next::Msg(RankMsg::Hello(_))) => {
                    return Err(Failure::new(format!("rank {r} sent a second hello"), 1));
                }
                Ok(Next::Pending) => return Ok(()),
                Ok(Next::Eof) | Err(BootError::LauncherGone) => {
                    rank.conn = None;
                    if !rank.drained {
                        rank.conn_lost = Some(Instant::now());
                    }
                    return Ok(());
                }
                Err(e) => {
                    return Err(Failure::new(format!("rank {r}: {e}"), 1));
                }
            }
        }
        Ok(())
    }

    /// Collects exited ranks and decides whether each exit fails the job.
    fn reap(&mut self) -> Result<(), Failure> {
        for r in 0..self.ranks.len() {
            if self.ranks[r].exit.is_some() {
                continue;
            }
            let Some(child) = self.ranks[r].child.as_mut() else {
                continue;
            };
            // Not reaped until the end: the zombie keeps the group id ours (`finish`).
            let status = match spawn::exit_of(child) {
                Ok(Some(s)) => s,
                Ok(None) => continue,
                Err(e) => return Err(Failure::new(format!("cannot wait for rank {r}: {e}"), 1)),
            };
            self.exited(r, status)?;
        }
        Ok(())
    }

    /// Rank `r` ended with `status`: is that a failure?
    fn exited(&mut self, r: usize, status: ExitStatus) -> Result<(), Failure> {
        self.ranks[r].exit = Some(status);
        if let Some(t) = self.timeline.as_mut() {
            t.mark(format!("rank {r} exited ({status})"));
        }
        // Whatever it sent before exiting (typically `Drained`) is already buffered.
        self.read_rank(r)?;
        // A required shared-memory join that failed is the cause, not the exit.
        self.decide_shm()?;
        self.judge_exit(r, status)
    }

    fn judge_exit(&self, r: usize, status: ExitStatus) -> Result<(), Failure> {
        let rank = &self.ranks[r];
        if !status.success() {
            let (what, code) = describe(status);
            return Err(Failure::new(format!("rank {r} {what}"), code));
        }
        if rank.drained {
            return Ok(());
        }
        if rank.endpoint.is_none() {
            return match self.non_phalanx_exit() {
                Some(f) if self.ranks.iter().any(|x| x.endpoint.is_some()) => Err(f),
                _ => Ok(()),
            };
        }
        Err(Failure::new(
            format!("rank {r} exited without completing Finalize"),
            1,
        ))
    }

    /// The failure for a rank that exited 0 without ever connecting, if there is one.
    fn non_phalanx_exit(&self) -> Option<Failure> {
        let r = self
            .ranks
            .iter()
            .position(|x| x.endpoint.is_none() && x.exit.is_some_and(|s| s.success()))?;
        Some(Failure::new(
            format!("rank {r} exited without connecting to the launcher (not a phalanx program?)"),
            1,
        ))
    }

    /// A connection closed before `Drained` fails the job if its rank does not exit soon.
    fn check_lost(&self) -> Result<(), Failure> {
        let now = Instant::now();
        for (r, rank) in self.ranks.iter().enumerate() {
            if rank.exit.is_none() && rank.conn_lost.is_some_and(|t| now >= t + CONN_LOSS_GRACE) {
                return Err(Failure::new(
                    format!(
                        "rank {r} closed its connection to the launcher before completing Finalize"
                    ),
                    1,
                ));
            }
        }
        Ok(())
    }

    fn send_table(&mut self) -> Result<(), Failure> {
        let endpoints: Vec<Endpoint> = self
            .ranks
            .iter()
            .filter_map(|r| r.endpoint.clone())
            .collect();
        let hosts: Vec<(u32, &HostInfo)> = endpoints
            .iter()
            .enumerate()
            .map(|(r, e)| (r as u32, &e.host))
            .collect();
        check_hosts(&hosts).map_err(|m| Failure::new(m, 1))?;
        let mut groups: Vec<((&str, u64), Vec<usize>)> = Vec::new();
        for (r, e) in endpoints.iter().enumerate() {
            let key = (e.host.boot_id.as_str(), e.host.netns_ino);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(r),
                None => groups.push((key, vec![r])),
            }
        }
        self.host_groups = groups.into_iter().map(|(_, v)| (v, false)).collect();
        let table = encode(&LauncherMsg::Table(Table {
            job_key: self.job_key,
            endpoints,
        }));
        self.broadcast(&table, SEND_TIMEOUT);
        self.phase = Phase::Running;
        if let Some(t) = self.timeline.as_mut() {
            t.mark("every rank connected: table sent");
        }
        // The listeners stay open: spawned ranks connect to them (`job_spawn`).
        self.pending.clear();
        Ok(())
    }

    /// Decides shared memory for each host whose ranks have reported enough (see
    /// `phalanx_boot::msg`): against it as soon as one rank failed, for it once all joined.
    /// A failure where shared memory was required fails the job, naming the rank; a
    /// fallback is said once per host.
    fn decide_shm(&mut self) -> Result<(), Failure> {
        for g in 0..self.host_groups.len() {
            if self.host_groups[g].1 {
                continue;
            }
            let members = self.host_groups[g].0.clone();
            let failed = members.iter().find_map(|&r| match &self.ranks[r].shm {
                Some(ShmOutcome::Failed { reason, required }) => {
                    // The rank's own "rank R: " prefix: once is enough.
                    let own = format!("rank {r}: ");
                    let reason = reason.strip_prefix(&own).unwrap_or(reason).to_string();
                    Some((r, reason, *required))
                }
                _ => None,
            });
            let reported = members.iter().all(|&r| self.ranks[r].shm.is_some());
            let use_shm = match failed {
                Some((r, reason, true)) => {
                    return Err(Failure::new(
                        format!("rank {r}: PHALANX_TRANSPORT=shm, but it could not join shared memory: {reason}"),
                        1,
                    ));
                }
                Some((r, reason, false)) => {
                    eprintln!(
                        "phalanx: shared memory unavailable on the host of ranks {} (rank {r}: \
                         {reason}); all of them use UDP",
                        ranges(&members)
                    );
                    false
                }
                None if !reported => continue,
                None => {
                    let joined = members
                        .iter()
                        .filter(|&&r| self.ranks[r].shm == Some(ShmOutcome::Joined))
                        .count();
                    if joined > 0 && joined < members.len() {
                        eprintln!(
                            "phalanx: ranks {} of one host disagree whether to use shared memory \
                             (PHALANX_TRANSPORT or PHALANX_FAULTS differ?); all of them use UDP",
                            ranges(&members)
                        );
                    }
                    joined == members.len()
                }
            };
            self.host_groups[g].1 = true;
            let line = encode(&LauncherMsg::Shm { use_shm });
            for &r in &members {
                if let Some(conn) = self.ranks[r].conn.as_mut() {
                    let _ = send_line_blocking(&mut conn.stream, &line, SEND_TIMEOUT, true);
                }
            }
        }
        Ok(())
    }

    /// Sends `line` to every connected rank. A rank that cannot be written to is gone or
    /// stuck; its exit (or the timeout) is what fails the job, so errors are ignored here.
    fn broadcast(&mut self, line: &[u8], timeout: Duration) {
        for conn in self.ranks.iter_mut().filter_map(|r| r.conn.as_mut()) {
            let _ = send_line_blocking(&mut conn.stream, line, timeout, true);
        }
    }

    fn check_deadlines(&mut self) -> Result<(), Failure> {
        let now = Instant::now();
        if self.phase == Phase::Rendezvous
            && self.query_until.is_none()
            && now >= self.started + self.cfg.startup_timeout
        {
            let missing: Vec<String> = (self.ranks.iter().enumerate())
                .filter(|(_, r)| r.endpoint.is_none())
                .map(|(i, _)| i.to_string())
                .collect();
            return Err(Failure::new(
                format!(
                    "start-up timed out after {}: rank{} {} never connected to the launcher",
                    secs(self.cfg.startup_timeout),
                    if missing.len() == 1 { "" } else { "s" },
                    missing.join(", ")
                ),
                1,
            ));
        }
        let Some(timeout) = self.cfg.timeout else {
            return Ok(());
        };
        if self.query_until.is_none() && now >= self.started + timeout {
            for rank in &mut self.ranks {
                rank.status = None;
            }
            self.broadcast(&encode(&LauncherMsg::Query), SEND_TIMEOUT);
            self.query_until = Some(now + QUERY_WINDOW);
            return Ok(());
        }
        let Some(until) = self.query_until else {
            return Ok(());
        };
        let answered = |r: &Rank| r.conn.is_none() || r.exit.is_some() || r.status.is_some();
        if now < until && !self.ranks.iter().all(answered) {
            return Ok(());
        }
        eprintln!(
            "phalanx: --timeout of {} expired; what each rank is waiting on:",
            secs(timeout)
        );
        for (r, rank) in self.ranks.iter().enumerate() {
            eprintln!("phalanx: rank {r}: {}", rank.status_text());
        }
        Err(Failure::new("timeout expired: terminating all ranks", 124))
    }

    /// Tears the job down (on failure) and reports; returns the exit code.
    fn finish(&mut self, failure: Option<Failure>) -> i32 {
        if let Some(f) = &failure {
            eprintln!("phalanx: {}", f.msg);
            let abort = encode(&LauncherMsg::Abort {
                reason: f.msg.clone(),
            });
            let conns = self.ranks.iter_mut().filter_map(|r| r.conn.as_mut());
            for conn in conns.chain(self.pending.iter_mut()) {
                let _ = send_line_blocking(&mut conn.stream, &abort, ABORT_SEND_TIMEOUT, true);
            }
            self.terminate();
        }
        // Whatever a rank left behind in its process group goes too: no orphans, ever.
        for r in 0..self.ranks.len() {
            self.signal_rank(r, libc::SIGKILL);
        }
        // Now the ranks may go: their group ids were kept until the SIGKILL above.
        for rank in &mut self.ranks {
            if let Some(c) = rank.child.as_mut() {
                let _ = c.wait();
            }
        }
        // Closing the node daemons' connections makes them kill what they started.
        self.agents = None;
        self.listeners.clear();
        self.pending.clear();
        for rank in &mut self.ranks {
            rank.conn = None;
        }
        let deadline = Instant::now() + OUTPUT_DRAIN;
        for _ in 0..self.outputs {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.outputs_done.recv_timeout(left).is_err() {
                break;
            }
        }
        for (r, rank) in self.ranks.iter().enumerate() {
            if let Some(w) = &rank.warning {
                eprintln!("phalanx: rank {r}: finalize warning: {w}");
            }
        }
        if let Some(t) = &self.timeline {
            t.write();
        }
        if let Some(out) = &self.cfg.stats {
            let all: Vec<_> = self.ranks.iter_mut().map(|r| r.stats.take()).collect();
            crate::job_stats::report(out, &all);
        }
        failure.map_or(0, |f| f.code)
    }

    /// SIGTERM to every live rank's group, SIGKILL after the grace period (or at once on a
    /// further termination signal), then reap everything.
    fn terminate(&mut self) {
        for r in 0..self.ranks.len() {
            if self.ranks[r].exit.is_none() {
                self.signal_rank(r, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + self.cfg.kill_grace;
        loop {
            for rank in self.ranks.iter_mut().filter(|r| r.exit.is_none()) {
                if let Some(Ok(Some(s))) = rank.child.as_ref().map(spawn::exit_of) {
                    rank.exit = Some(s);
                }
            }
            self.note_remote_exits();
            let now = Instant::now();
            if self.ranks.iter().all(|r| r.exit.is_some())
                || now >= deadline
                || self.signals.take_termination().is_some()
            {
                break;
            }
            let mut fds = [pollfd(self.signals.fd())];
            let _ = wait_readable(&mut fds, (deadline - now).min(Duration::from_millis(50)));
            self.signals.drain();
        }
        for r in 0..self.ranks.len() {
            if self.ranks[r].exit.is_some() {
                continue;
            }
            self.signal_rank(r, libc::SIGKILL);
            let rank = &mut self.ranks[r];
            rank.exit = match rank.child.as_mut() {
                Some(c) => {
                    let _ = c.kill();
                    c.wait().ok()
                }
                // Its node daemon kills and reaps it; the launcher will not hear more.
                None => Some(ExitStatus::from_raw(libc::SIGKILL)),
            };
        }
    }
}

impl Rank {
    fn new(child: Option<Child>, agent: Option<usize>, pid: u32) -> Rank {
        Rank {
            child,
            agent,
            pid,
            exit: None,
            endpoint: None,
            conn: None,
            conn_lost: None,
            drained: false,
            warning: None,
            stats: None,
            status: None,
            waits_for: Vec::new(),
            shm: None,
            halted: None,
            spawned: false,
        }
    }
}

impl Rank {
    fn status_text(&self) -> String {
        if let Some(s) = self.exit {
            return format!("already {}", describe(s).0);
        }
        match (&self.status, &self.conn, &self.endpoint) {
            (Some(text), _, _) => text.clone(),
            (None, Some(_), _) => "no answer (not inside a phalanx call)".into(),
            (None, None, None) => "not connected to the launcher (still starting up)".into(),
            (None, None, Some(_)) => "lost its connection to the launcher".into(),
        }
    }
}

/// `[0, 1, 2, 5]` as `0-2, 5`.
fn ranges(v: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}
