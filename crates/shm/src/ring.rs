//! One single-producer/single-consumer ring of 64-byte cells in the shared segment.
//!
//! Invariants (cells counted from the ring's creation, never wrapping in practice: u64):
//! * `tail ≤ head ≤ tail + cap`, where `head` is written only by the producer and `tail`
//!   only by the consumer. Cells in `[tail, head)` belong to the consumer, the rest to the
//!   producer.
//! * Every frame starts at a cell boundary with an 8-byte header word
//!   `len | flags << 28 | pos << 32` (`pos`: the frame's first cell, truncated to 32
//!   bits) and occupies `cells(len)` cells, all at positions `< cap` (no straddling): when
//!   a frame would cross the end, the producer writes a `WRAP` header covering the rest of
//!   the ring.
//! * The producer writes frame bytes, then the header word (a release store), then
//!   `head` (a release store). The consumer learns that a frame is published either from
//!   the header word at `tail` (an acquire load that finds `tail`'s own `pos`: one cache
//!   line per small message instead of two) or from `head`. That is sound because the
//!   first word of every cell the producer may write next is zero or a header written
//!   for that cell in an earlier lap (whose `pos` differs from the cell's position now
//!   by a non-zero multiple of `cap` below 2^32, so it never matches): before its release
//!   store of `tail` the consumer zeroes the first word of every cell it consumed that
//!   does not hold a header of its own position (a fresh segment is zero; every cell is
//!   consumed once per lap, frame, payload or skipped, so no older header survives a
//!   lap). The zeroing waits for that store — see [`RxRing::publish`] — so it is not on
//!   the path of the consumer's next message, and a ring of one-cell frames is never
//!   written by its consumer at all. And the producer writes a cell's first word only as
//!   a header or, for a frame's later cells, after that frame's header cell — never at
//!   the consumer's `tail` before the header. Symmetrically the consumer is done with cells
//!   before its release store of `tail`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::{CELL, FRAME_HEADER};

const F_DATA: u64 = 1;
const F_WRAP: u64 = 2;
/// Largest frame length a header can carry (28 bits).
pub(crate) const MAX_LEN: usize = (1 << 28) - 1;

/// The header word of a frame of `len` bytes with `flags` starting at cell `pos`.
#[inline]
fn header(len: usize, flags: u64, pos: u64) -> u64 {
    len as u64 | flags << 28 | (pos as u32 as u64) << 32
}

/// (length, flags, pos) of a header word.
#[inline]
fn fields(h: u64) -> (usize, u64, u32) {
    (
        (h & MAX_LEN as u64) as usize,
        (h >> 28) & 0xf,
        (h >> 32) as u32,
    )
}

/// Whether `h` is a header word (data or wrap marker) written for cell position `pos`.
#[inline]
fn is_header_at(h: u64, pos: u64) -> bool {
    let (_, flags, p) = fields(h);
    p == pos as u32 && (flags == F_DATA || flags == F_WRAP)
}

/// Cells occupied by a frame of `len` bytes.
#[inline]
pub(crate) fn cells_for(len: usize) -> u64 {
    (len + FRAME_HEADER).div_ceil(CELL) as u64
}

/// Cells of a published frame `peek` prefetches before handing it out.
const PREFETCH_FRAME_CELLS: u64 = 64;

/// Cells of the next frame `readable` prefetches (more start to compete with the producer
/// for lines it is still writing).
const PREFETCH_CELLS: u64 = 2;

/// Hint to bring the line at `p` into the cache (no effect on memory, never faults).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint: it reads nothing architecturally and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Raw view of one ring's shared words and data area.
#[derive(Clone, Copy)]
pub(crate) struct RingRef {
    pub head: *const AtomicU64,
    pub tail: *const AtomicU64,
    /// Set by a producer that found the ring full and is about to sleep.
    pub pwait: *const AtomicU32,
    pub data: *mut u8,
    /// Capacity in cells (power of two).
    pub cap: u64,
}

impl RingRef {
    fn head(&self) -> &AtomicU64 {
        // SAFETY: points into the live mapping (kept alive by the transport that owns both),
        // aligned by the layout.
        unsafe { &*self.head }
    }
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as for `head`.
        unsafe { &*self.tail }
    }
    pub fn pwait(&self) -> &AtomicU32 {
        // SAFETY: as for `head`.
        unsafe { &*self.pwait }
    }
    #[inline]
    fn cell(&self, pos: u64) -> *mut u8 {
        // SAFETY: `pos & (cap-1) < cap`, and the data area is `cap * CELL` bytes.
        unsafe { self.data.add(((pos & (self.cap - 1)) as usize) * CELL) }
    }
    /// Maps every page of the data area into this process, writable, without touching
    /// its contents (`MADV_POPULATE_WRITE`): the segment is mapped lazily so that a host
    /// of many ranks starts fast, and a ring in use should not take a page fault every
    /// 64 small frames. Best effort (kernels before 5.14 lack it).
    fn populate(&self) {
        let page = 4096usize;
        let start = self.data as usize & !(page - 1);
        let end = self.data as usize + self.cap as usize * CELL;
        // SAFETY: the range lies within the live shared mapping (page-rounded down to
        // its own first page); MADV_POPULATE_WRITE only faults pages in.
        unsafe {
            libc::madvise(
                start as *mut libc::c_void,
                end - start,
                libc::MADV_POPULATE_WRITE,
            );
        }
    }

    /// The first word of cell `pos` (a header word, or zero, or a later cell's payload).
    #[inline]
    fn word(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: cells are 64-byte aligned inside the live mapping; the word is accessed
        // atomically wherever producer and consumer may race on it (module docs).
        unsafe { &*(self.cell(pos) as *const AtomicU64) }
    }
}

/// Producer end.
pub(crate) struct TxRing {
    r: RingRef,
    head: u64,
    cached_tail: u64,
    /// The data area's pages are mapped in (at the first frame).
    populated: bool,
}

impl TxRing {
    pub fn new(r: RingRef) -> TxRing {
        let head = r.head().load(Ordering::Acquire);
        let cached_tail = r.tail().load(Ordering::Acquire);
        TxRing {
            r,
            head,
            cached_tail,
            populated: false,
        }
    }

    pub fn ring(&self) -> &RingRef {
        &self.r
    }

    #[inline]
    fn has_room(&mut self, cells: u64) -> bool {
        if self.head + cells - self.cached_tail <= self.r.cap {
            return true;
        }
        self.cached_tail = self.r.tail().load(Ordering::Acquire);
        self.head + cells - self.cached_tail <= self.r.cap
    }

    /// Room for a frame of `len` bytes right now (may write and publish a wrap marker).
    /// Returns a pointer to the frame's first byte; `len` bytes from there are ours until
    /// `commit`. `len ≤ max_frame()` is the caller's job.
    #[inline]
    pub fn reserve(&mut self, len: usize) -> Option<*mut u8> {
        if !self.populated {
            self.populated = true;
            self.r.populate();
        }
        let cells = cells_for(len);
        let off = self.head & (self.r.cap - 1);
        if off + cells > self.r.cap {
            let skip = self.r.cap - off;
            if !self.has_room(skip) {
                return None;
            }
            self.r
                .word(self.head)
                .store(header(0, F_WRAP, self.head), Ordering::Release);
            self.head += skip;
            // Published at once: a consumer stuck behind an unpublished wrap would keep
            // the ring looking full forever.
            self.r.head().store(self.head, Ordering::Release);
        }
        if !self.has_room(cells) {
            return None;
        }
        // SAFETY: the frame's cells are free and inside the data area (no straddling).
        Some(unsafe { self.r.cell(self.head).add(FRAME_HEADER) })
    }

    /// Publish the frame reserved last, `len` bytes long (at most the reserved length).
    #[inline]
    pub fn commit(&mut self, len: usize) {
        self.r
            .word(self.head)
            .store(header(len, F_DATA, self.head), Ordering::Release);
        self.head += cells_for(len);
        self.r.head().store(self.head, Ordering::Release);
    }

    /// Cells written and not yet handed back by the consumer (its published index is
    /// re-read: what it consumed but has not published yet still counts).
    pub fn unconsumed(&mut self) -> u64 {
        self.cached_tail = self.r.tail().load(Ordering::Acquire);
        self.head - self.cached_tail
    }

    /// Producer half of the sleep handshake: could `reserve(len)` make progress now
    /// (write its wrap marker, or the frame)?
    pub fn room_for(&mut self, len: usize) -> bool {
        let cells = cells_for(len);
        let off = self.head & (self.r.cap - 1);
        let need = if off + cells > self.r.cap {
            self.r.cap - off
        } else {
            cells
        };
        self.has_room(need)
    }
}

/// Consumer end.
pub(crate) struct RxRing {
    r: RingRef,
    tail: u64,
    published: u64,
    cached_head: u64,
    /// Cells of the frame returned by the last `peek` (0 = none outstanding).
    cur: u64,
    /// Publish the tail after this many consumed cells even mid-burst.
    publish_every: u64,
    /// The data area's pages are mapped in (at the first frame).
    populated: bool,
    /// Polls that found nothing published at the tail.
    empty_polls: u32,
}

/// Empty polls between two reads of `head` (see [`RxRing::peek`]).
const HEAD_CHECK_EVERY: u32 = 1024;

/// What the consumer found in the ring.
pub(crate) enum Peek {
    Empty,
    Frame(*const u8, usize),
    Corrupt(u64),
}

impl RxRing {
    pub fn new(r: RingRef) -> RxRing {
        let tail = r.tail().load(Ordering::Acquire);
        let cached_head = r.head().load(Ordering::Acquire);
        RxRing {
            r,
            tail,
            published: tail,
            cached_head,
            cur: 0,
            publish_every: (r.cap / 4).max(1),
            populated: false,
            empty_polls: 0,
        }
    }

    /// Cheap readability test: loads only. It also prefetches the next frame's first
    /// cells, so the cache-line transfers of the head index and of the frame overlap
    /// instead of following one another.
    /// Cells the producer published that this end has not consumed yet (reads the
    /// producer's index).
    pub fn waiting(&self) -> u64 {
        self.r
            .head()
            .load(Ordering::Acquire)
            .saturating_sub(self.tail)
    }

    #[inline]
    pub fn readable(&self) -> bool {
        if self.tail != self.cached_head {
            return true;
        }
        // A frame is published exactly when its header word at `tail` is (the producer
        // stores `head` after it): no need to read `head`.
        if self.published_at_tail().is_some() {
            return true;
        }
        for k in 1..PREFETCH_CELLS {
            prefetch(self.r.cell(self.tail + k));
        }
        false
    }

    /// The header word at `tail` if it is one the producer published for this position
    /// (acquire: the frame's bytes are visible), else `None`.
    #[inline]
    fn published_at_tail(&self) -> Option<u64> {
        let h = self.r.word(self.tail).load(Ordering::Acquire);
        let (_, flags, pos) = fields(h);
        (pos == self.tail as u32 && (flags == F_DATA || flags == F_WRAP)).then_some(h)
    }

    /// The next frame, without consuming it. Repeated calls return the same frame.
    #[inline]
    pub fn peek(&mut self, max_frame: usize) -> Peek {
        loop {
            let off = self.tail & (self.r.cap - 1);
            let h = if self.tail != self.cached_head {
                self.r.word(self.tail).load(Ordering::Acquire)
            } else if let Some(h) = self.published_at_tail() {
                // Published (its own position in the header): no need for `head`.
                let (len, flags, _) = fields(h);
                let span = if flags == F_WRAP {
                    self.r.cap - off
                } else {
                    cells_for(len).min(self.r.cap - off)
                };
                self.cached_head = self.tail + span;
                h
            } else {
                // Nothing published at the tail. `head` is read only now and then (to
                // report a corrupt header instead of waiting on it forever): reading it
                // on every empty poll would pull its line away from the producer, which
                // writes it with every frame.
                self.empty_polls = self.empty_polls.wrapping_add(1);
                if !self.empty_polls.is_multiple_of(HEAD_CHECK_EVERY) {
                    return Peek::Empty;
                }
                // `head` may lag behind frames already taken through their headers.
                let head = self.r.head().load(Ordering::Acquire);
                if head <= self.tail {
                    return Peek::Empty;
                }
                self.cached_head = head;
                self.r.word(self.tail).load(Ordering::Acquire)
            };
            let (len, flags, pos) = fields(h);
            if flags == F_WRAP && pos == self.tail as u32 {
                // Zeroed with the other consumed cells when the tail is published.
                self.tail += self.r.cap - off;
                continue;
            }
            let cells = cells_for(len);
            if flags != F_DATA
                || pos != self.tail as u32
                || len > max_frame
                || off + cells > self.r.cap
                || self.tail + cells > self.cached_head
            {
                return Peek::Corrupt(h);
            }
            if !self.populated {
                self.populated = true;
                self.r.populate();
            }
            let p = self.r.cell(self.tail);
            self.cur = cells;
            // The frame's other lines are all published: ask for them together, so that
            // their transfers overlap instead of following the copy line by line.
            for k in 1..cells.min(PREFETCH_FRAME_CELLS) {
                prefetch(self.r.cell(self.tail + k));
            }
            // SAFETY: the frame lies within the data area (checked just above).
            return Peek::Frame(unsafe { p.add(FRAME_HEADER) }, len);
        }
    }

    /// Consume the frame returned by the last `peek`. Returns true if the producer asked
    /// to be woken (the caller signals its eventfd).
    #[inline]
    pub fn release(&mut self) -> bool {
        debug_assert!(self.cur != 0, "release without peek");
        self.tail += self.cur;
        self.cur = 0;
        if self.tail - self.published >= self.publish_every {
            return self.publish();
        }
        false
    }

    /// Whether leaving the library should publish now: a sixteenth of the ring is
    /// consumed and unpublished, or the producer waits for room. (Fewer cells can wait:
    /// the next poll that finds the ring empty publishes them, and a producer held back
    /// by them alone still has fifteen sixteenths of the ring.)
    #[inline]
    pub fn worth_publishing(&self) -> bool {
        let n = self.tail - self.published;
        n > 0 && (n >= self.publish_every / 4 || self.r.pwait().load(Ordering::Relaxed) != 0)
    }

    /// Make consumed cells visible to the producer, the first word of each zeroed first
    /// (module docs). Returns true if it is waiting for room and must be woken.
    ///
    /// The transport calls this when the ring is found empty, when a quarter of it waits
    /// and when the consumer leaves the library (see `ShmTransport::publish_consumed`),
    /// not after every frame: the stores to consumed cells take their lines back from
    /// the producer, and done right after a frame they would sit in this core's store
    /// buffer ahead of its answer to that frame, delaying the answer by a cache-line
    /// round trip.
    #[inline]
    pub fn publish(&mut self) -> bool {
        if self.published == self.tail {
            return false;
        }
        for c in self.published..self.tail {
            // A header of this lap stays (it can never match a later lap's position, and
            // not writing it leaves the line shared instead of taking it from the
            // producer); every other first word — payload of a longer frame, a skipped
            // cell behind a wrap marker — goes back to zero.
            let w = self.r.word(c);
            let v = w.load(Ordering::Relaxed);
            if v != 0 && !is_header_at(v, c) {
                w.store(0, Ordering::Relaxed);
            }
        }
        self.published = self.tail;
        self.r.tail().store(self.tail, Ordering::Release);
        // No fence (it would cost a cache-line round trip per receive): a producer about to
        // sleep on a full ring re-checks the tail twice (see the crate docs on sleeping).
        self.r.pwait().load(Ordering::Relaxed) != 0 && self.r.pwait().swap(0, Ordering::AcqRel) != 0
    }
}

#[cfg(test)]
mod tests {
    //! One producer and one consumer interleaved on one thread over a heap ring, many
    //! laps, with payloads crafted to look like headers: every frame arrives once, in
    //! order, intact, and an empty ring reads as empty. A failure names its seed
    //! (`PHALANX_RING_SEED=N` replays it).
    use super::*;
    use std::alloc::{alloc_zeroed, dealloc, Layout};

    struct Heap {
        p: *mut u8,
        layout: Layout,
    }
    impl Drop for Heap {
        fn drop(&mut self) {
            // SAFETY: allocated in `ring` with this layout.
            unsafe { dealloc(self.p, self.layout) };
        }
    }

    /// A zeroed ring of `cap` cells: (its words and data, the allocation).
    fn ring(cap: u64) -> (RingRef, Heap) {
        let layout = Layout::from_size_align(3 * CELL + cap as usize * CELL, 4096).unwrap();
        // SAFETY: non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        assert!(!p.is_null());
        let r = RingRef {
            head: p as *const AtomicU64,
            // SAFETY: within the allocation, 64-byte aligned.
            tail: unsafe { p.add(CELL) } as *const AtomicU64,
            pwait: unsafe { p.add(2 * CELL) } as *const AtomicU32,
            data: unsafe { p.add(3 * CELL) },
            cap,
        };
        (r, Heap { p, layout })
    }

    fn next(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// Frame `n`'s bytes: its number, then words that look like headers of this or
    /// later laps of the cells they land in (`pos` of every cell from `at`).
    fn frame(n: u64, len: usize, at: u64, cap: u64, seed: &mut u64) -> Vec<u8> {
        let mut b = vec![0u8; len];
        let k = len.min(8);
        b[..k].copy_from_slice(&n.to_le_bytes()[..k]);
        // Offset in the frame of each later cell's first word.
        let mut off = CELL - FRAME_HEADER;
        let mut cell = at + 1;
        while off + 8 <= len {
            let lap = next(seed) % 3;
            let fake = header(next(seed) as usize % 200, F_DATA, cell + lap * cap);
            b[off..off + 8].copy_from_slice(&fake.to_le_bytes());
            off += CELL;
            cell += 1;
        }
        b
    }

    #[test]
    fn frames_cross_many_laps_intact_whatever_their_payload() {
        let seeds: Vec<u64> = match std::env::var("PHALANX_RING_SEED") {
            Ok(s) => vec![s.parse().expect("PHALANX_RING_SEED is a number")],
            Err(_) => (1..=40).collect(),
        };
        for seed0 in seeds {
            let cap = 16;
            let (r, _heap) = ring(cap);
            let mut tx = TxRing::new(r);
            let mut rx = RxRing::new(r);
            let mut seed = seed0.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let (mut sent, mut got) = (0u64, 0u64);
            let mut expect = std::collections::VecDeque::new();
            while got < 2000 {
                if next(&mut seed).is_multiple_of(2) {
                    // Produce one frame of 0 … 4 cells' worth.
                    let len = next(&mut seed) as usize % (4 * CELL - FRAME_HEADER);
                    if let Some(p) = tx.reserve(len) {
                        let at = tx.head;
                        let b = frame(sent, len, at, cap, &mut seed);
                        // SAFETY: `len` reserved bytes at `p`.
                        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, len) };
                        tx.commit(len);
                        expect.push_back(b);
                        sent += 1;
                    }
                } else {
                    match rx.peek(4 * CELL) {
                        Peek::Empty => {
                            assert!(expect.is_empty(), "seed {seed0}: frame {got} not seen");
                            rx.publish();
                        }
                        Peek::Corrupt(h) => panic!("seed {seed0}: corrupt header {h:#x}"),
                        Peek::Frame(p, len) => {
                            // SAFETY: a published frame of `len` bytes.
                            let b = unsafe { std::slice::from_raw_parts(p, len) };
                            let want = expect.pop_front().unwrap_or_else(|| {
                                panic!("seed {seed0}: a frame read where none was sent")
                            });
                            assert_eq!(b, &want[..], "seed {seed0}: frame {got}");
                            rx.release();
                            got += 1;
                        }
                    }
                }
            }
        }
    }
}
