//! Datatype constructors, inquiries and packing on 64-bit counts, with their large-count
//! exports: `MPI_Type_contiguous_c`, `Type_vector_c`, `Type_indexed_c`,
//! `Type_create_hvector_c`, `Type_create_hindexed_c`, `Type_create_hindexed_block_c`,
//! `Type_create_indexed_block_c`, `Type_create_struct_c`, `Type_create_resized_c`,
//! `Type_create_subarray_c`, `Type_size_c`/`_x`, `Type_get_extent_c`/`_x`,
//! `Type_get_true_extent_c`/`_x`, `Pack_c`, `Unpack_c`, `Pack_size_c`.
//!
//! Contract: the constructors here ([`contiguous`], [`hvector`], [`hindexed`],
//! [`hblocks`], [`structure`]) build a [`Layout`] from counts and byte displacements
//! already read and widened; the `int` exports ([`crate::types`],
//! [`crate::types_more`]) and the `_c` ones here call the same functions. A contiguous
//! old type repeated `n` times is one block (no per-element work: a count past 2^31
//! costs nothing). Negative counts are `MPI_ERR_COUNT`; a type whose size passes
//! `isize::MAX` is `MPI_ERR_COUNT` too ([`crate::span`]). The `int` inquiries
//! (`MPI_Type_size`) give `MPI_UNDEFINED` for a size past `INT_MAX`; the `_c`/`_x`
//! forms give it whole.

use crate::consts::*;
use crate::types::{add_type, any_layout, array, build, Layout};
use crate::{count, err, export, guard, out, span, CResult, Count};
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;

/// Reads `n` counts or displacements at `p` (`int`s or `MPI_Count`s) as 64-bit values.
///
/// # Safety
/// `p` points to `n` readable values.
pub(crate) unsafe fn wide<T: Copy + Into<i64>>(p: *const T, n: usize) -> CResult<Vec<i64>> {
    // SAFETY: n readable values (caller).
    Ok(unsafe { array(p, n)? }
        .into_iter()
        .map(Into::into)
        .collect())
}

/// `n` consecutive copies of `old` (`MPI_Type_contiguous`): one block when `old` is.
pub(crate) fn contiguous(n: usize, old: &Layout) -> CResult<Layout> {
    let size = span(n, old.size)?;
    if old.is_contiguous() {
        return Ok(Layout {
            blocks: if size > 0 {
                vec![(0, size)]
            } else {
                Vec::new()
            },
            size,
            lb: 0,
            extent: size as isize,
            align: old.align,
            prim: old.prim,
        });
    }
    Ok(build(&[(0, old, n)], false))
}

/// `n` blocks of `bl` copies of `old`, `stride` bytes apart (`MPI_Type_create_hvector`;
/// `MPI_Type_vector` passes its stride times the extent).
pub(crate) fn hvector(n: usize, bl: usize, stride: isize, old: &Layout) -> CResult<Layout> {
    span(span(n, bl)?, old.size)?;
    let parts: Vec<_> = (0..n as isize).map(|i| (i * stride, old, bl)).collect();
    Ok(build(&parts, false))
}

/// Blocks of `bls[i]` copies of `old` at byte displacements `ds[i]`
/// (`MPI_Type_create_hindexed`; `MPI_Type_indexed` passes displacements times the
/// extent).
pub(crate) fn hindexed(bls: &[i64], ds: &[isize], old: &Layout) -> CResult<Layout> {
    let mut parts = Vec::with_capacity(bls.len());
    for (&b, &d) in bls.iter().zip(ds) {
        parts.push((d, old, count(b)?));
    }
    check_size(&parts)?;
    Ok(build(&parts, false))
}

/// Blocks of `bl` copies of `old` at byte displacements `ds`
/// (`MPI_Type_create_hindexed_block`, `MPI_Type_create_indexed_block`).
pub(crate) fn hblocks(bl: usize, ds: &[isize], old: &Layout) -> CResult<Layout> {
    let parts: Vec<_> = ds.iter().map(|&d| (d, old, bl)).collect();
    check_size(&parts)?;
    Ok(build(&parts, false))
}

/// Blocks of `bls[i]` copies of `ts[i]` at byte displacements `ds[i]`
/// (`MPI_Type_create_struct`).
pub(crate) fn structure(bls: &[i64], ds: &[isize], ts: &[Handle]) -> CResult<Layout> {
    let ls = ts
        .iter()
        .map(|&t| any_layout(t))
        .collect::<CResult<Vec<_>>>()?;
    let mut parts = Vec::with_capacity(bls.len());
    for i in 0..bls.len() {
        parts.push((ds[i], &*ls[i], count(bls[i])?));
    }
    check_size(&parts)?;
    Ok(build(&parts, true))
}

/// `MPI_ERR_COUNT` when the parts' data would pass `isize::MAX` bytes.
fn check_size(parts: &[(isize, &Layout, usize)]) -> CResult {
    let mut total = 0usize;
    for &(_, l, n) in parts {
        total = total
            .checked_add(span(n, l.size)?)
            .filter(|&t| t <= isize::MAX as usize)
            .ok_or_else(|| err(MPI_ERR_COUNT, "datatype larger than any buffer"))?;
    }
    Ok(())
}

/// Byte displacements `ds[i] × unit` (checked).
pub(crate) fn scaled(ds: &[i64], unit: isize) -> CResult<Vec<isize>> {
    ds.iter()
        .map(|&d| {
            (d as isize)
                .checked_mul(unit)
                .ok_or_else(|| err(MPI_ERR_ARG, format!("displacement {d} overflows")))
        })
        .collect()
}

/// Writes the new type's handle.
fn new_type(newtype: *mut Handle, l: Layout) -> CResult {
    // SAFETY: writable handle (MPI contract; null checked).
    unsafe { out(newtype, add_type(l)) }
}

export!(MPI_Type_contiguous_c, PMPI_Type_contiguous_c,
        (cnt: Count, oldtype: Handle, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_contiguous_c", WORLD, || {
        new_type(newtype, contiguous(count(cnt)?, &*any_layout(oldtype)?)?)
    })
});

export!(MPI_Type_vector_c, PMPI_Type_vector_c,
        (cnt: Count, blocklength: Count, stride: Count, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_vector_c", WORLD, || {
        let old = any_layout(oldtype)?;
        let s = scaled(&[stride], old.extent)?[0];
        new_type(newtype, hvector(count(cnt)?, count(blocklength)?, s, &old)?)
    })
});

export!(MPI_Type_create_hvector_c, PMPI_Type_create_hvector_c,
        (cnt: Count, blocklength: Count, stride: Count, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_hvector_c", WORLD, || {
        let old = any_layout(oldtype)?;
        new_type(newtype, hvector(count(cnt)?, count(blocklength)?, stride as isize, &old)?)
    })
});

export!(MPI_Type_indexed_c, PMPI_Type_indexed_c,
        (cnt: Count, blocklengths: *const Count, displacements: *const Count,
         oldtype: Handle, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_indexed_c", WORLD, || {
        let n = count(cnt)?;
        let old = any_layout(oldtype)?;
        // SAFETY: the caller passes cnt block lengths and displacements.
        let (bl, ds) = unsafe { (wide(blocklengths, n)?, wide(displacements, n)?) };
        new_type(newtype, hindexed(&bl, &scaled(&ds, old.extent)?, &old)?)
    })
});

export!(MPI_Type_create_hindexed_c, PMPI_Type_create_hindexed_c,
        (cnt: Count, blocklengths: *const Count, displacements: *const Count,
         oldtype: Handle, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_hindexed_c", WORLD, || {
        let n = count(cnt)?;
        let old = any_layout(oldtype)?;
        // SAFETY: the caller passes cnt block lengths and displacements.
        let (bl, ds) = unsafe { (wide(blocklengths, n)?, wide(displacements, n)?) };
        new_type(newtype, hindexed(&bl, &scaled(&ds, 1)?, &old)?)
    })
});

export!(MPI_Type_create_indexed_block_c, PMPI_Type_create_indexed_block_c,
        (cnt: Count, blocklength: Count, displacements: *const Count, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_indexed_block_c", WORLD, || {
        let n = count(cnt)?;
        let old = any_layout(oldtype)?;
        // SAFETY: the caller passes cnt displacements.
        let ds = unsafe { wide(displacements, n)? };
        new_type(newtype, hblocks(count(blocklength)?, &scaled(&ds, old.extent)?, &old)?)
    })
});

export!(MPI_Type_create_hindexed_block_c, PMPI_Type_create_hindexed_block_c,
        (cnt: Count, blocklength: Count, displacements: *const Count, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_hindexed_block_c", WORLD, || {
        let n = count(cnt)?;
        let old = any_layout(oldtype)?;
        // SAFETY: the caller passes cnt displacements.
        let ds = unsafe { wide(displacements, n)? };
        new_type(newtype, hblocks(count(blocklength)?, &scaled(&ds, 1)?, &old)?)
    })
});

export!(MPI_Type_create_struct_c, PMPI_Type_create_struct_c,
        (cnt: Count, blocklengths: *const Count, displacements: *const Count,
         types: *const Handle, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_struct_c", WORLD, || {
        let n = count(cnt)?;
        // SAFETY: the caller passes cnt block lengths, displacements and types.
        let (bl, ds, ts) =
            unsafe { (wide(blocklengths, n)?, wide(displacements, n)?, array(types, n)?) };
        new_type(newtype, structure(&bl, &scaled(&ds, 1)?, &ts)?)
    })
});

export!(MPI_Type_create_resized_c, PMPI_Type_create_resized_c,
        (oldtype: Handle, lb: Count, extent: Count, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_resized_c", WORLD, || {
        let mut l = (*any_layout(oldtype)?).clone();
        l.lb = lb as isize;
        l.extent = extent as isize;
        new_type(newtype, l)
    })
});

export!(MPI_Type_create_subarray_c, PMPI_Type_create_subarray_c,
        (ndims: c_int, array_of_sizes: *const Count, array_of_subsizes: *const Count,
         array_of_starts: *const Count, order: c_int, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_subarray_c", WORLD, || {
        // SAFETY: the caller passes ndims entries in each array.
        unsafe {
            crate::types_more::subarray_of(
                ndims,
                (array_of_sizes, array_of_subsizes, array_of_starts),
                order,
                oldtype,
                newtype,
            )
        }
    })
});

macro_rules! size_c {
    ($name:ident, $pname:ident) => {
        export!($name, $pname, (datatype: Handle, size: *mut Count) -> c_int {
            guard(stringify!($name), WORLD, || {
                let l = any_layout(datatype)?;
                // SAFETY: writable count (MPI contract; null checked).
                unsafe { out(size, l.size as Count) }
            })
        });
    };
}

size_c!(MPI_Type_size_c, PMPI_Type_size_c);
size_c!(MPI_Type_size_x, PMPI_Type_size_x);

macro_rules! extent_c {
    ($name:ident, $pname:ident, $true:expr) => {
        export!($name, $pname, (datatype: Handle, lb: *mut Count, extent: *mut Count) -> c_int {
            guard(stringify!($name), WORLD, || {
                let l = any_layout(datatype)?;
                let (a, b) = if $true { l.true_extent() } else { (l.lb, l.extent) };
                // SAFETY: writable outputs (MPI contract; null checked).
                unsafe {
                    out(lb, a as Count)?;
                    out(extent, b as Count)
                }
            })
        });
    };
}

extent_c!(MPI_Type_get_extent_c, PMPI_Type_get_extent_c, false);
extent_c!(MPI_Type_get_extent_x, PMPI_Type_get_extent_x, false);
extent_c!(
    MPI_Type_get_true_extent_c,
    PMPI_Type_get_true_extent_c,
    true
);
extent_c!(
    MPI_Type_get_true_extent_x,
    PMPI_Type_get_true_extent_x,
    true
);

export!(MPI_Pack_c, PMPI_Pack_c,
        (inbuf: *const c_void, incount: Count, datatype: Handle, outbuf: *mut c_void,
         outsize: Count, pos: *mut Count, comm: Handle) -> c_int {
    guard("MPI_Pack_c", comm, || {
        // SAFETY: the caller's buffers and a readable, writable position.
        unsafe { crate::types_more::pack_at(inbuf, incount, datatype, outbuf, outsize, pos, comm) }
    })
});

export!(MPI_Unpack_c, PMPI_Unpack_c,
        (inbuf: *const c_void, insize: Count, pos: *mut Count, outbuf: *mut c_void,
         outcount: Count, datatype: Handle, comm: Handle) -> c_int {
    guard("MPI_Unpack_c", comm, || {
        // SAFETY: the caller's buffers and a readable, writable position.
        unsafe {
            crate::types_more::unpack_at(inbuf, insize, pos, outbuf, outcount, datatype, comm)
        }
    })
});

export!(MPI_Pack_size_c, PMPI_Pack_size_c,
        (incount: Count, datatype: Handle, comm: Handle, size: *mut Count) -> c_int {
    guard("MPI_Pack_size_c", comm, || {
        let n = crate::types_more::pack_size(incount, datatype, comm)?;
        // SAFETY: writable count (MPI contract; null checked).
        unsafe { out(size, n as Count) }
    })
});
