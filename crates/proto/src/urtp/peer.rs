//! Per-peer state of the URTP engine and the stored packet it refers to: the send
//! window (un-acked counters, each a reference to one [`Stored`] packet shared by all
//! its targets), the receive slots in unicast form, ACK debt, the running want/REQ and
//! the liveness counters. The fields document the invariants the engine keeps (e.g. a
//! peer's slots never end in `None`); the methods are small queries on one peer, the
//! validation of a cumulative ACK against the counters actually transmitted
//! ([`Peer::ack_progress_of`]) and the clearing of ACK debt.

use std::collections::VecDeque;

use phalanx_wire::Header;

use super::timers::TIMER_ACK;
use super::{Targets, UrtpConfig};
use crate::timers::TimerTable;

/// One sent packet, shared by all its targets' windows.
pub(super) struct Stored {
    /// The datagram as first transmitted.
    pub(super) bytes: Vec<u8>,
    /// Its header (the caller's message-layer fields, for re-encoding).
    pub(super) header: Header,
    pub(super) payload_off: usize,
    pub(super) targets: Targets,
    pub(super) multicast: bool,
    /// Targets that have not acknowledged it yet.
    pub(super) remaining: u32,
}

/// A send-window entry of one peer.
pub(super) struct SentRef {
    pub(super) slot: u32,
    /// Last (re)transmission to this peer.
    pub(super) sent_at: Option<u64>,
}

pub(super) struct Want {
    pub(super) counter: u32,
    pub(super) interval: u64,
}

pub(super) struct Peer {
    // Send side (local → peer).
    /// Oldest un-acked counter.
    pub(super) snd_una: u32,
    /// Next counter to assign.
    pub(super) snd_nxt: u32,
    /// First counter not transmitted yet.
    pub(super) tx_next: u32,
    pub(super) any_sent: bool,
    /// Entries for `snd_una..snd_nxt`.
    pub(super) win: VecDeque<SentRef>,
    pub(super) rto: u64,
    /// Counters to re-send point-to-point (with ACK_REQUEST: the safety net's).
    pub(super) resend: VecDeque<(u32, bool)>,
    /// A probe is owed (the safety net fired): an ACK with `ACK_REQUEST` naming the
    /// first counter not transmitted yet.
    pub(super) probe_pending: bool,
    // Receive side (peer → local).
    /// Next counter to consume.
    pub(super) rcv_base: u32,
    /// Buffered packets for `rcv_base..`, unicast form; never ends in `None`.
    pub(super) slots: VecDeque<Option<Vec<u8>>>,
    pub(super) ack_debt: u32,
    pub(super) ack_pending: bool,
    pub(super) want: Option<Want>,
    pub(super) req_pending: Option<u32>,
    pub(super) last_req: Option<(u32, u64)>,
    // Liveness.
    pub(super) silent: u32,
    pub(super) reported: bool,
    pub(super) in_ready: bool,
}

impl Peer {
    pub(super) fn new(cfg: &UrtpConfig) -> Peer {
        let s = cfg.initial_seq;
        Peer {
            snd_una: s,
            snd_nxt: s,
            tx_next: s,
            any_sent: false,
            win: VecDeque::new(),
            rto: cfg.sender_rto_ns,
            resend: VecDeque::new(),
            rcv_base: s,
            slots: VecDeque::new(),
            ack_debt: 0,
            ack_pending: false,
            want: None,
            probe_pending: false,
            req_pending: None,
            last_req: None,
            silent: 0,
            reported: false,
            in_ready: false,
        }
    }

    pub(super) fn has_ctrl(&self) -> bool {
        self.req_pending.is_some()
            || !self.resend.is_empty()
            || self.ack_pending
            || self.probe_pending
    }

    pub(super) fn head_ready(&self) -> bool {
        matches!(self.slots.front(), Some(Some(_)))
    }

    pub(super) fn in_flight(&self) -> u32 {
        self.tx_next.wrapping_sub(self.snd_una)
    }

    /// Validates a cumulative ACK `a` from this peer: `Some(n)` packets newly acked
    /// (0 for a stale or repeated ACK), `None` if it acks a counter never transmitted.
    pub(super) fn ack_progress_of(&self, a: u32) -> Option<u32> {
        let n = a.wrapping_add(1).wrapping_sub(self.snd_una);
        if n <= self.in_flight() {
            Some(n)
        } else if (n as i32) < 0 {
            Some(0)
        } else {
            None
        }
    }

    /// This peer (rank `peer`) is owed no ACK any more: debt, pending ACK and its
    /// delayed-ACK timer in `timers` are cleared.
    pub(super) fn clear_ack_debt(&mut self, timers: &mut TimerTable, peer: u32) {
        self.ack_debt = 0;
        self.ack_pending = false;
        timers.set(peer, TIMER_ACK, None);
    }
}
