//! Datatype attributes: `MPI_Type_create_keyval`, `MPI_Type_free_keyval`,
//! `MPI_Type_set_attr`, `MPI_Type_get_attr`, `MPI_Type_delete_attr`.
//!
//! Contract: the communicators' attribute machinery ([`crate::attrs`]) keyed by the
//! datatype's handle: keyvals from the same numbering, `MPI_Type_dup` runs the copy
//! callbacks (`MPI_TYPE_NULL_COPY_FN` copies nothing, `MPI_TYPE_DUP_FN` the value),
//! `MPI_Type_free`, `MPI_Type_delete_attr` and replacing a value run the delete callback;
//! a callback's error is the call's. Predefined datatypes carry attributes too.

use crate::consts::*;
use crate::types::any_layout;
use crate::{export, guard, out, CResult};
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;

/// A datatype handle the calls accept (predefined or derived, committed or not).
fn valid(t: Handle) -> CResult {
    any_layout(t).map(drop)
}

export!(MPI_Type_create_keyval, PMPI_Type_create_keyval,
        (copy_fn: usize, delete_fn: usize, keyval: *mut c_int,
         extra_state: *mut c_void) -> c_int {
    guard("MPI_Type_create_keyval", WORLD, || {
        crate::attrs::create(copy_fn, delete_fn, keyval, extra_state)
    })
});

export!(MPI_Type_free_keyval, PMPI_Type_free_keyval, (keyval: *mut c_int) -> c_int {
    guard("MPI_Type_free_keyval", WORLD, || crate::attrs::free_keyval(keyval))
});

export!(MPI_Type_set_attr, PMPI_Type_set_attr,
        (datatype: Handle, keyval: c_int, value: *mut c_void) -> c_int {
    guard("MPI_Type_set_attr", WORLD, || {
        valid(datatype)?;
        crate::attrs::obj_set(datatype, keyval, value)
    })
});

export!(MPI_Type_get_attr, PMPI_Type_get_attr,
        (datatype: Handle, keyval: c_int, value: *mut c_void, flag: *mut c_int) -> c_int {
    guard("MPI_Type_get_attr", WORLD, || {
        valid(datatype)?;
        let v = crate::attrs::obj_get(datatype, keyval)?;
        // SAFETY: value is a writable `void *`, flag a writable int (MPI contract).
        unsafe {
            if let Some(v) = v {
                out(value as *mut *mut c_void, v)?;
            }
            out(flag, v.is_some() as c_int)
        }
    })
});

export!(MPI_Type_delete_attr, PMPI_Type_delete_attr, (datatype: Handle, keyval: c_int) -> c_int {
    guard("MPI_Type_delete_attr", WORLD, || {
        valid(datatype)?;
        crate::attrs::obj_delete(datatype, keyval)
    })
});
