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
//!   quantum (when more than one slot holds a job) the master switches: it suspends the
//!   current slot's jobs — SIGTSTP to each job's launcher, which halts every rank's
//!   links at a packet boundary, drains and saves them, stops the ranks and itself
//!   (`phalanx run`'s suspension) — waits until every such launcher is stopped (bounded
//!   by [`STOP_WAIT`]), then continues or starts the next slot's jobs. A job that ends
//!   leaves the matrix; its state is CD for exit 0, else F with the launcher's code.
//! * `cancel` ends a job (SIGTERM to its launcher, continued if stopped, which ends the
//!   ranks), `shutdown` cancels every job and exits, removing the port and pid files.
//! * A master killed and restarted loses no job: launchers run in their own process
//!   groups and outlive it, each writes its exit code to `DIR/jobs/ID.exit`, and the new
//!   master takes over every job whose launcher is still alive (its placement back in
//!   the matrix, running or suspended as the process is), finishes those whose launcher
//!   ended meanwhile with the code it left, and places the pending ones again.
//! * Today every node is this machine: the ranks of a job all run here, through one
//!   launcher per job (node daemons and network namespaces come next).

use phalanx_gang::proto::{same_secret, Hello, NodeInfo, Reply, Request, MAX_LINE};
use phalanx_gang::{JobId, JobState, Matrix, Store};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bound on one command's connection.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on a suspended launcher reaching the stopped state (its halt bound and more).
const STOP_WAIT: Duration = Duration::from_secs(20);
/// The scheduler's tick.
const TICK: Duration = Duration::from_millis(20);

/// The master's settings.
pub struct MasterConfig {
    pub dir: PathBuf,
    pub nodes: u32,
    pub slots: u32,
    pub quantum: Duration,
}

/// A job whose launcher was started.
struct Started {
    /// The launcher, when this master started it (else taken over after a restart).
    child: Option<Child>,
    pid: u32,
    /// Its launcher was told to suspend (and is stopped or stopping).
    suspended: bool,
}

impl Started {
    /// Whether the launcher has ended (reaping it if it is our child).
    fn ended(&mut self) -> Option<Option<std::process::ExitStatus>> {
        match self.child.as_mut() {
            Some(c) => match c.try_wait() {
                Ok(Some(st)) => Some(Some(st)),
                _ => None,
            },
            None => (!alive(self.pid)).then_some(None),
        }
    }
}

struct Master {
    cfg: MasterConfig,
    secret: String,
    store: Store,
    matrix: Matrix,
    started: HashMap<JobId, Started>,
    next_switch: Instant,
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
    let mut m = Master {
        matrix: Matrix::new(cfg.nodes, cfg.slots),
        next_switch: Instant::now() + cfg.quantum,
        cfg,
        secret,
        store,
        started: HashMap::new(),
    };
    m.recover()?;
    write_file(&m.cfg.dir.join("pid"), &std::process::id().to_string())?;
    write_file(&m.cfg.dir.join("port"), &port.to_string())?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if m.client(stream) {
                    break;
                }
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => eprintln!("phalanx gang master: accept: {e}"),
        }
        m.tick();
        std::thread::sleep(TICK);
    }
    m.shutdown();
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
            let Some(pid) = j.pid.filter(|_| j.started_ms.is_some()) else {
                continue; // pending: placed again by the scheduler
            };
            match j.placement.as_ref() {
                Some(p) if self.launcher_of(j.id, pid) && self.matrix.insert(j.id, p).is_ok() => {
                    let suspended = stopped(pid);
                    if !suspended {
                        running_slot = Some(p.slot);
                    }
                    let state = if suspended {
                        JobState::Suspended
                    } else {
                        JobState::Running
                    };
                    let _ = self.store.set_state(j.id, state);
                    self.started.insert(
                        j.id,
                        Started {
                            child: None,
                            pid,
                            suspended,
                        },
                    );
                }
                _ => self.ended(j.id, None),
            }
        }
        if let Some(s) = running_slot {
            self.matrix.set_current(s);
        }
        Ok(())
    }

    /// Whether `pid` is alive and is job `id`'s launcher (not a process that took over
    /// its pid): its command line names the job's exit file.
    fn launcher_of(&self, id: JobId, pid: u32) -> bool {
        let exit = format!("jobs/{id}.exit");
        alive(pid)
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&exit))
    }

    /// Job `id`'s launcher ended: its state from the code it left (or `status`).
    fn ended(&mut self, id: JobId, status: Option<std::process::ExitStatus>) {
        self.matrix.remove(id);
        let path = self.cfg.dir.join("jobs").join(format!("{id}.exit"));
        let code = std::fs::read_to_string(&path)
            .ok()
            .and_then(|c| c.trim().parse::<i32>().ok())
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

    /// Serves one command; true on shutdown.
    fn client(&mut self, stream: TcpStream) -> bool {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(CLIENT_TIMEOUT));
        let _ = stream.set_write_timeout(Some(CLIENT_TIMEOUT));
        let mut reader = BufReader::new(stream.take(2 * MAX_LINE as u64));
        let mut line = String::new();
        let hello: Option<Hello> = reader
            .read_line(&mut line)
            .ok()
            .and_then(|_| serde_json::from_str(&line).ok());
        let (reply, stop) = match hello {
            Some(h) if same_secret(&h.secret, &self.secret) => {
                line.clear();
                match reader.read_line(&mut line).ok().and_then(|n| {
                    (n <= MAX_LINE).then(|| serde_json::from_str::<Request>(&line).ok())?
                }) {
                    Some(Request::Shutdown) => (Reply::Ok, true),
                    Some(r) => (self.handle(r), false),
                    None => (error("malformed or oversized request"), false),
                }
            }
            _ => (
                error("not authenticated: wrong or missing cluster secret"),
                false,
            ),
        };
        let mut stream = reader.into_inner().into_inner();
        if let Ok(mut text) = serde_json::to_string(&reply) {
            text.push('\n');
            let _ = stream.write_all(text.as_bytes());
        }
        stop
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
                    .map(|n| NodeInfo {
                        node: n,
                        up: !self.matrix.is_down(n),
                        jobs: self
                            .matrix
                            .placements()
                            .filter(|(_, p)| p.nodes.contains(&n))
                            .map(|(j, _)| *j)
                            .collect(),
                    })
                    .collect(),
            },
            Request::Cancel { id } => self.cancel(id),
            Request::Logs { id, from } => self.logs(id, from),
            Request::Shutdown => Reply::Ok,
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
        if let Some(mut s) = self.started.remove(&id) {
            end_launcher(&mut s);
        }
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
        if let Ok(mut f) = std::fs::File::open(self.log_path(id)) {
            use std::io::Seek;
            let _ = f.seek(std::io::SeekFrom::Start(from));
            let _ = f.take(MAX_LINE as u64 / 2).read_to_end(&mut bytes);
        }
        Reply::Log {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            next: from + bytes.len() as u64,
            finished: job.state.finished(),
        }
    }

    fn log_path(&self, id: JobId) -> PathBuf {
        self.cfg.dir.join("jobs").join(format!("{id}.log"))
    }

    /// Ends of launchers, placement of pending jobs, the quantum's switch.
    fn tick(&mut self) {
        self.reap();
        self.place_pending();
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
        let mut ended = Vec::new();
        for (&id, s) in self.started.iter_mut() {
            if let Some(st) = s.ended() {
                ended.push((id, st));
            }
        }
        for (id, st) in ended {
            self.started.remove(&id);
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

    /// Suspends the current slot's jobs and makes the next busy slot current.
    fn switch(&mut self) {
        let current = self.matrix.current();
        let outgoing = self.matrix.jobs_in(current);
        for id in &outgoing {
            if let Some(s) = self.started.get_mut(id) {
                signal(s.pid, libc::SIGTSTP);
                s.suspended = true;
            }
        }
        let deadline = Instant::now() + STOP_WAIT;
        for id in &outgoing {
            if let Some(s) = self.started.get_mut(id) {
                while !stopped(s.pid) && Instant::now() < deadline {
                    if !alive(s.pid) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let _ = self.store.set_state(*id, JobState::Suspended);
            }
        }
        self.matrix.advance();
        self.next_switch = Instant::now() + self.cfg.quantum;
    }

    /// Runs every job of `slot`: continues the suspended, starts the new.
    fn run_slot(&mut self, slot: u32) {
        for id in self.matrix.jobs_in(slot) {
            match self.started.get_mut(&id) {
                Some(s) if s.suspended => {
                    signal(s.pid, libc::SIGCONT);
                    s.suspended = false;
                    let _ = self.store.set_state(id, JobState::Running);
                }
                Some(_) => {}
                None => self.start(id),
            }
        }
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
            .map_or((".", &[][..]), |(c, a)| (c.as_str(), a));
        let log = std::fs::File::create(self.log_path(id));
        let exe = std::env::current_exe().unwrap_or_else(|_| "phalanx".into());
        let exit_file = self.cfg.dir.join("jobs").join(format!("{id}.exit"));
        let _ = std::fs::remove_file(&exit_file);
        let mut cmd = Command::new(exe);
        cmd.arg("run")
            .arg("-n")
            .arg(job.ranks.to_string())
            .arg("--tag-output")
            .arg("--status-file")
            .arg(&exit_file)
            .args(argv)
            .current_dir(cwd)
            .stdin(Stdio::null());
        new_session(&mut cmd);
        match log.and_then(|f| Ok((f.try_clone()?, f))) {
            Ok((out, err)) => {
                cmd.stdout(out).stderr(err);
            }
            Err(_) => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        match cmd.spawn() {
            Ok(child) => {
                let pid = child.id();
                self.started.insert(
                    id,
                    Started {
                        child: Some(child),
                        pid,
                        suspended: false,
                    },
                );
                let _ = self.store.place(id, &p, JobState::Running, now_ms());
                let _ = self.store.set_pid(id, pid);
            }
            Err(e) => {
                self.matrix.remove(id);
                let msg = format!("cannot start the launcher: {e}");
                let _ = self
                    .store
                    .finish(id, JobState::Failed, Some(2), Some(&msg), now_ms());
            }
        }
    }

    fn shutdown(&mut self) {
        let ids: Vec<JobId> = self.started.keys().copied().collect();
        for id in ids {
            self.cancel(id);
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

fn error(message: &str) -> Reply {
    Reply::Error {
        message: message.to_string(),
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a child process of ours; no memory involved.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// The state letter of process `pid` in /proc (R, S, T, Z, …), if it exists.
fn proc_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit(')').next()?.trim_start().chars().next()
}

/// Whether process `pid` is stopped (state T).
fn stopped(pid: u32) -> bool {
    proc_state(pid) == Some('T')
}

/// Ends a launcher: SIGTERM (it ends its ranks), SIGCONT if it was stopped, then waits
/// (bounded), SIGKILL to its group after that.
fn end_launcher(s: &mut Started) {
    let pid = s.pid;
    signal(pid, libc::SIGTERM);
    // A stopped launcher (and its stopped ranks) must run to handle the termination.
    signal(pid, libc::SIGCONT);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if s.ended().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill(2) on the launcher's process group.
    unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
    if let Some(c) = s.child.as_mut() {
        let _ = c.wait();
    }
}

/// Starts the process of `cmd` in a session of its own: when the master dies, a stopped
/// launcher's process group is not orphaned within the master's session, so the kernel
/// does not hang it up (SIGHUP) — it waits, stopped, for the next master.
pub(super) fn new_session(cmd: &mut Command) {
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the parent; the
    // closure runs in the forked child before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    proc_state(pid).is_some_and(|c| c != 'Z')
}

/// Whether `prog` is found on `PATH`.
fn which(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(prog).is_file()))
}
