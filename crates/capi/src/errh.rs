//! User error handlers on communicators: `MPI_Comm_create_errhandler`.
//!
//! Contract: a user handler is a C function `void f(MPI_Comm *, int *, ...)` registered
//! in a per-thread table (MPI state is per-thread, as in [`crate::state`]) under a handle
//! that is neither a predefined handler nor any other object's handle. Communicators
//! store the handle like a predefined one (`Comm_dup`/`split`/`create` inherit it);
//! [`crate::raise`] calls the function with the communicator (`MPI_COMM_WORLD` when the
//! failing call's communicator is not live) and the error class, then returns the class
//! to the program. `MPI_Errhandler_free` only nulls the caller's handle: communicators
//! still using a handler keep it (MPI's rule), so table entries live until the process
//! ends (a few bytes each).

use crate::consts::*;
use crate::{err, export, guard, out, CResult};
use phalanx::capi_support::Shared;
use std::cell::RefCell;
use std::ffi::c_int;

/// `MPI_Comm_errhandler_function`.
pub type CommErrFn = unsafe extern "C" fn(*mut Handle, *mut c_int, ...);

/// First handle value of user error handlers (far from every other handle range).
const BASE: usize = 0x7e00_0000;

static TABLE: Shared<RefCell<Vec<CommErrFn>>> = Shared::new(|| RefCell::new(Vec::new()));

/// The user function behind handler handle `h`, if it is one.
pub fn user(h: usize) -> Option<CommErrFn> {
    let i = h.checked_sub(BASE)?;
    TABLE.with(|t| t.try_borrow().ok()?.get(i).copied())
}

/// Whether `h` is a valid error handler to install (predefined or user).
pub fn valid(h: usize) -> bool {
    [ERRORS_ARE_FATAL, ERRORS_RETURN, ERRORS_ABORT].contains(&h) || user(h).is_some()
}

/// Registers `f`; returns its handle (window handlers too: same C signature).
pub(crate) fn add(f: CommErrFn) -> Handle {
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        t.push(f);
        (BASE + t.len() - 1) as Handle
    })
}

/// Calls user handler `f` for `comm` with `class` (C code: it may call MPI again).
pub fn call(f: CommErrFn, comm: Handle, class: c_int) {
    let (mut c, mut code) = (comm, class);
    // SAFETY: f is the program's handler, called with valid pointers as MPI defines.
    unsafe { f(&mut c, &mut code) }
}

/// Checks a handler-function pointer argument.
fn nonnull(f: Option<CommErrFn>) -> CResult<CommErrFn> {
    f.ok_or_else(|| err(MPI_ERR_ARG, "null error handler function"))
}

export!(MPI_Comm_create_errhandler, PMPI_Comm_create_errhandler,
        (comm_errhandler_fn: Option<CommErrFn>, errhandler: *mut Handle) -> c_int {
    guard("MPI_Comm_create_errhandler", COMM_WORLD as Handle, || {
        let f = nonnull(comm_errhandler_fn)?;
        // SAFETY: writable (MPI contract; null checked by out).
        unsafe { out(errhandler, add(f)) }
    })
});
