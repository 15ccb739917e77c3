//! The launcher's side of ranks that agents started (node daemons of `node:` hosts,
//! ssh proxies of ssh hosts): their events, their signals, their loss.
//!
//! Contract: a rank on an agent's host is started by asking that agent
//! ([`crate::agents`]) with what [`spawn_rank`](crate::spawn::spawn_rank) would have used
//! ([`spec`]); its exit arrives as an event and is judged like a local rank's; signals
//! to it go through its agent; an agent's lost connection means its ranks are dead (its
//! lifeline contract) and fails the job naming the host — "cannot reach" (exit code 2)
//! when the agent never said anything.

use super::{Failure, Job};
use crate::agents::{Agents, Event};
use crate::spawn::signal_group;
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// Longest wait for a failed agent's own account of its loss.
const LOSS_REASON_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Job {
    /// What the node daemons reported since the last call.
    pub(super) fn agent_events(&mut self) -> Result<(), Failure> {
        while let Some(ev) = self.agents.as_ref().and_then(Agents::try_event) {
            match ev {
                // Only about a rank that node was asked to start: anything else is ignored.
                Event::Spawned { agent, rank, pid } => {
                    if let Some(r) = self.remote_rank(agent, rank) {
                        self.ranks[r].pid = pid;
                    }
                }
                Event::SpawnFailed {
                    agent,
                    rank,
                    node,
                    message,
                } => {
                    if self.remote_rank(agent, rank).is_none() {
                        continue;
                    }
                    let prog = self.cfg.program.prog.to_string_lossy().into_owned();
                    return Err(Failure::new(
                        format!("cannot start {prog} (rank {rank}) on {node}: {message}"),
                        2,
                    ));
                }
                Event::Exited {
                    agent,
                    rank,
                    status,
                } => {
                    if let Some(r) = self.remote_rank(agent, rank) {
                        if self.ranks[r].exit.is_none() {
                            self.exited(r, status)?;
                        }
                    }
                }
                Event::Lost {
                    agent,
                    node,
                    why,
                    started,
                } => {
                    self.agent_lost(agent);
                    return Err(if started {
                        Failure::new(format!("lost {node}: {why}"), 1)
                    } else {
                        Failure::new(format!("cannot reach {node}: {why}"), 2)
                    });
                }
            }
        }
        Ok(())
    }

    /// An agent that failed a request: the failure its own events report (its loss,
    /// with the reason), waiting at most [`LOSS_REASON_WAIT`] for them.
    pub(super) fn loss_reason(&mut self) -> Option<Failure> {
        let deadline = std::time::Instant::now() + LOSS_REASON_WAIT;
        while std::time::Instant::now() < deadline {
            if let Err(f) = self.agent_events() {
                return Some(f);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        None
    }

    /// While tearing down: records the remote ranks' exits (and a lost node's ranks as
    /// dead) without judging them.
    pub(super) fn note_remote_exits(&mut self) {
        while let Some(ev) = self.agents.as_ref().and_then(Agents::try_event) {
            match ev {
                Event::Exited {
                    agent,
                    rank,
                    status,
                } => {
                    if let Some(r) = self.remote_rank(agent, rank) {
                        self.ranks[r].exit.get_or_insert(status);
                    }
                }
                Event::Lost { agent, .. } => self.agent_lost(agent),
                Event::Spawned { .. } | Event::SpawnFailed { .. } => {}
            }
        }
    }

    /// Rank `rank` if agent `agent` started it.
    pub(super) fn remote_rank(&self, agent: usize, rank: u32) -> Option<usize> {
        let r = rank as usize;
        (self.ranks.get(r)?.agent == Some(agent)).then_some(r)
    }

    /// Node daemon `agent` is gone and its ranks with it (its lifeline contract).
    pub(super) fn agent_lost(&mut self, agent: usize) {
        for r in self.ranks.iter_mut() {
            if r.agent == Some(agent) && r.exit.is_none() {
                r.exit = Some(ExitStatus::from_raw(libc::SIGKILL));
            }
        }
    }

    /// Sends `sig` to rank `r`'s process group (through its node daemon if it has one).
    pub(crate) fn signal_rank(&mut self, r: usize, sig: i32) {
        let rank = &self.ranks[r];
        match (rank.agent, self.agents.as_mut()) {
            (Some(i), Some(agents)) => agents.signal(i, r as u32, sig),
            (Some(_), None) => {}
            (None, _) => signal_group(rank.pid, sig),
        }
    }
}

/// What rank `rank` is started with by its agent: what `spawn_rank` would use, and for
/// an ssh host (`ssh`) also the launcher's `PHALANX_*` variables, which a local rank
/// would have inherited — not the per-rank ones, and not `PHALANX_IP`/`PHALANX_CPUS`,
/// which describe this machine (`-x` forwards them on purpose).
pub(super) fn spec(
    cfg: &super::Config,
    rank: u32,
    boot: SocketAddr,
    ssh: bool,
) -> phalanx_gang::proto::SpawnSpec {
    let lossy = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
    let p = &cfg.program;
    let mut env: Vec<(String, String)> = Vec::new();
    if ssh {
        // Per rank, or per host (an address, a CPU count of this machine): not these.
        let own = [
            phalanx_boot::ENV_RANK,
            phalanx_boot::ENV_SIZE,
            phalanx_boot::ENV_BOOT,
            crate::spawn::ENV_IP,
            "PHALANX_CPUS",
            crate::spawn::ENV_MACHINE_RANKS,
        ];
        env.extend(std::env::vars_os().filter_map(|(k, v)| {
            // A variable that is not UTF-8 cannot be one of ours (or travel as JSON).
            let (k, v) = (k.into_string().ok()?, v.into_string().ok()?);
            (k.starts_with("PHALANX_")
                && !own.contains(&k.as_str())
                && !p.env.iter().any(|(pk, _)| pk == k.as_str()))
            .then_some((k, v))
        }));
    }
    // Not the launcher machine's rank count (its namespaces' ranks share its CPUs).
    env.extend(
        p.env
            .iter()
            .filter(|(k, _)| k != crate::spawn::ENV_MACHINE_RANKS)
            .map(|(k, v)| (lossy(k), lossy(v))),
    );
    phalanx_gang::proto::SpawnSpec {
        rank,
        size: cfg.size,
        boot: boot.to_string(),
        prog: lossy(&p.prog),
        args: p.args.iter().map(|a| lossy(a)).collect(),
        env,
        cwd: std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_else(|_| ".".into()),
        bind: !p.cpus.is_empty(),
    }
}
