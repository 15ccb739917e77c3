//! Group algebra: `MPI_Group_excl`, `MPI_Group_range_incl`, `MPI_Group_range_excl`,
//! `MPI_Group_union`, `MPI_Group_intersection`, `MPI_Group_difference`,
//! `MPI_Group_translate_ranks`, `MPI_Group_compare`.
//!
//! Contract: a group is an ordered list of processes; the set operations work on world
//! ranks and keep MPI's order (union: the first group, then the second's new members;
//! intersection and difference: the first group's order). Empty results are
//! `MPI_GROUP_EMPTY`. Invalid or repeated ranks are `MPI_ERR_RANK`.

use crate::comm::{add_group, group, GROUP_EMPTY};
use crate::consts::*;
use crate::{count, err, export, guard, out, state, typed, CResult};
use phalanx::topology::{Communicator, Group, UserGroup};
use std::ffi::c_int;

const WORLD: Handle = COMM_WORLD as Handle;

/// World ranks of the members of `g`, in group order.
fn members(g: &UserGroup) -> CResult<Vec<c_int>> {
    let w = state::comm(WORLD)?.group();
    let rs: Vec<c_int> = (0..g.size()).collect();
    Ok(g.translate_ranks(&rs, &w)
        .into_iter()
        .map(|r| r.unwrap_or(-1))
        .collect())
}

/// A new group handle of world ranks `ws` (`MPI_GROUP_EMPTY` when empty).
fn from_world(ws: &[c_int]) -> CResult<Handle> {
    if ws.is_empty() {
        return Ok(GROUP_EMPTY as Handle);
    }
    Ok(add_group(state::comm(WORLD)?.group().include(ws)))
}

fn check_ranks(g: &UserGroup, rs: &[c_int]) -> CResult {
    for (i, &r) in rs.iter().enumerate() {
        if !(0..g.size()).contains(&r) || rs[..i].contains(&r) {
            return Err(err(
                MPI_ERR_RANK,
                format!("invalid or repeated rank {r} (group size {})", g.size()),
            ));
        }
    }
    Ok(())
}

/// Ranks listed by `n` triplets `(first, last, stride)`.
///
/// # Safety
/// `ranges` points to `n` triplets.
unsafe fn ranges(g: &UserGroup, n: usize, ranges: *const [c_int; 3]) -> CResult<Vec<c_int>> {
    // SAFETY: n triplets (caller).
    let t: &[[c_int; 3]] = unsafe { typed(ranges.cast(), n)? };
    let mut v = Vec::new();
    for &[first, last, stride] in t {
        if stride == 0 || (stride > 0 && first > last) || (stride < 0 && first < last) {
            return Err(err(
                MPI_ERR_ARG,
                format!("invalid range ({first}, {last}, {stride})"),
            ));
        }
        let mut r = first;
        while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
            v.push(r);
            r += stride;
        }
    }
    check_ranks(g, &v)?;
    Ok(v)
}

fn put(newgroup: *mut Handle, h: Handle) -> CResult {
    // SAFETY: writable handle (MPI contract; null checked).
    unsafe { out(newgroup, h) }
}

export!(MPI_Group_excl, PMPI_Group_excl,
        (grp: Handle, n: c_int, ranks: *const c_int, newgroup: *mut Handle) -> c_int {
    guard("MPI_Group_excl", WORLD, || {
        let g = group(grp)?;
        // SAFETY: n readable ints (MPI contract).
        let rs: &[c_int] = unsafe { typed(ranks.cast(), count(n)?)? };
        check_ranks(&g, rs)?;
        let ws = members(&g)?;
        let keep: Vec<c_int> = (0..g.size()).filter(|r| !rs.contains(r)).map(|r| ws[r as usize]).collect();
        put(newgroup, from_world(&keep)?)
    })
});

export!(MPI_Group_range_incl, PMPI_Group_range_incl,
        (grp: Handle, n: c_int, rangesp: *mut [c_int; 3], newgroup: *mut Handle) -> c_int {
    guard("MPI_Group_range_incl", WORLD, || {
        let g = group(grp)?;
        // SAFETY: n triplets (MPI contract).
        let rs = unsafe { ranges(&g, count(n)?, rangesp)? };
        let ws = members(&g)?;
        put(newgroup, from_world(&rs.iter().map(|&r| ws[r as usize]).collect::<Vec<_>>())?)
    })
});

export!(MPI_Group_range_excl, PMPI_Group_range_excl,
        (grp: Handle, n: c_int, rangesp: *mut [c_int; 3], newgroup: *mut Handle) -> c_int {
    guard("MPI_Group_range_excl", WORLD, || {
        let g = group(grp)?;
        // SAFETY: n triplets (MPI contract).
        let rs = unsafe { ranges(&g, count(n)?, rangesp)? };
        let ws = members(&g)?;
        let keep: Vec<c_int> = (0..g.size()).filter(|r| !rs.contains(r)).map(|r| ws[r as usize]).collect();
        put(newgroup, from_world(&keep)?)
    })
});

fn set_op(
    name: &str,
    a: Handle,
    b: Handle,
    newgroup: *mut Handle,
    f: fn(&[c_int], &[c_int]) -> Vec<c_int>,
) -> c_int {
    guard(name, WORLD, || {
        let (x, y) = (members(&group(a)?)?, members(&group(b)?)?);
        put(newgroup, from_world(&f(&x, &y))?)
    })
}

export!(MPI_Group_union, PMPI_Group_union,
        (group1: Handle, group2: Handle, newgroup: *mut Handle) -> c_int {
    set_op("MPI_Group_union", group1, group2, newgroup, |x, y| {
        x.iter().copied().chain(y.iter().copied().filter(|r| !x.contains(r))).collect()
    })
});

export!(MPI_Group_intersection, PMPI_Group_intersection,
        (group1: Handle, group2: Handle, newgroup: *mut Handle) -> c_int {
    set_op("MPI_Group_intersection", group1, group2, newgroup, |x, y| {
        x.iter().copied().filter(|r| y.contains(r)).collect()
    })
});

export!(MPI_Group_difference, PMPI_Group_difference,
        (group1: Handle, group2: Handle, newgroup: *mut Handle) -> c_int {
    set_op("MPI_Group_difference", group1, group2, newgroup, |x, y| {
        x.iter().copied().filter(|r| !y.contains(r)).collect()
    })
});

export!(MPI_Group_translate_ranks, PMPI_Group_translate_ranks,
        (group1: Handle, n: c_int, ranks1: *const c_int, group2: Handle,
         ranks2: *mut c_int) -> c_int {
    guard("MPI_Group_translate_ranks", WORLD, || {
        let (a, b) = (group(group1)?, group(group2)?);
        let n = count(n)?;
        // SAFETY: n readable ints in, n writable ints out (MPI contract).
        let rs: &[c_int] = unsafe { typed(ranks1.cast(), n)? };
        let mut res = Vec::with_capacity(n);
        let (wa, wb) = (members(&a)?, members(&b)?);
        for &r in rs {
            if r == MPI_PROC_NULL {
                res.push(MPI_PROC_NULL);
                continue;
            }
            if !(0..a.size()).contains(&r) {
                return Err(err(MPI_ERR_RANK, format!("invalid rank {r} (group size {})", a.size())));
            }
            let w = wa[r as usize];
            res.push(wb.iter().position(|&x| x == w).map_or(MPI_UNDEFINED, |p| p as c_int));
        }
        // SAFETY: n writable ints.
        let o: &mut [c_int] = unsafe { crate::typed_mut(ranks2.cast(), n)? };
        o.copy_from_slice(&res);
        Ok(())
    })
});

export!(MPI_Group_compare, PMPI_Group_compare,
        (group1: Handle, group2: Handle, result: *mut c_int) -> c_int {
    guard("MPI_Group_compare", WORLD, || {
        let (x, y) = (members(&group(group1)?)?, members(&group(group2)?)?);
        let r = if x == y {
            201
        } else if x.len() == y.len() && x.iter().all(|r| y.contains(r)) {
            203
        } else {
            204
        };
        // SAFETY: writable int (MPI contract; null checked).
        unsafe { out(result, r) }
    })
});
