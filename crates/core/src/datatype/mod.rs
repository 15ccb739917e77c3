//! Datatypes (rsmpi's `mpi::datatype`): how Rust values and buffers are described as
//! messages.
//!
//! Contract: every send packs and every receive unpacks through a [`TypeMap`] (a type
//! signature plus an (offset, length) block list, `typemap.rs`); contiguous types take the
//! memcpy fast path. A [`Buffer`] is `count` elements of its type map at a pointer.
//!
//! [`Equivalence`] is an `unsafe trait`: implementing it promises that the datatype's
//! blocks lie inside `Self`, cover only initialized bytes (padding may be skipped, not
//! described), that its extent is `size_of::<Self>()`, and that every value of its
//! primitives is valid for the bytes it lands on. `#[derive(Equivalence)]` checks this at
//! compile time (no padding, every field `Equivalence`). It is implemented here for the
//! integer and float types, arrays, `bool` (whose bytes are made 0 or 1 whenever a message
//! is unpacked, so no received byte makes an invalid `bool`) and, with the `complex`
//! feature, `num_complex::Complex<f32>`/`Complex<f64>`.
//!
//! rsmpi's datatype handles (`handles.rs`): [`UserDatatype`] and
//! [`UncommittedUserDatatype`] (contiguous, vector, indexed, structured, …, `commit`),
//! [`DatatypeRef`], [`UncommittedDatatypeRef`], the traits [`Datatype`] and
//! [`UncommittedDatatype`] (`dup`), [`AsDatatype`]; views (`view.rs`): [`View`],
//! [`MutView`], [`DynBuffer`], [`DynBufferMut`]. Usage errors in the handles' constructors
//! go to the fatal handler the runtime installs ([`set_misuse_handler`]).

use crate::Count;
use std::borrow::Borrow;
use std::sync::OnceLock;

#[cfg(feature = "complex")]
mod complex;
mod handles;
mod typemap;
mod view;

pub use handles::{
    address_of, Datatype, DatatypeRef, SystemDatatype, UncommittedDatatype, UncommittedDatatypeRef,
    UncommittedUserDatatype, UserDatatype,
};
pub use typemap::{Primitive, TypeMap};
pub(crate) use view::Packed;
pub use view::{DynBuffer, DynBufferMut, MutView, View};

/// Datatype traits (rsmpi's `mpi::datatype::traits`).
pub mod traits {
    pub use super::{AsDatatype, Buffer, BufferMut, Datatype, Equivalence, UncommittedDatatype};
}

type MisuseFn = fn(&str, &str) -> !;
static MISUSE: OnceLock<MisuseFn> = OnceLock::new();

/// Installs the handler for usage errors found here (the runtime's fatal handler).
#[doc(hidden)]
pub fn set_misuse_handler(f: MisuseFn) {
    let _ = MISUSE.set(f);
}

/// Reports a usage error in `call`: to the installed handler, else on stderr with a
/// non-zero exit (before initialization there is no job to end).
pub(crate) fn misuse(call: &str, msg: &str) -> ! {
    if let Some(f) = MISUSE.get() {
        f(call, msg)
    }
    eprintln!("phalanx: {call}: {msg}");
    std::process::exit(1)
}

/// A type that can be sent as a message element.
///
/// # Safety
/// See the module docs: the datatype's blocks lie inside `Self` and cover only its
/// initialized bytes, its extent is `size_of::<Self>()`, and any value of its primitives
/// is valid where it lands. Use `#[derive(Equivalence)]`, which checks this.
pub unsafe trait Equivalence {
    /// The type of the equivalent datatype.
    type Out: Datatype;
    /// The datatype describing one `Self`.
    fn equivalent_datatype() -> Self::Out;
}

/// The type map of `T` (what the derive and the buffers use).
#[doc(hidden)]
pub fn type_map_of<T: Equivalence + ?Sized>() -> TypeMap {
    T::equivalent_datatype().as_type_map().clone()
}

macro_rules! prim {
    ($($t:ty => $p:ident),*) => {$(
        // SAFETY: every bit pattern of these fixed-size numeric types is valid (`bool`:
        // unpacking makes every bool byte 0 or 1, see the module docs).
        unsafe impl Equivalence for $t {
            type Out = SystemDatatype;
            fn equivalent_datatype() -> SystemDatatype {
                DatatypeRef::new(TypeMap::primitive_ref(Primitive::$p))
            }
        }
    )*};
}
prim!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64,
      i64 => I64, f32 => F32, f64 => F64, bool => Bool);

#[cfg(target_pointer_width = "64")]
prim!(usize => U64, isize => I64);

// SAFETY: an array has no padding between elements and is valid iff each element is.
unsafe impl<T: Equivalence, const N: usize> Equivalence for [T; N] {
    type Out = TypeMap;
    fn equivalent_datatype() -> TypeMap {
        TypeMap::contiguous(N, &type_map_of::<T>())
    }
}

/// Something with a datatype (rsmpi's `AsDatatype`).
///
/// # Safety
/// The datatype describes the value's elements (as [`Buffer`] requires).
pub unsafe trait AsDatatype {
    /// The type of the datatype.
    type Out: Datatype;
    /// The datatype of one element.
    fn as_datatype(&self) -> Self::Out;
}

// SAFETY: a value's datatype is its Equivalence.
unsafe impl<T: Equivalence> AsDatatype for T {
    type Out = T::Out;
    fn as_datatype(&self) -> T::Out {
        T::equivalent_datatype()
    }
}
// SAFETY: as above, per element.
unsafe impl<T: Equivalence> AsDatatype for [T] {
    type Out = T::Out;
    fn as_datatype(&self) -> T::Out {
        T::equivalent_datatype()
    }
}
// SAFETY: as above, per element.
unsafe impl<T: Equivalence> AsDatatype for Vec<T> {
    type Out = T::Out;
    fn as_datatype(&self) -> T::Out {
        T::equivalent_datatype()
    }
}

/// Something that can be read as a message: a value, a slice or a vector of
/// [`Equivalence`] elements, a view.
///
/// # Safety
/// `buffer_ptr` must be valid for reads of `datatype().span(count())` bytes for as
/// long as `self` is borrowed, initialized where the datatype's blocks lie.
pub unsafe trait Buffer {
    /// Start of the data.
    fn buffer_ptr(&self) -> *const u8;
    /// Number of elements.
    fn count(&self) -> usize;
    /// Element datatype.
    fn datatype(&self) -> TypeMap;
}

/// Something a message can be received into.
///
/// # Safety
/// `buffer_mut_ptr` must be valid for writes of `datatype().span(count())` bytes for
/// as long as `self` is mutably borrowed, and any bytes unpacked there through the
/// datatype must leave valid values (guaranteed by [`Equivalence`]).
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
    fn datatype(&self) -> TypeMap {
        type_map_of::<T>()
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
    fn datatype(&self) -> TypeMap {
        type_map_of::<T>()
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
    fn datatype(&self) -> TypeMap {
        type_map_of::<T>()
    }
}
// SAFETY: as above, writable.
unsafe impl<T: Equivalence> BufferMut for Vec<T> {
    fn buffer_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr() as *mut u8
    }
}

/// Bytes `count` elements of `datatype` take packed (`MPI_Pack_size`).
pub fn pack_size<D: Datatype + ?Sized>(count: Count, datatype: &D) -> Count {
    let n = usize::try_from(count).unwrap_or(0) * datatype.as_type_map().size();
    Count::try_from(n).unwrap_or(Count::MAX)
}

/// Packs `inbuf` into `outbuf` at `position` (`MPI_Pack`); returns the new position, or
/// a usage error when it does not fit.
pub fn pack_into<B: ?Sized + Buffer>(
    inbuf: &B,
    outbuf: &mut [u8],
    position: Count,
) -> Result<Count, String> {
    let t = inbuf.datatype();
    let mut v = Vec::new();
    // SAFETY: Buffer guarantees its elements at its pointer.
    unsafe { t.pack(inbuf.buffer_ptr(), inbuf.count(), &mut v) };
    let at = usize::try_from(position).map_err(|_| "negative position".to_string())?;
    let end = at
        .checked_add(v.len())
        .filter(|&e| e <= outbuf.len())
        .ok_or_else(|| {
            format!(
                "{} packed bytes at position {at} overflow a buffer of {}",
                v.len(),
                outbuf.len()
            )
        })?;
    outbuf[at..end].copy_from_slice(&v);
    Count::try_from(end).map_err(|_| "position beyond Count".into())
}

/// Unpacks `outbuf`'s elements from `inbuf` at `position` (`MPI_Unpack`); returns the
/// new position, or a usage error when `inbuf` holds too few bytes.
pub fn unpack_from<B: ?Sized + BufferMut>(
    inbuf: &[u8],
    outbuf: &mut B,
    position: Count,
) -> Result<Count, String> {
    let t = outbuf.datatype();
    let n = outbuf.count() * t.size();
    let at = usize::try_from(position).map_err(|_| "negative position".to_string())?;
    let end = at
        .checked_add(n)
        .filter(|&e| e <= inbuf.len())
        .ok_or_else(|| {
            format!(
                "{n} bytes to unpack at position {at} of a buffer of {}",
                inbuf.len()
            )
        })?;
    // SAFETY: BufferMut guarantees room for its `count` elements; exactly that many
    // elements' bytes are unpacked (bools made valid).
    unsafe { t.unpack(&inbuf[at..end], outbuf.buffer_mut_ptr()) };
    Count::try_from(end).map_err(|_| "position beyond Count".into())
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
        let d = type_map_of::<[u32; 4]>();
        assert_eq!((d.size(), d.extent()), (16, 16));
        assert!(d.is_contiguous());
        assert_eq!(d.signature(), &[(Primitive::U32, 4)]);
        assert_eq!(
            bool::equivalent_datatype().signature(),
            &[(Primitive::Bool, 1)]
        );
        assert!(!type_map_of::<[bool; 3]>().is_contiguous());
    }

    #[test]
    fn handles_share_layouts() {
        let t = UserDatatype::vector(2, 1, 2, &i32::equivalent_datatype());
        let r: DatatypeRef<'_> = t.as_ref();
        assert_eq!(r.blocks(), &[(0, 4), (8, 4)]);
        let d = t.dup();
        assert_eq!(d.as_type_map(), t.as_type_map());
        let u = UncommittedUserDatatype::contiguous(2, &i32::equivalent_datatype());
        let s = UserDatatype::structured(
            &[1, 1],
            &[0, 16],
            &[u.as_ref(), f64::equivalent_datatype().into()],
        );
        assert_eq!(s.signature(), &[(Primitive::I32, 2), (Primitive::F64, 1)]);
        assert_eq!(s.extent(), 24);
    }

    #[test]
    fn pack_and_unpack_round_trip() {
        let t = UserDatatype::vector(2, 1, 2, &i32::equivalent_datatype());
        let src = [1i32, -1, 2, -1];
        // SAFETY: the view covers the 12 bytes of two strided elements inside src.
        let v = unsafe { View::with_count_and_datatype(&src[..], 1, &t) };
        let mut out = vec![0u8; pack_size(1, &t) as usize + 4];
        let pos = pack_into(&v, &mut out, 4).unwrap();
        assert_eq!(pos, 12);
        assert!(pack_into(&v, &mut out, 8).is_err());
        let mut dst = [0i32; 2];
        assert_eq!(unpack_from(&out, &mut dst[..], 4), Ok(12));
        assert_eq!(dst, [1, 2]);
        assert!(unpack_from(&out[..8], &mut dst[..], 4).is_err());
    }
}
