//! The go-back-n link: [`phalanx_proto::gbn`] over the shared UDP socket.
//!
//! Contract: every datagram taken is delivered to its peer exactly once and in order,
//! or the link reports the peer unresponsive (after `PHALANX_PEER_TIMEOUT` without
//! acknowledgement progress). A datagram is taken only when the peer's window has room;
//! it goes on the wire at once. A multi-send checks every destination's window first
//! and then gives each destination its own copy (its own sequence number and
//! acknowledgement), so a lost copy is retransmitted to its destination only.
//! Incoming datagrams reach [`GbnLink::input`] from the engine's demultiplexer; the
//! message layer confirms each delivered one with [`GbnLink::accept`] (a refused one is
//! not acknowledged, and the sender retransmits it later: flow control).
//! [`GbnLink::send_tail`] takes a datagram whose payload stays in the sender's buffer (a
//! [`Tail`], zero-copy rendezvous data): the window keeps the reference until the
//! datagram is acknowledged, and the socket sends header and payload as two pieces.
//! Between `hold` and `release` (the message layer cutting fragments) datagrams shorter
//! than [`HOLD_BYTES`] are kept until a run of about that many bytes is ready, which
//! leaves in one segmented send; everything owed goes out as runs per peer.

use super::{Link, LinkReport, Net, Saved};
use crate::error::{Error, Result};
use phalanx_proto::gbn::{Gbn, GbnEvent, Tail, Verdict};
use phalanx_wire::Packet;

/// Bytes of datagrams a held link keeps before it sends them anyway: about what one
/// segmented UDP send carries (`phalanx_transport::gso::MAX_TOTAL`, less room for the
/// datagrams' MACs). A datagram this long or longer (loopback's) leaves at once.
const HOLD_BYTES: usize = 60_000;

/// Go-back-n to every UDP peer.
pub(crate) struct GbnLink {
    pub(crate) proto: Gbn,
    halted: bool,
    /// Between `hold` and `release`: datagrams wait for a run to fill.
    held: bool,
    /// Bytes taken since the last flush.
    queued: usize,
}

impl GbnLink {
    pub(crate) fn new(proto: Gbn) -> GbnLink {
        GbnLink {
            proto,
            halted: false,
            held: false,
            queued: 0,
        }
    }

    /// A go-back-n datagram from the socket.
    #[inline]
    pub(crate) fn input(&mut self, now: u64, pkt: &Packet<'_>) -> Verdict {
        self.proto.handle_packet(now, pkt)
    }

    /// The message layer took the datagram `input` said to deliver.
    #[inline]
    pub(crate) fn accept(&mut self, now: u64, peer: u32) {
        self.proto.accept(now, peer);
    }

    /// Puts every datagram the protocol owes on the wire.
    pub(crate) fn flush(&mut self, net: &mut Net, now: u64) -> bool {
        let mut did = false;
        self.queued = 0;
        let retransmits = self.proto.stats().retransmits;
        while self
            .proto
            .poll_transmit_run(now, phalanx_proto::gbn::RUN_MAX, |peer, run| {
                net.send_run_parts(peer, run)
            })
        {
            did = true;
        }
        let again = self.proto.stats().retransmits - retransmits;
        if again > 0 {
            tracing::debug!(count = again, "retransmitted datagrams");
        }
        did
    }
}

impl GbnLink {
    /// [`Link::send`] to one peer of the datagram `head` followed by `tail`, whose bytes
    /// stay in the sender's buffer until the datagram is acknowledged (zero-copy
    /// rendezvous data); both come back when the window has no room.
    pub(crate) fn send_tail(
        &mut self,
        net: &mut Net,
        now: u64,
        peer: u32,
        head: Vec<u8>,
        tail: Tail,
    ) -> std::result::Result<(), (Vec<u8>, Tail)> {
        if self.halted {
            return Err((head, tail));
        }
        let len = head.len() + tail.bytes().len();
        self.proto.send_tail(now, peer, head, tail)?;
        self.queued += len;
        if !self.held || self.queued >= HOLD_BYTES {
            self.flush(net, now);
        }
        Ok(())
    }
}

impl Link for GbnLink {
    #[inline]
    fn has_room(&mut self, peers: &[u32], _len: usize) -> bool {
        !self.halted && peers.iter().all(|&p| self.proto.send_space(p) > 0)
    }

    fn send(
        &mut self,
        net: &mut Net,
        now: u64,
        peers: &[u32],
        dgram: Vec<u8>,
    ) -> std::result::Result<(), Vec<u8>> {
        if !self.has_room(peers, dgram.len()) {
            return Err(dgram);
        }
        let len = dgram.len();
        if let Some((&last, rest)) = peers.split_last() {
            for &p in rest {
                // Room was checked for every destination: cannot be refused.
                let _ = self.proto.send(now, p, dgram.clone());
            }
            self.proto.send(now, last, dgram)?;
        }
        self.queued += len * peers.len();
        // On the wire at once (the receiver copies one fragment while the next is cut),
        // unless held and a run of small datagrams is still filling (it leaves in one
        // segmented send).
        if !self.held || self.queued >= HOLD_BYTES {
            self.flush(net, now);
        }
        Ok(())
    }

    fn poll(&mut self, net: &mut Net, now: u64) -> Result<bool> {
        if self.proto.poll_timeout().is_some_and(|t| t <= now) {
            self.proto.handle_timeout(now);
        }
        if let Some(GbnEvent::PeerUnresponsive { peer }) = self.proto.poll_event() {
            return Err(Error::PeerUnresponsive { peer });
        }
        Ok(self.flush(net, now))
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.proto.poll_timeout()
    }

    fn report(&mut self) -> LinkReport {
        let peers = self.proto.unacked_peers();
        LinkReport {
            halted: self.halted,
            in_flight: peers
                .iter()
                .map(|&p| u64::from(self.proto.unacked(p)))
                .sum(),
            peers,
            held: 0,
        }
    }

    fn halt(&mut self) {
        self.halted = true;
    }

    /// Go-back-n holds nothing for this rank: in-order datagrams are delivered as they
    /// arrive, out-of-order ones are dropped (the sender goes back).
    fn save(&mut self) -> Saved {
        Saved::default()
    }

    fn restore(&mut self, _saved: Saved) {}

    fn resume(&mut self, stopped_ns: u64) {
        self.halted = false;
        self.proto.postpone_timers(stopped_ns);
    }

    fn hold(&mut self) {
        self.held = true;
    }

    fn release(&mut self, net: &mut Net, now: u64) {
        self.held = false;
        if self.queued > 0 {
            self.flush(net, now);
        }
    }
}
