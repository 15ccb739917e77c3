//! URTP — the user-level reliable transport of seed 000 (§3.1–3.2, Appendix A), sans-I/O:
//! reliable FIFO point-to-point **and multicast** for collective traffic, where every
//! receive names its source (global-program semantics), so losses are repaired by the
//! receiver's REQ rather than by sender timeouts.
//!
//! # Contract
//!
//! * **Counters.** Every (sender, receiver) pair has one wrapping `u32` counter starting
//!   at [`UrtpConfig::initial_seq`] (all ranks of a job must agree, and on
//!   [`UrtpConfig::window`]). Unicast and multicast packets from one sender to one
//!   receiver take consecutive values of the same counter, so they form **one FIFO
//!   stream**. A unicast packet carries its counter in `seq` (with `SEQ_VALID`) and
//!   piggy-backs the cumulative ACK of the reverse stream in `ack` (with `ACK_VALID`).
//!   A multicast packet has [`flags::MULTICAST`], `seq` = 0 and the
//!   [`phalanx_wire::mcast`] extension: target bitmap at the fixed offset
//!   [`mcast::OFF_TARGETS`], then one counter per target; it carries no ACK.
//! * **Sending.** [`Urtp::send`] takes the caller's header (only `msg`, `context`, `tag`,
//!   `aux32`, `msg_len`, `aux` and flag bits 5–7 are used; the rest is URTP's), the
//!   payload (copied) and a target set: one target gives a unicast packet, more give one
//!   multicast packet. At most W packets per pair are un-acked; a packet is kept until
//!   **every** target has acknowledged it (explicitly or implicitly by a REQ for a later
//!   counter). [`Urtp::poll_transmit`] hands out datagrams in order: pending control
//!   packets and re-sends first, then new data in `send` order.
//! * **Receiving.** The caller validates a datagram (`Packet::new_checked`), checks the
//!   job key and calls [`Urtp::handle_packet`]. Data packets within the receive window
//!   (W counters from the next one to consume) are buffered — out-of-order ones too,
//!   within the pool bound (p−1)·W + c; duplicates, multicast packets not targeting the
//!   local rank, and packets that do not fit are dropped and counted (a dropped packet
//!   will be requested again). [`Urtp::peek`] / [`Urtp::pop`] consume the next in-order
//!   packet of one source; peek shows it in **unicast form** whatever way it arrived:
//!   `seq` = the pair counter, `SEQ_VALID`, no extension, no ACK fields, no
//!   `MULTICAST` flag.
//! * **ACKs** acknowledge *consumed* packets (popped; this is what bounds the receive
//!   pool by the send window — a deliberate choice over the paper's "ack on arrival"):
//!   piggy-backed on unicast data, a pure [`Kind::UrtpAck`] after
//!   [`UrtpConfig::block_ack_threshold`] consumed-but-unacked packets, after
//!   [`UrtpConfig::ack_delay_ns`], at once for a packet carrying `ACK_REQUEST`, and on
//!   [`Urtp::flush_acks`] (Finalize).
//! * **REQ** (pessimistic request). [`Urtp::want`] declares that the caller waits for the
//!   next packet of a source: if it has not arrived δ = [`UrtpConfig::req_gap_ns`] later,
//!   a [`Kind::UrtpReq`] naming its counter goes to the source point-to-point, repeated
//!   with exponential back-off (clamped at [`UrtpConfig::req_backoff_max_ns`]) while the
//!   want lasts; it expires when the packet arrives. A REQ is also sent at once (at most
//!   once per δ per counter) when a gap at the consume point is detected (a later packet
//!   is buffered — Appendix A, HandleExpected). A REQ for counter n implicitly ACKs n−1.
//!   The sender answers a REQ by re-sending the packet **point-to-point**, re-encoded as
//!   a unicast packet with that receiver's counter even if it was first multicast; it
//!   ignores a REQ naming an unsent packet (see [`Urtp::last_sent_to`]) or one (re)sent
//!   less than δ ago.
//! * **Safety net.** Pure ACKs can be lost and a receiver that does not wait for a lost
//!   packet does not REQ it, so a sender whose peer has not acked for
//!   [`UrtpConfig::sender_rto_ns`] acts (back-off doubling, clamped). If the oldest
//!   un-acked packet is small ([`PROBE_MIN`] bytes at most) or the peer sent nothing since
//!   the previous attempt, it re-sends that packet point-to-point with `ACK_REQUEST`.
//!   Otherwise it probes: a pure ACK with `ACK_REQUEST` whose `seq` is the first counter
//!   not transmitted to the peer yet; the peer answers with an ACK at once, and with a
//!   REQ (rate-limited as above) when the packet at its consume point is missing though
//!   transmitted. A receiver that answers but is slow to acknowledge (descheduled on a
//!   shared core) thus costs a header-sized probe, not a duplicate of a large datagram.
//!   After
//!   [`UrtpConfig::max_backoffs`] consecutive REQs/probes to
//!   a peer without any valid packet from it, [`UrtpEvent::PeerUnresponsive`] is
//!   reported once (retrying continues).
//! * **Robustness.** Nothing panics on network input. A packet from an out-of-range or
//!   the local rank, a foreign job key, a unicast data packet without `SEQ_VALID`, a pure
//!   ACK without `ACK_VALID`, an ACK for a counter never transmitted or a malformed
//!   multicast extension is [`UrtpVerdict::Invalid`] and changes no state.
//! * **Bounds.** Send side: at most W stored packets per peer (one shared copy per
//!   multicast packet); receive side: at most (p−1)·W + c buffered packets; control
//!   queue: one REQ, one ACK and [`RESEND_QUEUE_MAX`] re-sends per peer; timers: three
//!   per peer, in the shared [`TimerTable`] ([`Urtp::poll_timeout`] is O(1)); buffers of
//!   freed packets (sent and acknowledged, or received and consumed) of at most
//!   [`SPARE_BUF_MAX`] bytes are kept for reuse, at most [`SPARE_MAX`] of them.

mod peer;
mod recv;
mod send;
mod timers;
mod transmit;
mod types;

use std::collections::VecDeque;

#[cfg(doc)] // named by the contract above
use phalanx_wire::Kind;
use phalanx_wire::{flags, mcast, HEADER_LEN};

use crate::timers::TimerTable;
use peer::{Peer, Stored};
pub use types::*;

/// Default datagram limit (the largest UDP/IPv4 payload).
pub const DEFAULT_MAX_DATAGRAM: usize = 65_507;
/// Re-sends queued per peer at most (further REQs are dropped; they will be repeated).
pub const RESEND_QUEUE_MAX: usize = 8;
/// The safety net re-sends an un-acked packet of at most this many bytes instead of
/// probing for it (a re-send this small costs about what a probe and its answer do).
pub const PROBE_MIN: usize = 1024;
/// Datagram buffers (and target sets) kept for reuse at most: a datagram sent or
/// received then takes no allocation.
pub const SPARE_MAX: usize = 512;
/// Largest buffer kept for reuse (an MTU-sized datagram's; a 64 KiB loopback datagram's
/// allocation is small beside its copy): the spares hold at most 2 MiB.
pub const SPARE_BUF_MAX: usize = 4096;

/// A buffer of at least `cap` bytes, empty: a spare one if there is one.
fn take_spare(spare: &mut Vec<Vec<u8>>, cap: usize) -> Vec<u8> {
    match spare.pop() {
        Some(mut v) => {
            v.clear();
            v.reserve(cap);
            v
        }
        None => Vec::with_capacity(cap),
    }
}

/// Keeps `v` for reuse (up to [`SPARE_MAX`] buffers of [`SPARE_BUF_MAX`] bytes).
fn keep_spare(spare: &mut Vec<Vec<u8>>, v: Vec<u8>) {
    if spare.len() < SPARE_MAX && v.capacity() <= SPARE_BUF_MAX {
        spare.push(v);
    }
}

/// Flag bits owned by URTP; the caller's copies are ignored.
const OWN_FLAGS: u8 =
    flags::SEQ_VALID | flags::ACK_VALID | flags::RETRANSMIT | flags::ACK_REQUEST | flags::MULTICAST;

/// The URTP engine of one rank: a stream to and from every other rank of the job.
pub struct Urtp {
    cfg: UrtpConfig,
    job_key: u64,
    local: u32,
    size: u32,
    max_datagram: usize,
    /// Per rank: a larger limit for unicast packets to it alone (0: `max_datagram`).
    unicast_max: Vec<usize>,
    peers: Vec<Peer>,
    store: Vec<Option<Stored>>,
    free: Vec<u32>,
    /// Stored packets not transmitted yet, in `send` order.
    data_q: VecDeque<u32>,
    /// Peers with control work (round robin).
    ready: VecDeque<u32>,
    /// Deadlines per peer: TIMER_RTO, TIMER_ACK, TIMER_REQ.
    timers: TimerTable,
    events: VecDeque<UrtpEvent>,
    rx_buffered: usize,
    rx_cap: usize,
    tx_buf: Vec<u8>,
    tx_targets: Targets,
    /// Buffers of freed packets, for reuse (at most [`SPARE_MAX`]).
    spare: Vec<Vec<u8>>,
    /// Target sets of freed packets, for reuse (at most [`SPARE_MAX`]).
    spare_targets: Vec<Targets>,
    stats: UrtpStats,
}

impl Urtp {
    /// URTP for `local_rank` in a job of `size` ranks. The configuration is clamped to
    /// sane values (W in 1..=2^20, threshold in 1..=W, positive delays).
    pub fn new(cfg: UrtpConfig, job_key: u64, local_rank: u32, size: u32) -> Self {
        let mut cfg = cfg;
        cfg.window = cfg.window.clamp(1, 1 << 20);
        cfg.block_ack_threshold = cfg.block_ack_threshold.clamp(1, cfg.window);
        cfg.req_gap_ns = cfg.req_gap_ns.max(1);
        cfg.sender_rto_ns = cfg.sender_rto_ns.max(1);
        cfg.req_backoff_max_ns = cfg.req_backoff_max_ns.max(cfg.req_gap_ns);
        cfg.max_backoffs = cfg.max_backoffs.max(1);
        let rx_cap = (size.saturating_sub(1) as usize)
            .saturating_mul(cfg.window as usize)
            .saturating_add(cfg.rx_extra as usize);
        Urtp {
            peers: (0..size).map(|_| Peer::new(&cfg)).collect(),
            cfg,
            job_key,
            local: local_rank,
            size,
            max_datagram: DEFAULT_MAX_DATAGRAM,
            unicast_max: Vec::new(),
            store: Vec::new(),
            free: Vec::new(),
            data_q: VecDeque::new(),
            ready: VecDeque::new(),
            timers: TimerTable::new(size, timers::TIMER_KINDS),
            events: VecDeque::new(),
            rx_buffered: 0,
            rx_cap,
            tx_buf: Vec::new(),
            tx_targets: Targets::new(),
            spare: Vec::new(),
            spare_targets: Vec::new(),
            stats: UrtpStats::default(),
        }
    }

    /// The configuration in use (after clamping).
    pub fn config(&self) -> &UrtpConfig {
        &self.cfg
    }

    /// Sets the largest datagram [`Urtp::send`] may produce (the transport's limit for
    /// every destination; a unicast packet may be larger where
    /// [`set_unicast_max_datagram`](Self::set_unicast_max_datagram) says so).
    pub fn set_max_datagram(&mut self, max: usize) {
        self.max_datagram = max;
    }

    /// The datagram limit in use ([`DEFAULT_MAX_DATAGRAM`] unless set).
    pub fn max_datagram(&self) -> usize {
        self.max_datagram
    }

    /// Lets unicast packets to `peer` alone be up to `max` bytes (the path to it takes
    /// more than the group does: a rank of this host, through the host's loopback).
    /// Limits below [`max_datagram`](Self::max_datagram) change nothing.
    pub fn set_unicast_max_datagram(&mut self, peer: u32, max: usize) {
        let i = peer as usize;
        if i >= self.unicast_max.len() {
            self.unicast_max.resize(i + 1, 0);
        }
        self.unicast_max[i] = max;
    }

    /// The datagram limit of a packet to `targets`: a unicast one's may be larger
    /// ([`set_unicast_max_datagram`](Self::set_unicast_max_datagram)).
    fn limit(&self, targets: &Targets) -> usize {
        match (targets.len(), targets.iter().next()) {
            (1, Some(r)) => self
                .unicast_max
                .get(r as usize)
                .copied()
                .unwrap_or(0)
                .max(self.max_datagram),
            _ => self.max_datagram,
        }
    }

    /// The largest payload of a packet to exactly `targets` (the multicast extension
    /// counts, and a unicast packet's own limit); 0 if even an empty payload does not fit.
    pub fn max_payload_to(&self, targets: &Targets) -> usize {
        let ext = if targets.len() > 1 {
            mcast::ext_len(self.size, targets.len())
        } else {
            0
        };
        self.limit(targets).saturating_sub(HEADER_LEN + ext)
    }

    /// The largest payload of a packet to `targets` ranks (the multicast extension
    /// counts); 0 if even an empty payload does not fit.
    pub fn max_payload(&self, targets: usize) -> usize {
        let ext = if targets > 1 {
            mcast::ext_len(self.size, targets)
        } else {
            0
        };
        self.max_datagram.saturating_sub(HEADER_LEN + ext)
    }

    fn schedule(&mut self, peer: u32) {
        if let Some(p) = self.peers.get_mut(peer as usize) {
            if !p.in_ready && p.has_ctrl() {
                p.in_ready = true;
                self.ready.push_back(peer);
            }
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<UrtpEvent> {
        self.events.pop_front()
    }

    /// Some peer is owed an ACK for consumed packets.
    pub fn owes_acks(&self) -> bool {
        self.peers.iter().any(|p| p.ack_debt > 0 || p.ack_pending)
    }

    /// Every packet ever sent has been acknowledged by all its targets.
    pub fn all_acked(&self) -> bool {
        self.peers.iter().all(|p| p.snd_una == p.snd_nxt)
    }

    /// Peers with un-acked packets.
    pub fn unacked_peers(&self) -> Vec<u32> {
        (0..self.peers.len() as u32)
            .filter(|&i| {
                let p = &self.peers[i as usize];
                p.snd_una != p.snd_nxt
            })
            .collect()
    }

    /// The last counter transmitted to `dst` (REQs naming later counters name unsent
    /// packets and can be dropped early), `None` before the first transmission.
    pub fn last_sent_to(&self, dst: u32) -> Option<u32> {
        let p = self.peers.get(dst as usize)?;
        p.any_sent.then(|| p.tx_next.wrapping_sub(1))
    }

    /// Packets currently buffered on the receive side (at most (p−1)·W + c).
    pub fn buffered(&self) -> usize {
        self.rx_buffered
    }

    /// Counters.
    pub fn stats(&self) -> &UrtpStats {
        &self.stats
    }
}

#[cfg(test)]
#[path = "../urtp_tests.rs"]
mod tests;
