//! Unicast UDP transport.
//!
//! Contract:
//! * One nonblocking UDP socket per rank, bound to `ip:0`, with large kernel
//!   buffers (32 MiB via `SO_*BUFFORCE` when privileged, else as large as
//!   `SO_*BUF` allows) and `SO_RXQ_OVFL` so kernel receive-queue drops are
//!   counted in [`TransportStats::kernel_drops`].
//! * `send_to` is one `sendto(2)` on the fast path. When the kernel pushes
//!   back (EAGAIN/ENOBUFS) it waits for writability for at most ~1 ms a few
//!   times and then drops the datagram (`Ok(false)`, counted in
//!   `send_dropped`). Datagrams larger than `max_datagram` and unknown ranks
//!   are errors (`InvalidInput`).
//! * `recv_batch` does one `recvmmsg(2)` of up to [`RECV_BATCH`] datagrams
//!   into buffers allocated once at bind time (64 KiB each, so no datagram
//!   can be truncated), never blocks, and reports the sender's address.
//! * `max_datagram` = min(MTU − 28, 65507) for the interface carrying the
//!   bound address (65507 on loopback).
//! * No time-based work: `next_deadline` is `None`, `service` does nothing.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, Socket, Type};

use crate::{Rank, Transport, TransportStats};

/// Datagrams drained per `recv_batch` call.
pub const RECV_BATCH: usize = 32;
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
}

/// A unicast UDP transport. See the module docs for its contract.
pub struct UdpTransport {
    sock: Socket,
    local: SocketAddrV4,
    /// Peer table (index = rank) in kernel form, for a conversion-free send.
    peers: Vec<libc::sockaddr_in>,
    max_datagram: usize,
    rx: Box<RecvRing>,
    stats: TransportStats,
}

// SAFETY: the raw pointers inside `RecvRing` (iovec bases, msg_name,
// msg_control, msg_iov) point only into heap buffers owned by the same
// `RecvRing`, which moves together with the transport and is only used
// through `&mut self`. Nothing is shared with other threads.
unsafe impl Send for UdpTransport {}

impl UdpTransport {
    /// Binds a unicast UDP socket on `ip` port 0: nonblocking, large
    /// SO_RCVBUF/SO_SNDBUF (SO_RCVBUFFORCE/SO_SNDBUFFORCE 32 MiB when
    /// permitted), SO_RXQ_OVFL enabled if possible. `max_datagram` comes from
    /// the MTU of the interface that carries `ip`.
    pub fn bind(ip: Ipv4Addr) -> io::Result<UdpTransport> {
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
        sock.bind(&SocketAddrV4::new(ip, 0).into())?;
        let local = sock
            .local_addr()?
            .as_socket_ipv4()
            .ok_or_else(|| io::Error::other("bound socket has no IPv4 address"))?;
        let mtu = interface_mtu(sock.as_raw_fd(), ip)?;
        let max_datagram = mtu.saturating_sub(IP_UDP_HEADERS).min(MAX_UDP_PAYLOAD);
        Ok(UdpTransport {
            sock,
            local,
            peers: Vec::new(),
            max_datagram,
            rx: RecvRing::new(),
            stats: TransportStats::default(),
        })
    }

    /// The bound address (with the kernel-chosen port).
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// Installs the job's endpoint table (index = rank).
    pub fn set_peers(&mut self, peers: Vec<SocketAddrV4>) {
        self.peers = peers.iter().map(to_sockaddr_in).collect();
    }

    #[cold]
    fn send_slow(&mut self, peer: Rank, datagram: &[u8], err: io::Error) -> io::Result<bool> {
        let mut err = err;
        for _ in 0..SEND_RETRIES {
            match err.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {}
                _ => {
                    if datagram.len() > self.max_datagram {
                        return Err(too_big(datagram.len(), self.max_datagram));
                    }
                    return Err(err);
                }
            }
            let mut pfd = libc::pollfd {
                fd: self.sock.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: `pfd` is one valid pollfd that outlives the call.
            unsafe { libc::poll(&mut pfd, 1, SEND_WAIT_MS) };
            match self.raw_send(peer, datagram) {
                Ok(()) => {
                    self.stats.sent += 1;
                    return Ok(true);
                }
                Err(e) => err = e,
            }
        }
        match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                self.stats.send_dropped += 1;
                Ok(false)
            }
            _ => Err(err),
        }
    }

    #[inline]
    fn raw_send(&self, peer: Rank, datagram: &[u8]) -> io::Result<()> {
        let Some(addr) = self.peers.get(peer as usize) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("rank {peer} not in peer table ({} peers)", self.peers.len()),
            ));
        };
        // SAFETY: the buffer pointer/length come from a valid slice; `addr`
        // is a valid sockaddr_in and its exact size is passed.
        let rc = unsafe {
            libc::sendto(
                self.sock.as_raw_fd(),
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
}

impl Transport for UdpTransport {
    #[inline]
    fn send_to(&mut self, peer: Rank, datagram: &[u8]) -> io::Result<bool> {
        match self.raw_send(peer, datagram) {
            Ok(()) => {
                self.stats.sent += 1;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => Err(e),
            Err(e) => self.send_slow(peer, datagram, e),
        }
    }

    fn recv_batch(&mut self, f: &mut dyn FnMut(SocketAddrV4, &[u8])) -> io::Result<usize> {
        self.rx.reset();
        // SAFETY: every mmsghdr points at buffers owned by `self.rx` that are
        // valid for the lengths set in `RecvRing::new`/`reset`; the kernel
        // writes at most RECV_BATCH entries; a null timeout is allowed.
        let n = unsafe {
            libc::recvmmsg(
                self.sock.as_raw_fd(),
                self.rx.hdrs.as_mut_ptr(),
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
        for i in 0..n {
            let hdr = &self.rx.hdrs[i];
            if hdr.msg_hdr.msg_controllen > 0 {
                if let Some(d) = rxq_ovfl(&hdr.msg_hdr) {
                    self.stats.kernel_drops = self.stats.kernel_drops.max(u64::from(d));
                }
            }
            let len = (hdr.msg_len as usize).min(RECV_BUF);
            let from = from_sockaddr_in(&self.rx.names[i]);
            let start = i * RECV_BUF;
            f(from, &self.rx.bufs[start..start + len]);
        }
        if n > 0 {
            self.stats.received += n as u64;
            self.stats.recv_batches += 1;
        }
        Ok(n)
    }

    fn fds(&self) -> Vec<RawFd> {
        vec![self.sock.as_raw_fd()]
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

    fn stats(&self) -> TransportStats {
        self.stats
    }
}

fn too_big(len: usize, max: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("datagram of {len} bytes exceeds max_datagram {max}"),
    )
}

/// Extracts the SO_RXQ_OVFL drop counter from a received message, if present.
fn rxq_ovfl(msg: &libc::msghdr) -> Option<u32> {
    // SAFETY: `msg` was filled by recvmmsg; msg_control/msg_controllen
    // describe our own control buffer and the kernel-written length, so the
    // CMSG_* walk stays within it. The payload read is unaligned-safe.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_RXQ_OVFL {
                return Some(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u32>()));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
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

/// MTU of the interface carrying `ip`: an interface with exactly that
/// address, else one whose IPv4 subnet contains it (e.g. 127.0.0.2 on `lo`).
/// For 0.0.0.0 the smallest MTU of all up IPv4 interfaces (conservative).
fn interface_mtu(fd: RawFd, ip: Ipv4Addr) -> io::Result<usize> {
    let ifs = ipv4_interfaces()?;
    let names: Vec<&str> = if ip.is_unspecified() {
        ifs.iter()
            .filter(|i| i.up)
            .map(|i| i.name.as_str())
            .collect()
    } else if let Some(i) = ifs.iter().find(|i| i.addr == ip) {
        vec![i.name.as_str()]
    } else if let Some(i) = ifs
        .iter()
        .find(|i| u32::from(i.addr) & i.mask == u32::from(ip) & i.mask)
    {
        vec![i.name.as_str()]
    } else {
        Vec::new()
    };
    let mut best: Option<usize> = None;
    for name in names {
        let mtu = mtu_ioctl(fd, name).or_else(|_| mtu_sysfs(name))?;
        best = Some(best.map_or(mtu, |b| b.min(mtu)));
    }
    best.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!("no network interface carries {ip}"),
        )
    })
}

struct IfAddr {
    name: String,
    addr: Ipv4Addr,
    /// Netmask in host order.
    mask: u32,
    up: bool,
}

fn ipv4_interfaces() -> io::Result<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into the valid out-pointer.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list returned by getifaddrs, valid
        // until freeifaddrs; address pointers are null or point to sockaddrs
        // whose family we check before reading them as sockaddr_in; the name
        // is a NUL-terminated C string.
        unsafe {
            let ifa = &*cur;
            if !ifa.ifa_addr.is_null() && i32::from((*ifa.ifa_addr).sa_family) == libc::AF_INET {
                let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                let mask = if ifa.ifa_netmask.is_null() {
                    u32::MAX
                } else {
                    u32::from_be(
                        (*ifa.ifa_netmask.cast::<libc::sockaddr_in>())
                            .sin_addr
                            .s_addr,
                    )
                };
                out.push(IfAddr {
                    name: std::ffi::CStr::from_ptr(ifa.ifa_name)
                        .to_string_lossy()
                        .into_owned(),
                    addr: Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                    mask,
                    up: ifa.ifa_flags & libc::IFF_UP as libc::c_uint != 0,
                });
            }
            cur = ifa.ifa_next;
        }
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

fn mtu_ioctl(fd: RawFd, name: &str) -> io::Result<usize> {
    // SAFETY: ifreq is a plain C struct/union; all-zero is valid.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= req.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name too long",
        ));
    }
    for (d, &s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads the NUL-terminated name from and writes the
    // MTU into the ifreq we own; `fd` is an open socket.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after a successful SIOCGIFMTU the union holds ifru_mtu.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| io::Error::other("negative MTU"))
}

fn mtu_sysfs(name: &str) -> io::Result<usize> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))?
        .trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad MTU: {e}")))
}
