//! Persistent collectives (MPI-4): `MPI_Barrier_init`, `MPI_Bcast_init`,
//! `MPI_Gather(v)_init`, `MPI_Scatter(v)_init`, `MPI_Allgather(v)_init`,
//! `MPI_Alltoall(v,w)_init`, `MPI_Reduce_init`, `MPI_Allreduce_init`,
//! `MPI_Reduce_scatter(_block)_init`, `MPI_Scan_init`, `MPI_Exscan_init` and the
//! neighbour ones `MPI_Neighbor_allgather(v)_init`, `MPI_Neighbor_alltoall(v,w)_init`.
//!
//! Contract: an `_init` call checks the communicator and the request pointer, makes the
//! request's own private duplicate of the communicator (without messages: every member
//! makes its `_init` calls in the same order, as MPI requires, so all derive the same
//! one), takes a private duplicate of every derived datatype it names
//! ([`crate::types::pin`]) and a copy of its count, displacement and datatype arrays, and
//! returns an inactive persistent request ([`crate::persist::Persist`]) holding them.
//! Each `MPI_Start` starts the collective's nonblocking form (`MPI_Ibcast`, … on the
//! core's immediate collectives) on the private communicator with those arguments, so
//! the request can be started any number of times, and different persistent collectives
//! may be started in different orders on different members (MPI-4 matches them at
//! `_init`); it completes in `MPI_Wait*`/`MPI_Test*` like the persistent point-to-point
//! requests. An error found at the start goes to the communicator's error handler (the
//! one it had at `_init`) and is `MPI_Start`'s return code. The buffers stay valid (and,
//! while active, untouched) until the request is freed. The `info` argument is accepted
//! and ignored.

use crate::consts::*;
use crate::persist::add_coll;
use crate::{alltoallw, coll, export, guard, nbc, nbc_v, neighbor, state, typed, CResult};
use phalanx::traits::Communicator;
use std::ffi::{c_int, c_void};

/// Checks `comm` and `request`; pins `types`. Returns the pins, the pinned types and
/// (`comm`, the request's private communicator).
#[allow(clippy::type_complexity)]
pub(crate) fn prepare<const N: usize>(
    comm: Handle,
    request: *mut Handle,
    types: [Handle; N],
) -> CResult<(Vec<Handle>, [Handle; N], (Handle, Handle))> {
    state::comm(comm)?;
    nbc::req_ok(request)?;
    let mut pinned = types;
    for t in &mut pinned {
        *t = crate::types::pin(*t)?;
    }
    let own = crate::env::dup_bare(comm)?;
    Ok((pinned.to_vec(), pinned, (comm, own)))
}

/// The number of entries of a per-peer array on `comm`: its size, or the remote group's
/// size on an intercommunicator.
pub(crate) fn peers(comm: Handle) -> CResult<usize> {
    if let Some(ic) = crate::inter::inter_of(comm) {
        return Ok(ic.remote_size().max(0) as usize);
    }
    Ok(state::comm(comm)?.size().max(0) as usize)
}

/// A copy of the `n` values at `p` (none for a null pointer: an argument not significant
/// at this rank).
///
/// # Safety
/// `p` is null or holds `n` values.
pub(crate) unsafe fn copy<T: Copy>(p: *const T, n: usize) -> CResult<Option<Vec<T>>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: caller.
    Ok(Some(unsafe { typed::<T>(p.cast(), n)? }.to_vec()))
}

/// The pointer to a copy made by [`copy`] (null for none).
pub(crate) fn ptr<T>(v: &Option<Vec<T>>) -> *const T {
    v.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
}

/// Pins every datatype of a copied datatype array (into `pins`).
pub(crate) fn pin_all(v: &mut Option<Vec<Handle>>, pins: &mut Vec<Handle>) -> CResult {
    for t in v.iter_mut().flatten() {
        *t = crate::types::pin(*t)?;
        pins.push(*t);
    }
    Ok(())
}

export!(MPI_Barrier_init, PMPI_Barrier_init,
        (comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Barrier_init", comm, || {
        let (pins, [], cc) = prepare(comm, request, [])?;
        let comm = cc.1;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        add_coll(Box::new(move |r| unsafe { coll::PMPI_Ibarrier(comm, r) }), cc, pins, request)
    })
});

export!(MPI_Bcast_init, PMPI_Bcast_init,
        (buffer: *mut c_void, cnt: c_int, datatype: Handle, root: c_int, comm: Handle,
         _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Bcast_init", comm, || {
        let (pins, [t], cc) = prepare(comm, request, [datatype])?;
        let comm = cc.1;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe { nbc::PMPI_Ibcast(buffer, cnt, t, root, comm, r) };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Gather_init, PMPI_Gather_init,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, _info: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Gather_init", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc::PMPI_Igather(sendbuf, sendcount, st, recvbuf, recvcount, rt, root, comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Gatherv_init, PMPI_Gatherv_init,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int,
         comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Gatherv_init", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        let n = peers(comm)?;
        // SAFETY: null or n ints each (significant at the root only).
        let (rc, rd) = unsafe { (copy(recvcounts, n)?, copy(displs, n)?) };
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc_v::PMPI_Igatherv(sendbuf, sendcount, st, recvbuf, ptr(&rc), ptr(&rd), rt, root,
                                 comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Scatter_init, PMPI_Scatter_init,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, _info: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Scatter_init", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc::PMPI_Iscatter(sendbuf, sendcount, st, recvbuf, recvcount, rt, root, comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Scatterv_init, PMPI_Scatterv_init,
        (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle,
         root: c_int, comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Scatterv_init", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        let n = peers(comm)?;
        // SAFETY: null or n ints each (significant at the root only).
        let (sc, sd) = unsafe { (copy(sendcounts, n)?, copy(displs, n)?) };
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc_v::PMPI_Iscatterv(sendbuf, ptr(&sc), ptr(&sd), st, recvbuf, recvcount, rt, root,
                                  comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Allgather_init, PMPI_Allgather_init,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle, _info: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Allgather_init", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc::PMPI_Iallgather(sendbuf, sendcount, st, recvbuf, recvcount, rt, comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Allgatherv_init, PMPI_Allgatherv_init,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle,
         _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Allgatherv_init", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        let n = peers(comm)?;
        // SAFETY: n ints each (MPI contract).
        let (rc, rd) = unsafe { (copy(recvcounts, n)?, copy(displs, n)?) };
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc_v::PMPI_Iallgatherv(sendbuf, sendcount, st, recvbuf, ptr(&rc), ptr(&rd), rt,
                                    comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Alltoall_init, PMPI_Alltoall_init,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle, _info: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Alltoall_init", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc::PMPI_Ialltoall(sendbuf, sendcount, st, recvbuf, recvcount, rt, comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Alltoallv_init, PMPI_Alltoallv_init,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtype: Handle, comm: Handle, _info: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Alltoallv_init", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        let n = peers(comm)?;
        // SAFETY: null or n ints each (MPI contract).
        let (sc, sd, rc, rd) = unsafe {
            (copy(sendcounts, n)?, copy(sdispls, n)?, copy(recvcounts, n)?, copy(rdispls, n)?)
        };
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc_v::PMPI_Ialltoallv(sendbuf, ptr(&sc), ptr(&sd), st, recvbuf, ptr(&rc), ptr(&rd),
                                   rt, comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Alltoallw_init, PMPI_Alltoallw_init,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtypes: *const Handle, comm: Handle, _info: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Alltoallw_init", comm, || {
        let (mut pins, [], cc) = prepare(comm, request, [])?;
        let comm = cc.1;
        let n = peers(comm)?;
        // SAFETY: null or n values each (MPI contract).
        let (sc, sd, mut stv, rc, rd, mut rtv) = unsafe {
            (copy(sendcounts, n)?, copy(sdispls, n)?, copy(sendtypes, n)?,
             copy(recvcounts, n)?, copy(rdispls, n)?, copy(recvtypes, n)?)
        };
        pin_all(&mut stv, &mut pins)?;
        pin_all(&mut rtv, &mut pins)?;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            alltoallw::PMPI_Ialltoallw(sendbuf, ptr(&sc), ptr(&sd), ptr(&stv), recvbuf, ptr(&rc),
                                       ptr(&rd), ptr(&rtv), comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Reduce_init, PMPI_Reduce_init,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle, op: Handle,
         root: c_int, comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Reduce_init", comm, || {
        let (pins, [t], cc) = prepare(comm, request, [datatype])?;
        let comm = cc.1;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe { nbc::PMPI_Ireduce(sendbuf, recvbuf, cnt, t, op, root, comm, r) };
        add_coll(Box::new(start), cc, pins, request)
    })
});

/// `MPI_Allreduce_init`, `MPI_Scan_init`, `MPI_Exscan_init`: one count and datatype.
macro_rules! reduce_init {
    ($name:ident, $pname:ident, $start:path) => {
        export!($name, $pname,
                (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
                 op: Handle, comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [t], cc) = prepare(comm, request, [datatype])?;
        let comm = cc.1;
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe { $start(sendbuf, recvbuf, cnt, t, op, comm, r) };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

reduce_init!(
    MPI_Allreduce_init,
    PMPI_Allreduce_init,
    nbc::PMPI_Iallreduce
);
reduce_init!(MPI_Scan_init, PMPI_Scan_init, nbc::PMPI_Iscan);
reduce_init!(MPI_Exscan_init, PMPI_Exscan_init, nbc::PMPI_Iexscan);
reduce_init!(
    MPI_Reduce_scatter_block_init,
    PMPI_Reduce_scatter_block_init,
    nbc_v::PMPI_Ireduce_scatter_block
);

export!(MPI_Reduce_scatter_init, PMPI_Reduce_scatter_init,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
         datatype: Handle, op: Handle, comm: Handle, _info: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Reduce_scatter_init", comm, || {
        let (pins, [t], cc) = prepare(comm, request, [datatype])?;
        let comm = cc.1;
        let n = state::comm(comm)?.size().max(0) as usize;
        // SAFETY: n ints (MPI contract).
        let rc = unsafe { copy(recvcounts, n)? };
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc_v::PMPI_Ireduce_scatter(sendbuf, recvbuf, ptr(&rc), t, op, comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

/// `MPI_Neighbor_allgather_init`, `MPI_Neighbor_alltoall_init`: one block per neighbour.
macro_rules! neighbor_init {
    ($name:ident, $pname:ident, $start:path) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle,
                 recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle,
                 _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
                neighbor::degrees(comm)?;
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    $start(sendbuf, sendcount, st, recvbuf, recvcount, rt, comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

neighbor_init!(
    MPI_Neighbor_allgather_init,
    PMPI_Neighbor_allgather_init,
    neighbor::PMPI_Ineighbor_allgather
);
neighbor_init!(
    MPI_Neighbor_alltoall_init,
    PMPI_Neighbor_alltoall_init,
    neighbor::PMPI_Ineighbor_alltoall
);

export!(MPI_Neighbor_allgatherv_init, PMPI_Neighbor_allgatherv_init,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle,
         _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Neighbor_allgatherv_init", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        let (indeg, _) = neighbor::degrees(comm)?;
        // SAFETY: indegree ints each (MPI contract).
        let (rc, rd) = unsafe { (copy(recvcounts, indeg)?, copy(displs, indeg)?) };
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            neighbor::PMPI_Ineighbor_allgatherv(sendbuf, sendcount, st, recvbuf, ptr(&rc),
                                                ptr(&rd), rt, comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Neighbor_alltoallv_init, PMPI_Neighbor_alltoallv_init,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtype: Handle, comm: Handle, _info: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Neighbor_alltoallv_init", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        let (indeg, outdeg) = neighbor::degrees(comm)?;
        // SAFETY: outdegree (indegree) ints in the send (receive) arrays.
        let (sc, sd, rc, rd) = unsafe {
            (copy(sendcounts, outdeg)?, copy(sdispls, outdeg)?,
             copy(recvcounts, indeg)?, copy(rdispls, indeg)?)
        };
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            neighbor::PMPI_Ineighbor_alltoallv(sendbuf, ptr(&sc), ptr(&sd), st, recvbuf,
                                               ptr(&rc), ptr(&rd), rt, comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Neighbor_alltoallw_init, PMPI_Neighbor_alltoallw_init,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const isize,
         sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const isize, recvtypes: *const Handle, comm: Handle, _info: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Neighbor_alltoallw_init", comm, || {
        let (mut pins, [], cc) = prepare(comm, request, [])?;
        let comm = cc.1;
        let (indeg, outdeg) = neighbor::degrees(comm)?;
        // SAFETY: outdegree (indegree) values in the send (receive) arrays.
        let (sc, sd, mut stv, rc, rd, mut rtv) = unsafe {
            (copy(sendcounts, outdeg)?, copy(sdispls, outdeg)?, copy(sendtypes, outdeg)?,
             copy(recvcounts, indeg)?, copy(rdispls, indeg)?, copy(recvtypes, indeg)?)
        };
        pin_all(&mut stv, &mut pins)?;
        pin_all(&mut rtv, &mut pins)?;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            neighbor::PMPI_Ineighbor_alltoallw(sendbuf, ptr(&sc), ptr(&sd), ptr(&stv), recvbuf,
                                               ptr(&rc), ptr(&rd), ptr(&rtv), comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});
