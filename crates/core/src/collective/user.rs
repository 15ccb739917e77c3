//! User-defined reduction operations (rsmpi's `UserOperation`, `DynBuffer`,
//! `DynBufferMut`).
//!
//! Contract: a [`UserOperation`] wraps a function `f(x, y)` that sets `y = x op y`
//! element by element. Reductions with one run on the blocking `all_reduce_into`,
//! `reduce_into(_root)`, `scan_into` and `exclusive_scan_into` (and `reduce_local_into`)
//! outside the core's schedules: the packed contributions travel as point-to-point
//! messages on a private duplicate of the communicator and are folded in rank order,
//! `((a0 op a1) op a2) …`, which is right for commutative and merely associative
//! operations alike — Reduce gathers to the root, Allreduce reduces to rank 0 and
//! broadcasts, Scan and Exscan pass the running prefix from rank to rank (linear in p:
//! correct first, the core's trees are for the predefined operations). The `immediate_`
//! forms all-gather the packed contributions on the core's schedules and fold them in
//! rank order when the request completes ([`start`]; the fold runs inside the library,
//! so the operation must not call phalanx). Every rank must pass the same operation.

use crate::datatype::{Buffer, BufferMut, TypeMap};
use crate::datatype::{Described, ReadPtr, WritePtr};
pub use crate::datatype::{DynBuffer, DynBufferMut};
use crate::point_to_point::{Destination, Source};
use crate::topology::{Communicator, SimpleCommunicator};
use crate::Rank;

type UserFn<'a> = dyn Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a;

/// A reduction operation defined by the program (module docs).
pub struct UserOperation<'a> {
    f: Box<UserFn<'a>>,
    commutative: bool,
}

impl<'a> UserOperation<'a> {
    /// An associative operation (`MPI_Op_create` with `commute = false`): combined in
    /// rank order.
    pub fn associative<F>(function: F) -> Self
    where
        F: Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a,
    {
        UserOperation {
            f: Box::new(function),
            commutative: false,
        }
    }
    /// A commutative operation (`commute = true`).
    pub fn commutative<F>(function: F) -> Self
    where
        F: Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a,
    {
        UserOperation {
            f: Box::new(function),
            commutative: true,
        }
    }
    /// Whether it was made commutative.
    pub fn is_commutative(&self) -> bool {
        self.commutative
    }
    /// `y = x op y` over packed elements of `dt`.
    pub(crate) fn combine(&self, dt: &TypeMap, x: &[u8], y: &mut [u8]) {
        // The function's downcast needs aligned elements: combine in aligned copies.
        let mut xa = aligned(x);
        let mut ya = aligned(y);
        let n = x.len().min(y.len());
        {
            // Operands from the network may hold any byte where a bool lies.
            dt.fix_bools(&mut bytes_of(&mut xa)[..n]);
            dt.fix_bools(&mut bytes_of(&mut ya)[..n]);
            let xs = &bytes_of(&mut xa)[..n];
            let ys = &mut bytes_of(&mut ya)[..n];
            (self.f)(DynBuffer::packed(xs, dt), DynBufferMut::packed(ys, dt));
        }
        y[..n].copy_from_slice(&bytes_of(&mut ya)[..n]);
    }
}

/// `b` in 16-byte-aligned storage.
fn aligned(b: &[u8]) -> Vec<u128> {
    let mut v = vec![0u128; b.len().div_ceil(16)];
    bytes_of(&mut v)[..b.len()].copy_from_slice(b);
    v
}

fn bytes_of(v: &mut [u128]) -> &mut [u8] {
    // SAFETY: u128 storage viewed as its bytes.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, v.len() * 16) }
}

/// The packed bytes of `buf`.
fn packed<B: ?Sized + Buffer>(buf: &B) -> Vec<u8> {
    let dt = buf.datatype();
    let mut v = Vec::new();
    // SAFETY: Buffer guarantees `count` elements of `dt` at its pointer.
    unsafe { dt.pack(buf.buffer_ptr(), buf.elements(), &mut v) };
    v
}

/// `data` (packed) into `buf`.
fn unpacked<B: ?Sized + BufferMut>(data: &[u8], buf: &mut B) {
    let dt = buf.datatype();
    let n = data.len().min(buf.elements() * dt.size());
    // SAFETY: BufferMut guarantees room for `count` elements of `dt`; at most that many
    // packed bytes are unpacked.
    unsafe { dt.unpack(&data[..n], buf.buffer_mut_ptr()) };
}

/// The fold of every member's contribution in rank order, at `root` (`None` elsewhere).
fn reduce_at(
    c: &SimpleCommunicator,
    mine: Vec<u8>,
    dt: &TypeMap,
    op: &UserOperation<'_>,
    root: Rank,
) -> Option<Vec<u8>> {
    let d = c.duplicate();
    if d.rank() != root {
        d.process_at_rank(root).send(&mine[..]);
        return None;
    }
    let mut acc: Option<Vec<u8>> = None;
    for r in 0..d.size() {
        let a = if r == root {
            mine.clone()
        } else {
            d.process_at_rank(r).receive_vec::<u8>().0
        };
        acc = Some(match acc {
            None => a,
            Some(prev) => {
                // acc = prev op a, with a as the in-out operand.
                let mut y = a;
                op.combine(dt, &prev, &mut y);
                y
            }
        });
    }
    acc
}

/// Blocking reduction with a user operation to `root` (`None`: the result is not kept).
pub(crate) fn reduce<S, R>(
    c: &SimpleCommunicator,
    send: &S,
    recv: Option<&mut R>,
    op: &UserOperation<'_>,
    root: Rank,
) where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let dt = send.datatype();
    if let (Some(v), Some(r)) = (reduce_at(c, packed(send), &dt, op, root), recv) {
        unpacked(&v, r);
    }
}

/// Blocking all-reduce with a user operation.
pub(crate) fn all_reduce<S, R>(
    c: &SimpleCommunicator,
    send: &S,
    recv: &mut R,
    op: &UserOperation<'_>,
) where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    use crate::collective::Root;
    let dt = send.datatype();
    let mine = packed(send);
    let len = mine.len();
    let mut v = reduce_at(c, mine, &dt, op, 0).unwrap_or_else(|| vec![0; len]);
    c.process_at_rank(0).broadcast_into(&mut v[..]);
    unpacked(&v, recv);
}

/// Blocking inclusive (`exclusive = false`) or exclusive scan with a user operation.
pub(crate) fn scan<S, R>(
    c: &SimpleCommunicator,
    send: &S,
    recv: &mut R,
    op: &UserOperation<'_>,
    exclusive: bool,
) where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let dt = send.datatype();
    let d = c.duplicate();
    let (me, p) = (d.rank(), d.size());
    let mine = packed(send);
    let prefix = (me > 0).then(|| d.process_at_rank(me - 1).receive_vec::<u8>().0);
    // Running prefix through this rank: prefix op mine.
    let through = match &prefix {
        None => mine,
        Some(pre) => {
            let mut y = mine;
            op.combine(&dt, pre, &mut y);
            y
        }
    };
    if me + 1 < p {
        d.process_at_rank(me + 1).send(&through[..]);
    }
    match (exclusive, prefix) {
        (false, _) => unpacked(&through, recv),
        (true, Some(pre)) => unpacked(&pre, recv),
        (true, None) => {}
    }
}

/// What an immediate reduction with a user operation makes of the gathered
/// contributions.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fold {
    /// Every member gets the fold of all (Allreduce).
    All,
    /// The root gets the fold of all (Reduce).
    At(Rank),
    /// Member i gets the fold of 0..=i (Scan).
    Prefix,
    /// Member i > 0 gets the fold of 0..i (Exscan).
    Exclusive,
}

/// Starts an immediate reduction with a user operation: an all-gather of every member's
/// packed contribution on the core's schedules, then, when it completes, the fold in
/// rank order into `recv` (at the members `fold` gives a result). The fold runs where
/// the request completes, inside the library: the operation must not call phalanx.
pub(crate) fn start<'a, S, R, O>(
    c: &SimpleCommunicator,
    send: &S,
    recv: Option<*mut R>,
    op: O,
    fold: Fold,
) -> crate::engine::requests::ReqId
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut + 'a,
    O: super::Operation + 'a,
{
    let dt = send.datatype();
    let mine = Box::new(packed(send));
    let n = mine.len();
    let (me, p) = (c.rank() as usize, c.size() as usize);
    let mut all = Box::new(vec![0u8; n * p]);
    let (spec, plan) = super::all_gather_spec(c, &mine[..], &mut all[..]);
    let out = recv;
    let finish = move || {
        let _keep = mine;
        let Some(u) = op.user() else { return };
        let upto = match fold {
            Fold::All => p,
            Fold::At(root) if root as usize == me => p,
            Fold::Prefix => me + 1,
            Fold::Exclusive if me > 0 => me,
            _ => return,
        };
        let Some(out) = out else { return };
        let mut acc = all.get(..n).unwrap_or(&[]).to_vec();
        for i in 1..upto {
            let mut y = all[i * n..(i + 1) * n].to_vec();
            u.combine(&dt, &acc, &mut y);
            acc = y;
        }
        // SAFETY: the request borrows the receive buffer until it completed (its scope
        // waits for it), and this runs at its completion.
        unpacked(&acc, unsafe { &mut *out });
    };
    let finish: Box<dyn FnOnce() + 'a> = Box::new(finish);
    // SAFETY: it runs (or is dropped) when the collective completes, which the request
    // holding the buffers and the operation for 'a waits for before 'a ends.
    let finish: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(finish) };
    crate::runtime::call("immediate user reduction", |e| {
        e.finish_next_with(finish);
        Ok(())
    });
    super::start(spec, plan)
}

/// Combines `sendbuf` into `recvbuf` element by element with `op`, on this rank alone
/// (`MPI_Reduce_local`): `recvbuf[i] = sendbuf[i] op recvbuf[i]`. Buffers of different
/// types or lengths, or an operation the type does not support, are an error for the
/// fatal handler.
pub fn reduce_local_into<S, R, O>(sendbuf: &S, recvbuf: &mut R, op: O)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
    O: super::Operation,
{
    let dt = sendbuf.datatype();
    let n = sendbuf.elements() * dt.size();
    let same = recvbuf.elements() == sendbuf.elements();
    let r = if recvbuf.datatype().signature() != dt.signature() || !same {
        Err(crate::Error::InvalidArg(
            "reduce_local_into: send and receive buffers differ in type or length".into(),
        ))
    } else if !dt.is_contiguous() {
        Err(crate::Error::InvalidArg(
            "reduce_local_into: only contiguous element types".into(),
        ))
    } else {
        // SAFETY: Buffer/BufferMut guarantee `n` bytes at each pointer (same count and a
        // contiguous type of the same size); a `&` and a `&mut` never overlap.
        let (src, acc) = unsafe {
            (
                std::slice::from_raw_parts(sendbuf.buffer_ptr(), n),
                std::slice::from_raw_parts_mut(recvbuf.buffer_mut_ptr(), n),
            )
        };
        match op.user() {
            Some(u) => {
                u.combine(&dt, src, acc);
                Ok(())
            }
            None => crate::coll::ops::apply(op.kind(), &dt, acc, src),
        }
    };
    if let Err(e) = r {
        crate::runtime::fatal("reduce_local_into", e);
    }
}

/// The predefined operation of `op` (a user operation is an error for the calls that
/// take predefined ones only).
pub(super) fn predefined<O: super::Operation>(call: &str, op: &O) -> crate::coll::ops::OpKind {
    if op.user().is_some() {
        crate::runtime::fatal(
            call,
            crate::Error::InvalidOp("user operations run on the blocking reductions only".into()),
        );
    }
    op.kind()
}

/// A reduction function with the C signature (rsmpi's `UnsafeUserFunction`:
/// `MPI_User_function`): `(invec, inoutvec, len, datatype)`.
pub type UnsafeUserFunction = unsafe extern "C" fn(
    *mut std::ffi::c_void,
    *mut std::ffi::c_void,
    *mut std::ffi::c_int,
    *mut *mut std::ffi::c_void,
);

/// A user operation given as a C function (rsmpi's `UnsafeUserOperation`), used by
/// reference (`&op`) where an operation is taken. It runs where a [`UserOperation`] does:
/// `len` is the element count and `datatype` points to a null handle (the elements are
/// the buffers' type; phalanx's library does not name C datatype handles).
pub struct UnsafeUserOperation {
    op: UserOperation<'static>,
}

impl std::fmt::Debug for UnsafeUserOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnsafeUserOperation")
            .field("commutative", &self.op.is_commutative())
            .finish()
    }
}

impl UnsafeUserOperation {
    /// An associative operation from `function`.
    ///
    /// # Safety
    /// `function` must be safe to call on the buffers of every reduction it is used in.
    pub unsafe fn associative(function: UnsafeUserFunction) -> Self {
        Self::new(false, function)
    }

    /// A commutative operation from `function`.
    ///
    /// # Safety
    /// As for [`UnsafeUserOperation::associative`].
    pub unsafe fn commutative(function: UnsafeUserFunction) -> Self {
        Self::new(true, function)
    }

    fn new(commutative: bool, function: UnsafeUserFunction) -> Self {
        let call = move |x: DynBuffer<'_>, mut y: DynBufferMut<'_>| {
            let mut len = std::ffi::c_int::try_from(x.len()).unwrap_or(std::ffi::c_int::MAX);
            let mut dt: *mut std::ffi::c_void = std::ptr::null_mut();
            // SAFETY: the constructor's caller promised `function` is safe on the
            // buffers of the reductions it is used in; both hold `len` elements.
            unsafe { function(x.as_ptr() as *mut _, y.as_mut_ptr(), &mut len, &mut dt) }
        };
        UnsafeUserOperation {
            op: if commutative {
                UserOperation::commutative(call)
            } else {
                UserOperation::associative(call)
            },
        }
    }

    /// The operation as a [`UserOperation`].
    pub fn as_user_operation(&self) -> &UserOperation<'static> {
        &self.op
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_downcast_only_to_their_own_type_and_combine_in_order() {
        let dt = crate::datatype::type_map_of::<f64>();
        let x = aligned(&[1.5f64.to_ne_bytes(), 2.5f64.to_ne_bytes()].concat());
        let mut xv = x.clone();
        let xb = &bytes_of(&mut xv)[..16];
        let b = DynBuffer::packed(xb, &dt);
        assert_eq!(b.len(), 2);
        assert!(b.downcast::<i32>().is_none(), "not i32s");
        assert!(b.downcast::<u64>().is_none(), "same size, other type");
        assert_eq!(b.downcast::<f64>(), Some(&[1.5, 2.5][..]));
        // y = x op y with op(x, y) = 10 x + y: the operands' order is kept.
        let op = UserOperation::associative(|x, y| {
            let x: &[f64] = x.downcast().unwrap();
            let y: &mut [f64] = y.downcast().unwrap();
            for (a, b) in x.iter().zip(y) {
                *b += 10.0 * a;
            }
        });
        let mut y = [1.0f64.to_ne_bytes(), 2.0f64.to_ne_bytes()].concat();
        op.combine(
            &dt,
            &[3.0f64.to_ne_bytes(), 4.0f64.to_ne_bytes()].concat(),
            &mut y,
        );
        assert_eq!(&y[..8], &31.0f64.to_ne_bytes());
        assert_eq!(&y[8..], &42.0f64.to_ne_bytes());
        assert!(!op.is_commutative());
    }
}
