//! phalanx's C interface: a first slice of the MPI-5.0 standard ABI, built as
//! `libmpi_abi.so.1` with the header `include/mpi.h`.
//!
//! Contract:
//! - Every function the header declares is exported under its `MPI_` name and its `PMPI_`
//!   (profiling) name; the `MPI_` entry point calls the `PMPI_` one.
//! - Handles are the standard's small integers cast to pointers (predefined handles) or
//!   numbers this library hands out (communicators from `MPI_Comm_dup`, requests, derived
//!   datatypes, user operations); they index the process's tables ([`state`]), which are
//!   `phalanx::capi_support::Shared` values. Every exported function first admits its
//!   thread ([`entry`]): `MPI_Init` gives `MPI_THREAD_FUNNELED` (only the thread that
//!   called it may call MPI; another thread's call ends the job with an error naming it,
//!   except the thread-agnostic functions); `MPI_Init_thread` gives the level asked for,
//!   and at `MPI_THREAD_SERIALIZED`/`MULTIPLE` each call holds the process lock, which
//!   blocking waits give up between rounds of progress.
//! - No panic crosses into C: every exported body runs under `catch_unwind`
//!   ([`guard`]); a panic becomes `MPI_ERR_INTERN`.
//! - Errors go through the communicator's error handler (a window's own for calls on a
//!   window, [`rma`]): `MPI_ERRORS_ARE_FATAL` (the
//!   default; `MPI_ERRORS_ABORT` behaves the same) prints the call and the error and ends
//!   the rank with exit code 1, which makes the launcher end the job; under
//!   `MPI_ERRORS_RETURN` the call returns the error class. Calls with no communicator
//!   (`MPI_Wait` on a request uses the request's) raise on `MPI_COMM_WORLD`. Errors the
//!   core finds during a transfer (e.g. truncation) are always fatal: the Rust API has no
//!   error return for them.
//! - Functions not implemented yet are stubs raising `MPI_ERR_OTHER`.
//!
//! # Safety
//! The exported functions are `unsafe extern "C"`: the C caller must pass pointers that
//! are valid as the MPI standard requires (buffers of `count × type size` bytes, output
//! arguments writable, nonblocking buffers valid and untouched until completion).

#![deny(unsafe_op_in_unsafe_fn)]
#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

pub mod alltoallw;
pub mod attrs;
pub mod bsend;
pub mod coll;
pub mod coll_dt;
pub mod coll_more;
pub mod comm;
pub mod comm_info;
pub mod consts;
pub mod darray;
pub mod env;
pub mod env_more;
pub mod errh;
pub mod fastpath;
pub mod graph;
pub mod grequest;
pub mod groups;
pub mod handles;
pub mod inter;
pub mod inter_coll;
pub mod inter_nbc;
pub mod large_coll;
pub mod large_nbc;
pub mod large_p2p;
pub mod large_types;
pub mod large_v;
pub mod localop;
pub mod misc;
pub mod mprobe;
pub mod nbc;
pub mod nbc_v;
pub mod neighbor;
pub mod ops;
pub mod p2p;
pub mod p2p_more;
pub mod p2p_mpi4;
pub mod persist;
pub mod persist_coll;
pub mod rma;
pub mod rma_ops;
pub mod state;
pub mod stubs;
pub mod stubs_gen;
pub mod topo;
pub mod types;
pub mod types_attr;
pub mod types_more;
pub mod vlayout;
pub mod wide;

use consts::*;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// An MPI error: its class and a message for the fatal handler. Boxed, so that a
/// `CResult` is one word and the success path moves nothing large.
#[derive(Debug)]
pub struct CErr(Box<ErrInfo>);

/// What a [`CErr`] says.
#[derive(Debug)]
pub struct ErrInfo {
    /// The MPI error class returned under `MPI_ERRORS_RETURN`.
    pub class: c_int,
    /// What went wrong.
    pub msg: String,
}

impl std::ops::Deref for CErr {
    type Target = ErrInfo;
    fn deref(&self) -> &ErrInfo {
        &self.0
    }
}

/// Result of an exported body.
pub type CResult<T = ()> = Result<T, CErr>;

/// An error of `class`.
pub fn err(class: c_int, msg: impl Into<String>) -> CErr {
    CErr(Box::new(ErrInfo {
        class,
        msg: msg.into(),
    }))
}

/// Runs an exported body: catches panics and sends errors to `comm`'s error handler.
#[inline]
pub fn guard(name: &str, comm: Handle, f: impl FnOnce() -> CResult) -> c_int {
    guard_on(name, |c| {
        *c = comm;
        f()
    })
}

/// As [`guard`], for calls whose communicator the body finds (e.g. a request's): the body
/// sets `*comm` (world's until it does); errors and panics go to that handler.
#[inline]
pub fn guard_on(name: &str, f: impl FnOnce(&mut Handle) -> CResult) -> c_int {
    let mut comm = consts::COMM_WORLD as Handle;
    match catch_unwind(AssertUnwindSafe(|| f(&mut comm))) {
        Ok(Ok(())) => MPI_SUCCESS,
        Ok(Err(e)) => raise(name, comm, e),
        Err(p) => panicked(name, comm, p),
    }
}

/// A panic caught at the C boundary: an internal error for `comm`'s handler.
#[cold]
fn panicked(name: &str, comm: Handle, p: Box<dyn std::any::Any + Send>) -> c_int {
    raise(name, comm, panic_err(p))
}

/// The internal error a panic caught at the C boundary becomes.
#[cold]
fn panic_err(p: Box<dyn std::any::Any + Send>) -> CErr {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into());
    err(MPI_ERR_INTERN, format!("internal error: {what}"))
}

/// As [`guard`], for calls on an object with an error handler of its own (a window):
/// errors and panics go to the handler `to` names after the call, `(handler, object
/// handle passed to a user handler)`.
pub fn guard_to(
    name: &str,
    to: impl FnOnce() -> (usize, Handle),
    f: impl FnOnce() -> CResult,
) -> c_int {
    let e = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return MPI_SUCCESS,
        Ok(Err(e)) => e,
        Err(p) => panic_err(p),
    };
    let (eh, obj) = to();
    raise_to(name, eh, obj, e)
}

/// Hands `e` to the error handler of `comm` (world's if `comm` is not a live communicator).
#[cold]
pub fn raise(name: &str, comm: Handle, e: CErr) -> c_int {
    let eh = state::errhandler(comm);
    let c = if eh == ERRORS_RETURN || state::is_live_comm(comm) {
        comm
    } else {
        consts::COMM_WORLD as Handle
    };
    raise_to(name, eh, c, e)
}

/// Hands `e` to error handler `eh`: returns the class (`MPI_ERRORS_RETURN`), calls a
/// user handler with object handle `obj` and returns the class, or ends the job.
#[cold]
pub fn raise_to(name: &str, eh: usize, obj: Handle, e: CErr) -> c_int {
    if eh == ERRORS_RETURN {
        return e.class;
    }
    if let Some(f) = errh::user(eh) {
        errh::call(f, obj, e.class);
        return e.class;
    }
    let rank =
        state::world_rank().map_or_else(phalanx::environment::launched_rank, |r| r.to_string());
    let line = format!(
        "phalanx: rank {rank}: {name}: {} (error class {} {})\n",
        e.msg,
        e.class,
        consts::error_name(e.class)
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    phalanx::environment::end_job(1, &line)
}

/// Reads `len` bytes at `p`.
///
/// # Safety
/// `p` must point to `len` readable bytes for the caller's `'a` (the MPI buffer contract).
#[inline]
pub unsafe fn bytes<'a>(p: *const c_void, len: usize) -> CResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() || std::ptr::eq(p, IN_PLACE) {
        return Err(bad_buffer());
    }
    // SAFETY: non-null, and the caller guarantees len readable bytes for 'a.
    Ok(unsafe { std::slice::from_raw_parts(p as *const u8, len) })
}

/// Borrows `len` writable bytes at `p`.
///
/// # Safety
/// `p` must point to `len` writable bytes, not otherwise accessed during `'a`.
#[inline]
pub unsafe fn bytes_mut<'a>(p: *mut c_void, len: usize) -> CResult<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() || p == IN_PLACE {
        return Err(bad_buffer());
    }
    // SAFETY: non-null, and the caller guarantees len exclusive writable bytes for 'a.
    Ok(unsafe { std::slice::from_raw_parts_mut(p as *mut u8, len) })
}

/// Reads `count` elements of `T` at `p` (checking alignment).
///
/// # Safety
/// As [`bytes`], for `count × size_of::<T>()` bytes holding valid `T`s (any bit pattern
/// is valid for the numeric types used here).
pub unsafe fn typed<'a, T>(p: *const c_void, count: usize) -> CResult<&'a [T]> {
    if count == 0 {
        return Ok(&[]);
    }
    if p.is_null() || std::ptr::eq(p, IN_PLACE) || !(p as usize).is_multiple_of(align_of::<T>()) {
        return Err(misaligned());
    }
    // SAFETY: non-null, aligned, and the caller guarantees count readable elements.
    Ok(unsafe { std::slice::from_raw_parts(p as *const T, count) })
}

/// Borrows `count` writable elements of `T` at `p` (checking alignment).
///
/// # Safety
/// As [`bytes_mut`], for `count × size_of::<T>()` bytes.
pub unsafe fn typed_mut<'a, T>(p: *mut c_void, count: usize) -> CResult<&'a mut [T]> {
    if count == 0 {
        return Ok(&mut []);
    }
    if p.is_null() || p == IN_PLACE || !(p as usize).is_multiple_of(align_of::<T>()) {
        return Err(misaligned());
    }
    // SAFETY: non-null, aligned, and the caller guarantees count exclusive elements.
    Ok(unsafe { std::slice::from_raw_parts_mut(p as *mut T, count) })
}

/// Writes `v` to the output argument `p`.
///
/// # Safety
/// `p` must be null (an error) or valid for a write of `T`.
pub unsafe fn out<T>(p: *mut T, v: T) -> CResult {
    if p.is_null() {
        return Err(err(MPI_ERR_ARG, "null output argument"));
    }
    // SAFETY: non-null, and the caller guarantees it is writable.
    unsafe { p.write(v) };
    Ok(())
}

/// Fails with `MPI_ERR_BUFFER` if the two byte ranges overlap (MPI forbids aliasing
/// send and receive buffers except through `MPI_IN_PLACE`).
pub fn disjoint(a: *const c_void, alen: usize, b: *const c_void, blen: usize) -> CResult {
    let (a, b) = (a as usize, b as usize);
    if alen > 0 && blen > 0 && a < b + blen && b < a + alen {
        return Err(err(MPI_ERR_BUFFER, "send and receive buffers overlap"));
    }
    Ok(())
}

#[cold]
fn misaligned() -> CErr {
    err(MPI_ERR_BUFFER, "invalid or misaligned buffer address")
}

#[cold]
fn bad_buffer() -> CErr {
    err(MPI_ERR_BUFFER, "invalid buffer address")
}

/// `MPI_Count`: the 64-bit count of the large-count (`_c`) functions. The internal
/// functions count in it; the `int` entry points widen their counts to it.
pub type Count = i64;

/// A negative count is `MPI_ERR_COUNT` (an `int` or an [`Count`]).
#[inline]
pub fn count(c: impl Into<Count>) -> CResult<usize> {
    let c: Count = c.into();
    if c >= 0 {
        // Nonnegative i64 fits usize on the 64-bit targets the ABI has.
        Ok(c as usize)
    } else {
        Err(bad_count(c))
    }
}

#[cold]
fn bad_count(c: Count) -> CErr {
    err(MPI_ERR_COUNT, format!("invalid count {c}"))
}

/// The byte length of `n` elements of `size` bytes: `MPI_ERR_COUNT` when the product
/// passes `isize::MAX` (no buffer is that large; the product never wraps).
#[inline]
pub fn span(n: usize, size: usize) -> CResult<usize> {
    match n.checked_mul(size) {
        Some(b) if b <= isize::MAX as usize => Ok(b),
        _ => Err(too_large(n, size)),
    }
}

#[cold]
fn too_large(n: usize, size: usize) -> CErr {
    err(
        MPI_ERR_COUNT,
        format!("count {n} of a {size}-byte datatype is larger than any buffer"),
    )
}

/// The C functions MPI lets any thread call whatever the thread level (they touch no
/// shared state).
const ANY_THREAD: &[&str] = &[
    "MPI_Wtime",
    "MPI_Wtick",
    "MPI_Initialized",
    "MPI_Finalized",
    "MPI_Query_thread",
    "MPI_Is_thread_main",
    "MPI_Get_version",
    "MPI_Get_library_version",
    "MPI_Aint_add",
    "MPI_Aint_diff",
];

/// Whether C function `name` is one MPI lets any thread call ([`ANY_THREAD`]): decided
/// at compile time in [`export!`], so those neither check the thread nor take the
/// process lock (an error they raise reaches the handler tables under the rule itself).
#[doc(hidden)]
pub const fn any_thread(name: &str) -> bool {
    let name = name.as_bytes();
    let mut i = 0;
    while i < ANY_THREAD.len() {
        let f = ANY_THREAD[i].as_bytes();
        if f.len() == name.len() {
            let mut j = 0;
            while j < f.len() && f[j] == name[j] {
                j += 1;
            }
            if j == f.len() {
                return true;
            }
        }
        i += 1;
    }
    false
}

const _: () = assert!(
    any_thread("MPI_Wtime")
        && any_thread("MPI_Aint_diff")
        && !any_thread("MPI_Wtim")
        && !any_thread("MPI_Send")
);

/// Admits the calling thread into C function `name` under the thread rule
/// (`phalanx::capi_support::enter`): held for the call, it is what makes the C tables
/// safe to share between threads at `MPI_THREAD_MULTIPLE`. A thread the level refuses
/// (another than the main one at `MPI_THREAD_FUNNELED`) ends the job with an error
/// naming the call.
#[doc(hidden)]
#[inline]
pub fn entry(name: &'static str) -> phalanx::capi_support::Entered {
    match phalanx::capi_support::enter() {
        Ok(entered) => entered,
        Err(e) => refused(name, e),
    }
}

#[cold]
fn refused(name: &'static str, e: phalanx::Error) -> ! {
    phalanx::capi_support::fatal(name, e)
}

/// Exports `$pname` with `$body` and `$name` calling it.
#[macro_export]
macro_rules! export {
    ($name:ident, $pname:ident, ($($a:ident : $t:ty),* $(,)?) -> $ret:ty $body:block) => {
        #[doc = concat!("`", stringify!($pname), "`: profiling entry point of `",
                        stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($a: $t),*) -> $ret {
            // The thread rule, then the call on the timeline (one load and a branch while
            // it does not record), ended first; the thread-agnostic functions (MPI_Wtime,
            // …) take neither.
            let _entered = if const { $crate::any_thread(stringify!($name)) } {
                None
            } else {
                let entered = $crate::entry(stringify!($name));
                Some((phalanx::trace::call(stringify!($name)), entered))
            };
            $body
        }

        #[doc = concat!("`", stringify!($name), "` (see the MPI standard).")]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $ret {
            // SAFETY: the same contract as the profiling entry point.
            unsafe { $pname($($a),*) }
        }
    };
}
