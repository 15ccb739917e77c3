//! The large-count (`_c`) forms of the persistent collectives: `MPI_Bcast_init_c`,
//! `Gather(v)_init_c`, `Scatter(v)_init_c`, `Allgather(v)_init_c`,
//! `Alltoall(v,w)_init_c`, `Reduce_init_c`, `Allreduce_init_c`,
//! `Reduce_scatter(_block)_init_c`, `Scan_init_c`, `Exscan_init_c` and the neighbour ones
//! `MPI_Neighbor_allgather(v)_init_c`, `Neighbor_alltoall(v,w)_init_c`.
//!
//! Contract: as [`crate::persist_coll`] (whose machinery they use): the `_init_c` call
//! makes the request's private communicator, pins the datatypes, copies the `MPI_Count`
//! and `MPI_Aint` arrays, and every `MPI_Start` starts the `_c` nonblocking form
//! ([`crate::large_nbc`]) — the same implementation as the `int` one — with them.

use crate::consts::*;
use crate::large_nbc as nbc;
use crate::persist::add_coll;
use crate::persist_coll::{copy, peers, pin_all, prepare, ptr};
use crate::{export, guard, neighbor, state, Count};
use phalanx::traits::Communicator;
use std::ffi::{c_int, c_void};

/// `MPI_Aint`.
type Aint = isize;

export!(MPI_Bcast_init_c, PMPI_Bcast_init_c,
        (buffer: *mut c_void, cnt: Count, datatype: Handle, root: c_int, comm: Handle,
         _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Bcast_init_c", comm, || {
        let (pins, [t], cc) = prepare(comm, request, [datatype])?;
        let comm = cc.1;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe { nbc::PMPI_Ibcast_c(buffer, cnt, t, root, comm, r) };
        add_coll(Box::new(start), cc, pins, request)
    })
});

/// `MPI_Gather_init_c`, `MPI_Scatter_init_c`: one block per member, a root.
macro_rules! rooted_init {
    ($name:ident, $pname:ident, $start:path) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcount: Count, sendtype: Handle,
                 recvbuf: *mut c_void, recvcount: Count, recvtype: Handle, root: c_int,
                 comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
                let comm = cc.1;
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    $start(sendbuf, sendcount, st, recvbuf, recvcount, rt, root, comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

rooted_init!(MPI_Gather_init_c, PMPI_Gather_init_c, nbc::PMPI_Igather_c);
rooted_init!(
    MPI_Scatter_init_c,
    PMPI_Scatter_init_c,
    nbc::PMPI_Iscatter_c
);

/// `MPI_Allgather_init_c`, `MPI_Alltoall_init_c` and the neighbour ones: one count each.
macro_rules! all_init {
    ($name:ident, $pname:ident, $start:path, $neighbors:expr) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcount: Count, sendtype: Handle,
                 recvbuf: *mut c_void, recvcount: Count, recvtype: Handle, comm: Handle,
                 _info: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
                let comm = cc.1;
                if $neighbors {
                    neighbor::degrees(comm)?;
                }
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    $start(sendbuf, sendcount, st, recvbuf, recvcount, rt, comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

all_init!(
    MPI_Allgather_init_c,
    PMPI_Allgather_init_c,
    nbc::PMPI_Iallgather_c,
    false
);
all_init!(
    MPI_Alltoall_init_c,
    PMPI_Alltoall_init_c,
    nbc::PMPI_Ialltoall_c,
    false
);
all_init!(
    MPI_Neighbor_allgather_init_c,
    PMPI_Neighbor_allgather_init_c,
    nbc::PMPI_Ineighbor_allgather_c,
    true
);
all_init!(
    MPI_Neighbor_alltoall_init_c,
    PMPI_Neighbor_alltoall_init_c,
    nbc::PMPI_Ineighbor_alltoall_c,
    true
);

export!(MPI_Gatherv_init_c, PMPI_Gatherv_init_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const Count, displs: *const Aint, recvtype: Handle, root: c_int,
         comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Gatherv_init_c", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        let n = peers(comm)?;
        // SAFETY: null or n values each (significant at the root only).
        let (rc, rd) = unsafe { (copy(recvcounts, n)?, copy(displs, n)?) };
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc::PMPI_Igatherv_c(sendbuf, sendcount, st, recvbuf, ptr(&rc), ptr(&rd), rt, root,
                                 comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

export!(MPI_Scatterv_init_c, PMPI_Scatterv_init_c,
        (sendbuf: *const c_void, sendcounts: *const Count, displs: *const Aint,
         sendtype: Handle, recvbuf: *mut c_void, recvcount: Count, recvtype: Handle,
         root: c_int, comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Scatterv_init_c", comm, || {
        let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
        let comm = cc.1;
        let n = peers(comm)?;
        // SAFETY: null or n values each (significant at the root only).
        let (sc, sd) = unsafe { (copy(sendcounts, n)?, copy(displs, n)?) };
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc::PMPI_Iscatterv_c(sendbuf, ptr(&sc), ptr(&sd), st, recvbuf, recvcount, rt, root,
                                  comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

/// `MPI_Allgatherv_init_c` and `MPI_Neighbor_allgatherv_init_c`.
macro_rules! allgatherv_init {
    ($name:ident, $pname:ident, $start:path, $neighbors:expr) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcount: Count, sendtype: Handle,
                 recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint,
                 recvtype: Handle, comm: Handle, _info: Handle,
                 request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
                let comm = cc.1;
                let n = if $neighbors { neighbor::degrees(comm)?.0 } else { peers(comm)? };
                // SAFETY: n values each (MPI contract).
                let (rc, rd) = unsafe { (copy(recvcounts, n)?, copy(displs, n)?) };
                // SAFETY: the nonblocking form's contract, kept by the persistent one's.
                let start = move |r| unsafe {
                    $start(sendbuf, sendcount, st, recvbuf, ptr(&rc), ptr(&rd), rt, comm, r)
                };
                add_coll(Box::new(start), cc, pins, request)
            })
        });
    };
}

allgatherv_init!(
    MPI_Allgatherv_init_c,
    PMPI_Allgatherv_init_c,
    nbc::PMPI_Iallgatherv_c,
    false
);
allgatherv_init!(
    MPI_Neighbor_allgatherv_init_c,
    PMPI_Neighbor_allgatherv_init_c,
    nbc::PMPI_Ineighbor_allgatherv_c,
    true
);

/// `MPI_Alltoallv_init_c` and `MPI_Neighbor_alltoallv_init_c`.
macro_rules! alltoallv_init {
    ($name:ident, $pname:ident, $start:path, $neighbors:expr) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint,
                 sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const Count,
                 rdispls: *const Aint, recvtype: Handle, comm: Handle, _info: Handle,
                 request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (pins, [st, rt], cc) = prepare(comm, request, [sendtype, recvtype])?;
                let comm = cc.1;
                let (ni, no) = if $neighbors {
                    neighbor::degrees(comm)?
                } else {
                    let n = peers(comm)?;
                    (n, n)
                };
                // SAFETY: null or no (ni) values in the send (receive) arrays.
                let (sc, sd, rc, rd) = unsafe {
                    (copy(sendcounts, no)?, copy(sdispls, no)?,
                     copy(recvcounts, ni)?, copy(rdispls, ni)?)
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
    MPI_Alltoallv_init_c,
    PMPI_Alltoallv_init_c,
    nbc::PMPI_Ialltoallv_c,
    false
);
alltoallv_init!(
    MPI_Neighbor_alltoallv_init_c,
    PMPI_Neighbor_alltoallv_init_c,
    nbc::PMPI_Ineighbor_alltoallv_c,
    true
);

/// `MPI_Alltoallw_init_c` and `MPI_Neighbor_alltoallw_init_c`.
macro_rules! alltoallw_init {
    ($name:ident, $pname:ident, $start:path, $neighbors:expr) => {
        export!($name, $pname,
                (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint,
                 sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const Count,
                 rdispls: *const Aint, recvtypes: *const Handle, comm: Handle, _info: Handle,
                 request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                let (mut pins, [], cc) = prepare(comm, request, [])?;
                let comm = cc.1;
                let (ni, no) = if $neighbors {
                    neighbor::degrees(comm)?
                } else {
                    let n = peers(comm)?;
                    (n, n)
                };
                // SAFETY: null or no (ni) values in the send (receive) arrays.
                let (sc, sd, mut stv, rc, rd, mut rtv) = unsafe {
                    (copy(sendcounts, no)?, copy(sdispls, no)?, copy(sendtypes, no)?,
                     copy(recvcounts, ni)?, copy(rdispls, ni)?, copy(recvtypes, ni)?)
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
    MPI_Alltoallw_init_c,
    PMPI_Alltoallw_init_c,
    nbc::PMPI_Ialltoallw_c,
    false
);
alltoallw_init!(
    MPI_Neighbor_alltoallw_init_c,
    PMPI_Neighbor_alltoallw_init_c,
    nbc::PMPI_Ineighbor_alltoallw_c,
    true
);

export!(MPI_Reduce_init_c, PMPI_Reduce_init_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: Count, datatype: Handle, op: Handle,
         root: c_int, comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Reduce_init_c", comm, || {
        let (pins, [t], cc) = prepare(comm, request, [datatype])?;
        let comm = cc.1;
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc::PMPI_Ireduce_c(sendbuf, recvbuf, cnt, t, op, root, comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});

/// `MPI_Allreduce_init_c`, `MPI_Scan_init_c`, `MPI_Exscan_init_c`,
/// `MPI_Reduce_scatter_block_init_c`: one count and datatype.
macro_rules! reduce_init {
    ($name:ident, $pname:ident, $start:path) => {
        export!($name, $pname,
                (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: Count, datatype: Handle,
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
    MPI_Allreduce_init_c,
    PMPI_Allreduce_init_c,
    nbc::PMPI_Iallreduce_c
);
reduce_init!(MPI_Scan_init_c, PMPI_Scan_init_c, nbc::PMPI_Iscan_c);
reduce_init!(MPI_Exscan_init_c, PMPI_Exscan_init_c, nbc::PMPI_Iexscan_c);
reduce_init!(
    MPI_Reduce_scatter_block_init_c,
    PMPI_Reduce_scatter_block_init_c,
    nbc::PMPI_Ireduce_scatter_block_c
);

export!(MPI_Reduce_scatter_init_c, PMPI_Reduce_scatter_init_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count,
         datatype: Handle, op: Handle, comm: Handle, _info: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Reduce_scatter_init_c", comm, || {
        let (pins, [t], cc) = prepare(comm, request, [datatype])?;
        let comm = cc.1;
        let n = state::comm(comm)?.size().max(0) as usize;
        // SAFETY: n values (MPI contract).
        let rc = unsafe { copy(recvcounts, n)? };
        // SAFETY: the nonblocking form's contract, kept by the persistent one's.
        let start = move |r| unsafe {
            nbc::PMPI_Ireduce_scatter_c(sendbuf, recvbuf, ptr(&rc), t, op, comm, r)
        };
        add_coll(Box::new(start), cc, pins, request)
    })
});
