//! The host medium: the UDP socket and this host's shared-memory rings as one datagram
//! transport, so that the reliability protocols (go-back-n, careful, URTP) and the
//! fault-injecting wrapper run over shared memory too.
//!
//! Contract: used only when faults are injected on shared memory
//! (`PHALANX_TRANSPORT=shm` with `PHALANX_FAULTS`): the ranks of this host are then
//! reached through their rings *under* a protocol — the wrapper drops, duplicates and
//! reorders ring datagrams as it does UDP ones, and go-back-n (or careful, on a network
//! declared reliable) recovers (or reports). A datagram to a ring peer goes into its
//! ring (a full ring drops it, counted, as a full socket buffer would); every other
//! peer, and multicast, is UDP. Datagrams from a ring are reported as coming from the
//! peer's UDP address, so the engine's sender check is the same for both. There is no
//! group send to ring peers: a multicast to targets on this host is a fan-out.

use phalanx_shm::ShmTransport;
use phalanx_transport::{Rank, Transport, TransportStats};
use std::net::SocketAddrV4;
use std::os::fd::RawFd;

/// UDP plus the rings to this host's ranks.
pub(crate) struct HostMedium {
    udp: Box<dyn Transport>,
    ring: ShmTransport,
    /// Per world rank: reached through its ring.
    on_ring: Vec<bool>,
    /// Per world rank: its UDP address (the source reported for ring datagrams).
    addrs: Vec<SocketAddrV4>,
    sent: u64,
    received: u64,
    dropped: u64,
}

impl HostMedium {
    pub(crate) fn new(
        udp: Box<dyn Transport>,
        ring: ShmTransport,
        addrs: Vec<SocketAddrV4>,
    ) -> HostMedium {
        let mut on_ring = vec![false; addrs.len()];
        for &p in ring.peers() {
            if let Some(r) = on_ring.get_mut(p as usize) {
                *r = true;
            }
        }
        HostMedium {
            udp,
            ring,
            on_ring,
            addrs,
            sent: 0,
            received: 0,
            dropped: 0,
        }
    }

    fn ring_peer(&self, peer: Rank) -> bool {
        self.on_ring.get(peer as usize).copied().unwrap_or(false)
    }

    fn ring_send(&mut self, peer: Rank, datagram: &[u8]) -> std::io::Result<bool> {
        if self.ring.send(peer, datagram)? {
            self.sent += 1;
            Ok(true)
        } else {
            self.dropped += 1;
            Ok(false)
        }
    }
}

impl Transport for HostMedium {
    fn send_to(&mut self, peer: Rank, datagram: &[u8]) -> std::io::Result<bool> {
        if self.ring_peer(peer) {
            self.ring_send(peer, datagram)
        } else {
            self.udp.send_to(peer, datagram)
        }
    }

    fn send_run(&mut self, peer: Rank, run: &[&[u8]]) -> std::io::Result<usize> {
        if !self.ring_peer(peer) {
            return self.udp.send_run(peer, run);
        }
        let mut n = 0;
        for d in run {
            n += usize::from(self.ring_send(peer, d)?);
        }
        Ok(n)
    }

    fn send_run_parts(&mut self, peer: Rank, run: &[[&[u8]; 2]]) -> std::io::Result<usize> {
        if !self.ring_peer(peer) {
            return self.udp.send_run_parts(peer, run);
        }
        let mut n = 0;
        for [head, tail] in run {
            n += usize::from(self.ring_send(peer, &[*head, *tail].concat())?);
        }
        Ok(n)
    }

    fn send_multicast(&mut self, datagram: &[u8], targets: &[Rank]) -> std::io::Result<bool> {
        Ok(self.multi_send(datagram, targets)? == targets.len())
    }

    fn multi_send(&mut self, datagram: &[u8], peers: &[Rank]) -> std::io::Result<usize> {
        let (ring, net): (Vec<Rank>, Vec<Rank>) = peers.iter().partition(|&&p| self.ring_peer(p));
        let mut n = 0;
        for p in ring {
            n += usize::from(self.ring_send(p, datagram)?);
        }
        if !net.is_empty() {
            n += self.udp.multi_send(datagram, &net)?;
        }
        Ok(n)
    }

    fn recv_batch(&mut self, f: &mut dyn FnMut(SocketAddrV4, &[u8])) -> std::io::Result<usize> {
        let addrs = &self.addrs;
        let from_ring = self.ring.recv(&mut |from, bytes| {
            if let Some(&a) = addrs.get(from as usize) {
                f(a, bytes);
            }
            true
        })?;
        self.received += from_ring as u64;
        Ok(from_ring + self.udp.recv_batch(f)?)
    }

    fn set_poll_multicast(&mut self, on: bool) {
        self.udp.set_poll_multicast(on);
    }

    fn fds(&self) -> Vec<RawFd> {
        let mut fds = self.udp.fds();
        fds.push(self.ring.fd());
        fds
    }

    fn next_deadline(&self) -> Option<u64> {
        self.udp.next_deadline()
    }

    fn service(&mut self, now: u64) -> std::io::Result<()> {
        self.udp.service(now)
    }

    fn max_datagram(&self) -> usize {
        self.udp.max_datagram().min(self.ring.max_frame())
    }

    fn recv_frames(&self) -> u64 {
        self.udp.recv_frames()
    }

    fn stats(&self) -> TransportStats {
        let mut s = self.udp.stats();
        s.sent += self.sent;
        s.received += self.received;
        s.ring_sent += self.sent;
        s.ring_received += self.received;
        s.send_dropped += self.dropped;
        s
    }

    fn prepare_sleep(&mut self) -> bool {
        self.ring.prepare_sleep()
    }
}
