//! Sender side of URTP: [`Urtp::send_space`] and [`Urtp::send`] (one stored packet per
//! send, unicast or multicast, counted in every target's window; nothing is queued on
//! error), the advance of a peer's window on a cumulative ACK (a stored packet is freed
//! once every target has acked it), and the answer to a REQ: an implicit ACK up to the
//! named counter, then a point-to-point re-send unless the counter is unsent or was
//! (re)sent less than δ ago. Re-sends are queued per peer, at most
//! [`RESEND_QUEUE_MAX`].

use phalanx_wire::{flags, mcast, Header, Kind, HEADER_LEN};

use super::peer::{SentRef, Stored};
use super::timers::TIMER_RTO;
use super::{Targets, Urtp, UrtpSendError, OWN_FLAGS, RESEND_QUEUE_MAX};

impl Urtp {
    /// The minimum free send-window space over `targets`; 0 if `targets` is empty or
    /// contains the local rank or a rank out of range (callers never target themselves).
    pub fn send_space(&self, targets: &Targets) -> u32 {
        let mut space = None::<u32>;
        for r in targets.iter() {
            if r == self.local {
                return 0;
            }
            let Some(p) = self.peers.get(r as usize) else {
                return 0;
            };
            let free = self
                .cfg
                .window
                .saturating_sub(p.snd_nxt.wrapping_sub(p.snd_una));
            space = Some(space.map_or(free, |s| s.min(free)));
        }
        space.unwrap_or(0)
    }

    /// Queues one packet to `targets` (see the module docs). Nothing is queued on error.
    pub fn send(
        &mut self,
        now: u64,
        targets: &Targets,
        header: &Header,
        payload: &[u8],
    ) -> Result<(), UrtpSendError> {
        self.send_with_prefix(now, targets, header, &[], payload)
    }

    /// As [`Urtp::send`], with the payload given as `prefix` followed by `payload` (saves
    /// the caller a copy to join them).
    pub fn send_with_prefix(
        &mut self,
        now: u64,
        targets: &Targets,
        header: &Header,
        prefix: &[u8],
        payload: &[u8],
    ) -> Result<(), UrtpSendError> {
        let _ = now;
        let n = targets.len();
        if n == 0 {
            return Err(UrtpSendError::NoTargets);
        }
        for r in targets.iter() {
            if r >= self.size || r == self.local {
                return Err(UrtpSendError::BadTarget { rank: r });
            }
            let p = &self.peers[r as usize];
            if p.snd_nxt.wrapping_sub(p.snd_una) >= self.cfg.window {
                return Err(UrtpSendError::WindowFull { peer: r });
            }
        }
        let multicast = n > 1;
        let ext = if multicast {
            mcast::ext_len(self.size, n)
        } else {
            0
        };
        let len = HEADER_LEN + ext + prefix.len() + payload.len();
        let max = self.limit(targets);
        if len > max || ext > u16::MAX as usize {
            return Err(UrtpSendError::TooLarge { len, max });
        }
        let mut h = *header;
        h.kind = Kind::UrtpData;
        h.flags = (header.flags & !OWN_FLAGS)
            | if multicast {
                flags::MULTICAST
            } else {
                flags::SEQ_VALID
            };
        h.ext_len = ext as u16;
        h.job_key = self.job_key;
        h.src = self.local;
        h.ack = 0;
        h.seq = match targets.iter().next() {
            Some(r) if !multicast => self.peers[r as usize].snd_nxt,
            _ => 0,
        };
        // Built by appending, so the payload is written once.
        let mut bytes = super::take_spare(&mut self.spare, len);
        bytes.resize(HEADER_LEN + ext, 0);
        // `bytes` is at least HEADER_LEN long.
        let _ = h.emit(&mut bytes);
        if multicast {
            let peers = &self.peers;
            let entries = targets.iter().map(|r| (r, peers[r as usize].snd_nxt));
            // Cannot fail: targets are valid, increasing and the area has ext_len bytes.
            let _ = mcast::emit(&mut bytes[HEADER_LEN..HEADER_LEN + ext], self.size, entries);
        }
        bytes.extend_from_slice(prefix);
        bytes.extend_from_slice(payload);
        let mut kept = self.spare_targets.pop().unwrap_or_default();
        kept.assign(targets);
        let stored = Stored {
            bytes,
            header: h,
            payload_off: HEADER_LEN + ext,
            targets: kept,
            multicast,
            remaining: n as u32,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.store[s as usize] = Some(stored);
                s
            }
            None => {
                self.store.push(Some(stored));
                (self.store.len() - 1) as u32
            }
        };
        for r in targets.iter() {
            let p = &mut self.peers[r as usize];
            p.win.push_back(SentRef {
                slot,
                sent_at: None,
            });
            p.snd_nxt = p.snd_nxt.wrapping_add(1);
        }
        self.data_q.push_back(slot);
        Ok(())
    }

    /// `peer` acknowledged `n` more packets (its left edge moves by `n`).
    pub(super) fn ack_progress(&mut self, now: u64, peer: u32, n: u32) {
        let rto0 = self.cfg.sender_rto_ns;
        let p = &mut self.peers[peer as usize];
        for _ in 0..n {
            let Some(e) = p.win.pop_front() else {
                break;
            };
            let slot = e.slot as usize;
            if let Some(s) = self.store.get_mut(slot).and_then(|s| s.as_mut()) {
                s.remaining = s.remaining.saturating_sub(1);
                if s.remaining == 0 {
                    if let Some(s) = self.store[slot].take() {
                        super::keep_spare(&mut self.spare, s.bytes);
                        if self.spare_targets.len() < super::SPARE_MAX {
                            self.spare_targets.push(s.targets);
                        }
                    }
                    self.free.push(e.slot);
                }
            }
        }
        p.snd_una = p.snd_una.wrapping_add(n);
        p.rto = rto0;
        let at = (p.in_flight() > 0).then(|| now.saturating_add(rto0));
        self.timers.set(peer, TIMER_RTO, at);
    }

    pub(super) fn handle_req(&mut self, now: u64, src: u32, n: u32) {
        self.stats.reqs_received += 1;
        let p = &self.peers[src as usize];
        let off = n.wrapping_sub(p.snd_una);
        let in_flight = p.in_flight();
        if (off as i32) < 0 {
            self.stats.reqs_stale += 1;
            return;
        }
        if off > in_flight {
            self.stats.reqs_ignored_unsent += 1;
            return;
        }
        if off > 0 {
            self.ack_progress(now, src, off);
        }
        if off == in_flight {
            self.stats.reqs_ignored_unsent += 1;
            return;
        }
        let gap = self.cfg.req_gap_ns;
        let p = &self.peers[src as usize];
        let recent = p
            .win
            .front()
            .and_then(|e| e.sent_at)
            .is_some_and(|t| now < t.saturating_add(gap));
        if recent {
            self.stats.reqs_ignored_recent += 1;
            return;
        }
        self.queue_resend(src, n, false);
    }

    pub(super) fn queue_resend(&mut self, peer: u32, counter: u32, ack_request: bool) {
        let p = &mut self.peers[peer as usize];
        if let Some(e) = p.resend.iter_mut().find(|e| e.0 == counter) {
            e.1 |= ack_request;
            return;
        }
        if p.resend.len() < RESEND_QUEUE_MAX {
            p.resend.push_back((counter, ack_request));
            self.schedule(peer);
        }
    }
}
