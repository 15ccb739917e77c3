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
        let out = self.prepare_transmit(now)?;
        self.transmit_of(&out)
    }

    /// Like [`poll_transmit`](Self::poll_transmit), with consecutive data to one peer (or
    /// multicast to one target set) handed over together, up to `max` datagrams (at most
    /// [`crate::gbn::RUN_MAX`]), what one system call may carry: `send(transmit, run)`
    /// gets the first datagram's destination and targets and the run's datagrams in wire
    /// order — exactly those `poll_transmit` would have returned one by one. Control
    /// datagrams go one at a time. False when nothing is due.
    pub fn poll_transmit_run(
        &mut self,
        now: u64,
        max: usize,
        send: impl FnOnce(&UrtpTransmit<'_>, &[&[u8]]),
    ) -> bool {
        const RUN_MAX: usize = crate::gbn::RUN_MAX;
        let Some(first) = self.prepare_transmit(now) else {
            return false;
        };
        let mut slots = [0u32; RUN_MAX];
        let mut n = 0;
        if let Out::Slot(slot) = first {
            slots[0] = slot;
            n = 1;
            while n < max.clamp(1, RUN_MAX)
                && self.ready.is_empty()
                && self
                    .data_q
                    .front()
                    .is_some_and(|&s| self.same_dest(slot, s))
            {
                // No control work is due and the next data is for the same peer:
                // `prepare_transmit` takes exactly that slot.
                match self.prepare_transmit(now) {
                    Some(Out::Slot(s)) => {
                        slots[n] = s;
                        n += 1;
                    }
                    _ => unreachable!("the next datagram is the queued data"),
                }
            }
        }
        let Some(tx) = self.transmit_of(&first) else {
            return true;
        };
        let mut run: [&[u8]; RUN_MAX] = [&[]; RUN_MAX];
        run[0] = tx.bytes;
        for (dst, &slot) in run[1..n.max(1)].iter_mut().zip(&slots[1..n.max(1)]) {
            if let Some(st) = self.store.get(slot as usize).and_then(|s| s.as_ref()) {
                *dst = &st.bytes;
            }
        }
        send(&tx, &run[..n.max(1)]);
        true
    }

    /// Whether stored datagrams `a` and `b` go the same way: unicast to the same peer, or
    /// multicast to the same targets.
    fn same_dest(&self, a: u32, b: u32) -> bool {
        let get = |x: u32| self.store.get(x as usize).and_then(|s| s.as_ref());
        match (get(a), get(b)) {
            (Some(a), Some(b)) => a.multicast == b.multicast && a.targets == b.targets,
            _ => false,
        }
    }

    /// The datagram `prepare_transmit` prepared, as [`UrtpTransmit`].
    fn transmit_of(&self, out: &Out) -> Option<UrtpTransmit<'_>> {
        match *out {
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
                header_into(&mut self.tx_buf, &h);
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
            header_into(&mut self.tx_buf, &h);
            self.tx_buf.extend_from_slice(payload);
            p.clear_ack_debt(&mut self.timers, peer);
            self.stats.resent += 1;
            if ack_request {
                self.stats.rto_resent += 1;
            }
            return true;
        }
        // A probe is an ACK that asks for one back, naming what has been transmitted:
        // the peer REQs what it lacks before `seq`. (A probe whose packets were all
        // acknowledged meanwhile is not sent.)
        let probe = std::mem::take(&mut p.probe_pending) && p.in_flight() > 0;
        if probe || p.ack_pending {
            let mut h = Header::new(Kind::UrtpAck, self.job_key, self.local);
            h.flags = flags::ACK_VALID;
            h.ack = p.rcv_base.wrapping_sub(1);
            if probe {
                h.flags |= flags::ACK_REQUEST | flags::SEQ_VALID;
                h.seq = p.tx_next;
                self.stats.probes_sent += 1;
            } else {
                self.stats.acks_sent += 1;
            }
            header_into(&mut self.tx_buf, &h);
            p.clear_ack_debt(&mut self.timers, peer);
            return true;
        }
        false
    }
}

/// `buf` = the encoded header `h` alone (a control datagram, or the start of a re-send).
fn header_into(buf: &mut Vec<u8>, h: &Header) {
    buf.clear();
    buf.resize(HEADER_LEN, 0);
    // `buf` is exactly HEADER_LEN long: emitting cannot fail.
    let _ = h.emit(buf);
}
