//! Thin syscall wrappers: eventfd, fd passing over abstract Unix sockets, process_vm_readv.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A nonblocking, close-on-exec eventfd.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; on success we own the new fd.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: `fd` is a fresh fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Add 1 to an eventfd (wakes a poller). A saturated counter (EAGAIN) is already readable.
pub(crate) fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an fd we hold open.
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Reset an eventfd to zero (nonblocking read; EAGAIN = already zero).
pub(crate) fn eventfd_drain(fd: RawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live u64.
    let _ = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

/// Pull `dst.len()` bytes at address `addr` of process `pid` into `dst` with
/// `process_vm_readv` (one copy, no intermediate buffer). Partial transfers are continued;
/// fails with the OS error (EPERM when ptrace rules forbid it, ESRCH for a dead process,
/// EFAULT for an unmapped range).
pub fn read_remote(pid: i32, addr: usize, dst: &mut [u8]) -> io::Result<()> {
    let mut done = 0usize;
    while done < dst.len() {
        let local = libc::iovec {
            // SAFETY: `done < dst.len()`.
            iov_base: unsafe { dst.as_mut_ptr().add(done) }.cast(),
            iov_len: dst.len() - done,
        };
        let remote = libc::iovec {
            iov_base: (addr + done) as *mut libc::c_void,
            iov_len: dst.len() - done,
        };
        // SAFETY: the local iovec covers the unfilled part of `dst`, which we borrow
        // mutably; the kernel validates the remote range.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "process_vm_readv from pid {pid} at {:#x}: no progress",
                    addr + done
                ),
            ));
        }
        done += n as usize;
    }
    Ok(())
}

/// An abstract-namespace Unix datagram socket address (no file).
fn abstract_addr(tag: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data; all-zero is valid.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = tag.as_bytes();
    let n = b.len().min(a.sun_path.len() - 1);
    for (i, c) in b[..n].iter().enumerate() {
        a.sun_path[i + 1] = *c as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + n;
    (a, len as libc::socklen_t)
}

/// A datagram socket bound to `\0tag`, used once at connect to receive peers' eventfds.
pub(crate) struct FdSocket {
    fd: OwnedFd,
}

pub(crate) const FD_MSG: usize = 16;

impl FdSocket {
    pub fn bind(tag: &str) -> io::Result<FdSocket> {
        // SAFETY: plain syscall; on success we own the fd.
        let raw =
            cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: fresh fd.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let (a, len) = abstract_addr(tag);
        // SAFETY: `a` is a valid sockaddr_un of length `len`.
        cvt(unsafe { libc::bind(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) })
            .map_err(|e| {
                io::Error::new(e.kind(), format!("bind abstract unix socket @{tag}: {e}"))
            })?;
        Ok(FdSocket { fd })
    }

    /// Send `msg` with `pass` attached (SCM_RIGHTS) to the socket bound at `\0tag`, without
    /// blocking: `Ok(false)` when the receiver's queue is full (the kernel bounds a Unix
    /// datagram queue at `net.unix.max_dgram_qlen`, 10 by default, so a rank that sends to
    /// many peers before receiving would otherwise block forever; retry later).
    pub fn try_send_fd(&self, tag: &str, msg: &[u8; FD_MSG], pass: RawFd) -> io::Result<bool> {
        let (mut a, alen) = abstract_addr(tag);
        let mut iov = libc::iovec {
            iov_base: msg.as_ptr() as *mut libc::c_void,
            iov_len: msg.len(),
        };
        let mut cbuf = [0u64; 8]; // 64 bytes, u64-aligned: room for CMSG_SPACE(4)
                                  // SAFETY: msghdr is plain data; the fields we set point to live locals above.
        let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
        mh.msg_name = (&mut a as *mut libc::sockaddr_un).cast();
        mh.msg_namelen = alen;
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cbuf.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is a pure computation.
        mh.msg_controllen = unsafe { libc::CMSG_SPACE(4) } as _;
        // SAFETY: msg_control points to a zeroed, aligned buffer of at least CMSG_SPACE(4)
        // bytes, so CMSG_FIRSTHDR is non-null and CMSG_DATA has room for one fd.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&mh);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(4) as _;
            (libc::CMSG_DATA(c) as *mut RawFd).write_unaligned(pass);
        }
        loop {
            // SAFETY: `mh` describes live buffers.
            let rc = unsafe {
                libc::sendmsg(
                    self.fd.as_raw_fd(),
                    &mh,
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if rc >= 0 {
                return Ok(true);
            }
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok(false);
            }
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(io::Error::new(
                    e.kind(),
                    format!("send eventfd to @{tag}: {e}"),
                ));
            }
        }
    }

    /// Receive one message with one fd, waiting at most until `until`: `Ok(None)` if none
    /// came by then.
    pub fn recv_fd(&self, until: Instant) -> io::Result<Option<([u8; FD_MSG], OwnedFd)>> {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc <= 0 {
                continue; // timeout re-checked above, EINTR retried
            }
            let mut msg = [0u8; FD_MSG];
            let mut iov = libc::iovec {
                iov_base: msg.as_mut_ptr().cast(),
                iov_len: msg.len(),
            };
            let mut cbuf = [0u64; 8];
            // SAFETY: plain data; fields point to live locals.
            let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
            mh.msg_iov = &mut iov;
            mh.msg_iovlen = 1;
            mh.msg_control = cbuf.as_mut_ptr().cast();
            mh.msg_controllen = std::mem::size_of_val(&cbuf) as _;
            // SAFETY: `mh` describes live buffers.
            let n = unsafe {
                libc::recvmsg(
                    self.fd.as_raw_fd(),
                    &mut mh,
                    libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) {
                    continue;
                }
                return Err(e);
            }
            // SAFETY: the kernel filled `mh`'s control area; CMSG_FIRSTHDR checks bounds.
            let fd = unsafe {
                let c = libc::CMSG_FIRSTHDR(&mh);
                if c.is_null()
                    || (*c).cmsg_level != libc::SOL_SOCKET
                    || (*c).cmsg_type != libc::SCM_RIGHTS
                {
                    None
                } else {
                    Some((libc::CMSG_DATA(c) as *const RawFd).read_unaligned())
                }
            };
            match fd {
                // SAFETY: the kernel installed this fd for us (SCM_RIGHTS); we own it.
                Some(fd) if n as usize == FD_MSG => {
                    return Ok(Some((msg, unsafe { OwnedFd::from_raw_fd(fd) })))
                }
                Some(fd) => {
                    // SAFETY: as above; dropped at once (malformed message).
                    drop(unsafe { OwnedFd::from_raw_fd(fd) });
                }
                None => {}
            }
        }
    }
}

/// Sleep-backed bounded wait until `cond()`; spins briefly first.
pub(crate) fn wait_until(deadline: Instant, mut cond: impl FnMut() -> bool) -> bool {
    let mut i = 0u32;
    while !cond() {
        if Instant::now() > deadline {
            return false;
        }
        i += 1;
        if i < 100 {
            std::hint::spin_loop();
        } else if i < 200 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    true
}
