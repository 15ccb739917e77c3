//! The large-count (`_c`) forms of the blocking collectives the core runs on contiguous
//! bytes: `MPI_Bcast_c`, `Reduce_c`, `Allreduce_c`, `Gather_c`, `Scatter_c`,
//! `Allgather_c`, `Alltoall_c`.
//!
//! Contract: each calls its `int` form's implementation in [`crate::coll`] with the
//! 64-bit [`Count`] (the `int` forms widen theirs), so the two forms take the same path
//! and match each other across ranks. Byte lengths are checked ([`crate::span`]): a
//! negative count or one past any buffer is `MPI_ERR_COUNT`. Limits: on an
//! intercommunicator, and for derived datatypes (whose packed blocks move through the
//! `int` collectives of [`crate::coll_dt`]), a count or packed size past `INT_MAX` is
//! `MPI_ERR_COUNT`.

use crate::coll::{
    allgather_impl, allreduce_impl, alltoall_impl, bcast_impl, gather_impl, reduce_impl,
    scatter_impl,
};
use crate::consts::*;
use crate::{export, Count};
use std::ffi::{c_int, c_void};

export!(MPI_Bcast_c, PMPI_Bcast_c,
        (buffer: *mut c_void, cnt: Count, datatype: Handle, root: c_int, comm: Handle) -> c_int {
    bcast_impl("MPI_Bcast_c", buffer, cnt, datatype, root, comm)
});

export!(MPI_Reduce_c, PMPI_Reduce_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: Count, datatype: Handle,
         op: Handle, root: c_int, comm: Handle) -> c_int {
    reduce_impl("MPI_Reduce_c", sendbuf, recvbuf, cnt, datatype, op, root, comm)
});

export!(MPI_Allreduce_c, PMPI_Allreduce_c,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: Count, datatype: Handle,
         op: Handle, comm: Handle) -> c_int {
    allreduce_impl("MPI_Allreduce_c", sendbuf, recvbuf, cnt, datatype, op, comm)
});

export!(MPI_Gather_c, PMPI_Gather_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: Count, recvtype: Handle, root: c_int, comm: Handle) -> c_int {
    gather_impl("MPI_Gather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)
});

export!(MPI_Scatter_c, PMPI_Scatter_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: Count, recvtype: Handle, root: c_int, comm: Handle) -> c_int {
    scatter_impl("MPI_Scatter_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)
});

export!(MPI_Allgather_c, PMPI_Allgather_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: Count, recvtype: Handle, comm: Handle) -> c_int {
    allgather_impl("MPI_Allgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
});

export!(MPI_Alltoall_c, PMPI_Alltoall_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: Count, recvtype: Handle, comm: Handle) -> c_int {
    alltoall_impl("MPI_Alltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
});
