//! `phalanx gang master`: the job manager's master daemon on this machine.
//!
//! Contract:
//! * Listens on a loopback port (written to `DIR/port`, its pid to `DIR/pid`); every
//!   connection is one authenticated command ([`phalanx_gang::proto`]), answered and
//!   closed within [`CLIENT_TIMEOUT`]. Jobs, states, placements and exit codes are in
//!   `DIR/jobs.db` ([`phalanx_gang::Store`]); each job's output goes to
//!   `DIR/jobs/ID.log`.
//! * Scheduling is the gang matrix ([`phalanx_gang::Matrix`]): a pending job is placed
//!   first fit; the jobs of the current slot run, the others are suspended; every
//!   quantum (when more than one slot holds a job) the master switches through the
//!   network-management interface ([`phalanx_gang::netmgmt::NetworkManager`], here
//!   [`Launchers`]): `halt_network` for each outgoing job (its network halted at a packet
//!   boundary, drained, saved, its processes stopped), `context_switch`, then
//!   `release_network` (or `init_job`) for the incoming slot's jobs. Every switch and the
//!   time of each stage is recorded (`phalanx gang switches`). A job that ends leaves the
//!   matrix; its state is CD for exit 0, else F with the launcher's code.
//! * `cancel` ends a job (SIGTERM to its launcher, continued if stopped, which ends the
//!   ranks), `shutdown` cancels every job and exits, removing the port and pid files.
//! * A master killed and restarted loses no job: launchers run in sessions of their own
//!   and outlive it, each writes its exit code to `DIR/jobs/ID.exit`, and the new
//!   master takes over every job whose launcher is still alive (its placement back in
//!   the matrix, running or suspended as the process is), finishes those whose launcher
//!   ended meanwhile with the code it left, and places the pending ones again.
//! * Nodes are node daemons ([`super::node`]) that register on the same port (with
//!   `up --netns` also on the nodes' bridge address, port in `DIR/node-port`) and beat.
//!   No job is placed before every node registered or was given up on
//!   ([`NODE_START`]). A node whose connection closes, or that is silent for
//!   [`NODE_SILENCE`], is marked down: its daemon is killed (a hung one must not keep
//!   ranks alive), it gets no new cell, and every job with a cell on
//!   it is ended (its launcher and, through the daemons' lifelines, its ranks) and
//!   recorded F with a message naming the node. A daemon that registers again is up
//!   again. `shutdown` tells every daemon to exit.

use super::launchers::Launchers;
use phalanx_boot::frame::{encode, LineReader, Next};
use phalanx_gang::netmgmt::{JobSpec, NetworkManager};
use phalanx_gang::proto::{
    challenge, check, Hello, NodeInfo, Reply, Request, MAX_LINE, NODE_SILENCE,
};
use phalanx_gang::{JobId, JobState, Matrix, Store};
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bound on writing a reply to a command's connection.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on reading a command's two lines, in all.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
/// The scheduler's tick.
const TICK: Duration = Duration::from_millis(20);
/// How long a node daemon may take to register after the master starts.
pub const NODE_START: Duration = Duration::from_secs(20);

/// The master's settings.
pub struct MasterConfig {
    pub dir: PathBuf,
    pub nodes: u32,
    pub slots: u32,
    pub quantum: Duration,
    /// The master's address on the nodes' network (`up --netns`: the bridge), where it
    /// also listens for node daemons; `None`: they are on loopback.
    pub node_ip: Option<Ipv4Addr>,
    /// Each node's communication budget and how it is shared.
    pub budget: Option<super::launchers::Budget>,
}

/// What the master knows of a node daemon.
enum NodeState {
    /// Not registered (yet) since the master started.
    Starting(Instant),
    Up {
        stream: TcpStream,
        reader: LineReader,
        last: Instant,
        pid: u32,
        agent: String,
    },
    Down(String),
}

/// What a connection turned out to be.
enum Client {
    Served,
    Shutdown,
    /// A node daemon registered: its connection (and reader), pid and agent.
    Node(u32, TcpStream, LineReader, u32, String),
}

struct Master {
    cfg: MasterConfig,
    secret: String,
    store: Store,
    matrix: Matrix,
    /// The communication layer: the only way the master touches a job's network.
    net: Launchers,
    next_switch: Instant,
    nodes: Vec<NodeState>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Runs the master until `shutdown`; its exit code.
pub fn run(cfg: MasterConfig) -> i32 {
    match serve(cfg) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("phalanx gang master: {e}");
            1
        }
    }
}

fn serve(cfg: MasterConfig) -> Result<(), String> {
    let secret = std::fs::read_to_string(cfg.dir.join("secret"))
        .map_err(|e| format!("cannot read the cluster secret: {e}"))?
        .trim()
        .to_string();
    std::fs::create_dir_all(cfg.dir.join("jobs")).map_err(|e| e.to_string())?;
    let store = Store::open(&cfg.dir.join("jobs.db")).map_err(|e| e.to_string())?;
    let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let node_listener = match cfg.node_ip {
        Some(ip) => {
            let l = TcpListener::bind((ip, 0))
                .map_err(|e| format!("cannot listen for node daemons on {ip}: {e}"))?;
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            let p = l.local_addr().map_err(|e| e.to_string())?.port();
            write_file(&cfg.dir.join("node-port"), &p.to_string())?;
            Some(l)
        }
        None => None,
    };
    let dir = cfg.dir.clone();
    let mut m = Master {
        matrix: Matrix::new(cfg.nodes, cfg.slots),
        next_switch: Instant::now() + cfg.quantum,
        nodes: (0..cfg.nodes)
            .map(|_| NodeState::Starting(Instant::now()))
            .collect(),
        net: Launchers::new(dir.clone(), cfg.node_ip, cfg.budget),
        cfg,
        secret,
        store,
    };
    for n in 0..m.cfg.nodes {
        let _ = m.net.init_node(n, m.cfg.nodes);
    }
    m.recover()?;
    write_file(&m.cfg.dir.join("pid"), &std::process::id().to_string())?;
    write_file(&m.cfg.dir.join("port"), &port.to_string())?;
    'serve: loop {
        for l in std::iter::once(&listener).chain(node_listener.as_ref()) {
            match l.accept() {
                Ok((stream, _)) => match m.client(stream) {
                    Client::Served => {}
                    Client::Shutdown => break 'serve,
                    Client::Node(n, stream, reader, pid, agent) => {
                        m.node_up(n, stream, reader, pid, agent)
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => eprintln!("phalanx gang master: accept: {e}"),
            }
        }
        m.tick();
        std::thread::sleep(TICK);
    }
    m.shutdown();
    let _ = std::fs::remove_file(m.cfg.dir.join("node-port"));
    let _ = std::fs::remove_file(m.cfg.dir.join("port"));
    let _ = std::fs::remove_file(m.cfg.dir.join("pid"));
    Ok(())
}

fn write_file(p: &Path, text: &str) -> Result<(), String> {
    std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
}

impl Master {
    /// Takes over the jobs a previous master left (module docs).
    fn recover(&mut self) -> Result<(), String> {
        let mut running_slot = None;
        for j in self.store.unfinished().map_err(|e| e.to_string())? {
            if j.started_ms.is_none() {
                continue; // pending: placed again by the scheduler
            }
            let Some(pid) = j.pid else {
                self.ended(j.id, None);
                continue;
            };
            let adopted = match j.placement.as_ref() {
                Some(p) if self.matrix.insert(j.id, p).is_ok() => {
                    let halted = self.net.adopt(j.id, pid);
                    if halted.is_none() {
                        self.matrix.remove(j.id);
                    }
                    halted.map(|h| (h, p.slot))
                }
                _ => None,
            };
            match adopted {
                Some((halted, slot)) => {
                    if !halted {
                        running_slot = Some(slot);
                    }
                    let state = if halted {
                        JobState::Suspended
                    } else {
                        JobState::Running
                    };
                    let _ = self.store.set_state(j.id, state);
                }
                None => self.ended(j.id, None),
            }
        }
        if let Some(s) = running_slot {
            self.matrix.set_current(s);
        }
        Ok(())
    }

    /// Job `id`'s launcher ended: its state from the code it left (or `status`).
    fn ended(&mut self, id: JobId, status: Option<std::process::ExitStatus>) {
        self.matrix.remove(id);
        let code = self
            .net
            .exit_code(id)
            .or_else(|| status.and_then(|s| s.code()));
        let (state, msg) = match code {
            Some(0) => (JobState::Completed, None),
            Some(c) => (JobState::Failed, Some(format!("exit code {c}"))),
            None => (
                JobState::Failed,
                Some("the launcher ended without an exit code".to_string()),
            ),
        };
        let _ = self.store.finish(id, state, code, msg.as_deref(), now_ms());
    }

    /// Serves one command (or takes a node daemon's registration). The two request
    /// lines must come within [`REQUEST_TIMEOUT`] in all, however slowly their bytes
    /// trickle: the master's loop is never held longer by a client.
    fn client(&mut self, stream: TcpStream) -> Client {
        let mut stream = stream;
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_write_timeout(Some(CLIENT_TIMEOUT));
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        // The challenge first: the secret itself never travels.
        let Ok(ch) = challenge() else {
            return Client::Served;
        };
        if stream.write_all(&encode(&ch)).is_err() {
            return Client::Served;
        }
        let mut reader = LineReader::new(MAX_LINE);
        let hello: Option<Hello> = read_msg(&mut reader, &mut stream, deadline);
        let (reply, stop) = match hello {
            Some(h) if check(&self.secret, &ch.nonce, &h) => {
                match read_msg::<Request>(&mut reader, &mut stream, deadline) {
                    Some(Request::Shutdown) => (Reply::Ok, Client::Shutdown),
                    Some(Request::RegisterNode { node, agent, pid }) => {
                        if node < self.cfg.nodes && agent.parse::<std::net::SocketAddrV4>().is_ok()
                        {
                            let _ = stream.write_all(&encode(&Reply::Ok));
                            return Client::Node(node, stream, reader, pid, agent);
                        }
                        (
                            error(&format!("no node {node} with agent {agent:?} here")),
                            Client::Served,
                        )
                    }
                    Some(r) => (self.handle(r), Client::Served),
                    None => (error("malformed or oversized request"), Client::Served),
                }
            }
            _ => (
                error("not authenticated: wrong or missing cluster secret"),
                Client::Served,
            ),
        };
        let _ = stream.write_all(&encode(&reply));
        stop
    }

    /// Node daemon `n` registered (or came back).
    fn node_up(&mut self, n: u32, stream: TcpStream, reader: LineReader, pid: u32, agent: String) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let Ok(addr) = agent.parse() else { return };
        eprintln!("phalanx gang master: node {n} up (pid {pid}, agent {agent})");
        self.net.set_agent(n, addr);
        let _ = self.net.add_node(n);
        self.matrix.node_up(n);
        self.nodes[n as usize] = NodeState::Up {
            stream,
            reader,
            last: Instant::now(),
            pid,
            agent,
        };
    }

    /// Beats, closed connections, silence (module docs); a node found down ends its jobs.
    fn check_nodes(&mut self) {
        let now = Instant::now();
        for n in 0..self.nodes.len() {
            let why = match &mut self.nodes[n] {
                NodeState::Starting(since) if now > *since + NODE_START => Some(format!(
                    "its daemon did not register within {} s",
                    NODE_START.as_secs()
                )),
                NodeState::Up {
                    stream,
                    reader,
                    last,
                    pid,
                    ..
                } => {
                    let mut why = None;
                    loop {
                        match reader.next_msg::<Request, _>(stream) {
                            Ok(Next::Msg(_)) => *last = now,
                            Ok(Next::Pending) => break,
                            Ok(Next::Eof) | Err(_) => {
                                why = Some(format!(
                                    "its daemon (pid {pid}) closed its connection (killed?)"
                                ));
                                break;
                            }
                        }
                    }
                    why.or_else(|| {
                        (now > *last + NODE_SILENCE).then(|| {
                            format!(
                                "its daemon (pid {pid}) was silent for {} s",
                                NODE_SILENCE.as_secs()
                            )
                        })
                    })
                }
                _ => None,
            };
            if let Some(why) = why {
                self.node_down(n as u32, &why);
            }
        }
    }

    /// Node `n` is down: every job with a cell on it ends as F, naming the node.
    fn node_down(&mut self, n: u32, why: &str) {
        eprintln!("phalanx gang master: node {n} down: {why}");
        // A daemon that is hung (silent) must not keep ranks alive: killed, its ranks
        // die with it (PDEATHSIG). Every node is on this machine, so its pid is ours to
        // signal; one that registered again elsewhere would be a new pid.
        if let NodeState::Up { pid, .. } = &self.nodes[n as usize] {
            // SAFETY: kill(2) on the pid the daemon registered with.
            unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
        }
        self.nodes[n as usize] = NodeState::Down(why.to_string());
        let _ = self.net.remove_node(n);
        for id in self.matrix.node_down(n) {
            let _ = self.net.end_job(id);
            self.matrix.remove(id);
            let msg = format!("node {n} went down: {why}");
            let _ = self
                .store
                .finish(id, JobState::Failed, None, Some(&msg), now_ms());
        }
    }

    /// Whether every node has registered or been given up on.
    fn nodes_settled(&self) -> bool {
        !self
            .nodes
            .iter()
            .any(|n| matches!(n, NodeState::Starting(_)))
    }

    fn handle(&mut self, r: Request) -> Reply {
        match r {
            Request::Submit {
                name,
                ranks,
                nodes,
                argv,
                cwd,
            } => self.submit(name, ranks, nodes, argv, cwd),
            Request::Queue => match self.store.list() {
                Ok(jobs) => Reply::Jobs { jobs },
                Err(e) => error(&e.to_string()),
            },
            Request::Matrix => Reply::Matrix {
                cells: self.matrix.cells().to_vec(),
                current: self.matrix.current(),
            },
            Request::Nodes => Reply::Nodes {
                nodes: (0..self.matrix.nodes())
                    .map(|n| self.node_info(n))
                    .collect(),
            },
            Request::RegisterNode { .. } | Request::Beat => {
                error("node messages belong on a registered node's connection")
            }
            Request::Cancel { id } => self.cancel(id),
            Request::Switches { last } => match self.store.switches(last) {
                Ok(switches) => Reply::Switches { switches },
                Err(e) => error(&e.to_string()),
            },
            Request::Logs { id, from } => self.logs(id, from),
            Request::Shutdown => Reply::Ok,
        }
    }

    fn node_info(&self, n: u32) -> NodeInfo {
        let jobs: Vec<JobId> = (self.matrix.placements())
            .filter(|(_, p)| p.nodes.contains(&n))
            .map(|(j, _)| *j)
            .collect();
        let (state, pid, agent, message) = match &self.nodes[n as usize] {
            NodeState::Starting(_) => ("starting", None, None, None),
            NodeState::Up { pid, agent, .. } => ("up", Some(*pid), Some(agent.clone()), None),
            NodeState::Down(why) => ("down", None, None, Some(why.clone())),
        };
        // Switched: only the running slot's job holds the budget; partitioned: every
        // resident job holds its share.
        let budget_in_use = self.cfg.budget.map_or(0, |b| {
            if b.partitioned {
                b.per_job() * jobs.len() as u64
            } else if self.matrix.jobs_in(self.matrix.current()).iter().any(|j| {
                self.matrix
                    .placement(*j)
                    .is_some_and(|p| p.nodes.contains(&n))
            }) {
                b.bytes
            } else {
                0
            }
        });
        NodeInfo {
            node: n,
            up: state == "up",
            jobs,
            state: state.into(),
            pid,
            agent,
            message,
            budget: self.cfg.budget.map(|b| b.bytes),
            budget_in_use,
        }
    }

    fn submit(
        &mut self,
        name: String,
        ranks: u32,
        nodes: u32,
        argv: Vec<String>,
        cwd: String,
    ) -> Reply {
        if argv.is_empty() {
            return error("no program given");
        }
        if ranks == 0 || nodes == 0 || nodes > ranks {
            return error(&format!(
                "{ranks} ranks on {nodes} nodes: need at least one rank per node"
            ));
        }
        if nodes > self.matrix.nodes_up() {
            return error(&format!(
                "the job needs {nodes} nodes; the cluster has {} up",
                self.matrix.nodes_up()
            ));
        }
        let prog = Path::new(&cwd).join(&argv[0]);
        let found = if argv[0].contains('/') {
            prog.is_file()
        } else {
            which(&argv[0])
        };
        if !found {
            return error(&format!("program {} does not exist", argv[0]));
        }
        let mut full = vec![cwd];
        full.extend(argv);
        let name = if name.is_empty() {
            Path::new(&full[1])
                .file_name()
                .map_or("job".into(), |n| n.to_string_lossy().into_owned())
        } else {
            name
        };
        match self.store.submit(&name, ranks, nodes, &full, now_ms()) {
            Ok(id) => {
                self.tick();
                Reply::Submitted { id }
            }
            Err(e) => error(&e.to_string()),
        }
    }

    fn cancel(&mut self, id: JobId) -> Reply {
        let job = match self.store.get(id) {
            Ok(Some(j)) => j,
            Ok(None) => return error(&format!("no job {id}")),
            Err(e) => return error(&e.to_string()),
        };
        if job.state.finished() {
            return error(&format!("job {id} already ended ({})", job.state.code()));
        }
        let _ = self.net.end_job(id);
        self.matrix.remove(id);
        let _ = self
            .store
            .finish(id, JobState::Cancelled, None, Some("cancelled"), now_ms());
        Reply::Ok
    }

    fn logs(&self, id: JobId, from: u64) -> Reply {
        let job = match self.store.get(id) {
            Ok(Some(j)) => j,
            Ok(None) => return error(&format!("no job {id}")),
            Err(e) => return error(&e.to_string()),
        };
        let mut bytes = Vec::new();
        if let Ok(mut f) = std::fs::File::open(self.net.log_path(id)) {
            use std::io::Seek;
            let _ = f.seek(std::io::SeekFrom::Start(from));
            // An eighth of a line: JSON-escaped control bytes take six each.
            let _ = f.take(MAX_LINE as u64 / 8).read_to_end(&mut bytes);
        }
        Reply::Log {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            next: from + bytes.len() as u64,
            finished: job.state.finished(),
        }
    }

    /// Ends of launchers, placement of pending jobs, the quantum's switch.
    fn tick(&mut self) {
        // A node's loss first: its jobs end naming it, not by their launchers' codes.
        self.check_nodes();
        self.reap();
        if self.nodes_settled() {
            self.place_pending();
        }
        let busy = (0..self.matrix.slots())
            .filter(|&s| !self.matrix.jobs_in(s).is_empty())
            .count();
        if busy > 1 && Instant::now() >= self.next_switch {
            self.switch();
        }
        if let Some(slot) = self.matrix.settle() {
            self.run_slot(slot);
        }
    }

    fn reap(&mut self) {
        for (id, st) in self.net.reap() {
            self.ended(id, st);
        }
    }

    fn place_pending(&mut self) {
        let Ok(jobs) = self.store.unfinished() else {
            return;
        };
        for j in jobs.into_iter().filter(|j| j.state == JobState::Pending) {
            if self.matrix.placement(j.id).is_some() {
                continue;
            }
            if let Ok(p) = self.matrix.place(j.id, j.nodes) {
                // Placed; it starts when its slot is current (it stays PD until then).
                let _ = self.store.assign(j.id, &p);
            }
        }
    }

    /// The quantum's context switch (seed 001's three stages through the network
    /// manager): halt the current slot's started jobs, switch buffers, make the next busy
    /// slot current; its jobs are released (or started) by [`run_slot`](Self::run_slot).
    /// Each stage's time is recorded.
    fn switch(&mut self) {
        let from = self.matrix.current();
        let outgoing: Vec<JobId> = (self.matrix.jobs_in(from).into_iter())
            .filter(|&id| self.net.has(id))
            .collect();
        let mut halt = Duration::ZERO;
        let mut warnings = Vec::new();
        for &id in &outgoing {
            if let Ok(r) = self.net.halt_network(id) {
                halt = halt.max(r.took);
                warnings.extend(r.warning);
            }
            let _ = self.store.set_state(id, JobState::Suspended);
        }
        let to = self.matrix.advance().unwrap_or(from);
        let incoming = self.matrix.jobs_in(to);
        let swap = self
            .net
            .context_switch(&outgoing, &incoming)
            .unwrap_or_default();
        let release = self.run_slot(to);
        let _ = self
            .store
            .record_switch(&phalanx_gang::store::SwitchRecord {
                at_ms: now_ms(),
                from_slot: from,
                to_slot: to,
                halt_us: halt.as_micros() as u64,
                switch_us: swap.took.as_micros() as u64,
                release_us: release.as_micros() as u64,
                warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
                datagrams: swap.datagrams,
                bytes: swap.bytes,
            });
        self.next_switch = Instant::now() + self.cfg.quantum;
    }

    /// Runs every job of `slot`: releases the halted, starts the new; the time the
    /// releases took (the database's bookkeeping not counted).
    fn run_slot(&mut self, slot: u32) -> Duration {
        let mut took = Duration::ZERO;
        for id in self.matrix.jobs_in(slot) {
            if self.net.halted(id) {
                if let Ok(r) = self.net.release_network(id) {
                    took += r.took;
                }
                let _ = self.store.set_state(id, JobState::Running);
            } else if !self.net.has(id) {
                let t = Instant::now();
                self.start(id);
                took += t.elapsed();
            }
        }
        took
    }

    fn start(&mut self, id: JobId) {
        let Ok(Some(job)) = self.store.get(id) else {
            return;
        };
        let Some(p) = job.placement.clone() else {
            return;
        };
        let (cwd, argv) = job
            .argv
            .split_first()
            .map_or((".".to_string(), Vec::new()), |(c, a)| {
                (c.clone(), a.to_vec())
            });
        let spec = JobSpec {
            ranks: job.ranks,
            nodes: p.nodes.clone(),
            argv,
            cwd,
        };
        match self.net.init_job(id, &spec) {
            Ok(()) => {
                let pid = self.net.pid(id).unwrap_or(0);
                let _ = self.store.start(id, &p, pid, now_ms());
            }
            Err(e) => {
                self.matrix.remove(id);
                let msg = e.to_string();
                let _ = self
                    .store
                    .finish(id, JobState::Failed, Some(2), Some(&msg), now_ms());
            }
        }
    }

    fn shutdown(&mut self) {
        let ids = self.net.ids();
        for id in ids {
            self.cancel(id);
        }
        for n in &mut self.nodes {
            if let NodeState::Up { stream, .. } = n {
                let _ = phalanx_boot::frame::send_line_blocking(
                    stream,
                    &encode(&Reply::Stop),
                    CLIENT_TIMEOUT,
                    true,
                );
            }
        }
        if let Ok(jobs) = self.store.unfinished() {
            for j in jobs {
                let _ = self.store.finish(
                    j.id,
                    JobState::Cancelled,
                    None,
                    Some("the cluster was shut down"),
                    now_ms(),
                );
            }
        }
    }
}

/// The next message on `s` before `deadline` (`None` on a timeout, a closed or
/// malformed line).
fn read_msg<T: serde::de::DeserializeOwned>(
    reader: &mut LineReader,
    s: &mut TcpStream,
    deadline: Instant,
) -> Option<T> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return None;
        }
        match reader.next_msg::<T, _>(s) {
            Ok(Next::Msg(m)) => return Some(m),
            Ok(Next::Pending) => continue,
            Ok(Next::Eof) | Err(_) => return None,
        }
    }
}

fn error(message: &str) -> Reply {
    Reply::Error {
        message: message.to_string(),
    }
}

/// Whether `prog` is found on `PATH`.
fn which(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(prog).is_file()))
}
