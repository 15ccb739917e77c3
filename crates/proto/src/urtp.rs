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
//! * **Safety net.** Pure ACKs can be lost and nobody REQs the last packet of a finished
//!   job, so a sender whose peer has not acked for [`UrtpConfig::sender_rto_ns`] re-sends
//!   the oldest un-acked packet to it point-to-point with `ACK_REQUEST` (back-off
//!   doubling, clamped). After [`UrtpConfig::max_backoffs`] consecutive REQs/re-sends to
//!   a peer without any valid packet from it, [`UrtpEvent::PeerUnresponsive`] is
//!   reported once (retrying continues).
//! * **Robustness.** Nothing panics on network input. A packet from an out-of-range or
//!   the local rank, a foreign job key, a unicast data packet without `SEQ_VALID`, a pure
//!   ACK without `ACK_VALID`, an ACK for a counter never transmitted or a malformed
//!   multicast extension is [`UrtpVerdict::Invalid`] and changes no state.
//! * **Bounds.** Send side: at most W stored packets per peer (one shared copy per
//!   multicast packet); receive side: at most (p−1)·W + c buffered packets; control
//!   queue: one REQ, one ACK and [`RESEND_QUEUE_MAX`] re-sends per peer; timers: three
//!   per peer, in an ordered set ([`Urtp::poll_timeout`] is O(1)).

use std::collections::{BTreeSet, VecDeque};

use phalanx_wire::{flags, mcast, stamp, Header, Kind, Packet, HEADER_LEN};

#[path = "urtp_types.rs"]
mod types;
pub use types::*;

/// Default datagram limit (the largest UDP/IPv4 payload).
pub const DEFAULT_MAX_DATAGRAM: usize = 65_507;
/// Re-sends queued per peer at most (further REQs are dropped; they will be repeated).
pub const RESEND_QUEUE_MAX: usize = 8;

const TIMER_RTO: u8 = 0;
const TIMER_ACK: u8 = 1;
const TIMER_REQ: u8 = 2;
/// Flag bits owned by URTP; the caller's copies are ignored.
const OWN_FLAGS: u8 =
    flags::SEQ_VALID | flags::ACK_VALID | flags::RETRANSMIT | flags::ACK_REQUEST | flags::MULTICAST;

/// One sent packet, shared by all its targets' windows.
struct Stored {
    /// The datagram as first transmitted.
    bytes: Vec<u8>,
    /// Its header (the caller's message-layer fields, for re-encoding).
    header: Header,
    payload_off: usize,
    targets: Targets,
    multicast: bool,
    /// Targets that have not acknowledged it yet.
    remaining: u32,
}

/// A send-window entry of one peer.
struct SentRef {
    slot: u32,
    /// Last (re)transmission to this peer.
    sent_at: Option<u64>,
}

struct Want {
    counter: u32,
    interval: u64,
}

struct Peer {
    // Send side (local → peer).
    /// Oldest un-acked counter.
    snd_una: u32,
    /// Next counter to assign.
    snd_nxt: u32,
    /// First counter not transmitted yet.
    tx_next: u32,
    any_sent: bool,
    /// Entries for `snd_una..snd_nxt`.
    win: VecDeque<SentRef>,
    rto: u64,
    rto_at: Option<u64>,
    /// Counters to re-send point-to-point (with ACK_REQUEST?).
    resend: VecDeque<(u32, bool)>,
    // Receive side (peer → local).
    /// Next counter to consume.
    rcv_base: u32,
    /// Buffered packets for `rcv_base..`, unicast form; never ends in `None`.
    slots: VecDeque<Option<Vec<u8>>>,
    ack_debt: u32,
    ack_at: Option<u64>,
    ack_pending: bool,
    want: Option<Want>,
    req_at: Option<u64>,
    req_pending: Option<u32>,
    last_req: Option<(u32, u64)>,
    // Liveness.
    silent: u32,
    reported: bool,
    in_ready: bool,
}

impl Peer {
    fn new(cfg: &UrtpConfig) -> Peer {
        let s = cfg.initial_seq;
        Peer {
            snd_una: s,
            snd_nxt: s,
            tx_next: s,
            any_sent: false,
            win: VecDeque::new(),
            rto: cfg.sender_rto_ns,
            rto_at: None,
            resend: VecDeque::new(),
            rcv_base: s,
            slots: VecDeque::new(),
            ack_debt: 0,
            ack_at: None,
            ack_pending: false,
            want: None,
            req_at: None,
            req_pending: None,
            last_req: None,
            silent: 0,
            reported: false,
            in_ready: false,
        }
    }

    fn has_ctrl(&self) -> bool {
        self.req_pending.is_some() || !self.resend.is_empty() || self.ack_pending
    }

    fn head_ready(&self) -> bool {
        matches!(self.slots.front(), Some(Some(_)))
    }

    fn in_flight(&self) -> u32 {
        self.tx_next.wrapping_sub(self.snd_una)
    }

    /// Validates a cumulative ACK `a` from this peer: `Some(n)` packets newly acked
    /// (0 for a stale or repeated ACK), `None` if it acks a counter never transmitted.
    fn ack_progress_of(&self, a: u32) -> Option<u32> {
        let n = a.wrapping_add(1).wrapping_sub(self.snd_una);
        if n <= self.in_flight() {
            Some(n)
        } else if (n as i32) < 0 {
            Some(0)
        } else {
            None
        }
    }

    fn clear_ack_debt(&mut self, timers: &mut BTreeSet<(u64, u32, u8)>, peer: u32) {
        self.ack_debt = 0;
        self.ack_pending = false;
        set_timer(timers, &mut self.ack_at, peer, TIMER_ACK, None);
    }
}

fn set_timer(
    timers: &mut BTreeSet<(u64, u32, u8)>,
    slot: &mut Option<u64>,
    peer: u32,
    kind: u8,
    at: Option<u64>,
) {
    if let Some(old) = slot.take() {
        timers.remove(&(old, peer, kind));
    }
    if let Some(t) = at {
        timers.insert((t, peer, kind));
    }
    *slot = at;
}

/// Where the datagram prepared by `prepare_transmit` lives.
enum Out {
    Scratch(u32),
    Slot(u32),
}

/// The URTP engine of one rank: a stream to and from every other rank of the job.
pub struct Urtp {
    cfg: UrtpConfig,
    job_key: u64,
    local: u32,
    size: u32,
    max_datagram: usize,
    peers: Vec<Peer>,
    store: Vec<Option<Stored>>,
    free: Vec<u32>,
    /// Stored packets not transmitted yet, in `send` order.
    data_q: VecDeque<u32>,
    /// Peers with control work (round robin).
    ready: VecDeque<u32>,
    /// (deadline, peer, TIMER_*).
    timers: BTreeSet<(u64, u32, u8)>,
    events: VecDeque<UrtpEvent>,
    rx_buffered: usize,
    rx_cap: usize,
    tx_buf: Vec<u8>,
    tx_targets: Targets,
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
            store: Vec::new(),
            free: Vec::new(),
            data_q: VecDeque::new(),
            ready: VecDeque::new(),
            timers: BTreeSet::new(),
            events: VecDeque::new(),
            rx_buffered: 0,
            rx_cap,
            tx_buf: Vec::new(),
            tx_targets: Targets::new(),
            stats: UrtpStats::default(),
        }
    }

    /// The configuration in use (after clamping).
    pub fn config(&self) -> &UrtpConfig {
        &self.cfg
    }

    /// Sets the largest datagram [`Urtp::send`] may produce (the transport's limit).
    pub fn set_max_datagram(&mut self, max: usize) {
        self.max_datagram = max;
    }

    /// The datagram limit in use ([`DEFAULT_MAX_DATAGRAM`] unless set).
    pub fn max_datagram(&self) -> usize {
        self.max_datagram
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

    /// The minimum free send-window space over `targets`; 0 if `targets` is empty or
    /// contains the local rank or a rank out of range (callers never target themselves).
    pub fn send_space(&self, targets: &Targets) -> u32 {
        let mut space = None::<u32>;
        for r in targets.iter() {
            if r == self.local {
                return 0;
            }
            let Some(p) = self.peers.get(r as usize) else {
                return 0;
            };
            let free = self
                .cfg
                .window
                .saturating_sub(p.snd_nxt.wrapping_sub(p.snd_una));
            space = Some(space.map_or(free, |s| s.min(free)));
        }
        space.unwrap_or(0)
    }

    /// Queues one packet to `targets` (see the module docs). Nothing is queued on error.
    pub fn send(
        &mut self,
        now: u64,
        targets: &Targets,
        header: &Header,
        payload: &[u8],
    ) -> Result<(), UrtpSendError> {
        self.send_with_prefix(now, targets, header, &[], payload)
    }

    /// As [`Urtp::send`], with the payload given as `prefix` followed by `payload` (saves
    /// the caller a copy to join them).
    pub fn send_with_prefix(
        &mut self,
        now: u64,
        targets: &Targets,
        header: &Header,
        prefix: &[u8],
        payload: &[u8],
    ) -> Result<(), UrtpSendError> {
        let _ = now;
        let n = targets.len();
        if n == 0 {
            return Err(UrtpSendError::NoTargets);
        }
        for r in targets.iter() {
            if r >= self.size || r == self.local {
                return Err(UrtpSendError::BadTarget { rank: r });
            }
            let p = &self.peers[r as usize];
            if p.snd_nxt.wrapping_sub(p.snd_una) >= self.cfg.window {
                return Err(UrtpSendError::WindowFull { peer: r });
            }
        }
        let multicast = n > 1;
        let ext = if multicast {
            mcast::ext_len(self.size, n)
        } else {
            0
        };
        let len = HEADER_LEN + ext + prefix.len() + payload.len();
        if len > self.max_datagram || ext > u16::MAX as usize {
            return Err(UrtpSendError::TooLarge {
                len,
                max: self.max_datagram,
            });
        }
        let mut h = *header;
        h.kind = Kind::UrtpData;
        h.flags = (header.flags & !OWN_FLAGS)
            | if multicast {
                flags::MULTICAST
            } else {
                flags::SEQ_VALID
            };
        h.ext_len = ext as u16;
        h.job_key = self.job_key;
        h.src = self.local;
        h.ack = 0;
        h.seq = match targets.iter().next() {
            Some(r) if !multicast => self.peers[r as usize].snd_nxt,
            _ => 0,
        };
        // Built by appending, so the payload is written once.
        let mut bytes = Vec::with_capacity(len);
        bytes.resize(HEADER_LEN + ext, 0);
        // `bytes` is at least HEADER_LEN long.
        let _ = h.emit(&mut bytes);
        if multicast {
            let peers = &self.peers;
            let entries = targets.iter().map(|r| (r, peers[r as usize].snd_nxt));
            // Cannot fail: targets are valid, increasing and the area has ext_len bytes.
            let _ = mcast::emit(&mut bytes[HEADER_LEN..HEADER_LEN + ext], self.size, entries);
        }
        bytes.extend_from_slice(prefix);
        bytes.extend_from_slice(payload);
        let stored = Stored {
            bytes,
            header: h,
            payload_off: HEADER_LEN + ext,
            targets: targets.clone(),
            multicast,
            remaining: n as u32,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.store[s as usize] = Some(stored);
                s
            }
            None => {
                self.store.push(Some(stored));
                (self.store.len() - 1) as u32
            }
        };
        for r in targets.iter() {
            let p = &mut self.peers[r as usize];
            p.win.push_back(SentRef {
                slot,
                sent_at: None,
            });
            p.snd_nxt = p.snd_nxt.wrapping_add(1);
        }
        self.data_q.push_back(slot);
        Ok(())
    }

    /// Processes a validated, job-key-checked URTP datagram (see the module docs).
    #[must_use]
    pub fn handle_packet(&mut self, now: u64, pkt: &Packet<'_>) -> UrtpVerdict {
        let v = self.handle_inner(now, pkt);
        if matches!(v, UrtpVerdict::Invalid(_)) {
            self.stats.invalid += 1;
        }
        v
    }

    fn handle_inner(&mut self, now: u64, pkt: &Packet<'_>) -> UrtpVerdict {
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
                UrtpVerdict::Control
            }
            Kind::UrtpReq => {
                self.answered(src);
                self.handle_req(now, src, pkt.seq());
                UrtpVerdict::Control
            }
            Kind::UrtpData => self.handle_data(now, src, pkt),
            _ => UrtpVerdict::Invalid("not a URTP packet"),
        }
    }

    fn handle_data(&mut self, now: u64, src: u32, pkt: &Packet<'_>) -> UrtpVerdict {
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
        let mut buf = Vec::with_capacity(HEADER_LEN + payload.len());
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
            set_timer(&mut self.timers, &mut p.req_at, src, TIMER_REQ, None);
        }
        UrtpVerdict::Buffered {
            ready: self.peers[src as usize].head_ready(),
        }
    }

    /// A valid packet from `peer`: it is alive.
    fn answered(&mut self, peer: u32) {
        let p = &mut self.peers[peer as usize];
        p.silent = 0;
        p.reported = false;
    }

    /// One more unanswered REQ / re-send to `peer`.
    fn unanswered(&mut self, peer: u32) {
        let p = &mut self.peers[peer as usize];
        p.silent = p.silent.saturating_add(1);
        if p.silent >= self.cfg.max_backoffs && !p.reported {
            p.reported = true;
            self.events.push_back(UrtpEvent::PeerUnresponsive { peer });
        }
    }

    /// `peer` acknowledged `n` more packets (its left edge moves by `n`).
    fn ack_progress(&mut self, now: u64, peer: u32, n: u32) {
        let rto0 = self.cfg.sender_rto_ns;
        let p = &mut self.peers[peer as usize];
        for _ in 0..n {
            let Some(e) = p.win.pop_front() else {
                break;
            };
            let slot = e.slot as usize;
            if let Some(s) = self.store.get_mut(slot).and_then(|s| s.as_mut()) {
                s.remaining = s.remaining.saturating_sub(1);
                if s.remaining == 0 {
                    self.store[slot] = None;
                    self.free.push(e.slot);
                }
            }
        }
        p.snd_una = p.snd_una.wrapping_add(n);
        p.rto = rto0;
        let at = (p.in_flight() > 0).then(|| now.saturating_add(rto0));
        set_timer(&mut self.timers, &mut p.rto_at, peer, TIMER_RTO, at);
    }

    fn handle_req(&mut self, now: u64, src: u32, n: u32) {
        self.stats.reqs_received += 1;
        let p = &self.peers[src as usize];
        let off = n.wrapping_sub(p.snd_una);
        let in_flight = p.in_flight();
        if (off as i32) < 0 {
            self.stats.reqs_stale += 1;
            return;
        }
        if off > in_flight {
            self.stats.reqs_ignored_unsent += 1;
            return;
        }
        if off > 0 {
            self.ack_progress(now, src, off);
        }
        if off == in_flight {
            self.stats.reqs_ignored_unsent += 1;
            return;
        }
        let gap = self.cfg.req_gap_ns;
        let p = &self.peers[src as usize];
        let recent = p
            .win
            .front()
            .and_then(|e| e.sent_at)
            .is_some_and(|t| now < t.saturating_add(gap));
        if recent {
            self.stats.reqs_ignored_recent += 1;
            return;
        }
        self.queue_resend(src, n, false);
    }

    fn queue_resend(&mut self, peer: u32, counter: u32, ack_request: bool) {
        let p = &mut self.peers[peer as usize];
        if let Some(e) = p.resend.iter_mut().find(|e| e.0 == counter) {
            e.1 |= ack_request;
            return;
        }
        if p.resend.len() < RESEND_QUEUE_MAX {
            p.resend.push_back((counter, ack_request));
            self.schedule(peer);
        }
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

    fn schedule(&mut self, peer: u32) {
        if let Some(p) = self.peers.get_mut(peer as usize) {
            if !p.in_ready && p.has_ctrl() {
                p.in_ready = true;
                self.ready.push_back(peer);
            }
        }
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
        let threshold = self.cfg.block_ack_threshold;
        let delay = self.cfg.ack_delay_ns;
        let Some(p) = self.peers.get_mut(src as usize) else {
            return;
        };
        if !p.head_ready() {
            return;
        }
        p.slots.pop_front();
        self.rx_buffered = self.rx_buffered.saturating_sub(1);
        p.rcv_base = p.rcv_base.wrapping_add(1);
        self.stats.delivered += 1;
        if p.want.take().is_some() {
            set_timer(&mut self.timers, &mut p.req_at, src, TIMER_REQ, None);
        }
        p.ack_debt = p.ack_debt.saturating_add(1);
        if p.ack_debt >= threshold {
            p.ack_pending = true;
            set_timer(&mut self.timers, &mut p.ack_at, src, TIMER_ACK, None);
        } else if p.ack_at.is_none() {
            let at = Some(now.saturating_add(delay));
            set_timer(&mut self.timers, &mut p.ack_at, src, TIMER_ACK, at);
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
        set_timer(&mut self.timers, &mut p.req_at, src, TIMER_REQ, at);
    }

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
                if p.rto_at.is_none() {
                    let at = Some(now.saturating_add(p.rto));
                    set_timer(&mut self.timers, &mut p.rto_at, r, TIMER_RTO, at);
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

    /// The earliest deadline (REQ, delayed ACK, safety net), if any. O(1).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers.first().map(|t| t.0)
    }

    /// Fires every deadline due at `now`.
    pub fn handle_timeout(&mut self, now: u64) {
        let max_backoff = self.cfg.req_backoff_max_ns;
        while let Some(&(t, peer, kind)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.remove(&(t, peer, kind));
            let p = &mut self.peers[peer as usize];
            match kind {
                TIMER_ACK => {
                    p.ack_at = None;
                    if p.ack_debt > 0 {
                        p.ack_pending = true;
                    }
                }
                TIMER_RTO => {
                    p.rto_at = None;
                    if p.in_flight() == 0 {
                        continue;
                    }
                    let oldest = p.snd_una;
                    p.rto = p.rto.saturating_mul(2).min(max_backoff.max(1));
                    let at = Some(now.saturating_add(p.rto));
                    set_timer(&mut self.timers, &mut p.rto_at, peer, TIMER_RTO, at);
                    self.queue_resend(peer, oldest, true);
                    self.unanswered(peer);
                }
                _ => {
                    p.req_at = None;
                    let Some(w) = p.want.as_mut() else {
                        continue;
                    };
                    if w.counter != p.rcv_base || matches!(p.slots.front(), Some(Some(_))) {
                        p.want = None;
                        continue;
                    }
                    let c = w.counter;
                    w.interval = w.interval.saturating_mul(2).min(max_backoff);
                    let at = Some(now.saturating_add(w.interval));
                    set_timer(&mut self.timers, &mut p.req_at, peer, TIMER_REQ, at);
                    p.req_pending = Some(c);
                    p.last_req = Some((c, now));
                    self.unanswered(peer);
                }
            }
            self.schedule(peer);
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<UrtpEvent> {
        self.events.pop_front()
    }

    /// Queues a pure ACK to every peer with consumed-but-unacked packets (Finalize).
    pub fn flush_acks(&mut self, now: u64) {
        let _ = now;
        for i in 0..self.peers.len() as u32 {
            let p = &mut self.peers[i as usize];
            if p.ack_debt > 0 {
                p.ack_pending = true;
                set_timer(&mut self.timers, &mut p.ack_at, i, TIMER_ACK, None);
                self.schedule(i);
            }
        }
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
#[path = "urtp_tests.rs"]
mod tests;
