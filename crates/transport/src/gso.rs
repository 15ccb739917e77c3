//! UDP segmentation offload: a run of datagrams to one peer leaves in one `sendmsg`
//! (`UDP_SEGMENT`), and coalesced datagrams arrive in one receive (`UDP_GRO`).
//!
//! Contract:
//! * [`batch_len`] says how many datagrams from the front of a run may share one
//!   segmented send: every one but the last exactly as long as the first, the last no
//!   longer, at most [`MAX_SEGMENTS`] and at most [`MAX_TOTAL`] bytes in all (trailers
//!   included). The kernel cuts the send back into exactly those datagrams, each with its
//!   own UDP header, so receivers without GRO see what separate sends would have given.
//! * [`send_segmented`] is that one `sendmsg`: the datagrams and their trailers (the MAC,
//!   [`crate::mac`], when sealing) as consecutive iovec pieces, and a `UDP_SEGMENT`
//!   control message with the segment size. It reads the buffers only.
//! * Short segments of more than one piece (a trailer, or a header and a payload) leave
//!   gathered: [`Stage::gather`] copies a batch of datagrams whose
//!   segments are at most [`GATHER_MAX`] bytes, each followed by its trailer (sealed over
//!   the gathered bytes, one piece), into one staging buffer allocated once, and
//!   [`send_gathered`] sends that as one iovec. Measured 2026-11-28 on this 2-core Zen 3
//!   (`bench/c/send_pieces.c`: a sender alone, 1 MiB in 1472-byte segments to a loopback
//!   socket with GRO that drops them, best of 5 × 3000, two runs): one piece per batch
//!   114–139 µs, a header, a payload and a trailer per segment 198–242, two pieces per
//!   segment 198–207, gathered per datagram 139–166 — the kernel's copy of many short iovec pieces costs more than a
//!   copy into a hot buffer and one long piece. Longer segments (loopback's 64 KiB
//!   datagrams) keep their pieces where they lie.
//! * [`enable_gro`] asks the kernel to coalesce consecutive datagrams of one flow into
//!   one receive; its `UDP_GRO` control message gives the segment size (its datagrams
//!   are that long, the last one possibly shorter), which the receiver cuts apart again.
//! * [`unsupported`] tells an error that means "this path cannot segment" (the caller
//!   then sends datagram by datagram from then on) from back-pressure and real errors.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, RawFd};

use socket2::Socket;

use crate::mac::{Seal, TRAILER};
use crate::Pieces;

/// `SOL_UDP` socket options (linux/udp.h).
const UDP_SEGMENT: libc::c_int = 103;
/// Also the type of the control message a coalesced receive carries: its segment size.
pub(crate) const UDP_GRO: libc::c_int = 104;
/// Most segments one send may carry (the kernel's `UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 64;
/// Most payload bytes of one segmented send: one IPv4 packet's worth before cutting.
pub const MAX_TOTAL: usize = 65507;
/// Control-message space for one `u16` (a `cmsghdr` and its padded data), in u64s.
const CMSG_U64S: usize = 4;
/// Longest segment (datagram and trailer) sent gathered (module docs).
pub const GATHER_MAX: usize = 8192;

/// The staging buffer of gathered sends (module docs), allocated once.
pub struct Stage {
    buf: Vec<u8>,
}

impl Default for Stage {
    fn default() -> Stage {
        Stage {
            // A batch is at most MAX_TOTAL with its trailers, one datagram at most
            // GATHER_MAX with its trailer.
            buf: Vec::with_capacity(MAX_TOTAL.max(GATHER_MAX)),
        }
    }
}

impl Stage {
    /// `run`'s datagrams one after the other, each followed by its trailer when `seal`
    /// is given (sealed over the gathered datagram): what their segmented send puts on
    /// the wire.
    pub fn gather<D: Pieces>(&mut self, run: &[D], mut seal: Option<&mut Seal>) {
        self.buf.clear();
        for d in run {
            let start = self.buf.len();
            for piece in d.pieces() {
                self.buf.extend_from_slice(piece);
            }
            if let Some(s) = seal.as_deref_mut() {
                let t = s.trailer(&self.buf[start..]);
                self.buf.extend_from_slice(&t);
            }
        }
    }

    /// What the last [`gather`](Self::gather) put together.
    pub fn gathered(&self) -> &[u8] {
        &self.buf
    }
}

/// How many datagrams from the front of `run` one segmented send may carry, each
/// followed by `trailer` bytes (module docs). At least 1 for a non-empty run.
pub fn batch_len<D: Pieces>(run: &[D], trailer: usize) -> usize {
    let Some(first) = run.first() else {
        return 0;
    };
    let seg = first.total() + trailer;
    let mut total = seg;
    let mut k = 1;
    while k < run.len() && k < MAX_SEGMENTS {
        let next = run[k].total() + trailer;
        if run[k - 1].total() + trailer != seg || next > seg || next == 0 {
            break;
        }
        if total + next > MAX_TOTAL {
            break;
        }
        total += next;
        k += 1;
    }
    k
}

/// Sends `run` (datagrams cut by [`batch_len`], so 2 or more) to `addr` in one segmented
/// `sendmsg`; `trailers[i]`, when given, follows `run[i]` on the wire.
pub fn send_segmented<D: Pieces>(
    fd: RawFd,
    addr: &libc::sockaddr_in,
    run: &[D],
    trailers: Option<&[[u8; TRAILER]]>,
) -> io::Result<()> {
    let t = trailers.map_or(0, |_| TRAILER);
    let seg = run.first().map_or(0, |d| d.total() + t);
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(run.len() * 3);
    for (i, d) in run.iter().enumerate() {
        // The kernel only reads the buffers of a send.
        for piece in d.pieces().into_iter().filter(|p| !p.is_empty()) {
            iov.push(libc::iovec {
                iov_base: piece.as_ptr().cast_mut().cast(),
                iov_len: piece.len(),
            });
        }
        if let Some(ts) = trailers {
            iov.push(libc::iovec {
                iov_base: ts[i].as_ptr().cast_mut().cast(),
                iov_len: ts[i].len(),
            });
        }
    }
    sendmsg_segmented(fd, addr, &mut iov, seg)
}

/// Sends `gathered` ([`Stage::gather`] of a [`batch_len`] batch whose segments, trailers
/// included, are `seg` bytes, the last no longer) to `addr` in one segmented `sendmsg`.
pub fn send_gathered(
    fd: RawFd,
    addr: &libc::sockaddr_in,
    gathered: &[u8],
    seg: usize,
) -> io::Result<()> {
    // The kernel only reads the buffer of a send.
    let mut iov = [libc::iovec {
        iov_base: gathered.as_ptr().cast_mut().cast(),
        iov_len: gathered.len(),
    }];
    sendmsg_segmented(fd, addr, &mut iov, seg)
}

/// One `sendmsg` of `iov` to `addr` with a `UDP_SEGMENT` control message of `seg`.
fn sendmsg_segmented(
    fd: RawFd,
    addr: &libc::sockaddr_in,
    iov: &mut [libc::iovec],
    seg: usize,
) -> io::Result<()> {
    let mut ctrl = [0u64; CMSG_U64S];
    // SAFETY: msghdr is a plain C struct; all-zero is valid.
    let mut m: libc::msghdr = unsafe { mem::zeroed() };
    m.msg_name = (addr as *const libc::sockaddr_in).cast_mut().cast();
    m.msg_namelen = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    m.msg_iov = iov.as_mut_ptr();
    m.msg_iovlen = iov.len();
    m.msg_control = ctrl.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE of a u16 is 24 bytes on 64-bit Linux, inside `ctrl` (32 bytes).
    m.msg_controllen = unsafe { libc::CMSG_SPACE(mem::size_of::<u16>() as u32) } as usize;
    // SAFETY: `m.msg_control` points at `ctrl`, which has room for one cmsghdr with a u16
    // (above); CMSG_FIRSTHDR is non-null for a control buffer that large.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&m);
        (*c).cmsg_level = libc::IPPROTO_UDP;
        (*c).cmsg_type = UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg as u16);
    }
    // SAFETY: `m` points at `addr`, `iov` (whose pieces point at live slices) and `ctrl`;
    // all outlive the call.
    let rc = unsafe { libc::sendmsg(fd, &m, 0) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Asks the kernel to coalesce received datagrams (`UDP_GRO`); false where it cannot.
pub fn enable_gro(sock: &Socket) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: passes a pointer to a live c_int and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_UDP,
            UDP_GRO,
            (&on as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// Whether `e` means the path cannot segment (no checksum offload, an old kernel, a
/// segment size it refuses), rather than back-pressure or a real send error.
pub fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::ENOPROTOOPT) | Some(libc::EOPNOTSUPP)
    )
}

/// Cuts a coalesced receive of `seg`-byte segments into its datagrams.
pub fn segments(data: &[u8], seg: usize) -> impl Iterator<Item = &[u8]> {
    data.chunks(seg.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(sock: &Socket) -> std::net::SocketAddrV4 {
        sock.local_addr()
            .ok()
            .and_then(|a| a.as_socket_ipv4())
            .expect("bound IPv4 socket")
    }

    fn lens(ls: &[usize]) -> Vec<Vec<u8>> {
        ls.iter().map(|&l| vec![7u8; l]).collect()
    }

    fn k(ls: &[usize], trailer: usize) -> usize {
        let v = lens(ls);
        let r: Vec<&[u8]> = v.iter().map(|d| &d[..]).collect();
        batch_len(&r, trailer)
    }

    #[test]
    fn a_batch_is_equal_datagrams_and_a_shorter_last_one() {
        assert_eq!(k(&[], 0), 0);
        assert_eq!(k(&[100], 0), 1);
        assert_eq!(k(&[100, 100, 100], 28), 3);
        assert_eq!(k(&[100, 100, 40], 28), 3);
        // Nothing may follow a shorter one, nor be longer than the first.
        assert_eq!(k(&[100, 40, 40], 0), 2);
        assert_eq!(k(&[100, 200], 0), 1);
        // Empty datagrams never join (a zero-length segment is not one).
        assert_eq!(k(&[0, 0], 0), 1);
    }

    #[test]
    fn a_batch_respects_the_segment_and_byte_limits() {
        assert_eq!(k(&[10; 100], 0), MAX_SEGMENTS);
        // 1444 + 28 = 1472 bytes per segment: 44 fit one IPv4 packet.
        assert_eq!(k(&[1444; 60], 28), 44);
        assert_eq!(k(&[65000, 65000], 0), 1);
    }

    #[test]
    fn a_segmented_send_arrives_as_its_datagrams() {
        let a = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
        let b = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
        let lo: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        a.bind(&lo.into()).unwrap();
        b.bind(&lo.into()).unwrap();
        let to = crate::udp::sockaddr_of(&bound(&b));
        let data = [vec![1u8; 500], vec![2u8; 500], vec![3u8; 123]];
        let run: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
        assert_eq!(batch_len(&run, 0), 3);
        send_segmented(a.as_raw_fd(), &to, &run, None).unwrap();
        for d in &data {
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 2048];
            let n = b.recv(&mut buf).unwrap();
            // SAFETY: recv initialized the first n bytes.
            let got: Vec<u8> = buf[..n]
                .iter()
                .map(|x| unsafe { x.assume_init() })
                .collect();
            assert_eq!(&got, d);
        }
    }
}
