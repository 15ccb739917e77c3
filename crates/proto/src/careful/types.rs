//! Public value types of [`crate::careful`]: the configuration (with the stall-time
//! parser the runtime uses for it), link faults, events, verdicts, send errors, the
//! datagram handed to the wire, per-link counts and counters. Plain data: no protocol
//! state lives here.

use core::fmt;

#[cfg(doc)] // named by the docs below
use super::Careful;

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
