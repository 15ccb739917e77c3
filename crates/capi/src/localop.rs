//! Predefined reduction operations applied locally on packed data: `MPI_Reduce_local`
//! (and `MPI_Reduce_local_c`),
//! `MPI_Op_commutative`, and the [`Reducer`] the reductions that do not go to the core
//! (user operations, `MPI_MINLOC`/`MPI_MAXLOC`, derived datatypes) fold with.
//!
//! Contract: data is packed (the datatype's bytes in type-map order). A predefined
//! operation on a derived datatype computes on the datatype's basic elements, which must
//! all be one predefined type ([`crate::types::Layout::prim`]); otherwise `MPI_ERR_TYPE`.
//! `result = in op inout`, as MPI defines it. Integer arithmetic wraps; logical
//! operations treat non-zero as true; bitwise operations on floating point and
//! `MINLOC`/`MAXLOC` on anything but the pair types are `MPI_ERR_OP`. MINLOC/MAXLOC pick
//! the smaller index on ties. On x86-64, `long double` (`MPI_LONG_DOUBLE`, its complex
//! types, `MPI_LONG_DOUBLE_INT`) is the x87 80-bit format, compared exactly and computed
//! by the x87 unit ([`F80`]); complex types take `SUM`/`PROD` only (and `REPLACE`/`NO_OP`).

use crate::consts::*;
use crate::state::{self, UserFn, UserFnC, UserOp};
use crate::types::{any_layout, pack, unpack, Layout};
use crate::{count, err, export, guard, out, CResult};
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;

/// What a reduction folds with.
#[derive(Clone, Copy)]
pub enum Reducer {
    /// A user function (`MPI_Op_create`): called on at most `INT_MAX` elements at once.
    User(UserFn),
    /// A large-count user function (`MPI_Op_create_c`): called on all elements at once.
    UserC(UserFnC),
    /// A predefined operation.
    Builtin(Op),
}

/// The reducer behind operation handle `h`.
pub fn reducer(h: Handle) -> CResult<Reducer> {
    if let Some(o) = op(h as usize) {
        return Ok(Reducer::Builtin(o));
    }
    state::with(|s| {
        s.ops.get(&(h as usize)).map(|e| match e.0 {
            UserOp::Int(f) => Reducer::User(f),
            UserOp::Big(f) => Reducer::UserC(f),
        })
    })
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

/// An x87 80-bit extended `long double` (x86-64): a 64-bit significand with an explicit
/// integer bit, a 15-bit biased exponent and the sign, in the low 10 of its 16 bytes
/// (the other 6 are padding, left as they are in the result). Compared exactly through
/// [`F80::key`]; added, subtracted and multiplied by the x87 unit itself ([`x87!`]), so
/// results are bit for bit what C computes with `long double` (round to nearest even,
/// the 64-bit precision Linux sets).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct F80([u8; 10]);

#[cfg(target_arch = "x86_64")]
impl F80 {
    const ZERO: F80 = F80([0; 10]);
    /// 1.0: integer bit set, exponent = bias.
    const ONE: F80 = F80([0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0x3f]);

    /// The sign and a magnitude key ordered as the magnitudes are (exponent above
    /// significand); `None` for NaN and for the encodings the x87 unit refuses as
    /// operands (unnormals, pseudo-infinities, pseudo-NaNs). A pseudo-denormal (exponent 0
    /// with the integer bit set) has the value of exponent 1, and keys as such; zero keys
    /// as 0 whatever its sign.
    fn key(self) -> Option<(bool, u128)> {
        let m = u64::from_le_bytes(self.0[..8].try_into().expect("8 bytes"));
        let se = u16::from_le_bytes([self.0[8], self.0[9]]);
        let int = m >> 63 == 1;
        let e = match se & 0x7fff {
            0 if int => 1,
            0 => 0,
            0x7fff if m == 1 << 63 => 0x7fff,
            e if int && e != 0x7fff => e,
            _ => return None,
        };
        Some((se & 0x8000 != 0, u128::from(e) << 64 | u128::from(m)))
    }
}

#[cfg(target_arch = "x86_64")]
impl PartialEq for F80 {
    fn eq(&self, o: &Self) -> bool {
        self.partial_cmp(o) == Some(std::cmp::Ordering::Equal)
    }
}

/// IEEE order: NaN unordered, −0 = +0, denormals below the normal numbers.
#[cfg(target_arch = "x86_64")]
impl PartialOrd for F80 {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        use std::cmp::Ordering::*;
        let ((na, ma), (nb, mb)) = (self.key()?, o.key()?);
        Some(match (na, nb) {
            _ if ma == 0 && mb == 0 => Equal,
            (false, false) => ma.cmp(&mb),
            (true, true) => mb.cmp(&ma),
            (false, true) => Greater,
            (true, false) => Less,
        })
    }
}

/// `a insn b` on the x87 unit: loads `a` then `b` (80-bit memory operands), applies the
/// popping form of `insn` (`st(1) = st(1) insn st(0)`, Intel operand order) and stores
/// the result. The x87 stack is empty at entry (the x86-64 calling convention keeps it
/// so between calls) and empty again at exit; its registers are declared clobbered.
#[cfg(target_arch = "x86_64")]
macro_rules! x87 {
    ($insn:literal, $a:expr, $b:expr) => {{
        let (a, b): (F80, F80) = ($a, $b);
        let mut r = F80::ZERO;
        // SAFETY: reads the 10 bytes of `a` and `b` and writes the 10 of `r`, all live
        // locals; touches no other memory and no stack; the x87 registers it uses are
        // declared clobbered and the x87 stack is left empty, as the ABI requires.
        unsafe {
            std::arch::asm!(
                "fld tbyte ptr [{a}]",
                "fld tbyte ptr [{b}]",
                concat!($insn, " st(1), st"),
                "fstp tbyte ptr [{r}]",
                a = in(reg) a.0.as_ptr(),
                b = in(reg) b.0.as_ptr(),
                r = in(reg) r.0.as_mut_ptr(),
                out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                options(nostack),
            )
        };
        r
    }};
}

#[cfg(target_arch = "x86_64")]
impl std::ops::Sub for F80 {
    type Output = F80;
    fn sub(self, o: F80) -> F80 {
        x87!("fsubp", self, o)
    }
}

#[cfg(target_arch = "x86_64")]
impl Elem for F80 {
    /// The C `sizeof(long double)`: elements are 16 bytes apart.
    const N: usize = 16;
    fn rd(b: &[u8]) -> Self {
        F80(b[..10].try_into().expect("10 bytes"))
    }
    fn wr(self, b: &mut [u8]) {
        b[..10].copy_from_slice(&self.0);
    }
    fn add(self, o: Self) -> Self {
        x87!("faddp", self, o)
    }
    fn mul(self, o: Self) -> Self {
        x87!("fmulp", self, o)
    }
    fn truth(self) -> bool {
        self != F80::ZERO
    }
    fn from_bool(b: bool) -> Self {
        if b {
            F80::ONE
        } else {
            F80::ZERO
        }
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
        #[cfg(target_arch = "x86_64")]
        0x22d => return pairs::<F80, i32>(o, 16, 32, inb, io),
        #[cfg(target_arch = "x86_64")]
        0x220 => return scalar::<F80>(o, inb, io),
        #[cfg(target_arch = "x86_64")]
        0x224 | 0x225 => return complex::<F80>(o, inb, io),
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
            Reducer::User(_) | Reducer::UserC(_) => {
                let mut a = Image::new(l, n);
                let mut b = Image::new(l, n);
                // SAFETY: each image holds every data byte of n elements of l.
                unsafe {
                    unpack(l, inb, a.base(), n)?;
                    unpack(l, io, b.base(), n)?;
                }
                // SAFETY: both images hold n elements of the datatype.
                unsafe { self.call(dt as usize, l.extent, n, a.base(), b.base()) };
                // SAFETY: as above.
                let v = unsafe { pack(l, b.base(), n)? };
                io.copy_from_slice(&v);
                Ok(())
            }
        }
    }

    /// Calls a user function on `n` elements (`extent` bytes apart) at `a` (in) and `b`
    /// (in and out): an `MPI_User_function` on runs of at most `INT_MAX` elements, an
    /// `MPI_User_function_c` once.
    ///
    /// # Safety
    /// `a` and `b` hold `n` elements of datatype `dt` (a handle's value); `self` is a
    /// user function.
    unsafe fn call(&self, dt: usize, extent: isize, n: usize, a: *mut c_void, b: *mut c_void) {
        let mut dth = dt as Handle;
        match *self {
            Reducer::UserC(f) => {
                let mut len = n as crate::Count;
                // SAFETY: the function reads n elements at a and updates n at b (caller).
                unsafe { f(a, b, &mut len, &mut dth) }
            }
            Reducer::User(f) => {
                let mut done = 0usize;
                while done < n {
                    let k = (n - done).min(c_int::MAX as usize);
                    let off = (done as isize).wrapping_mul(extent);
                    let mut len = k as c_int;
                    let (x, y) = (a.wrapping_byte_offset(off), b.wrapping_byte_offset(off));
                    // SAFETY: elements done..done + k of both images (caller).
                    unsafe { f(x, y, &mut len, &mut dth) };
                    done += k;
                }
            }
            Reducer::Builtin(_) => {}
        }
    }
}

export!(MPI_Reduce_local, PMPI_Reduce_local,
        (inbuf: *const c_void, inoutbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle) -> c_int {
    reduce_local("MPI_Reduce_local", inbuf, inoutbuf, cnt.into(), datatype, op)
});

export!(MPI_Reduce_local_c, PMPI_Reduce_local_c,
        (inbuf: *const c_void, inoutbuf: *mut c_void, cnt: crate::Count, datatype: Handle,
         op: Handle) -> c_int {
    reduce_local("MPI_Reduce_local_c", inbuf, inoutbuf, cnt, datatype, op)
});

/// `MPI_Reduce_local` (and `MPI_Reduce_local_c`).
fn reduce_local(
    name: &str,
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    cnt: crate::Count,
    datatype: Handle,
    op: Handle,
) -> c_int {
    guard(name, WORLD, || {
        let r = reducer(op)?;
        let l = any_layout(datatype)?;
        let n = count(cnt)?;
        crate::span(n, l.size)?;
        // SAFETY: both buffers hold cnt elements of the datatype (MPI contract).
        unsafe {
            let a = pack(&l, inbuf, n)?;
            let mut b = pack(&l, inoutbuf, n)?;
            r.fold(datatype, &l, n, &a, &mut b)?;
            unpack(&l, &b, inoutbuf, n)
        }
    })
}

export!(MPI_Op_commutative, PMPI_Op_commutative, (op: Handle, commute: *mut c_int) -> c_int {
    guard("MPI_Op_commutative", WORLD, || {
        let c = match reducer(op)? {
            Reducer::Builtin(_) => true,
            Reducer::User(_) | Reducer::UserC(_) => {
                state::with(|s| s.ops.get(&(op as usize)).is_some_and(|e| e.1))
            }
        };
        // SAFETY: writable int (MPI contract; null checked).
        unsafe { out(commute, c as c_int) }
    })
});

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The 80-bit value of a normal, zero or infinite `f64`.
    fn f80(x: f64) -> F80 {
        let b = x.to_bits();
        let sign = ((b >> 63) as u16) << 15;
        let e = ((b >> 52) & 0x7ff) as u16;
        let frac = b & ((1 << 52) - 1);
        let (e, m) = match e {
            0 => (0, 0),
            0x7ff => (0x7fff, 1 << 63),
            e => (e + 16383 - 1023, 1 << 63 | frac << 11),
        };
        let mut r = [0u8; 10];
        r[..8].copy_from_slice(&u64::to_le_bytes(m));
        r[8..].copy_from_slice(&(sign | e).to_le_bytes());
        F80(r)
    }

    /// `x` plus `k` units in the last place of the 64-bit significand.
    fn ulps(x: F80, k: u64) -> F80 {
        let mut r = x;
        let m = u64::from_le_bytes(x.0[..8].try_into().unwrap()) + k;
        r.0[..8].copy_from_slice(&m.to_le_bytes());
        r
    }

    #[test]
    fn arithmetic_is_the_x87_units() {
        assert!(f80(3.0) - f80(1.0) == f80(2.0));
        assert!(f80(1.5).add(f80(2.25)) == f80(3.75));
        assert!(f80(-1.5).mul(f80(4.0)) == f80(-6.0));
        // 1 + 2^-63 is representable in 80 bits, not in f64.
        let one_ulp = ulps(f80(1.0), 1);
        assert!(one_ulp.add(f80(0.0)) == one_ulp);
        assert!(one_ulp - f80(1.0) == f80(2f64.powi(-63)));
    }

    #[test]
    fn order_is_exact_and_ieee() {
        let (one, next) = (f80(1.0), ulps(f80(1.0), 1));
        assert!(one < next);
        assert!(next.partial_cmp(&one) == Some(std::cmp::Ordering::Greater));
        assert!(one != next);
        assert!(f80(-0.0) == f80(0.0));
        assert!(f80(-2.0) < f80(-1.0) && f80(-1.0) < f80(0.0));
        assert!(f80(f64::INFINITY) > f80(f64::MAX));
        assert!(f80(f64::NEG_INFINITY) < f80(-f64::MAX));
        let denormal = F80([1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(f80(0.0) < denormal && denormal < f80(f64::MIN_POSITIVE));
        let mut nan = f80(f64::INFINITY);
        nan.0[0] = 1;
        assert!(nan.partial_cmp(&one).is_none() && nan != nan);
    }

    #[test]
    fn min_max_sum_prod_on_long_double_buffers() {
        let mut a = [0u8; 32];
        let mut b = [0u8; 32];
        ulps(f80(1.0), 1).wr(&mut a);
        f80(-3.0).wr(&mut a[16..]);
        f80(1.0).wr(&mut b);
        f80(2.0).wr(&mut b[16..]);
        let mut r = b;
        apply_builtin(Op::Min, 0x220, &a, &mut r).unwrap();
        assert!(F80::rd(&r) == f80(1.0) && F80::rd(&r[16..]) == f80(-3.0));
        r = b;
        apply_builtin(Op::Max, 0x220, &a, &mut r).unwrap();
        assert!(F80::rd(&r) == ulps(f80(1.0), 1) && F80::rd(&r[16..]) == f80(2.0));
        r = b;
        apply_builtin(Op::Sum, 0x220, &a, &mut r).unwrap();
        assert!(F80::rd(&r) == ulps(f80(2.0), 0).add(f80(2f64.powi(-63))));
        assert!(F80::rd(&r[16..]) == f80(-1.0));
        // complex (1 + 2^-63) + (-3)i times 1 + 2i = (7 + 2^-63) + (-1 + 2^-62)i.
        r = b;
        apply_builtin(Op::Prod, 0x224, &a, &mut r).unwrap();
        assert!(F80::rd(&r) == f80(7.0).add(f80(2f64.powi(-63))));
        assert!(F80::rd(&r[16..]) == f80(-1.0).add(f80(2f64.powi(-62))));
        assert!(apply_builtin(Op::Min, 0x224, &a, &mut r).is_err());
        assert!(apply_builtin(Op::Band, 0x220, &a, &mut r).is_err());
    }
}
