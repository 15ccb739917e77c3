//! phalanx's implementation of the network-management interface
//! ([`phalanx_gang::netmgmt::NetworkManager`]) on this machine: one `phalanx run` launcher
//! per job, whose ranks the node daemons start.
//!
//! Contract: `init_job` starts the job's launcher (its own session, output to the job's
//! log, exit code to `jobs/ID.exit`) with a hostfile (`jobs/ID.hosts`) naming the node
//! daemons of the job's nodes (`node:nodeK@AGENT`, the ranks split evenly, lower nodes
//! taking the remainder): the launcher asks each daemon to start its ranks, and its
//! rendezvous is the job's communication context — no rank sends before every rank has
//! the table of all. A node without a registered daemon fails the start. With a
//! communication budget every rank gets its job's share in `PHALANX_COMM_BUDGET`
//! ([`Budget::credit_budget`]): the whole budget when buffers are switched, FM's
//! budget / slots² when partitioned; switched jobs also get `PHALANX_COMM_LOCK=1`
//! (their shared-memory buffers locked in memory while they run, unlocked while they
//! are switched out).
//! `halt_network` sends the launcher SIGTSTP: every rank halts its links at a packet
//! boundary, drains what is in flight and saves what they hold (the buffer switch of
//! stage 2 happens there, rank by rank), then ranks and launcher stop; it returns once
//! the launcher is stopped (bounded by [`STOP_WAIT`]). `context_switch` has nothing left
//! to move at this level. `release_network` sends SIGCONT: the ranks restore and resume
//! their links. `end_job` ends the launcher (SIGTERM, continued if stopped; SIGKILL to its
//! group after a bound); the node daemons kill the job's ranks when the launcher's
//! connection closes.

use phalanx_gang::netmgmt::{JobSpec, NetworkManager, NodeId, StageReport};
use phalanx_gang::JobId;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Bound on a suspended launcher reaching the stopped state (its halt bound and more).
pub const STOP_WAIT: Duration = Duration::from_secs(20);

/// The nodes' communication budget (seed 001): what each job may use on a node.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Bytes per node.
    pub bytes: u64,
    /// Every job gets `bytes / slots` (FM's contexts); else the running job gets all.
    pub partitioned: bool,
    pub slots: u32,
}

impl Budget {
    /// The memory one job holds on each of its nodes: the whole budget when switched,
    /// budget / slots when partitioned.
    pub fn per_job(&self) -> u64 {
        if self.partitioned {
            self.bytes / u64::from(self.slots.max(1))
        } else {
            self.bytes
        }
    }

    /// What its ranks size their credits from (`PHALANX_COMM_BUDGET`, C0 = that /
    /// (local ranks × ranks)). Switched: the whole budget — only the running job's p
    /// ranks send, C0 = B/p. Partitioned, as in FM: every one of the n = slots resident
    /// jobs' ranks may send, so the share B/n is divided among n·p senders,
    /// C0 = B/(n²p).
    pub fn credit_budget(&self) -> u64 {
        if self.partitioned {
            let n = u64::from(self.slots.max(1));
            (self.bytes / (n * n)).max(1)
        } else {
            self.bytes
        }
    }
}

/// An error of the launcher-based network manager.
#[derive(Debug)]
pub struct NetError(pub String);

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NetError {}

/// A job's launcher.
struct Launcher {
    /// The process, when this master started it (else taken over after a restart).
    child: Option<Child>,
    pid: u32,
    /// Halted (stopped or stopping).
    halted: bool,
    /// What its last halt moved: (save time, datagrams, bytes).
    saved: (Duration, u64, u64),
}

impl Launcher {
    /// Whether it has ended (reaping it if it is our child), with its status if known.
    fn ended(&mut self) -> Option<Option<ExitStatus>> {
        match self.child.as_mut() {
            Some(c) => match c.try_wait() {
                Ok(Some(st)) => Some(Some(st)),
                _ => None,
            },
            None => (!alive(self.pid)).then_some(None),
        }
    }
}

/// The launchers of the jobs started on this machine.
pub struct Launchers {
    dir: PathBuf,
    jobs: HashMap<JobId, Launcher>,
    nodes_up: Vec<bool>,
    /// Each node daemon's agent, once registered.
    agents: HashMap<NodeId, SocketAddrV4>,
    /// The launchers' address on the nodes' network (None: loopback).
    boot_ip: Option<Ipv4Addr>,
    budget: Option<Budget>,
}

impl Launchers {
    pub fn new(dir: PathBuf, boot_ip: Option<Ipv4Addr>, budget: Option<Budget>) -> Launchers {
        Launchers {
            dir,
            jobs: HashMap::new(),
            nodes_up: Vec::new(),
            agents: HashMap::new(),
            boot_ip,
            budget,
        }
    }

    /// Node `node`'s daemon takes ranks at `agent`.
    pub fn set_agent(&mut self, node: NodeId, agent: SocketAddrV4) {
        self.agents.insert(node, agent);
    }

    /// The hostfile of a job: its ranks over its nodes' daemons.
    fn hostfile(&self, spec: &JobSpec) -> Result<String, NetError> {
        let k = spec.nodes.len() as u32;
        let mut text = String::new();
        for (i, node) in spec.nodes.iter().enumerate() {
            let agent = match (self.agents.get(node), self.nodes_up.get(*node as usize)) {
                (Some(a), Some(true)) => a,
                _ => return Err(NetError(format!("node {node} has no daemon up"))),
            };
            let slots = spec.ranks / k + u32::from((i as u32) < spec.ranks % k);
            text += &format!("node:node{node}@{agent} slots={slots}\n");
        }
        Ok(text)
    }

    fn path(&self, id: JobId, ext: &str) -> PathBuf {
        self.dir.join("jobs").join(format!("{id}.{ext}"))
    }

    /// The job's output file.
    pub fn log_path(&self, id: JobId) -> PathBuf {
        self.path(id, "log")
    }

    /// The exit code job `id`'s launcher left, if any.
    pub fn exit_code(&self, id: JobId) -> Option<i32> {
        std::fs::read_to_string(self.path(id, "exit"))
            .ok()
            .and_then(|c| c.trim().parse().ok())
    }

    /// Whether job `id` has a launcher here.
    pub fn has(&self, id: JobId) -> bool {
        self.jobs.contains_key(&id)
    }

    /// Whether job `id`'s launcher is halted.
    pub fn halted(&self, id: JobId) -> bool {
        self.jobs.get(&id).is_some_and(|l| l.halted)
    }

    /// Its pid.
    pub fn pid(&self, id: JobId) -> Option<u32> {
        self.jobs.get(&id).map(|l| l.pid)
    }

    /// The jobs started here.
    pub fn ids(&self) -> Vec<JobId> {
        self.jobs.keys().copied().collect()
    }

    /// Takes over job `id`'s launcher `pid` after a restart, if it is alive and is that
    /// job's launcher (its command line names the job's exit file); whether it did, and
    /// whether the launcher is stopped.
    pub fn adopt(&mut self, id: JobId, pid: u32) -> Option<bool> {
        let exit = format!("jobs/{id}.exit");
        let ours = alive(pid)
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&exit));
        if !ours {
            return None;
        }
        let halted = stopped(pid);
        self.jobs.insert(
            id,
            Launcher {
                child: None,
                pid,
                halted,
                saved: (Duration::ZERO, 0, 0),
            },
        );
        Some(halted)
    }

    /// The jobs whose launcher ended since the last call, with the status when known.
    pub fn reap(&mut self) -> Vec<(JobId, Option<ExitStatus>)> {
        let mut ended = Vec::new();
        for (&id, l) in self.jobs.iter_mut() {
            if let Some(st) = l.ended() {
                ended.push((id, st));
            }
        }
        for (id, _) in &ended {
            self.jobs.remove(id);
        }
        ended
    }
}

impl NetworkManager for Launchers {
    type Error = NetError;

    fn init_node(&mut self, node: NodeId, nodes: u32) -> Result<(), NetError> {
        self.nodes_up = vec![true; nodes as usize];
        self.add_node(node)
    }

    fn add_node(&mut self, node: NodeId) -> Result<(), NetError> {
        match self.nodes_up.get_mut(node as usize) {
            Some(u) => {
                *u = true;
                Ok(())
            }
            None => Err(NetError(format!("no node {node}"))),
        }
    }

    fn remove_node(&mut self, node: NodeId) -> Result<(), NetError> {
        match self.nodes_up.get_mut(node as usize) {
            Some(u) => {
                *u = false;
                Ok(())
            }
            None => Err(NetError(format!("no node {node}"))),
        }
    }

    fn init_job(&mut self, id: JobId, spec: &JobSpec) -> Result<(), NetError> {
        let exit_file = self.path(id, "exit");
        let _ = std::fs::remove_file(&exit_file);
        let hosts = self.path(id, "hosts");
        std::fs::write(&hosts, self.hostfile(spec)?)
            .map_err(|e| NetError(format!("cannot write {}: {e}", hosts.display())))?;
        let exe = std::env::current_exe().unwrap_or_else(|_| "phalanx".into());
        let mut cmd = Command::new(exe);
        cmd.arg("run")
            .arg("-n")
            .arg(spec.ranks.to_string())
            .arg("--hostfile")
            .arg(&hosts)
            .arg("--agent-secret")
            .arg(self.dir.join("secret"))
            .args(self.boot_ip.map(|ip| format!("--boot-ip={ip}")))
            .args(
                self.budget
                    .map(|b| format!("--env=PHALANX_COMM_BUDGET={}", b.credit_budget())),
            )
            // Switched buffers: the running job's are locked in memory, a switched-out
            // job's are not (its ranks unlock them when halted).
            .args(
                self.budget
                    .filter(|b| !b.partitioned)
                    .map(|_| "--env=PHALANX_COMM_LOCK=1"),
            )
            .arg("--tag-output")
            .arg("--status-file")
            .arg(&exit_file)
            .args(&spec.argv)
            .current_dir(&spec.cwd)
            .stdin(Stdio::null());
        new_session(&mut cmd);
        match std::fs::File::create(self.log_path(id)).and_then(|f| Ok((f.try_clone()?, f))) {
            Ok((out, err)) => {
                cmd.stdout(out).stderr(err);
            }
            Err(_) => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        let child = cmd
            .spawn()
            .map_err(|e| NetError(format!("cannot start the launcher: {e}")))?;
        let pid = child.id();
        self.jobs.insert(
            id,
            Launcher {
                child: Some(child),
                pid,
                halted: false,
                saved: (Duration::ZERO, 0, 0),
            },
        );
        Ok(())
    }

    fn end_job(&mut self, id: JobId) -> Result<(), NetError> {
        let Some(mut l) = self.jobs.remove(&id) else {
            return Ok(());
        };
        signal(l.pid, libc::SIGTERM);
        // A stopped launcher (and its stopped ranks) must run to handle the termination.
        signal(l.pid, libc::SIGCONT);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if l.ended().is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: kill(2) on the launcher's process group.
        unsafe { libc::kill(-(l.pid as libc::pid_t), libc::SIGKILL) };
        if let Some(c) = l.child.as_mut() {
            let _ = c.wait();
        }
        Ok(())
    }

    fn halt_network(&mut self, id: JobId) -> Result<StageReport, NetError> {
        let t = Instant::now();
        let report = self.path(id, "halt");
        let Some(l) = self.jobs.get_mut(&id) else {
            return Err(NetError(format!("job {id} is not running here")));
        };
        let _ = std::fs::remove_file(&report);
        signal(l.pid, libc::SIGTSTP);
        l.halted = true;
        while !stopped(l.pid) && t.elapsed() < STOP_WAIT && alive(l.pid) {
            std::thread::sleep(Duration::from_micros(250));
        }
        let warning = (alive(l.pid) && !stopped(l.pid))
            .then(|| format!("job {id} did not stop within {} s", STOP_WAIT.as_secs()));
        // The launcher's figures: how long its ranks took to save what they held
        // (stage 2, done by each rank before it stops) and how much that was.
        let figures: Option<serde_json::Value> = std::fs::read(&report)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let num = |k: &str| figures.as_ref().and_then(|v| v[k].as_u64()).unwrap_or(0);
        let save = Duration::from_micros(num("save_us"));
        l.saved = (save, num("datagrams"), num("bytes"));
        Ok(StageReport {
            took: t.elapsed().saturating_sub(save),
            datagrams: num("datagrams"),
            bytes: num("bytes"),
            warning,
        })
    }

    fn context_switch(
        &mut self,
        outgoing: &[JobId],
        _incoming: &[JobId],
    ) -> Result<StageReport, NetError> {
        // Each rank moved its links' valid packets to ordinary memory while halting (the
        // time reported here, the slowest rank's) and puts them back when released.
        let mut r = StageReport::default();
        for l in outgoing.iter().filter_map(|id| self.jobs.get(id)) {
            r.took = r.took.max(l.saved.0);
            r.datagrams += l.saved.1;
            r.bytes += l.saved.2;
        }
        Ok(r)
    }

    fn release_network(&mut self, id: JobId) -> Result<StageReport, NetError> {
        let t = Instant::now();
        let Some(l) = self.jobs.get_mut(&id) else {
            return Err(NetError(format!("job {id} is not running here")));
        };
        signal(l.pid, libc::SIGCONT);
        l.halted = false;
        Ok(StageReport {
            took: t.elapsed(),
            ..StageReport::default()
        })
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a launcher of ours; no memory involved.
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

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    proc_state(pid).is_some_and(|c| c != 'Z')
}

/// Starts the process of `cmd` in a session of its own: when the master dies, a stopped
/// launcher's process group is not orphaned within the master's session, so the kernel
/// does not hang it up (SIGHUP) — it waits, stopped, for the next master.
pub fn new_session(cmd: &mut Command) {
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the parent; the
    // closure runs in the forked child before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_follow_seed_001() {
        let b = |partitioned| Budget {
            bytes: 1 << 20,
            partitioned,
            slots: 4,
        };
        // Switched: the running job holds and sizes its credits from all of B.
        assert_eq!(b(false).per_job(), 1 << 20);
        assert_eq!(b(false).credit_budget(), 1 << 20);
        // Partitioned: B/n held, credits as FM's C0 = B/(n²p) (p applied by the ranks).
        assert_eq!(b(true).per_job(), 1 << 18);
        assert_eq!(b(true).credit_budget(), 1 << 16);
    }

    #[test]
    fn hostfile_splits_ranks_over_the_nodes_daemons() {
        let mut l = Launchers::new(PathBuf::from("/nonexistent"), None, None);
        l.init_node(0, 3).unwrap();
        for n in 0..3 {
            l.set_agent(n, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7000 + n as u16));
        }
        let spec = |ranks, nodes: Vec<u32>| JobSpec {
            ranks,
            nodes,
            argv: vec!["x".into()],
            cwd: "/".into(),
        };
        assert_eq!(
            l.hostfile(&spec(5, vec![0, 2])).unwrap(),
            "node:node0@127.0.0.1:7000 slots=3\nnode:node2@127.0.0.1:7002 slots=2\n"
        );
        l.remove_node(2).unwrap();
        let e = l.hostfile(&spec(2, vec![0, 2])).unwrap_err();
        assert!(e.0.contains("node 2"), "{e}");
    }
}
