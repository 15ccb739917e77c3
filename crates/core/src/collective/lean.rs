//! The lean path of a small blocking collective on the shared-memory board, for the C
//! interface: one call from `MPI_Bcast` (and the other blocking collectives on
//! contiguous bytes or predefined element types) to the board, without the Rust API's
//! spec, plan and request objects.
//!
//! Contract: [`board_call`] runs a call exactly as the general path does when the
//! general path would put it on the board — the communicator's next sequence number, the
//! same signature (kind, root, operation, type signature and the `shm` algorithm's
//! bits), the same board steps — so members on either path meet. When the general path
//! would not pick the board (no board, the call does not fit, another algorithm forced,
//! an intercommunicator, buffers the general path would reject) it returns `Ok(false)`
//! without touching the communicator, and the caller takes the general path, which
//! reports the error if there is one. Errors of the call itself (a mismatch, a broken
//! link) are returned, not sent to the fatal handler.

use super::board::BoardCall;
use super::staged::shape;
use super::{Chosen, SystemOperation};
use crate::coll::algorithm::Algorithm;
use crate::coll::{signature_of, CollCall, CollKind};
use crate::datatype::TypeMap;
use crate::error::Result;
use crate::runtime::with_engine;
use crate::topology::SimpleCommunicator;

/// One blocking collective of contiguous buffers, as the C interface passes it.
pub struct LeanCall<'a> {
    /// What it is: barrier, broadcast, gather, scatter, all-gather, all-to-all, reduce
    /// or all-reduce (the others always take the general path).
    pub kind: CollKind,
    /// Root (communicator rank) of a rooted kind; ignored by the others.
    pub root: i32,
    /// The operation of a reduction.
    pub op: Option<SystemOperation>,
    /// Element type: the general path's (bytes for data movement, the element type of a
    /// reduction).
    pub dt: &'a TypeMap,
    /// Elements in this member's buffer as the general path counts them (a broadcast's
    /// buffer, a gather's or all-gather's send block, a scatter's receive block, one
    /// block of an all-to-all, a reduction's vector).
    pub count: usize,
    /// Send bytes (null and 0 where the kind has none at this member).
    pub send: (*const u8, usize),
    /// Receive bytes (null and 0 where the kind has none at this member).
    pub recv: (*mut u8, usize),
}

/// Runs `lc` on the board of `c`'s host if the general path would; `Ok(false)` when it
/// would not (nothing was done).
///
/// # Safety
/// `lc.send` must be readable and `lc.recv` writable — and touched by nobody else — for
/// their lengths during the call; a buffer this member does not have is null with
/// length 0 (as the general path passes it).
pub unsafe fn board_call(c: &SimpleCommunicator, lc: &LeanCall<'_>) -> Result<bool> {
    if c.inter || !lc.dt.is_contiguous() {
        return Ok(false);
    }
    let sh = shape(c, true);
    if sh.board == 0 {
        return Ok(false);
    }
    let (p, me) = (sh.p, sh.me);
    let rooted = matches!(
        lc.kind,
        CollKind::Bcast | CollKind::Gather | CollKind::Scatter | CollKind::Reduce
    );
    if rooted && !(0..p as i32).contains(&lc.root) {
        return Ok(false);
    }
    let is_root = rooted && lc.root as usize == me;
    let (slen, rlen) = (lc.send.1, lc.recv.1);
    // A bound on the largest publication (a scatter publishes p − 1 blocks; the bound
    // counts p, as the general path does, so both choose alike), and what the general
    // path checks before it plans.
    let (need, ok) = match lc.kind {
        CollKind::Barrier => (0, true),
        CollKind::Bcast => (slen, slen == rlen),
        // The `_root` buffers only at the root (the general path's `root_buffer`).
        CollKind::Gather => (
            slen,
            if is_root {
                rlen >= p * slen
            } else {
                lc.recv.0.is_null()
            },
        ),
        CollKind::Scatter => (
            p * rlen,
            if is_root {
                slen >= p * rlen
            } else {
                lc.send.0.is_null()
            },
        ),
        CollKind::Allgather => (slen, rlen >= p * slen),
        CollKind::Alltoall => (slen, slen.is_multiple_of(p) && rlen >= slen),
        CollKind::Reduce => (slen, !is_root || rlen >= slen),
        CollKind::Allreduce => (slen, rlen >= slen),
        _ => (0, false),
    };
    let reduction = matches!(lc.kind, CollKind::Reduce | CollKind::Allreduce);
    if !ok || reduction != lc.op.is_some() || !super::board::fits(lc.kind, sh.board, need, p) {
        return Ok(false);
    }
    let forced = crate::coll::algorithm::choices().forced(lc.kind);
    if forced.is_some_and(|a| a != Algorithm::Shm) {
        return Ok(false);
    }
    let seq = c.next_coll_seq();
    crate::engine::stats::count_collective(lc.kind, Algorithm::Shm, lc.send.1, p);
    let op = lc.op.map(|o| o.0);
    let root = rooted.then_some(lc.root as u32);
    let hash = c.shapes.lean_type_hash(lc.kind, lc.dt, lc.count);
    let sig = signature_of(lc.kind, root, op, hash) ^ Chosen::plain(Algorithm::Shm).sig_bits();
    tracing::debug!(
        rank = sh.world[me],
        collective = ?lc.kind,
        algorithm = Algorithm::Shm.name(),
        members = p,
        seq,
        "collective"
    );
    let call = CollCall {
        ctx: c.context(),
        seq,
        sig,
        op,
        dt: lc.dt.clone(),
        send: lc.send,
        recv: lc.recv,
    };
    with_engine(|e| {
        e.board_collective(&BoardCall {
            call: &call,
            kind: lc.kind,
            root: if rooted { lc.root as usize } else { 0 },
            world: &sh.world,
            me,
            phase: 0,
            layout: None,
            slots: (!sh.board_slots.is_empty()).then_some(&sh.board_slots[..]),
        })
    })?;
    Ok(true)
}
