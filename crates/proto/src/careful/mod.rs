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

mod detect;
mod recv;
mod send;
mod types;
mod window;

use std::collections::VecDeque;

use phalanx_wire::HEADER_LEN;
#[cfg(doc)] // named by the contract above
use phalanx_wire::{flags, mcast, Kind};

use crate::timers::TimerTable;

pub use types::*;

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
    // Stall detection (the deadline is in `Careful::timers`).
    waiting: bool,
    in_check: bool,
}

struct Frame {
    bytes: Vec<u8>,
    targets: Vec<u32>,
}

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
    /// Stall deadlines: one per peer (TIMER_STALL).
    timers: TimerTable,
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
            timers: TimerTable::new(size, detect::TIMER_KINDS),
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

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<CarefulEvent> {
        self.events.pop_front()
    }

    /// Counters.
    pub fn stats(&self) -> &CarefulStats {
        &self.stats
    }
}

#[cfg(test)]
#[path = "../careful_tests.rs"]
mod tests;
