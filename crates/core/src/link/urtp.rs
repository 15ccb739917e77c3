//! The URTP link: [`phalanx_proto::urtp`] over the shared UDP socket and the job's
//! multicast group, for collectives between hosts (seed 000).
//!
//! Contract: a datagram to several peers is one multicast packet (or a unicast fan-out
//! where the group is not available) that carries its target set; every target
//! acknowledges it, and the receivers REQ what they miss. A datagram is taken only if
//! every target's window has room. In-order packets stay in the protocol's buffers until
//! the collective layer takes them (`peek`/`pop` on [`UrtpLink::proto`]), which the
//! report counts as held; they are not moved by `save` (the protocol keeps them, and
//! with them the acknowledgements it owes).

use super::{Link, LinkReport, Net, Saved};
use crate::error::{Error, Result};
use phalanx_proto::urtp::{Targets, Urtp, UrtpDest, UrtpEvent};
use phalanx_wire::Packet;

/// URTP to every UDP peer.
pub(crate) struct UrtpLink {
    pub(crate) proto: Urtp,
    halted: bool,
}

impl UrtpLink {
    pub(crate) fn new(proto: Urtp) -> UrtpLink {
        UrtpLink {
            proto,
            halted: false,
        }
    }

    /// Takes no new packet (halted).
    pub(crate) fn halted(&self) -> bool {
        self.halted
    }

    /// Puts URTP's datagrams on the wire.
    pub(crate) fn flush(&mut self, net: &mut Net, now: u64) -> bool {
        let mut did = false;
        let mut to = Vec::new();
        // Data to one peer, or multicast to one target set, leaves as runs (one
        // segmented send each).
        while self
            .proto
            .poll_transmit_run(now, phalanx_proto::gbn::RUN_MAX, |tx, run| match tx.dest {
                UrtpDest::Unicast(peer) => net.send_run(peer, run),
                UrtpDest::Multicast => {
                    to.clear();
                    to.extend(tx.targets.iter());
                    net.multicast_run(&to, run);
                }
            })
        {
            did = true;
        }
        did
    }
}

impl Link for UrtpLink {
    fn has_room(&mut self, peers: &[u32], _len: usize) -> bool {
        !self.halted && self.proto.send_space(&Targets::from_ranks(peers)) > 0
    }

    fn send(
        &mut self,
        net: &mut Net,
        now: u64,
        peers: &[u32],
        dgram: Vec<u8>,
    ) -> std::result::Result<(), Vec<u8>> {
        if self.halted {
            return Err(dgram);
        }
        let Ok(pkt) = Packet::new_checked(&dgram) else {
            return Err(dgram);
        };
        let header = pkt.header();
        let sent = self
            .proto
            .send(now, &Targets::from_ranks(peers), &header, pkt.payload());
        if sent.is_err() {
            return Err(dgram);
        }
        self.flush(net, now);
        Ok(())
    }

    fn poll(&mut self, net: &mut Net, now: u64) -> Result<bool> {
        if self.proto.poll_timeout().is_some_and(|t| t <= now) {
            self.proto.handle_timeout(now);
        }
        if let Some(UrtpEvent::PeerUnresponsive { peer }) = self.proto.poll_event() {
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
            in_flight: peers.len() as u64,
            peers,
            held: self.proto.buffered() as u64,
        }
    }

    fn halt(&mut self) {
        self.halted = true;
    }

    fn save(&mut self) -> Saved {
        Saved::default()
    }

    fn restore(&mut self, _saved: Saved) {}

    fn resume(&mut self, stopped_ns: u64) {
        self.halted = false;
        self.proto.postpone_timers(stopped_ns);
    }
}
