//! User reduction operations (`MPI_Op_create`, `MPI_Op_create_c`, `MPI_Op_free`) and the reductions the
//! core does not do itself: user operations, `MPI_MINLOC`/`MPI_MAXLOC`, and derived
//! datatypes, for `MPI_Reduce`, `MPI_Allreduce`, `MPI_Scan`, `MPI_Exscan`,
//! `MPI_Reduce_scatter_block` and `MPI_Reduce_scatter`.
//!
//! Contract: user operation handles are numbers from 0x2000000 up (never reused within a
//! run); an operation made by either create call works in every reduction, the int
//! and the large-count forms alike ([`Reducer::fold`] calls its function with the
//! length type it was declared with). These reductions move packed contributions with point-to-point messages on a
//! private duplicate of the communicator and fold them with a [`Reducer`] in rank order,
//! `(((a0 op a1) op a2) ...)`, which is correct for commutative and non-commutative
//! operations alike: `Reduce` gathers to the root, `Allreduce` (and the reduce-scatters)
//! reduce to rank 0 and broadcast; `Scan`/`Exscan` pass the running prefix along the
//! ranks (rank r receives the prefix of ranks 0..r from r − 1). A user function sees
//! element images laid out as the datatype describes, in 16-byte-aligned temporaries.

use crate::coll::in_place;
use crate::consts::*;
use crate::localop::Reducer;
use crate::state::{self, UserFn, UserFnC, UserOp};
use crate::types::{layout_of, pack, unpack, Layout};
use crate::{count, err, export, guard, out, CResult};
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::{Communicator, Destination, Root, Source};
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;
/// `MPI_OP_NULL`.
const OP_NULL: usize = 0x20;

export!(MPI_Op_create, PMPI_Op_create,
        (user_fn: Option<UserFn>, commute: c_int, op: *mut Handle) -> c_int {
    guard("MPI_Op_create", WORLD, || {
        let f = user_fn.ok_or_else(|| err(MPI_ERR_ARG, "null user function"))?;
        // SAFETY: the caller's output handle (MPI contract).
        unsafe { add_op(UserOp::Int(f), commute, op) }
    })
});

export!(MPI_Op_create_c, PMPI_Op_create_c,
        (user_fn: Option<UserFnC>, commute: c_int, op: *mut Handle) -> c_int {
    guard("MPI_Op_create_c", WORLD, || {
        let f = user_fn.ok_or_else(|| err(MPI_ERR_ARG, "null user function"))?;
        // SAFETY: the caller's output handle (MPI contract).
        unsafe { add_op(UserOp::Big(f), commute, op) }
    })
});

/// Registers user operation `f` and writes its handle to `op`.
///
/// # Safety
/// `op` is null (an error) or writable.
unsafe fn add_op(f: UserOp, commute: c_int, op: *mut Handle) -> CResult {
    if op.is_null() {
        return Err(err(MPI_ERR_ARG, "null op pointer"));
    }
    let h = state::with(|s| s.add_op(f, commute != 0));
    // SAFETY: non-null, writable (caller).
    unsafe { out(op, h) }
}

export!(MPI_Op_free, PMPI_Op_free, (op: *mut Handle) -> c_int {
    guard("MPI_Op_free", WORLD, || {
        if op.is_null() {
            return Err(err(MPI_ERR_ARG, "null op pointer"));
        }
        // SAFETY: non-null, readable and writable (MPI contract).
        unsafe {
            let h = op.read() as usize;
            if crate::consts::op(h).is_some() || (0x20..0x40).contains(&h) {
                return Err(err(MPI_ERR_OP, "cannot free a predefined operation"));
            }
            state::with(|s| s.ops.remove(&h))
                .ok_or_else(|| err(MPI_ERR_OP, format!("invalid operation {h:#x}")))?;
            out(op, OP_NULL as Handle)
        }
    })
});

/// Reduces `n` elements over `d`'s members to `root`: returns the packed result at the
/// root (`None` elsewhere). `mine`: this rank's packed contribution.
fn reduce_packed(
    d: &SimpleCommunicator,
    red: &Reducer,
    dt: Handle,
    l: &Layout,
    n: usize,
    mine: Vec<u8>,
    root: c_int,
) -> CResult<Option<Vec<u8>>> {
    if d.rank() != root {
        d.process_at_rank(root).send(&mine[..]);
        return Ok(None);
    }
    let mut parts = Vec::with_capacity(d.size() as usize);
    for r in 0..d.size() {
        if r == root {
            parts.push(Vec::new());
            continue;
        }
        let mut b = vec![0u8; mine.len()];
        d.process_at_rank(r).receive_into(&mut b[..]);
        parts.push(b);
    }
    parts[root as usize] = mine;
    let mut it = parts.into_iter();
    let mut acc = it.next().unwrap_or_default();
    for mut p in it {
        red.fold(dt, l, n, &acc, &mut p)?;
        acc = p;
    }
    Ok(Some(acc))
}

/// `MPI_Reduce` (`root` is `Some`) or `MPI_Allreduce` with reducer `red`.
///
/// # Safety
/// The buffers hold `cnt` elements of `dt` as MPI requires.
pub(crate) unsafe fn generic_reduce(
    c: &SimpleCommunicator,
    red: Reducer,
    send: *const c_void,
    recv: *mut c_void,
    cnt: crate::Count,
    dt: Handle,
    root: Option<c_int>,
) -> CResult {
    let l = layout_of(dt)?;
    crate::localop::validate(&red, &l)?;
    let n = count(cnt)?;
    let receives = root.is_none_or(|r| r == c.rank());
    let src = if in_place(send) && receives {
        recv as *const c_void
    } else {
        send
    };
    if receives && !in_place(send) {
        crate::types::disjoint_data(&l, send, n, recv, n)?;
    }
    // SAFETY: the contribution holds n elements (caller).
    let mine = unsafe { pack(&l, src, n)? };
    let d = c.duplicate();
    let res = reduce_packed(&d, &red, dt, &l, n, mine, root.unwrap_or(0))?;
    match root {
        Some(_) => {
            if let Some(v) = res {
                // SAFETY: the root's receive buffer holds n elements (caller).
                unsafe { unpack(&l, &v, recv, n)? };
            }
        }
        None => {
            let mut v = res.unwrap_or_else(|| vec![0; n * l.size]);
            d.process_at_rank(0).broadcast_into(&mut v[..]);
            // SAFETY: every receive buffer holds n elements (caller).
            unsafe { unpack(&l, &v, recv, n)? };
        }
    }
    Ok(())
}

/// `MPI_Scan` (or `MPI_Exscan` when `exclusive`) with reducer `red`.
///
/// # Safety
/// The buffers hold `cnt` elements of `dt` as MPI requires.
pub(crate) unsafe fn generic_scan(
    c: &SimpleCommunicator,
    red: Reducer,
    send: *const c_void,
    recv: *mut c_void,
    cnt: crate::Count,
    dt: Handle,
    exclusive: bool,
) -> CResult {
    let l = layout_of(dt)?;
    crate::localop::validate(&red, &l)?;
    let n = count(cnt)?;
    let src = if in_place(send) {
        recv as *const c_void
    } else {
        send
    };
    if !in_place(send) {
        crate::types::disjoint_data(&l, send, n, recv, n)?;
    }
    // SAFETY: the contribution holds n elements (caller).
    let mut mine = unsafe { pack(&l, src, n)? };
    let d = c.duplicate();
    let (me, size) = (d.rank(), d.size());
    let prev = if me > 0 {
        let mut p = vec![0u8; mine.len()];
        d.process_at_rank(me - 1).receive_into(&mut p[..]);
        red.fold(dt, &l, n, &p, &mut mine)?;
        Some(p)
    } else {
        None
    };
    if me + 1 < size {
        d.process_at_rank(me + 1).send(&mine[..]);
    }
    let result = if exclusive { prev } else { Some(mine) };
    if let Some(v) = result {
        // SAFETY: the receive buffer holds n elements (caller).
        unsafe { unpack(&l, &v, recv, n)? };
    }
    Ok(())
}

/// `MPI_Reduce_scatter(_block)` with reducer `red`: rank r receives `counts[r]` elements.
///
/// # Safety
/// The send buffer (or, in place, the receive buffer) holds the sum of `counts` elements,
/// the receive buffer `counts[rank]`.
pub(crate) unsafe fn generic_reduce_scatter(
    c: &SimpleCommunicator,
    red: Reducer,
    send: *const c_void,
    recv: *mut c_void,
    counts: &[usize],
    dt: Handle,
) -> CResult {
    let l = layout_of(dt)?;
    crate::localop::validate(&red, &l)?;
    let total: usize = counts.iter().sum();
    let me = c.rank() as usize;
    let src = if in_place(send) {
        recv as *const c_void
    } else {
        send
    };
    // SAFETY: the input holds `total` elements (caller).
    let mine = unsafe { pack(&l, src, total)? };
    let d = c.duplicate();
    let res = reduce_packed(&d, &red, dt, &l, total, mine, 0)?;
    let mut v = res.unwrap_or_else(|| vec![0; total * l.size]);
    d.process_at_rank(0).broadcast_into(&mut v[..]);
    let off: usize = counts[..me].iter().sum::<usize>() * l.size;
    // SAFETY: the receive buffer holds counts[me] elements (caller).
    unsafe { unpack(&l, &v[off..off + counts[me] * l.size], recv, counts[me]) }
}
