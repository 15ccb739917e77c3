//! Predefined reduction operations applied locally on packed data: `MPI_Reduce_local`,
//! `MPI_Op_commutative`, and the [`Reducer`] the reductions that do not go to the core
//! (user operations, `MPI_MINLOC`/`MPI_MAXLOC`, derived datatypes) fold with.
//!
//! Contract: data is packed (the datatype's bytes in type-map order). A predefined
//! operation on a derived datatype computes on the datatype's basic elements, which must
//! all be one predefined type ([`crate::types::Layout::prim`]); otherwise `MPI_ERR_TYPE`.
//! `result = in op inout`, as MPI defines it. Integer arithmetic wraps; logical
//! operations treat non-zero as true; bitwise operations on floating point and
//! `MINLOC`/`MAXLOC` on anything but the pair types are `MPI_ERR_OP`. MINLOC/MAXLOC pick
//! the smaller index on ties.

use crate::consts::*;
use crate::state::{self, UserFn};
use crate::types::{any_layout, pack, unpack, Layout};
use crate::{count, err, export, guard, out, CResult};
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;

/// What a reduction folds with.
#[derive(Clone, Copy)]
pub enum Reducer {
    /// A user function (`MPI_Op_create`).
    User(UserFn),
    /// A predefined operation.
    Builtin(Op),
}

/// The reducer behind operation handle `h`.
pub fn reducer(h: Handle) -> CResult<Reducer> {
    if let Some(o) = op(h as usize) {
        return Ok(Reducer::Builtin(o));
    }
    state::with(|s| s.ops.get(&(h as usize)).map(|e| Reducer::User(e.0)))
        .ok_or_else(|| err(MPI_ERR_OP, format!("invalid operation {h:p}")))
}

/// Whether the core reduces `dt` with `op` itself (a predefined numeric type and one of
/// the ten arithmetic, logical and bitwise operations).
pub fn core_supported(op_h: Handle, dt: Handle) -> bool {
    let (Some(o), Some(d)) = (op(op_h as usize), datatype(dt as usize)) else {
        return false;
    };
    let float = matches!(d.kind, Kind::F32 | Kind::F64);
    match o {
        Op::Sum | Op::Prod | Op::Min | Op::Max | Op::Land | Op::Lor | Op::Lxor => {
            d.kind != Kind::Opaque
        }
        Op::Band | Op::Bor | Op::Bxor => d.kind != Kind::Opaque && !float,
        _ => false,
    }
}

trait Elem: Copy + PartialOrd {
    const N: usize;
    fn rd(b: &[u8]) -> Self;
    fn wr(self, b: &mut [u8]);
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn truth(self) -> bool;
    fn from_bool(b: bool) -> Self;
    fn bits(self, o: Self, op: Op) -> Option<Self>;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const N: usize = size_of::<$t>();
            fn rd(b: &[u8]) -> Self { <$t>::from_ne_bytes(b[..Self::N].try_into().unwrap()) }
            fn wr(self, b: &mut [u8]) { b[..Self::N].copy_from_slice(&self.to_ne_bytes()) }
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn truth(self) -> bool { self != 0 }
            fn from_bool(b: bool) -> Self { b as $t }
            fn bits(self, o: Self, op: Op) -> Option<Self> {
                Some(match op { Op::Band => self & o, Op::Bor => self | o, _ => self ^ o })
            }
        }
    )*};
}
int_elem!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const N: usize = size_of::<$t>();
            fn rd(b: &[u8]) -> Self { <$t>::from_ne_bytes(b[..Self::N].try_into().unwrap()) }
            fn wr(self, b: &mut [u8]) { b[..Self::N].copy_from_slice(&self.to_ne_bytes()) }
            fn add(self, o: Self) -> Self { self + o }
            fn mul(self, o: Self) -> Self { self * o }
            fn truth(self) -> bool { self != 0.0 }
            fn from_bool(b: bool) -> Self { if b { 1.0 } else { 0.0 } }
            fn bits(self, _: Self, _: Op) -> Option<Self> { None }
        }
    )*};
}
float_elem!(f32, f64);

/// An x87 80-bit extended `long double` (x86-64), compared through `f64`.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
struct F80(f64);

impl Elem for F80 {
    const N: usize = 10;
    fn rd(b: &[u8]) -> Self {
        let m = u64::from_le_bytes(b[..8].try_into().unwrap());
        let se = u16::from_le_bytes(b[8..10].try_into().unwrap());
        let e = (se & 0x7fff) as i32;
        let v = if e == 0 && m == 0 {
            0.0
        } else {
            m as f64 * 2f64.powi(e - 16383 - 63)
        };
        F80(if se & 0x8000 != 0 { -v } else { v })
    }
    fn wr(self, _: &mut [u8]) {}
    fn add(self, o: Self) -> Self {
        F80(self.0 + o.0)
    }
    fn mul(self, o: Self) -> Self {
        F80(self.0 * o.0)
    }
    fn truth(self) -> bool {
        self.0 != 0.0
    }
    fn from_bool(b: bool) -> Self {
        F80(b as u8 as f64)
    }
    fn bits(self, _: Self, _: Op) -> Option<Self> {
        None
    }
}

fn bad_op(o: Op, what: &str) -> crate::CErr {
    err(MPI_ERR_OP, format!("{o:?} is not defined on {what}"))
}

/// `inout[i] = in[i] op inout[i]` on packed elements of `T`.
fn scalar<T: Elem>(o: Op, inb: &[u8], io: &mut [u8]) -> CResult {
    for (a, b) in inb.chunks_exact(T::N).zip(io.chunks_exact_mut(T::N)) {
        let (x, y) = (T::rd(a), T::rd(b));
        let r = match o {
            Op::Sum => x.add(y),
            Op::Prod => x.mul(y),
            Op::Min => {
                if x < y {
                    x
                } else {
                    y
                }
            }
            Op::Max => {
                if x > y {
                    x
                } else {
                    y
                }
            }
            Op::Land => T::from_bool(x.truth() && y.truth()),
            Op::Lor => T::from_bool(x.truth() || y.truth()),
            Op::Lxor => T::from_bool(x.truth() != y.truth()),
            Op::Band | Op::Bor | Op::Bxor => {
                x.bits(y, o).ok_or_else(|| bad_op(o, "floating point"))?
            }
            Op::Replace => x,
            Op::NoOp => y,
            Op::MinLoc | Op::MaxLoc => return Err(bad_op(o, "this datatype (not a pair type)")),
        };
        r.wr(b);
    }
    Ok(())
}

/// MINLOC/MAXLOC on pairs (value `V` at 0, index `I` at `at`) of `size` bytes.
fn pairs<V: Elem, I: Elem>(o: Op, at: usize, size: usize, inb: &[u8], io: &mut [u8]) -> CResult {
    for (a, b) in inb.chunks_exact(size).zip(io.chunks_exact_mut(size)) {
        let (xv, xi, yv, yi) = (V::rd(a), I::rd(&a[at..]), V::rd(b), I::rd(&b[at..]));
        let take_x = match o {
            Op::MinLoc => xv < yv || (xv == yv && xi < yi),
            Op::MaxLoc => xv > yv || (xv == yv && xi < yi),
            Op::Replace => true,
            Op::NoOp => false,
            _ => return Err(bad_op(o, "a pair type")),
        };
        if take_x {
            b.copy_from_slice(a);
        }
    }
    Ok(())
}

/// Complex numbers (two `T`): sum and product.
fn complex<T: Elem + std::ops::Sub<Output = T>>(o: Op, inb: &[u8], io: &mut [u8]) -> CResult {
    let n = 2 * T::N;
    for (a, b) in inb.chunks_exact(n).zip(io.chunks_exact_mut(n)) {
        let (xr, xi, yr, yi) = (T::rd(a), T::rd(&a[T::N..]), T::rd(b), T::rd(&b[T::N..]));
        let (r, i) = match o {
            Op::Sum => (xr.add(yr), xi.add(yi)),
            Op::Prod => (xr.mul(yr) - xi.mul(yi), xr.mul(yi).add(xi.mul(yr))),
            Op::Replace => (xr, xi),
            Op::NoOp => (yr, yi),
            _ => return Err(bad_op(o, "complex numbers")),
        };
        r.wr(b);
        i.wr(&mut b[T::N..]);
    }
    Ok(())
}

/// `inout = in op inout` on packed elements of predefined type `prim`.
pub fn apply_builtin(o: Op, prim: usize, inb: &[u8], io: &mut [u8]) -> CResult {
    match prim {
        0x228 => return pairs::<f32, i32>(o, 4, 8, inb, io),
        0x229 => return pairs::<f64, i32>(o, 8, 16, inb, io),
        0x22a => return pairs::<i64, i32>(o, 8, 16, inb, io),
        0x22b | 0x232 => return pairs::<i32, i32>(o, 4, 8, inb, io),
        0x22c => return pairs::<i16, i32>(o, 4, 8, inb, io),
        0x230 => return pairs::<f32, f32>(o, 4, 8, inb, io),
        0x231 => return pairs::<f64, f64>(o, 8, 16, inb, io),
        0x22d if cfg!(target_arch = "x86_64") => return pairs::<F80, i32>(o, 16, 32, inb, io),
        0x212 | 0x213 | 0x21b | 0x2db => return complex::<f32>(o, inb, io),
        0x216 | 0x217 | 0x21d => return complex::<f64>(o, inb, io),
        _ => {}
    }
    let d = datatype(prim).ok_or_else(|| err(MPI_ERR_TYPE, "invalid datatype"))?;
    match d.kind {
        Kind::I8 => scalar::<i8>(o, inb, io),
        Kind::U8 => scalar::<u8>(o, inb, io),
        Kind::I16 => scalar::<i16>(o, inb, io),
        Kind::U16 => scalar::<u16>(o, inb, io),
        Kind::I32 => scalar::<i32>(o, inb, io),
        Kind::U32 => scalar::<u32>(o, inb, io),
        Kind::I64 => scalar::<i64>(o, inb, io),
        Kind::U64 => scalar::<u64>(o, inb, io),
        Kind::F32 => scalar::<f32>(o, inb, io),
        Kind::F64 => scalar::<f64>(o, inb, io),
        Kind::Opaque if matches!(o, Op::Replace) => {
            io.copy_from_slice(inb);
            Ok(())
        }
        Kind::Opaque if matches!(o, Op::NoOp) => Ok(()),
        Kind::Opaque => Err(err(
            MPI_ERR_OP,
            format!("{o:?} is not supported on this datatype"),
        )),
    }
}

/// Checks, before any communication, that `red` can fold datatype layout `l` (so that
/// every member fails alike instead of the root failing mid-collective).
pub fn validate(red: &Reducer, l: &Layout) -> CResult {
    let Reducer::Builtin(o) = red else {
        return Ok(());
    };
    let prim = l.prim.ok_or_else(|| {
        err(
            MPI_ERR_TYPE,
            "a predefined operation needs a datatype of one basic type",
        )
    })?;
    let size = datatype(prim).map_or(0, |d| d.size);
    let (a, mut b) = (vec![0u8; size], vec![0u8; size]);
    apply_builtin(*o, prim, &a, &mut b)
}

/// An image of `n` elements of `l` as a user function sees them: a 16-byte-aligned
/// buffer address (element `i` at `base + i × extent`) with room for every byte of the
/// elements' data, wherever the type map puts it relative to the bounds
/// ([`Layout::data_span`]: a resized type's data may lie below its lower bound or past
/// its upper bound, and its extent may be negative).
struct Image {
    mem: Vec<u128>,
    /// Bytes of `mem` before the buffer address (data at negative offsets).
    pre: usize,
}

impl Image {
    fn new(l: &Layout, n: usize) -> Image {
        let (lo, hi) = l.data_span(n);
        let pre = lo.min(0).unsigned_abs().next_multiple_of(16);
        let bytes = pre + hi.max(0) as usize;
        Image {
            mem: vec![0; bytes.div_ceil(16)],
            pre,
        }
    }
    /// The buffer address: element 0 (inside `mem`, or one past its end when all the
    /// data lies below it).
    fn base(&mut self) -> *mut c_void {
        (self.mem.as_mut_ptr() as *mut u8).wrapping_add(self.pre) as *mut c_void
    }
}

impl Reducer {
    /// `inout = in op inout` on `n` packed elements of datatype `dt` (layout `l`).
    pub fn fold(&self, dt: Handle, l: &Layout, n: usize, inb: &[u8], io: &mut [u8]) -> CResult {
        match *self {
            Reducer::Builtin(o) => {
                let prim = l.prim.ok_or_else(|| {
                    err(
                        MPI_ERR_TYPE,
                        "a predefined operation needs a datatype of one basic type",
                    )
                })?;
                apply_builtin(o, prim, inb, io)
            }
            Reducer::User(f) => {
                let mut a = Image::new(l, n);
                let mut b = Image::new(l, n);
                // SAFETY: each image holds every data byte of n elements of l.
                unsafe {
                    unpack(l, inb, a.base(), n)?;
                    unpack(l, io, b.base(), n)?;
                }
                let mut len =
                    c_int::try_from(n).map_err(|_| err(MPI_ERR_COUNT, "count too large"))?;
                let mut dth = dt;
                // SAFETY: the function reads n elements at its first argument and
                // updates n at its second; both images hold n elements of the datatype.
                unsafe { f(a.base(), b.base(), &mut len, &mut dth) };
                // SAFETY: as above.
                let v = unsafe { pack(l, b.base(), n)? };
                io.copy_from_slice(&v);
                Ok(())
            }
        }
    }
}

export!(MPI_Reduce_local, PMPI_Reduce_local,
        (inbuf: *const c_void, inoutbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle) -> c_int {
    guard("MPI_Reduce_local", WORLD, || {
        let r = reducer(op)?;
        let l = any_layout(datatype)?;
        let n = count(cnt)?;
        // SAFETY: both buffers hold cnt elements of the datatype (MPI contract).
        unsafe {
            let a = pack(&l, inbuf, n)?;
            let mut b = pack(&l, inoutbuf, n)?;
            r.fold(datatype, &l, n, &a, &mut b)?;
            unpack(&l, &b, inoutbuf, n)
        }
    })
});

export!(MPI_Op_commutative, PMPI_Op_commutative, (op: Handle, commute: *mut c_int) -> c_int {
    guard("MPI_Op_commutative", WORLD, || {
        let c = match reducer(op)? {
            Reducer::Builtin(_) => true,
            Reducer::User(_) => state::with(|s| s.ops.get(&(op as usize)).is_some_and(|e| e.1)),
        };
        // SAFETY: writable int (MPI contract; null checked).
        unsafe { out(commute, c as c_int) }
    })
});
