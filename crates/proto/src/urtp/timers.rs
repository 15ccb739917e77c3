//! Deadlines and liveness of URTP. At most three timers per peer (safety-net re-send,
//! delayed ACK, REQ), kept in the shared [`TimerTable`] (`Urtp::timers`), which orders
//! them by `(deadline, peer, kind)` so that [`Urtp::poll_timeout`] is O(1).
//! [`Urtp::handle_timeout`] fires what is due: a delayed ACK, a safety-net probe (back-off
//! doubling, clamped), or a repeated REQ for a want that still lasts. The probe is a
//! small ACK with `ACK_REQUEST` naming the first counter not transmitted yet: the peer
//! answers with its ACK, and with a REQ if it lacks a packet before that counter. A
//! packet of more than [`super::PROBE_MIN`] bytes goes again only on a REQ, or when the
//! peer stayed silent since the previous probe — never because a peer that answers was
//! slow to acknowledge (a descheduled receiver on a shared core, a lost pure ACK); a
//! smaller one is re-sent with `ACK_REQUEST` at once, as cheap as a probe and a round
//! trip sooner under loss. Consecutive unanswered
//! REQs / probes to a peer are counted and reported
//! once as [`UrtpEvent::PeerUnresponsive`]; any valid packet from the peer resets the
//! count.

#[cfg(doc)] // named by the module docs
use crate::timers::TimerTable;

use super::{Urtp, UrtpEvent};

/// The safety-net probe to a peer.
pub(super) const TIMER_RTO: u8 = 0;
/// The delayed ACK to a peer.
pub(super) const TIMER_ACK: u8 = 1;
/// The (repeated) REQ of a want on a peer.
pub(super) const TIMER_REQ: u8 = 2;
/// Timer kinds per peer in the [`TimerTable`].
pub(super) const TIMER_KINDS: u8 = 3;

impl Urtp {
    /// A valid packet from `peer`: it is alive.
    pub(super) fn answered(&mut self, peer: u32) {
        let p = &mut self.peers[peer as usize];
        p.silent = 0;
        p.reported = false;
    }

    /// One more unanswered REQ / re-send to `peer`.
    fn unanswered(&mut self, peer: u32) {
        let p = &mut self.peers[peer as usize];
        p.silent = p.silent.saturating_add(1);
        if p.silent >= self.cfg.max_backoffs && !p.reported {
            p.reported = true;
            self.events.push_back(UrtpEvent::PeerUnresponsive { peer });
        }
    }

    /// The earliest deadline (REQ, delayed ACK, safety net), if any. O(1).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers.first()
    }

    /// Moves every deadline `by` nanoseconds later (the process was stopped for that long:
    /// no re-send, REQ or liveness count is owed to the stopped time).
    pub fn postpone_timers(&mut self, by: u64) {
        self.timers.postpone(by);
    }

    /// Fires every deadline due at `now`, in (deadline, peer, kind) order.
    pub fn handle_timeout(&mut self, now: u64) {
        let max_backoff = self.cfg.req_backoff_max_ns;
        while let Some((peer, kind, _)) = self.timers.pop_due(now) {
            let p = &mut self.peers[peer as usize];
            match kind {
                TIMER_ACK => {
                    if p.ack_debt > 0 {
                        p.ack_pending = true;
                    }
                }
                TIMER_RTO => {
                    if p.in_flight() == 0 {
                        continue;
                    }
                    p.rto = p.rto.saturating_mul(2).min(max_backoff.max(1));
                    let at = Some(now.saturating_add(p.rto));
                    self.timers.set(peer, TIMER_RTO, at);
                    // A small oldest packet goes again itself (with ACK_REQUEST), as
                    // does any to a peer silent since the previous probe (the probe or
                    // its answer lost, or the peer gone); a large one to a peer that
                    // answers is probed for: the peer says whether it misses it.
                    let oldest = p.snd_una;
                    let small = p
                        .win
                        .front()
                        .and_then(|e| self.store.get(e.slot as usize)?.as_ref())
                        .map_or(true, |s| s.bytes.len() <= super::PROBE_MIN);
                    if small || p.silent > 0 {
                        self.queue_resend(peer, oldest, true);
                    } else {
                        p.probe_pending = true;
                    }
                    self.unanswered(peer);
                }
                _ => {
                    let Some(w) = p.want.as_mut() else {
                        continue;
                    };
                    if w.counter != p.rcv_base || matches!(p.slots.front(), Some(Some(_))) {
                        p.want = None;
                        continue;
                    }
                    let c = w.counter;
                    w.interval = w.interval.saturating_mul(2).min(max_backoff);
                    let at = Some(now.saturating_add(w.interval));
                    self.timers.set(peer, TIMER_REQ, at);
                    p.req_pending = Some(c);
                    p.last_req = Some((c, now));
                    self.unanswered(peer);
                }
            }
            self.schedule(peer);
        }
    }
}
