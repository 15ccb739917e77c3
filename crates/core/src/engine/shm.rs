//! Point-to-point traffic between the ranks of one host over shared memory.
//!
//! Contract: with `PHALANX_TRANSPORT=shm` or `auto` (the default) and no
//! `PHALANX_FAULTS` (with it, `auto` takes UDP on every pair and `shm` runs the lossy
//! protocols over the rings: [`crate::link::HostMedium`]), the ranks of one host — same kernel boot id and network namespace — share
//! a segment of per-pair rings ([`phalanx_shm`]). A peer reached that way gets the same
//! message-layer datagrams as over UDP, but no reliability protocol: the ring is reliable
//! and ordered, and its consumer index is the flow control (a frame the engine cannot
//! take yet stays in the ring). The medium is decided per host by the launcher: every
//! rank reports whether it joined the segment, and the host's ranks keep it only if all
//! did, so no pair ever disagrees. `shm` fails the job at start-up (naming the rank) if a
//! rank cannot join; `auto` then falls back to UDP for the whole host, which the launcher
//! says once. Collective fragments to ranks of this
//! host take the rings too (URTP carries them between hosts).

use super::Engine;
use crate::error::{Error, Result};
use crate::link::{parse_compact, Compact, Medium};

/// Polls of one ring a blocking receive makes before it arms (`recv_from_ring`).
const RING_SPIN: u32 = 256;
use phalanx_boot::{BootClient, Control, Endpoint, ShmOutcome, Table};
use phalanx_shm::{ShmConfig, ShmTransport};
use phalanx_transport::TransportKind;
use phalanx_wire::Packet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Status a rank reports to `--timeout` queries while it joins shared memory.
const JOIN_STATUS: &str = "in start-up: joining this host's shared memory";

/// Connects the ranks of this host, if the configuration asks for shared memory, and
/// abides by the launcher's decision for the host (see `phalanx_boot::msg`): the outcome
/// is reported, the decision awaited, and a segment joined is dropped again unless every
/// rank of the host joined it. While connecting, a watcher thread listens to the launcher
/// so that a decision against shared memory (another local rank failed) ends the wait at
/// once instead of after the connect timeout.
pub(super) fn setup(
    config: &crate::config::Config,
    table: &Table,
    me: &Endpoint,
    rank: u32,
    boot: &mut BootClient,
) -> Result<Option<ShmTransport>> {
    let kind = config.transport;
    let wanted = match kind {
        TransportKind::Udp => false,
        TransportKind::Shm => true,
        TransportKind::Auto => config.faults.is_none(),
    };
    let local: Vec<u32> = table
        .endpoints
        .iter()
        .enumerate()
        .filter(|(_, e)| e.host.boot_id == me.host.boot_id && e.host.netns_ino == me.host.netns_ino)
        .map(|(r, _)| r as u32)
        .collect();
    let launcher = |e: phalanx_boot::BootError| {
        Error::Init(format!("rank {rank}: shared-memory decision: {e}"))
    };
    if !wanted || local.len() < 2 {
        boot.send_shm(ShmOutcome::NotUsed).map_err(launcher)?;
        // Consume the decision so that it is not taken for a control message later.
        // Another rank of the host may still be connecting: wait as long as it may.
        let wait = config.shm.connect_timeout + DECISION_WAIT;
        boot.wait_shm_decision(wait, JOIN_STATUS)
            .map_err(launcher)?;
        return Ok(None);
    }
    let host = me
        .host
        .boot_id
        .bytes()
        .chain(me.host.netns_ino.to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
    let name = format!("phalanx-{:016x}-{:08x}", table.job_key, host as u32);
    let mut cfg: ShmConfig = config.shm.clone();
    if let Some(budget) = config.comm_budget {
        cfg.rings_budget = cfg.rings_budget.min(budget);
    }
    let cancel = Arc::new(AtomicBool::new(false));
    cfg.cancel = Some(cancel.clone());
    let wait = cfg.connect_timeout + DECISION_WAIT;
    let done = AtomicBool::new(false);
    // The watcher owns the launcher connection while the main thread connects.
    let (joined, early) = std::thread::scope(|s| {
        let watcher = s.spawn(|| watch(boot, &cancel, &done));
        let joined = test_fail_join(config.test_shm_fail.as_deref(), rank).map_or_else(
            || ShmTransport::connect(&name, &local, rank, cfg),
            |e| Err(std::io::Error::other(e)),
        );
        done.store(true, Ordering::Release);
        let early = watcher.join().unwrap_or_else(|_| {
            Err(phalanx_boot::BootError::Protocol(
                "shared-memory watcher panicked".into(),
            ))
        });
        (joined, early)
    });
    let early = early.map_err(launcher)?;
    let outcome = match &joined {
        Ok(_) => ShmOutcome::Joined,
        Err(e) => ShmOutcome::Failed {
            reason: e.to_string(),
            required: kind == TransportKind::Shm,
        },
    };
    boot.send_shm(outcome).map_err(launcher)?;
    if let (Err(e), TransportKind::Shm) = (&joined, kind) {
        return Err(Error::Init(format!(
            "PHALANX_TRANSPORT=shm: shared memory between ranks {local:?} failed: {e}"
        )));
    }
    let use_shm = match early {
        Some(d) => d,
        None => boot
            .wait_shm_decision(wait, JOIN_STATUS)
            .map_err(launcher)?,
    };
    match joined {
        Ok(t) if use_shm => Ok(Some(t)),
        Ok(_) if kind == TransportKind::Shm => Err(Error::Init(format!(
            "PHALANX_TRANSPORT=shm: rank {rank} joined shared memory but another rank of its \
             host did not"
        ))),
        Err(_) if use_shm => Err(Error::Init(format!(
            "rank {rank}: the launcher chose shared memory for a host this rank could not join"
        ))),
        // Fallback for the whole host: the launcher said so once.
        _ => Ok(None),
    }
}

/// Bound on waiting for the launcher's decision once this rank has reported.
const DECISION_WAIT: Duration = Duration::from_secs(30);

/// The watcher: polls the launcher until `done`; a decision against shared memory sets
/// `cancel` and is returned (`Some(false)`), as is one for it (`Some(true)`, rare: the
/// others finished first). Queries are answered; an abort is an error.
fn watch(
    boot: &mut BootClient,
    cancel: &AtomicBool,
    done: &AtomicBool,
) -> std::result::Result<Option<bool>, phalanx_boot::BootError> {
    while !done.load(Ordering::Acquire) {
        match boot.poll()? {
            Some(Control::Shm(d)) => {
                if !d {
                    cancel.store(true, Ordering::Release);
                }
                return Ok(Some(d));
            }
            Some(Control::Query) => boot.reply_status(JOIN_STATUS)?,
            Some(Control::Abort(reason)) => {
                cancel.store(true, Ordering::Release);
                return Err(phalanx_boot::BootError::Aborted(reason));
            }
            Some(Control::Release | Control::Halt(_) | Control::Continue | Control::Spawned(_)) => {
                return Err(phalanx_boot::BootError::Protocol(
                    "release or halt during start-up".into(),
                ))
            }
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    Ok(None)
}

/// Test hook: `PHALANX_TEST_SHM_FAIL=R` makes rank R's join fail at once (only the
/// start-up tests set it), `R@MS` after sleeping MS milliseconds.
fn test_fail_join(hook: Option<&str>, rank: u32) -> Option<String> {
    let v = hook?;
    let (r, ms) = v.split_once('@').unwrap_or((v, "0"));
    if r.trim().parse::<u32>().ok()? != rank {
        return None;
    }
    std::thread::sleep(Duration::from_millis(ms.trim().parse().unwrap_or(0)));
    Some(format!(
        "rank {rank}: shared-memory join failed on purpose (PHALANX_TEST_SHM_FAIL)"
    ))
}

impl Engine {
    /// A compact frame from `from` ([`crate::link::parse_compact`]). False: no buffer yet.
    #[inline]
    fn on_compact(&mut self, from: u32, c: std::result::Result<Compact<'_>, ()>) -> bool {
        let c = match c {
            Ok(c) if c.src == from => c,
            _ => {
                self.stats.drop_malformed += 1;
                return true;
            }
        };
        let total = c.data.len() as u64;
        let ok = self.on_eager_parts(c.src, c.tag, c.ctx, total, 0, c.data, false);
        if ok {
            self.stats.shm_received += 1;
        } else {
            self.stats.drop_no_buffer += 1;
        }
        ok
    }

    /// A blocking receive from `src` whose message is the next frame of `src`'s ring, as a
    /// compact frame: copied out at once, for at most [`RING_SPIN`] polls of that ring
    /// (see `p2p::direct`). `None` when that is not the case: nothing was taken.
    #[inline]
    pub(super) fn recv_from_ring(
        &mut self,
        buf: &mut crate::requests::RecvBuf,
        src: u32,
        tag: Option<i32>,
        ctx: u32,
    ) -> Option<Result<crate::requests::RawStatus>> {
        if !self.via_shm(src)
            || self.halted
            || self.halt_asked.is_some()
            || !self.links.local.is_empty()
        {
            return None;
        }
        let l = self.links.shm.as_mut()?;
        if l.has_replay() {
            return None;
        }
        for _ in 0..RING_SPIN {
            let Ok(peeked) = l.peek(src) else {
                return None;
            };
            let Some(frame) = peeked else {
                continue;
            };
            let c = match parse_compact(frame) {
                Some(Ok(c)) if c.src == src && c.ctx == ctx && tag.is_none_or(|t| t == c.tag) => c,
                _ => return None,
            };
            let (tag, total) = (c.tag, c.data.len() as u64);
            if crate::trace::on() {
                self.trace_numbers.arrived(src, tag, total);
            }
            buf.write(0, c.data);
            let _ = l.release(src);
            self.stats.shm_received += 1;
            return Some(super::p2p::direct::finish_buf(buf, src, tag, total));
        }
        None
    }

    /// Whether `peer` is reached over shared memory.
    #[inline]
    pub(crate) fn via_shm(&self, peer: u32) -> bool {
        self.link(peer) == Medium::Shm
    }

    /// Bytes per board slot and the board slot of each of `world` (world ranks), if there
    /// are two or more and every one is on this host's board.
    pub(crate) fn board_of(&self, world: &[u32]) -> Option<(usize, Vec<usize>)> {
        let b = self.board.as_ref().filter(|_| world.len() > 1)?;
        let slots = world
            .iter()
            .map(|&w| b.local_of(w))
            .collect::<Option<_>>()?;
        Some((b.capacity(), slots))
    }

    /// Can every one of `world` (ranks of this host) pull from every other one's memory?
    pub(crate) fn single_copy_among(&self, world: &[u32]) -> bool {
        self.links
            .shm
            .as_ref()
            .is_some_and(|t| t.single_copy_among(world))
    }

    /// Largest message sent eagerly to `dest`.
    #[inline]
    pub(crate) fn eager_limit_to(&self, dest: u32) -> usize {
        if self
            .readable_by
            .get(dest as usize)
            .copied()
            .unwrap_or(false)
        {
            self.shm_eager_limit
        } else {
            self.eager_limit
        }
    }

    /// The address a rendezvous receiver may pull send `id`'s bytes from, when `peer` is
    /// on shared memory and may read this process's memory.
    pub(crate) fn single_copy_addr(
        &self,
        peer: u32,
        id: crate::engine::requests::ReqId,
    ) -> Option<u64> {
        let t = self.links.shm.as_ref()?;
        if !self.via_shm(peer) || !t.can_be_read_by(peer).unwrap_or(false) {
            return None;
        }
        match self.reqs.get(id) {
            Some(crate::engine::requests::Req::Send(s)) => {
                Some(s.buf.slice(0, 0).as_ptr() as usize as u64)
            }
            _ => None,
        }
    }

    /// Pulls a single-copy rendezvous message from `src`'s memory into receive `rreq`.
    /// False if that is not possible (the caller falls back to the two-copy path).
    pub(crate) fn pull_single_copy(
        &mut self,
        src: u32,
        addr: u64,
        rreq: crate::engine::requests::ReqId,
    ) -> bool {
        // Not through `self.shm`: this runs while `shm_recv` has the transport taken out.
        let pid = match self.single_copy_pids.get(src as usize) {
            Some(&pid) if pid > 0 => pid,
            _ => return false,
        };
        let Some(crate::engine::requests::Req::Recv(r)) = self.reqs.get_mut(rreq) else {
            return false;
        };
        let Some((_, _, total)) = r.matched else {
            return false;
        };
        let n = (total as usize).min(r.buf.cap());
        if phalanx_shm::read_remote(pid, addr as usize, r.buf.as_mut_slice(n)).is_err() {
            return false;
        }
        r.received = total;
        self.finish_recv_pub(rreq);
        self.stats.single_copies += 1;
        true
    }

    /// Wakes those of `peers` (world ranks) that sleep on shared memory (after a board
    /// publication or a board read they may wait for).
    pub(crate) fn shm_wake(&self, peers: impl IntoIterator<Item = u32>) {
        if let Some(t) = self.links.shm.as_ref() {
            t.wake(peers);
        }
    }

    /// Writes a whole eager message as one compact frame straight into `peer`'s ring.
    /// False if it does not fit one frame or the ring is full (the caller queues it the
    /// usual way).
    #[inline]
    pub(crate) fn shm_send_compact(&mut self, peer: u32, ctx: u32, tag: i32, data: &[u8]) -> bool {
        let src = self.rank;
        match self.links.shm.as_mut() {
            Some(l) => l.send_compact(src, peer, ctx, tag, data),
            None => false,
        }
    }

    /// Hands frames waiting in the rings to the message layer. Returns how many.
    pub(crate) fn shm_recv(&mut self) -> Result<usize> {
        let Some(mut t) = self.links.shm.take() else {
            return Ok(0);
        };
        let r = t.recv(&mut |from, bytes| {
            if let Some(c) = parse_compact(bytes) {
                return self.on_compact(from, c);
            }
            let Ok(pkt) = Packet::new_checked(bytes) else {
                self.stats.drop_malformed += 1;
                return true;
            };
            if pkt.job_key() != self.job_key {
                self.stats.drop_foreign += 1;
                return true;
            }
            let ok = self.on_message(&pkt, false);
            if ok {
                self.stats.shm_received += 1;
            } else {
                self.stats.drop_no_buffer += 1;
            }
            ok
        });
        self.links.shm = Some(t);
        r.map_err(Error::Io)
    }
}
