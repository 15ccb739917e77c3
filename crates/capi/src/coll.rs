//! Collectives: `MPI_Barrier`, `MPI_Bcast`, `MPI_Reduce`, `MPI_Allreduce`, `MPI_Gather`,
//! `MPI_Scatter`, `MPI_Allgather`, `MPI_Alltoall` (with `MPI_IN_PLACE` where MPI allows it).
//!
//! Data moves as byte slices; reductions view the buffers as slices of the Rust type of
//! the MPI datatype (alignment checked) so phalanx reduces typed elements. `MPI_IN_PLACE`
//! is served by copying this rank's contribution to a temporary first, so no Rust slice
//! ever aliases another. Derived datatypes go through [`crate::coll_dt`] (pack, run on
//! bytes, unpack); reductions the core does not do (user operations, MINLOC/MAXLOC,
//! derived datatypes) go through [`crate::ops`]. The core does SUM, PROD, MIN, MAX and the
//! logical and bitwise operations on the predefined numeric types.

use crate::consts::*;
use crate::env::datatype_of;
use crate::state;
use crate::{
    bytes, bytes_mut, count, disjoint, err, export, guard, typed, typed_mut, CResult, Count,
};
use phalanx::capi_support::{self as raw, CollKind, LeanCall};
use phalanx::collective::SystemOperation;
use phalanx::datatype::{type_map_of, Equivalence, TypeMap};
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::{Communicator, CommunicatorCollectives, Root};
use std::ffi::{c_int, c_void};

#[inline]
pub(crate) fn root_ok(c: &SimpleCommunicator, root: c_int) -> CResult<c_int> {
    if (0..c.size()).contains(&root) {
        Ok(root)
    } else {
        Err(bad_root(root, c.size()))
    }
}

#[cold]
fn bad_root(root: c_int, size: c_int) -> crate::CErr {
    err(
        MPI_ERR_ROOT,
        format!("invalid root {root} (communicator size {size})"),
    )
}

pub(crate) fn in_place(p: *const c_void) -> bool {
    std::ptr::eq(p, IN_PLACE)
}

/// The lean path to the board (`phalanx::capi_support::board_call`) for a call on
/// contiguous buffers: `Ok(true)` when it ran there, `Ok(false)` when the general path
/// must run it. `dt` and `count` are the element type and count the general path passes
/// the core (bytes for data movement), so members on either path make the same call.
///
/// # Safety
/// As [`raw::board_call`]: `send` readable and `recv` writable (and touched by nobody
/// else) for their lengths during the call; null with length 0 where this member has
/// no such buffer.
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn lean(
    c: &SimpleCommunicator,
    kind: CollKind,
    root: c_int,
    op: Option<SystemOperation>,
    dt: &TypeMap,
    count: usize,
    send: (*const u8, usize),
    recv: (*mut u8, usize),
) -> CResult<bool> {
    let call = LeanCall {
        kind,
        root,
        op,
        dt,
        count,
        send,
        recv,
    };
    // SAFETY: the caller's buffers, as this function's contract says.
    unsafe { raw::board_call(c, &call) }.map_err(crate::fastpath::cerr)
}

/// A buffer this member has (its pointer, never null, and length) or has not (null, 0),
/// as the general path passes them.
fn part(b: Option<&[u8]>) -> (*const u8, usize) {
    b.map_or((std::ptr::null(), 0), |b| (b.as_ptr(), b.len()))
}

fn part_mut(b: Option<&mut [u8]>) -> (*mut u8, usize) {
    b.map_or((std::ptr::null_mut(), 0), |b| (b.as_mut_ptr(), b.len()))
}

/// [`lean`] for data movement: `count` bytes, from `send` into `recv` (`None` where this
/// member has no such buffer).
#[inline]
pub(crate) fn lean_bytes(
    c: &SimpleCommunicator,
    kind: CollKind,
    root: c_int,
    count: usize,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
) -> CResult<bool> {
    let (send, recv) = (part(send), part_mut(recv));
    // SAFETY: both come from live slices (or are null and empty), borrowed for the call.
    unsafe { lean(c, kind, root, None, &type_map_of::<u8>(), count, send, recv) }
}

/// [`lean`] for a reduction of the elements of `s` into `recv` (`None` where this member
/// receives nothing).
#[inline]
fn lean_typed<T: Equivalence>(
    c: &SimpleCommunicator,
    kind: CollKind,
    root: c_int,
    op: SystemOperation,
    s: &[T],
    recv: Option<&mut [T]>,
) -> CResult<bool> {
    let send = (s.as_ptr().cast(), std::mem::size_of_val(s));
    let recv = recv.map_or((std::ptr::null_mut(), 0), |r| {
        (r.as_mut_ptr().cast(), std::mem::size_of_val(r))
    });
    let dt = type_map_of::<T>();
    // SAFETY: both come from live slices (or null and empty), borrowed for the call.
    unsafe { lean(c, kind, root, Some(op), &dt, s.len(), send, recv) }
}

/// Byte length of `cnt` elements of `datatype` (checked).
fn len(cnt: Count, datatype: Handle) -> CResult<usize> {
    let n = count(cnt)?;
    let size = match crate::consts::datatype_size(datatype as usize) {
        Some(s) => s,
        None => datatype_of(datatype)?.size,
    };
    crate::span(n, size)
}

/// A count of a call the core only takes `int` counts for (intercommunicators).
pub(crate) fn int_count(c: Count) -> CResult<c_int> {
    c_int::try_from(c).map_err(|_| {
        err(
            MPI_ERR_COUNT,
            format!("count {c} past INT_MAX on an intercommunicator"),
        )
    })
}

#[inline]
pub(crate) fn same_block(send: usize, recv: usize) -> CResult {
    if send != recv {
        return Err(blocks_differ(send, recv));
    }
    Ok(())
}

#[cold]
fn blocks_differ(send: usize, recv: usize) -> crate::CErr {
    err(
        MPI_ERR_TRUNCATE,
        format!("send block of {send} bytes does not match receive block of {recv} bytes"),
    )
}

#[inline]
pub(crate) fn system_op(h: Handle) -> CResult<SystemOperation> {
    Ok(match op(h as usize) {
        Some(Op::Sum) => SystemOperation::sum(),
        Some(Op::Min) => SystemOperation::min(),
        Some(Op::Max) => SystemOperation::max(),
        Some(Op::Prod) => SystemOperation::product(),
        Some(Op::Land) => SystemOperation::logical_and(),
        Some(Op::Lor) => SystemOperation::logical_or(),
        Some(Op::Lxor) => SystemOperation::logical_xor(),
        Some(Op::Band) => SystemOperation::bitwise_and(),
        Some(Op::Bor) => SystemOperation::bitwise_or(),
        Some(Op::Bxor) => SystemOperation::bitwise_xor(),
        _ => return Err(unsupported_op(h)),
    })
}

#[cold]
fn unsupported_op(h: Handle) -> crate::CErr {
    err(MPI_ERR_OP, format!("unsupported operation {h:p}"))
}

/// Runs `$body` with `$T` the Rust type of element kind `$k`.
macro_rules! with_kind {
    ($k:expr, $T:ident, $body:expr) => {
        match $k {
            Kind::I8 => {
                type $T = i8;
                $body
            }
            Kind::U8 => {
                type $T = u8;
                $body
            }
            Kind::I16 => {
                type $T = i16;
                $body
            }
            Kind::U16 => {
                type $T = u16;
                $body
            }
            Kind::I32 => {
                type $T = i32;
                $body
            }
            Kind::U32 => {
                type $T = u32;
                $body
            }
            Kind::I64 => {
                type $T = i64;
                $body
            }
            Kind::U64 => {
                type $T = u64;
                $body
            }
            Kind::F32 => {
                type $T = f32;
                $body
            }
            Kind::F64 => {
                type $T = f64;
                $body
            }
            Kind::Opaque => Err(err(
                MPI_ERR_TYPE,
                "reductions on this datatype are not supported yet",
            )),
        }
    };
}

pub(crate) use with_kind;

export!(MPI_Barrier, PMPI_Barrier, (comm: Handle) -> c_int {
    guard("MPI_Barrier", comm, || crate::inter::barrier(comm))
});

export!(MPI_Ibarrier, PMPI_Ibarrier, (comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Ibarrier", comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            return crate::inter_nbc::ibarrier(&ic, comm, request);
        }
        if request.is_null() {
            return Err(err(MPI_ERR_ARG, "null request pointer"));
        }
        let req = state::LiveReq::Barrier(c.immediate_barrier());
        let e = state::ReqEntry::Live { req, comm: comm as usize, staged: None };
        // SAFETY: non-null, writable (MPI contract).
        unsafe { crate::out(request, state::add_req(e)) }
    })
});

export!(MPI_Bcast, PMPI_Bcast,
        (buffer: *mut c_void, cnt: c_int, datatype: Handle, root: c_int, comm: Handle) -> c_int {
    bcast_impl("MPI_Bcast", buffer, cnt.into(), datatype, root, comm)
});

/// `MPI_Bcast` (and `MPI_Bcast_c`).
pub(crate) fn bcast_impl(
    name: &str,
    buffer: *mut c_void,
    cnt: Count,
    datatype: Handle,
    root: c_int,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let l = crate::types::layout_of(datatype)?;
            let n = count(cnt)?;
            let mut tmp = if root == MPI_ROOT && !l.is_contiguous() {
                // SAFETY: the root passes count readable elements.
                unsafe { crate::types::pack(&l, buffer, n)? }
            } else {
                vec![0; crate::span(n, l.size)?]
            };
            if root == MPI_ROOT && l.is_contiguous() {
                // SAFETY: the root passes count × size readable bytes.
                tmp.copy_from_slice(unsafe { bytes_mut(buffer, crate::span(n, l.size)?)? });
            }
            crate::inter::bcast_inter(&ic, root, &mut tmp)?;
            if root >= 0 {
                // SAFETY: the receivers pass count writable elements.
                unsafe { crate::types::unpack(&l, &tmp, buffer, n)? };
            }
            return Ok(());
        }
        let root = root_ok(&c, root)?;
        let l = crate::types::layout_of(datatype)?;
        let n = count(cnt)?;
        if l.is_contiguous() {
            // SAFETY: the caller passes count × size bytes, valid for the call.
            let b = unsafe { bytes_mut(buffer, crate::span(n, l.size)?)? };
            // One pointer for both sides, as the general path passes them (the root reads
            // it, the others write it).
            let (ptr, len) = (b.as_mut_ptr(), b.len());
            let u8s = type_map_of::<u8>();
            // SAFETY: `b`'s bytes, borrowed for the call and used through `ptr` only.
            let lean_ran = unsafe {
                lean(
                    &c,
                    CollKind::Bcast,
                    root,
                    None,
                    &u8s,
                    len,
                    (ptr, len),
                    (ptr, len),
                )?
            };
            if lean_ran {
                return Ok(());
            }
            c.process_at_rank(root).broadcast_into(b);
            return Ok(());
        }
        // Derived datatype: the root packs, the others unpack.
        let mut tmp = if c.rank() == root {
            // SAFETY: the root passes count readable elements.
            unsafe { crate::types::pack(&l, buffer, n)? }
        } else {
            vec![0; crate::span(n, l.size)?]
        };
        c.process_at_rank(root).broadcast_into(&mut tmp[..]);
        if c.rank() != root {
            // SAFETY: the caller passes count writable elements.
            unsafe { crate::types::unpack(&l, &tmp, buffer, n)? };
        }
        Ok(())
    })
}

fn allreduce_t<T: Equivalence + Copy>(
    c: &SimpleCommunicator,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    op: SystemOperation,
) -> CResult {
    if !in_place(send) {
        let l = n * size_of::<T>();
        disjoint(send, l, recv, l)?;
    }
    // SAFETY: the caller passes n elements in each buffer (disjoint, checked above).
    let r: &mut [T] = unsafe { typed_mut(recv, n)? };
    let tmp;
    let s: &[T] = if in_place(send) {
        tmp = r.to_vec();
        &tmp
    } else {
        // SAFETY: as above.
        unsafe { typed(send, n)? }
    };
    if !lean_typed(c, CollKind::Allreduce, 0, op, s, Some(&mut *r))? {
        c.all_reduce_into(s, r, op);
    }
    Ok(())
}

export!(MPI_Allreduce, PMPI_Allreduce,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, comm: Handle) -> c_int {
    allreduce_impl("MPI_Allreduce", sendbuf, recvbuf, cnt.into(), datatype, op, comm)
});

/// `MPI_Allreduce` (and `MPI_Allreduce_c`).
pub(crate) fn allreduce_impl(
    name: &str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    cnt: Count,
    datatype: Handle,
    op: Handle,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            if !crate::localop::core_supported(op, datatype) {
                let args = (sendbuf, recvbuf, count(cnt)?, datatype, op);
                // SAFETY: the caller's buffers, valid for the whole (blocking) call.
                return crate::inter_nbc::blocking(|r| unsafe {
                    crate::inter_nbc::ireduce(&ic, args, crate::inter_nbc::Fold::All, comm, r)
                });
            }
            if in_place(sendbuf) {
                return Err(err(MPI_ERR_ARG, "MPI_IN_PLACE on an intercommunicator"));
            }
        }
        if !crate::localop::core_supported(op, datatype) {
            let r = crate::localop::reducer(op)?;
            // SAFETY: the caller passes cnt elements in each buffer (MPI contract).
            return unsafe {
                crate::ops::generic_reduce(&c, r, sendbuf, recvbuf, cnt, datatype, None)
            };
        }
        let dt = datatype_of(datatype)?;
        let n = count(cnt)?;
        let o = system_op(op)?;
        with_kind!(dt.kind, T, allreduce_t::<T>(&c, sendbuf, recvbuf, n, o))
    })
}

fn reduce_t<T: Equivalence + Copy>(
    c: &SimpleCommunicator,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    op: SystemOperation,
    root: c_int,
) -> CResult {
    let p = c.process_at_rank(root);
    if c.rank() != root {
        // SAFETY: the caller passes n readable elements.
        let s: &[T] = unsafe { typed(send, n)? };
        if !lean_typed(c, CollKind::Reduce, root, op, s, None)? {
            p.reduce_into(s, op);
        }
        return Ok(());
    }
    if !in_place(send) {
        let l = n * size_of::<T>();
        disjoint(send, l, recv, l)?;
    }
    // SAFETY: the root passes n writable elements (disjoint from the send buffer).
    let r: &mut [T] = unsafe { typed_mut(recv, n)? };
    let tmp;
    let s: &[T] = if in_place(send) {
        tmp = r.to_vec();
        &tmp
    } else {
        // SAFETY: n readable elements.
        unsafe { typed(send, n)? }
    };
    if !lean_typed(c, CollKind::Reduce, root, op, s, Some(&mut *r))? {
        p.reduce_into_root(s, r, op);
    }
    Ok(())
}

export!(MPI_Reduce, PMPI_Reduce,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, root: c_int, comm: Handle) -> c_int {
    reduce_impl("MPI_Reduce", sendbuf, recvbuf, cnt.into(), datatype, op, root, comm)
});

/// `MPI_Reduce` (and `MPI_Reduce_c`).
pub(crate) fn reduce_impl(
    name: &str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    cnt: Count,
    datatype: Handle,
    op: Handle,
    root: c_int,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            if !crate::localop::core_supported(op, datatype) {
                let fold = crate::inter_nbc::Fold::Reduce(root);
                let args = (sendbuf, recvbuf, count(cnt)?, datatype, op);
                // SAFETY: the caller's buffers, valid for the whole (blocking) call.
                return crate::inter_nbc::blocking(|r| unsafe {
                    crate::inter_nbc::ireduce(&ic, args, fold, comm, r)
                });
            }
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::inter_coll::reduce(
                    &ic,
                    sendbuf,
                    recvbuf,
                    int_count(cnt)?,
                    datatype,
                    op,
                    root,
                )
            };
        }
        if !crate::localop::core_supported(op, datatype) {
            let root = root_ok(&c, root)?;
            let r = crate::localop::reducer(op)?;
            // SAFETY: the caller passes cnt elements in each buffer (MPI contract).
            return unsafe {
                crate::ops::generic_reduce(&c, r, sendbuf, recvbuf, cnt, datatype, Some(root))
            };
        }
        let dt = datatype_of(datatype)?;
        let n = count(cnt)?;
        let o = system_op(op)?;
        let root = root_ok(&c, root)?;
        with_kind!(dt.kind, T, reduce_t::<T>(&c, sendbuf, recvbuf, n, o, root))
    })
}

export!(MPI_Gather, PMPI_Gather,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle) -> c_int {
    gather_impl("MPI_Gather", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, root, comm)
});

/// `MPI_Gather` (and `MPI_Gather_c`).
pub(crate) fn gather_impl(
    name: &str,
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: Handle,
    root: c_int,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::inter_coll::gather(
                    &ic,
                    sendbuf,
                    int_count(sendcount)?,
                    sendtype,
                    recvbuf,
                    int_count(recvcount)?,
                    recvtype,
                    root,
                )
            };
        }
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::coll_dt::gather(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                )
            };
        }
        let root = root_ok(&c, root)?;
        let p = c.process_at_rank(root);
        if c.rank() != root {
            // SAFETY: the caller passes sendcount × size readable bytes.
            let s = unsafe { bytes(sendbuf, len(sendcount, sendtype)?)? };
            if !lean_bytes(&c, CollKind::Gather, root, s.len(), Some(s), None)? {
                p.gather_into(s);
            }
            return Ok(());
        }
        let block = len(recvcount, recvtype)?;
        let total = crate::span(block, c.size() as usize)?;
        if in_place(sendbuf) {
            // SAFETY: the root passes size × recvcount × size writable bytes.
            let r = unsafe { bytes_mut(recvbuf, total)? };
            let mine = r[root as usize * block..][..block].to_vec();
            if !lean_bytes(
                &c,
                CollKind::Gather,
                root,
                block,
                Some(&mine),
                Some(&mut *r),
            )? {
                p.gather_into_root(&mine[..], r);
            }
        } else {
            let sl = len(sendcount, sendtype)?;
            same_block(sl, block)?;
            disjoint(sendbuf, sl, recvbuf, total)?;
            // SAFETY: both buffers as the MPI contract says, disjoint (checked).
            let (s, r) = unsafe { (bytes(sendbuf, sl)?, bytes_mut(recvbuf, total)?) };
            if !lean_bytes(&c, CollKind::Gather, root, sl, Some(s), Some(&mut *r))? {
                p.gather_into_root(s, r);
            }
        }
        Ok(())
    })
}

export!(MPI_Scatter, PMPI_Scatter,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle) -> c_int {
    scatter_impl("MPI_Scatter", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, root, comm)
});

/// `MPI_Scatter` (and `MPI_Scatter_c`).
pub(crate) fn scatter_impl(
    name: &str,
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: Handle,
    root: c_int,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::inter_coll::scatter(
                    &ic,
                    sendbuf,
                    int_count(sendcount)?,
                    sendtype,
                    recvbuf,
                    int_count(recvcount)?,
                    recvtype,
                    root,
                )
            };
        }
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::coll_dt::scatter(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                )
            };
        }
        let root = root_ok(&c, root)?;
        let p = c.process_at_rank(root);
        if c.rank() != root {
            // SAFETY: the caller passes recvcount × size writable bytes.
            let r = unsafe { bytes_mut(recvbuf, len(recvcount, recvtype)?)? };
            if !lean_bytes(&c, CollKind::Scatter, root, r.len(), None, Some(&mut *r))? {
                p.scatter_into(r);
            }
            return Ok(());
        }
        let block = len(sendcount, sendtype)?;
        let total = crate::span(block, c.size() as usize)?;
        if in_place(recvbuf) {
            // SAFETY: the root passes size × sendcount × size readable bytes.
            let s = unsafe { bytes(sendbuf, total)? };
            let mut mine = vec![0u8; block];
            if !lean_bytes(&c, CollKind::Scatter, root, block, Some(s), Some(&mut mine))? {
                p.scatter_into_root(s, &mut mine[..]);
            }
        } else {
            let rl = len(recvcount, recvtype)?;
            same_block(block, rl)?;
            disjoint(sendbuf, total, recvbuf, rl)?;
            // SAFETY: both buffers as the MPI contract says, disjoint (checked).
            let (s, r) = unsafe { (bytes(sendbuf, total)?, bytes_mut(recvbuf, rl)?) };
            if !lean_bytes(&c, CollKind::Scatter, root, rl, Some(s), Some(&mut *r))? {
                p.scatter_into_root(s, r);
            }
        }
        Ok(())
    })
}

export!(MPI_Allgather, PMPI_Allgather,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle) -> c_int {
    allgather_impl("MPI_Allgather", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm)
});

/// `MPI_Allgather` (and `MPI_Allgather_c`).
pub(crate) fn allgather_impl(
    name: &str,
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: Handle,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::inter_coll::all(
                    &ic,
                    sendbuf,
                    int_count(sendcount)?,
                    sendtype,
                    recvbuf,
                    int_count(recvcount)?,
                    recvtype,
                    false,
                )
            };
        }
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::coll_dt::allgather(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, false,
                )
            };
        }
        let block = len(recvcount, recvtype)?;
        let total = crate::span(block, c.size() as usize)?;
        if in_place(sendbuf) {
            // SAFETY: the caller passes size × recvcount × size writable bytes.
            let r = unsafe { bytes_mut(recvbuf, total)? };
            let mine = r[c.rank() as usize * block..][..block].to_vec();
            if !lean_bytes(
                &c,
                CollKind::Allgather,
                0,
                block,
                Some(&mine),
                Some(&mut *r),
            )? {
                c.all_gather_into(&mine[..], r);
            }
        } else {
            let sl = len(sendcount, sendtype)?;
            same_block(sl, block)?;
            disjoint(sendbuf, sl, recvbuf, total)?;
            // SAFETY: both buffers as the MPI contract says, disjoint (checked).
            let (s, r) = unsafe { (bytes(sendbuf, sl)?, bytes_mut(recvbuf, total)?) };
            if !lean_bytes(&c, CollKind::Allgather, 0, sl, Some(s), Some(&mut *r))? {
                c.all_gather_into(s, r);
            }
        }
        Ok(())
    })
}

export!(MPI_Alltoall, PMPI_Alltoall,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle) -> c_int {
    alltoall_impl("MPI_Alltoall", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm)
});

/// `MPI_Alltoall` (and `MPI_Alltoall_c`).
pub(crate) fn alltoall_impl(
    name: &str,
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: Handle,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::inter_coll::all(
                    &ic,
                    sendbuf,
                    int_count(sendcount)?,
                    sendtype,
                    recvbuf,
                    int_count(recvcount)?,
                    recvtype,
                    true,
                )
            };
        }
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::coll_dt::allgather(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, true,
                )
            };
        }
        let block = len(recvcount, recvtype)?;
        let total = crate::span(block, c.size() as usize)?;
        if in_place(sendbuf) {
            // SAFETY: the caller passes size × recvcount × size writable bytes.
            let r = unsafe { bytes_mut(recvbuf, total)? };
            let mine = r.to_vec();
            if !lean_bytes(&c, CollKind::Alltoall, 0, block, Some(&mine), Some(&mut *r))? {
                c.all_to_all_into(&mine[..], r);
            }
        } else {
            same_block(len(sendcount, sendtype)?, block)?;
            disjoint(sendbuf, total, recvbuf, total)?;
            // SAFETY: both buffers as the MPI contract says, disjoint (checked).
            let (s, r) = unsafe { (bytes(sendbuf, total)?, bytes_mut(recvbuf, total)?) };
            if !lean_bytes(&c, CollKind::Alltoall, 0, block, Some(s), Some(&mut *r))? {
                c.all_to_all_into(s, r);
            }
        }
        Ok(())
    })
}
