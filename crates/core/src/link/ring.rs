//! The shared-memory link: the per-pair rings of [`phalanx_shm`] to the other ranks of
//! this host.
//!
//! Contract: reliable and ordered per pair, no protocol: the consumer index is the flow
//! control (a frame the ring cannot take is refused and retried later). Besides full
//! datagrams the ring carries *compact frames* ([`COMPACT_MAGIC`]): a whole eager
//! message behind a 24-byte header, so that a message of up to 32 bytes fits one cache
//! line. A multi-send writes the frame into every destination's ring, or into none.
//! What [`ShmLink::save`](super::Link::save) takes is every frame waiting in this rank's
//! incoming rings (which hands their cells back to the producers); until `restore` the
//! rings are not read (peers still draining keep their frames there), and restored
//! frames are delivered before anything newer.

use super::{Link, LinkReport, Net, Saved};
use crate::error::Result;
use phalanx_shm::ShmTransport;
use std::collections::VecDeque;

/// First two bytes of a compact frame: a whole eager message (one frame) behind a
/// [`COMPACT_HEADER`]-byte header (magic, 2 reserved bytes, source rank, context, tag,
/// length; little endian) instead of the 56-byte datagram header, so that messages of up
/// to 32 bytes fit one cache line of the ring (the fast slot). Only on shared memory,
/// where the ring is private to the job and reliable. The wire magic of full datagrams
/// differs, so the two never mix up.
pub(crate) const COMPACT_MAGIC: u16 = 0xc0fa;
const COMPACT_HEADER: usize = 24;

/// A compact frame's envelope and data.
pub(crate) struct Compact<'a> {
    pub src: u32,
    pub ctx: u32,
    pub tag: i32,
    pub data: &'a [u8],
}

/// `Some(Ok)` for a well-formed compact frame, `Some(Err)` for a malformed one, `None`
/// for anything else (a full datagram).
#[inline]
pub(crate) fn parse_compact(b: &[u8]) -> Option<std::result::Result<Compact<'_>, ()>> {
    if b.get(..2) != Some(&COMPACT_MAGIC.to_le_bytes()[..]) {
        return None;
    }
    if b.len() < COMPACT_HEADER {
        return Some(Err(()));
    }
    let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let (src, ctx, tag) = (word(4), word(8), word(12) as i32);
    let mut len = [0u8; 8];
    len.copy_from_slice(&b[16..24]);
    let data = &b[COMPACT_HEADER..];
    if u64::from_le_bytes(len) != data.len() as u64 {
        return Some(Err(()));
    }
    Some(Ok(Compact {
        src,
        ctx,
        tag,
        data,
    }))
}

/// The rings to this host's other ranks.
pub(crate) struct ShmLink {
    t: ShmTransport,
    halted: bool,
    /// Frames moved out by `save` and put back by `restore`, delivered first.
    replay: VecDeque<(u32, Vec<u8>)>,
    /// Saved and not restored yet: the rings are not read (a newer frame must not
    /// overtake the saved ones).
    saved_out: bool,
    /// Frames written.
    pub(crate) sent: u64,
    /// Send errors (a frame longer than the ring takes: a bug, reported).
    pub(crate) errors: u64,
}

impl std::ops::Deref for ShmLink {
    type Target = ShmTransport;
    fn deref(&self) -> &ShmTransport {
        &self.t
    }
}

impl std::ops::DerefMut for ShmLink {
    fn deref_mut(&mut self) -> &mut ShmTransport {
        &mut self.t
    }
}

impl ShmLink {
    pub(crate) fn new(t: ShmTransport) -> ShmLink {
        ShmLink {
            t,
            halted: false,
            replay: VecDeque::new(),
            saved_out: false,
            sent: 0,
            errors: 0,
        }
    }

    /// Writes a whole eager message as one compact frame straight into `peer`'s ring.
    /// False if it does not fit one frame, the ring is full or the link is halted (the
    /// caller queues it the usual way).
    #[inline]
    pub(crate) fn send_compact(
        &mut self,
        src: u32,
        peer: u32,
        ctx: u32,
        tag: i32,
        data: &[u8],
    ) -> bool {
        let n = data.len();
        // The ring's frame header, the compact header, the bytes: one cache line up to
        // FAST_FRAME - COMPACT_HEADER = 32 bytes.
        let total = COMPACT_HEADER + n;
        if total > self.t.max_frame() || self.halted {
            return false;
        }
        // The header as three little-endian words (magic and 2 reserved bytes with the
        // source, context with tag, length).
        let w0 = u64::from(COMPACT_MAGIC) | u64::from(src) << 32;
        let w1 = u64::from(ctx) | u64::from(tag as u32) << 32;
        let w2 = n as u64;
        let written = self.t.write_frame(peer, total, |frame| {
            let (head, body) = frame.split_at_mut(COMPACT_HEADER);
            head[0..8].copy_from_slice(&w0.to_le_bytes());
            head[8..16].copy_from_slice(&w1.to_le_bytes());
            head[16..24].copy_from_slice(&w2.to_le_bytes());
            body.copy_from_slice(data);
        });
        if !matches!(written, Ok(true)) {
            return false;
        }
        self.sent += 1;
        true
    }

    /// Hands waiting frames to `f(from, frame)` (restored ones first); a frame `f`
    /// refuses stays. Returns how many were taken.
    #[inline]
    pub(crate) fn recv(&mut self, f: &mut dyn FnMut(u32, &[u8]) -> bool) -> std::io::Result<usize> {
        if self.saved_out {
            return Ok(0);
        }
        let mut n = 0;
        if !self.replay.is_empty() {
            while let Some((from, d)) = self.replay.front() {
                if !f(*from, d) {
                    return Ok(n);
                }
                self.replay.pop_front();
                n += 1;
            }
        }
        Ok(n + self.t.recv(f)?)
    }

    /// A restored frame waits.
    pub(crate) fn has_replay(&self) -> bool {
        !self.replay.is_empty()
    }
}

impl Link for ShmLink {
    fn has_room(&mut self, peers: &[u32], len: usize) -> bool {
        !self.halted && peers.iter().all(|&p| self.t.has_room(p, len))
    }

    fn send(
        &mut self,
        _net: &mut Net,
        _now: u64,
        peers: &[u32],
        dgram: Vec<u8>,
    ) -> std::result::Result<(), Vec<u8>> {
        if peers.len() > 1 && !self.has_room(peers, dgram.len()) {
            return Err(dgram);
        }
        if self.halted {
            return Err(dgram);
        }
        for &p in peers {
            match self.t.send(p, &dgram) {
                Ok(true) => self.sent += 1,
                // Full (checked above for several destinations, so only the first).
                Ok(false) => return Err(dgram),
                Err(e) => {
                    self.errors += 1;
                    tracing::warn!(
                        "phalanx: rank {}: shared-memory send to rank {p} failed: {e}",
                        self.t.rank()
                    );
                    return Err(dgram);
                }
            }
        }
        Ok(())
    }

    fn poll(&mut self, _net: &mut Net, _now: u64) -> Result<bool> {
        Ok(false)
    }

    fn poll_timeout(&self) -> Option<u64> {
        None
    }

    /// A frame in a ring is in its reader's buffer, not on a wire: nothing is ever in
    /// flight. Held: the restored frames plus the cells waiting in this rank's incoming
    /// rings; `peers` names the peers that have not consumed what this rank wrote (for
    /// diagnostics: they hold it).
    fn report(&mut self) -> LinkReport {
        let mut r = LinkReport {
            halted: self.halted,
            held: self.replay.len() as u64,
            ..LinkReport::default()
        };
        for p in self.t.peers().to_vec() {
            if self.t.unconsumed_to(p).unwrap_or(0) > 0 {
                r.peers.push(p);
            }
            r.held += self.t.waiting_from(p).unwrap_or(0);
        }
        r
    }

    fn halt(&mut self) {
        self.halted = true;
    }

    fn save(&mut self) -> Saved {
        let mut frames: Vec<(u32, Vec<u8>)> = self.replay.drain(..).collect();
        // Each call takes a bounded batch per ring: until they are empty.
        while self
            .t
            .recv(&mut |from, d| {
                frames.push((from, d.to_vec()));
                true
            })
            .is_ok_and(|n| n > 0)
        {}
        // Drained rings go back to their producers at once.
        self.t.publish_consumed();
        self.saved_out = true;
        Saved { frames }
    }

    fn restore(&mut self, saved: Saved) {
        for f in saved.frames.into_iter().rev() {
            self.replay.push_front(f);
        }
        self.saved_out = false;
    }

    fn resume(&mut self, _stopped_ns: u64) {
        self.halted = false;
    }
}
