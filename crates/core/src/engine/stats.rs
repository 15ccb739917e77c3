//! Per-rank counters, printed at Finalize when `PHALANX_STATS=1` and sent to the launcher
//! for its per-job summary when `phalanx run --stats` asked for them; and the table of
//! which algorithm ran each collective, kept per process ([`count_collective`]).
//!
//! Contract: counting costs the hot paths a load and a store (no locked instruction, no
//! branch on whether anyone will read them); at `MPI_THREAD_MULTIPLE` two threads may
//! lose one of each other's increments, never corrupt a counter.

use std::fmt;

/// Counters of one rank.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Datagrams handed to the transport.
    pub datagrams_sent: u64,
    /// Datagrams received from the transport.
    pub datagrams_received: u64,
    /// Retransmitted data packets.
    pub retransmits: u64,
    /// Pure acknowledgements sent.
    pub pure_acks: u64,
    /// Duplicate acknowledgements sent.
    pub dup_acks: u64,
    /// Dropped: not a phalanx datagram or malformed.
    pub drop_malformed: u64,
    /// Dropped: wrong job key or unknown sender address.
    pub drop_foreign: u64,
    /// Dropped: already received (duplicate).
    pub drop_duplicate: u64,
    /// Dropped: out of the receive window (a gap before it).
    pub drop_out_of_window: u64,
    /// Dropped: protocol-invalid (bad rank, acknowledgement of unsent data).
    pub drop_invalid: u64,
    /// Dropped: no buffer for an unexpected message (the sender retransmits).
    pub drop_no_buffer: u64,
    /// Dropped by the kernel for lack of socket buffer.
    pub kernel_drops: u64,
    /// Dropped: the datagram's MAC was wrong (not sealed by the job: a stranger's, a
    /// forgery, damage).
    pub bad_mac: u64,
    /// Send system calls that failed.
    pub send_errors: u64,
    /// Times a wait went to sleep in the kernel.
    pub sleeps: u64,
    /// Dropped: multicast packets not targeting this rank (reached user space).
    pub drop_not_target: u64,
    /// URTP data packets first sent (a multicast counts once).
    pub urtp_data: u64,
    /// URTP multicast packets sent.
    pub urtp_multicasts: u64,
    /// URTP packets re-sent (REQ answers, safety net).
    pub urtp_resent: u64,
    /// URTP REQs sent.
    pub urtp_reqs: u64,
    /// Of the URTP re-sends, the safety net's (sender timeout), not answers to REQs.
    pub urtp_rto_resent: u64,
    /// URTP data packets that arrived ahead of a gap (buffered out of order).
    pub urtp_out_of_order: u64,
    /// Frames put in shared-memory rings.
    pub shm_sent: u64,
    /// Frames taken from shared-memory rings.
    pub shm_received: u64,
    /// Rendezvous messages pulled with one copy (`process_vm_readv`).
    pub single_copies: u64,
    /// Blocking collectives run on the shared-memory board.
    pub board_collectives: u64,
    /// Blocking collectives run hierarchically (boards inside hosts, network between).
    pub hier_collectives: u64,
    /// Injected faults: dropped datagrams.
    pub faults_dropped: u64,
    /// Injected faults: duplicated datagrams.
    pub faults_duplicated: u64,
    /// Injected faults: reordered datagrams.
    pub faults_reordered: u64,
    /// Careful frames held in their receive buffer (no receive posted yet) at arrival.
    pub careful_held: u64,
    /// Held careful frames moved to ordinary memory on the protocol's advice.
    pub careful_copied_out: u64,
    /// Datagrams handed to a link for several destinations in one call (multi-send).
    pub multi_sends: u64,
    /// Careful frames sent to several readers as one multi-target frame.
    pub careful_multi: u64,
    /// Go-back-n retransmission timer expiries.
    pub timeouts: u64,
    /// Go-back-n fast retransmits (a duplicate ACK reporting a gap).
    pub fast_retransmits: u64,
    /// Go-back-n timeouts found spurious by the next ACK (nothing more was re-sent).
    pub spurious_timeouts: u64,
    /// go-back-n probes: first timeouts answered by a pure ACK asking for an ACK
    /// instead of a data retransmission.
    pub probes: u64,
    /// The go-back-n send window in packets (after `PHALANX_COMM_BUDGET`).
    pub window: u64,
    /// Resume exchanges after a halt: announcements sent (re-sends included).
    pub resume_sent: u64,
    /// Resume exchanges: peers that had not answered when the wait for them ended.
    pub resume_missing: u64,
    /// Point-to-point messages sent eagerly (shared-memory fast path, self and network).
    pub eager_sent: u64,
    /// Their payload bytes.
    pub eager_bytes: u64,
    /// Point-to-point messages sent by rendezvous (single-copy pulls included).
    pub rndv_sent: u64,
    /// Their payload bytes.
    pub rndv_bytes: u64,
    /// Of `rndv_sent`, those whose data left from the send buffer (zero-copy over UDP).
    pub rndv_zero_copy: u64,
    /// Of those, sends whose ACKs took longer than the zero-copy wait (their unacknowledged
    /// datagrams were copied and the send completed).
    pub rndv_ack_waits_expired: u64,
    /// Collective calls this rank took part in (every algorithm, the board's included).
    pub coll_calls: u64,
    /// Bytes those calls moved from this rank's send buffers.
    pub coll_bytes: u64,
    /// Nanoseconds spent in the engine's blocking waits (a wait's length is read off the
    /// clock its progress rounds read anyway, so a wait shorter than a round may count 0).
    pub wait_ns: u64,
    /// Blocking waits entered (a wait already satisfied counts too).
    pub waits: u64,
}

impl Stats {
    /// Every counter with its name, in the order `Display` prints them.
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("sent", self.datagrams_sent),
            ("received", self.datagrams_received),
            ("retransmits", self.retransmits),
            ("pure_acks", self.pure_acks),
            ("dup_acks", self.dup_acks),
            ("drop_malformed", self.drop_malformed),
            ("drop_foreign", self.drop_foreign),
            ("drop_duplicate", self.drop_duplicate),
            ("drop_out_of_window", self.drop_out_of_window),
            ("drop_invalid", self.drop_invalid),
            ("drop_no_buffer", self.drop_no_buffer),
            ("kernel_drops", self.kernel_drops),
            ("send_errors", self.send_errors),
            ("sleeps", self.sleeps),
            ("faults_dropped", self.faults_dropped),
            ("faults_duplicated", self.faults_duplicated),
            ("faults_reordered", self.faults_reordered),
            ("drop_not_target", self.drop_not_target),
            ("urtp_data", self.urtp_data),
            ("urtp_multicasts", self.urtp_multicasts),
            ("urtp_resent", self.urtp_resent),
            ("urtp_reqs", self.urtp_reqs),
            ("urtp_rto_resent", self.urtp_rto_resent),
            ("urtp_out_of_order", self.urtp_out_of_order),
            ("shm_sent", self.shm_sent),
            ("shm_received", self.shm_received),
            ("single_copies", self.single_copies),
            ("board_collectives", self.board_collectives),
            ("hier_collectives", self.hier_collectives),
            ("careful_held", self.careful_held),
            ("careful_copied_out", self.careful_copied_out),
            ("multi_sends", self.multi_sends),
            ("careful_multi", self.careful_multi),
            ("timeouts", self.timeouts),
            ("fast_retransmits", self.fast_retransmits),
            ("window", self.window),
            ("resume_sent", self.resume_sent),
            ("resume_missing", self.resume_missing),
            ("bad_mac", self.bad_mac),
            ("spurious_timeouts", self.spurious_timeouts),
            ("probes", self.probes),
            ("eager_sent", self.eager_sent),
            ("eager_bytes", self.eager_bytes),
            ("rndv_sent", self.rndv_sent),
            ("rndv_bytes", self.rndv_bytes),
            ("rndv_zero_copy", self.rndv_zero_copy),
            ("rndv_ack_waits_expired", self.rndv_ack_waits_expired),
            ("coll_calls", self.coll_calls),
            ("coll_bytes", self.coll_bytes),
            ("wait_ns", self.wait_ns),
            ("waits", self.waits),
        ]
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, v)) in self.fields().into_iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name}={v}")?;
        }
        Ok(())
    }
}

use crate::coll::algorithm::Algorithm;
use crate::coll::CollKind;
use std::sync::atomic::{AtomicU64, Ordering};

/// Collective kinds and algorithms the table has room for (their discriminants index it).
const KINDS: usize = 32;
const ALGOS: usize = 32;

/// Calls per (collective kind, algorithm) of this process.
static COLL_TABLE: [[AtomicU64; ALGOS]; KINDS] =
    [const { [const { AtomicU64::new(0) }; ALGOS] }; KINDS];

/// Bytes of the send buffers of this process's collective calls.
static COLL_BYTES: AtomicU64 = AtomicU64::new(0);

/// Adds `n` to `c` without a locked instruction (module docs).
#[inline]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// One collective call of `kind` ran (or started) with `alg`, sending `bytes` from this
/// rank's buffers.
#[inline]
pub(crate) fn count_collective(kind: CollKind, alg: Algorithm, bytes: usize, members: usize) {
    if crate::trace::on() {
        crate::trace::instant(
            crate::trace::Kind::Coll,
            kind.label(),
            alg.name(),
            [members as u64, 0, bytes as u64],
            0,
        );
    }
    let (k, a) = (kind as usize, alg as usize);
    if k < KINDS && a < ALGOS {
        bump(&COLL_TABLE[k][a], 1);
    }
    bump(&COLL_BYTES, bytes as u64);
}

/// Collective calls and their send bytes so far (this process).
pub(crate) fn collective_totals() -> (u64, u64) {
    let calls = COLL_TABLE
        .iter()
        .flatten()
        .map(|c| c.load(Ordering::Relaxed))
        .sum();
    (calls, COLL_BYTES.load(Ordering::Relaxed))
}

/// Every (kind, algorithm, calls) of this process with at least one call.
pub fn collective_algorithms() -> Vec<(&'static str, &'static str, u64)> {
    let mut out = Vec::new();
    for kind in CollKind::ALL {
        for alg in Algorithm::all() {
            let n = COLL_TABLE[kind as usize][alg as usize].load(Ordering::Relaxed);
            if n > 0 {
                out.push((kind.label(), alg.name(), n));
            }
        }
    }
    out
}
