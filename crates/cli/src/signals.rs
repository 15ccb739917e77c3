//! Signal handling for the launcher: a self-pipe that wakes the event loop.
//!
//! Contract: after [`Signals::install`], SIGINT, SIGTERM, SIGHUP, SIGCHLD and SIGTSTP each
//! write one byte to a nonblocking, close-on-exec pipe whose read end is [`Signals::fd`],
//! so a `poll` on it returns when a child exits or the user interrupts or suspends the
//! job. The last termination signal is remembered until [`Signals::take_termination`]
//! reads it, a suspension (SIGTSTP: Ctrl-Z) until [`Signals::take_suspend`] does — the
//! launcher then halts the job and stops itself; it is not stopped by the signal. Handlers do only
//! async-signal-safe work (an atomic store and `write(2)`), and they reset to default in
//! the children on `exec`. [`wait_readable`] is a thin `poll(2)` wrapper.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
static TERMINATION: AtomicI32 = AtomicI32::new(0);
static SUSPEND: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    // SAFETY: __errno_location returns this thread's errno slot; saving and restoring it
    // keeps the interrupted code's errno intact.
    let errno = unsafe { *libc::__errno_location() };
    if sig == libc::SIGTSTP {
        SUSPEND.store(true, Ordering::SeqCst);
    } else if sig != libc::SIGCHLD {
        TERMINATION.store(sig, Ordering::SeqCst);
    }
    let fd = PIPE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; `byte` outlives the call; a full pipe
        // (EAGAIN) is fine because one pending byte is enough to wake the loop.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// The installed handlers and the read end of their self-pipe.
pub struct Signals {
    read: OwnedFd,
    _write: OwnedFd,
}

impl Signals {
    /// Creates the self-pipe and installs the handlers (once per process).
    pub fn install() -> io::Result<Signals> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        PIPE_WRITE.store(write.as_raw_fd(), Ordering::SeqCst);
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGCHLD,
            libc::SIGTSTP,
        ] {
            // SAFETY: a zeroed sigaction is a valid starting value; the handler is an
            // `extern "C" fn(c_int)` that only performs async-signal-safe operations.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                sa.sa_flags = libc::SA_RESTART
                    | if sig == libc::SIGCHLD {
                        libc::SA_NOCLDSTOP
                    } else {
                        0
                    };
                libc::sigemptyset(&mut sa.sa_mask);
                if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(Signals {
            read,
            _write: write,
        })
    }

    /// The pipe's read end, readable whenever a signal arrived since the last [`drain`].
    ///
    /// [`drain`]: Signals::drain
    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// Empties the pipe.
    pub fn drain(&self) {
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reading into a local buffer of the stated length from our own fd.
            let n = unsafe { libc::read(self.fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
        }
    }

    /// Whether a suspension (SIGTSTP) arrived since the last call.
    pub fn take_suspend(&self) -> bool {
        SUSPEND.swap(false, Ordering::SeqCst)
    }

    /// The termination signal (SIGINT/SIGTERM/SIGHUP) received since the last call, if any.
    pub fn take_termination(&self) -> Option<i32> {
        match TERMINATION.swap(0, Ordering::SeqCst) {
            0 => None,
            sig => Some(sig),
        }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        PIPE_WRITE.store(-1, Ordering::SeqCst);
    }
}

/// Waits until one of `fds` is readable (or hung up) or `timeout` passes; `EINTR` counts as
/// a wake-up. Returns the `revents` in place.
pub fn wait_readable(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<()> {
    for p in fds.iter_mut() {
        p.events = libc::POLLIN;
        p.revents = 0;
    }
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `fds` is a valid, exclusively borrowed slice of pollfd of the given length.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// A pollfd for `fd` (events are filled in by [`wait_readable`]).
pub fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}
