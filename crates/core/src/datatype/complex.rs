//! `num_complex::Complex<f32>` and `Complex<f64>` as message elements (the `complex`
//! feature; rsmpi's `complex_datatype`): the predefined complex types, so reductions sum
//! and multiply them as complex numbers.

use super::{DatatypeRef, Equivalence, Primitive, SystemDatatype, TypeMap};
use num_complex::Complex;

// SAFETY: `Complex<T>` is `repr(C)` { re: T, im: T }: no padding, every bit pattern of
// two floats is a valid value.
unsafe impl Equivalence for Complex<f32> {
    type Out = SystemDatatype;
    fn equivalent_datatype() -> SystemDatatype {
        DatatypeRef::new(TypeMap::primitive_ref(Primitive::C32))
    }
}

// SAFETY: as above.
unsafe impl Equivalence for Complex<f64> {
    type Out = SystemDatatype;
    fn equivalent_datatype() -> SystemDatatype {
        DatatypeRef::new(TypeMap::primitive_ref(Primitive::C64))
    }
}
