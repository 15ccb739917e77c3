//! Describing how a rank ended, and the launcher exit code that follows.
//!
//! Contract: a rank that exited with code `c` gives launcher code `c` (1 if `c` is 0, which
//! only happens when the failure is something else, such as a skipped Finalize); a rank
//! killed by signal `s` gives `128 + s`, as a shell would report it.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// A human-readable account of `status` ("exited with code 3", "killed by signal 9
/// (SIGKILL)") and the launcher exit code it maps to.
pub fn describe(status: ExitStatus) -> (String, i32) {
    if let Some(code) = status.code() {
        return (
            format!("exited with code {code}"),
            if code == 0 { 1 } else { code },
        );
    }
    let sig = status.signal().unwrap_or(0);
    let core = if status.core_dumped() {
        ", core dumped"
    } else {
        ""
    };
    (format!("killed by {}{core}", signal_text(sig)), 128 + sig)
}

/// "signal 9 (SIGKILL)", or "signal N" for signals without a well-known name.
pub fn signal_text(sig: i32) -> String {
    match signal_name(sig) {
        Some(name) => format!("signal {sig} ({name})"),
        None => format!("signal {sig}"),
    }
}

/// The conventional name of a signal number on this platform.
pub fn signal_name(sig: i32) -> Option<&'static str> {
    let names: &[(i32, &str)] = &[
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    names.iter().find(|(n, _)| *n == sig).map(|(_, s)| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(
            describe(ExitStatus::from_raw(3 << 8)),
            ("exited with code 3".into(), 3)
        );
        assert_eq!(
            describe(ExitStatus::from_raw(9)),
            ("killed by signal 9 (SIGKILL)".into(), 137)
        );
        assert_eq!(describe(ExitStatus::from_raw(0)).1, 1);
        assert_eq!(signal_text(64), "signal 64");
    }
}
