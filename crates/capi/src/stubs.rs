//! Functions the header declares that phalanx does not implement yet: each raises
//! `MPI_ERR_OTHER` ("not implemented") through the error handler of its communicator
//! (`MPI_COMM_WORLD` when it has none), so a program under `MPI_ERRORS_RETURN` gets the
//! class back instead of a crash.

use crate::consts::*;
use crate::{err, export, guard};
use std::ffi::{c_int, c_void};

/// Exports a stub raising `MPI_ERR_OTHER` on communicator `$comm`.
macro_rules! stub {
    ($name:ident, $pname:ident, $comm:expr, ($($a:ident : $t:ty),* $(,)?)) => {
        export!($name, $pname, ($($a: $t),*) -> c_int {
            let _ = ($($a,)*);
            guard(stringify!($name), $comm, || {
                Err(err(MPI_ERR_OTHER, "not implemented by phalanx yet"))
            })
        });
    };
}

const WORLD: Handle = COMM_WORLD as Handle;

stub!(MPI_Comm_split, PMPI_Comm_split, comm,
      (comm: Handle, color: c_int, key: c_int, newcomm: *mut Handle));
stub!(MPI_Comm_compare, PMPI_Comm_compare, comm1,
      (comm1: Handle, comm2: Handle, result: *mut c_int));
stub!(MPI_Probe, PMPI_Probe, comm,
      (source: c_int, tag: c_int, comm: Handle, status: *mut MPI_Status));
stub!(MPI_Iprobe, PMPI_Iprobe, comm,
      (source: c_int, tag: c_int, comm: Handle, flag: *mut c_int, status: *mut MPI_Status));
stub!(MPI_Ssend, PMPI_Ssend, comm,
      (buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int,
       comm: Handle));
stub!(MPI_Scan, PMPI_Scan, comm,
      (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle,
       op: Handle, comm: Handle));
stub!(MPI_Ibarrier, PMPI_Ibarrier, comm, (comm: Handle, request: *mut Handle));
stub!(MPI_Type_contiguous, PMPI_Type_contiguous, WORLD,
      (count: c_int, oldtype: Handle, newtype: *mut Handle));
stub!(MPI_Type_commit, PMPI_Type_commit, WORLD, (datatype: *mut Handle));
stub!(MPI_Type_free, PMPI_Type_free, WORLD, (datatype: *mut Handle));
stub!(MPI_Waitany, PMPI_Waitany, WORLD,
      (count: c_int, requests: *mut Handle, index: *mut c_int, status: *mut MPI_Status));
stub!(MPI_Testall, PMPI_Testall, WORLD,
      (count: c_int, requests: *mut Handle, flag: *mut c_int, statuses: *mut MPI_Status));
stub!(MPI_Cancel, PMPI_Cancel, WORLD, (request: *mut Handle));
stub!(MPI_Request_free, PMPI_Request_free, WORLD, (request: *mut Handle));
