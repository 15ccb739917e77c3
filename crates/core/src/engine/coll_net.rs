//! The collective network: collective fragments over URTP (seed 000).
//!
//! Contract: every collective fragment is one URTP packet whose payload is the 8-byte
//! call signature followed by data (`context` = communicator context, `aux32` =
//! collective sequence, `tag` = step, `msg_len` = message length, `aux` = offset). A send
//! to several ranks is one multicast packet (or a unicast fan-out where multicast is not
//! available). Packets a full URTP window cannot take wait in a FIFO (holding at most the
//! data of the collectives in flight — the caller's buffers are not kept) and go out in
//! order as acknowledgements arrive. Fragments to ranks of another era (see `spawn`)
//! travel on the go-back-n links instead, like those to shared-memory peers on the rings. In-order packets from each source are handed to
//! the collective state as they arrive; receives that wait for a source keep URTP's REQ
//! machinery armed for it.

use crate::engine::Engine;
use crate::link::Medium;
use phalanx_proto::urtp::{Targets, UrtpEvent, UrtpSendError, UrtpVerdict};
use phalanx_wire::{Header, Kind, MsgKind, Packet};

/// A collective packet waiting for window space.
pub(crate) struct Pending {
    targets: Targets,
    header: Header,
    payload: Vec<u8>,
}

impl Engine {
    /// Payload bytes of one collective packet (multicast to the whole job, after the
    /// signature).
    pub fn coll_packet(&self) -> usize {
        self.links
            .urtp
            .proto
            // The world's size, not the job's: it is the same on every rank of a world
            // however many ranks its members have spawned (see `spawn`).
            .max_payload(self.era.1.saturating_sub(1).max(1) as usize)
            .saturating_sub(8)
            .max(1)
    }

    /// Whether collectives can use real multicast (not when every peer is on shared
    /// memory: there the point-to-point algorithms run over the rings).
    pub fn coll_multicast(&self) -> bool {
        !self.era_all_shm && self.links.net.multicast_available()
    }

    /// The header of a collective fragment at `off` of a `total`-byte message.
    fn coll_header(
        &self,
        kind: Kind,
        ctx: u32,
        seq: u32,
        step: i32,
        total: usize,
        off: usize,
    ) -> Header {
        let mut h = Header::new(kind, self.job_key, self.rank);
        h.msg = MsgKind::Coll;
        h.context = ctx;
        h.aux32 = seq;
        h.tag = step;
        h.msg_len = total as u64;
        h.aux = off as u64;
        h
    }

    /// Collective fragments over the point-to-point links of `to` (one medium: the
    /// shared-memory rings, or careful links), in order with the point-to-point traffic
    /// to them (same format: signature + data). A fragment for several of them is one
    /// multi-send: one multi-target frame on careful links (the smallest window among
    /// its readers decides), one write per ring on shared memory.
    fn coll_send_links(
        &mut self,
        to: &[u32],
        ctx: u32,
        seq: u32,
        step: i32,
        sig: u64,
        data: &[u8],
    ) {
        let Some(&first) = to.first() else {
            return;
        };
        let medium = self.link(first);
        // A multi-target careful frame carries its readers' frame numbers after the
        // header.
        let ext = if medium == Medium::Careful && to.len() > 1 {
            phalanx_wire::mcast::ext_len(self.size, to.len())
        } else {
            0
        };
        let room = self.payload_to(medium, to).saturating_sub(8 + ext).max(1);
        let total = data.len();
        let mut frames = Vec::with_capacity(total / room + 1);
        let mut off = 0;
        loop {
            let n = room.min(total - off);
            let h = self.coll_header(Kind::GbnData, ctx, seq, step, total, off);
            let mut d = Vec::with_capacity(phalanx_wire::HEADER_LEN + 8 + n);
            d.resize(phalanx_wire::HEADER_LEN, 0);
            let _ = h.emit(&mut d);
            d.extend_from_slice(&sig.to_le_bytes());
            d.extend_from_slice(&data[off..off + n]);
            frames.push(d);
            off += n;
            if off >= total {
                break;
            }
        }
        self.send_frames_to(to, frames);
    }

    /// Sends `data` as collective fragments to the world ranks `to` (one multicast packet
    /// per fragment when there are several).
    pub(crate) fn coll_send(
        &mut self,
        to: &[u32],
        ctx: u32,
        seq: u32,
        step: i32,
        sig: u64,
        data: &[u8],
    ) {
        let (local, net): (Vec<u32>, Vec<u32>) = to.iter().partition(|&&r| self.via_shm(r));
        if !local.is_empty() {
            self.coll_send_links(&local, ctx, seq, step, sig, data);
        }
        // Ranks of another era (spawned, or this rank's parents) are not URTP peers:
        // their fragments go on the go-back-n links, in order with point-to-point.
        // (Split only when some are: the common case allocates nothing more.)
        let net = if net.iter().all(|&r| self.in_era(r)) {
            net
        } else {
            let (net, other): (Vec<u32>, Vec<u32>) = net.iter().partition(|&&r| self.in_era(r));
            self.coll_send_links(&other, ctx, seq, step, sig, data);
            net
        };
        let to = &net[..];
        if to.is_empty() {
            return;
        }
        if self.links.careful.is_some() {
            // A network declared reliable: the careful links carry collectives too, as
            // seed 003 does (no acknowledgements, no REQs).
            self.coll_send_links(to, ctx, seq, step, sig, data);
            return;
        }
        let now = self.now();
        let targets = Targets::from_ranks(to);
        let room = self
            .links
            .urtp
            .proto
            .max_payload_to(&targets)
            .saturating_sub(8)
            .max(1);
        let total = data.len();
        let mut off = 0;
        loop {
            let n = room.min(total - off);
            let h = self.coll_header(Kind::UrtpData, ctx, seq, step, total, off);
            let sigb = sig.to_le_bytes();
            let chunk = &data[off..off + n];
            let sent = if self.coll_out.is_empty() && !self.links.urtp.halted() {
                match self
                    .links
                    .urtp
                    .proto
                    .send_with_prefix(now, &targets, &h, &sigb, chunk)
                {
                    Ok(()) => true,
                    Err(UrtpSendError::WindowFull { .. }) => false,
                    Err(e) => {
                        // Not a matter of waiting: fail the collective.
                        let err = crate::error::Error::InvalidArg(format!(
                            "collective packet to ranks {to:?} cannot be sent: {e}"
                        ));
                        self.coll.fail(err);
                        return;
                    }
                }
            } else {
                false
            };
            if !sent {
                let mut payload = Vec::with_capacity(8 + n);
                payload.extend_from_slice(&sigb);
                payload.extend_from_slice(chunk);
                self.coll_out.push_back(Pending {
                    targets: targets.clone(),
                    header: h,
                    payload,
                });
            }
            off += n;
            if off >= total {
                break;
            }
        }
        self.urtp_flush(now);
    }

    /// Moves waiting collective packets into URTP while windows allow.
    pub(crate) fn urtp_retry(&mut self, now: u64) -> bool {
        let mut did = false;
        if self.links.urtp.halted() {
            return false;
        }
        while let Some(p) = self.coll_out.front() {
            if self
                .links
                .urtp
                .proto
                .send(now, &p.targets, &p.header, &p.payload)
                .is_err()
            {
                break;
            }
            self.coll_out.pop_front();
            did = true;
        }
        did
    }

    /// Puts URTP's datagrams on the wire.
    pub(crate) fn urtp_flush(&mut self, now: u64) -> bool {
        let l = &mut self.links;
        l.urtp.flush(&mut l.net, now)
    }

    /// Handles a URTP datagram and hands in-order collective packets to the schedules.
    pub(crate) fn urtp_input(&mut self, now: u64, pkt: &Packet<'_>) {
        // An in-order packet goes straight from the datagram to the collective layer
        // (no copy into URTP's receive buffer) when the layer takes it.
        let (limit, rank) = (self.unexpected_limit(), self.rank);
        let (coll, stats) = (&mut self.coll, &mut self.stats);
        let mut consume = |p: &Packet<'_>| match coll.deliver(rank, limit, p, false) {
            Ok(taken) => taken,
            Err(()) => {
                stats.drop_invalid += 1;
                true
            }
        };
        match self
            .links
            .urtp
            .proto
            .handle_packet_consume(now, pkt, &mut consume)
        {
            UrtpVerdict::Buffered { .. } => self.urtp_deliver(now, pkt.src()),
            UrtpVerdict::Consumed => {}
            UrtpVerdict::Duplicate => self.stats.drop_duplicate += 1,
            UrtpVerdict::NotTarget => self.stats.drop_not_target += 1,
            UrtpVerdict::Dropped(_) => self.stats.drop_out_of_window += 1,
            UrtpVerdict::Control => {}
            UrtpVerdict::Invalid(_) => self.stats.drop_invalid += 1,
        }
    }

    /// Delivers `src`'s in-order packets to the collective layer.
    fn urtp_deliver(&mut self, now: u64, src: u32) {
        let limit = self.unexpected_limit();
        while let Some(p) = self.links.urtp.proto.peek(src) {
            match self.coll.deliver(self.rank, limit, &p, false) {
                Ok(true) => {}
                Ok(false) => return,
                Err(()) => self.stats.drop_invalid += 1,
            }
            self.links.urtp.proto.pop(now, src);
        }
    }

    /// A collective fragment that came over the go-back-n stream (or to self).
    pub(crate) fn on_coll(&mut self, pkt: &Packet<'_>, local: bool) -> bool {
        let limit = self.unexpected_limit();
        match self.coll.deliver(self.rank, limit, pkt, local) {
            Ok(ok) => ok,
            Err(()) => {
                self.stats.drop_invalid += 1;
                true
            }
        }
    }

    /// Timers, REQs for the sources collective receives wait on, retries, transmits.
    pub(crate) fn urtp_progress(&mut self, now: u64) -> crate::error::Result<bool> {
        let reqs = crate::trace::on().then(|| self.links.urtp.proto.stats().reqs_sent);
        let r = self.urtp_rounds(now);
        if let Some(before) = reqs {
            let sent = self
                .links
                .urtp
                .proto
                .stats()
                .reqs_sent
                .saturating_sub(before);
            if sent > 0 {
                crate::trace::instant(
                    crate::trace::Kind::Log,
                    "URTP REQs sent",
                    "",
                    [sent, 0, 0],
                    0,
                );
            }
        }
        r
    }

    fn urtp_rounds(&mut self, now: u64) -> crate::error::Result<bool> {
        let proto = &mut self.links.urtp.proto;
        if proto.poll_timeout().is_some_and(|t| t <= now) {
            proto.handle_timeout(now);
        }
        if let Some(UrtpEvent::PeerUnresponsive { peer }) = proto.poll_event() {
            return Err(crate::error::Error::PeerUnresponsive { peer });
        }
        let mut srcs = std::mem::take(&mut self.want_scratch);
        srcs.clear();
        srcs.extend(self.coll.waiting_on());
        // Only URTP's peers need REQs (not shared memory, not careful links).
        srcs.retain(|&r| self.link(r) == Medium::Gbn && self.in_era(r));
        for &src in &srcs {
            self.links.urtp.proto.want(now, src);
            // Packets refused earlier for lack of buffer may fit now.
            self.urtp_deliver(now, src);
        }
        self.want_scratch = srcs;
        let mut did = self.urtp_retry(now);
        did |= self.urtp_flush(now);
        Ok(did)
    }
}
