//! More datatype calls: `MPI_Type_create_resized`, `MPI_Type_create_hvector`,
//! `MPI_Type_create_hindexed`, `MPI_Type_create_indexed_block`,
//! `MPI_Type_create_hindexed_block`, `MPI_Type_dup`, `MPI_Type_get_true_extent`,
//! `MPI_Get_elements`, `MPI_Pack`, `MPI_Unpack`, `MPI_Pack_size`, `MPI_Aint_add`,
//! `MPI_Aint_diff`, `MPI_Type_create_subarray`.
//!
//! Contract: as [`crate::types`] (a datatype is a block list with lower bound and
//! extent). A resized type keeps its blocks and takes the given bounds. A subarray has
//! lower bound 0 and the extent of the whole array. `MPI_Type_dup` of
//! a committed type is committed. `MPI_Pack` writes the packed bytes (the type map's
//! bytes in order, no header) at `*position` and advances it; `MPI_Pack_size` is exactly
//! `count × type size`. `MPI_Get_elements` counts basic elements when the datatype has
//! one basic type, otherwise it reports whole datatype elements (or `MPI_UNDEFINED`).

use crate::consts::*;
use crate::large_types;
use crate::types::{add_type, any_layout, array, pack, unpack, Layout};
use crate::{count, err, export, guard, out, state, CResult};
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;

fn new_type(newtype: *mut Handle, l: Layout) -> CResult {
    // SAFETY: writable handle (MPI contract; null checked).
    unsafe { out(newtype, add_type(l)) }
}

export!(MPI_Type_create_resized, PMPI_Type_create_resized,
        (oldtype: Handle, lb: isize, extent: isize, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_resized", WORLD, || {
        let mut l = (*any_layout(oldtype)?).clone();
        l.lb = lb;
        l.extent = extent;
        new_type(newtype, l)
    })
});

export!(MPI_Type_create_hvector, PMPI_Type_create_hvector,
        (cnt: c_int, blocklength: c_int, stride: isize, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_hvector", WORLD, || {
        let old = any_layout(oldtype)?;
        new_type(newtype, large_types::hvector(count(cnt)?, count(blocklength)?, stride, &old)?)
    })
});

export!(MPI_Type_create_hindexed, PMPI_Type_create_hindexed,
        (cnt: c_int, blocklengths: *const c_int, displacements: *const isize,
         oldtype: Handle, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_hindexed", WORLD, || {
        let n = count(cnt)?;
        let old = any_layout(oldtype)?;
        // SAFETY: the caller passes cnt block lengths and displacements.
        let (bl, ds) = unsafe { (large_types::wide(blocklengths, n)?, array(displacements, n)?) };
        new_type(newtype, large_types::hindexed(&bl, &ds, &old)?)
    })
});

export!(MPI_Type_create_indexed_block, PMPI_Type_create_indexed_block,
        (cnt: c_int, blocklength: c_int, displacements: *const c_int, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_indexed_block", WORLD, || {
        let (n, bl) = (count(cnt)?, count(blocklength)?);
        let old = any_layout(oldtype)?;
        // SAFETY: the caller passes cnt displacements.
        let ds = unsafe { large_types::wide(displacements, n)? };
        new_type(newtype, large_types::hblocks(bl, &large_types::scaled(&ds, old.extent)?, &old)?)
    })
});

export!(MPI_Type_create_hindexed_block, PMPI_Type_create_hindexed_block,
        (cnt: c_int, blocklength: c_int, displacements: *const isize, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_hindexed_block", WORLD, || {
        let (n, bl) = (count(cnt)?, count(blocklength)?);
        let old = any_layout(oldtype)?;
        // SAFETY: the caller passes cnt displacements.
        let ds = unsafe { array(displacements, n)? };
        new_type(newtype, large_types::hblocks(bl, &ds, &old)?)
    })
});

export!(MPI_Type_create_subarray, PMPI_Type_create_subarray,
        (ndims: c_int, array_of_sizes: *const c_int, array_of_subsizes: *const c_int,
         array_of_starts: *const c_int, order: c_int, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_subarray", WORLD, || {
        // SAFETY: the caller passes ndims entries in each array.
        unsafe {
            subarray_of(ndims, (array_of_sizes, array_of_subsizes, array_of_starts), order, oldtype, newtype)
        }
    })
});

/// `MPI_Type_create_subarray(_c)`: `(sizes, subsizes, starts)` of `ndims` ints or
/// `MPI_Count`s each.
///
/// # Safety
/// Each array holds `ndims` readable values; `newtype` is writable.
pub(crate) unsafe fn subarray_of<T: Copy + Into<i64>>(
    ndims: c_int,
    (sizes, subs, starts): (*const T, *const T, *const T),
    order: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> CResult {
    let nd = count(ndims)?;
    if nd == 0 {
        return Err(err(MPI_ERR_DIMS, "subarray: ndims must be positive"));
    }
    let old = any_layout(oldtype)?;
    // SAFETY: ndims entries in each array (caller).
    let (sizes, subs, starts) = unsafe {
        (
            large_types::wide(sizes, nd)?,
            large_types::wide(subs, nd)?,
            large_types::wide(starts, nd)?,
        )
    };
    new_type(newtype, subarray(&sizes, &subs, &starts, order, &old)?)
}

/// The layout of `MPI_Type_create_subarray`: the `subs` block at `starts` of an array of
/// `sizes` elements of `old`, in C (last dimension fastest) or Fortran order, with lower
/// bound 0 and the extent of the whole array — a vector of vectors placed at the start
/// offset, as the standard defines it.
fn subarray(
    sizes: &[i64],
    subs: &[i64],
    starts: &[i64],
    order: c_int,
    old: &Layout,
) -> CResult<Layout> {
    let bad = |m: String| err(MPI_ERR_ARG, &m);
    let mut dims = Vec::with_capacity(sizes.len());
    for i in 0..sizes.len() {
        let (n, s, st) = (sizes[i], subs[i], starts[i]);
        if n < 1 || s < 1 || s > n || st < 0 || st > n - s {
            return Err(bad(format!(
                "subarray dimension {i}: size {n}, subsize {s}, start {st} (need 1 <= \
                 subsize <= size and 0 <= start <= size - subsize)"
            )));
        }
        dims.push((n as usize, s as usize, st as usize));
    }
    match order {
        MPI_ORDER_C => dims.reverse(), // fastest-varying first
        MPI_ORDER_FORTRAN => {}
        _ => {
            return Err(bad(format!(
                "subarray: order {order} is neither C nor Fortran"
            )))
        }
    }
    let too_big = || bad("subarray: the array's extent overflows".into());
    // Innermost: `subs[fastest]` consecutive elements; each outer dimension repeats the
    // inner type `subs[d]` times with the stride of one full row of the inner dimensions.
    let mut t = crate::types::build(&[(0, old, dims[0].1)], false);
    let mut stride = old.extent;
    let mut disp = (dims[0].2 as isize)
        .checked_mul(old.extent)
        .ok_or_else(too_big)?;
    for w in 1..dims.len() {
        stride = stride
            .checked_mul(dims[w - 1].0 as isize)
            .ok_or_else(too_big)?;
        let parts: Vec<_> = (0..dims[w].1 as isize)
            .map(|j| (j * stride, &t, 1))
            .collect();
        t = crate::types::build(&parts, false);
        disp = disp
            .checked_add(
                (dims[w].2 as isize)
                    .checked_mul(stride)
                    .ok_or_else(too_big)?,
            )
            .ok_or_else(too_big)?;
    }
    let last = dims.last().map_or(1, |d| d.0 as isize);
    let extent = stride.checked_mul(last).ok_or_else(too_big)?;
    let mut l = crate::types::build(&[(disp, &t, 1)], false);
    l.lb = 0;
    l.extent = extent;
    Ok(l)
}

export!(MPI_Type_dup, PMPI_Type_dup, (oldtype: Handle, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_dup", WORLD, || {
        let l = (*any_layout(oldtype)?).clone();
        let committed = datatype(oldtype as usize).is_some()
            || state::with(|s| s.types.get(&(oldtype as usize)).is_some_and(|e| e.committed));
        let h = add_type(l);
        state::with(|s| s.types.get_mut(&(h as usize)).map(|e| e.committed = committed));
        crate::attrs::copy_all(oldtype, h)?;
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(newtype, h) }
    })
});

export!(MPI_Type_get_true_extent, PMPI_Type_get_true_extent,
        (datatype: Handle, true_lb: *mut isize, true_extent: *mut isize) -> c_int {
    guard("MPI_Type_get_true_extent", WORLD, || {
        let (lb, ext) = any_layout(datatype)?.true_extent();
        // SAFETY: writable outputs (MPI contract; null checked).
        unsafe {
            out(true_lb, lb)?;
            out(true_extent, ext)
        }
    })
});

export!(MPI_Get_elements, PMPI_Get_elements,
        (status: *const MPI_Status, datatype: Handle, cnt: *mut c_int) -> c_int {
    guard("MPI_Get_elements", WORLD, || {
        // SAFETY: readable status (MPI contract; null checked).
        let n = unsafe { get_elements(status, datatype)? };
        // SAFETY: writable int (MPI contract; null checked).
        unsafe { out(cnt, c_int::try_from(n).unwrap_or(MPI_UNDEFINED)) }
    })
});

/// The count of `MPI_Get_elements(_c, _x)` (64 bits; `MPI_UNDEFINED` when the bytes
/// are not a whole number of elements).
///
/// # Safety
/// `status` is null (an error) or readable.
pub(crate) unsafe fn get_elements(status: *const MPI_Status, datatype: Handle) -> CResult<i64> {
    if status.is_null() {
        return Err(err(MPI_ERR_ARG, "null status"));
    }
    let l = any_layout(datatype)?;
    // SAFETY: non-null, readable status (caller).
    let bytes = unsafe { (*status).bytes() };
    let unit = l.prim.and_then(datatype_size).unwrap_or(l.size) as u64;
    Ok(if unit == 0 {
        0
    } else if bytes.is_multiple_of(unit) {
        (bytes / unit) as i64
    } else {
        MPI_UNDEFINED.into()
    })
}

fn datatype_size(h: usize) -> Option<usize> {
    datatype(h).map(|d| d.size)
}

/// Reads and checks `*position` against `size`.
///
/// # Safety
/// `position` is null (an error) or a readable int.
unsafe fn position<P: Copy + Into<i64>>(p: *mut P, size: P) -> CResult<usize> {
    if p.is_null() {
        return Err(err(MPI_ERR_ARG, "null position"));
    }
    // SAFETY: non-null, readable (caller).
    let (v, size): (i64, i64) = (unsafe { p.read() }.into(), size.into());
    if v < 0 || v > size {
        return Err(err(
            MPI_ERR_ARG,
            format!("invalid position {v} (buffer size {size})"),
        ));
    }
    Ok(v as usize)
}

export!(MPI_Pack, PMPI_Pack,
        (inbuf: *const c_void, incount: c_int, datatype: Handle, outbuf: *mut c_void,
         outsize: c_int, pos: *mut c_int, comm: Handle) -> c_int {
    guard("MPI_Pack", comm, || {
        // SAFETY: the caller's buffers and position (MPI contract).
        unsafe { pack_at(inbuf, incount, datatype, outbuf, outsize, pos, comm) }
    })
});

/// `MPI_Pack(_c)` with an `int` or `MPI_Count` count, size and position.
///
/// # Safety
/// The caller passes `incount` elements, an `outsize`-byte buffer and a readable and
/// writable position.
pub(crate) unsafe fn pack_at<P: Copy + Into<i64> + TryFrom<usize>>(
    inbuf: *const c_void,
    incount: impl Into<i64>,
    datatype: Handle,
    outbuf: *mut c_void,
    outsize: P,
    pos: *mut P,
    comm: Handle,
) -> CResult {
    state::comm(comm)?;
    let l = any_layout(datatype)?;
    // SAFETY: the caller's contract.
    unsafe {
        let at = position(pos, outsize)?;
        let n = count(incount)?;
        crate::span(n, l.size)?;
        let v = pack(&l, inbuf, n)?;
        if at + v.len() > count(outsize)? {
            return Err(err(MPI_ERR_TRUNCATE, "MPI_Pack: output buffer too small"));
        }
        if !v.is_empty() {
            std::ptr::copy_nonoverlapping(v.as_ptr(), (outbuf as *mut u8).add(at), v.len());
        }
        out(pos, narrow(at + v.len())?)
    }
}

/// A position or size as the caller's integer type (`MPI_ERR_COUNT` if it does not fit).
fn narrow<P: TryFrom<usize>>(v: usize) -> CResult<P> {
    P::try_from(v).map_err(|_| err(MPI_ERR_COUNT, format!("{v} does not fit the argument type")))
}

export!(MPI_Unpack, PMPI_Unpack,
        (inbuf: *const c_void, insize: c_int, pos: *mut c_int, outbuf: *mut c_void,
         outcount: c_int, datatype: Handle, comm: Handle) -> c_int {
    guard("MPI_Unpack", comm, || {
        // SAFETY: the caller's buffers and position (MPI contract).
        unsafe { unpack_at(inbuf, insize, pos, outbuf, outcount, datatype, comm) }
    })
});

/// `MPI_Unpack(_c)` with an `int` or `MPI_Count` size, position and count.
///
/// # Safety
/// The caller passes an `insize`-byte buffer, `outcount` writable elements and a
/// readable and writable position.
pub(crate) unsafe fn unpack_at<P: Copy + Into<i64> + TryFrom<usize>>(
    inbuf: *const c_void,
    insize: P,
    pos: *mut P,
    outbuf: *mut c_void,
    outcount: impl Into<i64>,
    datatype: Handle,
    comm: Handle,
) -> CResult {
    state::comm(comm)?;
    let l = any_layout(datatype)?;
    let n = count(outcount)?;
    // SAFETY: the caller's contract.
    unsafe {
        let at = position(pos, insize)?;
        let len = crate::span(n, l.size)?;
        if at + len > count(insize)? {
            return Err(err(MPI_ERR_TRUNCATE, "MPI_Unpack: input buffer too short"));
        }
        let src = crate::bytes((inbuf as *const u8).add(at).cast(), len)?.to_vec();
        unpack(&l, &src, outbuf, n)?;
        out(pos, narrow(at + len)?)
    }
}

export!(MPI_Pack_size, PMPI_Pack_size,
        (incount: c_int, datatype: Handle, comm: Handle, size: *mut c_int) -> c_int {
    guard("MPI_Pack_size", comm, || {
        let n = pack_size(incount.into(), datatype, comm)?;
        // SAFETY: writable int (MPI contract; null checked).
        unsafe { out(size, narrow(n)?) }
    })
});

/// `MPI_Pack_size(_c)`: exactly `incount × type size` bytes.
pub(crate) fn pack_size(incount: i64, datatype: Handle, comm: Handle) -> CResult<usize> {
    state::comm(comm)?;
    crate::span(count(incount)?, any_layout(datatype)?.size)
}

export!(MPI_Aint_add, PMPI_Aint_add, (base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
});

export!(MPI_Aint_diff, PMPI_Aint_diff, (addr1: isize, addr2: isize) -> isize {
    addr1.wrapping_sub(addr2)
});
