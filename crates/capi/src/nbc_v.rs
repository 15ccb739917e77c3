//! Nonblocking varying-count collectives and reduce-scatters: `MPI_Igatherv`,
//! `MPI_Iscatterv`, `MPI_Iallgatherv`, `MPI_Ialltoallv`, `MPI_Ireduce_scatter_block`,
//! `MPI_Ireduce_scatter`.
//!
//! Contract: the core has no immediate varying-count collectives, so each call starts
//! immediate point-to-point sends and receives of every block on a fresh private
//! duplicate of the communicator (every member derives the same duplicate, without
//! messages, in the same collective call, so this traffic never matches the program's
//! own messages nor another collective's) and returns one request completing when all
//! of them have. The block to self is copied at the start. Buffers, derived datatypes
//! and `MPI_IN_PLACE` follow [`crate::nbc`]: contiguous blocks are sent from / received
//! into the user memory, derived ones are packed at the start / unpacked at completion,
//! in-place data is copied at the start. Receive blocks must not overlap (MPI rule).
//! The reduce-scatters send block r of every member's packed input to member r, which
//! folds the contributions in rank order at completion (any operation, as
//! [`crate::ops`]); they use `members × block` bytes of temporary space.
//!
//! Each is one generic implementation (`*_impl`) for the `int` entry point and its
//! `_c` form ([`crate::large_nbc`]): counts in [`Count`], arrays of either width
//! ([`crate::wide`]). The blocks move as point-to-point byte messages, so no count or
//! displacement here is limited to `int`.

use crate::coll::{in_place, root_ok};
use crate::coll_more::{USide, VSide};
use crate::consts::*;
use crate::inter_nbc;
use crate::localop::{reducer, validate};
use crate::nbc::{at, copy, dst, register, req_ok, src};
use crate::state::{self, AnyRequest, Staged};
use crate::types::{layout_of, unpack, Layout};
use crate::wide::{counts, displs, Wide};
use crate::{count, disjoint, err, export, guard, span, CResult, Count};
use phalanx::request::StaticScope;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::{Communicator, Destination, Source};
use std::ffi::{c_int, c_void};

/// The bytes `(address, length)` that the blocks `(cs, ds)` of `l` at `base` span.
fn extent(base: *const c_void, cs: &[usize], ds: &[isize], l: &Layout) -> (*const c_void, usize) {
    let blocks = cs.iter().zip(ds).filter(|(&c, _)| c > 0);
    let lo = blocks
        .clone()
        .map(|(_, &d)| d.saturating_mul(l.extent))
        .min()
        .unwrap_or(0);
    let hi = blocks
        .map(|(&c, &d)| d.saturating_add(c as isize).saturating_mul(l.extent))
        .max()
        .unwrap_or(0);
    let at = (base as *const u8).wrapping_offset(lo).cast();
    (at, hi.saturating_sub(lo).max(0) as usize)
}

/// MPI forbids overlapping send and receive buffers (except through `MPI_IN_PLACE`):
/// `MPI_ERR_BUFFER` when both sides are used in place (contiguous) and overlap, which
/// would also alias the slices handed to the core.
fn no_alias(send: (*const c_void, usize), recv: (*const c_void, usize), direct: bool) -> CResult {
    if direct {
        disjoint(send.0, send.1, recv.0, recv.1)?;
    }
    Ok(())
}

/// Starts the point-to-point exchange of `sends` and `recvs` (peer, bytes) on a fresh
/// duplicate of `c`; the block to self is copied now.
pub(crate) fn exchange(
    c: &SimpleCommunicator,
    sends: Vec<(c_int, &'static [u8])>,
    recvs: Vec<(c_int, &'static mut [u8])>,
) -> CResult<Box<dyn AnyRequest>> {
    let d = c.duplicate();
    let me = d.rank();
    exchange_on(&d, me, sends, recvs)
}

/// [`exchange`] on an intercommunicator: peers are remote ranks (a fresh duplicate of
/// `ic`, made without messages), and no block goes to self.
pub(crate) fn exchange_inter(
    ic: &phalanx::topology::InterCommunicator,
    sends: Vec<(c_int, &'static [u8])>,
    recvs: Vec<(c_int, &'static mut [u8])>,
) -> CResult<Box<dyn AnyRequest>> {
    let d = ic.duplicate();
    exchange_on(d.as_simple(), MPI_PROC_NULL, sends, recvs)
}

/// Starts the exchange on `d`; blocks to peer `me` are copied now.
fn exchange_on(
    d: &SimpleCommunicator,
    me: c_int,
    sends: Vec<(c_int, &'static [u8])>,
    recvs: Vec<(c_int, &'static mut [u8])>,
) -> CResult<Box<dyn AnyRequest>> {
    let own = sends.iter().find(|b| b.0 == me).map(|b| b.1);
    let mut reqs: Vec<Box<dyn AnyRequest>> = Vec::new();
    for (peer, buf) in recvs {
        if peer == me {
            let s = own.ok_or_else(|| err(MPI_ERR_INTERN, "no block to self"))?;
            if s.len() != buf.len() {
                return Err(err(
                    MPI_ERR_TRUNCATE,
                    "block to self does not match its receive block",
                ));
            }
            buf.copy_from_slice(s);
            continue;
        }
        reqs.push(Box::new(
            d.process_at_rank(peer)
                .immediate_receive_into(StaticScope, buf),
        ));
    }
    for (peer, buf) in sends {
        if peer != me {
            reqs.push(Box::new(
                d.process_at_rank(peer).immediate_send(StaticScope, buf),
            ));
        }
    }
    Ok(Box::new(reqs))
}

export!(MPI_Igatherv, PMPI_Igatherv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs_: *const c_int, recvtype: Handle, root: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    igatherv_impl("MPI_Igatherv", (sendbuf, sendcount.into(), sendtype),
                  (recvbuf, recvcounts, displs_, recvtype), root, comm, request)
});

/// `MPI_Igatherv` (and `MPI_Igatherv_c`).
pub(crate) fn igatherv_impl<C: Wide, D: Wide>(
    name: &str,
    (sendbuf, sendcount, sendtype): USide<*const c_void>,
    (recvbuf, recvcounts, displs_, recvtype): VSide<*mut c_void, C, D>,
    root: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let m = ic.remote_size();
            // SAFETY: remote-size ints at the root (MPI contract).
            let recv = || {
                Ok((
                    recvbuf,
                    unsafe { inter_nbc::varied(recvcounts, displs_, m)? },
                    recvtype,
                ))
            };
            // SAFETY: the caller's buffers (nonblocking contract).
            return unsafe {
                inter_nbc::igather(
                    &ic,
                    (sendbuf, sendcount, sendtype),
                    recv,
                    root,
                    comm,
                    request,
                )
            };
        }
        let root = root_ok(&c, root)?;
        req_ok(request)?;
        let (me, p) = (c.rank(), c.size() as usize);
        let skip_self = me == root && in_place(sendbuf);
        let mut sg = Staged::default();
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        // SAFETY: the caller's buffers, counts and displacements (nonblocking contract).
        unsafe {
            let sl = (!skip_self).then(|| layout_of(sendtype)).transpose()?;
            if me == root {
                let rl = layout_of(recvtype)?;
                let (cs, ds) = (counts(recvcounts, p)?, displs(displs_, p)?);
                if let Some(sl) = &sl {
                    let direct = sl.is_contiguous() && rl.is_contiguous();
                    let sc = span(count(sendcount)?, sl.size)?;
                    no_alias((sendbuf, sc), extent(recvbuf, &cs, &ds, &rl), direct)?;
                }
                for r in (0..p).filter(|&r| !(skip_self && r as c_int == me)) {
                    let b = dst(
                        &mut sg,
                        at(recvbuf, ds[r], &rl).cast_mut(),
                        cs[r],
                        rl.clone(),
                    )?;
                    recvs.push((r as c_int, b));
                }
            }
            if let Some(sl) = &sl {
                sends.push((root, src(&mut sg, sendbuf, count(sendcount)?, sl)?));
            }
        }
        register(comm, exchange(&c, sends, recvs)?, sg, request)
    })
}

export!(MPI_Iscatterv, PMPI_Iscatterv,
        (sendbuf: *const c_void, sendcounts: *const c_int, displs_: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle,
         root: c_int, comm: Handle, request: *mut Handle) -> c_int {
    iscatterv_impl("MPI_Iscatterv", (sendbuf, sendcounts, displs_, sendtype),
                   (recvbuf, recvcount.into(), recvtype), root, comm, request)
});

/// `MPI_Iscatterv` (and `MPI_Iscatterv_c`).
pub(crate) fn iscatterv_impl<C: Wide, D: Wide>(
    name: &str,
    (sendbuf, sendcounts, displs_, sendtype): VSide<*const c_void, C, D>,
    (recvbuf, recvcount, recvtype): USide<*mut c_void>,
    root: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let m = ic.remote_size();
            // SAFETY: remote-size ints at the root (MPI contract).
            let send = || {
                Ok((
                    sendbuf,
                    unsafe { inter_nbc::varied(sendcounts, displs_, m)? },
                    sendtype,
                ))
            };
            // SAFETY: the caller's buffers (nonblocking contract).
            return unsafe {
                inter_nbc::iscatter(
                    &ic,
                    send,
                    (recvbuf, recvcount, recvtype),
                    root,
                    comm,
                    request,
                )
            };
        }
        let root = root_ok(&c, root)?;
        req_ok(request)?;
        let (me, p) = (c.rank(), c.size() as usize);
        let skip_self = me == root && in_place(recvbuf);
        let mut sg = Staged::default();
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        // SAFETY: the caller's buffers, counts and displacements (nonblocking contract).
        unsafe {
            if me == root {
                let sl = layout_of(sendtype)?;
                let (cs, ds) = (counts(sendcounts, p)?, displs(displs_, p)?);
                if !skip_self {
                    let rl = layout_of(recvtype)?;
                    let direct = sl.is_contiguous() && rl.is_contiguous();
                    let rc = span(count(recvcount)?, rl.size)?;
                    no_alias(extent(sendbuf, &cs, &ds, &sl), (recvbuf, rc), direct)?;
                }
                for r in (0..p).filter(|&r| !(skip_self && r as c_int == me)) {
                    sends.push((
                        r as c_int,
                        src(&mut sg, at(sendbuf, ds[r], &sl), cs[r], &sl)?,
                    ));
                }
            }
            if !skip_self {
                let rl = layout_of(recvtype)?;
                recvs.push((root, dst(&mut sg, recvbuf, count(recvcount)?, rl)?));
            }
        }
        register(comm, exchange(&c, sends, recvs)?, sg, request)
    })
}

export!(MPI_Iallgatherv, PMPI_Iallgatherv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs_: *const c_int, recvtype: Handle, comm: Handle,
         request: *mut Handle) -> c_int {
    iallgatherv_impl("MPI_Iallgatherv", (sendbuf, sendcount.into(), sendtype),
                     (recvbuf, recvcounts, displs_, recvtype), comm, request)
});

/// `MPI_Iallgatherv` (and `MPI_Iallgatherv_c`).
pub(crate) fn iallgatherv_impl<C: Wide, D: Wide>(
    name: &str,
    (sendbuf, sendcount, sendtype): USide<*const c_void>,
    (recvbuf, recvcounts, displs_, recvtype): VSide<*mut c_void, C, D>,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let m = ic.remote_size();
            let send = vec![(count(sendcount)?, 0); m.max(0) as usize];
            // SAFETY: remote-size ints (MPI contract).
            let recv = unsafe { inter_nbc::varied(recvcounts, displs_, m)? };
            // SAFETY: the caller's buffers (nonblocking contract).
            return unsafe {
                inter_nbc::iall(
                    &ic,
                    (sendbuf, send, sendtype),
                    (recvbuf, recv, recvtype),
                    comm,
                    request,
                )
            };
        }
        req_ok(request)?;
        let (me, p) = (c.rank(), c.size() as usize);
        let ip = in_place(sendbuf);
        let rl = layout_of(recvtype)?;
        let mut sg = Staged::default();
        // SAFETY: the caller's buffers, counts and displacements (nonblocking contract).
        let (sends, recvs) = unsafe {
            let (cs, ds) = (counts(recvcounts, p)?, displs(displs_, p)?);
            let mine = if ip {
                copy(
                    &mut sg,
                    at(recvbuf, ds[me as usize], &rl),
                    cs[me as usize],
                    &rl,
                )?
            } else {
                let sl = layout_of(sendtype)?;
                let sc = count(sendcount)?;
                let direct = sl.is_contiguous() && rl.is_contiguous();
                no_alias(
                    (sendbuf, span(sc, sl.size)?),
                    extent(recvbuf, &cs, &ds, &rl),
                    direct,
                )?;
                src(&mut sg, sendbuf, sc, &sl)?
            };
            let sends = (0..p).map(|r| (r as c_int, mine)).collect();
            let mut recvs = Vec::new();
            for r in (0..p).filter(|&r| !(ip && r as c_int == me)) {
                let b = dst(
                    &mut sg,
                    at(recvbuf, ds[r], &rl).cast_mut(),
                    cs[r],
                    rl.clone(),
                )?;
                recvs.push((r as c_int, b));
            }
            (sends, recvs)
        };
        register(comm, exchange(&c, sends, recvs)?, sg, request)
    })
}

export!(MPI_Ialltoallv, PMPI_Ialltoallv,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtype: Handle, comm: Handle,
         request: *mut Handle) -> c_int {
    ialltoallv_impl("MPI_Ialltoallv", (sendbuf, sendcounts, sdispls, sendtype),
                    (recvbuf, recvcounts, rdispls, recvtype), comm, request)
});

/// `MPI_Ialltoallv` (and `MPI_Ialltoallv_c`).
pub(crate) fn ialltoallv_impl<C: Wide, D: Wide>(
    name: &str,
    (sendbuf, sendcounts, sdispls, sendtype): VSide<*const c_void, C, D>,
    (recvbuf, recvcounts, rdispls, recvtype): VSide<*mut c_void, C, D>,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let m = ic.remote_size();
            // SAFETY: remote-size ints each (MPI contract).
            let (send, recv) = unsafe {
                (
                    inter_nbc::varied(sendcounts, sdispls, m)?,
                    inter_nbc::varied(recvcounts, rdispls, m)?,
                )
            };
            // SAFETY: the caller's buffers (nonblocking contract).
            return unsafe {
                inter_nbc::iall(
                    &ic,
                    (sendbuf, send, sendtype),
                    (recvbuf, recv, recvtype),
                    comm,
                    request,
                )
            };
        }
        req_ok(request)?;
        let p = c.size() as usize;
        let rl = layout_of(recvtype)?;
        let mut sg = Staged::default();
        // SAFETY: the caller's buffers, counts and displacements (nonblocking contract).
        let (sends, recvs) = unsafe {
            let (rc, rd) = (counts(recvcounts, p)?, displs(rdispls, p)?);
            let mut sends = Vec::new();
            if in_place(sendbuf) {
                for r in 0..p {
                    sends.push((
                        r as c_int,
                        copy(&mut sg, at(recvbuf, rd[r], &rl), rc[r], &rl)?,
                    ));
                }
            } else {
                let sl = layout_of(sendtype)?;
                let (sc, sd) = (counts(sendcounts, p)?, displs(sdispls, p)?);
                let direct = sl.is_contiguous() && rl.is_contiguous();
                no_alias(
                    extent(sendbuf, &sc, &sd, &sl),
                    extent(recvbuf, &rc, &rd, &rl),
                    direct,
                )?;
                for r in 0..p {
                    sends.push((
                        r as c_int,
                        src(&mut sg, at(sendbuf, sd[r], &sl), sc[r], &sl)?,
                    ));
                }
            }
            let mut recvs = Vec::new();
            for r in 0..p {
                let b = dst(
                    &mut sg,
                    at(recvbuf, rd[r], &rl).cast_mut(),
                    rc[r],
                    rl.clone(),
                )?;
                recvs.push((r as c_int, b));
            }
            (sends, recvs)
        };
        register(comm, exchange(&c, sends, recvs)?, sg, request)
    })
}

/// Starts a reduce-scatter with `cs[r]` elements for member r.
///
/// # Safety
/// The buffers hold the elements MPI requires, valid until completion.
unsafe fn ireduce_scatter(
    c: &SimpleCommunicator,
    (sendbuf, recvbuf): (*const c_void, *mut c_void),
    cs: Vec<usize>,
    dt: Handle,
    op: Handle,
    sg: &mut Staged,
) -> CResult<Box<dyn AnyRequest>> {
    let l = layout_of(dt)?;
    let red = reducer(op)?;
    validate(&red, &l)?;
    let (me, p) = (c.rank() as usize, c.size() as usize);
    let input = if in_place(sendbuf) {
        recvbuf.cast_const()
    } else {
        sendbuf
    };
    if !in_place(sendbuf) {
        let total = cs.iter().try_fold(0usize, |a, &k| a.checked_add(k));
        let total = total.ok_or_else(|| err(MPI_ERR_COUNT, "counts sum past any buffer"))?;
        crate::types::disjoint_data(&l, sendbuf, total, recvbuf, cs[me])?;
    }
    let mut sends = Vec::new();
    let mut off = 0isize;
    for (r, &k) in cs.iter().enumerate() {
        // SAFETY: the input holds sum(cs) elements (caller).
        sends.push((r as c_int, unsafe { copy(sg, at(input, off, &l), k, &l)? }));
        off += k as isize;
    }
    let n = cs[me];
    let len = span(n, l.size)?;
    crate::types::check_base(&l, recvbuf, n)?;
    let first = sg.len();
    let recvs = (0..p)
        .map(|r| (r as c_int, sg.hold(vec![0; len])))
        .collect();
    sg.then(Box::new(move |b, _| {
        let mut acc = b[first].to_vec();
        for part in &b[first + 1..first + p] {
            let mut next = part.to_vec();
            red.fold(dt, &l, n, &acc, &mut next)?;
            acc = next;
        }
        // SAFETY: the receive buffer holds n elements, valid at completion.
        unsafe { unpack(&l, &acc, recvbuf, n) }
    }));
    exchange(c, sends, recvs)
}

export!(MPI_Ireduce_scatter_block, PMPI_Ireduce_scatter_block,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle,
         op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    ireduce_scatter_block_impl("MPI_Ireduce_scatter_block", (sendbuf, recvbuf),
                               recvcount.into(), datatype, op, comm, request)
});

/// `MPI_Ireduce_scatter_block` (and `MPI_Ireduce_scatter_block_c`).
pub(crate) fn ireduce_scatter_block_impl(
    name: &str,
    (sendbuf, recvbuf): (*const c_void, *mut c_void),
    recvcount: Count,
    datatype: Handle,
    op: Handle,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let total = span(count(recvcount)?, ic.size().max(0) as usize)?;
            // SAFETY: the caller's buffers (nonblocking contract).
            return unsafe {
                inter_nbc::ireduce(
                    &ic,
                    (sendbuf, recvbuf, total, datatype, op),
                    inter_nbc::Fold::ScatterBlock,
                    comm,
                    request,
                )
            };
        }
        let n = count(recvcount)?;
        req_ok(request)?;
        let mut sg = Staged::default();
        let cs = vec![n; c.size() as usize];
        // SAFETY: the caller's buffers (nonblocking contract).
        let q = unsafe { ireduce_scatter(&c, (sendbuf, recvbuf), cs, datatype, op, &mut sg)? };
        register(comm, q, sg, request)
    })
}

export!(MPI_Ireduce_scatter, PMPI_Ireduce_scatter,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
         datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    ireduce_scatter_impl("MPI_Ireduce_scatter", (sendbuf, recvbuf), recvcounts, datatype, op,
                         comm, request)
});

/// `MPI_Ireduce_scatter` (and `MPI_Ireduce_scatter_c`).
pub(crate) fn ireduce_scatter_impl<C: Wide>(
    name: &str,
    (sendbuf, recvbuf): (*const c_void, *mut c_void),
    recvcounts: *const C,
    datatype: Handle,
    op: Handle,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            // SAFETY: local-size counts (MPI contract).
            let cs = unsafe { counts(recvcounts, ic.size().max(0) as usize)? };
            let me = ic.rank() as usize;
            let off = cs[..me].iter().sum();
            let fold = inter_nbc::Fold::Scatter(cs[me], off);
            // SAFETY: the caller's buffers (nonblocking contract).
            return unsafe {
                inter_nbc::ireduce(
                    &ic,
                    (sendbuf, recvbuf, cs.iter().sum(), datatype, op),
                    fold,
                    comm,
                    request,
                )
            };
        }
        req_ok(request)?;
        // SAFETY: the caller passes size counts.
        let cs = unsafe { counts(recvcounts, c.size() as usize)? };
        let mut sg = Staged::default();
        // SAFETY: the caller's buffers (nonblocking contract).
        let q = unsafe { ireduce_scatter(&c, (sendbuf, recvbuf), cs, datatype, op, &mut sg)? };
        register(comm, q, sg, request)
    })
}
