//! `MPI_Type_create_darray`: the part of a distributed global array one process owns
//! (MPI-4.1 §5.1.4).
//!
//! Contract: the process grid is row-major whatever the array order (rank → coordinates
//! as `MPI_Cart_create` numbers them). In each dimension of `g` elements on `p`
//! processes, the process at coordinate `c` owns: `MPI_DISTRIBUTE_NONE`, every index
//! (`p` must be 1); `MPI_DISTRIBUTE_BLOCK` with block `b` (the argument, or `⌈g / p⌉` for
//! `MPI_DISTRIBUTE_DFLT_DARG`; `b × p ≥ g` required), the indices `[c·b, min((c+1)·b, g))`;
//! `MPI_DISTRIBUTE_CYCLIC` with block `k` (the argument, or 1), the indices `i` with
//! `⌊i / k⌋ mod p = c`. The type map is the owned elements in the array's storage order
//! (`MPI_ORDER_C`: last dimension fastest; `MPI_ORDER_FORTRAN`: first), element of linear
//! index `l` at `l × extent(oldtype)`; the lower bound is 0 and the extent the whole
//! array's. In the standard ABI `MPI_DISTRIBUTE_DFLT_DARG` is 19, so an argument of 19
//! means the default. Invalid arguments are `MPI_ERR_ARG` (`MPI_ERR_DIMS` for
//! `ndims < 1`), with `*newtype` left as it was. [`darray`] takes the sizes as `isize`
//! so that the large-count `_c` form can share it.

use crate::consts::*;
use crate::types::{add_type, any_layout, array, build, Layout};
use crate::{count, err, export, guard, out, CResult};
use std::ffi::c_int;

const WORLD: Handle = COMM_WORLD as Handle;

/// The owned indices of one dimension as runs `(first, length)`, increasing.
fn owned(
    dim: usize,
    g: isize,
    distrib: c_int,
    darg: c_int,
    p: isize,
    c: isize,
) -> CResult<Vec<(isize, isize)>> {
    let bad = |m: String| err(MPI_ERR_ARG, format!("darray dimension {dim}: {m}"));
    let arg = |default: isize| -> CResult<isize> {
        match darg {
            MPI_DISTRIBUTE_DFLT_DARG => Ok(default),
            k if k > 0 => Ok(k as isize),
            k => Err(bad(format!("distribution argument {k} is not positive"))),
        }
    };
    Ok(match distrib {
        MPI_DISTRIBUTE_NONE => {
            if p != 1 {
                return Err(bad(format!(
                    "MPI_DISTRIBUTE_NONE on {p} processes (needs 1)"
                )));
            }
            vec![(0, g)]
        }
        MPI_DISTRIBUTE_BLOCK => {
            let b = arg((g + p - 1) / p)?;
            if b.checked_mul(p).is_none_or(|n| n < g) {
                return Err(bad(format!(
                    "blocks of {b} on {p} processes do not cover {g} elements"
                )));
            }
            let first = c * b;
            let end = (first + b).min(g);
            if first < end {
                vec![(first, end - first)]
            } else {
                vec![]
            }
        }
        MPI_DISTRIBUTE_CYCLIC => {
            let k = arg(1)?;
            let step = k.saturating_mul(p);
            let mut runs = Vec::new();
            let mut first = c.saturating_mul(k);
            while first < g {
                runs.push((first, k.min(g - first)));
                first = first.saturating_add(step);
            }
            runs
        }
        d => return Err(bad(format!("unknown distribution {d}"))),
    })
}

/// The layout of `MPI_Type_create_darray` (module docs) for process `rank` of `size`.
pub(crate) fn darray(
    size: c_int,
    rank: c_int,
    gsizes: &[isize],
    distribs: &[c_int],
    dargs: &[c_int],
    psizes: &[c_int],
    order: c_int,
    old: &Layout,
) -> CResult<Layout> {
    let bad = |m: String| err(MPI_ERR_ARG, format!("darray: {m}"));
    let nd = gsizes.len();
    if size < 1 || rank < 0 || rank >= size {
        return Err(bad(format!("rank {rank} of {size} processes")));
    }
    if let Some(i) = (0..nd).find(|&i| gsizes[i] < 1 || psizes[i] < 1) {
        return Err(bad(format!(
            "dimension {i}: size {} on {} processes (both must be positive)",
            gsizes[i], psizes[i]
        )));
    }
    let grid = psizes
        .iter()
        .try_fold(1i64, |a, &p| a.checked_mul(i64::from(p)));
    if grid != Some(i64::from(size)) {
        return Err(bad(format!(
            "the process grid {psizes:?} does not have {size} processes"
        )));
    }
    // Row-major coordinates: the last dimension varies fastest with the rank.
    let mut coords = vec![0isize; nd];
    let mut r = rank as isize;
    for i in (0..nd).rev() {
        coords[i] = r % psizes[i] as isize;
        r /= psizes[i] as isize;
    }
    let runs = (0..nd)
        .map(|i| {
            let p = psizes[i] as isize;
            owned(i, gsizes[i], distribs[i], dargs[i], p, coords[i])
        })
        .collect::<CResult<Vec<_>>>()?;
    // Storage order, slowest dimension first.
    let dims: Vec<usize> = match order {
        MPI_ORDER_C => (0..nd).collect(),
        MPI_ORDER_FORTRAN => (0..nd).rev().collect(),
        _ => return Err(bad(format!("order {order} is neither C nor Fortran"))),
    };
    let too_big = || bad("the array's extent overflows".into());
    // Stride (in elements) of each dimension of `dims`: the product of the faster ones.
    let mut strides = vec![1isize; nd];
    for w in (0..nd - 1).rev() {
        strides[w] = strides[w + 1]
            .checked_mul(gsizes[dims[w + 1]])
            .ok_or_else(too_big)?;
    }
    let elems = strides[0]
        .checked_mul(gsizes[dims[0]])
        .ok_or_else(too_big)?;
    let extent = elems.checked_mul(old.extent).ok_or_else(too_big)?;
    // Owned elements in storage order: every owned index of the slower dimensions (an
    // odometer over their runs), then the fastest dimension's runs as parts.
    let mut parts: Vec<(isize, &Layout, usize)> = Vec::new();
    if runs.iter().all(|r| !r.is_empty()) {
        let slow: Vec<Vec<isize>> = dims[..nd - 1]
            .iter()
            .map(|&d| runs[d].iter().flat_map(|&(f, n)| f..f + n).collect())
            .collect();
        let fast = &runs[dims[nd - 1]];
        let mut at = vec![0usize; nd - 1];
        loop {
            let base: isize = (0..nd - 1).map(|w| slow[w][at[w]] * strides[w]).sum();
            for &(f, n) in fast {
                parts.push(((base + f) * old.extent, old, n as usize));
            }
            // Next index of the slower dimensions, the faster of them first.
            let Some(w) = (0..nd - 1).rev().find(|&w| at[w] + 1 < slow[w].len()) else {
                break;
            };
            at[w] += 1;
            at[w + 1..].iter_mut().for_each(|a| *a = 0);
        }
    }
    let mut l = build(&parts, false);
    l.lb = 0;
    l.extent = extent;
    Ok(l)
}

export!(MPI_Type_create_darray, PMPI_Type_create_darray,
        (size: c_int, rank: c_int, ndims: c_int, array_of_gsizes: *const c_int,
         array_of_distribs: *const c_int, array_of_dargs: *const c_int,
         array_of_psizes: *const c_int, order: c_int, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_darray", WORLD, || {
        // SAFETY: the caller's arrays and output handle (MPI contract).
        unsafe {
            create((size, rank, ndims), array_of_gsizes,
                   (array_of_distribs, array_of_dargs, array_of_psizes), order, oldtype,
                   newtype)
        }
    })
});

export!(MPI_Type_create_darray_c, PMPI_Type_create_darray_c,
        (size: c_int, rank: c_int, ndims: c_int, array_of_gsizes: *const crate::Count,
         array_of_distribs: *const c_int, array_of_dargs: *const c_int,
         array_of_psizes: *const c_int, order: c_int, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_darray_c", WORLD, || {
        // SAFETY: the caller's arrays and output handle (MPI contract).
        unsafe {
            create((size, rank, ndims), array_of_gsizes,
                   (array_of_distribs, array_of_dargs, array_of_psizes), order, oldtype,
                   newtype)
        }
    })
});

/// `MPI_Type_create_darray` (and `_c`: 64-bit global sizes): one implementation.
///
/// # Safety
/// `ndims` entries in each array; `newtype` writable.
unsafe fn create<G: crate::wide::Wide>(
    (size, rank, ndims): (c_int, c_int, c_int),
    gsizes: *const G,
    (distribs, dargs, psizes): (*const c_int, *const c_int, *const c_int),
    order: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> CResult {
    let nd = count(ndims)?;
    if nd == 0 {
        return Err(err(MPI_ERR_DIMS, "darray: ndims must be positive"));
    }
    let old = any_layout(oldtype)?;
    // SAFETY: the caller passes ndims entries in each array.
    let (g, d, a, p) = unsafe {
        (
            crate::wide::slice(gsizes, nd)?,
            array(distribs, nd)?,
            array(dargs, nd)?,
            array(psizes, nd)?,
        )
    };
    let g: Vec<isize> = g.iter().map(|&x| x.wide() as isize).collect();
    let l = darray(size, rank, &g, &d, &a, &p, order, &old)?;
    // SAFETY: writable handle (MPI contract; null checked).
    unsafe { out(newtype, add_type(l)) }
}
