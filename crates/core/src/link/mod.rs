//! Links: every medium that carries this rank's datagrams, behind one interface.
//!
//! Contract:
//! * A [`Link`] carries message-layer datagrams (the wire header and its payload) to some
//!   peers over one medium, with that medium's reliability protocol: [`LocalLink`] (this
//!   rank itself), [`ShmLink`] (the shared-memory rings: reliable and ordered, the
//!   consumer index is the flow control), [`GbnLink`] (go-back-n over UDP, seed 004),
//!   [`CarefulLink`] (the careful protocol over UDP for a network declared reliable,
//!   seed 003) and [`UrtpLink`] (URTP over UDP and IP multicast, seed 000: collectives).
//! * Every peer is mapped to its point-to-point link once, at start-up
//!   ([`Links::new`]); the message layer looks the medium up once per batch of
//!   datagrams to a peer, and nothing re-decides it per datagram.
//! * [`Link::send`] takes one datagram for one or several peers — multi-send: one
//!   payload, many destinations — whole or not at all: a datagram the link cannot take
//!   now is given back, never lost, and [`Link::has_room`] says beforehand whether it
//!   would be taken. A link never blocks.
//! * The hooks of the job manager (seed 001): a [`Link::halt`]ed link takes no new
//!   datagram (the message layer keeps them queued, so traffic stops at a packet
//!   boundary) but goes on receiving, acknowledging and retransmitting, so what is in
//!   flight drains; [`Link::report`] says what is still in flight and what is held;
//!   [`Link::save`] moves what the link holds for this rank into ordinary memory (its
//!   valid packets only) and [`Link::restore`] puts it back; [`Link::resume`] takes
//!   datagrams again and moves every protocol timer later by the time the process was
//!   stopped, so that no retransmission, acknowledgement or peer timeout counts it.
//! * Datagrams from the UDP socket ([`Net`]) are demultiplexed by kind by the engine and
//!   handed to the link of their protocol; shared memory and self are drained by the
//!   engine from [`ShmLink`] and [`LocalLink`].
//! * The fault-injecting wrapper ([`phalanx_transport::Faulty`]) wraps the datagram
//!   medium ([`Net`]) under the protocol links — go-back-n, careful, URTP — on UDP, and on
//!   shared memory too: with `PHALANX_TRANSPORT=shm` and `PHALANX_FAULTS` the rings join
//!   the socket as one medium ([`HostMedium`]) and the host's ranks are reached through
//!   go-back-n (or careful) over faulty rings instead of the protocol-less [`ShmLink`].
//!   Self has nothing to inject into.

mod careful;
mod gbn;
mod host;
mod local;
mod ring;
mod urtp;

pub(crate) use careful::CarefulLink;
pub(crate) use gbn::GbnLink;
pub(crate) use host::HostMedium;
pub(crate) use local::LocalLink;
pub(crate) use ring::{parse_compact, Compact, ShmLink};
pub(crate) use urtp::UrtpLink;

use crate::error::Result;
use phalanx_transport::Transport;

/// The medium of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Medium {
    /// This rank itself: a local queue.
    Local,
    /// The shared-memory rings to the other ranks of this host.
    Shm,
    /// The careful protocol over UDP (windows, no acknowledgements).
    Careful,
    /// Go-back-n over UDP (acknowledgements and retransmission).
    Gbn,
    /// URTP over UDP and IP multicast (collectives).
    Urtp,
}

impl std::fmt::Display for Medium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Medium::Local => "self",
            Medium::Shm => "shared memory",
            Medium::Careful => "careful/UDP",
            Medium::Gbn => "go-back-n/UDP",
            Medium::Urtp => "URTP/multicast",
        })
    }
}

/// What a link has in flight and holds, for the job manager.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkReport {
    /// The link is halted (takes no new datagram).
    pub halted: bool,
    /// Datagrams (cells on shared memory) sent and not yet known delivered: not
    /// acknowledged, or not consumed by the peer.
    pub in_flight: u64,
    /// The peers those are bound to.
    pub peers: Vec<u32>,
    /// Datagrams received and held for this rank (frames in its rings, held careful
    /// frames, its own queued datagrams).
    pub held: u64,
}

impl LinkReport {
    /// Nothing in flight.
    pub fn quiet(&self) -> bool {
        self.in_flight == 0
    }
}

/// What a link held for this rank, moved to ordinary memory by [`Link::save`]: the valid
/// datagrams only, per source, in arrival order.
#[derive(Debug, Default)]
pub struct Saved {
    pub(crate) frames: Vec<(u32, Vec<u8>)>,
}

impl Saved {
    /// Datagrams saved.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Bytes saved.
    pub fn bytes(&self) -> usize {
        self.frames.iter().map(|(_, d)| d.len()).sum()
    }
}

/// One medium's link (see the module docs).
pub(crate) trait Link {
    /// Whether [`send`](Link::send) would take a datagram of `len` bytes for every one of
    /// `peers` now (never when halted).
    fn has_room(&mut self, peers: &[u32], len: usize) -> bool;
    /// Sends `dgram` to every one of `peers` (one payload, many destinations), or gives
    /// it back untouched when the link cannot take it for all of them now.
    fn send(
        &mut self,
        net: &mut Net,
        now: u64,
        peers: &[u32],
        dgram: Vec<u8>,
    ) -> std::result::Result<(), Vec<u8>>;
    /// Runs the protocol's due timers and puts what it owes on the wire. An error names
    /// the peer and the reason (an unresponsive peer, a broken link).
    fn poll(&mut self, net: &mut Net, now: u64) -> Result<bool>;
    /// The protocol's earliest deadline, if any.
    fn poll_timeout(&self) -> Option<u64>;
    /// What is in flight and held.
    fn report(&mut self) -> LinkReport;
    /// Stops taking new datagrams (the protocol keeps running).
    fn halt(&mut self);
    /// Moves what the link holds for this rank into ordinary memory.
    fn save(&mut self) -> Saved;
    /// Puts back what [`save`](Link::save) took (delivered before anything newer).
    fn restore(&mut self, saved: Saved);
    /// Takes datagrams again; every timer moves `stopped_ns` later.
    fn resume(&mut self, stopped_ns: u64);
    /// The caller is about to send several datagrams in a row: the link may keep them
    /// until [`release`](Link::release) (or until it has a system call's worth), so that
    /// they leave together. Links that send at once ignore it.
    fn hold(&mut self) {}
    /// Puts on the wire what the link kept since [`hold`](Link::hold).
    fn release(&mut self, net: &mut Net, now: u64) {
        let _ = (net, now);
    }
}

/// The UDP socket that go-back-n, careful and URTP share (possibly behind the fault
/// injector), with its send counters. Absent for a singleton.
#[derive(Default)]
pub(crate) struct Net {
    pub(crate) transport: Option<Box<dyn Transport>>,
    /// Datagrams handed to the socket.
    pub(crate) sent: u64,
    /// Sends the socket refused with an error (the protocols retransmit).
    pub(crate) errors: u64,
    /// The rank, for diagnostics.
    rank: u32,
}

impl Net {
    pub(crate) fn new(transport: Option<Box<dyn Transport>>, rank: u32) -> Net {
        Net {
            transport,
            rank,
            ..Net::default()
        }
    }

    /// Sends one datagram to `peer`; an error is counted and reported a few times (the
    /// protocol above retransmits; a lasting error ends as an unresponsive peer).
    pub(crate) fn send_to(&mut self, peer: u32, bytes: &[u8]) {
        let Some(t) = self.transport.as_mut() else {
            return;
        };
        self.sent += 1;
        if let Err(e) = t.send_to(peer, bytes) {
            self.error(peer, &e);
        }
    }

    /// Sends `run`, datagrams to `peer` in order (one segmented send where it can).
    pub(crate) fn send_run(&mut self, peer: u32, run: &[&[u8]]) {
        let Some(t) = self.transport.as_mut() else {
            return;
        };
        self.sent += run.len() as u64;
        if let Err(e) = t.send_run(peer, run) {
            self.error(peer, &e);
        }
    }

    /// [`send_run`](Self::send_run) of datagrams in pieces (a header and a payload left
    /// in the sender's buffer), each sent as their concatenation.
    pub(crate) fn send_run_parts(&mut self, peer: u32, run: &[[&[u8]; 2]]) {
        let Some(t) = self.transport.as_mut() else {
            return;
        };
        self.sent += run.len() as u64;
        if let Err(e) = t.send_run_parts(peer, run) {
            self.error(peer, &e);
        }
    }

    /// Sends each datagram of `run` to `peers` through the job's multicast group (one
    /// segmented send where it can), or fan-out.
    pub(crate) fn multicast_run(&mut self, peers: &[u32], run: &[&[u8]]) {
        let Some(t) = self.transport.as_mut() else {
            return;
        };
        self.sent += run.len() as u64;
        if let Err(e) = t.send_multicast_run(run, peers) {
            self.error(peers.first().copied().unwrap_or(0), &e);
        }
    }

    /// Sends one datagram to each of `peers` (one `sendmmsg`).
    pub(crate) fn multi_send(&mut self, peers: &[u32], bytes: &[u8]) {
        let Some(t) = self.transport.as_mut() else {
            return;
        };
        self.sent += peers.len() as u64;
        if let Err(e) = t.multi_send(bytes, peers) {
            self.error(peers.first().copied().unwrap_or(0), &e);
        }
    }

    fn error(&mut self, peer: u32, e: &std::io::Error) {
        self.errors += 1;
        if self.errors < 4 {
            tracing::warn!(
                "phalanx: rank {}: send to rank {peer} failed: {e}",
                self.rank
            );
        }
    }

    /// Whether the socket reaches a target set with one multicast.
    pub(crate) fn multicast_available(&self) -> bool {
        self.transport
            .as_ref()
            .is_some_and(|t| t.multicast_available())
    }
}

/// Every link of this rank and the medium of each peer.
pub(crate) struct Links {
    /// The point-to-point medium of each world rank, decided at start-up.
    by_peer: Vec<Medium>,
    pub(crate) net: Net,
    pub(crate) local: LocalLink,
    pub(crate) shm: Option<Box<ShmLink>>,
    pub(crate) gbn: GbnLink,
    pub(crate) careful: Option<CarefulLink>,
    pub(crate) urtp: UrtpLink,
}

impl Links {
    /// The links of a rank before the start-up decisions: itself, go-back-n and URTP over
    /// `net`; [`decide`](Links::decide) maps the peers once shared memory and careful
    /// are known.
    pub(crate) fn new(net: Net, gbn: GbnLink, urtp: UrtpLink) -> Links {
        Links {
            by_peer: Vec::new(),
            net,
            local: LocalLink::default(),
            shm: None,
            gbn,
            careful: None,
            urtp,
        }
    }

    /// Maps every peer to its link, once: itself, shared memory (the ranks the rings
    /// reach), the careful protocol over UDP (a network declared reliable) or go-back-n
    /// over UDP.
    pub(crate) fn decide(&mut self, rank: u32, size: u32) {
        let on_shm: &[u32] = self.shm.as_ref().map_or(&[], |s| s.peers());
        let careful = self.careful.is_some();
        self.by_peer = (0..size)
            .map(|p| {
                if p == rank {
                    Medium::Local
                } else if on_shm.binary_search(&p).is_ok() {
                    Medium::Shm
                } else if careful {
                    Medium::Careful
                } else {
                    Medium::Gbn
                }
            })
            .collect();
    }

    /// Peers up to `size` that joined after start-up reach this rank over `medium`.
    pub(crate) fn grow(&mut self, size: u32, medium: Medium) {
        if self.by_peer.len() < size as usize {
            self.by_peer.resize(size as usize, medium);
        }
    }

    /// The point-to-point medium of `peer` (go-back-n for a rank out of range: the
    /// caller checked it).
    #[inline]
    pub(crate) fn medium(&self, peer: u32) -> Medium {
        self.by_peer
            .get(peer as usize)
            .copied()
            .unwrap_or(Medium::Gbn)
    }

    /// Every peer's medium.
    pub(crate) fn media(&self) -> &[Medium] {
        &self.by_peer
    }

    /// The link of `medium` and the socket it sends on; `None` if this rank has no such
    /// link.
    #[inline]
    pub(crate) fn get(&mut self, medium: Medium) -> Option<(&mut dyn Link, &mut Net)> {
        let link: &mut dyn Link = match medium {
            Medium::Local => &mut self.local,
            Medium::Shm => &mut **self.shm.as_mut()?,
            Medium::Careful => self.careful.as_mut()?,
            Medium::Gbn => &mut self.gbn,
            Medium::Urtp => &mut self.urtp,
        };
        Some((link, &mut self.net))
    }

    /// The media this rank has a link on.
    pub(crate) fn present(&self) -> Vec<Medium> {
        let mut m = vec![Medium::Local];
        if self.shm.is_some() {
            m.push(Medium::Shm);
        }
        if self.careful.is_some() {
            m.push(Medium::Careful);
        }
        m.push(Medium::Gbn);
        m.push(Medium::Urtp);
        m
    }

    /// The earliest protocol deadline of every link.
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        [
            self.gbn.poll_timeout(),
            self.urtp.poll_timeout(),
            self.careful.as_ref().and_then(|c| c.poll_timeout()),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phalanx_proto::gbn::{Gbn, GbnConfig};
    use phalanx_proto::urtp::{Urtp, UrtpConfig};

    fn links(rank: u32, size: u32) -> Links {
        Links::new(
            Net::default(),
            GbnLink::new(Gbn::new(GbnConfig::default(), 1, rank, size)),
            UrtpLink::new(Urtp::new(UrtpConfig::default(), 1, rank, size)),
        )
    }

    #[test]
    fn peers_map_to_media_once() {
        let mut l = links(1, 3);
        l.decide(1, 3);
        assert_eq!(l.media(), &[Medium::Gbn, Medium::Local, Medium::Gbn]);
        // Out of range: go-back-n (the caller checked the rank).
        assert_eq!(l.medium(9), Medium::Gbn);
        assert!(l.get(Medium::Shm).is_none());
        assert!(l.get(Medium::Careful).is_none());
        assert_eq!(l.present(), [Medium::Local, Medium::Gbn, Medium::Urtp]);
    }

    #[test]
    fn halted_links_refuse_and_give_the_datagram_back() {
        let mut l = links(0, 2);
        l.decide(0, 2);
        for m in [Medium::Local, Medium::Gbn, Medium::Urtp] {
            let (link, net) = l.get(m).expect("present");
            link.halt();
            assert!(!link.has_room(&[1], 10), "{m}");
            let d = vec![7u8; 80];
            assert_eq!(link.send(net, 0, &[1], d.clone()), Err(d), "{m}");
            assert!(link.report().halted);
            link.resume(0);
            assert!(!link.report().halted);
        }
    }

    #[test]
    fn local_save_and_restore_keep_the_order() {
        let mut l = LocalLink::default();
        let mut net = Net::default();
        for i in 0..3u8 {
            l.send(&mut net, 0, &[0], vec![i]).expect("taken");
        }
        // A multi-send to itself twice: two copies.
        l.send(&mut net, 0, &[0, 0], vec![9]).expect("taken");
        assert_eq!(l.report().held, 5);
        let saved = l.save();
        assert_eq!(saved.len(), 5);
        assert!(l.is_empty());
        l.send(&mut net, 0, &[0], vec![42]).expect("taken");
        l.restore(saved);
        let got: Vec<u8> = std::iter::from_fn(|| l.pop()).map(|d| d[0]).collect();
        assert_eq!(got, [0, 1, 2, 9, 9, 42]);
    }

    #[test]
    fn gbn_multi_send_checks_every_window_first() {
        let cfg = GbnConfig {
            window: 2,
            ..GbnConfig::default()
        };
        let mut g = GbnLink::new(Gbn::new(cfg, 1, 0, 3));
        let mut net = Net::default();
        let mut h = phalanx_wire::Header::new(phalanx_wire::Kind::GbnData, 1, 0);
        h.msg = phalanx_wire::MsgKind::Eager;
        let d = h.to_datagram(&[1, 2, 3]);
        // Fill peer 2's window; a send to {1, 2} is then refused whole.
        g.send(&mut net, 0, &[2], d.clone()).expect("room");
        g.send(&mut net, 0, &[2], d.clone()).expect("room");
        assert!(!g.has_room(&[1, 2], d.len()));
        assert_eq!(g.send(&mut net, 0, &[1, 2], d.clone()), Err(d.clone()));
        assert_eq!(g.proto.unacked(1), 0, "nothing went to peer 1");
        g.send(&mut net, 0, &[1], d).expect("room");
        let r = g.report();
        assert_eq!((r.in_flight, r.peers), (3, vec![1, 2]));
    }
}
