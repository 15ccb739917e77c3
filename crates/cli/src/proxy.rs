//! `phalanx proxy`: one host's agent for one hostfile launch over ssh. `phalanx run
//! --launcher ssh` starts it on every host (`ssh HOST exec /path/to/phalanx proxy`) and
//! speaks the agent protocol with it over ssh's stdin and stdout.
//!
//! Contract: it serves the launcher on stdin (requests) and stdout (events) with
//! [`serve_launcher`] — ranks started as `phalanx run` starts local ones, with
//! `PHALANX_IP` set to the address this host reaches the launcher from (they are on
//! another host than the launcher's loopback). Its stdin
//! is the job's lifeline on this host: when it closes (the launcher ended, or died and
//! its ssh with it), or on SIGHUP, SIGTERM or SIGINT, every rank it started is killed
//! with its process group and reaped, then it exits 0. It writes nothing else to
//! stdout; its own complaints go to stderr (which ssh carries back to the launcher).

use crate::serve::{serve_launcher, EventSink, Requests, ServeOptions};
use crate::spawn::allowed_cpus;
use phalanx_boot::frame::LineReader;
use phalanx_gang::proto::MAX_LINE;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Set by SIGHUP, SIGTERM, SIGINT: the proxy kills its ranks and ends.
static STOP: AtomicBool = AtomicBool::new(false);
/// The groups of the ranks it started (see [`ServeOptions::groups`]).
static GROUPS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Runs the proxy until its launcher goes; its exit code.
pub fn run() -> i32 {
    match serve() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("phalanx proxy: {e}");
            1
        }
    }
}

/// How long one event write may wait for the launcher to take more.
const WRITE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Stdout for events: if it is non-blocking (a remote shell that gives stdin and stdout
/// one socket shares stdin's O_NONBLOCK), a full buffer is waited out, up to
/// [`WRITE_WAIT`], instead of cutting an event in half.
struct Patient(File);

impl std::io::Write for Patient {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let deadline = std::time::Instant::now() + WRITE_WAIT;
        loop {
            match self.0.write(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return Err(e);
                    }
                    let mut p = libc::pollfd {
                        fd: self.0.as_raw_fd(),
                        events: libc::POLLOUT,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd that outlives the call.
                    unsafe { libc::poll(&mut p, 1, left.as_millis().min(1000) as libc::c_int) };
                }
                r => return r,
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

fn serve() -> Result<(), String> {
    for sig in [libc::SIGHUP, libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { libc::signal(sig, on_stop as *const () as libc::sighandler_t) };
    }
    // Own descriptors (close-on-exec, unbuffered): ranks never inherit the protocol's
    // streams, and every event is one write.
    let dup = |fd: std::os::fd::BorrowedFd<'_>, what: &str| {
        fd.try_clone_to_owned()
            .map(File::from)
            .map_err(|e| format!("cannot use {what}: {e}"))
    };
    let mut input = dup(std::io::stdin().as_fd(), "stdin")?;
    let output = dup(std::io::stdout().as_fd(), "stdout")?;
    // Reads must not block (a poll waits for them); writes may.
    // SAFETY: fcntl on a descriptor this function owns; no memory is passed.
    let nonblocking = unsafe {
        let fl = libc::fcntl(input.as_raw_fd(), libc::F_GETFL);
        fl >= 0 && libc::fcntl(input.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
    };
    if !nonblocking {
        return Err(format!(
            "cannot make stdin non-blocking: {}",
            std::io::Error::last_os_error()
        ));
    }
    let writer = EventSink::plain(Box::new(Patient(output)));
    let opts = ServeOptions {
        cpus: allowed_cpus(),
        ip_auto: true,
        stop: &STOP,
        groups: &GROUPS,
    };
    let requests = Requests::plain(LineReader::new(MAX_LINE));
    if let Err(e) = serve_launcher(&mut input, requests, writer, &opts) {
        // On stderr, which ssh carries to the launcher: its account of the loss.
        eprintln!("phalanx proxy: the launcher's requests: {e}");
    }
    Ok(())
}
