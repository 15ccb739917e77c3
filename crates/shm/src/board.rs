//! The collective board: one slot per local rank, written by its owner, read by many.
//!
//! Contract (one-writer, many-reader broadcast buffer):
//! * Every local rank owns one slot of two buffers (header lines plus `board_bytes` of
//!   data each) in the shared segment. Only the owner writes a buffer's data and its
//!   `tag`/`sig`/`len` words; readers only read them and decrement its `pending` counter.
//! * A publication is identified by a 64-bit `tag` chosen by the caller (phalanx uses
//!   `context << 32 | sequence`, unique over the life of a job for the ranks that read it);
//!   the tag's lowest bit picks the buffer, so consecutive calls alternate and a writer
//!   need not wait for the slowest reader of its previous publication.
//!   The owner may write a new publication only when [`Board::writable`] (every reader of
//!   the buffer's previous one called [`Board::done`]); it then writes the data
//!   ([`Board::own_data`]) and calls [`Board::publish`] with the number of readers, which
//!   stores `pending` and the metadata before the tag (release).
//! * A reader calls [`Board::peek`] with the tag it expects; it sees the data only once that
//!   exact tag is published (acquire), and the data stays unchanged until it calls
//!   [`Board::done`] — the owner cannot overwrite it before every reader did.
//! * [`Board::announce`] records, in a line of its own, the tag and signature of the call a
//!   rank is in (and of the one before), whether or not it publishes: a rank stuck waiting
//!   can look at what the others are doing and report a mismatch instead of hanging.
//! * Nothing here blocks or sleeps: waiting, waking and time limits are the caller's.
//!   Peers trust each other (same program); a corrupt length is clamped to the buffer.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::MmapRaw;

use crate::segment::LINE;

// Per buffer b (0, 1): a metadata line at `b * 2 * LINE` and a pending line after it.
// The tag, metadata, reader count and small data share one cache line: a small
// publication crosses cores as one line, and a reader's `done` takes the line it read.
const TAG: usize = 0;
const SIG: usize = 8;
const LEN: usize = 16;
const PENDING: usize = 24;
const INLINE: usize = 32;
/// Publications of at most this many bytes live in the buffer's metadata line.
pub const INLINE_MAX: usize = 32;
const BUF_HDR: usize = 2 * LINE;
// Announcements: a line of HISTORY (tag, sig) pairs, then a line with the count.
const ANN: usize = 4 * LINE;
const ANN_COUNT: usize = 5 * LINE;
/// Bytes of a publication's data [`Board::prefetch`] fetches ahead at most (4 lines).
pub const PREFETCH_MAX: usize = 4 * LINE;
/// Calls each rank's announcement history keeps.
pub const HISTORY: usize = 8;

/// The buffer a tag's publication lives in.
#[inline]
fn buf_of(tag: u64) -> usize {
    (tag & 1) as usize
}

/// A view of the collective board of a segment (cheap to clone; keeps the mapping alive).
#[derive(Clone)]
pub struct Board {
    map: Arc<MmapRaw>,
    ranks: Arc<[u32]>,
    hdr_base: usize,
    data_base: usize,
    hdr_stride: usize,
    bytes: usize,
    me: usize,
    /// This rank's buffers known to have no pending reader. Only `publish` makes a buffer
    /// busy again, so a 0 once seen stays true until then; a writer that saw it while it
    /// waited anyway publishes without reading the line the readers last wrote (a
    /// stalling cache miss). Shared by the clones, like the slot itself.
    free: Arc<[AtomicBool; 2]>,
}

// SAFETY: shared words are accessed through atomics only; slot data is written by its
// owner only while no reader may look at it (see the contract).
unsafe impl Send for Board {}

/// A publication as a reader sees it.
pub struct Published<'a> {
    /// Signature the owner published with.
    pub sig: u64,
    /// The data.
    pub data: &'a [u8],
}

impl Board {
    pub(crate) fn new(
        map: Arc<MmapRaw>,
        ranks: Arc<[u32]>,
        hdr_base: usize,
        data_base: usize,
        hdr_stride: usize,
        bytes: usize,
        me: usize,
    ) -> Board {
        Board {
            map,
            ranks,
            hdr_base,
            data_base,
            hdr_stride,
            bytes,
            me,
            free: Arc::new([AtomicBool::new(false), AtomicBool::new(false)]),
        }
    }

    /// Local index of world rank `rank`, if it is on this board.
    #[inline]
    pub fn local_of(&self, rank: u32) -> Option<usize> {
        self.ranks.binary_search(&rank).ok()
    }

    /// This rank's local index.
    pub fn me(&self) -> usize {
        self.me
    }

    /// Data bytes per slot.
    pub fn capacity(&self) -> usize {
        self.bytes
    }

    #[inline]
    fn u64_at(&self, slot: usize, off: usize) -> &AtomicU64 {
        assert!(slot < self.ranks.len());
        let o = self.hdr_base + slot * self.hdr_stride + off;
        // SAFETY: `o` is inside the mapping (layout) and 8-aligned (LINE-aligned base).
        unsafe { &*(self.map.as_mut_ptr().add(o) as *const AtomicU64) }
    }

    #[inline]
    fn u32_at(&self, slot: usize, off: usize) -> &AtomicU32 {
        assert!(slot < self.ranks.len());
        let o = self.hdr_base + slot * self.hdr_stride + off;
        // SAFETY: as in `u64_at`.
        unsafe { &*(self.map.as_mut_ptr().add(o) as *const AtomicU32) }
    }

    #[inline]
    fn data_ptr(&self, slot: usize, b: usize) -> *mut u8 {
        assert!(slot < self.ranks.len() && b < 2);
        // SAFETY: slot data lies inside the mapping (layout: two buffers per slot).
        unsafe {
            self.map
                .as_mut_ptr()
                .add(self.data_base + (slot * 2 + b) * self.bytes)
        }
    }

    /// Records that this rank entered the call `(tag, sig)`.
    #[inline]
    pub fn announce(&self, tag: u64, sig: u64) {
        let me = self.me;
        let count = self.u64_at(me, ANN_COUNT);
        let n = count.load(Ordering::Relaxed);
        let e = ANN + (n as usize % HISTORY) * 16;
        // Tag last, so a reader that sees the tag (twice, see `announced`) sees its sig.
        self.u64_at(me, e).store(0, Ordering::Relaxed);
        self.u64_at(me, e + 8).store(sig, Ordering::Release);
        self.u64_at(me, e).store(tag, Ordering::Release);
        count.store(n + 1, Ordering::Release);
    }

    /// What `slot`'s owner announced, most recent first: up to `HISTORY` (8) calls
    /// `(tag, sig)`. Entries being rewritten at that moment are left out.
    pub fn announced(&self, slot: usize) -> Vec<(u64, u64)> {
        let n = self.u64_at(slot, ANN_COUNT).load(Ordering::Acquire);
        let k = (n as usize).min(HISTORY);
        (0..k)
            .filter_map(|i| {
                let e = ANN + ((n as usize - 1 - i) % HISTORY) * 16;
                let t1 = self.u64_at(slot, e).load(Ordering::Acquire);
                let sig = self.u64_at(slot, e + 8).load(Ordering::Acquire);
                let t2 = self.u64_at(slot, e).load(Ordering::Acquire);
                (t1 == t2 && t1 != 0).then_some((t1, sig))
            })
            .collect()
    }

    /// Readers of the publication in the buffer `tag` picks of `slot` that have not
    /// finished.
    #[inline]
    pub fn pending(&self, slot: usize, tag: u64) -> u32 {
        self.u32_at(slot, buf_of(tag) * BUF_HDR + PENDING)
            .load(Ordering::Acquire)
    }

    /// The tags `slot` last published in its two buffers (0: none yet).
    pub fn published_tags(&self, slot: usize) -> [u64; 2] {
        [0, 1].map(|b| self.u64_at(slot, b * BUF_HDR + TAG).load(Ordering::Acquire))
    }

    /// May this rank write a publication tagged `tag` (every reader of the buffer's last
    /// one is done)?
    #[inline]
    pub fn writable(&self, tag: u64) -> bool {
        let free = &self.free[buf_of(tag)];
        if free.load(Ordering::Relaxed) {
            return true;
        }
        let ok = self.pending(self.me, tag) == 0;
        if ok {
            free.store(true, Ordering::Relaxed);
        }
        ok
    }

    /// Notes which of this rank's buffers the readers are done with (for a waiter: the
    /// next [`writable`](Self::writable) then needs no read of a line another core wrote).
    #[inline]
    pub fn refresh(&self) {
        // Tags 0 and 1 pick buffers 0 and 1 (`buf_of`); a buffer known free is not read.
        self.writable(0);
        self.writable(1);
    }

    /// This rank's buffer for `tag`, to fill before [`publish`](Self::publish). Call only
    /// when [`writable`](Self::writable); the slice must not be kept past `publish`.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub fn own_data(&self, tag: u64) -> &mut [u8] {
        debug_assert!(self.writable(tag));
        // SAFETY: the owner's buffer; no reader looks at it while pending == 0 and the
        // tag is unpublished (contract), and only the owner thread writes it.
        unsafe { std::slice::from_raw_parts_mut(self.data_ptr(self.me, buf_of(tag)), self.bytes) }
    }

    /// This rank's buffer for a `len`-byte publication tagged `tag` (inside the metadata
    /// line when `len` ≤ `INLINE_MAX` (32)), to fill before [`publish`](Self::publish) with the
    /// same `len`. Same rules as [`own_data`](Self::own_data); `len` is clamped to the
    /// buffer.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub fn own_data_len(&self, tag: u64, len: usize) -> &mut [u8] {
        if len <= INLINE_MAX {
            let o = self.hdr_base + self.me * self.hdr_stride + buf_of(tag) * BUF_HDR + INLINE;
            // SAFETY: INLINE..INLINE + INLINE_MAX of the owner's metadata line, inside the
            // mapping; written only by the owner while no reader looks (contract).
            return unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(o), len) };
        }
        &mut self.own_data(tag)[..len.min(self.bytes)]
    }

    /// Publishes `len` bytes of [`own_data_len`](Self::own_data_len) (or, above
    /// `INLINE_MAX` (32), of [`own_data`](Self::own_data)) under `(tag, sig)` for `readers`
    /// readers.
    #[inline]
    pub fn publish(&self, tag: u64, sig: u64, len: usize, readers: u32) {
        let (me, h) = (self.me, buf_of(tag) * BUF_HDR);
        self.free[buf_of(tag)].store(readers == 0, Ordering::Relaxed);
        self.u32_at(me, h + PENDING)
            .store(readers, Ordering::Relaxed);
        self.u64_at(me, h + SIG).store(sig, Ordering::Relaxed);
        self.u64_at(me, h + LEN)
            .store(len.min(self.bytes) as u64, Ordering::Relaxed);
        self.u64_at(me, h + TAG).store(tag, Ordering::Release);
    }

    /// Starts fetching the data lines of bytes `at..at + len` of `slot`'s publication
    /// `tag` (up to [`PREFETCH_MAX`] bytes of them), so that a reader's miss on them
    /// overlaps its miss on the header line instead of following it. Reads nothing; a
    /// no-op for inline publications (`at + len` ≤ `INLINE_MAX`), beyond the buffer and
    /// off x86-64.
    #[inline]
    pub fn prefetch(&self, slot: usize, tag: u64, at: usize, len: usize) {
        if at + len <= INLINE_MAX || at >= self.bytes {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let d = (self.data_ptr(slot, buf_of(tag)) as *const i8).wrapping_add(at);
            for l in 0..len.min(PREFETCH_MAX).div_ceil(LINE) {
                // SAFETY: a prefetch never faults and reads nothing the program sees;
                // the first line is in the slot's buffer (`at` < its size), later ones may
                // reach past it, which is harmless.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        d.wrapping_add(l * LINE),
                    )
                };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (slot, tag, at);
    }

    /// `slot`'s publication, if it is the one tagged `tag`. The data stays valid until this
    /// rank calls [`done`](Self::done) for it.
    #[inline]
    pub fn peek(&self, slot: usize, tag: u64) -> Option<Published<'_>> {
        let b = buf_of(tag);
        let h = b * BUF_HDR;
        if self.u64_at(slot, h + TAG).load(Ordering::Acquire) != tag {
            return None;
        }
        let sig = self.u64_at(slot, h + SIG).load(Ordering::Relaxed);
        let len = (self.u64_at(slot, h + LEN).load(Ordering::Relaxed) as usize).min(self.bytes);
        let at = if len <= INLINE_MAX {
            let o = self.hdr_base + slot * self.hdr_stride + h + INLINE;
            // SAFETY: inside `slot`'s metadata line, in the mapping.
            unsafe { self.map.as_mut_ptr().add(o) as *const u8 }
        } else {
            self.data_ptr(slot, b) as *const u8
        };
        // SAFETY: published data of `slot`, unchanged until our `done` (contract).
        let data = unsafe { std::slice::from_raw_parts(at, len) };
        Some(Published { sig, data })
    }

    /// This rank has finished reading `slot`'s publication `tag`. Returns the readers left.
    #[inline]
    pub fn done(&self, slot: usize, tag: u64) -> u32 {
        let p = self.u32_at(slot, buf_of(tag) * BUF_HDR + PENDING);
        // The last reader left (the only one, often) stores instead of a locked
        // read-modify-write: the line is in this core's cache since `peek`, and a plain
        // store does not stall for the line's ownership. No other reader can touch the
        // counter after it reached 1 (they are done) and the owner only reads it. The load
        // acquires the other readers' releases, so the owner's acquire of our 0 orders
        // their reads too before its next write.
        if p.load(Ordering::Acquire) == 1 {
            p.store(0, Ordering::Release);
            return 0;
        }
        let before = p.fetch_sub(1, Ordering::AcqRel);
        if before == 0 {
            // More `done`s than readers: a misbehaving caller; keep the counter sane.
            p.store(0, Ordering::Release);
            return 0;
        }
        before - 1
    }

    /// World ranks on this board, by local index.
    pub fn ranks(&self) -> &[u32] {
        &self.ranks
    }
}

#[cfg(test)]
mod tests {
    use crate::{ShmConfig, ShmSegment};

    fn pair(tag: &str) -> (ShmSegment, ShmSegment) {
        let cfg = ShmConfig {
            board_bytes: 8192,
            ..ShmConfig::default()
        };
        let name = format!("phalanx-board-test-{tag}-{}", std::process::id());
        let a = ShmSegment::create(&name, &[3, 7], cfg.clone()).unwrap();
        let b = ShmSegment::open(&name, &[3, 7], 7, cfg).unwrap();
        (a, b)
    }

    #[test]
    fn publication_is_seen_by_tag_and_held_until_every_reader_is_done() {
        let (a, b) = pair("pub");
        let (wa, wb) = (a.board().unwrap(), b.board().unwrap());
        assert_eq!((wa.me(), wb.me()), (0, 1));
        assert_eq!(wb.local_of(3), Some(0));
        assert!(wb.peek(0, 42).is_none());
        assert!(wa.writable(42));
        wa.own_data_len(42, 5).copy_from_slice(b"hello");
        wa.publish(42, 9, 5, 1);
        assert!(!wa.writable(42), "a reader is pending");
        assert!(!wa.writable(44), "the same buffer");
        // The other buffer is free: the next call need not wait for this one's reader.
        assert!(wa.writable(43));
        wa.own_data_len(43, 3).copy_from_slice(b"abc");
        wa.publish(43, 8, 3, 1);
        assert!(wb.peek(0, 41).is_none(), "another tag is not seen");
        let p = wb.peek(0, 42).unwrap();
        assert_eq!((p.sig, p.data), (9, &b"hello"[..]));
        assert_eq!(wb.peek(0, 43).unwrap().data, b"abc");
        assert_eq!(wa.published_tags(0), [42, 43]);
        assert_eq!(wb.done(0, 42), 0);
        assert!(wa.writable(42));
        // An extra `done` does not wrap the counter.
        assert_eq!(wb.done(0, 42), 0);
        assert!(wa.writable(42));
    }

    #[test]
    fn announcements_keep_a_bounded_history() {
        let (a, b) = pair("ann");
        let (wa, wb) = (a.board().unwrap(), b.board().unwrap());
        wa.announce(1, 10);
        wa.announce(2, 20);
        assert_eq!(wb.announced(0), [(2, 20), (1, 10)]);
        assert!(wb.announced(1).is_empty());
        for t in 3..=20 {
            wa.announce(t, t * 10);
        }
        let h = wb.announced(0);
        assert_eq!(h.len(), super::HISTORY);
        assert_eq!(h[0], (20, 200));
        assert_eq!(h[super::HISTORY - 1], (13, 130));
    }

    #[test]
    fn large_publications_use_the_data_area() {
        let (a, b) = pair("large");
        let (wa, wb) = (a.board().unwrap(), b.board().unwrap());
        let big: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        wa.own_data_len(7, big.len()).copy_from_slice(&big);
        wa.publish(7, 1, big.len(), 1);
        assert_eq!(wb.peek(0, 7).unwrap().data, &big[..]);
        let small = [9u8; super::INLINE_MAX];
        wa.own_data_len(8, small.len()).copy_from_slice(&small);
        wa.publish(8, 1, small.len(), 1);
        assert_eq!(wb.peek(0, 8).unwrap().data, &small[..]);
        assert_eq!(
            wb.peek(0, 7).unwrap().data,
            &big[..],
            "the other buffer is untouched"
        );
    }

    #[test]
    fn lengths_are_clamped_to_the_slot() {
        let (a, b) = pair("clamp");
        let (wa, wb) = (a.board().unwrap(), b.board().unwrap());
        wa.publish(5, 0, 1 << 30, 1);
        assert_eq!(wb.peek(0, 5).unwrap().data.len(), wa.capacity());
    }
}
