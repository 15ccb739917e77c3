//! Public value types of [`crate::urtp`]: configuration, target sets, verdicts, events,
//! errors and counters.

use core::fmt;

/// Tunables of URTP. All ranks of a job must use the same `window` and `initial_seq`.
#[derive(Clone, Debug)]
pub struct UrtpConfig {
    /// W: un-acked packets per (sender, receiver) pair; also the receive window per source.
    pub window: u32,
    /// δ (MinReqGap, ns): a REQ naming a packet (re)sent less than δ ago is ignored; the
    /// first REQ of a [`crate::urtp::Urtp::want`] goes out δ after the want started.
    pub req_gap_ns: u64,
    /// Clamp of the exponential back-off of REQs and of the sender's safety net (ns).
    pub req_backoff_max_ns: u64,
    /// A pure ACK is sent after this many consumed-but-unacked packets from one source.
    pub block_ack_threshold: u32,
    /// A pure ACK is sent this long after the first consumed-but-unacked packet (ns).
    pub ack_delay_ns: u64,
    /// Safety net (ns): the sender probes a peer that has not acked for this long (a pure
    /// ACK with `ACK_REQUEST` naming the first counter not transmitted; the peer answers
    /// with an ACK, and a REQ for a missing packet), back-off doubling, clamped at
    /// `req_backoff_max_ns`. Needed because pure ACKs can be lost and a receiver not
    /// waiting for a lost packet does not REQ it.
    pub sender_rto_ns: u64,
    /// Consecutive unanswered REQs / safety-net probes to one peer before
    /// [`UrtpEvent::PeerUnresponsive`].
    pub max_backoffs: u32,
    /// First counter of every (sender, receiver) stream.
    pub initial_seq: u32,
    /// c in the receive pool bound (p−1)·W + c.
    pub rx_extra: u32,
}

impl Default for UrtpConfig {
    fn default() -> Self {
        UrtpConfig {
            window: 64,
            req_gap_ns: 1_000_000,
            req_backoff_max_ns: 100_000_000,
            block_ack_threshold: 32,
            ack_delay_ns: 2_000_000,
            sender_rto_ns: 20_000_000,
            max_backoffs: 3000,
            initial_seq: 0,
            rx_extra: 8,
        }
    }
}

/// A set of ranks (bitset). Equal sets compare equal whatever their construction.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Targets {
    /// Bit `r % 64` of word `r / 64`; no trailing zero words.
    words: Vec<u64>,
}

impl Targets {
    /// The empty set.
    pub fn new() -> Targets {
        Targets { words: Vec::new() }
    }

    /// Makes this set equal to `other`, reusing its memory.
    pub fn assign(&mut self, other: &Targets) {
        self.words.clear();
        self.words.extend_from_slice(&other.words);
    }

    /// The set of `ranks` (duplicates allowed). Memory is proportional to the largest
    /// rank, so only pass ranks of the job.
    pub fn from_ranks(ranks: &[u32]) -> Targets {
        let mut t = Targets::new();
        for &r in ranks {
            t.insert(r);
        }
        t
    }

    /// The set `{rank}`.
    pub fn single(rank: u32) -> Targets {
        let mut t = Targets::new();
        t.insert(rank);
        t
    }

    /// Adds `rank`.
    pub fn insert(&mut self, rank: u32) {
        let w = (rank / 64) as usize;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (rank % 64);
    }

    /// Removes `rank`.
    pub fn remove(&mut self, rank: u32) {
        let w = (rank / 64) as usize;
        if let Some(x) = self.words.get_mut(w) {
            *x &= !(1 << (rank % 64));
        }
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Empties the set (keeps the allocation).
    pub fn clear(&mut self) {
        self.words.clear();
    }

    /// `rank` is in the set.
    pub fn contains(&self, rank: u32) -> bool {
        self.words
            .get((rank / 64) as usize)
            .is_some_and(|w| w & (1 << (rank % 64)) != 0)
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// No rank.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The largest rank, if any.
    pub fn max(&self) -> Option<u32> {
        let last = *self.words.last()?;
        Some((self.words.len() as u32 - 1) * 64 + 63 - last.leading_zeros())
    }

    /// The ranks in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            core::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some(i as u32 * 64 + b)
            })
        })
    }
}

impl fmt::Debug for Targets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// Where a datagram from [`crate::urtp::Urtp::poll_transmit`] goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrtpDest {
    /// Point-to-point to one rank.
    Unicast(u32),
    /// To the job's multicast group (or, where multicast is unavailable, as a unicast
    /// copy to every rank of [`UrtpTransmit::targets`]). Non-targets drop it.
    Multicast,
}

/// A datagram to put on the wire.
#[derive(Debug)]
pub struct UrtpTransmit<'a> {
    /// Destination.
    pub dest: UrtpDest,
    /// The target ranks (one rank for unicast).
    pub targets: &'a Targets,
    /// The complete datagram.
    pub bytes: &'a [u8],
}

/// What [`crate::urtp::Urtp::handle_packet`] did with a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrtpVerdict {
    /// A new data packet was buffered; `ready`: [`crate::urtp::Urtp::peek`] on its source
    /// now returns a packet.
    Buffered {
        /// The source has an in-order packet waiting.
        ready: bool,
    },
    /// A new in-order data packet that the caller's `consume` took straight from the
    /// datagram ([`crate::urtp::Urtp::handle_packet_consume`]): consumed as by
    /// [`crate::urtp::Urtp::pop`], never buffered.
    Consumed,
    /// A data packet already received (or consumed); dropped.
    Duplicate,
    /// A multicast packet that does not target the local rank; dropped.
    NotTarget,
    /// A data packet that could not be buffered (beyond the receive window, or the
    /// receive pool is full); dropped, it will be requested again.
    Dropped(&'static str),
    /// An ACK or REQ (processed).
    Control,
    /// Malformed or impossible; ignored (no state changed).
    Invalid(&'static str),
}

/// Events for the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrtpEvent {
    /// `max_backoffs` consecutive REQs / safety-net re-sends to `peer` went unanswered
    /// (no valid packet at all from it meanwhile). Reported once until it answers;
    /// retrying continues.
    PeerUnresponsive {
        /// The silent peer.
        peer: u32,
    },
}

/// Why [`crate::urtp::Urtp::send`] queued nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrtpSendError {
    /// The send window to `peer` is full.
    WindowFull {
        /// A target whose window is full.
        peer: u32,
    },
    /// No target.
    NoTargets,
    /// A target is out of range or the local rank.
    BadTarget {
        /// The offending rank.
        rank: u32,
    },
    /// The datagram (header, multicast extension, payload) would exceed the limit.
    TooLarge {
        /// Datagram length.
        len: usize,
        /// The limit ([`crate::urtp::Urtp::set_max_datagram`], or for a unicast packet
        /// [`crate::urtp::Urtp::set_unicast_max_datagram`]).
        max: usize,
    },
}

impl fmt::Display for UrtpSendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrtpSendError::WindowFull { peer } => write!(f, "send window to rank {peer} full"),
            UrtpSendError::NoTargets => f.write_str("no target"),
            UrtpSendError::BadTarget { rank } => write!(f, "invalid target rank {rank}"),
            UrtpSendError::TooLarge { len, max } => {
                write!(f, "datagram of {len} bytes exceeds the limit of {max}")
            }
        }
    }
}

impl std::error::Error for UrtpSendError {}

/// Counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UrtpStats {
    /// Data packets transmitted for the first time (a multicast counts once).
    pub data_sent: u64,
    /// Of those, multicast packets.
    pub multicasts_sent: u64,
    /// Data packets re-sent point-to-point (REQ answers and safety-net re-sends).
    pub resent: u64,
    /// Of those, safety-net re-sends (sender timeout, with `ACK_REQUEST`): of a small
    /// packet, or to a peer silent since the previous probe.
    pub rto_resent: u64,
    /// Safety-net probes sent (sender timeout: an ACK with `ACK_REQUEST`).
    pub probes_sent: u64,
    /// REQs transmitted.
    pub reqs_sent: u64,
    /// REQs received.
    pub reqs_received: u64,
    /// REQs ignored because they name a packet not sent yet.
    pub reqs_ignored_unsent: u64,
    /// REQs ignored because the packet was (re)sent less than δ ago.
    pub reqs_ignored_recent: u64,
    /// REQs naming a packet already acknowledged (ignored).
    pub reqs_stale: u64,
    /// Pure ACKs transmitted.
    pub acks_sent: u64,
    /// Data packets buffered ahead of a gap.
    pub buffered_out_of_order: u64,
    /// Packets consumed with [`crate::urtp::Urtp::pop`].
    pub delivered: u64,
    /// Duplicate data packets dropped.
    pub duplicates: u64,
    /// Multicast packets not targeting the local rank.
    pub not_target: u64,
    /// Data packets dropped because the receive pool was full.
    pub pool_full_drops: u64,
    /// Data packets beyond the receive window (dropped).
    pub out_of_window: u64,
    /// Datagrams rejected as invalid.
    pub invalid: u64,
}
