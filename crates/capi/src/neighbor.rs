//! Neighbour collectives: `MPI_Neighbor_allgather(v)`, `MPI_Neighbor_alltoall(v,w)` and
//! their nonblocking forms `MPI_Ineighbor_*` on Cartesian, graph and distributed-graph
//! communicators.
//!
//! Contract: built from point-to-point on a fresh private duplicate of the communicator
//! (derived without messages in the same call, so the traffic matches nothing else).
//! The neighbours are MPI's: on a Cartesian communicator, per dimension the −1 then the
//! +1 neighbour of `MPI_Cart_shift(d, 1)`, both as sources and destinations; on a graph,
//! the node's neighbours both ways; on a distributed graph, its sources and destinations
//! ([`crate::graph`]). Block j of the receive buffer comes from source j, block j of the
//! send buffer (alltoall) goes to destination j. A `MPI_PROC_NULL` neighbour sends and
//! receives nothing: its receive block is left untouched. On a Cartesian communicator the
//! block sent towards −1 is tagged so that it lands in the receiver's +1 block (and
//! vice versa), which keeps a periodic dimension of extent 1 or 2 — where both
//! neighbours are the same rank — right; on graphs repeated edges between a pair match
//! in edge order (messages between a pair are not overtaken). Blocks to self are copied.
//! Contiguous datatypes move from / into the user's memory, derived ones are packed /
//! unpacked ([`crate::nbc`]); `alltoallw` gives every block its own datatype and byte
//! displacement. A nonblocking form starts the same exchange and returns its request
//! (packed blocks are unpacked when it completes); its buffers and arrays are read at
//! the start, its buffers follow the nonblocking rule. `MPI_IN_PLACE` is not allowed (MPI), and a call on a
//! communicator without a topology fails with `MPI_ERR_TOPOLOGY`. A block whose length
//! differs from its peer's is the core's transfer error (to self: `MPI_ERR_TRUNCATE`).
//! The internal functions take [`Count`] counts and arrays of either width
//! ([`crate::wide`]): the large-count forms ([`crate::large_nbc`]) share them, with no
//! `int` limit (the blocks move as point-to-point byte messages).

use crate::consts::*;
use crate::graph::topo_of;
use crate::nbc::{at, dst, register, src};
use crate::state::{self, AnyRequest, Staged};
use crate::types::{layout_of, Layout};
use crate::wide::{counts, displs, Wide};
use crate::{count, disjoint, err, export, guard, typed, CResult, Count};
use phalanx::request::StaticScope;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::{Communicator, Destination, Source};
use phalanx::Tag;
use std::ffi::{c_int, c_void};
use std::rc::Rc;

/// A neighbour: its rank (`MPI_PROC_NULL` for none) and the tag of the message.
type Peer = (c_int, Tag);

/// (sources with the tag each receive expects, destinations with the tag each send
/// carries) of communicator `comm` (module docs).
fn neighbors(comm: Handle, c: &SimpleCommunicator) -> CResult<(Vec<Peer>, Vec<Peer>)> {
    if let Some(cart) = crate::topo::grid_of(comm) {
        let (mut srcs, mut dsts) = (Vec::new(), Vec::new());
        for d in 0..cart.num_dimensions() {
            let (lo, hi) = cart.shift(d, 1);
            let (lo, hi) = (lo.unwrap_or(MPI_PROC_NULL), hi.unwrap_or(MPI_PROC_NULL));
            // Sent towards -1 with tag 2d, it arrives from the receiver's +1 side.
            dsts.extend([(lo, 2 * d), (hi, 2 * d + 1)]);
            srcs.extend([(lo, 2 * d + 1), (hi, 2 * d)]);
        }
        return Ok((srcs, dsts));
    }
    let Some(t) = topo_of(comm) else {
        return Err(err(
            MPI_ERR_TOPOLOGY,
            "a neighbour collective needs a Cartesian or graph communicator",
        ));
    };
    let (s, d) = t.neighbors(c.rank());
    let tag0 = |v: Vec<c_int>| v.into_iter().map(|r| (r, 0)).collect();
    Ok((tag0(s), tag0(d)))
}

/// Starts the exchange on a duplicate of `c`: receives `recvs`, sends `sends`; blocks
/// between this rank and itself are copied now, matched by tag in order.
fn exchange(
    c: &SimpleCommunicator,
    sends: Vec<(Peer, &'static [u8])>,
    recvs: Vec<(Peer, &'static mut [u8])>,
) -> CResult<Box<dyn AnyRequest>> {
    let d = c.duplicate();
    let me = d.rank();
    let mut own: Vec<(Tag, &'static [u8])> = sends
        .iter()
        .filter(|((r, _), _)| *r == me)
        .map(|((_, t), b)| (*t, *b))
        .collect();
    let mut reqs: Vec<Box<dyn AnyRequest>> = Vec::new();
    for ((peer, tag), buf) in recvs {
        if peer == MPI_PROC_NULL {
            continue;
        }
        if peer == me {
            let i = own
                .iter()
                .position(|(t, _)| *t == tag)
                .ok_or_else(|| err(MPI_ERR_INTERN, "no block to self for a self neighbour"))?;
            let (_, s) = own.remove(i);
            if s.len() != buf.len() {
                return Err(err(
                    MPI_ERR_TRUNCATE,
                    format!(
                        "a block to self of {} bytes into {} bytes",
                        s.len(),
                        buf.len()
                    ),
                ));
            }
            buf.copy_from_slice(s);
            continue;
        }
        reqs.push(Box::new(
            d.process_at_rank(peer)
                .immediate_receive_into_with_tag(StaticScope, buf, tag),
        ));
    }
    for ((peer, tag), buf) in sends {
        if peer != me && peer != MPI_PROC_NULL {
            reqs.push(Box::new(d.process_at_rank(peer).immediate_send_with_tag(
                StaticScope,
                buf,
                tag,
            )));
        }
    }
    Ok(Box::new(reqs))
}

/// Hands a started exchange to `request` (nonblocking form), or runs it to completion
/// (`request` null: the blocking form); derived receive blocks are unpacked at
/// completion.
fn finish(comm: Handle, req: Box<dyn AnyRequest>, sg: Staged, request: *mut Handle) -> CResult {
    if !request.is_null() {
        return register(comm, req, sg, request);
    }
    let mut h = std::ptr::null_mut();
    register(comm, req, sg, &mut h)?;
    crate::p2p::complete(h, true).map(drop)
}

/// `MPI_ERR_BUFFER` for `MPI_IN_PLACE` as the send buffer.
fn not_in_place(sendbuf: *const c_void) -> CResult {
    if std::ptr::eq(sendbuf, IN_PLACE) {
        return Err(err(
            MPI_ERR_BUFFER,
            "MPI_IN_PLACE is not allowed in a neighbour collective",
        ));
    }
    Ok(())
}

/// One side's blocks: per neighbour, (address, count, datatype).
type Blocks = Vec<(*const c_void, usize, Rc<Layout>)>;

/// Neighbour collective with per-neighbour send and receive blocks: completed here, or
/// started and handed to `request` when it is not null.
///
/// # Safety
/// Every block is valid for its count of its datatype for the whole blocking call, or
/// until the request completes.
unsafe fn run(
    comm: Handle,
    c: &SimpleCommunicator,
    send: Blocks,
    recv: Blocks,
    (srcs, dsts): (Vec<Peer>, Vec<Peer>),
    request: *mut Handle,
) -> CResult {
    if send.iter().chain(&recv).all(|b| b.2.is_contiguous()) {
        // MPI forbids overlapping buffers; used in place they would alias.
        for (s, n, sl) in &send {
            for (r, k, rl) in &recv {
                disjoint(*s, n * sl.size, *r, k * rl.size)?;
            }
        }
    }
    let mut sg = Staged::default();
    let mut sends = Vec::with_capacity(dsts.len());
    for (peer, (p, n, l)) in dsts.into_iter().zip(send) {
        if peer.0 != MPI_PROC_NULL {
            // SAFETY: caller.
            sends.push((peer, unsafe { src(&mut sg, p, n, &l)? }));
        }
    }
    let mut recvs = Vec::with_capacity(srcs.len());
    for (peer, (p, n, l)) in srcs.into_iter().zip(recv) {
        if peer.0 != MPI_PROC_NULL {
            // SAFETY: caller.
            recvs.push((peer, unsafe { dst(&mut sg, p.cast_mut(), n, l)? }));
        }
    }
    let req = exchange(c, sends, recvs)?;
    finish(comm, req, sg, request)
}

/// `n` consecutive blocks of `k` elements of `t` at `base`.
fn uniform(base: *const c_void, k: Count, t: Handle, n: usize) -> CResult<Blocks> {
    let (k, l) = (count(k)?, layout_of(t)?);
    Ok((0..n)
        .map(|j| (at(base, j.wrapping_mul(k) as isize, &l), k, l.clone()))
        .collect())
}

/// Blocks at displacements (in elements of `t`) with counts, `n` of each.
///
/// # Safety
/// `cs` and `ds` hold `n` ints each.
unsafe fn varied<C: Wide, D: Wide>(
    base: *const c_void,
    cs: *const C,
    ds: *const D,
    t: Handle,
    n: usize,
) -> CResult<Blocks> {
    let l = layout_of(t)?;
    // SAFETY: caller.
    let (cs, ds) = unsafe { (counts(cs, n)?, displs(ds, n)?) };
    Ok(cs
        .into_iter()
        .zip(ds)
        .map(|(k, d)| (at(base, d, &l), k, l.clone()))
        .collect())
}

/// Blocks at byte displacements with counts and datatypes, `n` of each (`alltoallw`).
///
/// # Safety
/// `cs`, `ds` and `ts` hold `n` values each.
unsafe fn typed_blocks<C: Wide>(
    base: *const c_void,
    cs: *const C,
    ds: *const isize,
    ts: *const Handle,
    n: usize,
) -> CResult<Blocks> {
    // SAFETY: caller.
    let (cs, ds, ts) = unsafe {
        (
            counts(cs, n)?,
            typed::<isize>(ds.cast(), n)?,
            typed::<Handle>(ts.cast(), n)?,
        )
    };
    let mut out = Vec::with_capacity(n);
    for ((k, &d), &t) in cs.into_iter().zip(ds).zip(ts) {
        out.push((base.wrapping_byte_offset(d), k, layout_of(t)?));
    }
    Ok(out)
}

/// `MPI_Neighbor_allgather` (`request` null) or `MPI_Ineighbor_allgather`.
///
/// # Safety
/// The caller's buffers (blocking or nonblocking contract).
pub(crate) unsafe fn allgather(
    (sendbuf, sendcount, sendtype): (*const c_void, Count, Handle),
    (recvbuf, recvcount, recvtype): (*mut c_void, Count, Handle),
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    let c = state::comm(comm)?;
    not_in_place(sendbuf)?;
    let (srcs, dsts) = neighbors(comm, &c)?;
    let (k, sl) = (count(sendcount)?, layout_of(sendtype)?);
    let send = vec![(sendbuf, k, sl); dsts.len()];
    let recv = uniform(recvbuf, recvcount, recvtype, srcs.len())?;
    // SAFETY: caller.
    unsafe { run(comm, &c, send, recv, (srcs, dsts), request) }
}

/// `MPI_Neighbor_allgatherv` (`request` null) or `MPI_Ineighbor_allgatherv`.
///
/// # Safety
/// The caller's buffers; indegree ints in `recvcounts` and `rdispls`.
pub(crate) unsafe fn allgatherv<C: Wide, D: Wide>(
    (sendbuf, sendcount, sendtype): (*const c_void, Count, Handle),
    (recvbuf, recvcounts, rdispls, recvtype): VSide<*mut c_void, C, D>,
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    let c = state::comm(comm)?;
    not_in_place(sendbuf)?;
    let (srcs, dsts) = neighbors(comm, &c)?;
    let (k, sl) = (count(sendcount)?, layout_of(sendtype)?);
    let send = vec![(sendbuf, k, sl); dsts.len()];
    // SAFETY: caller.
    let recv = unsafe { varied(recvbuf, recvcounts, rdispls, recvtype, srcs.len())? };
    // SAFETY: caller.
    unsafe { run(comm, &c, send, recv, (srcs, dsts), request) }
}

/// `MPI_Neighbor_alltoall` (`request` null) or `MPI_Ineighbor_alltoall`.
///
/// # Safety
/// The caller's buffers (blocking or nonblocking contract).
pub(crate) unsafe fn alltoall(
    (sendbuf, sendcount, sendtype): (*const c_void, Count, Handle),
    (recvbuf, recvcount, recvtype): (*mut c_void, Count, Handle),
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    let c = state::comm(comm)?;
    not_in_place(sendbuf)?;
    let (srcs, dsts) = neighbors(comm, &c)?;
    let send = uniform(sendbuf, sendcount, sendtype, dsts.len())?;
    let recv = uniform(recvbuf, recvcount, recvtype, srcs.len())?;
    // SAFETY: caller.
    unsafe { run(comm, &c, send, recv, (srcs, dsts), request) }
}

/// Arguments of one side of `alltoallv`: buffer, counts, displacements, datatype.
pub(crate) type VSide<P, C, D> = (P, *const C, *const D, Handle);

/// `MPI_Neighbor_alltoallv` (`request` null) or `MPI_Ineighbor_alltoallv`.
///
/// # Safety
/// The caller's buffers; outdegree (indegree) ints in the send (receive) arrays.
pub(crate) unsafe fn alltoallv<C: Wide, D: Wide>(
    (sendbuf, sendcounts, sdispls, sendtype): VSide<*const c_void, C, D>,
    (recvbuf, recvcounts, rdispls, recvtype): VSide<*mut c_void, C, D>,
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    let c = state::comm(comm)?;
    not_in_place(sendbuf)?;
    let (srcs, dsts) = neighbors(comm, &c)?;
    // SAFETY: caller.
    let (send, recv) = unsafe {
        (
            varied(sendbuf, sendcounts, sdispls, sendtype, dsts.len())?,
            varied(recvbuf, recvcounts, rdispls, recvtype, srcs.len())?,
        )
    };
    // SAFETY: caller.
    unsafe { run(comm, &c, send, recv, (srcs, dsts), request) }
}

/// Arguments of one side of `alltoallw`: buffer, counts, byte displacements, datatypes.
pub(crate) type WSide<P, C> = (P, *const C, *const isize, *const Handle);

/// `MPI_Neighbor_alltoallw` (`request` null) or `MPI_Ineighbor_alltoallw`.
///
/// # Safety
/// The caller's buffers; outdegree (indegree) values in the send (receive) arrays.
pub(crate) unsafe fn alltoallw<C: Wide>(
    (sendbuf, sendcounts, sdispls, sendtypes): WSide<*const c_void, C>,
    (recvbuf, recvcounts, rdispls, recvtypes): WSide<*mut c_void, C>,
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    let c = state::comm(comm)?;
    not_in_place(sendbuf)?;
    let (srcs, dsts) = neighbors(comm, &c)?;
    // SAFETY: caller.
    let (send, recv) = unsafe {
        (
            typed_blocks(sendbuf, sendcounts, sdispls, sendtypes, dsts.len())?,
            typed_blocks(recvbuf, recvcounts, rdispls, recvtypes, srcs.len())?,
        )
    };
    // SAFETY: caller.
    unsafe { run(comm, &c, send, recv, (srcs, dsts), request) }
}

/// A null request pointer is `MPI_ERR_ARG` (the nonblocking forms).
pub(crate) fn req_arg(request: *mut Handle) -> CResult<*mut Handle> {
    crate::nbc::req_ok(request)?;
    Ok(request)
}

export!(MPI_Neighbor_allgather, PMPI_Neighbor_allgather,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle) -> c_int {
    guard("MPI_Neighbor_allgather", comm, || {
        // SAFETY: the caller's buffers, valid for the whole (blocking) call.
        unsafe {
            allgather((sendbuf, sendcount.into(), sendtype), (recvbuf, recvcount.into(), recvtype), comm,
                      std::ptr::null_mut())
        }
    })
});

export!(MPI_Ineighbor_allgather, PMPI_Ineighbor_allgather,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Ineighbor_allgather", comm, || {
        // SAFETY: the caller's buffers, valid until the request completes.
        unsafe {
            allgather((sendbuf, sendcount.into(), sendtype), (recvbuf, recvcount.into(), recvtype), comm,
                      req_arg(request)?)
        }
    })
});

export!(MPI_Neighbor_allgatherv, PMPI_Neighbor_allgatherv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs_: *const c_int, recvtype: Handle,
         comm: Handle) -> c_int {
    guard("MPI_Neighbor_allgatherv", comm, || {
        // SAFETY: the caller's buffers and indegree-long arrays (MPI contract).
        unsafe {
            allgatherv((sendbuf, sendcount.into(), sendtype),
                       (recvbuf, recvcounts, displs_, recvtype), comm, std::ptr::null_mut())
        }
    })
});

export!(MPI_Ineighbor_allgatherv, PMPI_Ineighbor_allgatherv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs_: *const c_int, recvtype: Handle,
         comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Ineighbor_allgatherv", comm, || {
        // SAFETY: the caller's buffers and indegree-long arrays (MPI contract).
        unsafe {
            allgatherv((sendbuf, sendcount.into(), sendtype),
                       (recvbuf, recvcounts, displs_, recvtype), comm, req_arg(request)?)
        }
    })
});

export!(MPI_Neighbor_alltoall, PMPI_Neighbor_alltoall,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle) -> c_int {
    guard("MPI_Neighbor_alltoall", comm, || {
        // SAFETY: the caller's buffers, valid for the whole (blocking) call.
        unsafe {
            alltoall((sendbuf, sendcount.into(), sendtype), (recvbuf, recvcount.into(), recvtype), comm,
                     std::ptr::null_mut())
        }
    })
});

export!(MPI_Ineighbor_alltoall, PMPI_Ineighbor_alltoall,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Ineighbor_alltoall", comm, || {
        // SAFETY: the caller's buffers, valid until the request completes.
        unsafe {
            alltoall((sendbuf, sendcount.into(), sendtype), (recvbuf, recvcount.into(), recvtype), comm,
                     req_arg(request)?)
        }
    })
});

export!(MPI_Neighbor_alltoallv, PMPI_Neighbor_alltoallv,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtype: Handle, comm: Handle) -> c_int {
    guard("MPI_Neighbor_alltoallv", comm, || {
        // SAFETY: the caller's buffers and degree-long arrays (MPI contract).
        unsafe {
            alltoallv((sendbuf, sendcounts, sdispls, sendtype),
                      (recvbuf, recvcounts, rdispls, recvtype), comm, std::ptr::null_mut())
        }
    })
});

export!(MPI_Ineighbor_alltoallv, PMPI_Ineighbor_alltoallv,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtype: Handle, comm: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Ineighbor_alltoallv", comm, || {
        // SAFETY: the caller's buffers and degree-long arrays (MPI contract).
        unsafe {
            alltoallv((sendbuf, sendcounts, sdispls, sendtype),
                      (recvbuf, recvcounts, rdispls, recvtype), comm, req_arg(request)?)
        }
    })
});

export!(MPI_Neighbor_alltoallw, PMPI_Neighbor_alltoallw,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const isize,
         sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const isize, recvtypes: *const Handle, comm: Handle) -> c_int {
    guard("MPI_Neighbor_alltoallw", comm, || {
        // SAFETY: the caller's buffers and degree-long arrays (MPI contract).
        unsafe {
            alltoallw((sendbuf, sendcounts, sdispls, sendtypes),
                      (recvbuf, recvcounts, rdispls, recvtypes), comm, std::ptr::null_mut())
        }
    })
});

export!(MPI_Ineighbor_alltoallw, PMPI_Ineighbor_alltoallw,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const isize,
         sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const isize, recvtypes: *const Handle, comm: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Ineighbor_alltoallw", comm, || {
        // SAFETY: the caller's buffers and degree-long arrays (MPI contract).
        unsafe {
            alltoallw((sendbuf, sendcounts, sdispls, sendtypes),
                      (recvbuf, recvcounts, rdispls, recvtypes), comm, req_arg(request)?)
        }
    })
});

/// (indegree, outdegree) of `comm`'s topology (`MPI_ERR_TOPOLOGY` without one).
pub(crate) fn degrees(comm: Handle) -> CResult<(usize, usize)> {
    let c = state::comm(comm)?;
    let (s, d) = neighbors(comm, &c)?;
    Ok((s.len(), d.len()))
}
