//! Generalized requests (MPI-4.1 §13.2): `MPI_Grequest_start`, `MPI_Grequest_complete`,
//! and what the request calls do with them.
//!
//! Contract: a generalized request is a [`ReqEntry::Grequest`] in the request table,
//! active from `MPI_Grequest_start` until the program's operation says it is complete
//! (`MPI_Grequest_complete`, from any thread at `MPI_THREAD_MULTIPLE`). `MPI_Wait*`/
//! `MPI_Test*` (through [`crate::p2p::complete`]) see it complete only after that; they
//! then call `query_fn(extra_state, status)` to fill the status (a status of their own
//! when the caller passed `MPI_STATUS_IGNORE`; again at every non-consuming look, such as
//! `MPI_Request_get_status` or the looks `MPI_Testall`/`MPI_Waitany`/`MPI_Waitsome`
//! take, as MPI allows), and the call that completes it calls `free_fn(extra_state)`
//! after `query_fn` ([`release`]) and nulls the handle. `MPI_Request_free` calls
//! `free_fn` at once when the request is complete, otherwise in `MPI_Grequest_complete`
//! (whichever comes last); the handle is nulled at once. `MPI_Cancel` calls
//! `cancel_fn(extra_state, complete)`, `complete` true when `MPI_Grequest_complete` was
//! called. A callback's error code is what the call that ran it returns, also from
//! `MPI_Waitall`/`Waitsome`/`Testall`/`Testsome` (not `MPI_ERR_IN_STATUS`): after
//! `free_fn`'s the request is gone all the same; after `query_fn`'s it stays, complete,
//! for another completion call or `MPI_Request_free`. Callbacks run outside the tables, so they may call
//! MPI (`MPI_Status_set_elements`, `MPI_Grequest_complete`…); null callbacks are skipped.
//! A blocking wait on an incomplete generalized request yields the process lock between
//! looks; below `MPI_THREAD_MULTIPLE` no other thread could complete it, so the wait is
//! `MPI_ERR_REQUEST` instead of a certain deadlock.

use crate::consts::*;
use crate::state::{self, ReqEntry};
use crate::{err, export, guard, out, CResult};
use phalanx::environment::Threading;
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;

/// `MPI_Grequest_query_function`.
pub type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
/// `MPI_Grequest_free_function`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Grequest_cancel_function`.
pub type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// A generalized request's callbacks and state.
pub struct Greq {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    extra: *mut c_void,
    /// `MPI_Grequest_complete` was called.
    done: bool,
    /// `MPI_Request_free` was called (the program no longer holds the handle for
    /// completion; `free_fn` runs at `MPI_Grequest_complete`).
    freed: bool,
}

/// The callback's code as a result.
fn code(rc: c_int, what: &str) -> CResult {
    if rc == MPI_SUCCESS {
        Ok(())
    } else {
        Err(err(
            rc,
            format!("the generalized request's {what} returned error {rc}"),
        ))
    }
}

/// Calls `free_fn` of a request already out of the table.
fn call_free(g: &Greq) -> CResult {
    match g.free {
        // SAFETY: the program's callback with the state it gave (MPI contract).
        Some(f) => code(unsafe { f(g.extra) }, "free_fn"),
        None => Ok(()),
    }
}

/// `(query_fn, extra_state, done)` of generalized request `h`, if it is one.
fn look(h: Handle) -> Option<(Option<QueryFn>, *mut c_void, bool)> {
    state::with(|s| match s.reqs.get(&(h as usize)) {
        Some(ReqEntry::Grequest(g)) => Some((g.query, g.extra, g.done)),
        _ => None,
    })
}

/// Completes generalized request `h` (just taken out of the table as `g`; put back, it
/// stays there until [`release`]): waits (if `wait`) for `MPI_Grequest_complete`, then
/// the status from `query_fn`; `None` while incomplete (test only).
pub(crate) fn complete(h: Handle, g: Box<Greq>, wait: bool) -> CResult<Option<MPI_Status>> {
    let mut done = g.done;
    state::with(|s| s.reqs.insert(h as usize, ReqEntry::Grequest(g)));
    if !done && wait && phalanx::environment::threading_support() != Threading::Multiple {
        return Err(err(
            MPI_ERR_REQUEST,
            "waiting for a generalized request nobody can complete (MPI_Grequest_complete \
             from another thread needs MPI_THREAD_MULTIPLE)",
        ));
    }
    while !done {
        if !wait {
            return Ok(None);
        }
        phalanx::capi_support::yield_now();
        done = look(h)
            .ok_or_else(|| err(MPI_ERR_REQUEST, format!("request {h:p} went away")))?
            .2;
    }
    let (query, extra, _) = look(h).ok_or_else(|| err(MPI_ERR_INTERN, "grequest lost"))?;
    let mut st = MPI_Status::empty(MPI_ANY_SOURCE);
    if let Some(q) = query {
        // SAFETY: the program's callback with its state and a writable status.
        code(unsafe { q(extra, &mut st) }, "query_fn")?;
    }
    Ok(Some(st))
}

/// After a completion call consumed request `h` (its status returned): if it is a
/// completed generalized request, takes it out of the table and calls `free_fn`.
pub(crate) fn release(h: Handle) -> CResult {
    if h as usize == REQUEST_NULL || crate::fastpath::raw_id(h).is_some() {
        return Ok(());
    }
    let g = state::with(|s| match s.reqs.get(&(h as usize)) {
        Some(ReqEntry::Grequest(g)) if g.done => s.reqs.remove(&(h as usize)),
        _ => None,
    });
    match g {
        Some(ReqEntry::Grequest(g)) => call_free(&g),
        _ => Ok(()),
    }
}

/// `MPI_Request_free` of generalized request `h` (taken out of the table as `g`):
/// `free_fn` now if complete, else at `MPI_Grequest_complete`.
pub(crate) fn free(h: Handle, mut g: Box<Greq>) -> CResult {
    if g.done {
        return call_free(&g);
    }
    g.freed = true;
    state::with(|s| s.reqs.insert(h as usize, ReqEntry::Grequest(g)));
    Ok(())
}

/// `MPI_Cancel` of `h` if it is a generalized request: `cancel_fn(extra_state,
/// complete)`'s result; `None` for any other request.
pub(crate) fn cancel(h: Handle) -> Option<CResult> {
    let (f, extra, done) = state::with(|s| match s.reqs.get(&(h as usize)) {
        Some(ReqEntry::Grequest(g)) => Some((g.cancel, g.extra, g.done)),
        _ => None,
    })?;
    Some(match f {
        // SAFETY: the program's callback with its state (MPI contract).
        Some(f) => code(unsafe { f(extra, done as c_int) }, "cancel_fn"),
        None => Ok(()),
    })
}

export!(MPI_Grequest_start, PMPI_Grequest_start,
        (query_fn: Option<QueryFn>, free_fn: Option<FreeFn>, cancel_fn: Option<CancelFn>,
         extra_state: *mut c_void, request: *mut Handle) -> c_int {
    guard("MPI_Grequest_start", WORLD, || {
        if request.is_null() {
            return Err(err(MPI_ERR_ARG, "null request pointer"));
        }
        let g = Greq {
            query: query_fn,
            free: free_fn,
            cancel: cancel_fn,
            extra: extra_state,
            done: false,
            freed: false,
        };
        let h = state::add_req(ReqEntry::Grequest(Box::new(g)));
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(request, h) }
    })
});

export!(MPI_Grequest_complete, PMPI_Grequest_complete, (request: Handle) -> c_int {
    guard("MPI_Grequest_complete", WORLD, || {
        let freed = state::with(|s| match s.reqs.get_mut(&(request as usize)) {
            Some(ReqEntry::Grequest(g)) if !g.done => {
                g.done = true;
                Ok(g.freed.then(|| s.reqs.remove(&(request as usize))).flatten())
            }
            Some(ReqEntry::Grequest(_)) => Err(err(
                MPI_ERR_REQUEST,
                format!("generalized request {request:p} is already complete"),
            )),
            _ => Err(err(
                MPI_ERR_REQUEST,
                format!("{request:p} is not an active generalized request"),
            )),
        })?;
        match freed {
            Some(ReqEntry::Grequest(g)) => call_free(&g),
            _ => Ok(()),
        }
    })
});
