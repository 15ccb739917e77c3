//! Datatypes (rsmpi's `mpi::datatype`): how Rust values and buffers are described as
//! messages.
//!
//! Contract: every send packs and every receive unpacks through a [`TypeMap`] (a type
//! signature plus an (offset, length) block list, `typemap.rs`); contiguous types take the
//! memcpy fast path.
//!
//! Buffers are rsmpi 0.8's traits, with its names, supertraits and signatures: a
//! [`Buffer`] is [`Pointer`] + [`Collection`] + [`AsDatatype`] (`count()` elements, a
//! [`Count`], of `as_datatype()` at `pointer()`), a [`BufferMut`] is [`PointerMut`] +
//! [`Collection`] + [`AsDatatype`] (not a `Buffer`), and a program may implement them for
//! its own types. They are implemented for every `T: Equivalence` (one element), `[T]`,
//! `Vec<T>` and `[T; D]` (D elements of `T`, as in rsmpi), for the views and dynamic
//! buffers (`view.rs`), and — with [`Partitioned`], [`PartitionedBuffer`] and
//! [`PartitionedBufferMut`] — for [`Partition`] and [`PartitionMut`]. The crate itself
//! reads any buffer through crate-private extensions implemented once for all of them:
//! `Described` (`elements()`: the count as `usize`, from `Collection`'s hidden
//! `element_count`, which the crate's own buffers give without the `Count` conversion, so
//! the C interface's byte buffers beyond `Count::MAX` bytes still move; `datatype()`: the [`TypeMap`] of
//! `as_datatype()`, an `Arc` clone), `ReadPtr::buffer_ptr` and `WritePtr::buffer_mut_ptr`
//! (the pointers as bytes).
//!
//! [`Equivalence`] is an `unsafe trait`: implementing it promises that the datatype's
//! blocks lie inside `Self`, cover only initialized bytes (padding may be skipped, not
//! described), that its extent is `size_of::<Self>()`, and that every value of its
//! primitives is valid for the bytes it lands on. `#[derive(Equivalence)]` checks this at
//! compile time (no padding, every field `Equivalence` or an array, nested to any depth,
//! of such). It is implemented here for the integer and float types, `bool` (whose bytes
//! are made 0 or 1 whenever a message is unpacked, so no received byte makes an invalid
//! `bool`) and, with the `complex` feature, `num_complex::Complex<f32>`/`Complex<f64>`.
//! Arrays are not `Equivalence` (as in rsmpi): an array is a buffer of D elements, so
//! `[1, 2, 3].count()` is 3; a derived struct's array field is described by the derive
//! as D contiguous copies of its element's datatype ([`TypeMap::contiguous`]), and a
//! vector or slice of arrays is sent through a [`View`] or as a derived struct.
//!
//! rsmpi's datatype handles (`handles.rs`): [`UserDatatype`] and
//! [`UncommittedUserDatatype`] (contiguous, vector, indexed, structured, …, `commit`),
//! [`DatatypeRef`], [`UncommittedDatatypeRef`], the traits [`Datatype`] and
//! [`UncommittedDatatype`] (`dup`), [`AsDatatype`]; views (`view.rs`): [`View`],
//! [`MutView`], [`DynBuffer`], [`DynBufferMut`]. Usage errors in the handles' constructors
//! go to the fatal handler the runtime installs ([`set_misuse_handler`]).

use crate::Count;
use std::borrow::Borrow;
use std::ffi::c_void;
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
    pub use super::{
        AsDatatype, Buffer, BufferMut, Collection, Datatype, Equivalence, Partitioned,
        PartitionedBuffer, PartitionedBufferMut, Pointer, PointerMut, UncommittedDatatype,
    };
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

/// A countable collection of elements (rsmpi's `Collection`).
///
/// # Safety
/// `count` is the number of elements the buffer holds (non-negative), and
/// `element_count`, if an implementation overrides it (phalanx's own buffers do, for
/// byte buffers past `Count::MAX`), returns the same number: phalanx sizes every copy
/// and transfer by `element_count`.
pub unsafe trait Collection {
    /// Number of elements.
    fn count(&self) -> Count;
    /// Number of elements as phalanx reads it (module docs): `count()` by default; the
    /// crate's own buffers give their length without the conversion, so a byte buffer of
    /// the C interface may hold more than `Count::MAX` bytes, as before (`count()` of
    /// such a slice panics, as in rsmpi).
    #[doc(hidden)]
    fn element_count(&self) -> usize {
        let c = self.count();
        usize::try_from(c).unwrap_or_else(|_| misuse("Collection::count", "negative count"))
    }
}

/// The start of a buffer's data (rsmpi's `Pointer`).
///
/// # Safety
/// The pointer is valid for reads of the buffer's elements while `self` is borrowed.
pub unsafe trait Pointer {
    /// Start of the data.
    fn pointer(&self) -> *const c_void;
}

/// The start of a buffer's data, writable (rsmpi's `PointerMut`).
///
/// # Safety
/// The pointer is valid for writes of the buffer's elements while `self` is mutably
/// borrowed.
pub unsafe trait PointerMut {
    /// Start of the data, writable.
    fn pointer_mut(&mut self) -> *mut c_void;
}

/// Something that can be read as a message (rsmpi's `Buffer`): `count()` elements of
/// `as_datatype()` at `pointer()` — a value, a slice, a vector, an array, a view, or a
/// type of the program's own implementing the three traits.
///
/// # Safety
/// `pointer()` must be valid for reads of `span(count())` bytes of the datatype for as
/// long as `self` is borrowed, initialized where the datatype's blocks lie.
pub unsafe trait Buffer: Pointer + Collection + AsDatatype {}

/// Something a message can be received into (rsmpi's `BufferMut`; not a [`Buffer`]).
///
/// # Safety
/// `pointer_mut()` must be valid for writes of `span(count())` bytes of the datatype for
/// as long as `self` is mutably borrowed, and any bytes unpacked there through the
/// datatype must leave valid values (guaranteed by [`Equivalence`]).
pub unsafe trait BufferMut: PointerMut + Collection + AsDatatype {}

/// Implements the buffer traits for values, slices, vectors and arrays of `T`.
macro_rules! buffer_impls {
    ($([$($g:tt)*] $ty:ty, $len:ident, $ptr:ident, $mut_ptr:ident;)*) => {$(
        // SAFETY: a value is one element at its own address; a slice, vector or array
        // `len` consecutive elements of `T` (no padding between them).
        unsafe impl<T: Equivalence $($g)*> AsDatatype for $ty {
            type Out = T::Out;
            #[inline]
            fn as_datatype(&self) -> T::Out {
                T::equivalent_datatype()
            }
        }
        // SAFETY: as above.
        unsafe impl<T: Equivalence $($g)*> Collection for $ty {
            #[inline]
            fn count(&self) -> Count {
                Count::try_from(self.element_count())
                    .expect("Length of slice cannot be expressed as an MPI Count.")
            }
            #[inline]
            fn element_count(&self) -> usize {
                $len(self)
            }
        }
        // SAFETY: as above.
        unsafe impl<T: Equivalence $($g)*> Pointer for $ty {
            #[inline]
            fn pointer(&self) -> *const c_void {
                $ptr(self)
            }
        }
        // SAFETY: as above, writable through `&mut`.
        unsafe impl<T: Equivalence $($g)*> PointerMut for $ty {
            #[inline]
            fn pointer_mut(&mut self) -> *mut c_void {
                $mut_ptr(self)
            }
        }
        // SAFETY: the three parts above describe the elements.
        unsafe impl<T: Equivalence $($g)*> Buffer for $ty {}
        // SAFETY: as above; Equivalence makes what lands valid.
        unsafe impl<T: Equivalence $($g)*> BufferMut for $ty {}
    )*};
}

fn value_len<T>(_: &T) -> usize {
    1
}
fn slice_len<T>(v: &[T]) -> usize {
    v.len()
}
fn value_ptr<T>(v: &T) -> *const c_void {
    v as *const T as *const c_void
}
fn value_mut_ptr<T>(v: &mut T) -> *mut c_void {
    v as *mut T as *mut c_void
}
fn slice_ptr<T>(v: &[T]) -> *const c_void {
    v.as_ptr() as *const c_void
}
fn slice_mut_ptr<T>(v: &mut [T]) -> *mut c_void {
    v.as_mut_ptr() as *mut c_void
}

buffer_impls! {
    [] T, value_len, value_ptr, value_mut_ptr;
    [] [T], slice_len, slice_ptr, slice_mut_ptr;
    [] Vec<T>, slice_len, slice_ptr, slice_mut_ptr;
    [, const D: usize] [T; D], slice_len, slice_ptr, slice_mut_ptr;
}

/// A buffer split into per-member blocks (rsmpi's `Partitioned`).
pub trait Partitioned {
    /// The count of elements in each block.
    fn counts(&self) -> &[Count];
    /// The displacement, in elements, of each block from the buffer's start.
    fn displs(&self) -> &[Count];
}

/// A [`Partitioned`] buffer to read (rsmpi's `PartitionedBuffer`).
pub trait PartitionedBuffer: Partitioned + Pointer + AsDatatype {}

/// A [`Partitioned`] buffer to receive into (rsmpi's `PartitionedBufferMut`).
pub trait PartitionedBufferMut: Partitioned + PointerMut + AsDatatype {}

/// The crate's view of a buffer's description: its count as `usize`
/// (`Collection::element_count`) and its datatype's [`TypeMap`] (an `Arc` clone: no
/// allocation). Implemented once for every `Collection + AsDatatype`, so every
/// [`Buffer`] and [`BufferMut`].
pub(crate) trait Described {
    /// Number of elements (a negative count breaks the [`Collection`] contract: the
    /// misuse handler).
    fn elements(&self) -> usize;
    /// The element datatype's type map.
    fn datatype(&self) -> TypeMap;
}

impl<B: ?Sized + Collection + AsDatatype> Described for B {
    #[inline]
    fn elements(&self) -> usize {
        self.element_count()
    }
    #[inline]
    fn datatype(&self) -> TypeMap {
        self.as_datatype().as_type_map().clone()
    }
}

/// The crate's view of a readable buffer's start, as bytes (every [`Pointer`]).
pub(crate) trait ReadPtr {
    /// Start of the data.
    fn buffer_ptr(&self) -> *const u8;
}

impl<B: ?Sized + Pointer> ReadPtr for B {
    #[inline]
    fn buffer_ptr(&self) -> *const u8 {
        self.pointer() as *const u8
    }
}

/// The crate's view of a writable buffer's start, as bytes (every [`PointerMut`]).
pub(crate) trait WritePtr {
    /// Start of the data, writable.
    fn buffer_mut_ptr(&mut self) -> *mut u8;
}

impl<B: ?Sized + PointerMut> WritePtr for B {
    #[inline]
    fn buffer_mut_ptr(&mut self) -> *mut u8 {
        self.pointer_mut() as *mut u8
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
    unsafe { t.pack(inbuf.buffer_ptr(), inbuf.elements(), &mut v) };
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
    let n = outbuf.elements() * t.size();
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
}

impl<B: ?Sized> Partitioned for Partition<'_, B> {
    fn counts(&self) -> &[Count] {
        &self.counts
    }
    fn displs(&self) -> &[Count] {
        &self.displs
    }
}

impl<B: ?Sized> Partitioned for PartitionMut<'_, B> {
    fn counts(&self) -> &[Count] {
        &self.counts
    }
    fn displs(&self) -> &[Count] {
        &self.displs
    }
}

// SAFETY: the partition's datatype is its buffer's.
unsafe impl<B: ?Sized + AsDatatype> AsDatatype for Partition<'_, B> {
    type Out = B::Out;
    fn as_datatype(&self) -> B::Out {
        self.buf.as_datatype()
    }
}

// SAFETY: as above.
unsafe impl<B: ?Sized + AsDatatype> AsDatatype for PartitionMut<'_, B> {
    type Out = B::Out;
    fn as_datatype(&self) -> B::Out {
        self.buf.as_datatype()
    }
}

// SAFETY: the partition's data is its buffer's.
unsafe impl<B: ?Sized + Pointer> Pointer for Partition<'_, B> {
    fn pointer(&self) -> *const c_void {
        self.buf.pointer()
    }
}

// SAFETY: as above, borrowed mutably.
unsafe impl<B: ?Sized + PointerMut> PointerMut for PartitionMut<'_, B> {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.buf.pointer_mut()
    }
}

impl<B: ?Sized + Pointer + AsDatatype> PartitionedBuffer for Partition<'_, B> {}
impl<B: ?Sized + PointerMut + AsDatatype> PartitionedBufferMut for PartitionMut<'_, B> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_and_arrays() {
        let d = TypeMap::contiguous(4, &type_map_of::<u32>());
        assert_eq!((d.size(), d.extent()), (16, 16));
        assert!(d.is_contiguous());
        assert_eq!(d.signature(), &[(Primitive::U32, 4)]);
        assert_eq!(
            bool::equivalent_datatype().signature(),
            &[(Primitive::Bool, 1)]
        );
        assert!(!TypeMap::contiguous(3, &type_map_of::<bool>()).is_contiguous());
    }

    #[test]
    fn counts_as_rsmpi() {
        let a = [1u16, 2, 3];
        let v = vec![0f64; 5];
        assert_eq!(a.count(), 3);
        assert_eq!(a[..2].count(), 2);
        assert_eq!(v.count(), 5);
        assert_eq!([0f64; 4].count(), 4);
        assert_eq!(7u8.count(), 1);
        assert_eq!(a.elements(), 3);
        assert_eq!(a.datatype().signature(), &[(Primitive::U16, 1)]);
        assert_eq!(a.buffer_ptr(), a.as_ptr() as *const u8);
        let p = Partition::new(&a[..], [1, 2], [0, 1]);
        assert_eq!((p.counts(), p.displs()), (&[1, 2][..], &[0, 1][..]));
        assert_eq!(p.pointer(), a.as_ptr() as *const c_void);
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
