//! Persistent collectives (MPI-4), with their large-count (`_c`) forms:
//! `MPI_Barrier_init`, `MPI_Bcast_init`, `MPI_Gather(v)_init`, `MPI_Scatter(v)_init`,
//! `MPI_Allgather(v)_init`, `MPI_Alltoall(v,w)_init`, `MPI_Reduce_init`,
//! `MPI_Allreduce_init`, `MPI_Reduce_scatter(_block)_init`, `MPI_Scan_init`,
//! `MPI_Exscan_init` and the neighbour ones `MPI_Neighbor_allgather(v)_init`,
//! `MPI_Neighbor_alltoall(v,w)_init`.
//!
//! Contract: an `_init` call checks the communicator and the request pointer, makes the
//! request's own private duplicate of the communicator (without messages: every member
//! makes its `_init` calls in the same order, as MPI requires, so all derive the same
//! one), takes a private duplicate of every derived datatype it names
//! ([`crate::types::pin`]) and a copy of its count, displacement and datatype arrays, and
//! returns an inactive persistent request ([`crate::persist::Persist`]) holding them.
//! Each `MPI_Start` starts the collective's nonblocking form on the private communicator
//! with those arguments (the one implementation of the `int` and `_c` forms, called with
//! 64-bit counts, [`crate::large_nbc`]), so the request can be started any number of
//! times, and different persistent collectives may be started in different orders on
//! different members (MPI-4 matches them at `_init`); it completes in
//! `MPI_Wait*`/`MPI_Test*` like the persistent point-to-point requests. An error found at
//! the start goes to the communicator's error handler (the one it had at `_init`) and is
//! `MPI_Start`'s return code. The buffers stay valid (and, while active, untouched) until
//! the request is freed. The `info` argument is accepted and ignored. Every collective
//! is written once, as a macro instantiated for the `int` and the `_c` argument types.

use crate::consts::*;
use crate::large_nbc as nbc;
use crate::persist::add_coll;
use crate::wide::Wide;
use crate::{coll, export, guard, neighbor, state, typed, CResult, Count};
use phalanx::traits::Communicator;
use std::ffi::{c_int, c_void};

/// `MPI_Aint`.
type Aint = isize;

/// Checks `comm` and `request`; pins `types`. Returns the pins, the pinned types and
/// (`comm`, the request's private communicator).
#[allow(clippy::type_complexity)]
pub(crate) fn prepare<const N: usize>(
    comm: Handle,
    request: *mut Handle,
    types: [Handle; N],
) -> CResult<(Vec<Handle>, [Handle; N], (Handle, Handle))> {
    state::comm(comm)?;
    crate::nbc::req_ok(request)?;
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
unsafe fn copy<T: Copy>(p: *const T, n: usize) -> CResult<Option<Vec<T>>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: caller.
    Ok(Some(unsafe { typed::<T>(p.cast(), n) }?.to_vec()))
}

/// A copy of `n` counts of either width at `p`, widened (none for null).
///
/// # Safety
/// As [`copy`].
unsafe fn counts<T: Wide>(p: *const T, n: usize) -> CResult<Option<Vec<Count>>> {
    // SAFETY: caller.
    Ok(unsafe { copy(p, n)? }.map(|v| v.into_iter().map(Wide::wide).collect()))
}

/// A copy of `n` displacements of either width at `p`, widened (none for null).
///
/// # Safety
/// As [`copy`].
unsafe fn displs<T: Wide>(p: *const T, n: usize) -> CResult<Option<Vec<Aint>>> {
    // SAFETY: caller.
    Ok(unsafe { copy(p, n)? }.map(|v| v.into_iter().map(|d| d.wide() as Aint).collect()))
}

/// The pointer to a copy made by [`copy`] (null for none).
fn ptr<T>(v: &Option<Vec<T>>) -> *const T {
    v.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
}

/// Pins every datatype of a copied datatype array (into `pins`).
fn pin_all(v: &mut Option<Vec<Handle>>, pins: &mut Vec<Handle>) -> CResult {
    for t in v.iter_mut().flatten() {
        *t = crate::types::pin(*t)?;
        pins.push(*t);
    }
    Ok(())
}

/// (receive, send) array lengths of `comm`: its degrees for a neighbour collective, else
/// the peers both ways.
fn lengths(comm: Handle, neighbors: bool) -> CResult<(usize, usize)> {
    if neighbors {
        return neighbor::degrees(comm);
    }
    let n = peers(comm)?;
    Ok((n, n))
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

/// `MPI_Bcast_init(_c)`.
macro_rules! bcast_init {
    ($name:ident, $pname:ident, $c:ty) => {
        export!($name, $pname,
                (buffer: *mut c_void, cnt: $c, datatype: Handle, root: c_int, comm: Handle,
                 _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [t], cc) = prepare(comm, request, [datatype])?;
                let (comm, n) = (cc.1, Count::from(cnt));
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe { nbc::PMPI_Ibcast_c(buffer, n, t, root, comm, r) };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

bcast_init!(MPI_Bcast_init, PMPI_Bcast_init, c_int);
bcast_init!(MPI_Bcast_init_c, PMPI_Bcast_init_c, Count);

/// `MPI_Gather_init(_c)`, `MPI_Scatter_init(_c)`: one block per member, a root.
macro_rules! rooted_init {
    ($name:ident, $pname:ident, $c:ty, $start:path) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcount: $c, sendtype: Handle,
                 recvbuf: *mut c_void, recvcount: $c, recvtype: Handle, root: c_int,
                 comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
                let (comm, sc, rc) = (cc.1, Count::from(sendcount), Count::from(recvcount));
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    $start(sendbuf, sc, st, recvbuf, rc, rt, root, comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

rooted_init!(
    MPI_Gather_init,
    PMPI_Gather_init,
    c_int,
    nbc::PMPI_Igather_c
);
rooted_init!(
    MPI_Gather_init_c,
    PMPI_Gather_init_c,
    Count,
    nbc::PMPI_Igather_c
);
rooted_init!(
    MPI_Scatter_init,
    PMPI_Scatter_init,
    c_int,
    nbc::PMPI_Iscatter_c
);
rooted_init!(
    MPI_Scatter_init_c,
    PMPI_Scatter_init_c,
    Count,
    nbc::PMPI_Iscatter_c
);

/// `MPI_Gatherv_init(_c)`.
macro_rules! gatherv_init {
    ($name:ident, $pname:ident, $c:ty, $d:ty) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcount: $c, sendtype: Handle, recvbuf: *mut c_void,
                 recvcounts: *const $c, displs_: *const $d, recvtype: Handle, root: c_int,
                 comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
                let (comm, sc) = (cc.1, Count::from(sendcount));
                let n = peers(comm)?;
                // SAFETY: null or n values each (significant at the root only).
                let (rc, rd) = unsafe { (counts(recvcounts, n)?, displs(displs_, n)?) };
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    nbc::PMPI_Igatherv_c(sendbuf, sc, st, recvbuf, ptr(&rc), ptr(&rd), rt, root,
                                         comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

gatherv_init!(MPI_Gatherv_init, PMPI_Gatherv_init, c_int, c_int);
gatherv_init!(MPI_Gatherv_init_c, PMPI_Gatherv_init_c, Count, Aint);

/// `MPI_Scatterv_init(_c)`.
macro_rules! scatterv_init {
    ($name:ident, $pname:ident, $c:ty, $d:ty) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcounts: *const $c, displs_: *const $d,
                 sendtype: Handle, recvbuf: *mut c_void, recvcount: $c, recvtype: Handle,
                 root: c_int, comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
                let (comm, rc) = (cc.1, Count::from(recvcount));
                let n = peers(comm)?;
                // SAFETY: null or n values each (significant at the root only).
                let (sc, sd) = unsafe { (counts(sendcounts, n)?, displs(displs_, n)?) };
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    nbc::PMPI_Iscatterv_c(sendbuf, ptr(&sc), ptr(&sd), st, recvbuf, rc, rt, root,
                                          comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

scatterv_init!(MPI_Scatterv_init, PMPI_Scatterv_init, c_int, c_int);
scatterv_init!(MPI_Scatterv_init_c, PMPI_Scatterv_init_c, Count, Aint);

/// `MPI_Allgather_init`, `MPI_Alltoall_init` and the neighbour ones (and `_c`): one count
/// each way.
macro_rules! all_init {
    ($name:ident, $pname:ident, $c:ty, $start:path, $neighbors:expr) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcount: $c, sendtype: Handle,
                 recvbuf: *mut c_void, recvcount: $c, recvtype: Handle, comm: Handle,
                 _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
                let (comm, sc, rc) = (cc.1, Count::from(sendcount), Count::from(recvcount));
                if $neighbors {
                    neighbor::degrees(comm)?;
                }
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe { $start(sendbuf, sc, st, recvbuf, rc, rt, comm, r) };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

all_init!(
    MPI_Allgather_init,
    PMPI_Allgather_init,
    c_int,
    nbc::PMPI_Iallgather_c,
    false
);
all_init!(
    MPI_Allgather_init_c,
    PMPI_Allgather_init_c,
    Count,
    nbc::PMPI_Iallgather_c,
    false
);
all_init!(
    MPI_Alltoall_init,
    PMPI_Alltoall_init,
    c_int,
    nbc::PMPI_Ialltoall_c,
    false
);
all_init!(
    MPI_Alltoall_init_c,
    PMPI_Alltoall_init_c,
    Count,
    nbc::PMPI_Ialltoall_c,
    false
);
all_init!(
    MPI_Neighbor_allgather_init,
    PMPI_Neighbor_allgather_init,
    c_int,
    nbc::PMPI_Ineighbor_allgather_c,
    true
);
all_init!(
    MPI_Neighbor_allgather_init_c,
    PMPI_Neighbor_allgather_init_c,
    Count,
    nbc::PMPI_Ineighbor_allgather_c,
    true
);
all_init!(
    MPI_Neighbor_alltoall_init,
    PMPI_Neighbor_alltoall_init,
    c_int,
    nbc::PMPI_Ineighbor_alltoall_c,
    true
);
all_init!(
    MPI_Neighbor_alltoall_init_c,
    PMPI_Neighbor_alltoall_init_c,
    Count,
    nbc::PMPI_Ineighbor_alltoall_c,
    true
);

/// `MPI_Allgatherv_init` and `MPI_Neighbor_allgatherv_init` (and `_c`).
macro_rules! allgatherv_init {
    ($name:ident, $pname:ident, $c:ty, $d:ty, $start:path, $neighbors:expr) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcount: $c, sendtype: Handle, recvbuf: *mut c_void,
                 recvcounts: *const $c, displs_: *const $d, recvtype: Handle, comm: Handle,
                 _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
                let (comm, sc) = (cc.1, Count::from(sendcount));
                let (n, _) = lengths(comm, $neighbors)?;
                // SAFETY: n values each (MPI contract).
                let (rc, rd) = unsafe { (counts(recvcounts, n)?, displs(displs_, n)?) };
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    $start(sendbuf, sc, st, recvbuf, ptr(&rc), ptr(&rd), rt, comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

allgatherv_init!(
    MPI_Allgatherv_init,
    PMPI_Allgatherv_init,
    c_int,
    c_int,
    nbc::PMPI_Iallgatherv_c,
    false
);
allgatherv_init!(
    MPI_Allgatherv_init_c,
    PMPI_Allgatherv_init_c,
    Count,
    Aint,
    nbc::PMPI_Iallgatherv_c,
    false
);
allgatherv_init!(
    MPI_Neighbor_allgatherv_init,
    PMPI_Neighbor_allgatherv_init,
    c_int,
    c_int,
    nbc::PMPI_Ineighbor_allgatherv_c,
    true
);
allgatherv_init!(
    MPI_Neighbor_allgatherv_init_c,
    PMPI_Neighbor_allgatherv_init_c,
    Count,
    Aint,
    nbc::PMPI_Ineighbor_allgatherv_c,
    true
);

/// `MPI_Alltoallv_init` and `MPI_Neighbor_alltoallv_init` (and `_c`).
macro_rules! alltoallv_init {
    ($name:ident, $pname:ident, $c:ty, $d:ty, $start:path, $neighbors:expr) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcounts: *const $c, sdispls: *const $d,
                 sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const $c,
                 rdispls: *const $d, recvtype: Handle, comm: Handle, _info: Handle,
                 request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
                let comm = cc.1;
                let (ni, no) = lengths(comm, $neighbors)?;
                // SAFETY: null or no (ni) values in the send (receive) arrays.
                let (sc, sd, rc, rd) = unsafe {
                    (counts(sendcounts, no)?, displs(sdispls, no)?,
                     counts(recvcounts, ni)?, displs(rdispls, ni)?)
                };
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    $start(sendbuf, ptr(&sc), ptr(&sd), st, recvbuf, ptr(&rc), ptr(&rd), rt,
                           comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

alltoallv_init!(
    MPI_Alltoallv_init,
    PMPI_Alltoallv_init,
    c_int,
    c_int,
    nbc::PMPI_Ialltoallv_c,
    false
);
alltoallv_init!(
    MPI_Alltoallv_init_c,
    PMPI_Alltoallv_init_c,
    Count,
    Aint,
    nbc::PMPI_Ialltoallv_c,
    false
);
alltoallv_init!(
    MPI_Neighbor_alltoallv_init,
    PMPI_Neighbor_alltoallv_init,
    c_int,
    c_int,
    nbc::PMPI_Ineighbor_alltoallv_c,
    true
);
alltoallv_init!(
    MPI_Neighbor_alltoallv_init_c,
    PMPI_Neighbor_alltoallv_init_c,
    Count,
    Aint,
    nbc::PMPI_Ineighbor_alltoallv_c,
    true
);

/// `MPI_Alltoallw_init` and `MPI_Neighbor_alltoallw_init` (and `_c`): a datatype per
/// block, byte displacements.
macro_rules! alltoallw_init {
    ($name:ident, $pname:ident, $c:ty, $d:ty, $start:path, $neighbors:expr) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcounts: *const $c, sdispls: *const $d,
                 sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const $c,
                 rdispls: *const $d, recvtypes: *const Handle, comm: Handle, _info: Handle,
                 request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (mut pins, [], cc) = prepare(comm, request, [])?;
                let comm = cc.1;
                let (ni, no) = lengths(comm, $neighbors)?;
                // SAFETY: null or no (ni) values in the send (receive) arrays.
                let (sc, sd, mut stv, rc, rd, mut rtv) = unsafe {
                    (counts(sendcounts, no)?, displs(sdispls, no)?, copy(sendtypes, no)?,
                     counts(recvcounts, ni)?, displs(rdispls, ni)?, copy(recvtypes, ni)?)
                };
                pin_all(&mut stv, &mut pins)?;
                pin_all(&mut rtv, &mut pins)?;
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    $start(sendbuf, ptr(&sc), ptr(&sd), ptr(&stv), recvbuf, ptr(&rc), ptr(&rd),
                           ptr(&rtv), comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

alltoallw_init!(
    MPI_Alltoallw_init,
    PMPI_Alltoallw_init,
    c_int,
    c_int,
    nbc::PMPI_Ialltoallw_c,
    false
);
alltoallw_init!(
    MPI_Alltoallw_init_c,
    PMPI_Alltoallw_init_c,
    Count,
    Aint,
    nbc::PMPI_Ialltoallw_c,
    false
);
alltoallw_init!(
    MPI_Neighbor_alltoallw_init,
    PMPI_Neighbor_alltoallw_init,
    c_int,
    Aint,
    nbc::PMPI_Ineighbor_alltoallw_c,
    true
);
alltoallw_init!(
    MPI_Neighbor_alltoallw_init_c,
    PMPI_Neighbor_alltoallw_init_c,
    Count,
    Aint,
    nbc::PMPI_Ineighbor_alltoallw_c,
    true
);

/// `MPI_Reduce_init(_c)`.
macro_rules! reduce_root_init {
    ($name:ident, $pname:ident, $c:ty) => {
        export!($name, $pname,
                (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: $c, datatype: Handle,
                 op: Handle, root: c_int, comm: Handle, _info: Handle,
                 request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [t], cc) = prepare(comm, request, [datatype])?;
                let (comm, n) = (cc.1, Count::from(cnt));
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    nbc::PMPI_Ireduce_c(sendbuf, recvbuf, n, t, op, root, comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

reduce_root_init!(MPI_Reduce_init, PMPI_Reduce_init, c_int);
reduce_root_init!(MPI_Reduce_init_c, PMPI_Reduce_init_c, Count);

/// `MPI_Allreduce_init`, `MPI_Scan_init`, `MPI_Exscan_init`,
/// `MPI_Reduce_scatter_block_init` (and `_c`): one count and datatype.
macro_rules! reduce_init {
    ($name:ident, $pname:ident, $c:ty, $start:path) => {
        export!($name, $pname,
                (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: $c, datatype: Handle,
                 op: Handle, comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [t], cc) = prepare(comm, request, [datatype])?;
                let (comm, n) = (cc.1, Count::from(cnt));
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe { $start(sendbuf, recvbuf, n, t, op, comm, r) };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

reduce_init!(
    MPI_Allreduce_init,
    PMPI_Allreduce_init,
    c_int,
    nbc::PMPI_Iallreduce_c
);
reduce_init!(
    MPI_Allreduce_init_c,
    PMPI_Allreduce_init_c,
    Count,
    nbc::PMPI_Iallreduce_c
);
reduce_init!(MPI_Scan_init, PMPI_Scan_init, c_int, nbc::PMPI_Iscan_c);
reduce_init!(MPI_Scan_init_c, PMPI_Scan_init_c, Count, nbc::PMPI_Iscan_c);
reduce_init!(
    MPI_Exscan_init,
    PMPI_Exscan_init,
    c_int,
    nbc::PMPI_Iexscan_c
);
reduce_init!(
    MPI_Exscan_init_c,
    PMPI_Exscan_init_c,
    Count,
    nbc::PMPI_Iexscan_c
);
reduce_init!(
    MPI_Reduce_scatter_block_init,
    PMPI_Reduce_scatter_block_init,
    c_int,
    nbc::PMPI_Ireduce_scatter_block_c
);
reduce_init!(
    MPI_Reduce_scatter_block_init_c,
    PMPI_Reduce_scatter_block_init_c,
    Count,
    nbc::PMPI_Ireduce_scatter_block_c
);

/// `MPI_Reduce_scatter_init(_c)`.
macro_rules! reduce_scatter_init {
    ($name:ident, $pname:ident, $c:ty) => {
        export!($name, $pname,
                (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const $c,
                 datatype: Handle, op: Handle, comm: Handle, _info: Handle,
                 request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [t], cc) = prepare(comm, request, [datatype])?;
                let comm = cc.1;
                let n = state::comm(comm)?.size().max(0) as usize;
                // SAFETY: n values (MPI contract).
                let rc = unsafe { counts(recvcounts, n)? };
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    nbc::PMPI_Ireduce_scatter_c(sendbuf, recvbuf, ptr(&rc), t, op, comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

reduce_scatter_init!(MPI_Reduce_scatter_init, PMPI_Reduce_scatter_init, c_int);
reduce_scatter_init!(MPI_Reduce_scatter_init_c, PMPI_Reduce_scatter_init_c, Count);
