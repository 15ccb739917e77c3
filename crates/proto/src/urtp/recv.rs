//! Receiver side of URTP: [`Urtp::handle_packet`] classifies a datagram (pure ACK, REQ
//! or data; invalid ones change no state) and buffers data within the receive window
//! and the pool bound, in unicast form; [`Urtp::peek`] / [`Urtp::pop`] consume in FIFO
//! order and build up ACK debt (block ACK or delayed ACK) —
//! [`Urtp::handle_packet_consume`] lets the caller take an in-order unicast packet straight
//! from its datagram instead, with the same bookkeeping; [`Urtp::want`] starts the
//! REQ clock for the next packet of a source, and a gap at the consume point is REQed
//! at once (at most once per δ per counter); [`Urtp::flush_acks`] settles all ACK debt.

use phalanx_wire::{flags, mcast, Kind, Packet, HEADER_LEN};

use super::peer::Want;
use super::timers::{TIMER_ACK, TIMER_REQ};
use super::{Urtp, UrtpVerdict};

impl Urtp {
    /// Processes a validated, job-key-checked URTP datagram (see the module docs).
    #[must_use]
    pub fn handle_packet(&mut self, now: u64, pkt: &Packet<'_>) -> UrtpVerdict {
        let v = self.handle_inner(now, pkt, None);
        if matches!(v, UrtpVerdict::Invalid(_)) {
            self.stats.invalid += 1;
        }
        v
    }

    /// As [`Urtp::handle_packet`], but a unicast data packet that is next in order, with
    /// nothing of its source buffered, is first offered to `consume` as it arrived (its
    /// header's ACK fields and flags are URTP's; the message-layer fields and payload
    /// are the sender's). If `consume` takes it (returns true) it is consumed as by
    /// [`Urtp::pop`] without being copied into a buffer ([`UrtpVerdict::Consumed`]);
    /// otherwise it is buffered as usual.
    #[must_use]
    pub fn handle_packet_consume(
        &mut self,
        now: u64,
        pkt: &Packet<'_>,
        consume: &mut dyn FnMut(&Packet<'_>) -> bool,
    ) -> UrtpVerdict {
        let v = self.handle_inner(now, pkt, Some(consume));
        if matches!(v, UrtpVerdict::Invalid(_)) {
            self.stats.invalid += 1;
        }
        v
    }

    fn handle_inner(
        &mut self,
        now: u64,
        pkt: &Packet<'_>,
        consume: Option<&mut dyn FnMut(&Packet<'_>) -> bool>,
    ) -> UrtpVerdict {
        let src = pkt.src();
        if src >= self.size || src == self.local {
            return UrtpVerdict::Invalid("source rank out of range or local");
        }
        if pkt.job_key() != self.job_key {
            return UrtpVerdict::Invalid("foreign job key");
        }
        let fl = pkt.flags();
        match pkt.kind() {
            Kind::UrtpAck => {
                if fl & flags::ACK_VALID == 0 {
                    return UrtpVerdict::Invalid("pure ACK without ACK_VALID");
                }
                let Some(n) = self.peers[src as usize].ack_progress_of(pkt.ack()) else {
                    return UrtpVerdict::Invalid("ACK for a counter never sent");
                };
                self.answered(src);
                if n > 0 {
                    self.ack_progress(now, src, n);
                }
                if fl & flags::ACK_REQUEST != 0 {
                    self.probed(now, src, (fl & flags::SEQ_VALID != 0).then(|| pkt.seq()));
                }
                UrtpVerdict::Control
            }
            Kind::UrtpReq => {
                self.answered(src);
                self.handle_req(now, src, pkt.seq());
                UrtpVerdict::Control
            }
            Kind::UrtpData => self.handle_data(now, src, pkt, consume),
            _ => UrtpVerdict::Invalid("not a URTP packet"),
        }
    }

    fn handle_data(
        &mut self,
        now: u64,
        src: u32,
        pkt: &Packet<'_>,
        consume: Option<&mut dyn FnMut(&Packet<'_>) -> bool>,
    ) -> UrtpVerdict {
        let fl = pkt.flags();
        let mut acked = 0;
        let counter = if fl & flags::MULTICAST != 0 {
            let view = match mcast::TargetsView::of_packet(pkt, self.size) {
                Ok(v) => v,
                Err(_) => return UrtpVerdict::Invalid("malformed multicast extension"),
            };
            match view.counter(self.local) {
                Some(c) => c,
                None => {
                    self.stats.not_target += 1;
                    return UrtpVerdict::NotTarget;
                }
            }
        } else {
            if fl & flags::SEQ_VALID == 0 {
                return UrtpVerdict::Invalid("unicast data without SEQ_VALID");
            }
            if fl & flags::ACK_VALID != 0 {
                match self.peers[src as usize].ack_progress_of(pkt.ack()) {
                    Some(n) => acked = n,
                    None => return UrtpVerdict::Invalid("ACK for a counter never sent"),
                }
            }
            pkt.seq()
        };
        self.answered(src);
        if acked > 0 {
            self.ack_progress(now, src, acked);
        }
        let window = self.cfg.window;
        let p = &mut self.peers[src as usize];
        if fl & flags::ACK_REQUEST != 0 {
            p.ack_pending = true;
            self.schedule(src);
        }
        let p = &mut self.peers[src as usize];
        let d = counter.wrapping_sub(p.rcv_base);
        if (d as i32) < 0 {
            self.stats.duplicates += 1;
            return UrtpVerdict::Duplicate;
        }
        if d >= window {
            self.stats.out_of_window += 1;
            return UrtpVerdict::Dropped("beyond the receive window");
        }
        let d = d as usize;
        if p.slots.get(d).is_some_and(|s| s.is_some()) {
            self.stats.duplicates += 1;
            return UrtpVerdict::Duplicate;
        }
        if d == 0 && p.slots.is_empty() && fl & flags::MULTICAST == 0 {
            if let Some(consume) = consume {
                if consume(pkt) {
                    self.consumed(now, src);
                    return UrtpVerdict::Consumed;
                }
            }
        }
        if self.rx_buffered >= self.rx_cap {
            self.stats.pool_full_drops += 1;
            return UrtpVerdict::Dropped("receive pool full");
        }
        // Unicast form: the pair counter in `seq`, no extension, no ACK fields.
        let payload = pkt.payload();
        let mut h = pkt.header();
        h.ext_len = 0;
        h.seq = counter;
        h.ack = 0;
        h.flags = (h.flags & !(flags::ACK_VALID | flags::ACK_REQUEST | flags::MULTICAST))
            | flags::SEQ_VALID;
        let mut hdr = [0u8; HEADER_LEN];
        let _ = h.emit(&mut hdr);
        let mut buf = super::take_spare(&mut self.spare, HEADER_LEN + payload.len());
        buf.extend_from_slice(&hdr);
        buf.extend_from_slice(payload);
        if p.slots.len() <= d {
            p.slots.resize(d + 1, None);
        }
        p.slots[d] = Some(buf);
        self.rx_buffered += 1;
        if d > 0 {
            self.stats.buffered_out_of_order += 1;
            if !p.head_ready() {
                self.gap_req(now, src);
            }
        } else if p.want.take().is_some() {
            self.timers.set(src, TIMER_REQ, None);
        }
        UrtpVerdict::Buffered {
            ready: self.peers[src as usize].head_ready(),
        }
    }

    /// `src` probed (its safety net fired): an ACK goes back, and a REQ if a packet it
    /// transmitted (a counter before `sent_to`) is missing at the consume point.
    fn probed(&mut self, now: u64, src: u32, sent_to: Option<u32>) {
        let p = &mut self.peers[src as usize];
        p.ack_pending = true;
        let missing =
            sent_to.is_some_and(|s| (s.wrapping_sub(p.rcv_base) as i32) > 0 && !p.head_ready());
        if missing {
            self.gap_req(now, src);
        }
        self.schedule(src);
    }

    /// A gap at `src`'s consume point with a later packet buffered: REQ it now (at most
    /// once per δ per counter).
    fn gap_req(&mut self, now: u64, src: u32) {
        let gap = self.cfg.req_gap_ns;
        let p = &mut self.peers[src as usize];
        let c = p.rcv_base;
        if p.last_req
            .is_some_and(|(lc, t)| lc == c && now < t.saturating_add(gap))
        {
            return;
        }
        p.req_pending = Some(c);
        p.last_req = Some((c, now));
        self.schedule(src);
    }

    /// The next in-order packet from `src` (FIFO over unicast and multicast packets), in
    /// unicast form (see the module docs), if it has arrived.
    pub fn peek(&self, src: u32) -> Option<Packet<'_>> {
        let b = self.peers.get(src as usize)?.slots.front()?.as_deref()?;
        Packet::new_checked(b).ok()
    }

    /// Consumes the packet [`Urtp::peek`] returns (frees its buffer, counts toward the
    /// block ACK). Does nothing if there is none.
    pub fn pop(&mut self, now: u64, src: u32) {
        let Some(p) = self.peers.get_mut(src as usize) else {
            return;
        };
        if !p.head_ready() {
            return;
        }
        if let Some(Some(v)) = p.slots.pop_front() {
            super::keep_spare(&mut self.spare, v);
        }
        self.rx_buffered = self.rx_buffered.saturating_sub(1);
        self.consumed(now, src);
    }

    /// The packet at `src`'s consume point was consumed (taken out of its slot, or
    /// straight from the datagram): the counter, the REQ clock and the ACK debt move on.
    fn consumed(&mut self, now: u64, src: u32) {
        let threshold = self.cfg.block_ack_threshold;
        let delay = self.cfg.ack_delay_ns;
        let p = &mut self.peers[src as usize];
        p.rcv_base = p.rcv_base.wrapping_add(1);
        self.stats.delivered += 1;
        if p.want.take().is_some() {
            self.timers.set(src, TIMER_REQ, None);
        }
        p.ack_debt = p.ack_debt.saturating_add(1);
        if p.ack_debt >= threshold {
            p.ack_pending = true;
            self.timers.set(src, TIMER_ACK, None);
        } else if self.timers.get(src, TIMER_ACK).is_none() {
            let at = Some(now.saturating_add(delay));
            self.timers.set(src, TIMER_ACK, at);
        }
        // A hole at the new consume point with later packets buffered: REQ it at once.
        if matches!(p.slots.front(), Some(None)) {
            self.gap_req(now, src);
        }
        self.schedule(src);
    }

    /// The caller waits for the next packet from `src` (see the module docs). Repeated
    /// calls for the same packet keep the running back-off.
    pub fn want(&mut self, now: u64, src: u32) {
        if src >= self.size || src == self.local {
            return;
        }
        let gap = self.cfg.req_gap_ns;
        let p = &mut self.peers[src as usize];
        if p.head_ready() || p.want.as_ref().is_some_and(|w| w.counter == p.rcv_base) {
            return;
        }
        p.want = Some(Want {
            counter: p.rcv_base,
            interval: gap,
        });
        let at = Some(now.saturating_add(gap));
        self.timers.set(src, TIMER_REQ, at);
    }

    /// Queues a pure ACK to every peer with consumed-but-unacked packets (Finalize).
    pub fn flush_acks(&mut self, now: u64) {
        let _ = now;
        for i in 0..self.peers.len() as u32 {
            let p = &mut self.peers[i as usize];
            if p.ack_debt > 0 {
                p.ack_pending = true;
                self.timers.set(i, TIMER_ACK, None);
                self.schedule(i);
            }
        }
    }
}
