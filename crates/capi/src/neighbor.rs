//! Blocking neighbour collectives: `MPI_Neighbor_allgather(v)` and
//! `MPI_Neighbor_alltoall(v)` on Cartesian, graph and distributed-graph communicators.
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
//! unpacked ([`crate::nbc`]). `MPI_IN_PLACE` is not allowed (MPI), and a call on a
//! communicator without a topology fails with `MPI_ERR_TOPOLOGY`. A block whose length
//! differs from its peer's is the core's transfer error (to self: `MPI_ERR_TRUNCATE`).

use crate::consts::*;
use crate::graph::topo_of;
use crate::nbc::{at, dst, register, src};
use crate::nbc_v::{counts, displs};
use crate::state::{self, AnyRequest, Staged};
use crate::types::layout_of;
use crate::{count, disjoint, err, export, guard, CResult};
use phalanx::request::StaticScope;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::{Communicator, Destination, Source};
use phalanx::Tag;
use std::ffi::{c_int, c_void};

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

/// Runs a started exchange to completion (unpacking derived receive blocks).
fn finish(comm: Handle, req: Box<dyn AnyRequest>, sg: Staged) -> CResult {
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

/// One side's blocks: per neighbour, (address, count).
type Blocks = Vec<(*const c_void, usize)>;

/// Neighbour collective with per-neighbour send and receive blocks.
///
/// # Safety
/// Every block is valid for its count of its datatype for the whole (blocking) call.
unsafe fn run(
    comm: Handle,
    c: &SimpleCommunicator,
    send: (Blocks, Handle),
    recv: (Blocks, Handle),
    srcs: Vec<Peer>,
    dsts: Vec<Peer>,
) -> CResult {
    let (sl, rl) = (layout_of(send.1)?, layout_of(recv.1)?);
    if sl.is_contiguous() && rl.is_contiguous() {
        // MPI forbids overlapping buffers; used in place they would alias.
        for &(s, n) in &send.0 {
            for &(r, k) in &recv.0 {
                disjoint(s, n * sl.size, r, k * rl.size)?;
            }
        }
    }
    let mut sg = Staged::default();
    let mut sends = Vec::with_capacity(dsts.len());
    for (peer, (p, n)) in dsts.into_iter().zip(send.0) {
        if peer.0 != MPI_PROC_NULL {
            // SAFETY: caller.
            sends.push((peer, unsafe { src(&mut sg, p, n, &sl)? }));
        }
    }
    let mut recvs = Vec::with_capacity(srcs.len());
    for (peer, (p, n)) in srcs.into_iter().zip(recv.0) {
        if peer.0 != MPI_PROC_NULL {
            // SAFETY: caller.
            recvs.push((peer, unsafe { dst(&mut sg, p.cast_mut(), n, rl.clone())? }));
        }
    }
    let req = exchange(c, sends, recvs)?;
    finish(comm, req, sg)
}

/// `n` consecutive blocks of `k` elements of `t` at `base`.
fn uniform(base: *const c_void, k: c_int, t: Handle, n: usize) -> CResult<Blocks> {
    let (k, l) = (count(k)?, layout_of(t)?);
    Ok((0..n)
        .map(|j| (at(base, (j * k) as isize, &l), k))
        .collect())
}

/// Blocks at displacements (in elements of `t`) with counts, `n` of each.
///
/// # Safety
/// `cs` and `ds` hold `n` ints each.
unsafe fn varied(
    base: *const c_void,
    cs: *const c_int,
    ds: *const c_int,
    t: Handle,
    n: usize,
) -> CResult<Blocks> {
    let l = layout_of(t)?;
    // SAFETY: caller.
    let (cs, ds) = unsafe { (counts(cs, n)?, displs(ds, n)?) };
    Ok(cs
        .into_iter()
        .zip(ds)
        .map(|(k, d)| (at(base, d, &l), k))
        .collect())
}

export!(MPI_Neighbor_allgather, PMPI_Neighbor_allgather,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle) -> c_int {
    guard("MPI_Neighbor_allgather", comm, || {
        let c = state::comm(comm)?;
        not_in_place(sendbuf)?;
        let (srcs, dsts) = neighbors(comm, &c)?;
        let send = vec![(sendbuf, count(sendcount)?); dsts.len()];
        let recv = uniform(recvbuf, recvcount, recvtype, srcs.len())?;
        // SAFETY: the caller's buffers, valid for the whole (blocking) call.
        unsafe { run(comm, &c, (send, sendtype), (recv, recvtype), srcs, dsts) }
    })
});

export!(MPI_Neighbor_allgatherv, PMPI_Neighbor_allgatherv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs_: *const c_int, recvtype: Handle,
         comm: Handle) -> c_int {
    guard("MPI_Neighbor_allgatherv", comm, || {
        let c = state::comm(comm)?;
        not_in_place(sendbuf)?;
        let (srcs, dsts) = neighbors(comm, &c)?;
        let send = vec![(sendbuf, count(sendcount)?); dsts.len()];
        // SAFETY: indegree ints in recvcounts and displs (MPI contract).
        let recv = unsafe { varied(recvbuf, recvcounts, displs_, recvtype, srcs.len())? };
        // SAFETY: the caller's buffers, valid for the whole (blocking) call.
        unsafe { run(comm, &c, (send, sendtype), (recv, recvtype), srcs, dsts) }
    })
});

export!(MPI_Neighbor_alltoall, PMPI_Neighbor_alltoall,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle) -> c_int {
    guard("MPI_Neighbor_alltoall", comm, || {
        let c = state::comm(comm)?;
        not_in_place(sendbuf)?;
        let (srcs, dsts) = neighbors(comm, &c)?;
        let send = uniform(sendbuf, sendcount, sendtype, dsts.len())?;
        let recv = uniform(recvbuf, recvcount, recvtype, srcs.len())?;
        // SAFETY: the caller's buffers, valid for the whole (blocking) call.
        unsafe { run(comm, &c, (send, sendtype), (recv, recvtype), srcs, dsts) }
    })
});

export!(MPI_Neighbor_alltoallv, PMPI_Neighbor_alltoallv,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtype: Handle, comm: Handle) -> c_int {
    guard("MPI_Neighbor_alltoallv", comm, || {
        let c = state::comm(comm)?;
        not_in_place(sendbuf)?;
        let (srcs, dsts) = neighbors(comm, &c)?;
        // SAFETY: outdegree (indegree) ints in the send (receive) counts and displs.
        let (send, recv) = unsafe {
            (
                varied(sendbuf, sendcounts, sdispls, sendtype, dsts.len())?,
                varied(recvbuf, recvcounts, rdispls, recvtype, srcs.len())?,
            )
        };
        // SAFETY: the caller's buffers, valid for the whole (blocking) call.
        unsafe { run(comm, &c, (send, sendtype), (recv, recvtype), srcs, dsts) }
    })
});
