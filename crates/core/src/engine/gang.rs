//! The job manager's hooks on a rank's links (seed 001): halt, report, save, restore,
//! resume — the same calls on every medium, through the link interface (`crate::link`).
//!
//! Contract:
//! * [`Engine::halt_links`] stops every link taking new datagrams: sends stay queued in
//!   the message layer at a packet boundary; every protocol keeps receiving,
//!   acknowledging and retransmitting, so what is in flight drains. While halted the
//!   rank takes every valid datagram that arrives, past the unexpected-message limit
//!   (a refused datagram would stay in flight: its bytes count as the job's saved
//!   buffers instead).
//! * [`Engine::quiesce`] makes progress until no link of this rank has anything in
//!   flight, or ends after `limit` with an error naming the media and peers still
//!   owing acknowledgements. Every rank of the job must halt and quiesce together
//!   (the job manager's halt): a rank outside the library acknowledges nothing.
//! * [`Engine::save_links`] (halted and quiet) moves what every link holds for this
//!   rank into ordinary memory; [`Engine::restore_links`] puts it back, delivered before
//!   anything newer.
//! * [`Engine::resume_links`] takes datagrams again and moves every protocol timer later
//!   by the time the process was stopped, so that no retransmission, delayed
//!   acknowledgement, REQ or peer timeout counts it.
//! * Driven by the launcher (`phalanx run` suspended with Ctrl-Z or SIGTSTP): a halt it
//!   asks for is carried out at the next safe point — a wait, or a test — never inside
//!   a progress round: halt, drain, save, answer `Halted`, then wait (answering peers)
//!   for `Continue`, during which the launcher stops and continues the process; then
//!   restore and resume, with the timers moved by the whole halted time, and go on with
//!   the interrupted wait. A rank computing outside the library halts when it next
//!   enters it.
//! * The resume exchange: once continued, and before its links take new datagrams
//!   again, a rank announces to every peer it reaches over the network (not shared
//!   memory: those stop and continue with it) that it runs again (`Kind::Resume`,
//!   asking for an answer), and waits — answering peers, receiving — until it has
//!   heard each of them run again since its halt began (their announcement or their
//!   answer), re-announcing to the silent ones every [`RESUME_RESEND`], for at most
//!   [`RESUME_WAIT`] (then it goes on and counts the silent peers in
//!   `resume_missing`). So no data goes to a peer that is still stopped, where it would
//!   wait out a retransmission timeout. An announcement is answered whenever it comes.
//! * Driven by Slurm's gang scheduling (ranks started by `srun`, PMI: no launcher):
//!   Slurm sends every task SIGTSTP, then SIGSTOP after a delay, then SIGCONT. SIGTSTP
//!   asks for the same halt (every rank of the step gets it at once, so they drain
//!   together); SIGCONT ends the halted wait. A rank stopped and continued before it
//!   reached a safe point only has its timers moved by the time since SIGTSTP.

use super::{Engine, Waiting};
use crate::error::{Error, Result};
use crate::link::{LinkReport, Medium, Saved};
use phalanx_wire::{flags, Header, Kind, Packet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Bound on a rank's drain after Slurm's SIGTSTP (Slurm's stop follows after its own
/// delay whatever happens).
const SLURM_HALT_DRAIN: Duration = Duration::from_secs(10);
/// Bound on the resume exchange's wait for the peers (module docs).
pub const RESUME_WAIT: Duration = Duration::from_secs(3);
/// Interval of re-announcements to peers not heard from yet.
pub const RESUME_RESEND: Duration = Duration::from_millis(50);

static TSTP: AtomicBool = AtomicBool::new(false);
static CONT: AtomicBool = AtomicBool::new(false);
/// CLOCK_MONOTONIC of the last SIGTSTP, ns.
static TSTP_AT: AtomicU64 = AtomicU64::new(0);

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own; async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

extern "C" fn on_tstp(_: libc::c_int) {
    TSTP_AT.store(monotonic_ns(), Ordering::SeqCst);
    TSTP.store(true, Ordering::SeqCst);
}

extern "C" fn on_cont(_: libc::c_int) {
    CONT.store(true, Ordering::SeqCst);
}

/// Ranks started by a PMI server (`srun`): SIGTSTP halts the links instead of stopping
/// the process (Slurm's SIGSTOP stops it), SIGCONT resumes them (module docs).
pub(super) fn install_slurm_suspend() {
    for (sig, handler) in [
        (libc::SIGTSTP, on_tstp as extern "C" fn(libc::c_int)),
        (libc::SIGCONT, on_cont),
    ] {
        // SAFETY: a zeroed sigaction with a handler that only stores to atomics and
        // reads the clock (async-signal-safe). SA_RESTART spares the program's own
        // blocking calls; the engine's poll is never restarted, so it still wakes.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// What every link of a rank held, in ordinary memory ([`Engine::save_links`]).
#[derive(Debug, Default)]
pub struct SavedLinks {
    parts: Vec<(Medium, Saved)>,
}

impl SavedLinks {
    /// Datagrams saved, over every link.
    pub fn datagrams(&self) -> usize {
        self.parts.iter().map(|(_, s)| s.len()).sum()
    }

    /// Bytes saved, over every link.
    pub fn bytes(&self) -> usize {
        self.parts.iter().map(|(_, s)| s.bytes()).sum()
    }
}

impl Engine {
    /// Stops every link taking new datagrams (see the module docs).
    pub fn halt_links(&mut self) {
        for m in self.links.present() {
            if let Some((l, _)) = self.links.get(m) {
                l.halt();
            }
        }
        self.halted = true;
    }

    /// What every link has in flight and holds.
    pub fn link_reports(&mut self) -> Vec<(Medium, LinkReport)> {
        let mut out = Vec::new();
        for m in self.links.present() {
            if let Some((l, _)) = self.links.get(m) {
                out.push((m, l.report()));
            }
        }
        out
    }

    /// Nothing in flight on any link.
    fn links_quiet(&mut self) -> bool {
        self.link_reports().iter().all(|(_, r)| r.quiet())
    }

    /// Makes progress until nothing is in flight on any link (the links must be halted),
    /// for at most `limit`.
    pub fn quiesce(&mut self, limit: Duration) -> Result<()> {
        if !self.halted {
            return Err(Error::Quiesce(format!(
                "rank {}: quiesce without halting the links first",
                self.rank
            )));
        }
        let start = Instant::now();
        let mut late = false;
        self.wait_until(Waiting::Halt, |e| {
            if e.links_quiet() {
                return true;
            }
            late = start.elapsed() >= limit;
            late
        })?;
        if late {
            let owing: Vec<String> = self
                .link_reports()
                .into_iter()
                .filter(|(_, r)| !r.quiet())
                .map(|(m, r)| format!("{m}: {} in flight to ranks {:?}", r.in_flight, r.peers))
                .collect();
            return Err(Error::Quiesce(format!(
                "rank {}: links did not quiesce within {limit:?}: {}",
                self.rank,
                owing.join("; ")
            )));
        }
        Ok(())
    }

    /// Moves what every link holds for this rank into ordinary memory (the links must be
    /// halted and quiet).
    pub fn save_links(&mut self) -> Result<SavedLinks> {
        if !self.halted || !self.links_quiet() {
            return Err(Error::Quiesce(format!(
                "rank {}: saving links that are not halted and quiet",
                self.rank
            )));
        }
        let mut parts = Vec::new();
        for m in self.links.present() {
            if let Some((l, _)) = self.links.get(m) {
                parts.push((m, l.save()));
            }
        }
        Ok(SavedLinks { parts })
    }

    /// Puts back what [`save_links`](Self::save_links) took.
    /// With `PHALANX_COMM_LOCK`: locks (or unlocks) the shared-memory segment; a
    /// refusal is a warning, once, and the lock is not tried again.
    pub(crate) fn lock_comm(&mut self, on: bool) {
        if !self.cfg.comm_lock || self.comm_lock_failed {
            return;
        }
        let Some(l) = self.links.shm.as_ref() else {
            return;
        };
        if let Err(e) = l.segment().lock(on) {
            self.comm_lock_failed = true;
            tracing::warn!(
                "phalanx: warning: rank {}: cannot lock the communication buffers in memory \
                 ({e}); running unlocked",
                self.rank
            );
        }
    }

    pub fn restore_links(&mut self, saved: SavedLinks) {
        for (m, s) in saved.parts {
            if let Some((l, _)) = self.links.get(m) {
                l.restore(s);
            }
        }
    }

    /// Takes datagrams again; every protocol timer moves `stopped` later.
    pub fn resume_links(&mut self, stopped: Duration) {
        let ns = u64::try_from(stopped.as_nanos()).unwrap_or(u64::MAX);
        for m in self.links.present() {
            if let Some((l, _)) = self.links.get(m) {
                l.resume(ns);
            }
        }
        self.halted = false;
        // Sends queued while halted go now.
        let now = self.now();
        self.pump_all(now);
    }

    /// The halt the launcher asked for (module docs): halt, drain, save, report, wait
    /// for `Continue`, restore, resume. The interrupted wait's description is kept.
    /// Slurm's signals seen since the last call (see [`install_slurm_suspend`]).
    pub(super) fn slurm_signals(&mut self) {
        // A SIGTSTP while halted (during the resume exchange) stays pending: it is the
        // next suspension, carried out once this one has resumed.
        let tstp = !self.halted && TSTP.swap(false, Ordering::SeqCst);
        let cont = CONT.swap(false, Ordering::SeqCst);

        if tstp && !self.halted {
            self.halt_asked.get_or_insert(SLURM_HALT_DRAIN);
        }
        if cont {
            if self.halted {
                self.continued = true;
            } else if self.halt_asked.take().is_some() {
                // Stopped and continued before a safe point: only the clock moved.
                let since = monotonic_ns().saturating_sub(TSTP_AT.load(Ordering::SeqCst));
                self.resume_links(Duration::from_nanos(since));
            }
        }
    }

    pub(super) fn job_halt(&mut self) -> Result<()> {
        // A halt asked while halted is carried out after this one resumes (it stays
        // asked); a `Continue` read with its `Halt` (a rank that answered late) stays
        // read: it ends this halt's wait at once.
        if self.halted {
            return Ok(());
        }
        let Some(limit) = self.halt_asked.take() else {
            return Ok(());
        };
        let outer = std::mem::take(&mut self.waiting);
        let start = Instant::now();
        self.resumed = vec![false; self.size as usize];
        self.halt_links();
        let mut save_us = 0;
        let saved = self.quiesce(limit).and_then(|()| {
            let t = Instant::now();
            let s = self.save_links();
            // The buffers leave the node's locked budget while the job is out.
            self.lock_comm(false);
            save_us = t.elapsed().as_micros() as u64;
            s
        });
        let (n, bytes, error) = match &saved {
            Ok(s) => (s.datagrams() as u64, s.bytes() as u64, None),
            Err(e) => (0, 0, Some(e.to_string())),
        };
        let ms = start.elapsed().as_millis() as u64;
        if let Some(b) = self.boot.as_mut() {
            b.send_halted(n, bytes, ms, save_us, error)
                .map_err(|e| Error::Launcher(e.to_string()))?;
        }
        let halted_at = Instant::now();
        let r = self.wait_until(Waiting::Halt, |e| e.continued);
        self.continued = false;
        let r = r.and_then(|()| self.resume_exchange());
        if let Ok(s) = saved {
            self.lock_comm(true);
            self.restore_links(s);
        }
        // Under Slurm the stop may come before the drain ends (SIGSTOP follows SIGTSTP
        // after a fixed delay): the whole halt counts as stopped.
        let stopped = if self.slurm_suspend {
            start.elapsed()
        } else {
            halted_at.elapsed()
        };
        self.resume_links(stopped);
        self.waiting = outer;
        r
    }

    /// The peers this rank reaches over the network (and that know it: see `spawn`).
    fn network_peers(&self) -> Vec<u32> {
        (0..self.size)
            .filter(|&p| {
                p != self.rank
                    && self.acquainted.get(p as usize) == Some(&true)
                    && !matches!(self.links.medium(p), Medium::Local | Medium::Shm)
            })
            .collect()
    }

    /// Answers `peer`'s announcement: this rank runs.
    fn send_resume(&mut self, peer: u32) {
        let h = Header::new(Kind::Resume, self.job_key, self.rank);
        self.links.net.send_to(peer, &h.to_datagram(&[]));
    }

    /// A peer runs again: noted; an announcement is answered (queued: this runs inside
    /// the receive round, which holds the socket).
    pub(super) fn on_resume(&mut self, pkt: &Packet<'_>) {
        let src = pkt.src();
        if let Some(r) = self.resumed.get_mut(src as usize) {
            *r = true;
        }
        let asks = pkt.flags() & flags::ACK_REQUEST != 0;
        if asks && src < self.size && src != self.rank && !self.resume_answers.contains(&src) {
            self.resume_answers.push(src);
        }
    }

    /// Sends the answers [`on_resume`](Self::on_resume) queued.
    pub(super) fn send_resume_answers(&mut self) {
        for p in std::mem::take(&mut self.resume_answers) {
            self.send_resume(p);
        }
    }

    /// The resume exchange (module docs); the links are still halted.
    fn resume_exchange(&mut self) -> Result<()> {
        let mut silent = self.network_peers();
        if silent.is_empty() {
            return Ok(());
        }
        let start = Instant::now();
        let mut next = start;
        self.resuming = true;
        let r = self.wait_until(Waiting::Resume(silent.clone()), |e| {
            silent.retain(|&p| !e.resumed.get(p as usize).copied().unwrap_or(true));
            if silent.is_empty() {
                return true;
            }
            let now = Instant::now();
            if now.duration_since(start) >= RESUME_WAIT {
                e.stats.resume_missing += silent.len() as u64;
                tracing::debug!(
                    rank = e.rank,
                    ?silent,
                    "resume exchange: peers still silent"
                );
                return true;
            }
            if now >= next {
                // One datagram to every silent peer: one multi-send.
                let mut h = Header::new(Kind::Resume, e.job_key, e.rank);
                h.flags |= flags::ACK_REQUEST;
                e.links.net.multi_send(&silent, &h.to_datagram(&[]));
                e.stats.resume_sent += silent.len() as u64;
                next = now + RESUME_RESEND;
            }
            false
        });
        self.resuming = false;
        r
    }
}
