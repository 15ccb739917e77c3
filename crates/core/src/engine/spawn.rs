//! Ranks that join a running job (`MPI_Comm_spawn`).
//!
//! Contract: a rank asks the launcher for new processes ([`Engine::spawn`]) and waits,
//! making progress, for its answer: the new ranks' first job rank and endpoints, or why
//! none was started. Every member of the spawning communicator then grows its engine to
//! reach them ([`Engine::add_peers`]): their addresses join the socket's peer table and
//! each gets a fresh go-back-n stream (they talk UDP; shared memory, the careful protocol
//! and multicast stay among the ranks that started together).
//!
//! Each process has an *era*: the job ranks it started with (the original world, or one
//! spawn's new world). URTP, multicast, the shared-memory board and the hierarchical
//! collectives serve communicators inside the era only; a communicator with members of
//! two eras runs the point-to-point algorithms, and its collective fragments to ranks of
//! another era travel on the go-back-n links (see `coll_net`). Eras are disjoint ranges,
//! so every member of a communicator takes the same decision.

use super::{peer_payload_of, Engine, Waiting};
use crate::error::{Error, Result};
use crate::link::Medium;
use phalanx_boot::{Endpoint, SpawnRequest};
use std::net::{Ipv4Addr, SocketAddrV4};

impl Engine {
    /// Job ranks `first..first + count` this process started with.
    pub(crate) fn era(&self) -> (u32, u32) {
        self.era
    }

    /// `rank` started together with this process.
    #[inline]
    pub(crate) fn in_era(&self, rank: u32) -> bool {
        rank.wrapping_sub(self.era.0) < self.era.1
    }

    /// What this process was told when a spawn started it (`None` for an original rank).
    pub(crate) fn spawned_env(&self) -> Option<&phalanx_boot::SpawnedEnv> {
        self.spawned.as_ref()
    }

    /// Can this engine reach ranks that join later?
    fn can_grow(&self) -> Result<()> {
        if self.links.careful.is_some() {
            return Err(Error::InvalidArg(
                "spawning processes is not supported on a network declared reliable \
                 (PHALANX_RELIABLE_NET: the careful protocol has a fixed set of peers)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Asks the launcher for the processes of `req` and waits for its answer: the first
    /// new job rank and the new processes' endpoints. An error when the launcher refused
    /// (the reason is its own) or when this rank has no launcher that can spawn.
    pub(crate) fn spawn(&mut self, req: SpawnRequest) -> Result<(u32, Vec<Endpoint>)> {
        self.can_grow()?;
        let Some(boot) = self.boot.as_mut() else {
            return Err(Error::InvalidArg(
                "spawning processes needs a job started by `phalanx run`".into(),
            ));
        };
        boot.send_spawn(req)
            .map_err(|e| Error::InvalidArg(format!("spawn: {e}")))?;
        self.spawn_answer = None;
        self.wait_until(Waiting::Spawn, |e| e.spawn_answer.is_some())?;
        match self.spawn_answer.take() {
            Some(Ok(x)) => Ok(x),
            Some(Err(reason)) => Err(Error::Spawn(reason)),
            None => Err(Error::Spawn("no answer from the launcher".into())),
        }
    }

    /// The launcher's answer to this rank's spawn request arrived.
    pub(super) fn spawn_answered(&mut self, a: std::result::Result<(u32, Vec<Endpoint>), String>) {
        self.spawn_answer = Some(a);
    }

    /// Grows the job to reach job ranks `first..` at the addresses `endpoints`; ranks between the
    /// current size and `first` (spawned by others, never reached from here) get no
    /// address. Ranks already known are left as they are.
    pub(crate) fn add_peers(&mut self, first: u32, endpoints: &[SocketAddrV4]) -> Result<()> {
        self.can_grow()?;
        let end = first
            .checked_add(endpoints.len() as u32)
            .filter(|&e| e <= phalanx_boot::MAX_RANKS)
            .ok_or_else(|| Error::InvalidArg("spawned ranks beyond the largest job".into()))?;
        if end <= self.size {
            return Ok(());
        }
        let nowhere = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
        let mut addrs = Vec::with_capacity((end - self.size) as usize);
        for r in self.size..end {
            addrs.push(match r.checked_sub(first) {
                Some(i) => endpoints[i as usize],
                None => nowhere,
            });
        }
        if let Some(t) = self.links.net.transport.as_mut() {
            if !t.add_peers(&addrs) {
                return Err(Error::InvalidArg(
                    "spawning processes is not supported on this transport (fault injection \
                     over shared memory)"
                        .into(),
                ));
            }
        }
        self.peer_addrs.extend_from_slice(&addrs);
        let n = end as usize;
        // Their datagram sizes as for the ranks met at start-up (a whole UDP datagram to
        // one of this host's).
        let from = self.peer_payload.len() as u32;
        let t = self.links.net.transport.as_deref();
        let sizes: Vec<usize> = (from..end)
            .map(|p| peer_payload_of(t, p, self.max_payload))
            .collect();
        self.peer_payload.extend(sizes);
        self.links.gbn.proto.add_peers(end);
        self.links.grow(end, Medium::Gbn);
        self.p2p.grow(end);
        self.host_of.resize(n, u32::MAX);
        self.acquainted.resize(n, false);
        for r in first..end {
            self.acquainted[r as usize] = true;
        }
        self.single_copy_pids.resize(n, 0);
        self.readable_by.resize(n, false);
        if !self.resumed.is_empty() {
            self.resumed.resize(n, false);
        }
        self.all_peers_shm = false;
        self.size = end;
        Ok(())
    }
}
