//! Detection beyond frame numbers: the stall timer of a declared wait
//! ([`Careful::waiting_on`] .. [`Careful::handle_timeout`], one
//! [`CarefulEvent::SuspectedLoss`] per wait episode, the protocol's only timer, one per
//! peer, kept in the shared [`TimerTable`] like the other protocols' timers) and the
//! Finalize comparison of per-link frame counts ([`Careful::counts`],
//! [`Careful::check_counts`], a mismatch is a [`LinkFault::CountMismatch`]).

#[cfg(doc)] // named by the module docs
use crate::timers::TimerTable;

use super::{Careful, CarefulEvent, LinkCounts, LinkFault};

/// The stall timer of a declared wait on a peer.
pub(super) const TIMER_STALL: u8 = 0;
/// Timer kinds per peer in the [`TimerTable`].
pub(super) const TIMER_KINDS: u8 = 1;

impl Careful {
    /// The caller is waiting on `peer` (a receive from it, or credit from it). Starts the
    /// stall clock if not already running; every frame from `peer` restarts it.
    pub fn waiting_on(&mut self, now: u64, peer: u32) {
        let stall = self.cfg.stall_ns;
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return;
        };
        if p.waiting || peer == self.local || p.broken.is_some() {
            return;
        }
        p.waiting = true;
        let at = Some(now.saturating_add(stall));
        self.timers.set(peer, TIMER_STALL, at);
    }

    /// The caller no longer waits on `peer`.
    pub fn stop_waiting(&mut self, peer: u32) {
        if let Some(p) = self.peers.get_mut(peer as usize) {
            p.waiting = false;
            self.timers.set(peer, TIMER_STALL, None);
        }
    }

    /// The earliest stall deadline of a declared wait, if any (the only timer).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers.first()
    }

    /// Moves every stall deadline `by` nanoseconds later (the process was stopped for that
    /// long: the stopped time is no silence of the peer).
    pub fn postpone_timers(&mut self, by: u64) {
        self.timers.postpone(by);
    }

    /// Fires the stall deadlines due at `now`: one [`CarefulEvent::SuspectedLoss`] per
    /// wait episode (re-armed only by a frame from that peer).
    pub fn handle_timeout(&mut self, now: u64) {
        while let Some((peer, _, _)) = self.timers.pop_due(now) {
            self.stats.suspected_losses += 1;
            let to = self.local;
            self.push_event(CarefulEvent::SuspectedLoss { from: peer, to });
        }
    }

    /// Per-link frame counts, indexed by peer rank.
    pub fn counts(&self) -> Vec<LinkCounts> {
        self.peers.iter().map(|p| p.counts).collect()
    }

    /// Finalize: compares the local counts for `peer` with `remote`, the counts `peer`
    /// reported for the local rank. A mismatch queues a [`CarefulEvent::LinkError`]
    /// ([`LinkFault::CountMismatch`]) naming the link and is returned.
    pub fn check_counts(&mut self, peer: u32, remote: &LinkCounts) -> Result<(), CarefulEvent> {
        let Some(p) = self.peers.get(peer as usize) else {
            return Ok(());
        };
        let mine = p.counts;
        let local = self.local;
        let bad = if mine.frames_sent != remote.frames_received
            || mine.data_sent != remote.data_received
        {
            Some(CarefulEvent::LinkError {
                from: local,
                to: peer,
                detail: LinkFault::CountMismatch {
                    sent: mine.frames_sent,
                    received: remote.frames_received,
                },
            })
        } else if remote.frames_sent != mine.frames_received
            || remote.data_sent != mine.data_received
        {
            Some(CarefulEvent::LinkError {
                from: peer,
                to: local,
                detail: LinkFault::CountMismatch {
                    sent: remote.frames_sent,
                    received: mine.frames_received,
                },
            })
        } else {
            None
        };
        match bad {
            Some(e) => {
                self.stats.link_errors += 1;
                self.push_event(e);
                Err(e)
            }
            None => Ok(()),
        }
    }
}
