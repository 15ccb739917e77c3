//! The large-count (`_c`) forms of the nonblocking collectives (`MPI_Ibcast_c`,
//! `Igather(v)_c`, `Iscatter(v)_c`, `Iallgather(v)_c`, `Ialltoall(v,w)_c`, `Ireduce_c`,
//! `Iallreduce_c`, `Ireduce_scatter(_block)_c`, `Iscan_c`, `Iexscan_c`) and of the
//! neighbour collectives (`MPI_Neighbor_allgather(v)_c`, `Neighbor_alltoall(v,w)_c` and
//! their `MPI_Ineighbor_*_c` forms).
//!
//! Contract: each calls the one implementation its `int` form calls ([`crate::nbc`],
//! [`crate::nbc_v`], [`crate::alltoallw`], [`crate::neighbor`]) with `MPI_Count` counts
//! and `MPI_Aint` displacements ([`crate::wide`]), so a `_c` call on one member matches
//! the `int` call on another. These paths have no `int` limit: the core's immediate
//! collectives take byte slices of any length, and the varying-count ones move
//! point-to-point blocks.

use crate::consts::*;
use crate::nbc::{iall, ibcast_impl, igather_impl, ired, iscatter_impl, register, req_ok, Red};
use crate::nbc_v::{
    iallgatherv_impl, ialltoallv_impl, igatherv_impl, ireduce_scatter_block_impl,
    ireduce_scatter_impl, iscatterv_impl,
};
use crate::neighbor::req_arg;
use crate::{export, guard, Count};
use std::ffi::{c_int, c_void};

/// `MPI_Aint`.
type Aint = isize;

export!(MPI_Ibcast_c, PMPI_Ibcast_c,
        (buffer: *mut c_void, cnt: Count, datatype: Handle, root: c_int, comm: Handle,
         request: *mut Handle) -> c_int {
    ibcast_impl("MPI_Ibcast_c", buffer, cnt, datatype, root, comm, request)
});

export!(MPI_Igather_c, PMPI_Igather_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: Count, recvtype: Handle, root: c_int, comm: Handle,
         request: *mut Handle) -> c_int {
    igather_impl("MPI_Igather_c", (sendbuf, sendcount, sendtype),
                 (recvbuf, recvcount, recvtype), root, comm, request)
});

export!(MPI_Igatherv_c, PMPI_Igatherv_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const Count, displs: *const Aint, recvtype: Handle, root: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    igatherv_impl("MPI_Igatherv_c", (sendbuf, sendcount, sendtype),
                  (recvbuf, recvcounts, displs, recvtype), root, comm, request)
});

export!(MPI_Iscatter_c, PMPI_Iscatter_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: Count, recvtype: Handle, root: c_int, comm: Handle,
         request: *mut Handle) -> c_int {
    iscatter_impl("MPI_Iscatter_c", (sendbuf, sendcount, sendtype),
                  (recvbuf, recvcount, recvtype), root, comm, request)
});

export!(MPI_Iscatterv_c, PMPI_Iscatterv_c,
        (sendbuf: *const c_void, sendcounts: *const Count, displs: *const Aint,
         sendtype: Handle, recvbuf: *mut c_void, recvcount: Count, recvtype: Handle,
         root: c_int, comm: Handle, request: *mut Handle) -> c_int {
    iscatterv_impl("MPI_Iscatterv_c", (sendbuf, sendcounts, displs, sendtype),
                   (recvbuf, recvcount, recvtype), root, comm, request)
});

export!(MPI_Iallgather_c, PMPI_Iallgather_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: Count, recvtype: Handle, comm: Handle, request: *mut Handle) -> c_int {
    iall("MPI_Iallgather_c", (sendbuf, sendcount, sendtype), (recvbuf, recvcount, recvtype),
         comm, request, false)
});

export!(MPI_Iallgatherv_c, PMPI_Iallgatherv_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const Count, displs: *const Aint, recvtype: Handle, comm: Handle,
         request: *mut Handle) -> c_int {
    iallgatherv_impl("MPI_Iallgatherv_c", (sendbuf, sendcount, sendtype),
                     (recvbuf, recvcounts, displs, recvtype), comm, request)
});

export!(MPI_Ialltoall_c, PMPI_Ialltoall_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: Count, recvtype: Handle, comm: Handle, request: *mut Handle) -> c_int {
    iall("MPI_Ialltoall_c", (sendbuf, sendcount, sendtype), (recvbuf, recvcount, recvtype),
         comm, request, true)
});

export!(MPI_Ialltoallv_c, PMPI_Ialltoallv_c,
        (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint,
         sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const Count,
         rdispls: *const Aint, recvtype: Handle, comm: Handle,
         request: *mut Handle) -> c_int {
    ialltoallv_impl("MPI_Ialltoallv_c", (sendbuf, sendcounts, sdispls, sendtype),
                    (recvbuf, recvcounts, rdispls, recvtype), comm, request)
});

export!(MPI_Ialltoallw_c, PMPI_Ialltoallw_c,
        (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint,
         sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const Count,
         rdispls: *const Aint, recvtypes: *const Handle, comm: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Ialltoallw_c", comm, || {
        req_ok(request)?;
        // SAFETY: the caller's arguments (nonblocking contract).
        let (req, sg) = unsafe {
            crate::alltoallw::start(sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                                    recvcounts, rdispls, recvtypes, comm)?
        };
        register(comm, req, sg, request)
    })
});

export!(MPI_Ireduce_c, PMPI_Ireduce_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: Count, datatype: Handle,
         op: Handle, root: c_int, comm: Handle, request: *mut Handle) -> c_int {
    ired("MPI_Ireduce_c", Red::Reduce(root), (sendbuf, recvbuf, cnt, datatype, op), comm,
         request)
});

export!(MPI_Iallreduce_c, PMPI_Iallreduce_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: Count, datatype: Handle,
         op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    ired("MPI_Iallreduce_c", Red::All, (sendbuf, recvbuf, cnt, datatype, op), comm, request)
});

export!(MPI_Iscan_c, PMPI_Iscan_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: Count, datatype: Handle,
         op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    ired("MPI_Iscan_c", Red::Scan, (sendbuf, recvbuf, cnt, datatype, op), comm, request)
});

export!(MPI_Iexscan_c, PMPI_Iexscan_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: Count, datatype: Handle,
         op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    ired("MPI_Iexscan_c", Red::Exscan, (sendbuf, recvbuf, cnt, datatype, op), comm, request)
});

export!(MPI_Ireduce_scatter_block_c, PMPI_Ireduce_scatter_block_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: Handle,
         op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    ireduce_scatter_block_impl("MPI_Ireduce_scatter_block_c", (sendbuf, recvbuf), recvcount,
                               datatype, op, comm, request)
});

export!(MPI_Ireduce_scatter_c, PMPI_Ireduce_scatter_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count,
         datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    ireduce_scatter_impl("MPI_Ireduce_scatter_c", (sendbuf, recvbuf), recvcounts, datatype,
                         op, comm, request)
});

/// Exports a blocking neighbour `_c` collective (`request` null) and its nonblocking form
/// over [`crate::neighbor`]'s `$f` with arguments `($send)`, `($recv)`.
macro_rules! neighbor_c {
    ($name:ident, $pname:ident, $iname:ident, $ipname:ident, $f:path,
     ($($s:ident : $st:ty),*), ($($r:ident : $rt:ty),*)) => {
        export!($name, $pname,
                ($($s: $st,)* $($r: $rt,)* comm: Handle) -> c_int {
            guard(stringify!($name), comm, || {
                // SAFETY: the caller's buffers and arrays, valid for the whole call.
                unsafe { $f(($($s),*), ($($r),*), comm, std::ptr::null_mut()) }
            })
        });

        export!($iname, $ipname,
                ($($s: $st,)* $($r: $rt,)* comm: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($iname), comm, || {
                // SAFETY: the caller's buffers and arrays, valid until completion.
                unsafe { $f(($($s),*), ($($r),*), comm, req_arg(request)?) }
            })
        });
    };
}

neighbor_c!(
    MPI_Neighbor_allgather_c, PMPI_Neighbor_allgather_c,
    MPI_Ineighbor_allgather_c, PMPI_Ineighbor_allgather_c,
    crate::neighbor::allgather,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Handle),
    (recvbuf: *mut c_void, recvcount: Count, recvtype: Handle)
);

neighbor_c!(
    MPI_Neighbor_allgatherv_c, PMPI_Neighbor_allgatherv_c,
    MPI_Ineighbor_allgatherv_c, PMPI_Ineighbor_allgatherv_c,
    crate::neighbor::allgatherv,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Handle),
    (recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint, recvtype: Handle)
);

neighbor_c!(
    MPI_Neighbor_alltoall_c, PMPI_Neighbor_alltoall_c,
    MPI_Ineighbor_alltoall_c, PMPI_Ineighbor_alltoall_c,
    crate::neighbor::alltoall,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Handle),
    (recvbuf: *mut c_void, recvcount: Count, recvtype: Handle)
);

neighbor_c!(
    MPI_Neighbor_alltoallv_c, PMPI_Neighbor_alltoallv_c,
    MPI_Ineighbor_alltoallv_c, PMPI_Ineighbor_alltoallv_c,
    crate::neighbor::alltoallv,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtype: Handle),
    (recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtype: Handle)
);

neighbor_c!(
    MPI_Neighbor_alltoallw_c, PMPI_Neighbor_alltoallw_c,
    MPI_Ineighbor_alltoallw_c, PMPI_Ineighbor_alltoallw_c,
    crate::neighbor::alltoallw,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint,
     sendtypes: *const Handle),
    (recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint,
     recvtypes: *const Handle)
);
