//! Line framing over a byte stream: one JSON message per `\n`-terminated line.
//!
//! Contract: [`LineReader`] never buffers more than its limit plus one read chunk; a line
//! longer than the limit is a [`BootError::Protocol`] error. It works over blocking and
//! nonblocking streams alike (`WouldBlock` means "no complete line yet"). [`send_blocking`]
//! writes one whole message with a bounded wait even on a nonblocking socket, then restores
//! nonblocking mode if it was set by the caller.

use crate::{BootError, MAX_LINE};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const CHUNK: usize = 4096;

/// Line bound for a [`crate::Table`] of `size` ranks: [`MAX_LINE`] plus 4 KiB per rank.
pub fn table_line_limit(size: u32) -> usize {
    MAX_LINE.saturating_add((size as usize).saturating_mul(4096))
}

/// What [`LineReader::next_msg`] found.
#[derive(Debug, PartialEq)]
pub enum Next<T> {
    /// A complete message.
    Msg(T),
    /// No complete line is available yet (the source would block).
    Pending,
    /// The peer closed the stream (any partial line is discarded).
    Eof,
}

/// Incremental reader of bounded JSON lines.
#[derive(Debug)]
pub struct LineReader {
    buf: Vec<u8>,
    /// Bytes at the start of `buf` already searched for a newline (none there): each
    /// byte is scanned once, however slowly a long line arrives.
    scanned: usize,
    limit: usize,
    eof: bool,
}

impl LineReader {
    /// A reader accepting lines of at most `limit` bytes.
    pub fn new(limit: usize) -> LineReader {
        LineReader {
            buf: Vec::new(),
            scanned: 0,
            limit,
            eof: false,
        }
    }

    /// Changes the line limit (for example once the job size is known).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// Returns the next complete message, reading from `src` only when no complete line is
    /// buffered. Interrupted reads are retried; `WouldBlock` gives [`Next::Pending`];
    /// a socket read timeout surfaces as `Err(BootError::Timeout)`; a reset as
    /// `Err(BootError::LauncherGone)` (callers on the launcher side treat it as EOF).
    pub fn next_msg<T: DeserializeOwned, R: Read>(
        &mut self,
        src: &mut R,
    ) -> Result<Next<T>, BootError> {
        loop {
            let from = self.scanned.min(self.buf.len());
            let found = self.buf[from..].iter().position(|&b| b == b'\n');
            self.scanned = self.buf.len();
            if let Some(pos) = found.map(|p| from + p) {
                // What follows the line has not been searched yet.
                self.scanned = 0;
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                let line = &line[..pos];
                if line.len() > self.limit {
                    return Err(self.too_long());
                }
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return serde_json::from_slice(line).map(Next::Msg).map_err(|e| {
                    BootError::Protocol(format!(
                        "bad message {:?}: {e}",
                        String::from_utf8_lossy(&line[..line.len().min(200)])
                    ))
                });
            }
            if self.buf.len() > self.limit {
                return Err(self.too_long());
            }
            if self.eof {
                return Ok(Next::Eof);
            }
            // Read through a small stack buffer: a rank polls this connection often and
            // almost always finds nothing (zeroing a large chunk per poll showed up).
            let mut chunk = [0u8; CHUNK];
            let res = src.read(&mut chunk);
            if let Ok(n) = res {
                self.buf.extend_from_slice(&chunk[..n]);
            }
            match res {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Next::Pending),
                Err(e) => return Err(BootError::from_io(e)),
            }
        }
    }

    fn too_long(&self) -> BootError {
        BootError::Protocol(format!("line longer than {} bytes", self.limit))
    }
}

/// Encodes `msg` as one line (JSON + `\n`).
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serializing these plain data types cannot fail: no maps with non-string keys, no
    // failing Serialize impls.
    let mut line = serde_json::to_vec(msg).expect("boot messages always serialize");
    line.push(b'\n');
    line
}

/// Writes `msg` as one line to `stream`, waiting at most `timeout` for buffer space.
///
/// Works on a nonblocking stream: it is switched to blocking mode with a write timeout for
/// the duration of the write and switched back afterwards (`nonblocking` says which mode to
/// restore). Peer gone → [`BootError::LauncherGone`]; timeout → [`BootError::Timeout`].
pub fn send_blocking<T: Serialize>(
    stream: &mut TcpStream,
    msg: &T,
    timeout: Duration,
    nonblocking: bool,
) -> Result<(), BootError> {
    send_line_blocking(stream, &encode(msg), timeout, nonblocking)
}

/// [`send_blocking`] for a line already [`encode`]d (to send one message to many peers).
pub fn send_line_blocking(
    stream: &mut TcpStream,
    line: &[u8],
    timeout: Duration,
    nonblocking: bool,
) -> Result<(), BootError> {
    let timeout = timeout.max(Duration::from_millis(1));
    if nonblocking {
        stream.set_nonblocking(false)?;
    }
    let res = stream
        .set_write_timeout(Some(timeout))
        .and_then(|()| stream.write_all(line))
        .and_then(|()| stream.flush());
    if nonblocking {
        stream.set_nonblocking(true)?;
    }
    res.map_err(BootError::from_io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::LauncherMsg;

    /// A source that hands out its data in fixed pieces, then would block or ends.
    struct Pieces {
        pieces: Vec<Vec<u8>>,
        end: bool,
    }

    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pieces.is_empty() {
                return if self.end {
                    Ok(0)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                };
            }
            let p = self.pieces.remove(0);
            let n = p.len().min(buf.len());
            buf[..n].copy_from_slice(&p[..n]);
            if n < p.len() {
                self.pieces.insert(0, p[n..].to_vec());
            }
            Ok(n)
        }
    }

    #[test]
    fn split_lines_and_eof() {
        let mut all = encode(&LauncherMsg::Query);
        all.extend(b"\n");
        all.extend(encode(&LauncherMsg::Release));
        let (a, b) = all.split_at(7);
        let mut src = Pieces {
            pieces: vec![a.to_vec(), b.to_vec()],
            end: false,
        };
        let mut r = LineReader::new(100);
        assert_eq!(r.next_msg(&mut src).unwrap(), Next::Msg(LauncherMsg::Query));
        assert_eq!(
            r.next_msg(&mut src).unwrap(),
            Next::Msg(LauncherMsg::Release)
        );
        assert_eq!(
            r.next_msg::<LauncherMsg, _>(&mut src).unwrap(),
            Next::Pending
        );
        src.end = true;
        src.pieces.push(b"{\"type\":".to_vec());
        assert_eq!(r.next_msg::<LauncherMsg, _>(&mut src).unwrap(), Next::Eof);
    }

    #[test]
    fn bounded() {
        let mut src = Pieces {
            pieces: vec![vec![b'x'; 300]],
            end: false,
        };
        let mut r = LineReader::new(100);
        assert!(matches!(
            r.next_msg::<LauncherMsg, _>(&mut src),
            Err(BootError::Protocol(_))
        ));
        let mut src = Pieces {
            pieces: vec![b"garbage\n".to_vec()],
            end: false,
        };
        let mut r = LineReader::new(100);
        assert!(matches!(
            r.next_msg::<LauncherMsg, _>(&mut src),
            Err(BootError::Protocol(_))
        ));
    }
}
