//! Go-back-n with lazy acknowledgements (seed 004 §5–6), sans-I/O.
//!
//! # Contract
//!
//! * One reliable, ordered stream per peer rank (`0..peers`, the local rank included —
//!   a stream to oneself works like any other). Sequence numbers are wrapping `u32`
//!   compared with [`serial`] arithmetic; every stream starts at
//!   [`GbnConfig::initial_seq`] (all ranks of a job must use the same value).
//! * **Sending**: [`Gbn::send`] takes a complete datagram (header emitted by the caller
//!   with [`Kind::GbnData`], any message-layer fields), assigns the next sequence number,
//!   keeps it in the peer's send window (at most [`GbnConfig::window`] un-acked
//!   packets, and no new one once [`GbnConfig::window_bytes`] are out) and queues it.
//!   [`Gbn::send_tail`] does the same for a header datagram followed by a [`Tail`]:
//!   payload bytes the window refers to where they lie (a [`Shared`] buffer,
//!   such as a message's send buffer) instead of a copy; the entry holds the reference
//!   until the datagram is acknowledged, so its owner knows the bytes are no longer read
//!   when it holds the last reference, and [`Gbn::own_tails`] turns an owner's tails into
//!   copies when it must give the bytes up earlier. [`Gbn::poll_transmit`] hands out the
//!   next datagram to put on the wire (a tail's datagram as one copy);
//!   [`Gbn::poll_transmit_run`] hands out runs of datagrams as their pieces; the `ack`
//!   field and the flags are re-stamped at that moment, so every data packet
//!   piggy-backs the latest cumulative ACK for its peer.
//! * **Receiving**: the caller validates a datagram with `Packet::new_checked`, checks the
//!   job key, then calls [`Gbn::handle_packet`], which processes the ACK field and
//!   classifies the data as a [`Verdict`]. The receive window is one packet: only the next
//!   in-order packet is [`Verdict::Deliver`]ed; out-of-order packets are dropped. The
//!   caller must call [`Gbn::accept`] once it has consumed a delivered packet (before the
//!   next `handle_packet`); a packet that is not accepted counts as never received and
//!   will be retransmitted by its sender.
//! * **Acknowledgements** are cumulative ("last in-order sequence number received") and
//!   lazy: piggy-backed on data, or a pure [`Kind::GbnAck`] datagram after
//!   [`GbnConfig::ack_threshold`] un-acked packets or [`GbnConfig::ack_bytes`] bytes,
//!   after [`GbnConfig::ack_delay_ns`], at once in [`GbnConfig::eager_ack`] mode, at
//!   once for a packet carrying [`flags::ACK_REQUEST`], and on [`Gbn::flush_acks`]
//!   (Finalize). An out-of-order or duplicate packet triggers an immediate *duplicate
//!   ACK* (a pure ACK of the last in-order packet), rate-limited to one per in-order
//!   advance or per `rto_initial / 4`;
//!   one answering an out-of-order packet carries [`flags::GAP`]. Every pure ACK carries
//!   [`flags::TX_HINT`]: the last sequence number its sender has transmitted to the
//!   receiver; a receiver that has not got that far answers at once with a duplicate ACK
//!   carrying [`flags::GAP`] (rate-limited like the others unless the ACK asked for an
//!   answer) — in an exchange, a loss is known one delayed ACK after it, not one
//!   timeout.
//! * **Retransmission timeout** adapts to the path (RFC 6298): one round-trip sample at a
//!   time per peer, from a packet sent once (Karn: a go-back or a probe discards the
//!   sample), gives SRTT and RTTVAR; the RTO is SRTT + 4·RTTVAR, at least
//!   [`GbnConfig::rto_initial_ns`] and at most [`GbnConfig::rto_max_ns`]. A timeout
//!   doubles it (back-off, clamped); ACK progress brings it back to SRTT + 4·RTTVAR.
//!   The clamp may be shorter than a slow path's round trip: its timeouts then cost
//!   probes (below), not data. (Keeping the back-off until the next valid sample, as TCP
//!   does, made recovery at 30 % loss three times slower: with most packets re-sent,
//!   valid samples are rare.)
//! * **Retransmission**: one timer per peer at the left edge of its send window.
//!   The first [`GbnConfig::probes`] timeouts since the last ACK progress (outside a
//!   fast-retransmit recovery) re-send nothing: each sends a *probe*, a pure ACK with
//!   [`flags::ACK_REQUEST`] (and the transmit hint), counted in `probes`. A receiver
//!   that was merely slow answers it with an ACK of everything; one that lost something
//!   answers with a [`flags::GAP`] duplicate ACK, which triggers the fast retransmit
//!   below — so a timeout on a lossless path costs a header-sized datagram, not a data
//!   retransmission (three probes by default: on an oversubscribed host a receiver is
//!   often descheduled for longer than one RTO). On a later timeout without progress
//!   the sender goes back to the left edge and re-sends what is in flight, first only
//!   the left edge (with [`flags::ACK_REQUEST`]: a receiver that was merely slow
//!   answers it with an ACK of everything, and nothing more is re-sent), then twice as
//!   many beyond the left edge per ACK advance, up to [`GbnConfig::retx_burst`] (the
//!   rest is released as ACKs advance). If the first ACK progress after a timeout
//!   covers packets beyond that left edge — sent once, so they arrived — the timeout
//!   was spurious and nothing more is re-sent (after F-RTO, RFC 5682; counted in
//!   `spurious_timeouts`). A pure ACK with [`flags::GAP`] that does not advance
//!   while packets are in flight reports a loss and triggers the same go-back at once
//!   (fast retransmit), once per recovery episode (NewReno-like `recover` mark); one
//!   without it (the answer to a duplicate) changes nothing. After
//!   [`GbnConfig::max_backoffs`] consecutive timeouts without progress a
//!   [`GbnEvent::PeerUnresponsive`] is reported once (retransmission continues).
//! * **Robustness**: nothing panics on network input. A packet from `src >= peers`, a data
//!   packet without `SEQ_VALID`, a pure ACK without `ACK_VALID` or an ACK for a sequence
//!   number never transmitted is [`Verdict::Invalid`] and changes no state.
//! * **Bounds**: memory is the send windows (tails by reference) plus one header-sized
//!   ACK buffer per peer;
//!   the transmit queue is implicit (window cursors plus one ACK per peer).
//!   Timers (retransmission and delayed ACK, at most two per peer) live in the shared
//!   [`TimerTable`]: [`Gbn::poll_timeout`] is O(1), and [`Gbn::handle_timeout`] fires
//!   them in (deadline, peer, kind) order.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

use phalanx_wire::{flags, serial, stamp, Header, Kind, Packet, HEADER_LEN};

use crate::timers::TimerTable;

/// Tunables of the go-back-n protocol.
#[derive(Debug, Clone)]
pub struct GbnConfig {
    /// Maximum un-acked data packets in flight per peer.
    pub window: u32,
    /// Maximum un-acked bytes (whole datagrams, tails included) in flight per peer: a
    /// datagram is queued only while fewer are out (so one may cross the bound), and one
    /// always when nothing is.
    pub window_bytes: usize,
    /// Initial retransmission timeout (ns).
    pub rto_initial_ns: u64,
    /// Clamp of the exponential back-off (ns).
    pub rto_max_ns: u64,
    /// A pure ACK is sent after this many un-acked in-order packets.
    pub ack_threshold: u32,
    /// A pure ACK is sent after this many un-acked in-order bytes (whole datagrams).
    pub ack_bytes: usize,
    /// A pure ACK is sent when un-acked received data is older than this (ns).
    pub ack_delay_ns: u64,
    /// Acknowledge every data packet at once.
    pub eager_ack: bool,
    /// Maximum packets re-sent beyond the left edge per go-back.
    pub retx_burst: u32,
    /// First sequence number of every stream.
    pub initial_seq: u32,
    /// Consecutive timeouts without ACK progress before [`GbnEvent::PeerUnresponsive`].
    pub max_backoffs: u32,
    /// Consecutive timeouts (since the last ACK progress, outside a fast-retransmit
    /// recovery) answered by a probe before data is re-sent; 0: never probe.
    pub probes: u32,
}

impl Default for GbnConfig {
    fn default() -> Self {
        GbnConfig {
            window: 128,
            window_bytes: usize::MAX,
            rto_initial_ns: 4_000_000,
            rto_max_ns: 100_000_000,
            ack_threshold: 16,
            ack_bytes: usize::MAX,
            ack_delay_ns: 1_000_000,
            eager_ack: false,
            retx_burst: 64,
            initial_seq: 0,
            max_backoffs: 600,
            probes: 3,
        }
    }
}

/// Classification of an incoming packet's data part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The next in-order data packet: consume it, then call [`Gbn::accept`].
    Deliver,
    /// A pure ACK (already processed).
    AckOnly,
    /// Data already received (a duplicate ACK was queued, rate-limited).
    Duplicate,
    /// Data beyond the next expected packet, discarded (duplicate ACK queued).
    OutOfOrder,
    /// Malformed or impossible packet; ignored.
    Invalid(&'static str),
}

/// Events for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GbnEvent {
    /// `max_backoffs` consecutive timeouts without ACK progress towards `peer`.
    PeerUnresponsive {
        /// The silent peer.
        peer: u32,
    },
}

/// Counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GbnStats {
    /// Data packets transmitted for the first time.
    pub data_sent: u64,
    /// Data packets re-transmitted.
    pub retransmits: u64,
    /// Pure ACK datagrams transmitted (duplicate ACKs included).
    pub pure_acks_sent: u64,
    /// Duplicate ACKs transmitted.
    pub dup_acks_sent: u64,
    /// In-order packets accepted by the caller.
    pub delivered: u64,
    /// Duplicate data packets received.
    pub duplicates: u64,
    /// Out-of-order data packets received (discarded).
    pub out_of_order: u64,
    /// ACKs older than the left edge (ignored).
    pub stale_acks: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Fast retransmits triggered by duplicate ACKs (extension).
    pub fast_retransmits: u64,
    /// Timeouts found spurious: the next ACK covered packets beyond the re-sent left
    /// edge, sent once, so the go-back stopped there (extension, after F-RTO).
    pub spurious_timeouts: u64,
    /// Packets rejected as [`Verdict::Invalid`] (extension).
    pub invalid: u64,
    /// Probes sent: pure ACKs asking for an answer, on a first timeout (extension).
    pub probes: u64,
}

/// Most datagrams [`Gbn::poll_transmit_run`] hands over at once (a segmented UDP send
/// carries at most 64).
pub const RUN_MAX: usize = 64;

const TIMER_RETX: u8 = 0;
const TIMER_ACK: u8 = 1;
/// Timer kinds per peer in the [`TimerTable`].
const TIMER_KINDS: u8 = 2;
/// Flag bits owned by the protocol; the caller's copies are ignored.
const OWN_FLAGS: u8 = flags::SEQ_VALID | flags::ACK_VALID | flags::RETRANSMIT;

struct Entry {
    buf: Vec<u8>,
    base_flags: u8,
    /// The datagram's payload by reference, after `buf` on the wire ([`Gbn::send_tail`]).
    tail: Option<Tail>,
}

impl Entry {
    /// The datagram's length on the wire.
    fn len(&self) -> usize {
        self.buf.len() + self.tail.as_ref().map_or(0, |t| t.len)
    }

    /// The datagram's pieces in wire order (the second empty without a tail).
    fn parts(&self) -> [&[u8]; 2] {
        [&self.buf, self.tail.as_ref().map_or(&[][..], Tail::bytes)]
    }
}

/// Bytes a send window refers to instead of owning them: a message's buffer, from which
/// datagrams take their payloads where they lie. The protocol only reads them; whoever
/// made one keeps the bytes valid and unchanged while any [`Tail`] of it lives (a window
/// drops its tails as their datagrams are acknowledged, so the owner knows the bytes are
/// free again when it holds the last reference).
pub trait Shared: Send + Sync {
    /// The bytes.
    fn bytes(&self) -> &[u8];
}

/// A datagram's payload by reference: `len` bytes at `off` of a [`Shared`] buffer.
#[derive(Clone)]
pub struct Tail {
    src: Arc<dyn Shared>,
    off: usize,
    len: usize,
}

impl Tail {
    /// `len` bytes at `off` of `src`; `None` if that range is not inside it.
    pub fn new(src: Arc<dyn Shared>, off: usize, len: usize) -> Option<Tail> {
        let end = off.checked_add(len)?;
        (end <= src.bytes().len()).then_some(Tail { src, off, len })
    }

    /// The bytes (checked in range at construction).
    pub fn bytes(&self) -> &[u8] {
        &self.src.bytes()[self.off..self.off + self.len]
    }
}

impl std::fmt::Debug for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tail")
            .field("off", &self.off)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

struct Peer {
    // Send side.
    /// Left edge: oldest un-acked sequence number.
    snd_una: u32,
    /// Next sequence number to assign.
    snd_nxt: u32,
    /// First sequence number never transmitted.
    tx_next: u32,
    /// Buffers of `snd_una..snd_nxt`.
    win: VecDeque<Entry>,
    /// Their bytes ([`Entry::len`]).
    snd_bytes: usize,
    /// Pending go-back: `rtx_cursor..rtx_end` still to be re-sent.
    rtx_cursor: u32,
    rtx_end: u32,
    /// Packets a go-back may re-send beyond the left edge before ACKs advance it: 1
    /// after a timeout (doubling with every advance, up to `retx_burst`), `retx_burst`
    /// after a reported gap.
    rtx_limit: u32,
    /// Current timeout: `rto_base`, doubled per timeout since the last ACK progress.
    rto: u64,
    /// SRTT + 4·RTTVAR clamped (RFC 6298); `rto_initial_ns` before the first sample.
    rto_base: u64,
    /// Smoothed round-trip time and its variation (ns); `srtt == 0`: no sample yet.
    srtt: u64,
    rttvar: u64,
    /// The packet being timed: (sequence number, first transmission time).
    rtt_probe: Option<(u32, u64)>,
    backoffs: u32,
    in_recovery: bool,
    recover: u32,
    /// A probe (first timeout since progress) is owed.
    probe_pending: bool,
    /// The caller refused the last packet delivered from this peer (no buffer); cleared
    /// when it accepts one.
    refused: bool,
    /// After a timeout: the left edge it re-sent, until the next ACK progress tells
    /// whether the timeout was spurious.
    frto_edge: Option<u32>,
    unresponsive_reported: bool,
    // Receive side.
    /// Next expected in-order sequence number.
    rcv_nxt: u32,
    rcv_any: bool,
    /// Accepted packets not yet covered by a transmitted ACK.
    ack_debt: u32,
    /// Their bytes.
    ack_debt_bytes: usize,
    /// A (pure) ACK is owed now.
    ack_pending: bool,
    /// A duplicate ACK (always pure) is owed now.
    dup_pending: bool,
    /// The owed duplicate ACK reports a gap ([`flags::GAP`]).
    dup_gap: bool,
    dup_ok: bool,
    last_dup_at: Option<u64>,
    ack_buf: [u8; HEADER_LEN],
    in_ready: bool,
}

impl Peer {
    fn new(cfg: &GbnConfig) -> Peer {
        let s = cfg.initial_seq;
        Peer {
            snd_una: s,
            snd_nxt: s,
            tx_next: s,
            win: VecDeque::new(),
            snd_bytes: 0,
            rtx_cursor: s,
            rtx_end: s,
            rtx_limit: cfg.retx_burst,
            rto: cfg.rto_initial_ns,
            rto_base: cfg.rto_initial_ns,
            srtt: 0,
            rttvar: 0,
            rtt_probe: None,
            backoffs: 0,
            in_recovery: false,
            recover: s,
            probe_pending: false,
            refused: false,
            frto_edge: None,
            unresponsive_reported: false,
            rcv_nxt: s,
            rcv_any: false,
            ack_debt: 0,
            ack_debt_bytes: 0,
            ack_pending: false,
            dup_pending: false,
            dup_gap: false,
            dup_ok: true,
            last_dup_at: None,
            ack_buf: [0; HEADER_LEN],
            in_ready: false,
        }
    }

    /// One round-trip sample (RFC 6298 with α = 1/8, β = 1/4): a valid sample also ends
    /// the back-off.
    fn rtt_sample(&mut self, r: u64, rto_min: u64, rto_max: u64) {
        if self.srtt == 0 {
            self.srtt = r.max(1);
            self.rttvar = r / 2;
        } else {
            let err = self.srtt.abs_diff(r);
            self.rttvar = self.rttvar - self.rttvar / 4 + err / 4;
            self.srtt = self.srtt - self.srtt / 8 + r / 8;
        }
        self.rto_base = self
            .srtt
            .saturating_add(self.rttvar.saturating_mul(4))
            .clamp(rto_min, rto_max);
        self.rto = self.rto_base;
    }

    fn rtx_active(&self) -> bool {
        serial::lt(self.rtx_cursor, self.rtx_end)
    }

    fn rtx_ready(&self) -> bool {
        self.rtx_active() && (serial::diff(self.snd_una, self.rtx_cursor) as u32) < self.rtx_limit
    }

    fn new_ready(&self) -> bool {
        !self.rtx_active() && self.tx_next != self.snd_nxt
    }

    fn has_tx(&self) -> bool {
        self.dup_pending
            || self.ack_pending
            || self.probe_pending
            || self.rtx_ready()
            || self.new_ready()
    }

    fn in_flight(&self) -> bool {
        self.snd_una != self.tx_next
    }
}

enum Item {
    /// A pure ACK; a probe when `true`.
    PureAck(bool),
    Data {
        seq: u32,
        rtx: bool,
    },
}

/// The go-back-n engine of one rank: a reliable stream to every rank of the job.
pub struct Gbn {
    cfg: GbnConfig,
    job_key: u64,
    local_rank: u32,
    peers: Vec<Peer>,
    /// Deadlines per peer: TIMER_RETX, TIMER_ACK.
    timers: TimerTable,
    /// Peers that may have something to transmit (round robin).
    ready: VecDeque<u32>,
    events: VecDeque<GbnEvent>,
    /// The packet last returned as `Deliver`: (peer, seq, ack requested, length).
    pending: Option<(u32, u32, bool, usize)>,
    stats: GbnStats,
}

impl Gbn {
    /// A go-back-n engine for `local_rank` in a job of `peers` ranks.
    pub fn new(config: GbnConfig, job_key: u64, local_rank: u32, peers: u32) -> Self {
        let mut cfg = config;
        cfg.window = cfg.window.clamp(1, 1 << 30);
        cfg.retx_burst = cfg.retx_burst.max(1);
        cfg.ack_threshold = cfg.ack_threshold.max(1);
        cfg.window_bytes = cfg.window_bytes.max(1);
        // A receiver owes an ACK no later than a window of its own kind is full.
        cfg.ack_bytes = cfg.ack_bytes.clamp(1, cfg.window_bytes);
        cfg.rto_initial_ns = cfg.rto_initial_ns.max(1);
        cfg.rto_max_ns = cfg.rto_max_ns.max(cfg.rto_initial_ns);
        cfg.max_backoffs = cfg.max_backoffs.max(1);
        let timers = TimerTable::new(peers, TIMER_KINDS);
        let peers = (0..peers).map(|_| Peer::new(&cfg)).collect();
        Gbn {
            cfg,
            job_key,
            local_rank,
            peers,
            timers,
            ready: VecDeque::new(),
            events: VecDeque::new(),
            pending: None,
            stats: GbnStats::default(),
        }
    }

    /// Grows the job to `peers` ranks (ranks that joined after start-up start with
    /// fresh state, as every peer does). Never shrinks.
    pub fn add_peers(&mut self, peers: u32) {
        while (self.peers.len() as u32) < peers {
            self.peers.push(Peer::new(&self.cfg));
        }
        self.timers.grow(peers);
    }

    /// The configuration in use (after clamping).
    pub fn config(&self) -> &GbnConfig {
        &self.cfg
    }

    /// Free slots in `peer`'s send window (0 for an unknown peer, and while its
    /// un-acked bytes reach [`GbnConfig::window_bytes`]).
    pub fn send_space(&self, peer: u32) -> u32 {
        match self.peers.get(peer as usize) {
            Some(p) if p.snd_bytes >= self.cfg.window_bytes && !p.win.is_empty() => 0,
            Some(p) => self
                .cfg
                .window
                .saturating_sub(p.snd_nxt.wrapping_sub(p.snd_una)),
            None => 0,
        }
    }

    /// Queues a datagram (header emitted by the caller with [`Kind::GbnData`]) for
    /// reliable delivery to `peer`: assigns the next sequence number and keeps it in the
    /// send window until acknowledged. The datagram comes back unchanged in `Err` if the
    /// window is full, `peer` is out of range or it is shorter than a header.
    pub fn send(&mut self, now: u64, peer: u32, datagram: Vec<u8>) -> Result<(), Vec<u8>> {
        self.push(now, peer, datagram, None)
            .map_err(|(head, _)| head)
    }

    /// [`send`](Self::send) of the datagram `head` followed by `tail`, whose bytes stay
    /// where they are (the window keeps the reference until the datagram is
    /// acknowledged; every transmission reads them again). Both come back unchanged in
    /// `Err` when `send` would refuse `head`.
    pub fn send_tail(
        &mut self,
        now: u64,
        peer: u32,
        head: Vec<u8>,
        tail: Tail,
    ) -> Result<(), (Vec<u8>, Tail)> {
        self.push(now, peer, head, Some(tail))
            .map_err(|(head, tail)| (head, tail.expect("the tail given")))
    }

    /// Copies the bytes every window entry refers to in `src` into the entry itself, so
    /// that `src` is no longer read (its owner gives it up before the datagrams are
    /// acknowledged). Returns how many entries were changed.
    pub fn own_tails(&mut self, src: &dyn Shared) -> usize {
        let want = src as *const dyn Shared as *const ();
        self.own_tails_where(|t| Arc::as_ptr(&t.src) as *const () == want)
    }

    /// [`own_tails`](Self::own_tails) of every buffer: no window refers to anything
    /// afterwards (after an error, when owners may give up any buffer).
    pub fn own_all_tails(&mut self) -> usize {
        self.own_tails_where(|_| true)
    }

    fn own_tails_where(&mut self, pick: impl Fn(&Tail) -> bool) -> usize {
        let mut n = 0;
        for p in &mut self.peers {
            for e in &mut p.win {
                if e.tail.as_ref().is_some_and(&pick) {
                    if let Some(t) = e.tail.take() {
                        e.buf.extend_from_slice(t.bytes());
                        n += 1;
                    }
                }
            }
        }
        n
    }

    fn push(
        &mut self,
        now: u64,
        peer: u32,
        datagram: Vec<u8>,
        tail: Option<Tail>,
    ) -> Result<(), (Vec<u8>, Option<Tail>)> {
        let _ = now;
        if datagram.len() < HEADER_LEN || self.send_space(peer) == 0 {
            return Err((datagram, tail));
        }
        let mut buf = datagram;
        let p = &mut self.peers[peer as usize];
        let seq = p.snd_nxt;
        let base_flags = buf[phalanx_wire::OFF_FLAGS] & !OWN_FLAGS;
        // Cannot fail: the length was checked above.
        let _ = stamp::seq(&mut buf, seq);
        let entry = Entry {
            buf,
            base_flags,
            tail,
        };
        p.snd_bytes += entry.len();
        p.win.push_back(entry);
        p.snd_nxt = seq.wrapping_add(1);
        self.schedule(peer);
        Ok(())
    }

    /// Processes a validated, job-key-checked datagram: its ACK field first, then its data.
    #[must_use]
    pub fn handle_packet(&mut self, now: u64, pkt: &Packet<'_>) -> Verdict {
        // A previously delivered but not accepted packet counts as not received: the
        // receiver refused it (no buffer), which is no loss to report.
        if let Some((peer, _, _, _)) = self.pending.take() {
            if let Some(p) = self.peers.get_mut(peer as usize) {
                p.refused = true;
            }
        }
        let v = self.handle_inner(now, pkt);
        if matches!(v, Verdict::Invalid(_)) {
            self.stats.invalid += 1;
        }
        v
    }

    fn handle_inner(&mut self, now: u64, pkt: &Packet<'_>) -> Verdict {
        let src = pkt.src();
        if src as usize >= self.peers.len() {
            return Verdict::Invalid("source rank out of range");
        }
        let fl = pkt.flags();
        let kind = pkt.kind();
        match kind {
            Kind::GbnData if fl & flags::SEQ_VALID == 0 => {
                return Verdict::Invalid("data packet without SEQ_VALID")
            }
            Kind::GbnAck if fl & flags::ACK_VALID == 0 => {
                return Verdict::Invalid("pure ACK without ACK_VALID")
            }
            _ => {}
        }
        if fl & flags::ACK_VALID != 0 {
            let a = pkt.ack();
            let p = &self.peers[src as usize];
            let last_acked = p.snd_una.wrapping_sub(1);
            let highest = p.tx_next.wrapping_sub(1);
            if serial::lt(highest, a) {
                return Verdict::Invalid("ACK for a sequence number never sent");
            }
            if serial::lt(a, last_acked) {
                self.stats.stale_acks += 1;
            } else if a == last_acked {
                if kind == Kind::GbnAck && fl & flags::GAP != 0 && p.in_flight() {
                    self.dup_ack_received(now, src);
                }
            } else {
                self.ack_progress(now, src, a.wrapping_add(1));
                // A GAP that also advances reports a loss beyond the new left edge
                // (NewReno's partial ACK): go back from there at once.
                let p = &self.peers[src as usize];
                if kind == Kind::GbnAck && fl & flags::GAP != 0 && p.in_flight() {
                    self.dup_ack_received(now, src);
                }
            }
        }
        if kind == Kind::GbnAck {
            if fl & flags::TX_HINT != 0 {
                let asked = fl & flags::ACK_REQUEST != 0;
                self.tx_hint(now, src, pkt.seq(), asked, fl & flags::GAP != 0);
            }
            self.schedule(src);
            return Verdict::AckOnly;
        }
        let seq = pkt.seq();
        let req = fl & flags::ACK_REQUEST != 0;
        let rcv_nxt = self.peers[src as usize].rcv_nxt;
        let v = if seq == rcv_nxt {
            self.pending = Some((src, seq, req, pkt.as_bytes().len()));
            Verdict::Deliver
        } else if serial::lt(seq, rcv_nxt) {
            self.stats.duplicates += 1;
            self.queue_dup_ack(now, src, req, false);
            Verdict::Duplicate
        } else {
            self.stats.out_of_order += 1;
            self.queue_dup_ack(now, src, req, true);
            Verdict::OutOfOrder
        };
        self.schedule(src);
        v
    }

    /// A pure ACK from `peer` says it has transmitted up to `last`: a gap if this side
    /// has not received that far (answered at once when `asked`, else rate-limited),
    /// else an ACK of everything when `asked` (a probe). A gap behind a packet this side
    /// refused (no buffer) is no loss: it gets a plain ACK, so the sender backs off
    /// instead of bursting at a full receiver. A hint on a GAP ACK (the peer's own loss
    /// report) is answered with a GAP only once per in-order advance, so two peers with
    /// gaps both ways do not keep each other sending.
    fn tx_hint(&mut self, now: u64, peer: u32, last: u32, asked: bool, on_gap: bool) {
        let p = &self.peers[peer as usize];
        let behind = serial::lt(p.rcv_nxt.wrapping_sub(1), last);
        if behind && !p.refused && (asked || !on_gap || p.dup_ok) {
            self.queue_dup_ack(now, peer, asked, true);
        } else if asked {
            let p = &mut self.peers[peer as usize];
            p.ack_pending = true;
            self.timers.set(peer, TIMER_ACK, None);
        }
    }

    /// ACK progress from `peer`: the new left edge is `una`.
    fn ack_progress(&mut self, now: u64, peer: u32, una: u32) {
        let (rto_min, rto_max) = (self.cfg.rto_initial_ns, self.cfg.rto_max_ns);
        let burst = self.cfg.retx_burst;
        let p = &mut self.peers[peer as usize];
        p.probe_pending = false;
        if let Some((seq, sent)) = p.rtt_probe {
            if serial::lt(seq, una) {
                p.rtt_probe = None;
                p.rtt_sample(now.saturating_sub(sent), rto_min, rto_max);
            }
        }
        // After a timeout (which re-sent only the left edge), an ACK beyond the left
        // edge covers packets sent once: they arrived, so the timeout was spurious (a
        // slow receiver) and the go-back stops here instead of re-sending them.
        if let Some(edge) = p.frto_edge.take() {
            if serial::lt(edge.wrapping_add(1), una) {
                self.stats.spurious_timeouts += 1;
                p.in_recovery = false;
                p.rtx_cursor = una;
                p.rtx_end = una;
            }
        }
        let n = una.wrapping_sub(p.snd_una) as usize;
        let freed: usize = p.win.drain(..n.min(p.win.len())).map(|e| e.len()).sum();
        p.snd_bytes -= freed;
        p.snd_una = una;
        if serial::lt(p.rtx_cursor, una) {
            p.rtx_cursor = una;
        }
        if !p.rtx_active() {
            p.rtx_end = p.rtx_cursor;
        }
        p.rtx_limit = p.rtx_limit.saturating_mul(2).min(burst);
        if p.in_recovery && serial::le(p.recover, una.wrapping_sub(1)) {
            p.in_recovery = false;
        }
        p.rto = p.rto_base;
        p.backoffs = 0;
        p.unresponsive_reported = false;
        let at = if p.in_flight() {
            Some(now.saturating_add(p.rto))
        } else {
            None
        };
        self.timers.set(peer, TIMER_RETX, at);
    }

    fn dup_ack_received(&mut self, _now: u64, peer: u32) {
        let p = &mut self.peers[peer as usize];
        if p.in_recovery {
            return;
        }
        self.stats.fast_retransmits += 1;
        p.rtx_limit = self.cfg.retx_burst;
        // A reported gap is a loss: no spurious-timeout test for this go-back.
        p.frto_edge = None;
        Self::go_back(p);
    }

    fn go_back(p: &mut Peer) {
        // Karn: what is re-sent cannot be timed.
        p.rtt_probe = None;
        p.probe_pending = false;
        p.in_recovery = true;
        p.recover = p.tx_next.wrapping_sub(1);
        p.rtx_cursor = p.snd_una;
        p.rtx_end = p.tx_next;
    }

    fn queue_dup_ack(&mut self, now: u64, peer: u32, force: bool, gap: bool) {
        let quarter = self.cfg.rto_initial_ns / 4;
        let p = &mut self.peers[peer as usize];
        let timed_ok = !matches!(p.last_dup_at, Some(t) if now < t.saturating_add(quarter));
        if force || p.dup_ok || timed_ok {
            p.dup_pending = true;
            p.dup_gap |= gap;
            p.dup_ok = false;
            p.last_dup_at = Some(now);
        }
    }

    /// The caller consumed the packet from `peer` that [`Gbn::handle_packet`] just
    /// returned as [`Verdict::Deliver`]: advance the receive edge and count it for the
    /// lazy ACK. Without a matching delivered packet this does nothing.
    pub fn accept(&mut self, now: u64, peer: u32) {
        let Some((p_id, seq, req, len)) = self.pending else {
            return;
        };
        if p_id != peer {
            return;
        }
        self.pending = None;
        let cfg = &self.cfg;
        let p = &mut self.peers[peer as usize];
        if seq != p.rcv_nxt {
            return;
        }
        p.rcv_nxt = seq.wrapping_add(1);
        p.rcv_any = true;
        p.refused = false;
        p.dup_ok = true;
        p.ack_debt = p.ack_debt.saturating_add(1);
        p.ack_debt_bytes = p.ack_debt_bytes.saturating_add(len);
        self.stats.delivered += 1;
        if cfg.eager_ack
            || req
            || p.ack_debt >= cfg.ack_threshold
            || p.ack_debt_bytes >= cfg.ack_bytes
        {
            p.ack_pending = true;
            self.timers.set(peer, TIMER_ACK, None);
        } else if self.timers.get(peer, TIMER_ACK).is_none() {
            let at = Some(now.saturating_add(cfg.ack_delay_ns));
            self.timers.set(peer, TIMER_ACK, at);
        }
        self.schedule(peer);
    }

    fn schedule(&mut self, peer: u32) {
        if let Some(p) = self.peers.get_mut(peer as usize) {
            if !p.in_ready && p.has_tx() {
                p.in_ready = true;
                self.ready.push_back(peer);
            }
        }
    }

    /// The next datagram for the wire and its destination rank. ACK fields are stamped
    /// with the latest cumulative ACK now (piggy-back), which clears the lazy-ACK debt.
    /// A datagram sent with a [`Tail`] comes out as one copy of both pieces (the
    /// simulator's and the tests' path; [`poll_transmit_run`](Self::poll_transmit_run)
    /// hands out the pieces).
    #[must_use]
    pub fn poll_transmit(&mut self, now: u64) -> Option<(u32, Cow<'_, [u8]>)> {
        let (peer, idx) = self.prepare_transmit(now)?;
        let p = &self.peers[peer as usize];
        match idx {
            None => Some((peer, Cow::Borrowed(&p.ack_buf[..]))),
            // The cursors always lie inside the window, so `get` succeeds.
            Some(i) => p.win.get(i).map(|e| match e.parts() {
                [head, []] => (peer, Cow::Borrowed(head)),
                [head, tail] => (peer, Cow::Owned([head, tail].concat())),
            }),
        }
    }

    /// Like [`poll_transmit`](Self::poll_transmit), for up to `max` (at most
    /// [`RUN_MAX`]) datagrams to one peer in a row, what one system call may carry:
    /// `send(peer, run)` gets them in wire order, exactly the datagrams `poll_transmit`
    /// would have returned one by one, each as its pieces (a header and the payload of a
    /// [`Tail`], the second empty without one). A run ends at a pure ACK (its buffer is
    /// reused by the next one). False when nothing is due.
    pub fn poll_transmit_run(
        &mut self,
        now: u64,
        max: usize,
        send: impl FnOnce(u32, &[[&[u8]; 2]]),
    ) -> bool {
        let Some((peer, first)) = self.prepare_transmit(now) else {
            return false;
        };
        let max = max.clamp(1, RUN_MAX);
        let mut idxs = [None; RUN_MAX];
        idxs[0] = first;
        let mut n = 1;
        while n < max
            && idxs[n - 1].is_some()
            && self.ready.front() == Some(&peer)
            && self.peers[peer as usize].has_tx()
        {
            // The front peer has something due: `prepare_transmit` takes it.
            match self.prepare_transmit(now) {
                Some((p, idx)) if p == peer => {
                    idxs[n] = idx;
                    n += 1;
                }
                _ => unreachable!("the front of the ready queue has a datagram due"),
            }
        }
        let p = &self.peers[peer as usize];
        let mut run: [[&[u8]; 2]; RUN_MAX] = [[&[], &[]]; RUN_MAX];
        for (slot, idx) in run.iter_mut().zip(&idxs[..n]) {
            *slot = match idx {
                None => [&p.ack_buf[..], &[]],
                // The cursors always lie inside the window, so `get` succeeds.
                Some(i) => p.win.get(*i).map_or([&[][..], &[]], Entry::parts),
            };
        }
        send(peer, &run[..n]);
        true
    }

    /// Picks the next item, updates the state and stamps it: (peer, window index or
    /// `None` for the peer's ACK buffer).
    fn prepare_transmit(&mut self, now: u64) -> Option<(u32, Option<usize>)> {
        let rto0 = self.cfg.rto_initial_ns;
        while let Some(peer) = self.ready.pop_front() {
            let p = &mut self.peers[peer as usize];
            p.in_ready = false;
            let item = if p.dup_pending {
                Item::PureAck(false)
            } else if p.probe_pending {
                Item::PureAck(true)
            } else if p.rtx_ready() {
                Item::Data {
                    seq: p.rtx_cursor,
                    rtx: true,
                }
            } else if p.new_ready() {
                Item::Data {
                    seq: p.tx_next,
                    rtx: false,
                }
            } else if p.ack_pending {
                Item::PureAck(false)
            } else {
                continue;
            };
            let ack = p.rcv_nxt.wrapping_sub(1);
            let was_dup = p.dup_pending;
            let gap = p.dup_pending && p.dup_gap;
            let acked = match item {
                Item::PureAck(_) => true,
                Item::Data { .. } => p.rcv_any,
            };
            if acked {
                p.ack_pending = false;
                p.dup_pending = false;
                p.dup_gap = false;
                p.ack_debt = 0;
                p.ack_debt_bytes = 0;
                self.timers.set(peer, TIMER_ACK, None);
            }
            let idx = match item {
                Item::PureAck(probe) => {
                    if was_dup {
                        self.stats.dup_acks_sent += 1;
                    }
                    if probe {
                        p.probe_pending = false;
                        self.stats.probes += 1;
                    }
                    self.stats.pure_acks_sent += 1;
                    let mut h = Header::new(Kind::GbnAck, self.job_key, self.local_rank);
                    h.flags = flags::ACK_VALID | flags::TX_HINT;
                    if gap {
                        h.flags |= flags::GAP;
                    }
                    if probe {
                        h.flags |= flags::ACK_REQUEST;
                    }
                    h.ack = ack;
                    h.seq = p.tx_next.wrapping_sub(1);
                    let _ = h.emit(&mut p.ack_buf);
                    None
                }
                Item::Data { seq, rtx } => {
                    let idx = seq.wrapping_sub(p.snd_una) as usize;
                    let mut fl = flags::SEQ_VALID;
                    if p.rcv_any {
                        fl |= flags::ACK_VALID;
                    }
                    if rtx {
                        fl |= flags::RETRANSMIT;
                        let next = seq.wrapping_add(1);
                        let last_of_burst = serial::diff(p.snd_una, next) as u32 >= p.rtx_limit
                            || next == p.rtx_end;
                        if last_of_burst {
                            fl |= flags::ACK_REQUEST;
                        }
                        p.rtx_cursor = next;
                        if !p.rtx_active() {
                            p.rtx_end = p.rtx_cursor;
                        }
                        self.stats.retransmits += 1;
                    } else {
                        p.tx_next = seq.wrapping_add(1);
                        self.stats.data_sent += 1;
                        if p.rtt_probe.is_none() {
                            p.rtt_probe = Some((seq, now));
                        }
                    }
                    if self.timers.get(peer, TIMER_RETX).is_none() {
                        let at = Some(now.saturating_add(p.rto.max(rto0)));
                        self.timers.set(peer, TIMER_RETX, at);
                    }
                    if let Some(e) = p.win.get_mut(idx) {
                        let _ = stamp::ack(&mut e.buf, ack);
                        let _ = stamp::flags(&mut e.buf, e.base_flags | fl);
                    }
                    Some(idx)
                }
            };
            if p.has_tx() {
                p.in_ready = true;
                self.ready.push_back(peer);
            }
            return Some((peer, idx));
        }
        None
    }

    /// The earliest deadline (retransmission or delayed ACK), if any. O(1).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers.first()
    }

    /// Fires every deadline that is due at `now`, in (deadline, peer, kind) order.
    pub fn handle_timeout(&mut self, now: u64) {
        while let Some((peer, kind, _)) = self.timers.pop_due(now) {
            let cfg = &self.cfg;
            let p = &mut self.peers[peer as usize];
            if kind == TIMER_ACK {
                if p.ack_debt > 0 {
                    p.ack_pending = true;
                }
            } else {
                if !p.in_flight() {
                    continue;
                }
                self.stats.timeouts += 1;
                let probe = p.backoffs < cfg.probes && !p.in_recovery;
                p.backoffs = p.backoffs.saturating_add(1);
                if p.backoffs >= cfg.max_backoffs && !p.unresponsive_reported {
                    p.unresponsive_reported = true;
                    self.events.push_back(GbnEvent::PeerUnresponsive { peer });
                }
                p.rto = p.rto.saturating_mul(2).min(cfg.rto_max_ns);
                if probe {
                    // Probe: the answer tells a slow receiver (ACK) from a loss (GAP).
                    // The ACK it draws times the probe, not the path: no sample.
                    p.probe_pending = true;
                    p.rtt_probe = None;
                } else {
                    // The receiver may only be slow to answer: re-send the left edge
                    // (asking for an ACK) and let the answer release the rest.
                    p.rtx_limit = 1;
                    Self::go_back(p);
                    p.frto_edge = Some(p.snd_una);
                }
                let at = Some(now.saturating_add(p.rto));
                self.timers.set(peer, TIMER_RETX, at);
            }
            self.schedule(peer);
        }
    }

    /// Moves every deadline `by` nanoseconds later: after the process was stopped for
    /// that long (gang scheduling), so that the stopped time counts for no
    /// retransmission and no peer timeout.
    pub fn postpone_timers(&mut self, by: u64) {
        self.timers.postpone(by);
        // A round trip that spans the stop is no sample.
        for p in &mut self.peers {
            p.rtt_probe = None;
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<GbnEvent> {
        self.events.pop_front()
    }

    /// Queues a pure ACK to every peer that has un-acked received data (Finalize).
    pub fn flush_acks(&mut self, now: u64) {
        let _ = now;
        for i in 0..self.peers.len() {
            let p = &mut self.peers[i];
            if p.ack_debt > 0 {
                p.ack_pending = true;
                self.timers.set(i as u32, TIMER_ACK, None);
                self.schedule(i as u32);
            }
        }
    }

    /// Nothing un-acked in any send window.
    pub fn all_acked(&self) -> bool {
        self.peers.iter().all(|p| p.snd_una == p.snd_nxt)
    }

    /// Packets sent to `peer` and not yet acknowledged (0 for an unknown peer).
    pub fn unacked(&self, peer: u32) -> u32 {
        self.peers
            .get(peer as usize)
            .map_or(0, |p| p.snd_nxt.wrapping_sub(p.snd_una))
    }

    /// Peers with un-acked packets in their send window.
    pub fn unacked_peers(&self) -> Vec<u32> {
        (0..self.peers.len() as u32)
            .filter(|&i| {
                let p = &self.peers[i as usize];
                p.snd_una != p.snd_nxt
            })
            .collect()
    }

    /// Some peer has received data not yet covered by a transmitted ACK.
    pub fn owes_acks(&self) -> bool {
        self.peers
            .iter()
            .any(|p| p.ack_debt > 0 || p.ack_pending || p.dup_pending)
    }

    /// Counters.
    pub fn stats(&self) -> &GbnStats {
        &self.stats
    }
}

#[cfg(test)]
#[path = "gbn_tests.rs"]
mod tests;
