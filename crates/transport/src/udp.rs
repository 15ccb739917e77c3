//! UDP transport: a unicast socket per rank, optionally a second socket on the job's IP
//! multicast group, and a per-rank kernel filter on both.
//!
//! Contract:
//! * [`UdpTransport::bind`]: one nonblocking UDP socket bound to `ip:0`, with large kernel
//!   buffers (32 MiB via `SO_*BUFFORCE` when privileged, else as large as `SO_*BUF`
//!   allows) and `SO_RXQ_OVFL`, so kernel receive-queue drops are counted.
//!   `max_datagram` = min(MTU − 28, 65507) for the interface carrying `ip` (65507 on
//!   loopback, 1472 on a veth with MTU 1500). To one peer alone the limit is larger when
//!   its address is a loopback one or this socket's own (another rank of this host: the
//!   kernel routes it through the host's loopback, whatever the interface carrying the
//!   address): [`Transport::max_datagram_to`] gives the loopback's limit (min(MTU − 28,
//!   65507) of `lo`, read at bind), and sends to that peer are checked against it.
//! * [`UdpTransport::join_multicast`] adds a second socket bound to the job's group and port
//!   (`SO_REUSEADDR` + `SO_REUSEPORT`; every member socket gets its own copy of each
//!   multicast), joined on the interface carrying the unicast address; multicasts are sent
//!   from the unicast socket (so the source address is the rank's endpoint) with that
//!   interface, loop on and TTL 1. `PHALANX_MCAST=0` leaves multicast unavailable, and
//!   [`Transport::send_multicast`] then fans out over unicast. See [`crate::mcast`].
//! * [`UdpTransport::install_filter`] attaches the classic BPF program of [`crate::bpf`] to
//!   both sockets (and to a multicast socket joined later); `PHALANX_BPF=0` disables it.
//! * Sends are nonblocking in spirit: on EAGAIN/ENOBUFS a send waits for writability for
//!   at most ~1 ms a few times and then drops (`Ok(false)` / fewer than asked, counted in
//!   `send_dropped`). Oversized datagrams and unknown ranks are `InvalidInput` errors.
//!   `multi_send` / fan-out is one `sendmmsg(2)`: one buffer, one address per destination.
//! * `recv_batch` does one `recvmmsg(2)` of up to [`RECV_BATCH`] datagrams on each socket
//!   into buffers allocated once (64 KiB each, so nothing is truncated), never blocks, and
//!   reports each sender's unicast address. `fds()` returns both sockets.
//! * [`UdpTransport::authenticate`] seals every datagram sent afterwards with the job's
//!   MAC and opens every one received ([`crate::mac`]): a datagram whose tag is wrong
//!   (a stranger's, a forged one, a damaged one) is dropped and counted in `bad_mac`,
//!   and `max_datagram` shrinks by the trailer. A sealed datagram is one `sendmsg` (or
//!   `sendmmsg` entry) of its pieces (the datagram, or a header and a payload, then the
//!   trailer), except where short datagrams are gathered (below).
//! * [`Transport::send_run_parts`] takes datagrams in two pieces ([`crate::Parts`]: a
//!   header and a payload left in the sender's buffer) and sends each piece where it
//!   lies, one iovec each (empty ones skipped), sealed in pieces
//!   ([`crate::mac::Seal::trailer_parts`]); on the wire it is their concatenation.
//! * Short datagrams (at most [`crate::gso::GATHER_MAX`] with the trailer) that would
//!   leave in more than one piece each (sealed, or a header and a payload) are gathered
//!   instead: copied with their trailers into one staging buffer, sealed there, and sent
//!   as one piece — a datagram in two pieces alone, or a segmented run of any
//!   (`send_run`, `send_run_parts`, multicast runs; measurements in [`crate::gso`]).
//! * [`Transport::send_run`] (a run of datagrams to one peer) sends consecutive
//!   equal-size datagrams in one segmented `sendmsg` once
//!   [`UdpTransport::set_segmentation`] is on, and `recv_batch` cuts a coalesced receive
//!   back into its datagrams (each opened on its own): see [`crate::gso`]. The wire is
//!   the same datagrams either way.
//! * No time-based work: `next_deadline` is `None`, `service` does nothing.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, Socket, Type};

use crate::iface::{interface_mtu, Interface};
use crate::mac::{Seal, TRAILER};
use crate::mcast::{self, group_for_key, McastSetting};
use crate::{bpf, Parts, Pieces, Rank, Transport, TransportStats};

/// Datagrams drained per socket per `recv_batch` call.
pub const RECV_BATCH: usize = 32;
/// Environment variable disabling the kernel filter (`PHALANX_BPF=0`).
pub const ENV_BPF: &str = "PHALANX_BPF";
/// Receive buffer per datagram: the largest possible UDP payload fits.
const RECV_BUF: usize = 65536;
/// Requested kernel socket buffer size.
const SOCK_BUF: usize = 32 << 20;
/// Largest UDP payload over IPv4.
const MAX_UDP_PAYLOAD: usize = 65507;
/// IPv4 + UDP header bytes.
const IP_UDP_HEADERS: usize = 28;
/// Control-message space per datagram (room for the SO_RXQ_OVFL u32), in u64s.
const CMSG_WORDS: usize = 8;
/// Writability waits on EAGAIN/ENOBUFS before dropping.
const SEND_RETRIES: usize = 3;
/// Per-wait poll timeout, ms.
const SEND_WAIT_MS: libc::c_int = 1;

/// Receive-side state for `recvmmsg`: all buffers allocated once.
struct RecvRing {
    /// `RECV_BATCH * RECV_BUF` payload bytes.
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_in>,
    /// `RECV_BATCH * CMSG_WORDS` words (u64 for cmsghdr alignment).
    ctrl: Vec<u64>,
    hdrs: Vec<libc::mmsghdr>,
    /// Latest `SO_RXQ_OVFL` value seen (cumulative per socket).
    drops: u64,
}

impl RecvRing {
    fn new() -> Box<RecvRing> {
        // SAFETY: iovec, sockaddr_in and mmsghdr are plain C structs for which
        // all-zero bytes is a valid value (null pointers, zero lengths).
        let (iov0, name0, hdr0) = unsafe {
            (
                mem::zeroed::<libc::iovec>(),
                mem::zeroed::<libc::sockaddr_in>(),
                mem::zeroed::<libc::mmsghdr>(),
            )
        };
        let mut r = Box::new(RecvRing {
            bufs: vec![0u8; RECV_BATCH * RECV_BUF],
            iovs: vec![iov0; RECV_BATCH],
            names: vec![name0; RECV_BATCH],
            ctrl: vec![0u64; RECV_BATCH * CMSG_WORDS],
            hdrs: vec![hdr0; RECV_BATCH],
            drops: 0,
        });
        // The Vecs are never resized afterwards, so these heap pointers stay
        // valid for the life of the ring (moving the Box/Vec headers does not
        // move the heap storage).
        let bufs = r.bufs.as_mut_ptr();
        for i in 0..RECV_BATCH {
            r.iovs[i] = libc::iovec {
                // SAFETY: i * RECV_BUF < bufs.len(), so the offset stays in bounds.
                iov_base: unsafe { bufs.add(i * RECV_BUF) }.cast(),
                iov_len: RECV_BUF,
            };
        }
        let iovs = r.iovs.as_mut_ptr();
        let names = r.names.as_mut_ptr();
        let ctrl = r.ctrl.as_mut_ptr();
        for i in 0..RECV_BATCH {
            let h = &mut r.hdrs[i].msg_hdr;
            // SAFETY: i < RECV_BATCH = len of iovs and names; i * CMSG_WORDS <
            // len of ctrl. All offsets stay in bounds of their allocations.
            unsafe {
                h.msg_iov = iovs.add(i);
                h.msg_name = names.add(i).cast();
                h.msg_control = ctrl.add(i * CMSG_WORDS).cast();
            }
            h.msg_iovlen = 1;
        }
        r
    }

    /// Resets the in/out fields the kernel overwrites.
    fn reset(&mut self) {
        for h in &mut self.hdrs {
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_hdr.msg_controllen = CMSG_WORDS * 8;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
    }

    /// One nonblocking `recvmmsg` on `fd`, handing each datagram to `f` — with `seal`,
    /// only those whose tag is right, without their trailer (the others are counted in
    /// `bad`). Returns the datagrams handed over.
    fn drain(
        &mut self,
        fd: RawFd,
        seal: Option<&Seal>,
        bad: &mut u64,
        f: &mut dyn FnMut(SocketAddrV4, &[u8]),
    ) -> io::Result<usize> {
        self.reset();
        // SAFETY: every mmsghdr points at buffers owned by `self` that are valid for the
        // lengths set in `new`/`reset`; the kernel writes at most RECV_BATCH entries; a
        // null timeout is allowed.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                RECV_BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
                _ => Err(e),
            };
        }
        let n = n as usize;
        let mut taken = 0;
        for i in 0..n {
            let hdr = &self.hdrs[i];
            let len = (hdr.msg_len as usize).min(RECV_BUF);
            let (drops, seg) = if hdr.msg_hdr.msg_controllen > 0 {
                control(&hdr.msg_hdr)
            } else {
                (None, None)
            };
            if let Some(d) = drops {
                self.drops = self.drops.max(u64::from(d));
            }
            let from = from_sockaddr_in(&self.names[i]);
            let start = i * RECV_BUF;
            let whole = &self.bufs[start..start + len];
            // A coalesced receive (UDP_GRO) holds several datagrams of one sender.
            for d in crate::gso::segments(whole, seg.unwrap_or(len)) {
                match seal {
                    None => f(from, d),
                    Some(s) => match s.open(d) {
                        Some(d) => f(from, d),
                        None => {
                            *bad += 1;
                            continue;
                        }
                    },
                }
                taken += 1;
            }
        }
        Ok(taken)
    }
}

/// The multicast half: a socket on the group, its receive ring, the group address.
struct Group {
    sock: Socket,
    addr: SocketAddrV4,
    dest: libc::sockaddr_in,
    rx: Box<RecvRing>,
}

/// A UDP transport. See the module docs for its contract.
pub struct UdpTransport {
    sock: Socket,
    local: SocketAddrV4,
    /// The interface carrying `local` (None when bound to 0.0.0.0).
    iface: Option<Interface>,
    /// Peer table (index = rank) in kernel form, for a conversion-free send.
    peers: Vec<libc::sockaddr_in>,
    max_datagram: usize,
    /// The largest datagram through the host's loopback (its MTU less the headers), to a
    /// rank of this host.
    loopback_max_datagram: usize,
    rx: Box<RecvRing>,
    group: Option<Group>,
    /// The installed filter program, re-applied to a multicast socket joined later.
    filter: Option<Vec<libc::sock_filter>>,
    stats: TransportStats,
    /// Whether `recv_batch` drains the multicast socket too.
    poll_group: bool,
    /// The job's MAC, once [`UdpTransport::authenticate`]d.
    seal: Option<Seal>,
    /// Runs of datagrams to one peer leave in segmented sends ([`crate::gso`]).
    gso: bool,
    /// Where short datagrams are gathered before they leave ([`crate::gso::Stage`]).
    stage: crate::gso::Stage,
}

// SAFETY: the raw pointers inside `RecvRing` (iovec bases, msg_name,
// msg_control, msg_iov) point only into heap buffers owned by the same
// `RecvRing`, which moves together with the transport and is only used
// through `&mut self`. `sock_filter` holds no pointers. Nothing is shared
// with other threads.
unsafe impl Send for UdpTransport {}

impl UdpTransport {
    /// Binds a unicast UDP socket on `ip` port 0: nonblocking, large
    /// SO_RCVBUF/SO_SNDBUF (SO_RCVBUFFORCE/SO_SNDBUFFORCE 32 MiB when
    /// permitted), SO_RXQ_OVFL enabled if possible. `max_datagram` comes from
    /// the MTU of the interface that carries `ip`.
    pub fn bind(ip: Ipv4Addr) -> io::Result<UdpTransport> {
        let sock = new_socket()?;
        sock.bind(&SocketAddrV4::new(ip, 0).into())?;
        let local = sock
            .local_addr()?
            .as_socket_ipv4()
            .ok_or_else(|| io::Error::other("bound socket has no IPv4 address"))?;
        let iface = if ip.is_unspecified() {
            None
        } else {
            Some(Interface::carrying(ip)?)
        };
        let mtu = match &iface {
            Some(i) => i.mtu(sock.as_raw_fd())?,
            None => interface_mtu(sock.as_raw_fd(), ip)?,
        };
        let max_datagram = mtu.saturating_sub(IP_UDP_HEADERS).min(MAX_UDP_PAYLOAD);
        // Without a readable loopback MTU, nothing larger than the interface's.
        let loopback_max_datagram = interface_mtu(sock.as_raw_fd(), Ipv4Addr::LOCALHOST)
            .map_or(max_datagram, |m| {
                m.saturating_sub(IP_UDP_HEADERS).min(MAX_UDP_PAYLOAD)
            });
        Ok(UdpTransport {
            sock,
            local,
            iface,
            peers: Vec::new(),
            max_datagram,
            loopback_max_datagram,
            rx: RecvRing::new(),
            group: None,
            filter: None,
            stats: TransportStats::default(),
            poll_group: true,
            seal: None,
            gso: false,
            stage: crate::gso::Stage::default(),
        })
    }

    /// The bound address (with the kernel-chosen port).
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// Turns segmentation offload on ([`crate::gso`]): runs of equal datagrams to one
    /// peer leave in one send, and the kernel may hand several received datagrams of one
    /// sender over at once. Where the kernel cannot, sends stay datagram by datagram.
    /// Returns whether receives are coalesced.
    pub fn set_segmentation(&mut self, on: bool) -> bool {
        self.gso = on;
        if let Some(g) = self.group.as_ref().filter(|_| on) {
            crate::gso::enable_gro(&g.sock);
        }
        on && crate::gso::enable_gro(&self.sock)
    }

    /// A run of datagrams to `addr` (a peer or the group): segmented batches where the
    /// path allows ([`crate::gso::batch_len`]), else one by one. Returns how many were
    /// handed to the kernel.
    fn send_run_to<D: Pieces>(&mut self, addr: &libc::sockaddr_in, run: &[D]) -> io::Result<usize> {
        let addr = *addr;
        let trailer = if self.seal.is_some() { TRAILER } else { 0 };
        let (mut done, mut handed) = (0, 0);
        while done < run.len() {
            let n = if self.gso {
                crate::gso::batch_len(&run[done..], trailer)
            } else {
                1
            };
            let batch = &run[done..done + n];
            for d in batch {
                self.check_len_to(d.total(), &addr)?;
            }
            if n == 1 {
                handed += usize::from(self.send_addr(&addr, &batch[0])?);
                done += 1;
                continue;
            }
            match self.send_segmented(&addr, batch) {
                Ok(sent) => handed += if sent { n } else { 0 },
                Err(e) if crate::gso::unsupported(&e) => {
                    // This path cannot segment: datagram by datagram from now on.
                    self.gso = false;
                    continue;
                }
                Err(e) => return Err(e),
            }
            done += n;
        }
        Ok(handed)
    }

    /// `run[..n]` (a [`crate::gso::batch_len`] batch of 2 or more) to `addr` in one
    /// segmented send, with the bounded wait on back-pressure. `Ok(false)`: dropped.
    fn send_segmented<D: Pieces>(
        &mut self,
        addr: &libc::sockaddr_in,
        run: &[D],
    ) -> io::Result<bool> {
        let fd = self.sock.as_raw_fd();
        let t = if self.seal.is_some() { TRAILER } else { 0 };
        let seg = run.first().map_or(0, |d| d.total() + t);
        // Segments of one piece each (unsealed, whole datagrams) gain nothing from it.
        let pieces = run.first().map_or(0, |d| {
            d.pieces().iter().filter(|p| !p.is_empty()).count() + usize::from(t > 0)
        });
        let gathered = seg <= crate::gso::GATHER_MAX && pieces > 1;
        let trailers: Option<Vec<[u8; TRAILER]>> = if gathered {
            self.stage.gather(run, self.seal.as_mut());
            None
        } else {
            self.seal
                .as_mut()
                .map(|s| run.iter().map(|d| s.trailer_parts(&d.pieces())).collect())
        };
        let n = run.len() as u64;
        for attempt in 0..=SEND_RETRIES {
            self.stats.send_calls += 1;
            let sent = if gathered {
                crate::gso::send_gathered(fd, addr, self.stage.gathered(), seg)
            } else {
                crate::gso::send_segmented(fd, addr, run, trailers.as_deref())
            };
            match sent {
                Ok(()) => {
                    self.stats.sent += n;
                    return Ok(true);
                }
                Err(e) if transient(&e) && attempt < SEND_RETRIES => wait_writable(fd),
                Err(e) if transient(&e) => break,
                Err(e) => return Err(e),
            }
        }
        self.stats.send_dropped += n;
        Ok(false)
    }

    /// Datagrams of the largest size ([`Transport::max_datagram`]) the receive buffer the
    /// kernel granted (`SO_RCVBUF` as read back) holds unread. The kernel charges each
    /// queued datagram its buffer's true size, counted here as the payload plus 1 KiB of
    /// bookkeeping, rounded up to a power of two (its allocation); 0 if unreadable.
    pub fn recv_frames(&self) -> u64 {
        let Ok(granted) = self.sock.recv_buffer_size() else {
            return 0;
        };
        let cost = (self.max_datagram + 1024).next_power_of_two();
        (granted / cost) as u64
    }

    /// Installs the job's endpoint table (index = rank).
    pub fn set_peers(&mut self, peers: Vec<SocketAddrV4>) {
        self.peers = peers.iter().map(to_sockaddr_in).collect();
    }

    /// Joins the job's multicast group as `setting` says: disabled → `Ok(())` and
    /// multicast stays unavailable; otherwise the given group or [`group_for_key`]. On
    /// error multicast stays unavailable (the caller may log it and go on with fan-out).
    pub fn join_multicast(&mut self, job_key: u64, setting: McastSetting) -> io::Result<()> {
        match setting {
            McastSetting::Disabled => Ok(()),
            McastSetting::Enabled(g) => {
                self.join_multicast_group(g.unwrap_or_else(|| group_for_key(job_key)))
            }
        }
    }

    /// Joins `group` (a multicast address and port) regardless of the environment,
    /// replacing any group joined before. Needs a specific unicast address (not 0.0.0.0):
    /// multicast uses the interface carrying it.
    pub fn join_multicast_group(&mut self, group: SocketAddrV4) -> io::Result<()> {
        self.group = None;
        if !group.ip().is_multicast() || group.port() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{group} is not a multicast group with a port"),
            ));
        }
        let Some(iface) = &self.iface else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "multicast needs a unicast socket bound to a specific address, not 0.0.0.0",
            ));
        };
        let ifindex = iface.index()?;
        let local = *self.local.ip();
        let sock = new_socket()?;
        sock.set_reuse_address(true)?;
        sock.set_reuse_port(true)?;
        if let Some(prog) = &self.filter {
            bpf::attach(sock.as_raw_fd(), prog)?;
        }
        if self.gso {
            // Segmented multicasts arrive coalesced too (best effort).
            crate::gso::enable_gro(&sock);
        }
        sock.bind(&group.into())?;
        mcast::join(&sock, *group.ip(), local, ifindex)?;
        mcast::configure_sender(&self.sock, local, ifindex)?;
        self.group = Some(Group {
            sock,
            addr: group,
            dest: to_sockaddr_in(&group),
            rx: RecvRing::new(),
        });
        Ok(())
    }

    /// The joined group, if multicast is available.
    pub fn multicast_group(&self) -> Option<SocketAddrV4> {
        self.group.as_ref().map(|g| g.addr)
    }

    /// Attaches the kernel filter for `rank` of job `job_key` ([`crate::bpf`]) to both
    /// sockets (the library skips it when [`ENV_BPF`] is off). Call it before the rank
    /// publishes its endpoint: it applies to datagrams arriving afterwards.
    pub fn install_filter(&mut self, job_key: u64, rank: Rank) -> io::Result<()> {
        self.attach_filter(job_key, rank)
    }

    /// Attaches the kernel filter regardless of the environment.
    pub fn attach_filter(&mut self, job_key: u64, rank: Rank) -> io::Result<()> {
        let prog = bpf::program(job_key, rank);
        bpf::attach(self.sock.as_raw_fd(), &prog)?;
        if let Some(g) = &self.group {
            bpf::attach(g.sock.as_raw_fd(), &prog)?;
        }
        self.filter = Some(prog);
        Ok(())
    }

    /// Seals every datagram sent from now on as `rank` under the job's datagram `key`
    /// ([`crate::mac::datagram_key`]) and takes only sealed ones (module docs). Call it
    /// before the rank publishes its endpoint; every rank of the job must. Called again,
    /// it changes the key and keeps the first call's rank and counter.
    pub fn authenticate(&mut self, key: &[u8; 16], rank: Rank) {
        self.seal = Some(match self.seal.take() {
            // Sealed before: the counter goes on, so no nonce repeats.
            Some(old) => old.rekeyed(key),
            None => {
                self.max_datagram -= TRAILER;
                self.loopback_max_datagram = self.loopback_max_datagram.saturating_sub(TRAILER);
                Seal::new(key, rank)
            }
        });
    }

    /// Whether datagrams are sealed and checked.
    pub fn authenticated(&self) -> bool {
        self.seal.is_some()
    }

    /// Whether a kernel filter is attached.
    pub fn filter_installed(&self) -> bool {
        self.filter.is_some()
    }

    fn peer_addr(&self, peer: Rank) -> io::Result<libc::sockaddr_in> {
        self.peers.get(peer as usize).copied().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("rank {peer} not in peer table ({} peers)", self.peers.len()),
            )
        })
    }

    fn check_len(&self, len: usize) -> io::Result<()> {
        if len > self.max_datagram {
            Err(too_big(len, self.max_datagram))
        } else {
            Ok(())
        }
    }

    /// The largest datagram to `addr`: a loopback address, or this socket's own address
    /// (another rank of this host, reached through the host's loopback whatever the
    /// interface carrying the address), takes the loopback's limit; anything else the
    /// interface's ([`Transport::max_datagram`]).
    fn max_datagram_to_addr(&self, addr: &libc::sockaddr_in) -> usize {
        let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
        let own = *self.local.ip();
        if ip.is_loopback() || (!own.is_unspecified() && ip == own) {
            self.max_datagram.max(self.loopback_max_datagram)
        } else {
            self.max_datagram
        }
    }

    fn check_len_to(&self, len: usize, addr: &libc::sockaddr_in) -> io::Result<()> {
        let max = self.max_datagram_to_addr(addr);
        if len > max {
            Err(too_big(len, max))
        } else {
            Ok(())
        }
    }

    /// One datagram to `addr`, with the bounded wait on back-pressure.
    #[inline]
    fn send_addr<D: Pieces>(&mut self, addr: &libc::sockaddr_in, datagram: &D) -> io::Result<bool> {
        let fd = self.sock.as_raw_fd();
        let [head, tail] = datagram.pieces();
        let t = if self.seal.is_some() { TRAILER } else { 0 };
        // A short datagram in two pieces leaves gathered, sealed whole (crate::gso).
        let gathered =
            !head.is_empty() && !tail.is_empty() && datagram.total() + t <= crate::gso::GATHER_MAX;
        let trailer = if gathered {
            self.stage
                .gather(std::slice::from_ref(datagram), self.seal.as_mut());
            None
        } else {
            self.seal.as_mut().map(|s| s.trailer_parts(&[head, tail]))
        };
        let stage = &self.stage;
        let send_once = |fd, addr: &libc::sockaddr_in| match &trailer {
            _ if gathered => sendto(fd, addr, stage.gathered()),
            None if tail.is_empty() => sendto(fd, addr, head),
            None => sendmsg(fd, addr, &[head, tail]),
            Some(t) => sendmsg(fd, addr, &[head, tail, t]),
        };
        self.stats.send_calls += 1;
        let mut err = match send_once(fd, addr) {
            Ok(()) => {
                self.stats.sent += 1;
                return Ok(true);
            }
            Err(e) => e,
        };
        for _ in 0..SEND_RETRIES {
            if !transient(&err) {
                self.check_len_to(datagram.total(), addr)?;
                return Err(err);
            }
            wait_writable(fd);
            self.stats.send_calls += 1;
            match send_once(fd, addr) {
                Ok(()) => {
                    self.stats.sent += 1;
                    return Ok(true);
                }
                Err(e) => err = e,
            }
        }
        if transient(&err) {
            self.stats.send_dropped += 1;
            Ok(false)
        } else {
            Err(err)
        }
    }
}

impl Transport for UdpTransport {
    fn add_peers(&mut self, addrs: &[SocketAddrV4]) -> bool {
        self.peers.extend(addrs.iter().map(to_sockaddr_in));
        true
    }

    #[inline]
    fn send_to(&mut self, peer: Rank, datagram: &[u8]) -> io::Result<bool> {
        // Checked here: over a veth the kernel would fragment rather than refuse.
        let addr = self.peer_addr(peer)?;
        self.check_len_to(datagram.len(), &addr)?;
        self.send_addr(&addr, &datagram)
    }

    fn send_run(&mut self, peer: Rank, run: &[&[u8]]) -> io::Result<usize> {
        let addr = self.peer_addr(peer)?;
        self.send_run_to(&addr, run)
    }

    fn send_run_parts(&mut self, peer: Rank, run: &[Parts<'_>]) -> io::Result<usize> {
        let addr = self.peer_addr(peer)?;
        self.send_run_to(&addr, run)
    }

    fn send_multicast_run(&mut self, run: &[&[u8]], targets: &[Rank]) -> io::Result<usize> {
        let Some(dest) = self.group.as_ref().map(|g| g.dest) else {
            let mut n = 0;
            for d in run {
                n += usize::from(self.send_multicast(d, targets)?);
            }
            return Ok(n);
        };
        let n = self.send_run_to(&dest, run)?;
        self.stats.multicasts_sent += n as u64;
        Ok(n)
    }

    fn send_multicast(&mut self, datagram: &[u8], targets: &[Rank]) -> io::Result<bool> {
        self.check_len(datagram.len())?;
        if let Some(dest) = self.group.as_ref().map(|g| g.dest) {
            let sent = self.send_addr(&dest, &datagram)?;
            if sent {
                self.stats.multicasts_sent += 1;
            }
            return Ok(sent);
        }
        self.stats.fanout_sends += 1;
        Ok(self.multi_send(datagram, targets)? == targets.len())
    }

    fn multi_send(&mut self, datagram: &[u8], peers: &[Rank]) -> io::Result<usize> {
        self.check_len(datagram.len())?;
        let addrs: Vec<libc::sockaddr_in> = peers
            .iter()
            .map(|&p| self.peer_addr(p))
            .collect::<io::Result<_>>()?;
        let trailer = self.seal.as_mut().map(|s| s.trailer(datagram));
        // The kernel only reads the buffers of a send.
        let mut iov = [
            libc::iovec {
                iov_base: datagram.as_ptr().cast_mut().cast(),
                iov_len: datagram.len(),
            },
            libc::iovec {
                iov_base: trailer.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()) as *mut _,
                iov_len: trailer.as_ref().map_or(0, |t| t.len()),
            },
        ];
        let pieces = if trailer.is_some() { 2 } else { 1 };
        let iov_ptr: *mut libc::iovec = iov.as_mut_ptr();
        let mut hdrs: Vec<libc::mmsghdr> = addrs
            .iter()
            .map(|a| {
                // SAFETY: mmsghdr is a plain C struct; all-zero is valid.
                let mut h: libc::mmsghdr = unsafe { mem::zeroed() };
                h.msg_hdr.msg_name = (a as *const libc::sockaddr_in).cast_mut().cast();
                h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                h.msg_hdr.msg_iov = iov_ptr;
                h.msg_hdr.msg_iovlen = pieces;
                h
            })
            .collect();
        let fd = self.sock.as_raw_fd();
        let mut done = 0usize;
        let mut waits = 0usize;
        while done < hdrs.len() {
            let rest = &mut hdrs[done..];
            // SAFETY: `rest` holds valid mmsghdrs whose name and iovec pointers point at
            // `addrs` and `iov`, which outlive the call; the iovecs point at `datagram`
            // and `trailer` (alive until the function returns).
            let rc =
                unsafe { libc::sendmmsg(fd, rest.as_mut_ptr(), rest.len() as libc::c_uint, 0) };
            self.stats.send_calls += 1;
            if rc > 0 {
                done += rc as usize;
                self.stats.sent += rc as u64;
                continue;
            }
            let err = io::Error::last_os_error();
            if !transient(&err) {
                return Err(err);
            }
            if waits == SEND_RETRIES {
                self.stats.send_dropped += (hdrs.len() - done) as u64;
                break;
            }
            waits += 1;
            wait_writable(fd);
        }
        Ok(done)
    }

    fn multicast_available(&self) -> bool {
        self.group.is_some()
    }

    fn recv_batch(&mut self, f: &mut dyn FnMut(SocketAddrV4, &[u8])) -> io::Result<usize> {
        let n = self.rx.drain(
            self.sock.as_raw_fd(),
            self.seal.as_ref(),
            &mut self.stats.bad_mac,
            f,
        )?;
        self.stats.received_unicast += n as u64;
        let mut total = n;
        if let Some(g) = self.group.as_mut().filter(|_| self.poll_group) {
            let m = g.rx.drain(
                g.sock.as_raw_fd(),
                self.seal.as_ref(),
                &mut self.stats.bad_mac,
                f,
            )?;
            self.stats.received_multicast += m as u64;
            self.stats.kernel_drops_multicast = g.rx.drops;
            total += m;
        }
        self.stats.kernel_drops = self.rx.drops + self.stats.kernel_drops_multicast;
        if total > 0 {
            self.stats.received += total as u64;
            self.stats.recv_batches += 1;
        }
        Ok(total)
    }

    fn set_poll_multicast(&mut self, on: bool) {
        self.poll_group = on;
    }

    fn fds(&self) -> Vec<RawFd> {
        let mut v = vec![self.sock.as_raw_fd()];
        v.extend(self.group.as_ref().map(|g| g.sock.as_raw_fd()));
        v
    }

    fn next_deadline(&self) -> Option<u64> {
        None
    }

    fn service(&mut self, _now: u64) -> io::Result<()> {
        Ok(())
    }

    fn max_datagram(&self) -> usize {
        self.max_datagram
    }

    fn max_datagram_to(&self, peer: Rank) -> usize {
        self.peers
            .get(peer as usize)
            .map_or(self.max_datagram, |a| self.max_datagram_to_addr(a))
    }

    fn recv_frames(&self) -> u64 {
        UdpTransport::recv_frames(self)
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }
}

/// A nonblocking, close-on-exec UDP socket with large buffers and SO_RXQ_OVFL.
fn new_socket() -> io::Result<Socket> {
    let sock = Socket::new(Domain::IPV4, Type::DGRAM.cloexec(), Some(Protocol::UDP))?;
    sock.set_nonblocking(true)?;
    if setsockopt_int(&sock, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, SOCK_BUF).is_err() {
        // Best effort: the kernel clamps to net.core.rmem_max.
        let _ = sock.set_recv_buffer_size(SOCK_BUF);
    }
    if setsockopt_int(&sock, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, SOCK_BUF).is_err() {
        let _ = sock.set_send_buffer_size(SOCK_BUF);
    }
    // Optional: without it kernel_drops stays 0.
    let _ = setsockopt_int(&sock, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1);
    Ok(sock)
}

fn transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR)
    )
}

#[cold]
fn wait_writable(fd: RawFd) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: `pfd` is one valid pollfd that outlives the call.
    unsafe { libc::poll(&mut pfd, 1, SEND_WAIT_MS) };
}

#[inline]
fn sendto(fd: RawFd, addr: &libc::sockaddr_in, datagram: &[u8]) -> io::Result<()> {
    // SAFETY: the buffer pointer/length come from a valid slice; `addr` is a valid
    // sockaddr_in and its exact size is passed.
    let rc = unsafe {
        libc::sendto(
            fd,
            datagram.as_ptr().cast(),
            datagram.len(),
            0,
            (addr as *const libc::sockaddr_in).cast(),
            mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One datagram of up to three pieces (a header, a payload, a trailer; empty ones are
/// skipped) to `addr`.
fn sendmsg(fd: RawFd, addr: &libc::sockaddr_in, pieces: &[&[u8]]) -> io::Result<()> {
    // The kernel only reads the buffers of a send.
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 3];
    let mut n = 0;
    for p in pieces.iter().filter(|p| !p.is_empty()).take(iov.len()) {
        iov[n] = libc::iovec {
            iov_base: p.as_ptr().cast_mut().cast(),
            iov_len: p.len(),
        };
        n += 1;
    }
    // SAFETY: msghdr is a plain C struct; all-zero is valid.
    let mut m: libc::msghdr = unsafe { mem::zeroed() };
    m.msg_name = (addr as *const libc::sockaddr_in).cast_mut().cast();
    m.msg_namelen = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    m.msg_iov = iov.as_mut_ptr();
    m.msg_iovlen = n;
    // SAFETY: `m` points at `addr` and at `iov`, whose pieces point at live slices; all
    // outlive the call.
    let rc = unsafe { libc::sendmsg(fd, &m, 0) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn too_big(len: usize, max: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("datagram of {len} bytes exceeds max_datagram {max}"),
    )
}

/// A received message's control data, in one pass: the `SO_RXQ_OVFL` drop counter and
/// the segment size of a coalesced receive (`UDP_GRO`), each if present.
fn control(msg: &libc::msghdr) -> (Option<u32>, Option<usize>) {
    let (mut drops, mut seg) = (None, None);
    // SAFETY: `msg` was filled by recvmmsg; msg_control/msg_controllen
    // describe our own control buffer and the kernel-written length, so the
    // CMSG_* walk stays within it. The payload reads are unaligned-safe.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
            if level == libc::SOL_SOCKET && kind == libc::SO_RXQ_OVFL {
                drops = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u32>()));
            } else if level == libc::IPPROTO_UDP && kind == crate::gso::UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                seg = usize::try_from(v).ok().filter(|&s| s > 0);
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    (drops, seg)
}

fn setsockopt_int(sock: &Socket, level: libc::c_int, opt: libc::c_int, v: usize) -> io::Result<()> {
    let val = v.min(libc::c_int::MAX as usize) as libc::c_int;
    // SAFETY: passes a pointer to a live c_int and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&val as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) fn sockaddr_of(a: &SocketAddrV4) -> libc::sockaddr_in {
    to_sockaddr_in(a)
}

fn to_sockaddr_in(a: &SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is a plain C struct; all-zero is valid (and zeroes sin_zero).
    let mut s: libc::sockaddr_in = unsafe { mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr = libc::in_addr {
        s_addr: u32::from(*a.ip()).to_be(),
    };
    s
}

fn from_sockaddr_in(s: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
        u16::from_be(s.sin_port),
    )
}
