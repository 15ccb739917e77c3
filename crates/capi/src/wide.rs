//! Count and displacement arrays of either width: the `int` arrays of the classic
//! functions and the `MPI_Count`/`MPI_Aint` arrays of their large-count (`_c`) forms.
//!
//! Contract: one implementation serves both forms — the internal functions are generic
//! over the array element ([`Wide`]: `c_int`, [`Count`], `MPI_Aint` = `isize`), so the
//! `int` entry points read their arrays as they always did (monomorphized, no copy) and
//! the `_c` ones read 64-bit values. A negative count is `MPI_ERR_COUNT`. Paths limited
//! to `int` (intercommunicator collectives in [`crate::inter_coll`]) narrow with
//! [`narrow`], which refuses a value past `INT_MAX` with `MPI_ERR_COUNT` naming the
//! limit instead of truncating it.

use crate::consts::*;
use crate::{count, err, typed, CResult, Count};
use std::ffi::c_int;

/// An element of a count or displacement array: `int`, `MPI_Count` or `MPI_Aint`.
pub trait Wide: Copy + 'static {
    /// The value, widened.
    fn wide(self) -> Count;
}

impl Wide for c_int {
    #[inline]
    fn wide(self) -> Count {
        self.into()
    }
}

impl Wide for Count {
    #[inline]
    fn wide(self) -> Count {
        self
    }
}

impl Wide for isize {
    #[inline]
    fn wide(self) -> Count {
        // isize is 64-bit on the targets the ABI has.
        self as Count
    }
}

/// The `n` values at `p` (alignment and null checked).
///
/// # Safety
/// `p` points to `n` readable values.
#[inline]
pub unsafe fn slice<'a, T: Wide>(p: *const T, n: usize) -> CResult<&'a [T]> {
    // SAFETY: caller.
    unsafe { typed(p.cast(), n) }
}

/// Counts (`n` at `p`), checked non-negative.
///
/// # Safety
/// `p` points to `n` readable values.
pub unsafe fn counts<T: Wide>(p: *const T, n: usize) -> CResult<Vec<usize>> {
    // SAFETY: caller.
    unsafe { slice(p, n)? }
        .iter()
        .map(|&k| count(k.wide()))
        .collect()
}

/// Displacements (`n` at `p`).
///
/// # Safety
/// `p` points to `n` readable values.
pub unsafe fn displs<T: Wide>(p: *const T, n: usize) -> CResult<Vec<isize>> {
    // SAFETY: caller.
    Ok(unsafe { slice(p, n)? }
        .iter()
        .map(|&d| d.wide() as isize)
        .collect())
}

/// `v` as an `int`, for a path that takes `int` counts only (`what` names it):
/// `MPI_ERR_COUNT` past `INT_MAX`.
pub fn int_of(v: Count, what: &str) -> CResult<c_int> {
    c_int::try_from(v).map_err(|_| {
        err(
            MPI_ERR_COUNT,
            format!("{v} does not fit the int counts and displacements of {what}"),
        )
    })
}

/// The `n` values at `p` narrowed to `int` ([`int_of`]); empty for a null `p` (an
/// argument not significant at this rank).
///
/// # Safety
/// `p` is null or points to `n` readable values.
pub unsafe fn narrow<T: Wide>(p: *const T, n: usize, what: &str) -> CResult<Vec<c_int>> {
    if p.is_null() {
        return Ok(Vec::new());
    }
    // SAFETY: caller.
    unsafe { slice(p, n)? }
        .iter()
        .map(|&v| int_of(v.wide(), what))
        .collect()
}

/// The pointer to an array made by [`narrow`] (null for an empty one).
pub fn ptr(v: &[c_int]) -> *const c_int {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}
