//! Reduction operations on the predefined types.
//!
//! Contract: `apply(op, dt, acc, src)` sets `acc[i] = acc[i] op src[i]` element-wise over
//! packed bytes whose layout follows `dt`'s type signature. All system operations are
//! commutative and associative (floating point up to rounding). Logical operations treat
//! non-zero as true; bitwise operations on floats are rejected with an error.

use crate::datatype::{Primitive, TypeMap};
use crate::error::{Error, Result};

/// The predefined reduction operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpKind {
    /// Sum.
    Sum = 1,
    /// Product.
    Product = 2,
    /// Maximum.
    Max = 3,
    /// Minimum.
    Min = 4,
    /// Logical and.
    LogicalAnd = 5,
    /// Logical or.
    LogicalOr = 6,
    /// Logical exclusive or.
    LogicalXor = 7,
    /// Bitwise and.
    BitwiseAnd = 8,
    /// Bitwise or.
    BitwiseOr = 9,
    /// Bitwise exclusive or.
    BitwiseXor = 10,
}

impl OpKind {
    /// The operation whose discriminant is `c`.
    pub fn from_code(c: u8) -> Option<OpKind> {
        use OpKind::*;
        [
            Sum, Product, Max, Min, LogicalAnd, LogicalOr, LogicalXor, BitwiseAnd, BitwiseOr,
            BitwiseXor,
        ]
        .into_iter()
        .find(|o| *o as u8 == c)
    }
}

/// `acc[i] = f(acc[i], src[i])` over elements of type `$t` (a tight loop per operation, so
/// the compiler can vectorize it).
macro_rules! lanes {
    ($t:ty, $acc:expr, $src:expr, |$x:ident, $y:ident| $e:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        let acc: &mut [u8] = $acc;
        let src: &[u8] = $src;
        let n = acc.len().min(src.len()) / N;
        let (a, s) = (acc.as_mut_ptr(), src.as_ptr());
        // An index loop over unaligned loads and stores, which the compiler turns into
        // vector code (the chunk iterators' zip did not: an 8 KiB i8 sum took 2.2 µs).
        for i in 0..n {
            // SAFETY: i < n, so bytes i·N .. i·N + N lie inside both slices; unaligned
            // reads and writes of plain integers and floats.
            unsafe {
                let $x = (a.add(i * N) as *const $t).read_unaligned();
                let $y = (s.add(i * N) as *const $t).read_unaligned();
                let r: $t = $e;
                (a.add(i * N) as *mut $t).write_unaligned(r);
            }
        }
        Ok(())
    }};
}

macro_rules! int_op {
    ($t:ty, $op:expr, $acc:expr, $src:expr) => {{
        match $op {
            OpKind::Sum => lanes!($t, $acc, $src, |x, y| x.wrapping_add(y)),
            OpKind::Product => lanes!($t, $acc, $src, |x, y| x.wrapping_mul(y)),
            OpKind::Max => lanes!($t, $acc, $src, |x, y| x.max(y)),
            OpKind::Min => lanes!($t, $acc, $src, |x, y| x.min(y)),
            OpKind::LogicalAnd => lanes!($t, $acc, $src, |x, y| ((x != 0) && (y != 0)) as $t),
            OpKind::LogicalOr => lanes!($t, $acc, $src, |x, y| ((x != 0) || (y != 0)) as $t),
            OpKind::LogicalXor => lanes!($t, $acc, $src, |x, y| ((x != 0) != (y != 0)) as $t),
            OpKind::BitwiseAnd => lanes!($t, $acc, $src, |x, y| x & y),
            OpKind::BitwiseOr => lanes!($t, $acc, $src, |x, y| x | y),
            OpKind::BitwiseXor => lanes!($t, $acc, $src, |x, y| x ^ y),
        }
    }};
}

macro_rules! float_op {
    ($t:ty, $op:expr, $acc:expr, $src:expr) => {{
        match $op {
            OpKind::Sum => lanes!($t, $acc, $src, |x, y| x + y),
            OpKind::Product => lanes!($t, $acc, $src, |x, y| x * y),
            OpKind::Max => lanes!($t, $acc, $src, |x, y| x.max(y)),
            OpKind::Min => lanes!($t, $acc, $src, |x, y| x.min(y)),
            OpKind::LogicalAnd => {
                lanes!($t, $acc, $src, |x, y| ((x != 0.0) && (y != 0.0)) as u8
                    as $t)
            }
            OpKind::LogicalOr => {
                lanes!($t, $acc, $src, |x, y| ((x != 0.0) || (y != 0.0)) as u8
                    as $t)
            }
            OpKind::LogicalXor => {
                lanes!($t, $acc, $src, |x, y| ((x != 0.0) != (y != 0.0)) as u8
                    as $t)
            }
            _ => Err(Error::InvalidOp(format!("{:?} on floating point", $op))),
        }
    }};
}

/// Complex numbers (pairs of floats): sum and product only, as MPI.
macro_rules! complex_op {
    ($t:ty, $op:expr, $acc:expr, $src:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        match $op {
            OpKind::Sum => float_op!($t, $op, $acc, $src),
            OpKind::Product => {
                for (a, s) in $acc.chunks_exact_mut(2 * N).zip($src.chunks_exact(2 * N)) {
                    let f = |b: &[u8]| <$t>::from_ne_bytes(b.try_into().unwrap_or([0; N]));
                    let (ar, ai, sr, si) = (f(&a[..N]), f(&a[N..]), f(&s[..N]), f(&s[N..]));
                    a[..N].copy_from_slice(&(ar * sr - ai * si).to_ne_bytes());
                    a[N..].copy_from_slice(&(ar * si + ai * sr).to_ne_bytes());
                }
                Ok(())
            }
            _ => Err(Error::InvalidOp(format!("{:?} on complex numbers", $op))),
        }
    }};
}

fn apply_prim(op: OpKind, p: Primitive, acc: &mut [u8], src: &[u8]) -> Result<()> {
    match p {
        Primitive::U8 => int_op!(u8, op, acc, src),
        Primitive::I8 => int_op!(i8, op, acc, src),
        Primitive::U16 => int_op!(u16, op, acc, src),
        Primitive::I16 => int_op!(i16, op, acc, src),
        Primitive::U32 => int_op!(u32, op, acc, src),
        Primitive::I32 => int_op!(i32, op, acc, src),
        Primitive::U64 => int_op!(u64, op, acc, src),
        Primitive::I64 => int_op!(i64, op, acc, src),
        Primitive::F32 => float_op!(f32, op, acc, src),
        Primitive::F64 => float_op!(f64, op, acc, src),
        // MPI_C_BOOL takes the logical operations only (so results stay 0 or 1).
        Primitive::Bool => match op {
            OpKind::LogicalAnd | OpKind::LogicalOr | OpKind::LogicalXor => {
                int_op!(u8, op, acc, src)
            }
            _ => Err(Error::InvalidOp(format!("{op:?} on bool"))),
        },
        Primitive::C32 => complex_op!(f32, op, acc, src),
        Primitive::C64 => complex_op!(f64, op, acc, src),
    }
}

/// `acc = acc op src` over packed elements of `dt` (both slices the same length).
pub fn apply(op: OpKind, dt: &TypeMap, acc: &mut [u8], src: &[u8]) -> Result<()> {
    let n = acc.len().min(src.len());
    let sig = dt.signature();
    if let [(p, _)] = sig {
        // One primitive type throughout: one pass.
        return apply_prim(op, *p, &mut acc[..n], &src[..n]);
    }
    let mut pos = 0;
    while pos < n {
        for &(p, k) in sig {
            let len = (p.size() * k).min(n - pos);
            apply_prim(op, p, &mut acc[pos..pos + len], &src[pos..pos + len])?;
            pos += len;
            if pos >= n {
                break;
            }
        }
        if dt.size() == 0 {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::Equivalence;

    fn bytes<T: Copy>(v: &[T]) -> Vec<u8> {
        // SAFETY: reading the bytes of plain numeric values.
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
            .to_vec()
    }

    #[test]
    fn ops_on_ints_and_floats() {
        let mut a = bytes(&[1i32, -5, 7]);
        apply(
            OpKind::Sum,
            &i32::equivalent_datatype(),
            &mut a,
            &bytes(&[2i32, 5, -1]),
        )
        .unwrap();
        assert_eq!(a, bytes(&[3i32, 0, 6]));
        let mut f = bytes(&[1.5f64, -2.0]);
        apply(
            OpKind::Max,
            &f64::equivalent_datatype(),
            &mut f,
            &bytes(&[0.5f64, 3.0]),
        )
        .unwrap();
        assert_eq!(f, bytes(&[1.5f64, 3.0]));
        assert!(apply(
            OpKind::BitwiseOr,
            &f64::equivalent_datatype(),
            &mut f,
            &bytes(&[0.0f64, 0.0])
        )
        .is_err());
        let mut b = bytes(&[0b1100u8]);
        apply(
            OpKind::BitwiseXor,
            &u8::equivalent_datatype(),
            &mut b,
            &[0b1010],
        )
        .unwrap();
        assert_eq!(b, [0b0110]);
    }
}
