//! Datatypes: a type signature plus an (offset, length) block list.
//!
//! Contract: every send packs and every receive unpacks through a [`Datatype`]. A datatype
//! describes one element: `size` bytes of data spread over `blocks` within an `extent`;
//! `signature` lists the primitive types in order (what MPI matches). Types whose single
//! block covers the whole extent are *contiguous* and take the memcpy fast path.
//!
//! [`Equivalence`] is an `unsafe trait`: implementing it promises that every bit pattern
//! of the type's `size` data bytes is a valid value and that the blocks describe exactly
//! the initialized bytes. `#[derive(Equivalence)]` checks this at compile time (no padding,
//! every field `Equivalence`); it is implemented here for the integer and float types and
//! arrays of them, not for `bool` or `char`, whose bit patterns are restricted.

use crate::Count;
use std::borrow::Borrow;
use std::sync::Arc;

/// The predefined element types (their order in a signature is what MPI matches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Primitive {
    /// Raw byte.
    U8,
    /// Signed byte.
    I8,
    /// 16-bit unsigned.
    U16,
    /// 16-bit signed.
    I16,
    /// 32-bit unsigned.
    U32,
    /// 32-bit signed.
    I32,
    /// 64-bit unsigned.
    U64,
    /// 64-bit signed.
    I64,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

impl Primitive {
    /// Size in bytes.
    pub fn size(self) -> usize {
        match self {
            Primitive::U8 | Primitive::I8 => 1,
            Primitive::U16 | Primitive::I16 => 2,
            Primitive::U32 | Primitive::I32 | Primitive::F32 => 4,
            Primitive::U64 | Primitive::I64 | Primitive::F64 => 8,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Inner {
    size: usize,
    extent: usize,
    blocks: Vec<(usize, usize)>,
    signature: Vec<(Primitive, usize)>,
}

/// A datatype describing one element (cheap to clone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datatype(Arc<Inner>);

impl Datatype {
    /// A predefined datatype.
    pub fn primitive(p: Primitive) -> Datatype {
        // Built once per primitive: this is on every call's path.
        static CACHE: [std::sync::OnceLock<Datatype>; 10] =
            [const { std::sync::OnceLock::new() }; 10];
        let i = match p {
            Primitive::U8 => 0,
            Primitive::I8 => 1,
            Primitive::U16 => 2,
            Primitive::I16 => 3,
            Primitive::U32 => 4,
            Primitive::I32 => 5,
            Primitive::U64 => 6,
            Primitive::I64 => 7,
            Primitive::F32 => 8,
            Primitive::F64 => 9,
        };
        CACHE[i]
            .get_or_init(|| {
                Datatype(Arc::new(Inner {
                    size: p.size(),
                    extent: p.size(),
                    blocks: vec![(0, p.size())],
                    signature: vec![(p, 1)],
                }))
            })
            .clone()
    }

    /// `count` consecutive copies of `elem`.
    pub fn contiguous(count: usize, elem: &Datatype) -> Datatype {
        let fields: Vec<(usize, Datatype)> = (0..count)
            .map(|i| (i * elem.extent(), elem.clone()))
            .collect();
        Datatype::structure(count * elem.extent(), &fields)
    }

    /// A structure of `extent` bytes whose fields lie at the given offsets.
    pub fn structure(extent: usize, fields: &[(usize, Datatype)]) -> Datatype {
        // Memory order, whatever order the fields were declared in (Rust may reorder).
        let mut fields: Vec<&(usize, Datatype)> = fields.iter().collect();
        fields.sort_by_key(|f| f.0);
        let mut blocks: Vec<(usize, usize)> = Vec::new();
        let mut signature: Vec<(Primitive, usize)> = Vec::new();
        let mut size = 0;
        for &(off, ref dt) in fields {
            size += dt.size();
            for &(o, l) in &dt.0.blocks {
                let o = off + o;
                match blocks.last_mut() {
                    Some(last) if last.0 + last.1 == o => last.1 += l,
                    _ => blocks.push((o, l)),
                }
            }
            for &(p, n) in &dt.0.signature {
                match signature.last_mut() {
                    Some(last) if last.0 == p => last.1 += n,
                    _ => signature.push((p, n)),
                }
            }
        }
        Datatype(Arc::new(Inner {
            size,
            extent,
            blocks,
            signature,
        }))
    }

    /// Data bytes in one element.
    pub fn size(&self) -> usize {
        self.0.size
    }
    /// Span of one element in memory.
    pub fn extent(&self) -> usize {
        self.0.extent
    }
    /// True when one element is a single block covering its extent.
    pub fn is_contiguous(&self) -> bool {
        self.0.blocks.len() <= 1 && self.0.size == self.0.extent
    }
    /// The type signature as runs of (primitive, count).
    pub fn signature(&self) -> &[(Primitive, usize)] {
        &self.0.signature
    }

    /// Packs `count` elements at `src` into `out` (appending `count * size` bytes).
    ///
    /// # Safety
    /// `src` must be valid for reads of `count * extent` bytes.
    pub unsafe fn pack(&self, src: *const u8, count: usize, out: &mut Vec<u8>) {
        out.reserve(count * self.size());
        for i in 0..count {
            for &(o, l) in &self.0.blocks {
                // SAFETY: the caller guarantees `count * extent` readable bytes and
                // every block lies within one extent.
                let s = unsafe { std::slice::from_raw_parts(src.add(i * self.extent() + o), l) };
                out.extend_from_slice(s);
            }
        }
    }

    /// Unpacks packed bytes `data` into elements at `dst`, stopping at the end of `data`.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `ceil(data.len() / size) * extent` bytes.
    pub unsafe fn unpack(&self, data: &[u8], dst: *mut u8) {
        let mut pos = 0;
        let mut i = 0;
        while pos < data.len() {
            for &(o, l) in &self.0.blocks {
                let n = l.min(data.len() - pos);
                // SAFETY: the caller guarantees room for every element started.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr().add(pos),
                        dst.add(i * self.extent() + o),
                        n,
                    )
                };
                pos += n;
                if pos == data.len() {
                    return;
                }
            }
            i += 1;
        }
    }
}

/// A type that can be sent as a message element.
///
/// # Safety
/// Every bit pattern of the bytes described by [`Equivalence::equivalent_datatype`] must
/// be a valid value of `Self`, and those bytes must be all of `Self`'s initialized bytes
/// (no padding). Use `#[derive(Equivalence)]`, which checks both.
pub unsafe trait Equivalence: Copy + 'static {
    /// The datatype describing one `Self`.
    fn equivalent_datatype() -> Datatype;
}

macro_rules! prim {
    ($($t:ty => $p:ident),*) => {$(
        // SAFETY: every bit pattern of these fixed-size numeric types is valid.
        unsafe impl Equivalence for $t {
            fn equivalent_datatype() -> Datatype {
                Datatype::primitive(Primitive::$p)
            }
        }
    )*};
}
prim!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64,
      i64 => I64, f32 => F32, f64 => F64);

#[cfg(target_pointer_width = "64")]
prim!(usize => U64, isize => I64);

// SAFETY: an array has no padding between elements and is valid iff each element is.
unsafe impl<T: Equivalence, const N: usize> Equivalence for [T; N] {
    fn equivalent_datatype() -> Datatype {
        Datatype::contiguous(N, &T::equivalent_datatype())
    }
}

/// Something that can be read as a message: a value, a slice or a vector of
/// [`Equivalence`] elements.
///
/// # Safety
/// `buffer_ptr` must be valid for reads of `count() * datatype().extent()` bytes for as
/// long as `self` is borrowed.
pub unsafe trait Buffer {
    /// Start of the data.
    fn buffer_ptr(&self) -> *const u8;
    /// Number of elements.
    fn count(&self) -> usize;
    /// Element datatype.
    fn datatype(&self) -> Datatype;
}

/// Something a message can be received into.
///
/// # Safety
/// `buffer_mut_ptr` must be valid for writes of `count() * datatype().extent()` bytes for
/// as long as `self` is mutably borrowed, and any bytes written there must leave valid
/// values (guaranteed by [`Equivalence`]).
pub unsafe trait BufferMut: Buffer {
    /// Start of the data, writable.
    fn buffer_mut_ptr(&mut self) -> *mut u8;
}

// SAFETY: a value is one element at its own address.
unsafe impl<T: Equivalence> Buffer for T {
    fn buffer_ptr(&self) -> *const u8 {
        self as *const T as *const u8
    }
    fn count(&self) -> usize {
        1
    }
    fn datatype(&self) -> Datatype {
        T::equivalent_datatype()
    }
}
// SAFETY: as above, writable.
unsafe impl<T: Equivalence> BufferMut for T {
    fn buffer_mut_ptr(&mut self) -> *mut u8 {
        self as *mut T as *mut u8
    }
}
// SAFETY: a slice is `len` consecutive elements.
unsafe impl<T: Equivalence> Buffer for [T] {
    fn buffer_ptr(&self) -> *const u8 {
        self.as_ptr() as *const u8
    }
    fn count(&self) -> usize {
        self.len()
    }
    fn datatype(&self) -> Datatype {
        T::equivalent_datatype()
    }
}
// SAFETY: as above, writable.
unsafe impl<T: Equivalence> BufferMut for [T] {
    fn buffer_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr() as *mut u8
    }
}
// SAFETY: a vector's elements are a slice.
unsafe impl<T: Equivalence> Buffer for Vec<T> {
    fn buffer_ptr(&self) -> *const u8 {
        self.as_ptr() as *const u8
    }
    fn count(&self) -> usize {
        self.len()
    }
    fn datatype(&self) -> Datatype {
        T::equivalent_datatype()
    }
}
// SAFETY: as above, writable.
unsafe impl<T: Equivalence> BufferMut for Vec<T> {
    fn buffer_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr() as *mut u8
    }
}

/// A buffer split into per-member blocks for the varcount collectives (rsmpi's
/// `Partition`): block i is `counts[i]` elements at element `displs[i]`.
pub struct Partition<'b, B: ?Sized> {
    pub(crate) buf: &'b B,
    pub(crate) counts: Vec<Count>,
    pub(crate) displs: Vec<Count>,
}

/// A buffer split into per-member blocks, to receive into.
pub struct PartitionMut<'b, B: ?Sized> {
    pub(crate) buf: &'b mut B,
    pub(crate) counts: Vec<Count>,
    pub(crate) displs: Vec<Count>,
}

impl<'b, B: ?Sized + Buffer> Partition<'b, B> {
    /// `buf` with block i of `counts[i]` elements at element `displs[i]`.
    pub fn new<C: Borrow<[Count]>, D: Borrow<[Count]>>(buf: &'b B, counts: C, displs: D) -> Self {
        Partition {
            buf,
            counts: counts.borrow().to_vec(),
            displs: displs.borrow().to_vec(),
        }
    }
    /// The counts.
    pub fn counts(&self) -> &[Count] {
        &self.counts
    }
    /// The displacements.
    pub fn displs(&self) -> &[Count] {
        &self.displs
    }
}

impl<'b, B: ?Sized + BufferMut> PartitionMut<'b, B> {
    /// `buf` with block i of `counts[i]` elements at element `displs[i]`.
    pub fn new<C: Borrow<[Count]>, D: Borrow<[Count]>>(
        buf: &'b mut B,
        counts: C,
        displs: D,
    ) -> Self {
        PartitionMut {
            buf,
            counts: counts.borrow().to_vec(),
            displs: displs.borrow().to_vec(),
        }
    }
    /// The counts.
    pub fn counts(&self) -> &[Count] {
        &self.counts
    }
    /// The displacements.
    pub fn displs(&self) -> &[Count] {
        &self.displs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_and_arrays() {
        let d = <[u32; 4]>::equivalent_datatype();
        assert_eq!((d.size(), d.extent()), (16, 16));
        assert!(d.is_contiguous());
        assert_eq!(d.signature(), &[(Primitive::U32, 4)]);
    }

    #[test]
    fn strided_pack_unpack() {
        // Two i32 fields at offsets 0 and 8 in a 12-byte extent.
        let i = Datatype::primitive(Primitive::I32);
        let d = Datatype::structure(12, &[(0, i.clone()), (8, i)]);
        assert!(!d.is_contiguous());
        let src: [i32; 6] = [1, -1, 2, 3, -1, 4];
        let mut packed = Vec::new();
        // SAFETY: src holds two 12-byte elements.
        unsafe { d.pack(src.as_ptr() as *const u8, 2, &mut packed) };
        assert_eq!(packed.len(), 16);
        let mut dst = [0i32; 6];
        // SAFETY: dst holds two 12-byte elements.
        unsafe { d.unpack(&packed, dst.as_mut_ptr() as *mut u8) };
        assert_eq!(dst, [1, 0, 2, 3, 0, 4]);
    }
}
