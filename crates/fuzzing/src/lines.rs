//! The harness shared by the line-protocol targets ([`crate::boot_lines`],
//! [`crate::gang_lines`]): a scripted byte source and a model of
//! [`phalanx_boot::frame::LineReader`] that every result of the reader is checked against.
//!
//! Input layout: byte 0 is the configuration, the rest a list of chunks. Configuration
//! bits: 0–1 the initial line limit (an index into the target's four limits); 2 the end
//! of the script is end-of-stream (else the source would block forever); 3–4 which
//! message type the first call decodes (each further call takes the next type, round
//! robin); 5–6 and 7: when bit 7 is set, the limit is changed to limit number 5–6 after
//! the first message (as the rank does once the table is in). A chunk starts with one
//! byte `b`: `0xff` is a read that would block, `0xfe` an interrupted read, any other
//! `b` is `b` bytes of stream data (fewer at the end of the input; 0 is the peer
//! closing the stream).

use phalanx_boot::frame::{encode, LineReader, Next};
use phalanx_boot::BootError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use std::io::{self, Read};

/// Chunk byte announcing a read that would block.
pub const WOULD_BLOCK: u8 = 0xff;
/// Chunk byte announcing an interrupted read.
pub const INTERRUPTED: u8 = 0xfe;

#[derive(Clone, Copy)]
enum Piece {
    /// Stream data: a range of the input.
    Data(usize, usize),
    WouldBlock,
    Interrupted,
}

/// A byte stream that hands out the input's chunks, one per read.
pub(crate) struct Source<'a> {
    input: &'a [u8],
    pieces: Vec<Piece>,
    next: usize,
    eof_at_end: bool,
    /// Everything read so far, in order.
    delivered: Vec<u8>,
    /// The longest single read.
    largest: usize,
}

impl<'a> Source<'a> {
    /// The source of the chunks of `input` (the script after the configuration byte).
    pub(crate) fn new(input: &'a [u8], eof_at_end: bool) -> Source<'a> {
        let mut pieces = Vec::new();
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            i += 1;
            pieces.push(match b {
                WOULD_BLOCK => Piece::WouldBlock,
                INTERRUPTED => Piece::Interrupted,
                n => {
                    let end = (i + n as usize).min(input.len());
                    let p = Piece::Data(i, end);
                    i = end;
                    p
                }
            });
        }
        Source {
            input,
            pieces,
            next: 0,
            eof_at_end,
            delivered: Vec::new(),
            largest: 0,
        }
    }

    /// Everything read so far, in order.
    pub(crate) fn delivered(&self) -> &[u8] {
        &self.delivered
    }

    fn exhausted(&self) -> bool {
        self.next >= self.pieces.len()
    }

    /// All stream data of the script, read or not.
    pub(crate) fn all_data(&self) -> Vec<u8> {
        let mut v = Vec::new();
        for p in &self.pieces {
            if let Piece::Data(a, b) = *p {
                v.extend_from_slice(&self.input[a..b]);
            }
        }
        v
    }
}

impl Read for Source<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(&p) = self.pieces.get(self.next) else {
            return if self.eof_at_end {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        };
        match p {
            Piece::WouldBlock => {
                self.next += 1;
                Err(io::ErrorKind::WouldBlock.into())
            }
            Piece::Interrupted => {
                self.next += 1;
                Err(io::ErrorKind::Interrupted.into())
            }
            Piece::Data(a, b) => {
                let n = (b - a).min(buf.len());
                buf[..n].copy_from_slice(&self.input[a..a + n]);
                self.delivered.extend_from_slice(&self.input[a..a + n]);
                self.largest = self.largest.max(n);
                if a + n == b {
                    self.next += 1;
                } else {
                    self.pieces[self.next] = Piece::Data(a + n, b);
                }
                Ok(n)
            }
        }
    }
}

/// What the reader must have done with the bytes it was given.
pub(crate) struct Model {
    /// Bytes of the stream the reader has consumed (its buffer holds the rest of what
    /// was delivered).
    consumed: usize,
    limit: usize,
    /// The largest limit the reader had.
    max_limit: usize,
}

impl Model {
    /// The next complete line the reader must act on, skipping the whitespace-only lines
    /// (within the limit) that it drops silently; consumes it.
    fn next_line<'s>(&mut self, s: &'s [u8]) -> Option<&'s [u8]> {
        loop {
            let rest = &s[self.consumed..];
            let pos = rest.iter().position(|&b| b == b'\n')?;
            let line = &rest[..pos];
            self.consumed += pos + 1;
            if line.len() <= self.limit && line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(line);
        }
    }
}

/// What one call of the reader led to.
pub(crate) enum Step {
    /// A message was decoded.
    Msg,
    /// Keep reading.
    Go,
    /// The stream is over (end, would block with nothing left, or a fatal error).
    Stop,
}

/// One `next_msg::<T>` call, checked against the model.
pub(crate) fn step<T>(reader: &mut LineReader, src: &mut Source<'_>, model: &mut Model) -> Step
where
    T: DeserializeOwned + Serialize + PartialEq + Debug,
{
    let r = reader.next_msg::<T, _>(src);
    let s = &src.delivered[..];
    let out = match r {
        Ok(Next::Msg(m)) => {
            let line = model
                .next_line(s)
                .expect("the reader returned a message without a complete line");
            assert!(
                line.len() <= model.limit,
                "a line of {} bytes was accepted under a limit of {}",
                line.len(),
                model.limit
            );
            let want: T = serde_json::from_slice(line)
                .expect("the reader returned a message for a line that does not decode");
            assert_eq!(want, m, "the reader decoded a different message");
            let again: T =
                serde_json::from_slice(&encode(&m)).expect("an encoded message decodes again");
            assert_eq!(again, m, "encode/decode round trip");
            Step::Msg
        }
        Ok(n @ (Next::Pending | Next::Eof)) => {
            assert!(
                model.next_line(s).is_none(),
                "{n:?} although a complete line was buffered"
            );
            assert!(
                s.len() - model.consumed <= model.limit,
                "{n:?} with a partial line longer than the limit"
            );
            if matches!(n, Next::Pending) && !src.exhausted() {
                Step::Go
            } else {
                Step::Stop
            }
        }
        Err(e) => {
            assert!(matches!(e, BootError::Protocol(_)), "unexpected error {e}");
            match model.next_line(s) {
                Some(line) => {
                    assert!(
                        line.len() > model.limit || serde_json::from_slice::<T>(line).is_err(),
                        "error {e} for a line that decodes"
                    );
                    Step::Go
                }
                None => {
                    assert!(
                        s.len() - model.consumed > model.limit,
                        "error {e} without a complete line and within the limit"
                    );
                    // The reader keeps refusing; a caller drops the connection.
                    Step::Stop
                }
            }
        }
    };
    let buffered = src.delivered.len() - model.consumed;
    assert!(
        buffered <= model.max_limit + src.largest,
        "the reader buffers {buffered} bytes, more than its limit {} plus one read of {}",
        model.max_limit,
        src.largest
    );
    out
}

/// Runs a reader over the script in `data` (module docs); `call(kind, ..)` makes one
/// [`step`] decoding message type number `kind` (of `kinds`). Returns the source.
pub(crate) fn drive<'a>(
    data: &'a [u8],
    limits: [usize; 4],
    kinds: usize,
    mut call: impl FnMut(usize, &mut LineReader, &mut Source<'_>, &mut Model) -> Step,
) -> Option<Source<'a>> {
    let (&cfg, rest) = data.split_first()?;
    let mut src = Source::new(rest, cfg & 4 != 0);
    let limit = limits[(cfg & 3) as usize];
    let mut model = Model {
        consumed: 0,
        limit,
        max_limit: limit,
    };
    let mut reader = LineReader::new(limit);
    let mut change = cfg & 0x80 != 0;
    // Every call that does not stop consumes a line (at least its newline) or a chunk
    // (at least its chunk byte).
    let max_calls = data.len() + 2;
    let mut calls = 0;
    loop {
        calls += 1;
        assert!(calls <= max_calls, "the reader makes no progress");
        let kind = ((cfg >> 3) as usize & 3).wrapping_add(calls) % kinds;
        match call(kind, &mut reader, &mut src, &mut model) {
            Step::Stop => break,
            Step::Msg if change => {
                change = false;
                let l = limits[(cfg >> 5) as usize & 3];
                reader.set_limit(l);
                model.limit = l;
                model.max_limit = model.max_limit.max(l);
            }
            Step::Msg | Step::Go => {}
        }
    }
    Some(src)
}
