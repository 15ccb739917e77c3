//! The careful protocol of seed 003 (Mosberger, Turner, Peterson, §2 and §5.3), sans-I/O.
//!
//! For links the user declares **reliable** (shared memory without a shared consumer
//! index, UDP with `PHALANX_RELIABLE_NET=1`): no retransmission, no retransmission timer,
//! no ACKs — only flow control, plus detection of the rare event that the link broke its
//! promise.
//!
//! # Contract
//!
//! * **Windows are static.** Every rank has `R` = [`CarefulConfig::buffers`] receive
//!   buffers shared by `P` = [`CarefulConfig::peers`] senders and grants each of them a
//!   window of `W` = ⌊R/P⌋ frames. All ranks of a job must use the same configuration.
//!   The paper needs R ≥ 2P; because explicit update frames occupy a receive buffer too
//!   (there is no shared index), a pair with W = 2 would trade update frames forever
//!   when idle, so [`Careful::new`] raises R to 3P (W ≥ 3). [`Careful::config`] shows the
//!   values in use.
//! * **Frames.** Every frame on a link (data or update) occupies one buffer of the
//!   receiver and one unit of the sender's window, and carries the link's frame number
//!   (`seq`, wrapping `u32`, starting at 0 for each ordered pair). A data frame
//!   ([`Kind::CarefulData`]) to one rank has `seq` in the header ([`flags::SEQ_VALID`]);
//!   a data frame to several ranks is *one* datagram (multi-send, same bytes to every
//!   target) with [`flags::MULTICAST`] and the frame numbers in the [`mcast`] extension
//!   (target bitmap + one counter per target). An update frame ([`Kind::CarefulUpdate`])
//!   is unicast, without payload.
//! * **Window updates** travel in `ack` ([`flags::ACK_VALID`] on every frame): the number
//!   of the destination's frames the sender freed since its previous frame on that link
//!   (an increment — the link is reliable). A frame to several ranks carries the
//!   **minimum** of the increments owed to its targets. Updates are piggy-backed on data
//!   (the increment is topped up at [`Careful::poll_transmit`] time); an explicit update
//!   frame is sent only when no data frame is queued and either half a window
//!   ([`CarefulConfig::update_fraction`]) has been freed since the last update, or the
//!   peer may be blocked (its window, as far as frames arrived tell, is ≤ 1).
//! * **The rule of Theorem 1**: a frame that would close a window (the last unit of
//!   credit towards a destination) is sent only if it carries a window update to that
//!   destination; for several targets every target's window must allow the frame. Update
//!   frames carry an update by construction, so they may close a window.
//! * **Receiving.** The caller validates a datagram with `Packet::new_checked` and calls
//!   [`Careful::handle_packet`]. A [`Verdict::Deliver`] frame occupies a receive buffer
//!   until the caller reports [`Careful::consumed`] (the application is done with it) or
//!   [`Careful::copied_out`] (it moved the frame to ordinary memory); frames of one link
//!   are freed oldest first. The protocol keeps no payload: buffers are the caller's.
//! * **Copy-out** ([`Careful::copy_out_advice`]): when free receive buffers fall below
//!   [`CarefulConfig::copy_out_threshold`], or a sender's window to us is (nearly) closed
//!   while its frames sit unconsumed, the caller should copy frames out before it blocks;
//!   this is what makes a flood (n·k frames far above the window) deadlock-free.
//! * **Detection.** A gap, duplicate or reordering in a link's frame numbers, a sender
//!   that overruns its window or an update granting frames never sent is a
//!   [`CarefulEvent::LinkError`] naming the link; the link is then broken (its later frames
//!   are [`Verdict::Error`], sends to it are refused). Per-link counts ([`Careful::counts`])
//!   are compared at Finalize with [`Careful::check_counts`]. While the caller declares it
//!   waits on a peer ([`Careful::waiting_on`]), nothing from that peer for
//!   [`CarefulConfig::stall_ns`] yields [`CarefulEvent::SuspectedLoss`] ("suspected loss
//!   A→B") — the only timer.
//! * **Robustness and bounds.** Nothing panics on network input; malformed frames are
//!   [`Verdict::Invalid`] and change no state. The send queue holds at most one window per
//!   destination, state is O(size), the event queue is bounded.

use core::fmt;
use std::collections::{BTreeSet, VecDeque};

use phalanx_wire::{
    flags, mcast, serial, stamp, Kind, MsgKind, Packet, HEADER_LEN, MAGIC, VERSION,
};

/// Default stall time before [`CarefulEvent::SuspectedLoss`] (10 s).
pub const DEFAULT_STALL_NS: u64 = 10_000_000_000;
/// Environment variable the runtime reads for [`CarefulConfig::stall_ns`] (the protocol
/// itself never reads the environment; see [`parse_stall`]).
pub const STALL_ENV: &str = "PHALANX_CAREFUL_STALL";

/// Parses a stall time: seconds (`"10"`, `"2.5"`, `"10s"`) or milliseconds (`"500ms"`).
/// `None` for anything else, negative or non-finite values.
pub fn parse_stall(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e6)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1e9)
    } else {
        (s, 1e9)
    };
    let x: f64 = num.trim().parse().ok()?;
    let ns = x * scale;
    (0.0..1.8e19).contains(&ns).then_some(ns as u64)
}

/// Tunables of the careful protocol. All ranks of a job must use the same `buffers` and
/// `peers`.
#[derive(Debug, Clone)]
pub struct CarefulConfig {
    /// R: receive buffers (frames) of every rank. Raised to 3·P if smaller.
    pub buffers: u32,
    /// P: senders sharing the buffers; 0 = `size - 1` (at least 1).
    pub peers: u32,
    /// Send an explicit update after this fraction of a window was freed (0.5 in the
    /// paper); the resulting threshold is clamped to `2..=W-1`.
    pub update_fraction: f64,
    /// Copy-out is advised when fewer receive buffers than this are free; 0 = one window.
    pub copy_out_threshold: u32,
    /// Stall time (ns) of a declared wait before [`CarefulEvent::SuspectedLoss`].
    pub stall_ns: u64,
    /// **Tests only**: ignore the rule of Theorem 1 and let a data frame close a window
    /// without carrying an update. Deadlocks; exists to show that the rule is needed.
    pub test_ignore_close_rule: bool,
}

impl Default for CarefulConfig {
    fn default() -> Self {
        CarefulConfig {
            buffers: 128,
            peers: 0,
            update_fraction: 0.5,
            copy_out_threshold: 0,
            stall_ns: DEFAULT_STALL_NS,
            test_ignore_close_rule: false,
        }
    }
}

/// What broke on a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFault {
    /// A frame number was skipped: frames lost (or reordered).
    Gap {
        /// The frame number expected.
        expected: u32,
        /// The frame number received.
        got: u32,
    },
    /// A frame number already received: duplicated (or reordered).
    Duplicate {
        /// The frame number expected.
        expected: u32,
        /// The frame number received.
        got: u32,
    },
    /// The sender put more frames in flight than its window.
    WindowOverrun {
        /// The window (frames).
        window: u32,
    },
    /// A window update freed more frames than were outstanding.
    BadUpdate {
        /// Frames the update freed.
        granted: u32,
        /// Frames outstanding on the link.
        outstanding: u32,
    },
    /// Finalize: the two ends disagree on how many frames crossed the link.
    CountMismatch {
        /// Frames the sending end sent.
        sent: u64,
        /// Frames the receiving end received.
        received: u64,
    },
}

impl fmt::Display for LinkFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LinkFault::Gap { expected, got } => write!(
                f,
                "gap: expected frame #{expected}, got #{got} ({} frame(s) lost or reordered)",
                got.wrapping_sub(expected)
            ),
            LinkFault::Duplicate { expected, got } => write!(
                f,
                "duplicate or reordered frame #{got} (expected #{expected})"
            ),
            LinkFault::WindowOverrun { window } => {
                write!(f, "sender overran its window of {window} frames")
            }
            LinkFault::BadUpdate {
                granted,
                outstanding,
            } => write!(
                f,
                "window update frees {granted} frames but only {outstanding} are outstanding"
            ),
            LinkFault::CountMismatch { sent, received } => write!(
                f,
                "final counts differ: {sent} frames sent, {received} received"
            ),
        }
    }
}

/// Events for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CarefulEvent {
    /// The reliable link `from → to` broke its promise (reported once per link).
    LinkError {
        /// Sending end of the link.
        from: u32,
        /// Receiving end of the link.
        to: u32,
        /// What was detected.
        detail: LinkFault,
    },
    /// "suspected loss `from`→`to`": the local rank (`to`) waited on `from` and heard
    /// nothing from it for the stall time.
    SuspectedLoss {
        /// The silent peer.
        from: u32,
        /// The waiting (local) rank.
        to: u32,
    },
}

impl fmt::Display for CarefulEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CarefulEvent::LinkError { from, to, detail } => {
                write!(f, "careful link {from}→{to} broken: {detail}")
            }
            CarefulEvent::SuspectedLoss { from, to } => write!(
                f,
                "suspected loss {from}→{to}: rank {to} waited on rank {from} and heard \
                 nothing for the stall time (careful link declared reliable)"
            ),
        }
    }
}

/// Classification of an incoming datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A data frame for the caller; it occupies a receive buffer until
    /// [`Careful::consumed`] or [`Careful::copied_out`].
    Deliver,
    /// An update frame (processed, buffer freed).
    Update,
    /// The link is broken (a [`CarefulEvent::LinkError`] was queued the first time).
    Error(LinkFault),
    /// Malformed, foreign or impossible; ignored, no state changed.
    Invalid(&'static str),
}

/// Why [`Careful::send`] refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The window to `peer` does not allow the frame now (retry after updates arrive).
    WindowClosed {
        /// A target whose window is (nearly) closed.
        peer: u32,
    },
    /// No target.
    NoTargets,
    /// A target is out of range or the local rank.
    BadTarget {
        /// The offending rank.
        rank: u32,
    },
    /// The link to `peer` is broken.
    Broken {
        /// The peer.
        peer: u32,
    },
    /// The datagram is not a header-plus-payload the protocol can stamp.
    BadDatagram(&'static str),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::WindowClosed { peer } => write!(f, "window to rank {peer} closed"),
            SendError::NoTargets => f.write_str("no target"),
            SendError::BadTarget { rank } => write!(f, "invalid target rank {rank}"),
            SendError::Broken { peer } => write!(f, "careful link to rank {peer} is broken"),
            SendError::BadDatagram(why) => write!(f, "bad datagram: {why}"),
        }
    }
}

impl std::error::Error for SendError {}

/// A refused send: the datagram comes back unchanged with the reason.
#[derive(Debug)]
pub struct Refused {
    /// The caller's datagram.
    pub datagram: Vec<u8>,
    /// Why.
    pub reason: SendError,
}

/// A datagram to put on the wire: the same bytes to every target (one target: unicast).
#[derive(Debug)]
pub struct CarefulTransmit<'a> {
    /// Destination ranks, increasing.
    pub targets: &'a [u32],
    /// The complete datagram.
    pub bytes: &'a [u8],
}

/// Frames that crossed one link, for the Finalize comparison.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounts {
    /// Data frames sent to the peer.
    pub data_sent: u64,
    /// All frames (data and updates) sent to the peer.
    pub frames_sent: u64,
    /// Data frames received from the peer.
    pub data_received: u64,
    /// All frames received from the peer.
    pub frames_received: u64,
}

/// Counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CarefulStats {
    /// Data frames queued (a frame to several ranks counts once).
    pub data_sent: u64,
    /// Of those, frames to several ranks.
    pub multi_sent: u64,
    /// Data frames that carried a non-zero window update (piggy-back).
    pub piggybacked: u64,
    /// Explicit update frames sent.
    pub updates_sent: u64,
    /// Data frames delivered.
    pub data_received: u64,
    /// Update frames received.
    pub updates_received: u64,
    /// Frames freed by [`Careful::consumed`].
    pub consumed: u64,
    /// Frames freed by [`Careful::copied_out`].
    pub copied_out: u64,
    /// Sends refused because a window did not allow them.
    pub window_blocked: u64,
    /// Link errors detected.
    pub link_errors: u64,
    /// Suspected losses reported.
    pub suspected_losses: u64,
    /// Datagrams rejected as [`Verdict::Invalid`].
    pub invalid: u64,
    /// `consumed`/`copied_out` calls without a held frame (ignored).
    pub spurious_frees: u64,
    /// Events dropped because the event queue was full.
    pub events_dropped: u64,
}

#[derive(Debug, Default, Clone)]
struct Peer {
    // Send side (local → peer).
    /// Frame number of the next frame to the peer (= frames sent).
    snd_nxt: u32,
    /// Our frames the peer has freed (sum of the updates received).
    granted: u32,
    // Receive side (peer → local).
    /// Next expected frame number.
    rcv_nxt: u32,
    /// Frames of the peer whose buffer is free again.
    freed: u32,
    /// Freed frames already advertised (committed into a queued or sent frame).
    adv: u32,
    /// Data frames delivered and not yet freed.
    held: u32,
    broken: Option<LinkFault>,
    counts: LinkCounts,
    // Stall detection.
    waiting: bool,
    deadline: Option<u64>,
    in_check: bool,
}

struct Frame {
    bytes: Vec<u8>,
    targets: Vec<u32>,
}

/// Flag bits owned by the protocol; the caller's copies are replaced.
const OWN_FLAGS: u8 = flags::SEQ_VALID | flags::ACK_VALID | flags::MULTICAST | flags::RETRANSMIT;

/// The careful-protocol engine of one rank: flow-controlled frames to every other rank.
pub struct Careful {
    cfg: CarefulConfig,
    job_key: u64,
    local: u32,
    size: u32,
    window: u32,
    threshold: u32,
    copy_threshold: u32,
    peers: Vec<Peer>,
    total_held: u64,
    queue: VecDeque<Frame>,
    current: Option<Frame>,
    upd_buf: [u8; HEADER_LEN],
    upd_target: [u32; 1],
    /// Peers whose explicit-update obligation must be re-examined.
    check: VecDeque<u32>,
    /// Stall deadlines: (time, peer).
    timers: BTreeSet<(u64, u32)>,
    events: VecDeque<CarefulEvent>,
    max_events: usize,
    stats: CarefulStats,
}

impl Careful {
    /// A careful engine for `local_rank` in a job of `size` ranks (see the module docs for
    /// how `cfg` is clamped).
    pub fn new(cfg: CarefulConfig, job_key: u64, local_rank: u32, size: u32) -> Self {
        let mut cfg = cfg;
        let size = size.max(1);
        if cfg.peers == 0 {
            cfg.peers = size.saturating_sub(1).max(1);
        }
        cfg.peers = cfg.peers.min(1 << 24);
        cfg.buffers = cfg.buffers.max(cfg.peers.saturating_mul(3));
        let window = (cfg.buffers / cfg.peers).clamp(3, 1 << 30);
        if !(cfg.update_fraction.is_finite() && cfg.update_fraction > 0.0) {
            cfg.update_fraction = 0.5;
        }
        let t = (window as f64 * cfg.update_fraction).ceil();
        let threshold = if t >= window as f64 {
            window - 1
        } else {
            (t as u32).clamp(2, window - 1)
        };
        let copy_threshold = if cfg.copy_out_threshold == 0 {
            window
        } else {
            cfg.copy_out_threshold
        };
        Careful {
            cfg,
            job_key,
            local: local_rank,
            size,
            window,
            threshold,
            copy_threshold,
            peers: vec![Peer::default(); size as usize],
            total_held: 0,
            queue: VecDeque::new(),
            current: None,
            upd_buf: [0; HEADER_LEN],
            upd_target: [0],
            check: VecDeque::new(),
            timers: BTreeSet::new(),
            events: VecDeque::new(),
            max_events: 64 + 4 * size as usize,
            stats: CarefulStats::default(),
        }
    }

    /// The configuration in use (after clamping).
    pub fn config(&self) -> &CarefulConfig {
        &self.cfg
    }

    /// W: the static window of every link (frames).
    pub fn window(&self) -> u32 {
        self.window
    }

    /// Freed-but-unadvertised frames that trigger an explicit update.
    pub fn update_threshold(&self) -> u32 {
        self.threshold
    }

    /// Receive buffers not holding a delivered frame.
    pub fn free_buffers(&self) -> u64 {
        (self.cfg.buffers as u64).saturating_sub(self.total_held)
    }

    /// Delivered frames from `peer` still in receive buffers.
    pub fn held(&self, peer: u32) -> u32 {
        self.peers.get(peer as usize).map_or(0, |p| p.held)
    }

    /// Send credit towards `peer`: frames its window still admits (0 if unknown).
    pub fn credit(&self, peer: u32) -> u32 {
        self.peers
            .get(peer as usize)
            .map_or(0, |p| self.credit_of(p))
    }

    /// The link `peer → local` is broken (with what).
    pub fn broken(&self, peer: u32) -> Option<LinkFault> {
        self.peers.get(peer as usize).and_then(|p| p.broken)
    }

    /// Nothing queued for the wire (explicit updates may still be owed).
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }

    fn credit_of(&self, p: &Peer) -> u32 {
        let outstanding = p.snd_nxt.wrapping_sub(p.granted);
        self.window.saturating_sub(outstanding)
    }

    fn unadv(p: &Peer) -> u32 {
        p.freed.wrapping_sub(p.adv)
    }

    /// Upper bound of the peer's credit towards us, from the frames that arrived.
    fn peer_cap(&self, p: &Peer) -> u32 {
        self.window.saturating_sub(p.rcv_nxt.wrapping_sub(p.adv))
    }

    fn owes_update(&self, p: &Peer) -> bool {
        let u = Self::unadv(p);
        p.broken.is_none() && u > 0 && (u >= self.threshold || self.peer_cap(p) <= 1)
    }

    fn valid_target(&self, r: u32) -> Result<(), SendError> {
        match self.peers.get(r as usize) {
            _ if r == self.local => Err(SendError::BadTarget { rank: r }),
            None => Err(SendError::BadTarget { rank: r }),
            Some(p) if p.broken.is_some() => Err(SendError::Broken { peer: r }),
            Some(_) => Ok(()),
        }
    }

    /// Frames one peer's window admits now, given the increment a frame would carry.
    fn space_one(&self, p: &Peer, inc: u32) -> u32 {
        let c = self.credit_of(p);
        if self.cfg.test_ignore_close_rule {
            c
        } else if c >= 2 {
            c - 1
        } else if c == 1 && inc > 0 {
            1
        } else {
            0
        }
    }

    fn min_unadv(&self, targets: &[u32]) -> u32 {
        targets
            .iter()
            .map(|&t| Self::unadv(&self.peers[t as usize]))
            .min()
            .unwrap_or(0)
    }

    /// Data frames to `targets` (all of them) that could be sent now; 0 if a target is
    /// invalid. A frame to several ranks needs every target's window (min-window).
    pub fn send_space(&self, targets: &[u32]) -> u32 {
        if targets.is_empty() || targets.iter().any(|&t| self.valid_target(t).is_err()) {
            return 0;
        }
        let inc = self.min_unadv(targets);
        targets
            .iter()
            .map(|&t| self.space_one(&self.peers[t as usize], inc))
            .min()
            .unwrap_or(0)
    }

    /// Queues one data frame for `targets` (one rank, or several: one datagram, the same
    /// bytes to all). `datagram` is a header emitted by the caller (message-layer fields,
    /// `ext_len` 0) followed by the payload; the protocol stamps kind, flags, job key,
    /// source, frame number(s) and window update. Nothing is queued on error.
    pub fn send(&mut self, now: u64, targets: &[u32], datagram: Vec<u8>) -> Result<(), Refused> {
        let _ = now;
        let refuse = |datagram, reason| Err(Refused { datagram, reason });
        if datagram.len() < HEADER_LEN {
            return refuse(datagram, SendError::BadDatagram("shorter than the header"));
        }
        if datagram[6] != 0 || datagram[7] != 0 {
            return refuse(datagram, SendError::BadDatagram("ext_len must be 0"));
        }
        if MsgKind::from_u8(datagram[4]).is_none() {
            return refuse(datagram, SendError::BadDatagram("unknown message kind"));
        }
        let mut tg: Vec<u32> = targets.to_vec();
        tg.sort_unstable();
        tg.dedup();
        if tg.is_empty() {
            return refuse(datagram, SendError::NoTargets);
        }
        for &t in &tg {
            if let Err(e) = self.valid_target(t) {
                return refuse(datagram, e);
            }
        }
        let multi = tg.len() > 1;
        let ext = if multi {
            mcast::ext_len(self.size, tg.len())
        } else {
            0
        };
        if ext > u16::MAX as usize {
            return refuse(datagram, SendError::BadDatagram("too many targets"));
        }
        let inc = self.min_unadv(&tg);
        for &t in &tg {
            if self.space_one(&self.peers[t as usize], inc) == 0 {
                self.stats.window_blocked += 1;
                return refuse(datagram, SendError::WindowClosed { peer: t });
            }
        }
        let caller_flags = datagram[phalanx_wire::OFF_FLAGS] & !OWN_FLAGS;
        let mut bytes = if multi {
            let mut b = Vec::with_capacity(datagram.len() + ext);
            b.extend_from_slice(&datagram[..HEADER_LEN]);
            b.resize(HEADER_LEN + ext, 0);
            let peers = &self.peers;
            let entries = tg.iter().map(|&r| (r, peers[r as usize].snd_nxt));
            // Cannot fail: targets are valid, increasing, and the area has `ext` bytes.
            let _ = mcast::emit(&mut b[HEADER_LEN..], self.size, entries);
            b.extend_from_slice(&datagram[HEADER_LEN..]);
            b
        } else {
            datagram
        };
        let (fl, seq) = if multi {
            (caller_flags | flags::MULTICAST | flags::ACK_VALID, 0)
        } else {
            let seq = self.peers[tg[0] as usize].snd_nxt;
            (caller_flags | flags::SEQ_VALID | flags::ACK_VALID, seq)
        };
        self.own_fields(&mut bytes, Kind::CarefulData, fl, ext as u16, seq, inc);
        for &t in &tg {
            let p = &mut self.peers[t as usize];
            p.snd_nxt = p.snd_nxt.wrapping_add(1);
            p.adv = p.adv.wrapping_add(inc);
            p.counts.data_sent += 1;
            p.counts.frames_sent += 1;
        }
        self.stats.data_sent += 1;
        if multi {
            self.stats.multi_sent += 1;
        }
        self.queue.push_back(Frame { bytes, targets: tg });
        Ok(())
    }

    fn own_fields(&self, b: &mut [u8], kind: Kind, fl: u8, ext: u16, seq: u32, ack: u32) {
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = kind as u8;
        b[5] = fl;
        b[6..8].copy_from_slice(&ext.to_le_bytes());
        b[8..16].copy_from_slice(&self.job_key.to_le_bytes());
        b[16..20].copy_from_slice(&self.local.to_le_bytes());
        let _ = stamp::seq(b, seq);
        let _ = stamp::ack(b, ack);
    }

    fn schedule_check(&mut self, peer: u32) {
        if let Some(p) = self.peers.get_mut(peer as usize) {
            if !p.in_check {
                p.in_check = true;
                self.check.push_back(peer);
            }
        }
    }

    fn push_event(&mut self, e: CarefulEvent) {
        if self.events.len() < self.max_events {
            self.events.push_back(e);
        } else {
            self.stats.events_dropped += 1;
        }
    }

    fn break_link(&mut self, src: u32, fault: LinkFault) -> Verdict {
        let to = self.local;
        let p = &mut self.peers[src as usize];
        p.broken = Some(fault);
        if let Some(d) = p.deadline.take() {
            self.timers.remove(&(d, src));
        }
        self.stats.link_errors += 1;
        self.push_event(CarefulEvent::LinkError {
            from: src,
            to,
            detail: fault,
        });
        Verdict::Error(fault)
    }

    /// Processes a validated datagram (see the module docs).
    #[must_use]
    pub fn handle_packet(&mut self, now: u64, pkt: &Packet<'_>) -> Verdict {
        let v = self.handle_inner(now, pkt);
        if matches!(v, Verdict::Invalid(_)) {
            self.stats.invalid += 1;
        }
        v
    }

    fn handle_inner(&mut self, now: u64, pkt: &Packet<'_>) -> Verdict {
        let src = pkt.src();
        if src as usize >= self.peers.len() || src == self.local {
            return Verdict::Invalid("source rank out of range or local");
        }
        if pkt.job_key() != self.job_key {
            return Verdict::Invalid("foreign job key");
        }
        let fl = pkt.flags();
        let kind = pkt.kind();
        if !matches!(kind, Kind::CarefulData | Kind::CarefulUpdate) {
            return Verdict::Invalid("not a careful frame");
        }
        if fl & flags::ACK_VALID == 0 {
            return Verdict::Invalid("careful frame without ACK_VALID");
        }
        let multi = fl & flags::MULTICAST != 0;
        let seq = if multi {
            if kind == Kind::CarefulUpdate {
                return Verdict::Invalid("multicast update frame");
            }
            let Ok(view) = mcast::TargetsView::of_packet(pkt, self.size) else {
                return Verdict::Invalid("malformed multicast extension");
            };
            match view.counter(self.local) {
                Some(s) => s,
                None => return Verdict::Invalid("not a target of this frame"),
            }
        } else {
            if fl & flags::SEQ_VALID == 0 {
                return Verdict::Invalid("careful frame without SEQ_VALID");
            }
            if kind == Kind::CarefulUpdate && !pkt.payload().is_empty() {
                return Verdict::Invalid("update frame with payload");
            }
            pkt.seq()
        };
        let window = self.window;
        let p = &self.peers[src as usize];
        if let Some(f) = p.broken {
            return Verdict::Error(f);
        }
        if seq != p.rcv_nxt {
            let (expected, got) = (p.rcv_nxt, seq);
            let fault = if serial::lt(seq, p.rcv_nxt) {
                LinkFault::Duplicate { expected, got }
            } else {
                LinkFault::Gap { expected, got }
            };
            return self.break_link(src, fault);
        }
        let inc = pkt.ack();
        let outstanding = p.snd_nxt.wrapping_sub(p.granted);
        if inc > outstanding {
            return self.break_link(
                src,
                LinkFault::BadUpdate {
                    granted: inc,
                    outstanding,
                },
            );
        }
        if p.rcv_nxt.wrapping_add(1).wrapping_sub(p.adv) > window {
            return self.break_link(src, LinkFault::WindowOverrun { window });
        }
        let stall = self.cfg.stall_ns;
        let p = &mut self.peers[src as usize];
        p.rcv_nxt = p.rcv_nxt.wrapping_add(1);
        p.granted = p.granted.wrapping_add(inc);
        p.counts.frames_received += 1;
        if p.waiting {
            if let Some(d) = p.deadline.take() {
                self.timers.remove(&(d, src));
            }
            let d = now.saturating_add(stall);
            p.deadline = Some(d);
            self.timers.insert((d, src));
        }
        let v = if kind == Kind::CarefulUpdate {
            p.freed = p.freed.wrapping_add(1);
            self.stats.updates_received += 1;
            Verdict::Update
        } else {
            p.held += 1;
            p.counts.data_received += 1;
            self.total_held += 1;
            self.stats.data_received += 1;
            Verdict::Deliver
        };
        self.schedule_check(src);
        v
    }

    /// The caller is done with the oldest delivered frame from `from`: its buffer is free
    /// (this drives window updates). Ignored without a held frame.
    pub fn consumed(&mut self, now: u64, from: u32) {
        let _ = now;
        if self.free_held(from, 1) == 1 {
            self.stats.consumed += 1;
        }
    }

    /// The caller copied the `n` oldest delivered frames from `from` to ordinary memory:
    /// their buffers are free. Returns how many were freed (at most the held frames).
    pub fn copied_out(&mut self, from: u32, n: u32) -> u32 {
        let k = self.free_held(from, n);
        self.stats.copied_out += k as u64;
        k
    }

    fn free_held(&mut self, from: u32, n: u32) -> u32 {
        let Some(p) = self.peers.get_mut(from as usize) else {
            self.stats.spurious_frees += 1;
            return 0;
        };
        let k = n.min(p.held);
        if k < n || n == 0 {
            self.stats.spurious_frees += 1;
        }
        if k == 0 {
            return 0;
        }
        p.held -= k;
        p.freed = p.freed.wrapping_add(k);
        self.total_held -= k as u64;
        self.schedule_check(from);
        k
    }

    /// Copy-out advice `(peer, n)`: copy the `n` oldest frames held from `peer` to
    /// ordinary memory and report them with [`Careful::copied_out`] — needed before the
    /// caller blocks without consuming (it may consume instead). Given when `peer`'s
    /// window to us is (nearly) closed by frames we hold, or when free buffers fall below
    /// the copy-out threshold (then for the peer holding most). O(size).
    pub fn copy_out_advice(&self) -> Option<(u32, u32)> {
        for (i, p) in self.peers.iter().enumerate() {
            if p.held > 0 && p.broken.is_none() && self.peer_cap(p) <= 1 {
                return Some((i as u32, p.held));
            }
        }
        if self.free_buffers() < self.copy_threshold as u64 {
            let (i, p) = self.peers.iter().enumerate().max_by_key(|(_, p)| p.held)?;
            if p.held > 0 {
                return Some((i as u32, p.held));
            }
        }
        None
    }

    /// The next datagram for the wire. Data frames leave in the order they were queued,
    /// their window update topped up to everything freed so far; explicit update frames
    /// follow when no data is queued.
    #[must_use]
    pub fn poll_transmit(&mut self, now: u64) -> Option<CarefulTransmit<'_>> {
        let _ = now;
        if let Some(mut f) = self.queue.pop_front() {
            self.top_up(&mut f);
            self.current = Some(f);
            let f = self.current.as_ref()?;
            return Some(CarefulTransmit {
                targets: &f.targets,
                bytes: &f.bytes,
            });
        }
        while let Some(peer) = self.check.pop_front() {
            let p = &self.peers[peer as usize];
            let owed = self.owes_update(p);
            let credit = self.credit_of(p);
            let p = &mut self.peers[peer as usize];
            p.in_check = false;
            if !owed || credit == 0 {
                // Re-examined when the peer's next frame (with credit) arrives.
                continue;
            }
            let inc = Self::unadv(p);
            let seq = p.snd_nxt;
            p.snd_nxt = seq.wrapping_add(1);
            p.adv = p.freed;
            p.counts.frames_sent += 1;
            self.stats.updates_sent += 1;
            let mut b = [0u8; HEADER_LEN];
            b[4] = MsgKind::None as u8;
            self.own_fields(
                &mut b,
                Kind::CarefulUpdate,
                flags::SEQ_VALID | flags::ACK_VALID,
                0,
                seq,
                inc,
            );
            self.upd_buf = b;
            self.upd_target = [peer];
            return Some(CarefulTransmit {
                targets: &self.upd_target,
                bytes: &self.upd_buf,
            });
        }
        None
    }

    fn top_up(&mut self, f: &mut Frame) {
        let extra = self.min_unadv(&f.targets);
        let committed = Packet::new_checked(&f.bytes).map_or(0, |p| p.ack());
        if extra > 0 {
            for &t in &f.targets {
                let p = &mut self.peers[t as usize];
                p.adv = p.adv.wrapping_add(extra);
            }
            let _ = stamp::ack(&mut f.bytes, committed.wrapping_add(extra));
        }
        if committed > 0 || extra > 0 {
            self.stats.piggybacked += 1;
        }
    }

    /// The caller is waiting on `peer` (a receive from it, or credit from it). Starts the
    /// stall clock if not already running; every frame from `peer` restarts it.
    pub fn waiting_on(&mut self, now: u64, peer: u32) {
        let stall = self.cfg.stall_ns;
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return;
        };
        if p.waiting || peer == self.local || p.broken.is_some() {
            return;
        }
        p.waiting = true;
        let d = now.saturating_add(stall);
        p.deadline = Some(d);
        self.timers.insert((d, peer));
    }

    /// The caller no longer waits on `peer`.
    pub fn stop_waiting(&mut self, peer: u32) {
        if let Some(p) = self.peers.get_mut(peer as usize) {
            p.waiting = false;
            if let Some(d) = p.deadline.take() {
                self.timers.remove(&(d, peer));
            }
        }
    }

    /// The earliest stall deadline of a declared wait, if any (the only timer).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers.first().map(|t| t.0)
    }

    /// Fires the stall deadlines due at `now`: one [`CarefulEvent::SuspectedLoss`] per
    /// wait episode (re-armed only by a frame from that peer).
    pub fn handle_timeout(&mut self, now: u64) {
        while let Some(&(t, peer)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.remove(&(t, peer));
            self.peers[peer as usize].deadline = None;
            self.stats.suspected_losses += 1;
            let to = self.local;
            self.push_event(CarefulEvent::SuspectedLoss { from: peer, to });
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<CarefulEvent> {
        self.events.pop_front()
    }

    /// Per-link frame counts, indexed by peer rank.
    pub fn counts(&self) -> Vec<LinkCounts> {
        self.peers.iter().map(|p| p.counts).collect()
    }

    /// Finalize: compares the local counts for `peer` with `remote`, the counts `peer`
    /// reported for the local rank. A mismatch queues a [`CarefulEvent::LinkError`]
    /// ([`LinkFault::CountMismatch`]) naming the link and is returned.
    pub fn check_counts(&mut self, peer: u32, remote: &LinkCounts) -> Result<(), CarefulEvent> {
        let Some(p) = self.peers.get(peer as usize) else {
            return Ok(());
        };
        let mine = p.counts;
        let local = self.local;
        let bad = if mine.frames_sent != remote.frames_received
            || mine.data_sent != remote.data_received
        {
            Some(CarefulEvent::LinkError {
                from: local,
                to: peer,
                detail: LinkFault::CountMismatch {
                    sent: mine.frames_sent,
                    received: remote.frames_received,
                },
            })
        } else if remote.frames_sent != mine.frames_received
            || remote.data_sent != mine.data_received
        {
            Some(CarefulEvent::LinkError {
                from: peer,
                to: local,
                detail: LinkFault::CountMismatch {
                    sent: remote.frames_sent,
                    received: mine.frames_received,
                },
            })
        } else {
            None
        };
        match bad {
            Some(e) => {
                self.stats.link_errors += 1;
                self.push_event(e);
                Err(e)
            }
            None => Ok(()),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &CarefulStats {
        &self.stats
    }
}

#[cfg(test)]
#[path = "careful_tests.rs"]
mod tests;
