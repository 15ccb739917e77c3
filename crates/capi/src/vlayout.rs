//! The `(counts, displs)` layouts of the varying-count collectives (`MPI_Gatherv`,
//! `MPI_Scatterv`, `MPI_Allgatherv`, `MPI_Alltoallv`) as the core's partitions take them.
//!
//! Contract: a layout counts in elements of its predefined datatype's size (a
//! contiguous `sz`-byte type over the caller's bytes, so counts and displacements stay
//! the caller's ints and blocks may lie anywhere in a buffer of any size), rebased so
//! that its lowest non-empty block starts the buffer (MPI allows negative
//! displacements). Send and receive data may interleave as long as no send block
//! overlaps a receive block ([`Separation`]): then the send bytes are copied before the
//! receive buffer is lent out, so no `&[u8]` and `&mut [u8]` ever cover the same bytes;
//! an overlap is `MPI_ERR_BUFFER`. Receive blocks that overlap one another (erroneous in
//! MPI, but done by programs and test suites, which expect each location to hold one of
//! the blocks written there) are received into a packed temporary and copied into place
//! in rank order afterwards, so the core's partition never aliases.
//!
//! Counts and displacements come as `int` or as `MPI_Count`/`MPI_Aint` ([`Wide`]); the
//! core's partitions take `i32` ([`phalanx::Count`]), so a count, rebased displacement,
//! span or element size past `2^31 − 1` is `MPI_ERR_COUNT` (never truncated).

use crate::consts::*;
use crate::wide::{self, Wide};
use crate::{bytes, bytes_mut, count, err, CResult};
use phalanx::datatype::{Equivalence, MutView, Partition, PartitionMut, UserDatatype, View};
use phalanx::Count;
use std::ffi::{c_int, c_void};

/// The error of a layout the core's partitions cannot describe: they count in `i32`.
#[cold]
fn past_partition(a: u128, b: u128) -> crate::CErr {
    err(
        MPI_ERR_COUNT,
        format!(
            "count or displacement {} past 2^31 - 1: the varying-count collectives' \
             partitions take int element counts and displacements (and element sizes)",
            a.max(b)
        ),
    )
}

/// A layout of `counts.len()` blocks at `base`.
pub(crate) struct VLayout {
    base: *mut u8,
    /// Counts and displacements in elements of `sz` bytes, rebased.
    pub(crate) counts: Vec<Count>,
    pub(crate) displs: Vec<Count>,
    /// Elements from `base` to the end of the last block.
    span: usize,
    sz: usize,
    dt: UserDatatype,
}

impl VLayout {
    /// The layout of `n` blocks of `sz`-byte elements at `base`.
    ///
    /// # Safety
    /// `counts` and `displs` point to `n` readable ints.
    pub(crate) unsafe fn new<C: Wide, D: Wide>(
        base: *const c_void,
        counts: *const C,
        displs: *const D,
        n: usize,
        sz: usize,
    ) -> CResult<VLayout> {
        // SAFETY: n readable values each (caller).
        let (cs, ds) = unsafe { (wide::slice(counts, n)?, wide::slice(displs, n)?) };
        let lo = (0..n)
            .filter(|&r| cs[r].wide() > 0)
            .map(|r| ds[r].wide())
            .min()
            .unwrap_or(0);
        let (mut bc, mut bd, mut span) = (Vec::with_capacity(n), Vec::with_capacity(n), 0usize);
        for r in 0..n {
            let c = count(cs[r].wide())?;
            // Rebased, so nonnegative; the difference of two i64 fits i128 always.
            let d = if c > 0 {
                (ds[r].wide() as i128 - lo as i128) as u128
            } else {
                0
            };
            let (c32, d32) = (Count::try_from(c), Count::try_from(d));
            let (Ok(c32), Ok(d32)) = (c32, d32) else {
                return Err(past_partition(c as u128, d));
            };
            bc.push(c32);
            bd.push(d32);
            span = span.max(d as usize + c);
        }
        if Count::try_from(span).is_err() {
            return Err(past_partition(span as u128, 0));
        }
        let esz = Count::try_from(sz).map_err(|_| past_partition(sz as u128, 0))?;
        Ok(VLayout {
            base: (base as *mut u8).wrapping_offset((lo as isize).wrapping_mul(sz as isize)),
            counts: bc,
            displs: bd,
            span,
            sz,
            dt: UserDatatype::contiguous(esz, &u8::equivalent_datatype()),
        })
    }

    /// Bytes of member `r`'s block, relative to the layout's start.
    pub(crate) fn block(&self, r: c_int) -> std::ops::Range<usize> {
        let r = r as usize;
        let d = self.displs[r] as usize * self.sz;
        d..d + self.counts[r] as usize * self.sz
    }

    /// The non-empty blocks as absolute address ranges.
    fn ranges(&self) -> Vec<(usize, usize)> {
        (0..self.counts.len())
            .map(|r| self.block(r as c_int))
            .filter(|b| !b.is_empty())
            .map(|b| (self.base as usize + b.start, self.base as usize + b.end))
            .collect()
    }

    fn span_range(&self) -> (usize, usize) {
        let a = self.base as usize;
        (a, a + self.span * self.sz)
    }

    /// Runs `f` on the layout as a send partition (the bytes borrowed for the call).
    ///
    /// # Safety
    /// The blocks lie in readable memory (the MPI contract).
    pub(crate) unsafe fn read<T>(
        &self,
        f: impl FnOnce(&Partition<'_, View<'_, '_, UserDatatype, [u8]>>) -> T,
    ) -> CResult<T> {
        // SAFETY: the caller's contract.
        let s = unsafe { bytes(self.base.cast(), self.span * self.sz)? };
        // SAFETY: `span` elements of `sz` bytes cover the slice exactly.
        let v = unsafe { View::with_count_and_datatype(s, self.span as Count, &self.dt) };
        Ok(f(&Partition::new(&v, &self.counts[..], &self.displs[..])))
    }

    /// Runs `f` on the layout as a receive partition; `own` (this member's block, in
    /// place) is copied out first and given to `f`.
    ///
    /// # Safety
    /// The blocks lie in writable memory (the MPI contract), which nothing else borrows
    /// during the call.
    pub(crate) unsafe fn write<T>(
        &self,
        own: Option<c_int>,
        f: impl FnOnce(&[u8], &mut PartitionMut<'_, MutView<'_, '_, UserDatatype, [u8]>>) -> T,
    ) -> CResult<T> {
        if self.self_overlapping() {
            // SAFETY: the caller's contract.
            return unsafe { self.write_staged(own, f) };
        }
        // SAFETY: the caller's contract.
        let r = unsafe { bytes_mut(self.base.cast(), self.span * self.sz)? };
        let mine = own.map(|o| r[self.block(o)].to_vec()).unwrap_or_default();
        // SAFETY: `span` elements of `sz` bytes cover the slice exactly.
        let mut v = unsafe { MutView::with_count_and_datatype(r, self.span as Count, &self.dt) };
        Ok(f(
            &mine,
            &mut PartitionMut::new(&mut v, &self.counts[..], &self.displs[..]),
        ))
    }
}

impl VLayout {
    /// Whether two non-empty blocks share a byte.
    fn self_overlapping(&self) -> bool {
        let mut r = self.ranges();
        r.sort_unstable();
        r.windows(2).any(|w| w[1].0 < w[0].1)
    }

    /// [`VLayout::write`] for blocks that overlap one another: `f` runs on the blocks
    /// packed in rank order in a temporary, then each block is copied to its place in
    /// rank order (where blocks overlap, the higher rank's bytes remain).
    ///
    /// # Safety
    /// As [`VLayout::write`].
    unsafe fn write_staged<T>(
        &self,
        own: Option<c_int>,
        f: impl FnOnce(&[u8], &mut PartitionMut<'_, MutView<'_, '_, UserDatatype, [u8]>>) -> T,
    ) -> CResult<T> {
        let mut displs = Vec::with_capacity(self.counts.len());
        let mut at: Count = 0;
        for &c in &self.counts {
            displs.push(at);
            at = at
                .checked_add(c)
                .ok_or_else(|| err(MPI_ERR_COUNT, "a layout of more than 2^31 elements"))?;
        }
        let mut tmp = vec![0u8; at as usize * self.sz];
        let packed = VLayout {
            base: tmp.as_mut_ptr(),
            counts: self.counts.clone(),
            displs,
            span: at as usize,
            sz: self.sz,
            dt: self.dt.clone(),
        };
        if let Some(o) = own {
            let (from, to) = (self.block(o), packed.block(o));
            // SAFETY: the caller's block o is readable (caller); tmp holds its copy's room.
            tmp[to].copy_from_slice(unsafe {
                bytes(self.base.wrapping_add(from.start).cast(), from.len())?
            });
        }
        // SAFETY: tmp is ours, its blocks disjoint.
        let t = unsafe { packed.write(own, f)? };
        for r in 0..self.counts.len() as c_int {
            let (from, to) = (packed.block(r), self.block(r));
            // SAFETY: block r of the caller's layout is writable (caller); tmp is a
            // separate allocation; blocks are copied one at a time (they may overlap
            // each other, never tmp).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    tmp[from].as_ptr(),
                    self.base.wrapping_add(to.start),
                    to.len(),
                )
            };
        }
        Ok(t)
    }
}

/// How send data stand to a receive layout (MPI forbids only overlapping blocks).
pub(crate) enum Separation {
    /// Apart: the send bytes may be borrowed as they are.
    Apart,
    /// Interleaved (send data in the gaps of the receive layout, or the other way round):
    /// the send bytes are copied first.
    Interleaved,
}

fn overlapping(a: &mut [(usize, usize)], b: &mut [(usize, usize)]) -> bool {
    a.sort_unstable();
    b.sort_unstable();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].0 < b[j].1 && b[j].0 < a[i].1 {
            return true;
        }
        if a[i].1 <= b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

/// How the send blocks `send` (absolute ranges) and their span stand to the receive
/// blocks `recv` and theirs; `MPI_ERR_BUFFER` when a send block overlaps a receive block.
fn separation(
    mut send: Vec<(usize, usize)>,
    send_span: (usize, usize),
    mut recv: Vec<(usize, usize)>,
    recv_span: (usize, usize),
) -> CResult<Separation> {
    let empty = |s: (usize, usize)| s.0 >= s.1;
    if empty(send_span)
        || empty(recv_span)
        || send_span.1 <= recv_span.0
        || recv_span.1 <= send_span.0
    {
        return Ok(Separation::Apart);
    }
    if overlapping(&mut send, &mut recv) {
        return Err(err(MPI_ERR_BUFFER, "a send block overlaps a receive block"));
    }
    Ok(Separation::Interleaved)
}

/// One send buffer of `len` bytes at `p` against a receive layout.
pub(crate) fn one_against(p: *const c_void, len: usize, recv: &VLayout) -> CResult<Separation> {
    let s = (p as usize, p as usize + len);
    separation(vec![s], s, recv.ranges(), recv.span_range())
}

/// The `len` send bytes at `p` of a gather into `recv`: the caller's bytes when they lie
/// apart from its blocks, else a copy kept in `keep` (`MPI_ERR_BUFFER` on an overlap).
///
/// # Safety
/// `p` holds `len` readable bytes, unchanged during the call.
pub(crate) unsafe fn send_beside<'a>(
    p: *const c_void,
    len: usize,
    recv: &VLayout,
    keep: &'a mut Vec<u8>,
) -> CResult<&'a [u8]> {
    match one_against(p, len, recv)? {
        // SAFETY: the caller's contract; apart from the receive blocks (checked).
        Separation::Apart => unsafe { bytes(p, len) },
        Separation::Interleaved => {
            // SAFETY: as above; copied before the receive buffer is lent out.
            *keep = unsafe { bytes(p, len)? }.to_vec();
            Ok(&keep[..])
        }
    }
}

/// A send layout against one receive buffer of `len` bytes at `p`.
pub(crate) fn against_one(send: &VLayout, p: *const c_void, len: usize) -> CResult<Separation> {
    let r = (p as usize, p as usize + len);
    separation(send.ranges(), send.span_range(), vec![r], r)
}

/// A send layout against a receive layout.
pub(crate) fn layouts(send: &VLayout, recv: &VLayout) -> CResult<Separation> {
    separation(
        send.ranges(),
        send.span_range(),
        recv.ranges(),
        recv.span_range(),
    )
}

impl VLayout {
    /// The same layout over a copy of its bytes (for [`Separation::Interleaved`]): the
    /// copy must outlive the returned layout.
    ///
    /// # Safety
    /// The blocks lie in readable memory.
    pub(crate) unsafe fn copied(&self, keep: &mut Vec<u8>) -> CResult<VLayout> {
        // SAFETY: the caller's contract.
        *keep = unsafe { bytes(self.base.cast(), self.span * self.sz)? }.to_vec();
        Ok(VLayout {
            base: keep.as_mut_ptr(),
            counts: self.counts.clone(),
            displs: self.displs.clone(),
            span: self.span,
            sz: self.sz,
            dt: self.dt.clone(),
        })
    }
}
