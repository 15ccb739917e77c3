//! Derived datatypes: `MPI_Type_contiguous`, `MPI_Type_vector`, `MPI_Type_indexed`,
//! `MPI_Type_create_struct`, `MPI_Type_commit`, `MPI_Type_free`, `MPI_Type_get_extent`,
//! `MPI_Type_get_name`, `MPI_Type_set_name`, `MPI_Get_address`.
//!
//! Contract: a datatype is a [`Layout`]: a list of `(byte offset, length)` blocks (adjacent
//! blocks merged) with a lower bound and an extent; a predefined type is one block. Derived
//! handles are numbers from 0x1000000 up (never reused within a run) in the per-thread
//! table ([`crate::state`]). Transfers pack a derived type into a contiguous temporary and
//! unpack received bytes after completion ([`pack`], [`unpack`]). A struct's extent is
//! padded to the largest alignment of its members (as C compilers lay out structs). Every
//! call taking a datatype accepts committed derived ones: point-to-point packs/unpacks
//! here, the collectives through [`crate::coll_dt`], reductions through
//! [`crate::ops`] (predefined operations need one basic type: [`Layout::prim`]).

use crate::consts::*;
use crate::{count, err, export, guard, out, state, CResult};
use phalanx::capi_support::Shared;
use std::ffi::{c_char, c_int, c_void};
use std::rc::Rc;

const WORLD: Handle = COMM_WORLD as Handle;
/// `MPI_DATATYPE_NULL`.
pub const DATATYPE_NULL: usize = 0x200;

/// Memory layout of one element of a datatype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `(offset, length)` byte blocks in type-map order.
    pub blocks: Vec<(isize, usize)>,
    /// Bytes of data (sum of block lengths).
    pub size: usize,
    /// Lower bound.
    pub lb: isize,
    /// Extent (upper bound − lower bound).
    pub extent: isize,
    /// Largest alignment of the primitive members.
    pub align: usize,
    /// The predefined datatype (handle value) every primitive member has, if they all
    /// have the same one (what predefined reductions on a derived type compute on).
    pub prim: Option<usize>,
}

impl Layout {
    /// The layout of predefined datatype `h` of `size` bytes.
    pub fn primitive(h: usize, size: usize) -> Layout {
        Layout {
            blocks: vec![(0, size)],
            size,
            lb: 0,
            extent: size as isize,
            align: predefined_align(h, size),
            prim: Some(h),
        }
    }

    /// Lower bound and extent of the bytes actually covered (`MPI_Type_get_true_extent`).
    pub fn true_extent(&self) -> (isize, isize) {
        let lo = self.blocks.iter().map(|b| b.0).min().unwrap_or(0);
        let hi = self
            .blocks
            .iter()
            .map(|b| b.0 + b.1 as isize)
            .max()
            .unwrap_or(0);
        (lo, hi - lo)
    }

    /// The bytes `[lo, hi)`, relative to the buffer address, that the data of `n`
    /// consecutive elements occupy (`(0, 0)` when there is none). Element `i`'s data lies
    /// at `i × extent + [true lb, true lb + true extent)`; this is not `[lb, lb + n ×
    /// extent)` in general: a resized type may move its bounds away from its data and its
    /// extent may be smaller than its data or negative.
    pub fn data_span(&self, n: usize) -> (isize, isize) {
        if n == 0 || self.size == 0 {
            return (0, 0);
        }
        let (tlb, text) = self.true_extent();
        let last = (n as isize - 1) * self.extent;
        (tlb + last.min(0), tlb + text + last.max(0))
    }

    /// Whether the layout is one block at offset 0 with extent = size (packing is a copy).
    pub fn is_contiguous(&self) -> bool {
        self.lb == 0
            && self.extent == self.size as isize
            && (self.blocks.len() == 1 && self.blocks[0].0 == 0 || self.size == 0)
    }
}

/// Alignment of `long double` in C (what `MPI_LONG_DOUBLE` and the types containing it
/// are aligned to).
const LONG_DOUBLE_ALIGN: usize = if cfg!(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64",
    target_arch = "powerpc64",
    target_arch = "s390x"
)) {
    16
} else if cfg!(target_arch = "x86") {
    4
} else {
    8
};

/// The C alignment of predefined datatype `h` of `size` bytes: what a struct containing
/// it is padded to ([`build`]). Composite types align as their parts (a `float` complex
/// or `MPI_2INT` to 4, not to their 8-byte size), `long double` as the C compiler does.
pub(crate) fn predefined_align(h: usize, size: usize) -> usize {
    use std::mem::align_of;
    match h {
        // float complex (C, C++, Fortran COMPLEX), MPI_FLOAT_INT, MPI_2REAL.
        0x212 | 0x213 | 0x21b | 0x228 | 0x230 => align_of::<f32>(),
        // MPI_2INT, MPI_SHORT_INT, MPI_2INTEGER.
        0x22b | 0x22c | 0x232 => align_of::<c_int>(),
        // double complex (C, C++, Fortran), MPI_DOUBLE_INT, MPI_2DOUBLE_PRECISION.
        0x216 | 0x217 | 0x21d | 0x229 | 0x231 => align_of::<f64>(),
        // MPI_LONG_INT.
        0x22a => align_of::<std::ffi::c_long>(),
        // long double, its complex (C, C++), MPI_LONG_DOUBLE_INT.
        0x220 | 0x224 | 0x225 | 0x22d => LONG_DOUBLE_ALIGN,
        // MPI_COMPLEX4 (two 2-byte reals), MPI_COMPLEX8 (two 4-byte reals).
        0x2d3 => 2,
        0x2db => 4,
        _ => size.clamp(1, 8),
    }
}

/// The address and length of the bytes the data of `n` elements of `l` at `buf` occupy
/// ([`Layout::data_span`]), for overlap checks.
pub fn data_range(l: &Layout, buf: *const c_void, n: usize) -> (*const c_void, usize) {
    let (lo, hi) = l.data_span(n);
    let at = (buf as *const u8).wrapping_offset(lo) as *const c_void;
    (at, (hi - lo) as usize)
}

/// `MPI_ERR_BUFFER` when the data of `ns` elements of `l` at `send` and of `nr` at
/// `recv` overlap.
pub fn disjoint_data(
    l: &Layout,
    send: *const c_void,
    ns: usize,
    recv: *const c_void,
    nr: usize,
) -> CResult {
    let (a, alen) = data_range(l, send, ns);
    let (b, blen) = data_range(l, recv, nr);
    crate::disjoint(a, alen, b, blen)
}

/// A derived datatype in the table.
pub struct TypeEntry {
    /// Its layout.
    pub layout: Rc<Layout>,
    /// `MPI_Type_commit` was called.
    pub committed: bool,
    /// Name set by `MPI_Type_set_name` (empty by default).
    pub name: String,
    /// A private duplicate made by [`pin`] (only [`unpin`] frees it).
    pub pinned: bool,
}

/// Pins datatype `h` for an object that uses it after the call that named it (a
/// persistent request starts its operation long after `MPI_Send_init`, and MPI lets the
/// program free the datatype in between): returns a handle that stays valid until
/// [`unpin`] whatever the program does with `h`. A predefined type is returned as it is;
/// a derived one must be committed (else `MPI_ERR_TYPE`, as for communication) and gets
/// a private, committed duplicate sharing its layout, a handle the program never sees.
/// A handle that is no datatype is returned as it is too (an argument not significant at
/// this rank, or one the operation's start rejects). Every successful `pin` needs one
/// `unpin` of the handle it returned.
pub(crate) fn pin(h: Handle) -> CResult<Handle> {
    if datatype(h as usize).is_some() || !is_derived(h) {
        return Ok(h);
    }
    let l = layout_of(h)?;
    Ok(state::with(|s| {
        let d = s.add_type(Layout::primitive(0, 0));
        let e = s.types.get_mut(&(d as usize)).expect("added just now");
        (e.layout, e.committed, e.pinned) = (l, true, true);
        d
    }))
}

/// Releases a handle [`pin`] returned: frees the private duplicate; nothing for a
/// predefined type (or any handle `pin` did not make).
pub(crate) fn unpin(h: Handle) {
    state::with(|s| {
        if s.types.get(&(h as usize)).is_some_and(|e| e.pinned) {
            s.types.remove(&(h as usize));
        }
    });
}

/// Name of predefined type `h`.
pub(crate) fn predefined_name(h: usize) -> Option<&'static str> {
    Some(match h {
        0x201 => "MPI_AINT",
        0x202 => "MPI_COUNT",
        0x203 => "MPI_OFFSET",
        0x207 => "MPI_PACKED",
        0x208 => "MPI_SHORT",
        0x209 => "MPI_INT",
        0x20a => "MPI_LONG",
        0x20b => "MPI_LONG_LONG",
        0x20c => "MPI_UNSIGNED_SHORT",
        0x20d => "MPI_UNSIGNED",
        0x20e => "MPI_UNSIGNED_LONG",
        0x20f => "MPI_UNSIGNED_LONG_LONG",
        0x210 => "MPI_FLOAT",
        0x212 => "MPI_C_FLOAT_COMPLEX",
        0x214 => "MPI_DOUBLE",
        0x216 => "MPI_C_DOUBLE_COMPLEX",
        0x220 => "MPI_LONG_DOUBLE",
        0x228 => "MPI_FLOAT_INT",
        0x229 => "MPI_DOUBLE_INT",
        0x22a => "MPI_LONG_INT",
        0x22b => "MPI_2INT",
        0x238 => "MPI_C_BOOL",
        0x239 => "MPI_CXX_BOOL",
        0x23c => "MPI_WCHAR",
        0x240 => "MPI_INT8_T",
        0x241 => "MPI_UINT8_T",
        0x243 => "MPI_CHAR",
        0x244 => "MPI_SIGNED_CHAR",
        0x245 => "MPI_UNSIGNED_CHAR",
        0x247 => "MPI_BYTE",
        0x248 => "MPI_INT16_T",
        0x249 => "MPI_UINT16_T",
        0x250 => "MPI_INT32_T",
        0x251 => "MPI_UINT32_T",
        0x258 => "MPI_INT64_T",
        0x259 => "MPI_UINT64_T",
        _ => return None,
    })
}

pub(crate) fn bad_type(h: Handle) -> crate::CErr {
    err(MPI_ERR_TYPE, format!("invalid datatype {h:p}"))
}

/// The layout of predefined datatype `h` (of `size` bytes), made once per process: the
/// collectives and the typed point-to-point calls look it up on every call.
fn primitive_layout(h: usize, size: usize) -> Rc<Layout> {
    static PRIMITIVES: Shared<std::cell::RefCell<state::HandleMap<Rc<Layout>>>> =
        Shared::new(std::cell::RefCell::default);
    PRIMITIVES.with(|m| {
        Rc::clone(
            m.borrow_mut()
                .entry(h)
                .or_insert_with(|| Rc::new(Layout::primitive(h, size))),
        )
    })
}

/// The layout of `h` (predefined or derived, committed or not).
pub fn any_layout(h: Handle) -> CResult<Rc<Layout>> {
    if let Some(dt) = datatype(h as usize) {
        return Ok(primitive_layout(h as usize, dt.size));
    }
    state::with(|s| s.types.get(&(h as usize)).map(|e| e.layout.clone())).ok_or_else(|| bad_type(h))
}

/// The layout of `h` for communication: predefined, or derived and committed.
pub fn layout_of(h: Handle) -> CResult<Rc<Layout>> {
    if let Some(dt) = datatype(h as usize) {
        return Ok(primitive_layout(h as usize, dt.size));
    }
    match state::with(|s| {
        s.types
            .get(&(h as usize))
            .map(|e| (e.layout.clone(), e.committed))
    }) {
        Some((l, true)) => Ok(l),
        Some((_, false)) => Err(err(
            MPI_ERR_TYPE,
            format!("datatype {h:p} is not committed (MPI_Type_commit)"),
        )),
        None => Err(bad_type(h)),
    }
}

/// Whether `h` is a derived datatype in the table.
#[inline]
pub fn is_derived(h: Handle) -> bool {
    // A predefined handle is a constant: no table lookup on every collective's path.
    crate::consts::datatype_size(h as usize).is_none() && in_type_table(h)
}

/// Whether `h` is in the table of derived datatypes (out of line).
#[inline(never)]
fn in_type_table(h: Handle) -> bool {
    state::with(|s| s.types.contains_key(&(h as usize)))
}

/// The lowest address data can lie at: Linux never maps the first page
/// (`vm.mmap_min_addr` is at least 4096), so a type whose data starts below it is not a
/// type of absolute addresses.
const LOWEST_ADDRESS: isize = 4096;

/// Checks buffer address `base` for `n` elements of `l`, the one rule every transfer
/// applies before touching memory or communicating: `MPI_IN_PLACE` is not a buffer; a
/// null `base` (`MPI_BOTTOM`, null in the standard ABI) is valid when the data of the
/// elements lies at absolute addresses (a type built from `MPI_Get_address` results),
/// i.e. at or above the first page, and otherwise `MPI_ERR_BUFFER` (a contiguous type's
/// data starts at its buffer address). No data, nothing to check.
pub fn check_base(l: &Layout, base: *const c_void, n: usize) -> CResult {
    if n == 0 || l.size == 0 {
        return Ok(());
    }
    if std::ptr::eq(base, IN_PLACE) || base.is_null() && l.data_span(n).0 < LOWEST_ADDRESS {
        return Err(err(MPI_ERR_BUFFER, "invalid buffer address"));
    }
    Ok(())
}

/// Packs `n` elements of `l` at `base` into a contiguous vector ([`check_base`] first).
///
/// # Safety
/// Every block of every element (`base + i × extent + offset`, length) must be readable
/// (with a null `base`, at the absolute address `i × extent + offset`).
pub unsafe fn pack(l: &Layout, base: *const c_void, n: usize) -> CResult<Vec<u8>> {
    let mut v = Vec::with_capacity(l.size * n);
    if l.size * n == 0 {
        return Ok(v);
    }
    check_base(l, base, n)?;
    for i in 0..n as isize {
        for &(off, len) in &l.blocks {
            // SAFETY: the block is readable (caller); the vector is distinct memory.
            let b = unsafe {
                std::slice::from_raw_parts(
                    (base as *const u8).wrapping_offset(i * l.extent + off),
                    len,
                )
            };
            v.extend_from_slice(b);
        }
    }
    Ok(v)
}

/// Unpacks `data` (at most `n` elements of `l`; a short tail fills a prefix) to `base`
/// ([`check_base`] first).
///
/// # Safety
/// Every block of the first `n` elements at `base` must be writable and not aliased by
/// `data`.
pub unsafe fn unpack(l: &Layout, data: &[u8], base: *mut c_void, n: usize) -> CResult {
    let mut rest = data;
    if rest.is_empty() {
        return Ok(());
    }
    check_base(l, base, n)?;
    for i in 0..n as isize {
        for &(off, len) in &l.blocks {
            let k = len.min(rest.len());
            // SAFETY: the block is writable (caller) and distinct from `data`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    rest.as_ptr(),
                    (base as *mut u8).wrapping_offset(i * l.extent + off),
                    k,
                )
            };
            rest = &rest[k..];
            if rest.is_empty() {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Builds a layout from `parts`: `(displacement, layout, copies)`, each `copies`
/// consecutive elements of `layout` at byte displacement `displacement`.
pub(crate) fn build(parts: &[(isize, &Layout, usize)], struct_pad: bool) -> Layout {
    let mut prims = parts
        .iter()
        .filter(|p| p.2 > 0 && p.1.size > 0)
        .map(|p| p.1.prim);
    let first = prims.next().flatten();
    let prim = if prims.all(|p| p == first) {
        first
    } else {
        None
    };
    let mut blocks: Vec<(isize, usize)> = Vec::new();
    let (mut lo, mut hi) = (isize::MAX, isize::MIN);
    let mut align = 1;
    let mut size = 0;
    for &(disp, l, n) in parts {
        align = align.max(l.align);
        for i in 0..n as isize {
            let at = disp + i * l.extent;
            lo = lo.min(at + l.lb);
            hi = hi.max(at + l.lb + l.extent);
            for &(off, len) in &l.blocks {
                size += len;
                match blocks.last_mut() {
                    Some(last) if last.0 + last.1 as isize == at + off => last.1 += len,
                    _ if len > 0 => blocks.push((at + off, len)),
                    _ => {}
                }
            }
        }
    }
    if lo > hi {
        (lo, hi) = (0, 0);
    }
    if struct_pad {
        let a = align as isize;
        hi = lo + ((hi - lo) + a - 1) / a * a;
    }
    Layout {
        blocks,
        size,
        lb: lo,
        extent: hi - lo,
        align,
        prim,
    }
}

pub(crate) fn add_type(l: Layout) -> Handle {
    state::with(|s| s.add_type(l))
}

/// Reads `n` values at `p`.
///
/// # Safety
/// `p` must point to `n` readable values.
pub(crate) unsafe fn array<T: Copy>(p: *const T, n: usize) -> CResult<Vec<T>> {
    // SAFETY: n readable values (caller); alignment checked by `typed`.
    Ok(unsafe { crate::typed::<T>(p.cast(), n)? }.to_vec())
}

export!(MPI_Type_contiguous, PMPI_Type_contiguous,
        (cnt: c_int, oldtype: Handle, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_contiguous", WORLD, || {
        let l = crate::large_types::contiguous(count(cnt)?, &*any_layout(oldtype)?)?;
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(newtype, add_type(l)) }
    })
});

export!(MPI_Type_vector, PMPI_Type_vector,
        (cnt: c_int, blocklength: c_int, stride: c_int, oldtype: Handle,
         newtype: *mut Handle) -> c_int {
    guard("MPI_Type_vector", WORLD, || {
        let old = any_layout(oldtype)?;
        let s = crate::large_types::scaled(&[stride.into()], old.extent)?[0];
        let l = crate::large_types::hvector(count(cnt)?, count(blocklength)?, s, &old)?;
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(newtype, add_type(l)) }
    })
});

export!(MPI_Type_indexed, PMPI_Type_indexed,
        (cnt: c_int, blocklengths: *const c_int, displacements: *const c_int,
         oldtype: Handle, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_indexed", WORLD, || {
        let n = count(cnt)?;
        let old = any_layout(oldtype)?;
        use crate::large_types::{hindexed, scaled, wide};
        // SAFETY: the caller passes cnt block lengths and cnt displacements.
        let (bl, ds) = unsafe { (wide(blocklengths, n)?, wide(displacements, n)?) };
        let l = hindexed(&bl, &scaled(&ds, old.extent)?, &old)?;
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(newtype, add_type(l)) }
    })
});

export!(MPI_Type_create_struct, PMPI_Type_create_struct,
        (cnt: c_int, blocklengths: *const c_int, displacements: *const isize,
         types: *const Handle, newtype: *mut Handle) -> c_int {
    guard("MPI_Type_create_struct", WORLD, || {
        let n = count(cnt)?;
        // SAFETY: the caller passes cnt block lengths, displacements and types.
        let (bl, ds, ts) = unsafe {
            (crate::large_types::wide(blocklengths, n)?, array(displacements, n)?, array(types, n)?)
        };
        let l = crate::large_types::structure(&bl, &ds, &ts)?;
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(newtype, add_type(l)) }
    })
});

/// Reads the datatype handle at `p`.
///
/// # Safety
/// `p` must be null (an error) or a readable handle.
pub(crate) unsafe fn read_type(p: *const Handle) -> CResult<Handle> {
    if p.is_null() {
        return Err(err(MPI_ERR_ARG, "null datatype pointer"));
    }
    // SAFETY: non-null, readable (caller).
    Ok(unsafe { p.read() })
}

export!(MPI_Type_commit, PMPI_Type_commit, (ty: *mut Handle) -> c_int {
    guard("MPI_Type_commit", WORLD, || {
        // SAFETY: readable handle (null checked).
        let h = unsafe { read_type(ty)? };
        if datatype(h as usize).is_some() {
            return Ok(());
        }
        state::with(|s| s.types.get_mut(&(h as usize)).map(|e| e.committed = true))
            .ok_or_else(|| bad_type(h))
    })
});

export!(MPI_Type_free, PMPI_Type_free, (ty: *mut Handle) -> c_int {
    guard("MPI_Type_free", WORLD, || {
        // SAFETY: readable and writable handle (null checked).
        unsafe {
            let h = read_type(ty)?;
            if datatype(h as usize).is_some() {
                return Err(err(MPI_ERR_TYPE, "cannot free a predefined datatype"));
            }
            if !is_derived(h) {
                return Err(bad_type(h));
            }
            crate::attrs::delete_all(h)?;
            state::with(|s| s.types.remove(&(h as usize))).ok_or_else(|| bad_type(h))?;
            out(ty, DATATYPE_NULL as Handle)
        }
    })
});

export!(MPI_Type_get_extent, PMPI_Type_get_extent,
        (datatype: Handle, lb: *mut isize, extent: *mut isize) -> c_int {
    guard("MPI_Type_get_extent", WORLD, || {
        let l = any_layout(datatype)?;
        // SAFETY: writable outputs (MPI contract; null checked).
        unsafe {
            out(lb, l.lb)?;
            out(extent, l.extent)
        }
    })
});

export!(MPI_Type_get_name, PMPI_Type_get_name,
        (datatype: Handle, name: *mut c_char, resultlen: *mut c_int) -> c_int {
    guard("MPI_Type_get_name", WORLD, || {
        let n = match predefined_name(datatype as usize) {
            Some(n) => n.to_string(),
            None => state::with(|s| s.types.get(&(datatype as usize)).map(|e| e.name.clone()))
                .ok_or_else(|| bad_type(datatype))?,
        };
        // SAFETY: name has MPI_MAX_OBJECT_NAME bytes, resultlen is writable (MPI contract).
        unsafe { crate::env::write_str(name, MAX_OBJECT_NAME, &n, resultlen) }
    })
});

export!(MPI_Type_set_name, PMPI_Type_set_name,
        (datatype: Handle, name: *const c_char) -> c_int {
    guard("MPI_Type_set_name", WORLD, || {
        if name.is_null() {
            return Err(err(MPI_ERR_ARG, "null name"));
        }
        // SAFETY: non-null, and the caller passes a NUL-terminated string.
        let s = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let s: String = s.chars().take(MAX_OBJECT_NAME - 1).collect();
        state::with(|st| st.types.get_mut(&(datatype as usize)).map(|e| e.name = s))
            .ok_or_else(|| bad_type(datatype))
    })
});

export!(MPI_Get_address, PMPI_Get_address,
        (location: *const c_void, address: *mut isize) -> c_int {
    guard("MPI_Get_address", WORLD, || {
        // SAFETY: writable output (MPI contract; null checked).
        unsafe { out(address, location as isize) }
    })
});

/// `MPI_MAX_OBJECT_NAME`.
pub const MAX_OBJECT_NAME: usize = 128;

#[cfg(test)]
mod tests {
    use super::*;

    /// A pinned derived type outlives the program's handle; unpin frees it; predefined
    /// types pass through both.
    #[test]
    fn pin_outlives_type_free_and_unpin_frees() {
        let int = 0x209 as Handle;
        assert_eq!(pin(int).unwrap(), int);
        let l = build(
            &[
                (0, &Layout::primitive(0x209, 4), 1),
                (8, &Layout::primitive(0x209, 4), 1),
            ],
            false,
        );
        let h = add_type(l.clone());
        assert!(pin(h).is_err(), "an uncommitted type is refused");
        state::with(|s| s.types.get_mut(&(h as usize)).unwrap().committed = true);
        let p = pin(h).unwrap();
        assert_ne!(p, h);
        unpin(h); // not a pinned handle: nothing
        assert!(layout_of(h).is_ok());
        state::with(|s| s.types.remove(&(h as usize))); // MPI_Type_free
        assert_eq!(*layout_of(p).unwrap(), l);
        unpin(p);
        assert!(layout_of(p).is_err());
        unpin(int);
        assert!(layout_of(int).is_ok());
    }
}
