//! Windows in one shared-memory segment of the host: every member maps every member's
//! part, so operations are loads and stores, and locks are atomics in the segment.
//!
//! Contract:
//! * [`Segment::create`] is collective over the window's communicator. It returns
//!   `None` on every member (the caller falls back to messages, or reports
//!   [`ErrorClass::RmaShared`]) unless every member could map the segment — which
//!   needs every member on this host. The file behind it is unlinked once all mapped.
//! * Layout: one 64-byte header line per member (its lock word and its accumulate
//!   lock), then the members' parts in rank order, each rounded up to 64 bytes.
//! * Lock word: bit 63 an exclusive holder, bit 62 an exclusive locker waiting (new
//!   shared lockers then wait too, so writers are not starved), the low bits the
//!   number of shared holders.
//!   Acquiring spins, yielding, and keeps the engine progressing (other windows and
//!   messages keep moving while it waits).
//! * Accumulate lock: taken around every accumulate-type operation on that member's
//!   part, so such operations are atomic with respect to each other, as MPI requires.
//! * Ordering: acquiring a lock is an acquire, releasing a release; synchronizations
//!   (fence, flush, complete) add a sequentially consistent fence.
//! * Cost: an operation's path neither allocates (up to 256 packed bytes an accumulate
//!   works on the stack) nor enters the engine; a flush is its epoch check and the fence.

use crate::collective::{CommunicatorCollectives, Root, SystemOperation};
use crate::error::{Error, ErrorClass, Result};
use crate::runtime::with_engine;
use crate::topology::{Communicator, SimpleCommunicator};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const LINE: usize = 64;
const EXCL: u64 = 1 << 63;
/// An exclusive locker waits: no new shared holder enters (no writer starvation).
const WANT: u64 = 1 << 62;
/// The shared holders' count.
const SHARED: u64 = WANT - 1;

/// A mapped segment (module docs).
pub(super) struct Segment {
    map: memmap2::MmapMut,
    /// Address of each member's part.
    pub(super) bases: Vec<usize>,
}

impl Segment {
    /// Maps one segment for the members of `comm`, this rank's part `size` bytes
    /// (collective). `None` on every member if any could not map it.
    pub(super) fn create(comm: &SimpleCommunicator, size: usize) -> Result<Option<Segment>> {
        let p = comm.size() as usize;
        let me = comm.rank() as usize;
        // Every member reached over shared memory (the same answer everywhere: a
        // minimum over the members).
        let here = with_engine(|e| {
            Ok((0..p as i32)
                .map(|r| comm.world_rank(r))
                .all(|w| w == e.rank || e.via_shm(w)))
        })?;
        let mine = [size as u64, u64::from(here)];
        let mut all = vec![0u64; 2 * p];
        comm.all_gather_into(&mine[..], &mut all[..]);
        if all.chunks(2).any(|c| c[1] == 0) {
            return Ok(None);
        }
        let part = |s: u64| (s as usize).div_ceil(LINE) * LINE;
        let mut offs = Vec::with_capacity(p);
        let mut at = p * LINE;
        for c in all.chunks(2) {
            offs.push(at);
            at += part(c[0]);
        }
        let total = at.max(LINE);
        let mut name = [0u8; 96];
        let mut made = Ok(());
        if me == 0 {
            let n = format!(
                "/dev/shm/phalanx-win-{}-{}-{:x}",
                std::process::id(),
                comm.context(),
                crate::environment::time().to_bits()
            );
            name[..n.len()].copy_from_slice(n.as_bytes());
            made = make_file(&name, total);
        }
        let mut ok = [u8::from(made.is_ok())];
        comm.process_at_rank(0).broadcast_into(&mut ok[..]);
        comm.process_at_rank(0).broadcast_into(&mut name[..]);
        if ok[0] == 0 {
            return Ok(None);
        }
        let path = path_of(&name);
        let map = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .and_then(|f| {
                // SAFETY: a fresh file of this window, `total` bytes, mapped whole by
                // every member; all accesses stay inside it.
                unsafe { memmap2::MmapMut::map_mut(&f) }
            });
        let got = [u8::from(map.as_ref().is_ok_and(|m| m.len() >= total))];
        let mut all_ok = [0u8];
        comm.all_reduce_into(&got[..], &mut all_ok[..], SystemOperation::min());
        if me == 0 {
            let _ = std::fs::remove_file(&path);
        }
        if all_ok[0] == 0 {
            return Ok(None);
        }
        let map = map?;
        let seg = map.as_ptr() as usize;
        Ok(Some(Segment {
            bases: offs.iter().map(|&o| seg + o).collect(),
            map,
        }))
    }

    fn line(&self, t: usize) -> usize {
        self.map.as_ptr() as usize + t * LINE
    }

    fn lock_word(&self, t: usize) -> &AtomicU64 {
        // SAFETY: header line `t` lies in the mapping (t < members), 64-byte aligned
        // (the mapping is page-aligned), and is only ever accessed atomically.
        unsafe { &*(self.line(t) as *const AtomicU64) }
    }

    fn acc_word(&self, t: usize) -> &AtomicU32 {
        // SAFETY: as for `lock_word`, at offset 8 of the line.
        unsafe { &*((self.line(t) + 8) as *const AtomicU32) }
    }

    /// Takes member `t`'s lock (exclusive or shared), waiting as the module docs say.
    pub(super) fn lock(&self, t: usize, exclusive: bool) -> Result<()> {
        let w = self.lock_word(t);
        let mut spins = 0u32;
        loop {
            let v = w.load(Ordering::Relaxed);
            let next = if exclusive {
                // Free (perhaps wanted by another writer too): taken, the want cleared
                // (other waiting writers set it again).
                (v & (EXCL | SHARED) == 0).then_some(EXCL)
            } else {
                (v & (EXCL | WANT) == 0).then_some(v + 1)
            };
            if next.is_none() && exclusive && v & WANT == 0 {
                w.fetch_or(WANT, Ordering::Relaxed);
            }
            if let Some(n) = next {
                if w.compare_exchange_weak(v, n, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) {
                with_engine(|e| e.progress().map(|_| ()))?;
                crate::runtime::lock::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Releases member `t`'s lock.
    pub(super) fn unlock(&self, t: usize, exclusive: bool) -> Result<()> {
        let w = self.lock_word(t);
        if exclusive {
            // (A waiting writer's want stays.)
            w.fetch_update(Ordering::Release, Ordering::Relaxed, |v| {
                (v & EXCL != 0).then_some(v & WANT)
            })
            .map(|_| ())
            .map_err(|_| {
                Error::Rma(
                    ErrorClass::RmaSync,
                    format!("rank {t} was not locked exclusively"),
                )
            })
        } else {
            w.fetch_update(Ordering::Release, Ordering::Relaxed, |v| {
                (v & EXCL == 0 && v & SHARED > 0).then(|| v - 1)
            })
            .map(|_| ())
            .map_err(|_| Error::Rma(ErrorClass::RmaSync, format!("rank {t} held no shared lock")))
        }
    }

    /// Runs `f` holding member `t`'s accumulate lock.
    pub(super) fn atomically<T>(&self, t: usize, f: impl FnOnce() -> T) -> T {
        let w = self.acc_word(t);
        let mut spins = 0u32;
        while w
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) {
                crate::runtime::lock::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let r = f();
        w.store(0, Ordering::Release);
        r
    }
}

fn path_of(name: &[u8]) -> String {
    String::from_utf8_lossy(name)
        .trim_end_matches('\0')
        .to_string()
}

fn make_file(name: &[u8], total: usize) -> Result<()> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path_of(name))?;
    f.set_len(total as u64)?;
    Ok(())
}

/// Operations on a window in a segment: loads and stores at the target's part.
impl super::Window {
    /// The address of displacement `disp` in member `t`'s part.
    fn direct_addr(&self, seg: &Segment, t: usize, disp: u64) -> *mut u8 {
        let du = self.sizes[t].1 as usize;
        (seg.bases[t] + disp as usize * du) as *mut u8
    }

    /// The packed bytes of `count` elements of `dt` at `origin`.
    ///
    /// # Safety
    /// `origin` readable for the elements.
    pub(super) unsafe fn packed_origin(origin: *const u8, count: usize, dt: &TypeMap) -> Vec<u8> {
        let mut v = Vec::with_capacity(count * dt.size());
        // SAFETY: the caller's promise.
        unsafe { dt.pack(origin, count, &mut v) };
        v
    }

    /// `MPI_Put` on a segment (the caller checked epoch, range and sizes).
    ///
    /// # Safety
    /// As for [`super::Window::put`].
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn direct_put(
        &self,
        seg: &Segment,
        origin: *const u8,
        ocount: usize,
        odt: &TypeMap,
        t: usize,
        disp: u64,
        tdt: &TypeMap,
    ) {
        let at = self.direct_addr(seg, t, disp);
        let n = ocount * odt.size();
        if odt.is_dense() && tdt.is_contiguous() {
            // SAFETY: the origin holds n bytes (a dense type: one run from offset 0); the target range
            // lies in member t's part (checked), which no other memory overlaps.
            unsafe { std::ptr::copy(origin, at, n) };
        } else {
            // SAFETY: as above.
            let v = unsafe { Self::packed_origin(origin, ocount, odt) };
            // SAFETY: the target range was checked.
            unsafe { tdt.unpack(&v, at) };
        }
    }

    /// `MPI_Get` on a segment.
    ///
    /// # Safety
    /// As for [`super::Window::get`].
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn direct_get(
        &self,
        seg: &Segment,
        origin: *mut u8,
        odt: &TypeMap,
        t: usize,
        disp: u64,
        tcount: usize,
        tdt: &TypeMap,
    ) {
        let at = self.direct_addr(seg, t, disp);
        let n = tcount * tdt.size();
        if tdt.is_dense() && odt.is_contiguous() {
            // SAFETY: the target range was checked; the origin holds n bytes.
            unsafe { std::ptr::copy(at, origin, n) };
        } else {
            // SAFETY: as above.
            let v = unsafe { Self::packed_origin(at, tcount, tdt) };
            // SAFETY: the origin holds the elements.
            unsafe { odt.unpack(&v, origin) };
        }
    }

    /// Accumulate-type operations on a segment, atomic under member `t`'s accumulate
    /// lock: the old values go to `result` (when given), then `op` combines `data`
    /// (packed, as many bytes as the target elements) into the target. A
    /// compare-and-swap passes `compare`: the target is replaced only if equal.
    ///
    /// # Safety
    /// The target range was checked; `result` writable for its elements.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn direct_accumulate(
        &self,
        seg: &Segment,
        data: &[u8],
        result: Option<(*mut u8, &TypeMap)>,
        compare: Option<&[u8]>,
        t: usize,
        disp: u64,
        tcount: usize,
        tdt: &TypeMap,
        op: AccOp,
    ) -> Result<()> {
        let at = self.direct_addr(seg, t, disp);
        if let (AccOp::Op(o), None, None, true) = (op, result, compare, tdt.is_contiguous()) {
            // A plain accumulate into contiguous memory: combined in place, one pass.
            let n = tcount * tdt.size();
            return seg.atomically(t, || {
                // SAFETY: the target range (n bytes of a contiguous type at `at`) was
                // checked by the caller; the accumulate lock keeps others out of it.
                let cur = unsafe { std::slice::from_raw_parts_mut(at, n) };
                crate::coll::ops::apply(o, tdt, cur, data)
            });
        }
        let apply = |cur: &mut [u8]| {
            if let Some((r, rdt)) = result {
                // SAFETY: the caller's promise.
                unsafe { rdt.unpack(cur, r) };
            }
            if compare.is_some_and(|c| c != &cur[..]) {
                return Ok(());
            }
            let new: &[u8] = match op {
                AccOp::NoOp => return Ok(()),
                AccOp::Replace => data,
                AccOp::Op(o) => {
                    crate::coll::ops::apply(o, tdt, cur, data)?;
                    cur
                }
            };
            // SAFETY: the target range was checked by the caller.
            unsafe { tdt.unpack(new, at) };
            Ok(())
        };
        // SAFETY: as above.
        seg.atomically(t, || unsafe { with_packed(at, tcount, tdt, apply) })
    }
}

/// Packed bytes up to this many stay on the stack ([`with_packed`]): every
/// fetch-and-op and compare-and-swap, and small accumulates.
const SMALL: usize = 256;

/// Runs `f` on the packed bytes of `count` elements of `dt` at `src`: a copy on the
/// stack when they are few and one run in memory, else a packed vector.
///
/// # Safety
/// `src` readable for the elements.
pub(super) unsafe fn with_packed<R>(
    src: *const u8,
    count: usize,
    dt: &TypeMap,
    f: impl FnOnce(&mut [u8]) -> R,
) -> R {
    let n = count * dt.size();
    if n <= SMALL && dt.is_dense() {
        let mut b = [std::mem::MaybeUninit::<u8>::uninit(); SMALL];
        // SAFETY: a dense type's elements are n bytes from offset 0 (the caller's
        // promise); once copied, the first n bytes of `b` are initialized.
        let v = unsafe {
            std::ptr::copy_nonoverlapping(src, b.as_mut_ptr().cast(), n);
            std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<u8>(), n)
        };
        return f(v);
    }
    // SAFETY: the caller's promise.
    let mut v = unsafe { super::Window::packed_origin(src, count, dt) };
    f(&mut v)
}

use super::AccOp;
use crate::datatype::TypeMap;
