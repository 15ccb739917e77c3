//! Functions the header declares that phalanx does not implement yet: each raises
//! `MPI_ERR_OTHER` ("not implemented") through the error handler of its communicator
//! (`MPI_COMM_WORLD` when it has none), so a program under `MPI_ERRORS_RETURN` gets the
//! class back instead of a crash.

use crate::consts::*;
use crate::{err, export, guard};
use std::ffi::c_int;

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

stub!(MPI_Type_create_resized, PMPI_Type_create_resized, WORLD,
      (oldtype: Handle, lb: isize, extent: isize, newtype: *mut Handle));
