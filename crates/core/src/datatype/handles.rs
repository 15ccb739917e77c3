//! rsmpi's datatype handles: [`UserDatatype`], [`UncommittedUserDatatype`],
//! [`DatatypeRef`], [`UncommittedDatatypeRef`], and the traits [`UncommittedDatatype`]
//! and [`Datatype`].
//!
//! Contract: every handle holds (or borrows) a [`TypeMap`]; committing is a promotion (a
//! type map is usable from the moment it is built), `dup` is a cheap clone. The
//! constructors take rsmpi's arguments (`Count`s in elements of the old type, `Address`es
//! in bytes); a negative count, length or displacement, or slices of different lengths,
//! is a usage error for the fatal handler (rsmpi asserts), never a panic.

use super::typemap::TypeMap;
use crate::{Address, Count};
use std::marker::PhantomData;

/// A possibly uncommitted datatype: one that can build other datatypes.
pub trait UncommittedDatatype {
    /// The type `dup` returns.
    type DuplicatedDatatype;
    /// A new datatype with the same layout (`MPI_Type_dup`).
    fn dup(&self) -> Self::DuplicatedDatatype;
    /// The layout (phalanx's core description).
    #[doc(hidden)]
    fn as_type_map(&self) -> &TypeMap;
}

/// A committed datatype: one that can describe message buffers.
pub trait Datatype: UncommittedDatatype {}

impl<D: UncommittedDatatype + ?Sized> UncommittedDatatype for &D {
    type DuplicatedDatatype = D::DuplicatedDatatype;
    fn dup(&self) -> Self::DuplicatedDatatype {
        (**self).dup()
    }
    fn as_type_map(&self) -> &TypeMap {
        (**self).as_type_map()
    }
}
impl<D: Datatype + ?Sized> Datatype for &D {}

impl UncommittedDatatype for TypeMap {
    type DuplicatedDatatype = UserDatatype;
    fn dup(&self) -> UserDatatype {
        UserDatatype(self.clone())
    }
    fn as_type_map(&self) -> &TypeMap {
        self
    }
}
impl Datatype for TypeMap {}

/// A borrowed committed datatype; the predefined ones are `DatatypeRef<'static>`.
#[derive(Copy, Clone, Debug)]
pub struct DatatypeRef<'a>(&'a TypeMap);

/// A predefined datatype (`MPI_INT32_T`, `MPI_DOUBLE`, …).
pub type SystemDatatype = DatatypeRef<'static>;

/// A borrowed, possibly uncommitted datatype.
#[derive(Copy, Clone, Debug)]
pub struct UncommittedDatatypeRef<'a>(&'a TypeMap, PhantomData<&'a ()>);

/// A committed datatype the program built.
#[derive(Clone, Debug)]
pub struct UserDatatype(TypeMap);

/// A datatype the program built, not yet committed: it can build other datatypes, and
/// [`UncommittedUserDatatype::commit`] makes it usable for messages.
#[derive(Clone, Debug)]
pub struct UncommittedUserDatatype(TypeMap);

impl<'a> DatatypeRef<'a> {
    pub(crate) fn new(t: &'a TypeMap) -> Self {
        DatatypeRef(t)
    }
    /// The borrowed type map, for as long as the handle's borrow.
    pub(crate) fn into_type_map(self) -> &'a TypeMap {
        self.0
    }
}

impl UncommittedDatatype for DatatypeRef<'_> {
    type DuplicatedDatatype = UserDatatype;
    fn dup(&self) -> UserDatatype {
        UserDatatype(self.0.clone())
    }
    fn as_type_map(&self) -> &TypeMap {
        self.0
    }
}
impl Datatype for DatatypeRef<'_> {}

impl UncommittedDatatype for UncommittedDatatypeRef<'_> {
    type DuplicatedDatatype = UncommittedUserDatatype;
    fn dup(&self) -> UncommittedUserDatatype {
        UncommittedUserDatatype(self.0.clone())
    }
    fn as_type_map(&self) -> &TypeMap {
        self.0
    }
}

impl UncommittedDatatype for UserDatatype {
    type DuplicatedDatatype = UserDatatype;
    fn dup(&self) -> UserDatatype {
        self.clone()
    }
    fn as_type_map(&self) -> &TypeMap {
        &self.0
    }
}
impl Datatype for UserDatatype {}

impl UncommittedDatatype for UncommittedUserDatatype {
    type DuplicatedDatatype = UncommittedUserDatatype;
    fn dup(&self) -> UncommittedUserDatatype {
        self.clone()
    }
    fn as_type_map(&self) -> &TypeMap {
        &self.0
    }
}

impl<'a> From<DatatypeRef<'a>> for UncommittedDatatypeRef<'a> {
    fn from(d: DatatypeRef<'a>) -> Self {
        UncommittedDatatypeRef(d.0, PhantomData)
    }
}
impl<'a> From<&'a UserDatatype> for DatatypeRef<'a> {
    fn from(d: &'a UserDatatype) -> Self {
        DatatypeRef(&d.0)
    }
}
impl<'a> From<&'a UserDatatype> for UncommittedDatatypeRef<'a> {
    fn from(d: &'a UserDatatype) -> Self {
        UncommittedDatatypeRef(&d.0, PhantomData)
    }
}
impl<'a> From<&'a UncommittedUserDatatype> for UncommittedDatatypeRef<'a> {
    fn from(d: &'a UncommittedUserDatatype) -> Self {
        UncommittedDatatypeRef(&d.0, PhantomData)
    }
}

macro_rules! deref_to_type_map {
    ($($t:ty),*) => {$(
        impl std::ops::Deref for $t {
            type Target = TypeMap;
            fn deref(&self) -> &TypeMap {
                self.as_type_map()
            }
        }
    )*};
}
deref_to_type_map!(
    DatatypeRef<'_>,
    UncommittedDatatypeRef<'_>,
    UserDatatype,
    UncommittedUserDatatype
);

/// The type map, or the fatal handler for a usage error in `call`.
fn built(call: &str, r: Result<TypeMap, String>) -> TypeMap {
    r.unwrap_or_else(|e| super::misuse(call, &e))
}

fn wide(v: &[Count]) -> Vec<i64> {
    v.iter().map(|&x| i64::from(x)).collect()
}

fn wide_addr(v: &[Address]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

impl UncommittedUserDatatype {
    /// `count` copies of `oldtype` (`MPI_Type_contiguous`).
    pub fn contiguous<D: UncommittedDatatype>(count: Count, oldtype: &D) -> Self {
        let t = TypeMap::try_contiguous(count.into(), oldtype.as_type_map());
        UncommittedUserDatatype(built("UserDatatype::contiguous", t))
    }
    /// `count` blocks of `blocklength` copies of `oldtype`, block starts `stride` copies
    /// apart (`MPI_Type_vector`).
    pub fn vector<D: UncommittedDatatype>(
        count: Count,
        blocklength: Count,
        stride: Count,
        oldtype: &D,
    ) -> Self {
        let t = TypeMap::try_vector(
            count.into(),
            blocklength.into(),
            stride.into(),
            oldtype.as_type_map(),
        );
        UncommittedUserDatatype(built("UserDatatype::vector", t))
    }
    /// Like `vector` with `stride` in bytes (`MPI_Type_create_hvector`).
    pub fn heterogeneous_vector<D: UncommittedDatatype>(
        count: Count,
        blocklength: Count,
        stride: Address,
        oldtype: &D,
    ) -> Self {
        let t = TypeMap::try_hvector(
            count.into(),
            blocklength.into(),
            stride as i64,
            oldtype.as_type_map(),
        );
        UncommittedUserDatatype(built("UserDatatype::heterogeneous_vector", t))
    }
    /// Block i is `blocklengths[i]` copies of `oldtype` at `displacements[i]` copies
    /// (`MPI_Type_indexed`).
    pub fn indexed<D: UncommittedDatatype>(
        blocklengths: &[Count],
        displacements: &[Count],
        oldtype: &D,
    ) -> Self {
        let t = TypeMap::try_indexed(
            &wide(blocklengths),
            &wide(displacements),
            oldtype.as_type_map(),
        );
        UncommittedUserDatatype(built("UserDatatype::indexed", t))
    }
    /// Like `indexed` with displacements in bytes (`MPI_Type_create_hindexed`).
    pub fn heterogeneous_indexed<D: UncommittedDatatype>(
        blocklengths: &[Count],
        displacements: &[Address],
        oldtype: &D,
    ) -> Self {
        let t = TypeMap::try_hindexed(
            &wide(blocklengths),
            &wide_addr(displacements),
            oldtype.as_type_map(),
        );
        UncommittedUserDatatype(built("UserDatatype::heterogeneous_indexed", t))
    }
    /// Blocks of `blocklength` copies of `oldtype` at `displacements` copies
    /// (`MPI_Type_create_indexed_block`).
    pub fn indexed_block<D: UncommittedDatatype>(
        blocklength: Count,
        displacements: &[Count],
        oldtype: &D,
    ) -> Self {
        let bl = vec![i64::from(blocklength); displacements.len()];
        let t = TypeMap::try_indexed(&bl, &wide(displacements), oldtype.as_type_map());
        UncommittedUserDatatype(built("UserDatatype::indexed_block", t))
    }
    /// Like `indexed_block` with displacements in bytes
    /// (`MPI_Type_create_hindexed_block`).
    pub fn heterogeneous_indexed_block<D: UncommittedDatatype>(
        blocklength: Count,
        displacements: &[Address],
        oldtype: &D,
    ) -> Self {
        let bl = vec![i64::from(blocklength); displacements.len()];
        let t = TypeMap::try_hindexed(&bl, &wide_addr(displacements), oldtype.as_type_map());
        UncommittedUserDatatype(built("UserDatatype::heterogeneous_indexed_block", t))
    }
    /// Block i is `blocklengths[i]` copies of `types[i]` at byte `displacements[i]`, in
    /// the order given (`MPI_Type_create_struct`).
    pub fn structured<D: UncommittedDatatype>(
        blocklengths: &[Count],
        displacements: &[Address],
        types: &[D],
    ) -> Self {
        let maps: Vec<&TypeMap> = types.iter().map(|t| t.as_type_map()).collect();
        let t = TypeMap::try_structured(&wide(blocklengths), &wide_addr(displacements), &maps);
        UncommittedUserDatatype(built("UserDatatype::structured", t))
    }
    /// Commits the datatype (`MPI_Type_commit`).
    pub fn commit(self) -> UserDatatype {
        UserDatatype(self.0)
    }
    /// A borrowed handle.
    pub fn as_ref(&self) -> UncommittedDatatypeRef<'_> {
        self.into()
    }
}

impl UserDatatype {
    /// `UncommittedUserDatatype::contiguous`, committed.
    pub fn contiguous<D: UncommittedDatatype>(count: Count, oldtype: &D) -> Self {
        UncommittedUserDatatype::contiguous(count, oldtype).commit()
    }
    /// `UncommittedUserDatatype::vector`, committed.
    pub fn vector<D: UncommittedDatatype>(
        count: Count,
        blocklength: Count,
        stride: Count,
        oldtype: &D,
    ) -> Self {
        UncommittedUserDatatype::vector(count, blocklength, stride, oldtype).commit()
    }
    /// `UncommittedUserDatatype::heterogeneous_vector`, committed.
    pub fn heterogeneous_vector<D: UncommittedDatatype>(
        count: Count,
        blocklength: Count,
        stride: Address,
        oldtype: &D,
    ) -> Self {
        UncommittedUserDatatype::heterogeneous_vector(count, blocklength, stride, oldtype).commit()
    }
    /// `UncommittedUserDatatype::indexed`, committed.
    pub fn indexed<D: UncommittedDatatype>(
        blocklengths: &[Count],
        displacements: &[Count],
        oldtype: &D,
    ) -> Self {
        UncommittedUserDatatype::indexed(blocklengths, displacements, oldtype).commit()
    }
    /// `UncommittedUserDatatype::heterogeneous_indexed`, committed.
    pub fn heterogeneous_indexed<D: UncommittedDatatype>(
        blocklengths: &[Count],
        displacements: &[Address],
        oldtype: &D,
    ) -> Self {
        UncommittedUserDatatype::heterogeneous_indexed(blocklengths, displacements, oldtype)
            .commit()
    }
    /// `UncommittedUserDatatype::indexed_block`, committed.
    pub fn indexed_block<D: UncommittedDatatype>(
        blocklength: Count,
        displacements: &[Count],
        oldtype: &D,
    ) -> Self {
        UncommittedUserDatatype::indexed_block(blocklength, displacements, oldtype).commit()
    }
    /// `UncommittedUserDatatype::heterogeneous_indexed_block`, committed.
    pub fn heterogeneous_indexed_block<D: UncommittedDatatype>(
        blocklength: Count,
        displacements: &[Address],
        oldtype: &D,
    ) -> Self {
        UncommittedUserDatatype::heterogeneous_indexed_block(blocklength, displacements, oldtype)
            .commit()
    }
    /// `UncommittedUserDatatype::structured`, committed.
    pub fn structured<D: UncommittedDatatype>(
        blocklengths: &[Count],
        displacements: &[Address],
        types: &[D],
    ) -> Self {
        UncommittedUserDatatype::structured(blocklengths, displacements, types).commit()
    }
    /// A borrowed handle.
    pub fn as_ref(&self) -> DatatypeRef<'_> {
        self.into()
    }
}

/// The address of `x`, for the displacements of datatype constructors (`MPI_Get_address`).
pub fn address_of<T>(x: &T) -> Address {
    x as *const T as Address
}
