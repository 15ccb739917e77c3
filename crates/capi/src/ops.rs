//! User reduction operations: `MPI_Op_create`, `MPI_Op_free`, and their use by
//! `MPI_Reduce` and `MPI_Allreduce`.
//!
//! Contract: user operation handles are numbers from 0x2000000 up (never reused within a
//! run). A reduction with a user operation gathers every member's contribution (packed)
//! to the root with point-to-point messages on a private duplicate of the communicator,
//! then the root applies the function in rank order, `(((a0 op a1) op a2) ...)`, which is
//! correct for commutative and non-commutative operations alike; `MPI_Allreduce` reduces
//! to rank 0 and broadcasts the result. The function sees element images laid out as the
//! datatype describes (derived datatypes included), in 16-byte-aligned temporaries.

use crate::coll::in_place;
use crate::consts::*;
use crate::state::{self, UserFn};
use crate::types::{layout_of, pack, unpack, Layout};
use crate::{count, disjoint, err, export, guard, out, CResult};
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
        if op.is_null() {
            return Err(err(MPI_ERR_ARG, "null op pointer"));
        }
        let h = state::with(|s| s.add_op(f, commute != 0));
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(op, h) }
    })
});

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

/// The user function behind `h`, if `h` is a user operation.
pub fn user_op(h: Handle) -> Option<UserFn> {
    state::with(|s| s.ops.get(&(h as usize)).map(|e| e.0))
}

/// A 16-byte-aligned image of `n` elements of `l`.
struct Image {
    mem: Vec<u128>,
    lb: isize,
}

impl Image {
    fn new(l: &Layout, n: usize) -> Image {
        let bytes = n * l.extent.max(0) as usize;
        Image {
            mem: vec![0; bytes.div_ceil(16)],
            lb: l.lb,
        }
    }
    /// The address of element 0 (may lie outside `mem` when the lower bound is not 0).
    fn base(&mut self) -> *mut c_void {
        (self.mem.as_mut_ptr() as *mut u8).wrapping_offset(-self.lb) as *mut c_void
    }
}

/// Reduces `n` elements with user function `f` over `d`'s members to `root`: returns the
/// packed result at the root (`None` elsewhere). `mine`: this rank's packed contribution.
fn reduce_packed(
    d: &SimpleCommunicator,
    f: UserFn,
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
    let mut acc = Image::new(l, n);
    let mut tmp = Image::new(l, n);
    // SAFETY: the image holds n elements of l (extent-sized, blocks within the extent).
    unsafe { unpack(l, &parts[0], acc.base(), n)? };
    let mut len = c_int::try_from(n).map_err(|_| err(MPI_ERR_COUNT, "count too large"))?;
    let mut dth = dt;
    for p in &parts[1..] {
        // SAFETY: as above.
        unsafe { unpack(l, p, tmp.base(), n)? };
        // SAFETY: the user function reads n elements at its first argument and updates n
        // elements at its second: both images hold n elements of the datatype.
        unsafe { f(acc.base(), tmp.base(), &mut len, &mut dth) };
        std::mem::swap(&mut acc, &mut tmp);
    }
    // SAFETY: the image holds n elements.
    Ok(Some(unsafe { pack(l, acc.base(), n)? }))
}

/// `MPI_Reduce` (`root` is `Some`) or `MPI_Allreduce` with user function `f`.
///
/// # Safety
/// The buffers hold `cnt` elements of `dt` as MPI requires.
pub(crate) unsafe fn user_reduce(
    c: &SimpleCommunicator,
    f: UserFn,
    send: *const c_void,
    recv: *mut c_void,
    cnt: c_int,
    dt: Handle,
    root: Option<c_int>,
) -> CResult {
    let l = layout_of(dt)?;
    let n = count(cnt)?;
    let receives = root.is_none_or(|r| r == c.rank());
    let src = if in_place(send) && receives {
        recv as *const c_void
    } else {
        send
    };
    if receives && !in_place(send) {
        let span = n * l.extent.max(0) as usize;
        disjoint(send, span, recv, span)?;
    }
    // SAFETY: the contribution holds n elements (caller).
    let mine = unsafe { pack(&l, src, n)? };
    let d = c.duplicate();
    let res = reduce_packed(&d, f, dt, &l, n, mine, root.unwrap_or(0))?;
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
