//! One-sided communication (MPI RMA): windows of memory that other ranks put to, get
//! from and accumulate into, with every synchronization of MPI — fence,
//! post-start-complete-wait, and passive target (lock, unlock, flush).
//!
//! Contract:
//! * A [`Window`] is created collectively over a communicator (`allocate`, `create`,
//!   `allocate_shared`, `create_dynamic`) and freed collectively ([`Window::free`]).
//!   It runs on two private duplicates of the communicator: one for its collectives
//!   (fence, free), one whose context carries its operations (`engine::rma`).
//! * Operations ([`Window::put`], `get`, `accumulate`, `get_accumulate`,
//!   `fetch_and_op`, `compare_and_swap`, and the request-based forms) are nonblocking:
//!   their origin buffer must stay untouched (put, accumulate) or unread (get) until the
//!   epoch's synchronization, or the request, completes them. Each is checked before
//!   anything is sent: an epoch must give access to the target
//!   ([`ErrorClass::RmaSync`]), the target range must lie in the target's window where
//!   its size is known ([`ErrorClass::RmaRange`]), origin and target must hold the same
//!   number of bytes ([`ErrorClass::Type`]).
//! * Accumulates of one origin to one target are applied in order, and each is atomic
//!   with respect to every other accumulate on the window (the target applies them one
//!   at a time); the result of concurrent puts to one location is undefined, as in MPI.
//! * The memory model is MPI's unified model: the window is ordinary memory of its
//!   owner, updated when the owner's engine makes progress.
//! * Passive-target operations progress while the target is inside any phalanx call;
//!   a target that computes for long without calling delays them (no progress thread).

use crate::collective::CommunicatorCollectives;
use direct::{with_packed, Segment};
use std::sync::atomic::{fence, Ordering};

mod direct;
mod waits;
use crate::datatype::TypeMap;
pub use crate::engine::rma::AccOp;
use crate::engine::rma::{kind, Ctrl, WinMem, LOCK_EXCLUSIVE, LOCK_SHARED};
use crate::engine::{RecvBuf, SendBuf};
use crate::error::{Error, ErrorClass, Result};
use crate::requests::ReqId;
use crate::runtime::with_engine;
use crate::topology::{Communicator, SimpleCommunicator};

/// `MPI_MODE_NOCHECK`: no conflicting lock or post is outstanding.
pub const MODE_NOCHECK: u32 = 1024;
/// `MPI_MODE_NOPRECEDE`: the fence ends no epoch (nothing to complete).
pub const MODE_NOPRECEDE: u32 = 2048;
/// `MPI_MODE_NOPUT`: no put or accumulate updates the window until the next fence.
pub const MODE_NOPUT: u32 = 4096;
/// `MPI_MODE_NOSTORE`: no local store to the window since the last synchronization.
pub const MODE_NOSTORE: u32 = 8192;
/// `MPI_MODE_NOSUCCEED`: the fence starts no epoch.
pub const MODE_NOSUCCEED: u32 = 16384;

/// A lock's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// Only this origin accesses the target's window.
    Exclusive,
    /// Other shared holders may access it too.
    Shared,
}

/// How a window's memory came to be (`MPI_WIN_CREATE_FLAVOR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// The program's memory (`MPI_Win_create`).
    Create,
    /// Allocated by phalanx (`MPI_Win_allocate`).
    Allocate,
    /// Memory attached later (`MPI_Win_create_dynamic`).
    Dynamic,
    /// One shared segment of the host (`MPI_Win_allocate_shared`).
    Shared,
}

enum Memory {
    None,
    Owned(#[allow(dead_code)] Vec<u128>),
}

/// A window of memory open to one-sided operations (module docs).
pub struct Window {
    coll: SimpleCommunicator,
    ops: SimpleCommunicator,
    ctx: u32,
    me: usize,
    /// Size and displacement unit of every member's window (0, 1 for dynamic ones).
    sizes: Vec<(u64, u64)>,
    /// The host's shared segment holding every member's window, when all are on this
    /// host and the window was allocated by phalanx: operations are then loads and
    /// stores, locks atomics (`direct`).
    direct: Option<Segment>,
    base: *mut u8,
    size: usize,
    disp_unit: usize,
    flavor: Flavor,
    _mem: Memory,
    fence_open: bool,
    locked: Vec<Option<LockKind>>,
    /// On a segment: the locks taken (exclusive or not), none under `MODE_NOCHECK`.
    lock_taken: Vec<Option<bool>>,
    lock_all: bool,
    /// The open access epoch's group (start), and exposure epoch's (post); an empty
    /// group is an epoch too.
    access: Option<Vec<usize>>,
    exposure: Option<Vec<usize>>,
    freed: bool,
}

#[cold]
fn sync_err(msg: impl Into<String>) -> Error {
    Error::Rma(ErrorClass::RmaSync, msg.into())
}

#[cold]
fn no_epoch(t: usize) -> Error {
    sync_err(format!(
        "one-sided operation to rank {t} outside an access epoch (fence, lock or start first)"
    ))
}

#[cold]
fn out_of_range(t: usize, disp: u64, span: u64, size: u64) -> Error {
    Error::Rma(
        ErrorClass::RmaRange,
        format!(
            "target range (displacement {disp}, {span} bytes) outside rank {t}'s window of {size} bytes"
        ),
    )
}

#[cold]
fn not_same_bytes(x: usize, y: usize) -> Error {
    Error::Rma(
        ErrorClass::Type,
        format!("origin holds {x} bytes, target {y}: the type signatures differ"),
    )
}

impl Window {
    fn open(
        comm: &SimpleCommunicator,
        base: *mut u8,
        size: usize,
        disp_unit: usize,
        flavor: Flavor,
        mem: Memory,
        direct: Option<Segment>,
    ) -> Result<Window> {
        let coll = comm.duplicate();
        let ops = comm.duplicate();
        let p = comm.size() as usize;
        let mine = [size as u64, disp_unit.max(1) as u64];
        let mut all = vec![0u64; 2 * p];
        coll.all_gather_into(&mine[..], &mut all[..]);
        let sizes = all.chunks(2).map(|c| (c[0], c[1])).collect();
        let members: Vec<u32> = (0..p as i32).map(|r| ops.world_rank(r)).collect();
        let ctx = ops.context();
        let wmem = if flavor == Flavor::Dynamic {
            WinMem::Dynamic
        } else {
            WinMem::Fixed {
                base: base as usize,
                size,
                disp_unit,
            }
        };
        with_engine(|e| e.rma_register(ctx, members, wmem))?;
        // Every member serves its window before anyone may target it.
        coll.barrier();
        Ok(Window {
            me: comm.rank() as usize,
            coll,
            ops,
            ctx,
            sizes,
            direct,
            base,
            size,
            disp_unit: disp_unit.max(1),
            flavor,
            _mem: mem,
            fence_open: false,
            locked: vec![None; p],
            lock_taken: vec![None; p],
            lock_all: false,
            access: None,
            exposure: None,
            freed: false,
        })
    }

    /// A window of `size` bytes allocated by phalanx (16-byte aligned, zeroed), with
    /// displacements in units of `disp_unit` bytes (`MPI_Win_allocate`). Collective.
    pub fn allocate<C: Communicator + ?Sized>(
        comm: &C,
        size: usize,
        disp_unit: usize,
    ) -> Result<Window> {
        let comm = comm.as_simple();
        // Every member on this host: one shared segment, operations as loads and stores.
        if let Some(seg) = Segment::create(comm, size)? {
            let base = seg.bases[comm.rank() as usize] as *mut u8;
            let f = Flavor::Allocate;
            return Self::open(comm, base, size, disp_unit, f, Memory::None, Some(seg));
        }
        let mut v = vec![0u128; size.div_ceil(16)];
        let base = v.as_mut_ptr() as *mut u8;
        let mem = Memory::Owned(v);
        Self::open(comm, base, size, disp_unit, Flavor::Allocate, mem, None)
    }

    /// A window over the program's `size` bytes at `base` (`MPI_Win_create`).
    /// Collective.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `size` bytes until the window is
    /// freed, and other ranks' operations may change it whenever this rank's engine
    /// makes progress (inside any phalanx call).
    pub unsafe fn create<C: Communicator + ?Sized>(
        comm: &C,
        base: *mut u8,
        size: usize,
        disp_unit: usize,
    ) -> Result<Window> {
        Self::open(
            comm.as_simple(),
            base,
            size,
            disp_unit,
            Flavor::Create,
            Memory::None,
            None,
        )
    }

    /// A window whose memory is attached later ([`Window::attach`]); displacements are
    /// addresses (`MPI_Win_create_dynamic`). Collective.
    pub fn create_dynamic<C: Communicator + ?Sized>(comm: &C) -> Result<Window> {
        Self::open(
            comm.as_simple(),
            std::ptr::null_mut(),
            0,
            1,
            Flavor::Dynamic,
            Memory::None,
            None,
        )
    }

    /// A window in one shared-memory segment of the host: every member can load and
    /// store every member's part directly ([`Window::shared_query`]); parts follow each
    /// other in rank order (`MPI_Win_allocate_shared`). Collective; every member must be
    /// on this host ([`ErrorClass::RmaShared`] otherwise).
    pub fn allocate_shared<C: Communicator + ?Sized>(
        comm: &C,
        size: usize,
        disp_unit: usize,
    ) -> Result<Window> {
        let comm = comm.as_simple();
        let Some(seg) = Segment::create(comm, size)? else {
            return Err(Error::Rma(
                ErrorClass::RmaShared,
                "a shared window needs every member on one host, reached over shared memory".into(),
            ));
        };
        let base = seg.bases[comm.rank() as usize] as *mut u8;
        let f = Flavor::Shared;
        Self::open(comm, base, size, disp_unit, f, Memory::None, Some(seg))
    }

    /// Base address, size in bytes and displacement unit of member `rank`'s part of a
    /// shared window (`MPI_Win_shared_query`).
    pub fn shared_query(&self, rank: usize) -> Result<(*mut u8, usize, usize)> {
        if self.flavor != Flavor::Shared {
            return Err(Error::Rma(
                ErrorClass::RmaFlavor,
                "not a shared window".into(),
            ));
        }
        let bases = self.direct.as_ref().map_or(&[][..], |d| &d.bases[..]);
        let b = *bases.get(rank).ok_or(Error::InvalidRank {
            rank: rank as i32,
            size: self.sizes.len(),
        })?;
        let (s, d) = self.sizes[rank];
        Ok((b as *mut u8, s as usize, d as usize))
    }

    /// Attaches `size` bytes at `base` to a dynamic window (`MPI_Win_attach`).
    ///
    /// # Safety
    /// As for [`Window::create`], until detached.
    pub unsafe fn attach(&self, base: *mut u8, size: usize) -> Result<()> {
        with_engine(|e| e.rma_attach(self.ctx, base as usize, size, true))
    }

    /// Detaches the memory attached at `base` (`MPI_Win_detach`).
    pub fn detach(&self, base: *const u8) -> Result<()> {
        with_engine(|e| e.rma_attach(self.ctx, base as usize, 0, false))
    }

    /// Start of this rank's window memory (null for a dynamic window).
    pub fn base(&self) -> *mut u8 {
        self.base
    }
    /// Bytes of this rank's window.
    pub fn size(&self) -> usize {
        self.size
    }
    /// Displacement unit of this rank's window.
    pub fn disp_unit(&self) -> usize {
        self.disp_unit
    }
    /// How the window was made.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }
    /// The communicator of the window's group (a duplicate of the one it was made on).
    pub fn communicator(&self) -> &SimpleCommunicator {
        &self.coll
    }

    /// The epoch check of an operation to member `t` ([`ErrorClass::RmaSync`]).
    #[inline]
    fn check_target(&self, t: usize) -> Result<()> {
        let Some(locked) = self.locked.get(t) else {
            return Err(self.bad_rank(t));
        };
        if self.fence_open
            || self.lock_all
            || locked.is_some()
            || self.access.as_ref().is_some_and(|a| a.contains(&t))
        {
            return Ok(());
        }
        Err(no_epoch(t))
    }

    #[cold]
    fn bad_rank(&self, t: usize) -> Error {
        Error::InvalidRank {
            rank: t as i32,
            size: self.sizes.len(),
        }
    }

    /// The range check of `count` elements of `dt` at `disp` in member `t`'s window
    /// ([`ErrorClass::RmaRange`]; `t` is a member).
    #[inline]
    fn check_range(&self, t: usize, disp: u64, count: usize, dt: &TypeMap) -> Result<()> {
        if self.flavor == Flavor::Dynamic {
            return Ok(());
        }
        let (size, du) = self.sizes[t];
        // Checked: a count or extent large enough to wrap must not pass.
        let span = dt.checked_span(count).map_or(u64::MAX, |s| s as u64);
        let end = disp.checked_mul(du).and_then(|o| o.checked_add(span));
        match end {
            Some(e) if e <= size => Ok(()),
            _ => Err(out_of_range(t, disp, span, size)),
        }
    }

    /// The size check of an operation ([`ErrorClass::Type`]): the bytes it moves.
    #[inline]
    fn same_bytes(a: usize, adt: &TypeMap, b: usize, bdt: &TypeMap) -> Result<usize> {
        let (x, y) = (a * adt.size(), b * bdt.size());
        if x != y {
            return Err(not_same_bytes(x, y));
        }
        Ok(x)
    }

    /// The origin's bytes: borrowed when contiguous (the epoch keeps them), else packed.
    ///
    /// # Safety
    /// `origin` valid for `count` elements of `dt`.
    unsafe fn origin_data(origin: *const u8, count: usize, dt: &TypeMap) -> SendBuf {
        if dt.is_dense() {
            SendBuf::Raw(origin, count * dt.size())
        } else {
            let mut v = Vec::new();
            // SAFETY: the caller's promise.
            unsafe { dt.pack(origin, count, &mut v) };
            SendBuf::Owned(v)
        }
    }

    /// Where an answer lands: straight in `result` when contiguous, else unpacked.
    fn answer_buf(result: *mut u8, count: usize, dt: &TypeMap) -> RecvBuf {
        let n = count * dt.size();
        if dt.is_contiguous() {
            RecvBuf::Raw(result, n)
        } else {
            RecvBuf::Unpack {
                tmp: vec![0u8; n],
                dt: dt.clone(),
                dst: result,
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn issue(
        &self,
        k: u8,
        op: AccOp,
        data: SendBuf,
        answer: Option<RecvBuf>,
        target: usize,
        disp: u64,
        tcount: usize,
        tdt: &TypeMap,
    ) -> Result<Option<ReqId>> {
        self.check_target(target)?;
        self.check_range(target, disp, tcount, tdt)?;
        let c = Ctrl {
            kind: k,
            op: op.code(),
            disp,
            count: tcount as u64,
            ..Ctrl::default()
        };
        with_engine(|e| e.rma_issue(self.ctx, target, c, tdt, data, answer))
    }

    /// Puts `ocount` elements of `odt` at `origin` into member `target`'s window at
    /// displacement `disp`, as `tcount` elements of `tdt` (`MPI_Put`).
    ///
    /// # Safety
    /// `origin` must hold the elements and stay unchanged until the operation completes
    /// (the epoch's synchronization).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn put(
        &self,
        origin: *const u8,
        ocount: usize,
        odt: &TypeMap,
        target: usize,
        disp: u64,
        tcount: usize,
        tdt: &TypeMap,
    ) -> Result<Option<ReqId>> {
        Self::same_bytes(ocount, odt, tcount, tdt)?;
        if let Some(seg) = &self.direct {
            self.check_direct(target, disp, tcount, tdt)?;
            // SAFETY: the caller's promise; the range was checked.
            unsafe { self.direct_put(seg, origin, ocount, odt, target, disp, tdt) };
            return Ok(None);
        }
        // SAFETY: the caller's promise.
        let data = unsafe { Self::origin_data(origin, ocount, odt) };
        self.issue(
            kind::PUT,
            AccOp::Replace,
            data,
            None,
            target,
            disp,
            tcount,
            tdt,
        )
    }

    /// Gets `tcount` elements of `tdt` at `disp` of member `target`'s window into
    /// `ocount` elements of `odt` at `origin` (`MPI_Get`); see [`Window::put`].
    ///
    /// # Safety
    /// `origin` must be writable for the elements and not read until the operation
    /// completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn get(
        &self,
        origin: *mut u8,
        ocount: usize,
        odt: &TypeMap,
        target: usize,
        disp: u64,
        tcount: usize,
        tdt: &TypeMap,
    ) -> Result<Option<ReqId>> {
        Self::same_bytes(ocount, odt, tcount, tdt)?;
        if let Some(seg) = &self.direct {
            self.check_direct(target, disp, tcount, tdt)?;
            // SAFETY: the caller's promise; the range was checked.
            unsafe { self.direct_get(seg, origin, odt, target, disp, tcount, tdt) };
            return Ok(None);
        }
        let ans = Self::answer_buf(origin, ocount, odt);
        let empty = SendBuf::Owned(Vec::new());
        self.issue(
            kind::GET,
            AccOp::NoOp,
            empty,
            Some(ans),
            target,
            disp,
            tcount,
            tdt,
        )
    }

    /// Combines the origin's elements into the target's with `op` (`MPI_Accumulate`).
    ///
    /// # Safety
    /// As for [`Window::put`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn accumulate(
        &self,
        origin: *const u8,
        ocount: usize,
        odt: &TypeMap,
        target: usize,
        disp: u64,
        tcount: usize,
        tdt: &TypeMap,
        op: AccOp,
    ) -> Result<Option<ReqId>> {
        Self::same_bytes(ocount, odt, tcount, tdt)?;
        if let Some(seg) = &self.direct {
            self.check_direct(target, disp, tcount, tdt)?;
            let n = ocount * odt.size();
            if odt.is_dense() && n > 256 {
                // A dense origin is its packed form already: read in place.
                // SAFETY: the caller's promise (n bytes from offset 0); range checked.
                let v = unsafe { std::slice::from_raw_parts(origin, n) };
                // SAFETY: as above.
                unsafe {
                    self.direct_accumulate(seg, v, None, None, target, disp, tcount, tdt, op)?
                };
                return Ok(None);
            }
            // SAFETY: the caller's promise; the range was checked.
            unsafe {
                with_packed(origin, ocount, odt, |v| {
                    self.direct_accumulate(seg, v, None, None, target, disp, tcount, tdt, op)
                })?
            };
            return Ok(None);
        }
        // SAFETY: the caller's promise.
        let data = unsafe { Self::origin_data(origin, ocount, odt) };
        self.issue(kind::ACC, op, data, None, target, disp, tcount, tdt)
    }

    /// Fetches the target's elements into `result`, then combines the origin's into
    /// them with `op` (`MPI_Get_accumulate`; with [`AccOp::NoOp`] the origin is not
    /// read, and `MPI_Fetch_and_op` is one element).
    ///
    /// # Safety
    /// As for [`Window::put`] (origin) and [`Window::get`] (result).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn get_accumulate(
        &self,
        origin: *const u8,
        ocount: usize,
        odt: &TypeMap,
        result: *mut u8,
        rcount: usize,
        rdt: &TypeMap,
        target: usize,
        disp: u64,
        tcount: usize,
        tdt: &TypeMap,
        op: AccOp,
    ) -> Result<Option<ReqId>> {
        Self::same_bytes(rcount, rdt, tcount, tdt)?;
        if let Some(seg) = &self.direct {
            self.check_direct(target, disp, tcount, tdt)?;
            let res = Some((result, rdt));
            // SAFETY: the range was checked; the caller's promise for `result`.
            let apply = |v: &mut [u8]| unsafe {
                self.direct_accumulate(seg, v, res, None, target, disp, tcount, tdt, op)
            };
            if op == AccOp::NoOp {
                apply(&mut [])?;
            } else {
                Self::same_bytes(ocount, odt, tcount, tdt)?;
                // SAFETY: the caller's promise.
                unsafe { with_packed(origin, ocount, odt, apply)? };
            }
            return Ok(None);
        }
        let data = if op == AccOp::NoOp {
            SendBuf::Owned(vec![0u8; tcount * tdt.size()])
        } else {
            Self::same_bytes(ocount, odt, tcount, tdt)?;
            // SAFETY: the caller's promise.
            unsafe { Self::origin_data(origin, ocount, odt) }
        };
        let ans = Self::answer_buf(result, rcount, rdt);
        self.issue(
            kind::GET_ACC,
            op,
            data,
            Some(ans),
            target,
            disp,
            tcount,
            tdt,
        )
    }

    /// Replaces one element of `dt` at the target by `origin` if it equals `compare`;
    /// the old value lands in `result` (`MPI_Compare_and_swap`).
    ///
    /// # Safety
    /// `origin` and `compare` readable, `result` writable, for one element each.
    pub unsafe fn compare_and_swap(
        &self,
        origin: *const u8,
        compare: *const u8,
        result: *mut u8,
        dt: &TypeMap,
        target: usize,
        disp: u64,
    ) -> Result<Option<ReqId>> {
        if let Some(seg) = &self.direct {
            self.check_direct(target, disp, 1, dt)?;
            let (res, op) = (Some((result, dt)), AccOp::Replace);
            // SAFETY: the caller's promise for `compare`, `origin` and `result`; the
            // range was checked.
            unsafe {
                with_packed(compare, 1, dt, |cmp| {
                    with_packed(origin, 1, dt, |new| {
                        let c = Some(&cmp[..]);
                        self.direct_accumulate(seg, new, res, c, target, disp, 1, dt, op)
                    })
                })?
            };
            return Ok(None);
        }
        let mut v = Vec::with_capacity(2 * dt.size());
        // SAFETY: the caller's promise.
        unsafe {
            dt.pack(compare, 1, &mut v);
            dt.pack(origin, 1, &mut v);
        }
        let ans = Self::answer_buf(result, 1, dt);
        self.issue(
            kind::CAS,
            AccOp::Replace,
            SendBuf::Owned(v),
            Some(ans),
            target,
            disp,
            1,
            dt,
        )
    }

    /// The request of a request-based operation (`MPI_Rput` and the others): the
    /// program waits for it; the epoch's synchronization completes the operation too
    /// but leaves the request to the program. An operation complete at once (data
    /// inside its control message) gets a completed request.
    pub fn request_of(&self, r: Option<ReqId>) -> Result<ReqId> {
        with_engine(|e| e.rma_user_request(self.ctx, r))
    }

    /// Epoch and range checks of an operation on a segment.
    fn check_direct(&self, t: usize, disp: u64, count: usize, dt: &TypeMap) -> Result<()> {
        self.check_target(t)?;
        self.check_range(t, disp, count, dt)
    }

    /// Waits for this rank's operations to complete locally (on a segment they are:
    /// a fence orders them before what follows).
    #[inline]
    fn finish_local(&self) -> Result<()> {
        if self.direct.is_some() {
            fence(Ordering::SeqCst);
            return Ok(());
        }
        self.finish_local_msgs()
    }

    /// `MPI_Win_fence`: completes every operation of the epoch that ends, at origin and
    /// target, and opens the next (unless `assert` has [`MODE_NOSUCCEED`]).
    /// Collective.
    pub fn fence(&mut self, assert: u32) -> Result<()> {
        if self.lock_all || self.locked.iter().any(|l| l.is_some()) || self.access.is_some() {
            return Err(sync_err("fence inside a lock or start epoch"));
        }
        if self.direct.is_some() {
            self.finish_local()?;
        } else if assert & MODE_NOPRECEDE == 0 {
            self.finish_local()?;
            let issued = with_engine(|e| e.rma_issued(self.ctx))?;
            let mut expected = vec![0u64; issued.len()];
            self.coll.all_to_all_into(&issued[..], &mut expected[..]);
            self.wait_applied(&expected)?;
        }
        self.coll.barrier();
        fence(Ordering::SeqCst);
        self.fence_open = assert & MODE_NOSUCCEED == 0;
        Ok(())
    }

    /// `MPI_Win_lock`: an access epoch to `target` under a lock of `kind`.
    pub fn lock(&mut self, kind_: LockKind, target: usize, assert: u32) -> Result<()> {
        if target >= self.locked.len() {
            return Err(Error::InvalidRank {
                rank: target as i32,
                size: self.locked.len(),
            });
        }
        if self.locked[target].is_some() || self.lock_all {
            return Err(sync_err(format!("rank {target} is locked already")));
        }
        let l = match kind_ {
            LockKind::Exclusive => LOCK_EXCLUSIVE,
            LockKind::Shared => LOCK_SHARED,
        };
        self.take_lock(target, l, assert)?;
        self.locked[target] = Some(kind_);
        Ok(())
    }

    /// `MPI_Win_unlock`: completes the operations to `target` at both ends, then
    /// releases its lock.
    pub fn unlock(&mut self, target: usize) -> Result<()> {
        if self.locked.get(target).copied().flatten().is_none() {
            return Err(sync_err(format!("rank {target} is not locked")));
        }
        self.finish_local()?;
        self.release_lock(target)?;
        self.locked[target] = None;
        Ok(())
    }

    /// `MPI_Win_lock_all`: a shared lock on every member.
    pub fn lock_all(&mut self, assert: u32) -> Result<()> {
        if self.lock_all || self.locked.iter().any(|l| l.is_some()) {
            return Err(sync_err("lock_all while holding a lock"));
        }
        for t in 0..self.locked.len() {
            self.take_lock(t, LOCK_SHARED, assert)?;
        }
        self.lock_all = true;
        Ok(())
    }

    /// `MPI_Win_unlock_all`.
    pub fn unlock_all(&mut self) -> Result<()> {
        if !self.lock_all {
            return Err(sync_err("unlock_all without lock_all"));
        }
        self.finish_local()?;
        for t in 0..self.locked.len() {
            self.release_lock(t)?;
        }
        self.lock_all = false;
        Ok(())
    }

    /// Takes member `t`'s lock: an atomic on a segment (none with
    /// [`MODE_NOCHECK`]), else a request answered by its grant.
    fn take_lock(&mut self, t: usize, l: u8, assert: u32) -> Result<()> {
        match &self.direct {
            Some(seg) => {
                let taken = assert & MODE_NOCHECK == 0;
                if taken {
                    seg.lock(t, l == LOCK_EXCLUSIVE)?;
                }
                self.lock_taken[t] = taken.then_some(l == LOCK_EXCLUSIVE);
                Ok(())
            }
            None => self.sync_msg(t, kind::LOCK, l),
        }
    }

    /// Releases member `t`'s lock (its operations completed at both ends before).
    fn release_lock(&mut self, t: usize) -> Result<()> {
        match &self.direct {
            Some(seg) => match self.lock_taken[t].take() {
                Some(excl) => seg.unlock(t, excl),
                None => Ok(()),
            },
            None => self.sync_msg(t, kind::UNLOCK, 0),
        }
    }

    #[inline]
    fn passive(&self, target: usize) -> Result<()> {
        if self.lock_all || self.locked.get(target).is_some_and(|l| l.is_some()) {
            Ok(())
        } else {
            Err(sync_err(format!(
                "flush of rank {target} outside a lock epoch"
            )))
        }
    }

    /// `MPI_Win_flush`: completes the operations to `target` at both ends (on a
    /// segment they are: a fence orders them before what follows).
    pub fn flush(&self, target: usize) -> Result<()> {
        self.passive(target)?;
        if self.direct.is_some() {
            fence(Ordering::SeqCst);
            return Ok(());
        }
        self.finish_local()?;
        self.sync_msg(target, kind::FLUSH, 0)
    }

    /// `MPI_Win_flush_all`.
    pub fn flush_all(&self) -> Result<()> {
        if !self.lock_all && self.locked.iter().all(|l| l.is_none()) {
            return Err(sync_err("flush_all outside a lock epoch"));
        }
        self.finish_local()?;
        if self.direct.is_some() {
            return Ok(());
        }
        for t in 0..self.locked.len() {
            if self.lock_all || self.locked[t].is_some() {
                self.sync_msg(t, kind::FLUSH, 0)?;
            }
        }
        Ok(())
    }

    /// `MPI_Win_flush_local` (and `_all`): completes the operations locally (origin
    /// buffers reusable, fetched data arrived).
    pub fn flush_local(&self) -> Result<()> {
        self.finish_local()
    }

    /// `MPI_Win_post`: exposes this rank's window to `group` (member ranks).
    pub fn post(&mut self, group: &[usize], _assert: u32) -> Result<()> {
        if self.exposure.is_some() {
            return Err(sync_err("post while an exposure epoch is open"));
        }
        // Everything before the post is visible to the group's operations.
        with_engine(|e| e.progress().map(|_| ()))?;
        for &o in group {
            self.sync_msg(o, kind::POST, 0)?;
        }
        self.exposure = Some(group.to_vec());
        Ok(())
    }

    /// `MPI_Win_start`: an access epoch to `group`, once each member posted.
    pub fn start(&mut self, group: &[usize], _assert: u32) -> Result<()> {
        if self.access.is_some() {
            return Err(sync_err("start while an access epoch is open"));
        }
        for &t in group {
            if t >= self.sizes.len() {
                return Err(Error::InvalidRank {
                    rank: t as i32,
                    size: self.sizes.len(),
                });
            }
            self.wait_post(t)?;
        }
        self.access = Some(group.to_vec());
        Ok(())
    }

    /// `MPI_Win_complete`: ends the access epoch; its operations complete at their
    /// targets before their `wait` returns.
    pub fn complete(&mut self) -> Result<()> {
        let Some(access) = self.access.clone() else {
            return Err(sync_err("complete without start"));
        };
        self.finish_local()?;
        for &t in &access {
            self.sync_msg(t, kind::COMPLETE, 0)?;
        }
        self.access = None;
        Ok(())
    }

    /// `MPI_Win_wait`: ends the exposure epoch once every member of its group completed
    /// and its operations were applied.
    pub fn wait(&mut self) -> Result<()> {
        let Some(exposure) = self.exposure.clone() else {
            return Err(sync_err("wait without post"));
        };
        for &o in &exposure {
            self.wait_epoch(o)?;
        }
        self.exposure = None;
        Ok(())
    }

    /// `MPI_Win_test`: [`Window::wait`] if it would not block.
    pub fn test(&mut self) -> Result<bool> {
        let Some(exposure) = self.exposure.clone() else {
            return Err(sync_err("test without post"));
        };
        let ctx = self.ctx;
        let all = with_engine(|e| {
            e.progress()?;
            let mut all = true;
            for &o in &exposure {
                all &= e.rma_epoch_done(ctx, o, false)?;
            }
            Ok(all)
        })?;
        if all {
            self.wait()?;
        }
        Ok(all)
    }

    /// `MPI_Win_free`: collective; every epoch must be closed.
    pub fn free(mut self) -> Result<()> {
        self.free_inner()
    }

    fn free_inner(&mut self) -> Result<()> {
        if self.freed {
            return Ok(());
        }
        if self.epoch_open() {
            return Err(sync_err("window freed inside an epoch"));
        }
        self.finish_local()?;
        // Operations others sent us before their own fence or unlock are applied by then;
        // after the barrier nobody sends on this window again.
        self.coll.barrier();
        self.freed = true;
        with_engine(|e| e.rma_unregister(self.ctx))
    }

    /// Whether this rank has a lock, access (start) or exposure (post) epoch open on the
    /// window (what `free` refuses).
    pub fn epoch_open(&self) -> bool {
        self.lock_all
            || self.locked.iter().any(|l| l.is_some())
            || self.access.is_some()
            || self.exposure.is_some()
    }

    /// The engine context of the window's operations (for the C ABI's bookkeeping).
    pub fn context(&self) -> u32 {
        self.ctx
    }

    /// The members' world ranks' communicator of the operations.
    pub fn ops_communicator(&self) -> &SimpleCommunicator {
        &self.ops
    }

    /// This rank's member index.
    pub fn rank(&self) -> usize {
        self.me
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // A window dropped without `free` still stops serving (not collective: others
        // may still be waiting; that is the program's error).
        if !self.freed {
            let _ = with_engine(|e| e.rma_unregister(self.ctx));
        }
    }
}
