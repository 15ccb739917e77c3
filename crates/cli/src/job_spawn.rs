//! Spawning ranks into a running job (`MPI_Comm_spawn`, see `phalanx_boot::msg`).
//!
//! Contract: a rank's [`SpawnRequest`] is served one at a time, in arrival order (at most
//! [`MAX_QUEUED`] wait; more is a failure of the job). The launcher checks every program
//! before starting any (an answer of `SpawnFailed` names the one it cannot run), starts
//! the processes on its own host as job ranks `first..first + count` (after every rank so
//! far) with `PHALANX_SPAWNED` describing their world and parents, and once all of them
//! have said hello (within the start-up timeout, or the job fails) sends each the table
//! of every endpoint so far and the requester its `Spawned` answer. Spawned ranks are
//! ranks of the job like any other: their output is forwarded, their exit judged, and
//! Finalize waits for them. Requests from ranks on other hosts are refused (the
//! launcher starts processes on its own host only).

use super::{Failure, Job, Rank, SEND_TIMEOUT};
use crate::hosts::Host;
use crate::output;
use crate::spawn::{spawn_rank, Program};
use phalanx_boot::frame::{encode, send_line_blocking};
use phalanx_boot::{Endpoint, LauncherMsg, SpawnRequest, SpawnedEnv, Table, ENV_SPAWNED};
use std::path::Path;
use std::time::Instant;

/// Spawn requests waiting behind the one in progress, at most.
pub(super) const MAX_QUEUED: usize = 64;

/// The spawn in progress.
pub(super) struct Spawning {
    /// The rank that asked.
    requester: usize,
    /// Job ranks `first..first + count` are being started.
    first: usize,
    count: usize,
    started: Instant,
}

/// Can `prog` be run (an executable file, by path or in PATH)?
fn runnable(prog: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let ok = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        return ok(Path::new(prog));
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| ok(&d.join(prog))))
}

impl Job {
    /// Rank `r` asked for new processes.
    pub(super) fn spawn_requested(&mut self, r: usize, req: SpawnRequest) -> Result<(), Failure> {
        if self.spawn_queue.len() >= MAX_QUEUED {
            return Err(Failure::new(
                format!("rank {r}: more than {MAX_QUEUED} spawn requests waiting"),
                1,
            ));
        }
        self.spawn_queue.push_back((r, req));
        self.spawn_next()
    }

    /// Starts the next queued spawn if none is in progress.
    fn spawn_next(&mut self) -> Result<(), Failure> {
        while self.spawning.is_none() {
            let Some((r, req)) = self.spawn_queue.pop_front() else {
                return Ok(());
            };
            if let Err(reason) = self.start_spawn(r, &req) {
                self.answer(r, &LauncherMsg::SpawnFailed { reason });
            }
        }
        Ok(())
    }

    /// Starts the processes of `req`, or says why not (nothing was started then).
    fn start_spawn(&mut self, r: usize, req: &SpawnRequest) -> Result<(), String> {
        // Spawned ranks run on this host too (a spawn from one nests).
        if !self.ranks[r].spawned && self.cfg.hosts.get(r) != Some(&Host::Local) {
            return Err(format!(
                "rank {r} does not run on the launcher's host; phalanx spawns processes there only"
            ));
        }
        let count: u64 = req.commands.iter().map(|c| c.count as u64).sum();
        if req.commands.is_empty()
            || req.commands.iter().any(|c| c.count == 0)
            || count > phalanx_boot::MAX_SPAWN as u64
        {
            return Err(format!(
                "{count} processes in {} commands (1 to {} per request)",
                req.commands.len(),
                phalanx_boot::MAX_SPAWN
            ));
        }
        let first = self.ranks.len();
        let size = first as u64 + count;
        if size > phalanx_boot::MAX_RANKS as u64 {
            return Err(format!(
                "the job would exceed {} ranks",
                phalanx_boot::MAX_RANKS
            ));
        }
        if let Some(c) = req.commands.iter().find(|c| !runnable(&c.prog)) {
            return Err(format!("cannot run {:?}: not an executable file", c.prog));
        }
        let world = SpawnedEnv {
            first: first as u32,
            count: count as u32,
            context: req.context,
            parents: req.parents.clone(),
        };
        let boot = self.boots[r];
        let started = self.start_all(req, &world, first, size as u32, boot);
        if let Err(e) = started {
            // Nothing of this request stays: what started is killed and forgotten (its
            // output threads end with it).
            for i in first..self.ranks.len() {
                self.signal_rank(i, libc::SIGKILL);
                if let Some(c) = self.ranks[i].child.as_mut() {
                    let _ = c.wait();
                }
            }
            self.ranks.truncate(first);
            self.boots.truncate(first);
            return Err(e);
        }
        self.spawning = Some(Spawning {
            requester: r,
            first,
            count: count as usize,
            started: Instant::now(),
        });
        Ok(())
    }

    /// Starts the processes of `req` as job ranks `first..` of a job of `size`.
    fn start_all(
        &mut self,
        req: &SpawnRequest,
        world: &SpawnedEnv,
        first: usize,
        size: u32,
        boot: std::net::SocketAddr,
    ) -> Result<(), String> {
        let mut rank = first as u32;
        for c in &req.commands {
            let mut p: Program = self.local_program.clone();
            p.prog = c.prog.clone().into();
            p.args = c.args.iter().map(Into::into).collect();
            p.env.push((ENV_SPAWNED.into(), world.to_value().into()));
            // Spawned ranks reach everyone over UDP (see the library's `engine::spawn`).
            p.env.push(("PHALANX_TRANSPORT".into(), "udp".into()));
            for _ in 0..c.count {
                let mut child = spawn_rank(&p, rank, size, boot, &Host::Local)
                    .map_err(|e| format!("cannot start {:?}: {e}", c.prog))?;
                let pipes = super::pipes_of(&mut child);
                let pid = child.id();
                let mut entry = Rank::new(Some(child), None, pid);
                entry.spawned = true;
                self.ranks.push(entry);
                self.boots.push(boot);
                if let Some(tx) = self.done_tx.as_ref() {
                    for (src, dest) in pipes {
                        if output::forward(rank, src, dest, self.cfg.tag_output, tx.clone()).is_ok()
                        {
                            self.outputs += 1;
                        }
                    }
                }
                rank += 1;
            }
        }
        Ok(())
    }

    /// Completes the spawn in progress once its ranks have all said hello; fails the job
    /// when they did not within the start-up timeout.
    pub(super) fn spawn_progress(&mut self) -> Result<(), Failure> {
        let Some(s) = &self.spawning else {
            return Ok(());
        };
        let new = s.first..s.first + s.count;
        if !self.ranks[new.clone()].iter().all(|x| x.endpoint.is_some()) {
            if s.started.elapsed() > self.cfg.startup_timeout {
                let missing: Vec<usize> =
                    new.filter(|&i| self.ranks[i].endpoint.is_none()).collect();
                return Err(Failure::new(
                    format!(
                        "spawned ranks {missing:?} did not connect within {:?}",
                        self.cfg.startup_timeout
                    ),
                    1,
                ));
            }
            return Ok(());
        }
        let (requester, first) = (s.requester, s.first as u32);
        // Every earlier rank said hello at its start-up (or its spawn): all are known.
        let Some(endpoints) = self.ranks[..new.end]
            .iter()
            .map(|x| x.endpoint.clone())
            .collect::<Option<Vec<Endpoint>>>()
        else {
            return Err(Failure::new("spawn: a rank of the job has no endpoint", 1));
        };
        let table = encode(&LauncherMsg::Table(Table {
            job_key: self.job_key,
            endpoints: endpoints.clone(),
        }));
        for i in new.clone() {
            if let Some(conn) = self.ranks[i].conn.as_mut() {
                let _ = send_line_blocking(&mut conn.stream, &table, SEND_TIMEOUT, true);
            }
        }
        let answer = LauncherMsg::Spawned {
            first,
            endpoints: endpoints[new].to_vec(),
        };
        self.answer(requester, &answer);
        self.spawning = None;
        self.spawn_next()
    }

    fn answer(&mut self, r: usize, msg: &LauncherMsg) {
        if let Some(conn) = self.ranks[r].conn.as_mut() {
            let _ = send_line_blocking(&mut conn.stream, &encode(msg), SEND_TIMEOUT, true);
        }
    }
}
