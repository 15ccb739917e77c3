//! Communicator attributes: `MPI_Comm_create_keyval`, `MPI_Comm_free_keyval`,
//! `MPI_Comm_set_attr`, `MPI_Comm_get_attr`, `MPI_Comm_delete_attr`, their deprecated
//! MPI-1 forms (`MPI_Keyval_create`, `MPI_Keyval_free`, `MPI_Attr_put`, `MPI_Attr_get`,
//! `MPI_Attr_delete`), and the predefined attributes.
//!
//! Contract: keyvals are numbers from 1000 up (never reused in a run). Predefined
//! attributes, read-only: `MPI_TAG_UB` (2^31 − 1), `MPI_HOST` (`MPI_PROC_NULL`), `MPI_IO`
//! (`MPI_ANY_SOURCE`: every rank can do I/O), `MPI_WTIME_IS_GLOBAL` (0), `MPI_APPNUM`
//! (0), `MPI_UNIVERSE_SIZE` (the world size), `MPI_LASTUSEDCODE` (the last error code in use, `MPI_ERR_ABI` until a program adds one); each
//! reads as a pointer to an `int`, as MPI specifies. `MPI_Comm_dup` runs the copy
//! callbacks (`MPI_COMM_NULL_COPY_FN` = 0 copies nothing, `MPI_COMM_DUP_FN` = 1 copies
//! the value); `MPI_Comm_free`, `MPI_Comm_delete_attr` and replacing a value run the
//! delete callback. A callback returning an error makes the call fail with that code.

use crate::consts::*;
use crate::{err, export, guard, out, state, CResult};
use phalanx::capi_support::Shared;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;

type CopyFn =
    unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
type DeleteFn = unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void) -> c_int;

#[derive(Clone, Copy)]
struct Keyval {
    copy: usize,
    delete: usize,
    extra: *mut c_void,
}

#[derive(Default)]
struct Table {
    keyvals: HashMap<c_int, Keyval>,
    attrs: HashMap<(usize, c_int), *mut c_void>,
    next: c_int,
}

static T: Shared<RefCell<Table>> = Shared::new(|| RefCell::new(Table::default()));
static PREDEF: Shared<RefCell<[c_int; 7]>> = Shared::new(|| RefCell::new([0; 7]));

fn keyval(k: c_int) -> CResult<Keyval> {
    T.with(|t| t.borrow().keyvals.get(&k).copied())
        .ok_or_else(|| err(MPI_ERR_KEYVAL, format!("invalid keyval {k}")))
}

pub(crate) fn create(copy: usize, delete: usize, kv: *mut c_int, extra: *mut c_void) -> CResult {
    let k = T.with(|t| {
        let mut t = t.borrow_mut();
        let k = 1000 + t.next;
        t.next += 1;
        t.keyvals.insert(
            k,
            Keyval {
                copy,
                delete,
                extra,
            },
        );
        k
    });
    // SAFETY: writable int (MPI contract; null checked).
    unsafe { out(kv, k) }
}

pub(crate) fn free_keyval(kv: *mut c_int) -> CResult {
    if kv.is_null() {
        return Err(err(MPI_ERR_ARG, "null keyval"));
    }
    // SAFETY: non-null, readable and writable (MPI contract).
    let k = unsafe { kv.read() };
    keyval(k)?;
    T.with(|t| t.borrow_mut().keyvals.remove(&k));
    // SAFETY: as above.
    unsafe { out(kv, 0) }
}

/// Runs the delete callback of `(comm, k)` if set, and removes the attribute.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
fn delete_one(comm: Handle, k: c_int) -> CResult<bool> {
    let Some(v) = T.with(|t| t.borrow_mut().attrs.remove(&(comm as usize, k))) else {
        return Ok(false);
    };
    if let Some(kv) = T.with(|t| t.borrow().keyvals.get(&k).copied()) {
        if kv.delete > 1 {
            // SAFETY: a C delete callback registered with this keyval.
            let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(kv.delete) };
            // SAFETY: the callback's MPI contract.
            let rc = unsafe { f(comm, k, v, kv.extra) };
            if rc != MPI_SUCCESS {
                return Err(err(rc, "attribute delete callback failed"));
            }
        }
    }
    Ok(true)
}

/// Deletes every attribute of `comm` (at `MPI_Comm_free`).
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn delete_all(comm: Handle) -> CResult {
    let mut keys: Vec<c_int> = T.with(|t| {
        t.borrow()
            .attrs
            .keys()
            .filter(|(c, _)| *c == comm as usize)
            .map(|&(_, k)| k)
            .collect()
    });
    keys.sort_unstable();
    for k in keys {
        delete_one(comm, k)?;
    }
    Ok(())
}

/// Copies the attributes of `old` to `new` through their copy callbacks (`MPI_Comm_dup`).
/// (Handles are passed to the C callbacks, never dereferenced here.)
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn copy_all(old: Handle, new: Handle) -> CResult {
    let mut items: Vec<(c_int, *mut c_void)> = T.with(|t| {
        t.borrow()
            .attrs
            .iter()
            .filter(|((c, _), _)| *c == old as usize)
            .map(|(&(_, k), &v)| (k, v))
            .collect()
    });
    items.sort_unstable_by_key(|i| i.0);
    for (k, v) in items {
        let Ok(kv) = keyval(k) else { continue };
        let copied = match kv.copy {
            0 => None,
            1 => Some(v),
            f => {
                // SAFETY: a C copy callback registered with this keyval.
                let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
                let mut outv: *mut c_void = std::ptr::null_mut();
                let mut flag: c_int = 0;
                // SAFETY: the callback's MPI contract (outv receives the new value).
                let rc = unsafe {
                    f(
                        old,
                        k,
                        kv.extra,
                        v,
                        (&mut outv as *mut *mut c_void).cast(),
                        &mut flag,
                    )
                };
                if rc != MPI_SUCCESS {
                    return Err(err(rc, "attribute copy callback failed"));
                }
                (flag != 0).then_some(outv)
            }
        };
        if let Some(v) = copied {
            T.with(|t| t.borrow_mut().attrs.insert((new as usize, k), v));
        }
    }
    Ok(())
}

fn set(comm: Handle, k: c_int, v: *mut c_void) -> CResult {
    state::comm(comm)?;
    if (501..=507).contains(&k) {
        return Err(err(
            MPI_ERR_KEYVAL,
            format!("predefined attribute {k} is read-only"),
        ));
    }
    obj_set(comm, k, v)
}

/// Sets attribute `k` of object `obj` (a communicator or a window, checked by the
/// caller) to `v`, running the delete callback of the value it replaces.
pub(crate) fn obj_set(obj: Handle, k: c_int, v: *mut c_void) -> CResult {
    keyval(k)?;
    delete_one(obj, k)?;
    T.with(|t| t.borrow_mut().attrs.insert((obj as usize, k), v));
    Ok(())
}

/// The value of user attribute `k` of object `obj`, if set.
pub(crate) fn obj_get(obj: Handle, k: c_int) -> CResult<Option<*mut c_void>> {
    keyval(k)?;
    Ok(T.with(|t| t.borrow().attrs.get(&(obj as usize, k)).copied()))
}

/// Deletes user attribute `k` of object `obj` (running its delete callback).
pub(crate) fn obj_delete(obj: Handle, k: c_int) -> CResult {
    keyval(k)?;
    delete_one(obj, k).map(drop)
}

fn get(comm: Handle, k: c_int, val: *mut c_void, flag: *mut c_int) -> CResult {
    let c = state::comm(comm)?;
    let v: Option<*mut c_void> = if (501..=507).contains(&k) {
        let value = match k {
            501 => c_int::MAX,
            502 => MPI_ANY_SOURCE,
            503 => MPI_PROC_NULL,
            505 => state::comm(WORLD)?.size(),
            507 => crate::env_more::last_used(),
            _ => 0,
        };
        PREDEF.with(|p| {
            let mut p = p.borrow_mut();
            let slot = &mut p[(k - 501) as usize];
            *slot = value;
            Some(slot as *mut c_int as *mut c_void)
        })
    } else {
        obj_get(comm, k)?
    };
    let _ = c;
    // SAFETY: val is a writable `void *`, flag a writable int (MPI contract).
    unsafe {
        if let Some(v) = v {
            out(val as *mut *mut c_void, v)?;
        }
        out(flag, v.is_some() as c_int)
    }
}

fn delete(comm: Handle, k: c_int) -> CResult {
    state::comm(comm)?;
    obj_delete(comm, k)
}

use phalanx::traits::Communicator;

export!(MPI_Comm_create_keyval, PMPI_Comm_create_keyval,
        (copy_fn: usize, delete_fn: usize, kv: *mut c_int, extra: *mut c_void) -> c_int {
    guard("MPI_Comm_create_keyval", WORLD, || create(copy_fn, delete_fn, kv, extra))
});
export!(MPI_Keyval_create, PMPI_Keyval_create,
        (copy_fn: usize, delete_fn: usize, kv: *mut c_int, extra: *mut c_void) -> c_int {
    guard("MPI_Keyval_create", WORLD, || create(copy_fn, delete_fn, kv, extra))
});
export!(MPI_Comm_free_keyval, PMPI_Comm_free_keyval, (kv: *mut c_int) -> c_int {
    guard("MPI_Comm_free_keyval", WORLD, || free_keyval(kv))
});
export!(MPI_Keyval_free, PMPI_Keyval_free, (kv: *mut c_int) -> c_int {
    guard("MPI_Keyval_free", WORLD, || free_keyval(kv))
});
export!(MPI_Comm_set_attr, PMPI_Comm_set_attr, (comm: Handle, k: c_int, v: *mut c_void) -> c_int {
    guard("MPI_Comm_set_attr", comm, || set(comm, k, v))
});
export!(MPI_Attr_put, PMPI_Attr_put, (comm: Handle, k: c_int, v: *mut c_void) -> c_int {
    guard("MPI_Attr_put", comm, || set(comm, k, v))
});
export!(MPI_Comm_get_attr, PMPI_Comm_get_attr,
        (comm: Handle, k: c_int, v: *mut c_void, flag: *mut c_int) -> c_int {
    guard("MPI_Comm_get_attr", comm, || get(comm, k, v, flag))
});
export!(MPI_Attr_get, PMPI_Attr_get,
        (comm: Handle, k: c_int, v: *mut c_void, flag: *mut c_int) -> c_int {
    guard("MPI_Attr_get", comm, || get(comm, k, v, flag))
});
export!(MPI_Comm_delete_attr, PMPI_Comm_delete_attr, (comm: Handle, k: c_int) -> c_int {
    guard("MPI_Comm_delete_attr", comm, || delete(comm, k))
});
export!(MPI_Attr_delete, PMPI_Attr_delete, (comm: Handle, k: c_int) -> c_int {
    guard("MPI_Attr_delete", comm, || delete(comm, k))
});
