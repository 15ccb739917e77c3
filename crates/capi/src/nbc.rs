//! Nonblocking collectives beyond `MPI_Ibarrier`: `MPI_Ibcast`, `MPI_Ireduce`,
//! `MPI_Iallreduce`, `MPI_Igather`, `MPI_Iscatter`, `MPI_Iallgather`, `MPI_Ialltoall`,
//! and `MPI_Comm_idup`.
//!
//! Contract (limit): each runs the blocking collective when called and returns a request
//! that is already complete. That is correct for every program in which all members
//! start the collective without first waiting on something another member does only
//! after its own start of the same collective (the usual overlap pattern); a program
//! that relies on true asynchrony (e.g. starting the collective, then exchanging
//! point-to-point messages the other members send only before they start it) blocks.
//! Errors are reported by the start call.

use crate::consts::*;
use crate::state::{self, ReqEntry};
use crate::{err, export, guard, out, CResult};
use std::ffi::{c_int, c_void};

fn req_ok(request: *mut Handle) -> CResult {
    if request.is_null() {
        return Err(err(MPI_ERR_ARG, "null request pointer"));
    }
    Ok(())
}

fn done(comm: Handle, rc: c_int, request: *mut Handle) -> CResult {
    if rc != MPI_SUCCESS {
        return Err(err(rc, "the collective failed"));
    }
    state::comm(comm)?;
    let h = state::add_req(ReqEntry::Done(MPI_Status::empty(MPI_ANY_SOURCE)));
    // SAFETY: non-null, writable (MPI contract).
    unsafe { out(request, h) }
}

export!(MPI_Ibcast, PMPI_Ibcast,
        (buffer: *mut c_void, cnt: c_int, datatype: Handle, root: c_int, comm: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Ibcast", comm, || {
        req_ok(request)?;
        // SAFETY: the caller's buffers (MPI contract).
        let rc = unsafe { crate::coll::PMPI_Bcast(buffer, cnt, datatype, root, comm) };
        done(comm, rc, request)
    })
});

export!(MPI_Ireduce, PMPI_Ireduce,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, root: c_int, comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Ireduce", comm, || {
        req_ok(request)?;
        // SAFETY: the caller's buffers (MPI contract).
        let rc = unsafe { crate::coll::PMPI_Reduce(sendbuf, recvbuf, cnt, datatype, op, root, comm) };
        done(comm, rc, request)
    })
});

export!(MPI_Iallreduce, PMPI_Iallreduce,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Iallreduce", comm, || {
        req_ok(request)?;
        // SAFETY: the caller's buffers (MPI contract).
        let rc = unsafe { crate::coll::PMPI_Allreduce(sendbuf, recvbuf, cnt, datatype, op, comm) };
        done(comm, rc, request)
    })
});

export!(MPI_Igather, PMPI_Igather,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Igather", comm, || {
        req_ok(request)?;
        // SAFETY: the caller's buffers (MPI contract).
        let rc = unsafe {
            crate::coll::PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)
        };
        done(comm, rc, request)
    })
});

export!(MPI_Iscatter, PMPI_Iscatter,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Iscatter", comm, || {
        req_ok(request)?;
        // SAFETY: the caller's buffers (MPI contract).
        let rc = unsafe {
            crate::coll::PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)
        };
        done(comm, rc, request)
    })
});

export!(MPI_Iallgather, PMPI_Iallgather,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Iallgather", comm, || {
        req_ok(request)?;
        // SAFETY: the caller's buffers (MPI contract).
        let rc = unsafe {
            crate::coll::PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
        };
        done(comm, rc, request)
    })
});

export!(MPI_Ialltoall, PMPI_Ialltoall,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Ialltoall", comm, || {
        req_ok(request)?;
        // SAFETY: the caller's buffers (MPI contract).
        let rc = unsafe {
            crate::coll::PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
        };
        done(comm, rc, request)
    })
});

export!(MPI_Comm_idup, PMPI_Comm_idup,
        (comm: Handle, newcomm: *mut Handle, request: *mut Handle) -> c_int {
    guard("MPI_Comm_idup", comm, || {
        // SAFETY: the caller's output handle (MPI contract).
        let rc = unsafe { crate::env::PMPI_Comm_dup(comm, newcomm) };
        done(comm, rc, request)
    })
});
