//! The large-count (`_c`) forms of the remaining blocking collectives:
//! `MPI_Gatherv_c`, `Scatterv_c`, `Allgatherv_c`, `Alltoallv_c`, `Alltoallw_c`,
//! `Reduce_scatter_c`, `Reduce_scatter_block_c`, `Scan_c`, `Exscan_c` (`Reduce_local_c`
//! is in [`crate::localop`], `Op_create_c` in [`crate::ops`]).
//!
//! Contract: each calls the one implementation its `int` form calls
//! ([`crate::coll_more`], [`crate::alltoallw`]) with `MPI_Count` counts and `MPI_Aint`
//! displacements ([`crate::wide`]), so the two forms match each other across ranks.
//! Limits: the core's varying-count partitions take `i32` element counts and
//! displacements ([`crate::vlayout`]), derived datatypes move packed through the `int`
//! collectives ([`crate::coll_dt`]), and the intercommunicator `Gatherv`/`Scatterv`
//! take `int` arrays: a value past `INT_MAX` there is `MPI_ERR_COUNT`. `Alltoallw_c`
//! moves point-to-point blocks and has no such limit.

use crate::coll_more::{
    allgatherv_impl, alltoallv_impl, gatherv_impl, reduce_scatter_block_impl, reduce_scatter_impl,
    scan_impl, scatterv_impl,
};
use crate::consts::*;
use crate::{export, guard, Count};
use std::ffi::{c_int, c_void};

/// `MPI_Aint`.
type Aint = isize;

export!(MPI_Gatherv_c, PMPI_Gatherv_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const Count, displs: *const Aint, recvtype: Handle, root: c_int,
         comm: Handle) -> c_int {
    gatherv_impl("MPI_Gatherv_c", (sendbuf, sendcount, sendtype),
                 (recvbuf, recvcounts, displs, recvtype), root, comm)
});

export!(MPI_Scatterv_c, PMPI_Scatterv_c,
        (sendbuf: *const c_void, sendcounts: *const Count, displs: *const Aint,
         sendtype: Handle, recvbuf: *mut c_void, recvcount: Count, recvtype: Handle,
         root: c_int, comm: Handle) -> c_int {
    scatterv_impl("MPI_Scatterv_c", (sendbuf, sendcounts, displs, sendtype),
                  (recvbuf, recvcount, recvtype), root, comm)
});

export!(MPI_Allgatherv_c, PMPI_Allgatherv_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const Count, displs: *const Aint, recvtype: Handle,
         comm: Handle) -> c_int {
    allgatherv_impl("MPI_Allgatherv_c", (sendbuf, sendcount, sendtype),
                    (recvbuf, recvcounts, displs, recvtype), comm)
});

export!(MPI_Alltoallv_c, PMPI_Alltoallv_c,
        (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint,
         sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const Count,
         rdispls: *const Aint, recvtype: Handle, comm: Handle) -> c_int {
    alltoallv_impl("MPI_Alltoallv_c", (sendbuf, sendcounts, sdispls, sendtype),
                   (recvbuf, recvcounts, rdispls, recvtype), comm)
});

export!(MPI_Alltoallw_c, PMPI_Alltoallw_c,
        (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint,
         sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const Count,
         rdispls: *const Aint, recvtypes: *const Handle, comm: Handle) -> c_int {
    guard("MPI_Alltoallw_c", comm, || {
        // SAFETY: the caller's arguments, valid for the whole (blocking) call.
        unsafe {
            crate::alltoallw::blocking(
                (sendbuf, sendcounts, sdispls, sendtypes),
                (recvbuf, recvcounts, rdispls, recvtypes),
                comm,
            )
        }
    })
});

export!(MPI_Reduce_scatter_block_c, PMPI_Reduce_scatter_block_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: Handle,
         op: Handle, comm: Handle) -> c_int {
    reduce_scatter_block_impl("MPI_Reduce_scatter_block_c", sendbuf, recvbuf, recvcount,
                              datatype, op, comm)
});

export!(MPI_Reduce_scatter_c, PMPI_Reduce_scatter_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count,
         datatype: Handle, op: Handle, comm: Handle) -> c_int {
    reduce_scatter_impl("MPI_Reduce_scatter_c", sendbuf, recvbuf, recvcounts, datatype, op,
                        comm)
});

export!(MPI_Scan_c, PMPI_Scan_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: Count, datatype: Handle,
         op: Handle, comm: Handle) -> c_int {
    scan_impl("MPI_Scan_c", sendbuf, recvbuf, cnt, datatype, op, comm, false)
});

export!(MPI_Exscan_c, PMPI_Exscan_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: Count, datatype: Handle,
         op: Handle, comm: Handle) -> c_int {
    scan_impl("MPI_Exscan_c", sendbuf, recvbuf, cnt, datatype, op, comm, true)
});
