//! Deadlines and liveness of URTP. At most three timers per peer (safety-net re-send,
//! delayed ACK, REQ), kept in one ordered set of `(deadline, peer, kind)` so that
//! [`Urtp::poll_timeout`] is O(1); [`set_timer`] keeps a peer's slot and the set in step.
//! [`Urtp::handle_timeout`] fires what is due: a delayed ACK, a safety-net re-send with
//! `ACK_REQUEST` (back-off doubling, clamped), or a repeated REQ for a want that still
//! lasts. Consecutive unanswered REQs / re-sends to a peer are counted and reported
//! once as [`UrtpEvent::PeerUnresponsive`]; any valid packet from the peer resets the
//! count.

use std::collections::BTreeSet;

use super::{Urtp, UrtpEvent};

pub(super) const TIMER_RTO: u8 = 0;
pub(super) const TIMER_ACK: u8 = 1;
pub(super) const TIMER_REQ: u8 = 2;

/// Sets `peer`'s deadline of `kind` (whose slot is `slot`) to `at`, or cancels it
/// (`None`), keeping `timers` in step.
pub(super) fn set_timer(
    timers: &mut BTreeSet<(u64, u32, u8)>,
    slot: &mut Option<u64>,
    peer: u32,
    kind: u8,
    at: Option<u64>,
) {
    if let Some(old) = slot.take() {
        timers.remove(&(old, peer, kind));
    }
    if let Some(t) = at {
        timers.insert((t, peer, kind));
    }
    *slot = at;
}

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
        self.timers.first().map(|t| t.0)
    }

    /// Fires every deadline due at `now`.
    pub fn handle_timeout(&mut self, now: u64) {
        let max_backoff = self.cfg.req_backoff_max_ns;
        while let Some(&(t, peer, kind)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.remove(&(t, peer, kind));
            let p = &mut self.peers[peer as usize];
            match kind {
                TIMER_ACK => {
                    p.ack_at = None;
                    if p.ack_debt > 0 {
                        p.ack_pending = true;
                    }
                }
                TIMER_RTO => {
                    p.rto_at = None;
                    if p.in_flight() == 0 {
                        continue;
                    }
                    let oldest = p.snd_una;
                    p.rto = p.rto.saturating_mul(2).min(max_backoff.max(1));
                    let at = Some(now.saturating_add(p.rto));
                    set_timer(&mut self.timers, &mut p.rto_at, peer, TIMER_RTO, at);
                    self.queue_resend(peer, oldest, true);
                    self.unanswered(peer);
                }
                _ => {
                    p.req_at = None;
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
                    set_timer(&mut self.timers, &mut p.req_at, peer, TIMER_REQ, at);
                    p.req_pending = Some(c);
                    p.last_req = Some((c, now));
                    self.unanswered(peer);
                }
            }
            self.schedule(peer);
        }
    }
}
