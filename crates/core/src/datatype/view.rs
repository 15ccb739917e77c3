//! Buffers seen through a datatype: rsmpi's [`View`], [`MutView`], [`DynBuffer`] and
//! [`DynBufferMut`], and the crate's packed copies for collectives.
//!
//! Contract: a view is `count` elements of a datatype starting at a buffer's first byte;
//! making one is `unsafe` as in rsmpi (the datatype must describe only initialized bytes
//! of the buffer's values, and a received value must be valid for the bytes it lands
//! on), but a view reaching past the end of its buffer is refused (fatal handler), so it
//! never reads or writes outside it. A dynamic buffer is `len` elements of a datatype at
//! a pointer; `downcast::<T>()` succeeds only when the datatype is `T`'s (same signature,
//! densely laid out) and the pointer is aligned for `T`. They are buffers through
//! rsmpi's traits: a `View` and a `DynBuffer` are `Pointer + Collection + AsDatatype`
//! (`Buffer`), a `MutView` is `PointerMut + Collection + AsDatatype` (`BufferMut`, as in
//! rsmpi not a `Buffer`), a `DynBufferMut` both. `Packed` is the crate's own `Buffer` and
//! `BufferMut`.

use super::handles::{Datatype, DatatypeRef};
use super::typemap::TypeMap;
use super::{misuse, type_map_of, AsDatatype, Buffer, BufferMut, Equivalence};
use super::{Collection, Described, Pointer, PointerMut, ReadPtr, WritePtr};
use crate::Count;
use std::ffi::c_void;
use std::marker::PhantomData;

/// A buffer with a datatype and count of the program's choosing (rsmpi's `View`).
pub struct View<'d, 'b, D, B: ?Sized>
where
    D: 'd + Datatype,
    B: 'b + Buffer,
{
    datatype: &'d D,
    count: usize,
    buffer: &'b B,
}

/// A mutable buffer with a datatype and count of the program's choosing.
pub struct MutView<'d, 'b, D, B: ?Sized>
where
    D: 'd + Datatype,
    B: 'b + BufferMut,
{
    datatype: &'d D,
    count: usize,
    buffer: &'b mut B,
}

/// `count` elements of `t` fit in `b` (else the fatal handler).
fn checked<B: ?Sized + Described>(call: &str, b: &B, count: Count, t: &TypeMap) -> usize {
    let n = usize::try_from(count).unwrap_or_else(|_| misuse(call, "negative count"));
    let have = b.elements() * b.datatype().extent();
    if t.span(n) > have {
        misuse(
            call,
            &format!(
                "{n} elements of the datatype reach {} bytes into a buffer of {have}",
                t.span(n)
            ),
        );
    }
    n
}

impl<'d, 'b, D, B: ?Sized> View<'d, 'b, D, B>
where
    D: 'd + Datatype,
    B: 'b + Buffer,
{
    /// `buffer` seen as `count` elements of `datatype`.
    ///
    /// # Safety
    /// `datatype` must describe only initialized bytes of `buffer`'s values (no padding);
    /// a view reaching past the buffer's end is refused.
    pub unsafe fn with_count_and_datatype(
        buffer: &'b B,
        count: Count,
        datatype: &'d D,
    ) -> View<'d, 'b, D, B> {
        let count = checked("View", buffer, count, datatype.as_type_map());
        View {
            datatype,
            count,
            buffer,
        }
    }
}

impl<'d, 'b, D, B: ?Sized> MutView<'d, 'b, D, B>
where
    D: 'd + Datatype,
    B: 'b + BufferMut,
{
    /// `buffer` seen as `count` elements of `datatype`.
    ///
    /// # Safety
    /// As for [`View::with_count_and_datatype`], and any bytes received through the
    /// datatype must leave valid values in `buffer`.
    pub unsafe fn with_count_and_datatype(
        buffer: &'b mut B,
        count: Count,
        datatype: &'d D,
    ) -> MutView<'d, 'b, D, B> {
        let count = checked("MutView", &*buffer, count, datatype.as_type_map());
        MutView {
            datatype,
            count,
            buffer,
        }
    }
}

/// A view's count as a [`Count`] (it was given as one).
fn as_count(n: usize) -> Count {
    Count::try_from(n).unwrap_or(Count::MAX)
}

// SAFETY: the constructor checked that `count` elements fit in the buffer.
unsafe impl<'d, 'b, D: 'd + Datatype, B: ?Sized + 'b + Buffer> Collection for View<'d, 'b, D, B> {
    fn count(&self) -> Count {
        as_count(self.count)
    }
    fn element_count(&self) -> usize {
        self.count
    }
}
// SAFETY: the view's data starts at its buffer's.
unsafe impl<'d, 'b, D: 'd + Datatype, B: ?Sized + 'b + Buffer> Pointer for View<'d, 'b, D, B> {
    fn pointer(&self) -> *const c_void {
        self.buffer.pointer()
    }
}
// SAFETY: the three parts above.
unsafe impl<'d, 'b, D: 'd + Datatype, B: ?Sized + 'b + Buffer> Buffer for View<'d, 'b, D, B> {}

// SAFETY: as for View.
unsafe impl<'d, 'b, D: 'd + Datatype, B: ?Sized + 'b + BufferMut> Collection
    for MutView<'d, 'b, D, B>
{
    fn count(&self) -> Count {
        as_count(self.count)
    }
    fn element_count(&self) -> usize {
        self.count
    }
}
// SAFETY: the view borrows its buffer mutably.
unsafe impl<'d, 'b, D: 'd + Datatype, B: ?Sized + 'b + BufferMut> PointerMut
    for MutView<'d, 'b, D, B>
{
    fn pointer_mut(&mut self) -> *mut c_void {
        self.buffer.pointer_mut()
    }
}
// SAFETY: the view borrows its buffer mutably; validity of what lands is the promise of
// the unsafe constructor.
unsafe impl<'d, 'b, D: 'd + Datatype, B: ?Sized + 'b + BufferMut> BufferMut
    for MutView<'d, 'b, D, B>
{
}

// SAFETY: the datatype is the view's own.
unsafe impl<'d, 'b, D: 'd + Datatype, B: ?Sized + 'b + Buffer> AsDatatype for View<'d, 'b, D, B> {
    type Out = &'d D;
    fn as_datatype(&self) -> &'d D {
        self.datatype
    }
}

// SAFETY: as above.
unsafe impl<'d, 'b, D: 'd + Datatype, B: ?Sized + 'b + BufferMut> AsDatatype
    for MutView<'d, 'b, D, B>
{
    type Out = &'d D;
    fn as_datatype(&self) -> &'d D {
        self.datatype
    }
}

/// Elements of a datatype known only at run time (rsmpi's `DynBuffer`; what a user
/// operation reads).
#[derive(Clone, Copy, Debug)]
pub struct DynBuffer<'a> {
    ptr: *const u8,
    len: usize,
    dt: &'a TypeMap,
    _data: PhantomData<&'a [u8]>,
}

/// Mutable elements of a datatype known only at run time (rsmpi's `DynBufferMut`).
#[derive(Debug)]
pub struct DynBufferMut<'a> {
    ptr: *mut u8,
    len: usize,
    dt: &'a TypeMap,
    _data: PhantomData<&'a mut [u8]>,
}

/// `t`, kept for the rest of the run: a dynamic buffer borrows its datatype, and a
/// value's datatype may be built on demand. One copy per distinct layout is kept.
fn interned(t: TypeMap) -> &'static TypeMap {
    static KEPT: std::sync::Mutex<Vec<&'static TypeMap>> = std::sync::Mutex::new(Vec::new());
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(k) = kept.iter().find(|k| ***k == t) {
        return k;
    }
    let k: &'static TypeMap = Box::leak(Box::new(t));
    kept.push(k);
    k
}

/// Whether elements of `dt` at `p` are `T`s.
fn is_t<T: Equivalence>(dt: &TypeMap, p: *const u8) -> bool {
    let t = type_map_of::<T>();
    dt.is_dense()
        && t.is_dense()
        && dt.size() == std::mem::size_of::<T>()
        && dt.signature() == t.signature()
        && p.align_offset(std::mem::align_of::<T>()) == 0
}

impl<'a> DynBuffer<'a> {
    /// The elements of `buf`.
    pub fn new<T: Equivalence>(buf: &'a [T]) -> Self {
        DynBuffer {
            ptr: buf.as_ptr() as *const u8,
            len: buf.len(),
            dt: interned(type_map_of::<T>()),
            _data: PhantomData,
        }
    }
    /// `len` elements of `datatype` at `ptr`.
    ///
    /// # Safety
    /// `ptr` must hold `len` initialized elements of `datatype` for `'a`.
    pub unsafe fn from_raw<T>(ptr: *const T, len: Count, datatype: DatatypeRef<'a>) -> Self {
        DynBuffer {
            ptr: ptr as *const u8,
            len: usize::try_from(len).unwrap_or(0),
            dt: datatype.into_type_map(),
            _data: PhantomData,
        }
    }
    /// Packed bytes of elements of `dt` (a user operation's operand).
    pub(crate) fn packed(bytes: &'a [u8], dt: &TypeMap) -> Self {
        DynBuffer {
            ptr: bytes.as_ptr(),
            len: bytes.len() / dt.size().max(1),
            dt: interned(dt.packed()),
            _data: PhantomData,
        }
    }
    /// Whether the elements are `T`s.
    pub fn is<T: Equivalence>(&self) -> bool {
        is_t::<T>(self.dt, self.ptr)
    }
    /// The elements as `T`s, if they are `T`s.
    pub fn downcast<T: Equivalence>(self) -> Option<&'a [T]> {
        // SAFETY: `len` elements of T's own datatype, aligned; Equivalence (and the
        // packed copy's checked bools) make every byte pattern a valid T.
        self.is::<T>()
            .then(|| unsafe { std::slice::from_raw_parts(self.ptr as *const T, self.len) })
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// No elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The start of the elements.
    pub fn as_ptr(&self) -> *const std::ffi::c_void {
        self.ptr as *const std::ffi::c_void
    }
}

impl<'a> DynBufferMut<'a> {
    /// The elements of `buf`.
    pub fn new<T: Equivalence>(buf: &'a mut [T]) -> Self {
        DynBufferMut {
            ptr: buf.as_mut_ptr() as *mut u8,
            len: buf.len(),
            dt: interned(type_map_of::<T>()),
            _data: PhantomData,
        }
    }
    /// `len` elements of `datatype` at `ptr`.
    ///
    /// # Safety
    /// `ptr` must hold `len` elements of `datatype`, borrowed exclusively for `'a`.
    pub unsafe fn from_raw<T>(ptr: *mut T, len: Count, datatype: DatatypeRef<'a>) -> Self {
        DynBufferMut {
            ptr: ptr as *mut u8,
            len: usize::try_from(len).unwrap_or(0),
            dt: datatype.into_type_map(),
            _data: PhantomData,
        }
    }
    /// Packed bytes of elements of `dt` (a user operation's accumulator).
    pub(crate) fn packed(bytes: &'a mut [u8], dt: &TypeMap) -> Self {
        DynBufferMut {
            ptr: bytes.as_mut_ptr(),
            len: bytes.len() / dt.size().max(1),
            dt: interned(dt.packed()),
            _data: PhantomData,
        }
    }
    /// Whether the elements are `T`s.
    pub fn is<T: Equivalence>(&self) -> bool {
        is_t::<T>(self.dt, self.ptr)
    }
    /// The elements as `T`s, if they are `T`s.
    pub fn downcast<T: Equivalence>(self) -> Option<&'a mut [T]> {
        // SAFETY: as in `DynBuffer::downcast`, and the elements are borrowed exclusively.
        self.is::<T>()
            .then(|| unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut T, self.len) })
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// No elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The start of the elements.
    pub fn as_ptr(&self) -> *const std::ffi::c_void {
        self.ptr as *const std::ffi::c_void
    }
    /// The start of the elements, writable.
    pub fn as_mut_ptr(&mut self) -> *mut std::ffi::c_void {
        self.ptr as *mut std::ffi::c_void
    }
    /// The elements, read-only, for a shorter lifetime.
    pub fn reborrow(&self) -> DynBuffer<'_> {
        DynBuffer {
            ptr: self.ptr,
            len: self.len,
            dt: self.dt,
            _data: PhantomData,
        }
    }
    /// The elements, writable, for a shorter lifetime.
    pub fn reborrow_mut(&mut self) -> DynBufferMut<'_> {
        DynBufferMut {
            ptr: self.ptr,
            len: self.len,
            dt: self.dt,
            _data: PhantomData,
        }
    }
    /// The elements, read-only.
    pub fn downgrade(self) -> DynBuffer<'a> {
        DynBuffer {
            ptr: self.ptr,
            len: self.len,
            dt: self.dt,
            _data: PhantomData,
        }
    }
}

// SAFETY: `from_raw`'s caller (or `new`'s slice) guarantees `len` elements at `ptr`.
unsafe impl Collection for DynBuffer<'_> {
    fn count(&self) -> Count {
        as_count(self.len)
    }
    fn element_count(&self) -> usize {
        self.len
    }
}
// SAFETY: as above.
unsafe impl Pointer for DynBuffer<'_> {
    fn pointer(&self) -> *const c_void {
        self.ptr as *const c_void
    }
}
// SAFETY: as above.
unsafe impl Buffer for DynBuffer<'_> {}
// SAFETY: as above.
unsafe impl Collection for DynBufferMut<'_> {
    fn count(&self) -> Count {
        as_count(self.len)
    }
    fn element_count(&self) -> usize {
        self.len
    }
}
// SAFETY: as above.
unsafe impl Pointer for DynBufferMut<'_> {
    fn pointer(&self) -> *const c_void {
        self.ptr as *const c_void
    }
}
// SAFETY: borrowed exclusively for 'a.
unsafe impl PointerMut for DynBufferMut<'_> {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.ptr as *mut c_void
    }
}
// SAFETY: as above.
unsafe impl Buffer for DynBufferMut<'_> {}
// SAFETY: as above.
unsafe impl BufferMut for DynBufferMut<'_> {}
// SAFETY: the buffer's own datatype.
unsafe impl<'a> AsDatatype for DynBuffer<'a> {
    type Out = DatatypeRef<'a>;
    fn as_datatype(&self) -> DatatypeRef<'a> {
        DatatypeRef::new(self.dt)
    }
}
// SAFETY: as above.
unsafe impl<'a> AsDatatype for DynBufferMut<'a> {
    type Out = DatatypeRef<'a>;
    fn as_datatype(&self) -> DatatypeRef<'a> {
        DatatypeRef::new(self.dt)
    }
}

/// A packed copy of a buffer (data bytes only, 16-byte aligned), for the collectives,
/// whose engine moves contiguous bytes: packed from a buffer, moved, unpacked into one.
pub(crate) struct Packed {
    store: Vec<u128>,
    count: usize,
    tm: TypeMap,
    orig: TypeMap,
}

impl Packed {
    /// `count` zeroed elements of `t`, packed.
    pub(crate) fn zeroed(t: &TypeMap, count: usize) -> Packed {
        Packed {
            store: vec![0; (count * t.size()).div_ceil(16)],
            count,
            tm: t.packed(),
            orig: t.clone(),
        }
    }
    /// The data of `b`, packed.
    pub(crate) fn of<B: ?Sized + Buffer>(b: &B) -> Packed {
        // SAFETY: Buffer guarantees its elements at its pointer.
        unsafe { Packed::from_raw(b.buffer_ptr(), &b.datatype(), b.elements()) }
    }
    /// The data of a receive buffer `b` (its current contents), packed.
    pub(crate) fn of_mut<B: ?Sized + BufferMut>(b: &mut B) -> Packed {
        // SAFETY: BufferMut guarantees its elements at its pointer.
        unsafe { Packed::from_raw(b.buffer_mut_ptr(), &b.datatype(), b.elements()) }
    }
    /// `count` elements of `t` at `ptr`, packed.
    ///
    /// # Safety
    /// `ptr` holds `count` elements of `t`.
    unsafe fn from_raw(ptr: *const u8, t: &TypeMap, count: usize) -> Packed {
        let mut v = Vec::new();
        // SAFETY: the caller's promise.
        unsafe { t.pack(ptr, count, &mut v) };
        let mut p = Packed::zeroed(t, count);
        p.bytes_mut()[..v.len()].copy_from_slice(&v);
        p
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: u128 storage viewed as its bytes.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.store.as_mut_ptr() as *mut u8,
                self.store.len() * 16,
            )
        }
    }
    /// Unpacks the data into `b` (through `b`'s datatype; `bool`s are checked).
    pub(crate) fn unpack_into<B: ?Sized + BufferMut>(&mut self, b: &mut B) {
        let t = b.datatype();
        let n = (b.elements() * t.size()).min(self.count * self.orig.size());
        let data = self.bytes_mut()[..n].to_vec();
        // SAFETY: BufferMut guarantees room for its `count` elements; at most that many
        // elements' bytes are unpacked.
        unsafe { t.unpack(&data, b.buffer_mut_ptr()) };
    }
}

// SAFETY: `count` dense elements of `tm` in `store`.
unsafe impl Collection for Packed {
    fn count(&self) -> Count {
        as_count(self.count)
    }
    fn element_count(&self) -> usize {
        self.count
    }
}
// SAFETY: as above.
unsafe impl Pointer for Packed {
    fn pointer(&self) -> *const c_void {
        self.store.as_ptr() as *const c_void
    }
}
// SAFETY: raw bytes are valid in the store; they are checked when unpacked.
unsafe impl PointerMut for Packed {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.store.as_mut_ptr() as *mut c_void
    }
}
// SAFETY: the store's own packed datatype.
unsafe impl AsDatatype for Packed {
    type Out = TypeMap;
    fn as_datatype(&self) -> TypeMap {
        self.tm.clone()
    }
}
// SAFETY: the parts above.
unsafe impl Buffer for Packed {}
// SAFETY: as above.
unsafe impl BufferMut for Packed {}
