//! What goes on the wire next ([`Urtp::poll_transmit`]): per-peer control work first,
//! round robin — a pending REQ, then queued re-sends (re-encoded point-to-point with the
//! receiver's counter and the current ACK), then a pure ACK — and then new data in
//! `send` order, unicast data stamped with the latest ACK for its destination. Sending
//! data or a control packet that carries an ACK clears that peer's ACK debt; first
//! transmission starts the peer's safety-net timer.

use phalanx_wire::{flags, stamp, Header, Kind, HEADER_LEN};

use super::timers::TIMER_RTO;
use super::{Urtp, UrtpDest, UrtpTransmit, OWN_FLAGS};

/// Where the datagram prepared by `prepare_transmit` lives.
enum Out {
    Scratch(u32),
    Slot(u32),
}

impl Urtp {
    /// The next datagram to put on the wire. Unicast data is stamped with the latest ACK
    /// for its destination now (piggy-back).
    #[must_use]
    pub fn poll_transmit(&mut self, now: u64) -> Option<UrtpTransmit<'_>> {
        match self.prepare_transmit(now)? {
            Out::Scratch(peer) => Some(UrtpTransmit {
                dest: UrtpDest::Unicast(peer),
                targets: &self.tx_targets,
                bytes: &self.tx_buf,
            }),
            Out::Slot(slot) => {
                let s = self.store.get(slot as usize)?.as_ref()?;
                let dest = match (s.multicast, s.targets.iter().next()) {
                    (false, Some(r)) => UrtpDest::Unicast(r),
                    _ => UrtpDest::Multicast,
                };
                Some(UrtpTransmit {
                    dest,
                    targets: &s.targets,
                    bytes: &s.bytes,
                })
            }
        }
    }

    fn prepare_transmit(&mut self, now: u64) -> Option<Out> {
        while let Some(peer) = self.ready.pop_front() {
            self.peers[peer as usize].in_ready = false;
            let out = self.control_item(now, peer);
            let p = &mut self.peers[peer as usize];
            if p.has_ctrl() {
                p.in_ready = true;
                self.ready.push_back(peer);
            }
            if out {
                self.tx_targets.clear();
                self.tx_targets.insert(peer);
                return Some(Out::Scratch(peer));
            }
        }
        while let Some(slot) = self.data_q.pop_front() {
            let Some(s) = self.store.get_mut(slot as usize).and_then(|s| s.as_mut()) else {
                continue;
            };
            for r in s.targets.iter() {
                let p = &mut self.peers[r as usize];
                let idx = p.in_flight() as usize;
                if let Some(e) = p.win.get_mut(idx) {
                    debug_assert_eq!(e.slot, slot);
                    e.sent_at = Some(now);
                }
                p.tx_next = p.tx_next.wrapping_add(1);
                p.any_sent = true;
                if self.timers.get(r, TIMER_RTO).is_none() {
                    let at = Some(now.saturating_add(p.rto));
                    self.timers.set(r, TIMER_RTO, at);
                }
            }
            self.stats.data_sent += 1;
            if s.multicast {
                self.stats.multicasts_sent += 1;
            } else if let Some(r) = s.targets.iter().next() {
                let p = &mut self.peers[r as usize];
                let _ = stamp::ack(&mut s.bytes, p.rcv_base.wrapping_sub(1));
                let _ = stamp::flags(&mut s.bytes, s.header.flags | flags::ACK_VALID);
                p.clear_ack_debt(&mut self.timers, r);
            }
            return Some(Out::Slot(slot));
        }
        None
    }

    /// Builds `peer`'s next control datagram (REQ, re-send, ACK) in `tx_buf`.
    fn control_item(&mut self, now: u64, peer: u32) -> bool {
        let p = &mut self.peers[peer as usize];
        if let Some(c) = p.req_pending.take() {
            if c == p.rcv_base && !p.head_ready() {
                let mut h = Header::new(Kind::UrtpReq, self.job_key, self.local);
                h.flags = flags::SEQ_VALID;
                h.seq = c;
                self.tx_buf.clear();
                self.tx_buf.resize(HEADER_LEN, 0);
                let _ = h.emit(&mut self.tx_buf);
                // The REQ implicitly acknowledges everything consumed.
                p.clear_ack_debt(&mut self.timers, peer);
                self.stats.reqs_sent += 1;
                return true;
            }
        }
        while let Some((c, ack_request)) = p.resend.pop_front() {
            let off = c.wrapping_sub(p.snd_una);
            if (off as i32) < 0 || off >= p.in_flight() {
                continue; // acknowledged meanwhile
            }
            let ack = p.rcv_base.wrapping_sub(1);
            let Some(e) = p.win.get_mut(off as usize) else {
                continue;
            };
            let Some(s) = self.store.get(e.slot as usize).and_then(|s| s.as_ref()) else {
                continue;
            };
            e.sent_at = Some(now);
            let mut h = s.header;
            h.kind = Kind::UrtpData;
            h.flags = (h.flags & !OWN_FLAGS)
                | flags::SEQ_VALID
                | flags::ACK_VALID
                | flags::RETRANSMIT
                | if ack_request { flags::ACK_REQUEST } else { 0 };
            h.ext_len = 0;
            h.seq = c;
            h.ack = ack;
            let payload = s.bytes.get(s.payload_off..).unwrap_or(&[]);
            self.tx_buf.clear();
            self.tx_buf.resize(HEADER_LEN, 0);
            let _ = h.emit(&mut self.tx_buf);
            self.tx_buf.extend_from_slice(payload);
            p.clear_ack_debt(&mut self.timers, peer);
            self.stats.resent += 1;
            if ack_request {
                self.stats.rto_resent += 1;
            }
            return true;
        }
        if p.ack_pending {
            let mut h = Header::new(Kind::UrtpAck, self.job_key, self.local);
            h.flags = flags::ACK_VALID;
            h.ack = p.rcv_base.wrapping_sub(1);
            self.tx_buf.clear();
            self.tx_buf.resize(HEADER_LEN, 0);
            let _ = h.emit(&mut self.tx_buf);
            p.clear_ack_debt(&mut self.timers, peer);
            self.stats.acks_sent += 1;
            return true;
        }
        false
    }
}
