//! Errors of the start-up protocol (both sides).

use std::io;

/// What can go wrong between a rank and its launcher.
#[derive(thiserror::Error, Debug)]
pub enum BootError {
    /// An I/O error other than the launcher going away or a timeout.
    #[error("boot connection I/O error: {0}")]
    Io(#[from] io::Error),
    /// The peer sent something that is not a valid message at this point.
    #[error("boot protocol error: {0}")]
    Protocol(String),
    /// The launcher aborted the job (for example: hosts differ, another rank failed).
    #[error("job aborted by the launcher: {0}")]
    Aborted(String),
    /// The launcher closed or reset the connection.
    #[error("the launcher (phalanx run) has gone away")]
    LauncherGone,
    /// A bounded wait expired.
    #[error("timed out waiting for the launcher")]
    Timeout,
    /// The PHALANX_* environment is malformed.
    #[error("bad phalanx environment: {0}")]
    BadEnv(String),
}

impl BootError {
    /// Maps an I/O error from the boot socket: resets/EOF become [`BootError::LauncherGone`],
    /// expired socket timeouts become [`BootError::Timeout`].
    pub(crate) fn from_io(e: io::Error) -> BootError {
        use io::ErrorKind::*;
        match e.kind() {
            ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof | NotConnected => {
                BootError::LauncherGone
            }
            WouldBlock | TimedOut => BootError::Timeout,
            _ => BootError::Io(e),
        }
    }
}
