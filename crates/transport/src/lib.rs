//! phalanx datagram transports.
//!
//! Contract of this crate:
//! * [`Transport`] is the interface the phalanx progress engine drives. It is
//!   datagram-oriented, nonblocking and single-owner (`&mut self`): the engine
//!   sends with [`Transport::send_to`], drains with [`Transport::recv_batch`],
//!   sleeps on [`Transport::fds`] (see [`wait_readable`]) and calls
//!   [`Transport::service`] no later than [`Transport::next_deadline`].
//! * Datagrams may be lost, duplicated or reordered; reliability is the job
//!   of the protocols above. A transport never blocks for more than a few
//!   milliseconds in any call.
//! * [`UdpTransport`] is the real transport (a unicast UDP socket per rank, plus one on
//!   the job's multicast group, both behind a per-rank kernel filter: [`bpf`]);
//!   [`Faulty`] wraps any transport and injects seeded, replayable faults.
//! * [`Transport::send_multicast`] sends one datagram to a target set: one send to the
//!   group when [`Transport::multicast_available`], else unicast fan-out
//!   ([`Transport::multi_send`], one `sendmmsg` with one buffer and N addresses). The
//!   datagram itself carries the target bitmap; receivers outside it drop it (in the
//!   kernel when the filter is installed).
//! * The address a rank binds comes from `PHALANX_IP` via [`resolve_bind_ip`].
//! * Host identity ([`HostId`]) is the kernel boot id plus the network
//!   namespace inode, never the hostname.
//! * This crate reads no environment variable: the library's configuration
//!   (`phalanx::config`) reads them all once and hands over parsed values — the transport
//!   choice ([`parse_transport_kind`]), fault injection ([`FaultConfig::parse`]),
//!   multicast ([`McastSetting::from_lookup`]) and the kernel filter switch
//!   ([`parse_switch`]).

use std::net::SocketAddrV4;
use std::os::fd::RawFd;
use std::time::Duration;

pub mod bpf;
pub mod cost;
mod faulty;
pub mod gso;
mod host;
mod iface;
pub mod mac;
pub mod mcast;
mod udp;

pub use faulty::{FaultConfig, FaultParseError, Faulty, MAX_DELAY_US};
pub use host::HostId;
pub use iface::resolve_bind_ip;
pub use mcast::{group_for_key, McastSetting};
pub use udp::{UdpTransport, ENV_BPF};

/// Parses an on/off switch (`1|on|true|yes`, `0|off|false|no`, case-insensitive; empty
/// is `default`); anything else is an error message naming `name` and the value.
pub fn parse_switch(name: &str, v: Option<&str>, default: bool) -> Result<bool, String> {
    match v.map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) => match v.as_str() {
            "" => Ok(default),
            "1" | "on" | "true" | "yes" => Ok(true),
            "0" | "off" | "false" | "no" => Ok(false),
            other => Err(format!(
                "{name}={other:?} is not one of 0|1|off|on|false|true|no|yes"
            )),
        },
    }
}

/// Index of a process in a job.
pub type Rank = u32;

/// Counters kept by every transport. All values are cumulative since creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Datagrams handed to the kernel (`send_to` returned `Ok(true)` after a real send).
    pub sent: u64,
    /// Datagrams dropped on the send path because the socket stayed unwritable.
    pub send_dropped: u64,
    /// Datagrams delivered by `recv_batch` (all sockets).
    pub received: u64,
    /// Of `received`, those that came in on the unicast socket.
    pub received_unicast: u64,
    /// Of `received`, those that came in on the multicast socket.
    pub received_multicast: u64,
    /// Datagrams sent to the multicast group (one per `send_multicast` on the group path;
    /// also counted in `sent`).
    pub multicasts_sent: u64,
    /// `send_multicast` calls served by unicast fan-out (the per-destination datagrams
    /// are counted in `sent`).
    pub fanout_sends: u64,
    /// `recv_batch` calls that delivered at least one datagram.
    pub recv_batches: u64,
    /// Datagrams the kernel dropped on our sockets (`SO_RXQ_OVFL`, all sockets), 0 if
    /// unavailable. The kernel counts datagrams the socket filter rejected here too
    /// (both bump the socket's `sk_drops`), so with the filter installed this is queue
    /// overflows *plus* foreign/unwanted datagrams. The value is read from the next
    /// datagram that arrives, so it lags.
    pub kernel_drops: u64,
    /// Of `kernel_drops`, those on the multicast socket.
    pub kernel_drops_multicast: u64,
    /// Datagrams deliberately dropped by fault injection.
    pub faults_dropped: u64,
    /// Datagrams deliberately duplicated by fault injection.
    pub faults_duplicated: u64,
    /// Datagrams deliberately held back (reordered) by fault injection.
    pub faults_reordered: u64,
    /// Of `sent`, datagrams that went into a shared-memory ring (a medium that joins
    /// the rings to a socket).
    pub ring_sent: u64,
    /// Of `received`, datagrams that came out of a shared-memory ring.
    pub ring_received: u64,
    /// Send system calls made (`sendto`, `sendmmsg`), retried ones included: a
    /// multi-send to k destinations is one call where k sends are k.
    pub send_calls: u64,
    /// Datagrams dropped because their MAC was wrong (not the job's, forged, damaged).
    pub bad_mac: u64,
}

/// A datagram in two pieces, sent as their concatenation: a header, then a payload left
/// where it lies (in the sender's own buffer), so that it is not copied to be sent. Either
/// piece may be empty.
pub type Parts<'a> = [&'a [u8]; 2];

/// A datagram as the pieces it is sent from: a slice, or [`Parts`].
pub trait Pieces {
    /// The pieces, in wire order (an empty one is skipped).
    fn pieces(&self) -> Parts<'_>;
    /// The datagram's length.
    fn total(&self) -> usize {
        let [a, b] = self.pieces();
        a.len() + b.len()
    }
}

impl Pieces for &[u8] {
    #[inline]
    fn pieces(&self) -> Parts<'_> {
        [self, &[]]
    }
    #[inline]
    fn total(&self) -> usize {
        self.len()
    }
}

impl Pieces for Parts<'_> {
    #[inline]
    fn pieces(&self) -> Parts<'_> {
        *self
    }
}

/// A datagram transport used by the phalanx progress engine. Nonblocking.
pub trait Transport {
    /// Sends one datagram to `peer`. Nonblocking in spirit: on EAGAIN/ENOBUFS
    /// it waits for writability with poll() for at most ~1 ms a few times,
    /// then returns `Ok(false)` = dropped (counted; reliability protocols
    /// will retransmit). `Ok(true)` = handed to the kernel.
    fn send_to(&mut self, peer: Rank, datagram: &[u8]) -> std::io::Result<bool>;
    /// Sends one datagram to every rank of `targets` (the datagram carries the matching
    /// target bitmap): one send to the job's group when [`Transport::multicast_available`],
    /// else unicast fan-out. `Ok(true)` when it was handed to the kernel for every
    /// target, `Ok(false)` when back-pressure dropped it for some (counted). The default
    /// fans out with `send_to`.
    fn send_multicast(&mut self, datagram: &[u8], targets: &[Rank]) -> std::io::Result<bool> {
        Ok(self.multi_send(datagram, targets)? == targets.len())
    }
    /// Sends one datagram to each of `peers` (seed 002's multi-send; on UDP one
    /// `sendmmsg` with one buffer and N addresses). Returns how many destinations it was
    /// handed to the kernel for (the rest were dropped by back-pressure, counted). The
    /// default loops over `send_to`.
    fn multi_send(&mut self, datagram: &[u8], peers: &[Rank]) -> std::io::Result<usize> {
        let mut n = 0;
        for &p in peers {
            n += usize::from(self.send_to(p, datagram)?);
        }
        Ok(n)
    }
    /// Sends the datagrams of `run`, in order, to `peer`: what a reliability protocol
    /// has ready for one peer at once. On UDP, consecutive datagrams of equal size leave
    /// in one segmented send where the kernel offers it ([`gso`]). Returns how many were
    /// handed to the kernel (the others were dropped by back-pressure, counted). The
    /// default loops over `send_to`.
    fn send_run(&mut self, peer: Rank, run: &[&[u8]]) -> std::io::Result<usize> {
        let mut n = 0;
        for d in run {
            n += usize::from(self.send_to(peer, d)?);
        }
        Ok(n)
    }
    /// [`send_run`](Self::send_run) for datagrams in pieces ([`Parts`]): each leaves as the
    /// concatenation of its pieces. UDP sends the pieces where they lie (one iovec each,
    /// sealed in pieces); the default copies each two-piece datagram into one buffer.
    fn send_run_parts(&mut self, peer: Rank, run: &[Parts<'_>]) -> std::io::Result<usize> {
        let mut n = 0;
        for [a, b] in run {
            n += usize::from(if b.is_empty() {
                self.send_to(peer, a)?
            } else {
                self.send_to(peer, &[*a, *b].concat())?
            });
        }
        Ok(n)
    }
    /// [`send_multicast`](Self::send_multicast) for each datagram of `run`, in order, to
    /// the same `targets`: on UDP with a joined group, consecutive equal-size datagrams
    /// leave in one segmented send. Returns how many went out for every target. The
    /// default loops over `send_multicast`.
    fn send_multicast_run(&mut self, run: &[&[u8]], targets: &[Rank]) -> std::io::Result<usize> {
        let mut n = 0;
        for d in run {
            n += usize::from(self.send_multicast(d, targets)?);
        }
        Ok(n)
    }
    /// Whether `send_multicast` reaches the targets with one send (a joined group).
    fn multicast_available(&self) -> bool {
        false
    }
    /// Appends peers (ranks that joined the job after start-up: `MPI_Comm_spawn`), in
    /// rank order after the known ones. `false` when this transport cannot grow (the
    /// caller reports it); the default.
    fn add_peers(&mut self, addrs: &[SocketAddrV4]) -> bool {
        let _ = addrs;
        false
    }
    /// Drains up to one batch of received datagrams without blocking,
    /// calling `f(from_addr, bytes)` for each. Returns how many.
    fn recv_batch(&mut self, f: &mut dyn FnMut(SocketAddrV4, &[u8])) -> std::io::Result<usize>;
    /// File descriptors to wait on (poll/epoll) for readability.
    fn fds(&self) -> Vec<RawFd>;
    /// Whether `recv_batch` also drains the multicast socket (default on). The engine
    /// turns it off while no collective is in flight, saving a system call per progress
    /// round on the point-to-point fast path; sleeping waits always watch every fd.
    fn set_poll_multicast(&mut self, on: bool) {
        let _ = on;
    }
    /// Time (ns, caller's clock) at which `service` must be called again
    /// (e.g. a held reordered packet), if any. May be in the past: then call
    /// `service` now.
    fn next_deadline(&self) -> Option<u64>;
    /// Lets time-based work happen (release delayed/held packets). `now` in ns.
    fn service(&mut self, now: u64) -> std::io::Result<()>;
    /// Largest datagram this transport carries (bytes, including phalanx's header) to
    /// every destination, multicast included.
    fn max_datagram(&self) -> usize;
    /// Largest datagram to `peer` alone: at least [`max_datagram`](Self::max_datagram),
    /// more where the path to it allows (UDP to a rank of this host goes through the
    /// host's loopback, whatever the MTU of the interface carrying the address). The
    /// default is `max_datagram`.
    fn max_datagram_to(&self, peer: Rank) -> usize {
        let _ = peer;
        self.max_datagram()
    }
    /// Datagrams of [`max_datagram`](Self::max_datagram) bytes the receive buffer the
    /// kernel granted can hold unread (0 = unknown).
    fn recv_frames(&self) -> u64 {
        0
    }
    /// Cumulative counters.
    fn stats(&self) -> TransportStats;
    /// About to sleep in `poll()` on [`fds`](Self::fds): a medium whose senders wake a
    /// sleeper only when asked (shared-memory rings) announces it here, and returns false
    /// if data arrived meanwhile (do not sleep). Sockets need nothing: the default.
    fn prepare_sleep(&mut self) -> bool {
        true
    }
}

/// The transports that can be selected with `PHALANX_TRANSPORT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// Unicast UDP sockets ([`UdpTransport`]) to every peer.
    Udp,
    /// Shared memory between the ranks of one host (an error if it cannot be set up).
    Shm,
    /// Shared memory between the ranks of one host when available, UDP otherwise.
    Auto,
}

/// Parses a `PHALANX_TRANSPORT` value: `udp`, `shm`, or `auto` (also empty: shared
/// memory between ranks of one host, UDP otherwise). Anything else is an error message
/// naming the value.
pub fn parse_transport_kind(v: &str) -> Result<TransportKind, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "" | "auto" => Ok(TransportKind::Auto),
        "udp" => Ok(TransportKind::Udp),
        "shm" => Ok(TransportKind::Shm),
        other => Err(format!(
            "PHALANX_TRANSPORT={other:?} is not a known transport (expected auto|udp|shm)"
        )),
    }
}

/// Blocks in `ppoll()` on `fds` for readability until `timeout`
/// (`None` = forever). Returns `true` if any fd is readable (or has an error
/// or hang-up pending, which a read will report). Returns `false` on timeout
/// and on EINTR (the caller re-evaluates its state). With no fds it simply
/// sleeps for `timeout`.
pub fn wait_readable(fds: &[RawFd], timeout: Option<Duration>) -> std::io::Result<bool> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfds` is a valid, exclusively borrowed array of `pfds.len()`
    // pollfd structs; `ts_ptr` is null or points to a timespec that lives
    // until the call returns; a null sigmask means "do not change the mask".
    let rc = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            return Ok(false);
        }
        return Err(err);
    }
    Ok(rc > 0
        && pfds
            .iter()
            .any(|p| p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_parsing() {
        assert_eq!(parse_transport_kind(""), Ok(TransportKind::Auto));
        assert_eq!(parse_transport_kind("udp"), Ok(TransportKind::Udp));
        assert_eq!(parse_transport_kind(" AUTO "), Ok(TransportKind::Auto));
        assert_eq!(parse_transport_kind("shm"), Ok(TransportKind::Shm));
        let e = parse_transport_kind("carrier-pigeon").unwrap_err();
        assert!(e.contains("carrier-pigeon"), "{e}");
    }
}
