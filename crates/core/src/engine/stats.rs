//! Per-rank counters, printed at Finalize when `PHALANX_STATS=1`.

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
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sent={} received={} retransmits={} pure_acks={} dup_acks={} \
             drop_malformed={} drop_foreign={} drop_duplicate={} drop_out_of_window={} \
             drop_invalid={} drop_no_buffer={} kernel_drops={} send_errors={} sleeps={} \
             faults_dropped={} faults_duplicated={} faults_reordered={} drop_not_target={} \
             urtp_data={} urtp_multicasts={} urtp_resent={} urtp_reqs={} shm_sent={} \
             shm_received={} single_copies={} board_collectives={} hier_collectives={} \
             careful_held={} careful_copied_out={} multi_sends={} careful_multi={} \
             timeouts={} fast_retransmits={} window={} resume_sent={} resume_missing={} \
             bad_mac={} spurious_timeouts={} probes={}",
            self.datagrams_sent,
            self.datagrams_received,
            self.retransmits,
            self.pure_acks,
            self.dup_acks,
            self.drop_malformed,
            self.drop_foreign,
            self.drop_duplicate,
            self.drop_out_of_window,
            self.drop_invalid,
            self.drop_no_buffer,
            self.kernel_drops,
            self.send_errors,
            self.sleeps,
            self.faults_dropped,
            self.faults_duplicated,
            self.faults_reordered,
            self.drop_not_target,
            self.urtp_data,
            self.urtp_multicasts,
            self.urtp_resent,
            self.urtp_reqs,
            self.shm_sent,
            self.shm_received,
            self.single_copies,
            self.board_collectives,
            self.hier_collectives,
            self.careful_held,
            self.careful_copied_out,
            self.multi_sends,
            self.careful_multi,
            self.timeouts,
            self.fast_retransmits,
            self.window,
            self.resume_sent,
            self.resume_missing,
            self.bad_mac,
            self.spurious_timeouts,
            self.probes
        )
    }
}
