//! Nonblocking collectives on intercommunicators (`MPI_Ibarrier`, `MPI_Ibcast`,
//! `MPI_Igather(v)`, `MPI_Iscatter(v)`, `MPI_Iallgather(v)`, `MPI_Ialltoall(v)`,
//! `MPI_Ireduce`, `MPI_Iallreduce`, `MPI_Ireduce_scatter(_block)`), called from their
//! exports when the handle is an intercommunicator; the persistent collectives on
//! intercommunicators run on them.
//!
//! Contract: each call is one round of point-to-point transfers between the two groups
//! on a fresh duplicate of the intercommunicator (made without messages, so the traffic
//! matches nothing else), started at the call and completed by `MPI_Wait*`/`MPI_Test*`
//! like every other request ([`crate::nbc_v::exchange_inter`]). MPI's semantics: each
//! group gets the other group's data. Rooted ones take `MPI_ROOT` (the root: it sends to
//! or receives from every member of the other group), `MPI_PROC_NULL` (the root's
//! group's other members: nothing to do) or the root's rank in the remote group. A
//! barrier is a zero-byte message from every member to every remote member; all-gathers
//! send a member's block to every remote member; reductions receive every remote
//! member's whole contribution and fold them at completion in remote rank order
//! (`(((b0 op b1) op b2) …)`, the same on every member of a group), with any operation
//! and datatype the blocking generic path takes; a reduce-scatter's member keeps its
//! block of the folded vector. The transfers grow as the product of the group sizes —
//! simple, and free of any blocking step. Derived datatypes are packed and unpacked as in
//! [`crate::nbc`]. `MPI_IN_PLACE` is `MPI_ERR_ARG` (MPI does not define it here). The
//! blocking reductions on intercommunicators whose operation or datatype the core does
//! not reduce (user functions, `MINLOC`/`MAXLOC`, derived datatypes), and
//! `MPI_Reduce_scatter`, start these and wait ([`blocking`]).

use crate::coll::in_place;
use crate::consts::*;
use crate::inter_coll::{role, Role};
use crate::localop::{reducer, validate};
use crate::nbc::{at, copy, dst, register, req_ok, src};
use crate::nbc_v::exchange_inter;
use crate::state::Staged;
use crate::types::{layout_of, unpack};
use crate::wide::{self, Wide};
use crate::{count, err, CResult, Count};
use phalanx::topology::InterCommunicator;
use phalanx::traits::Communicator;
use std::ffi::{c_int, c_void};

/// Transfers of a schedule: (remote rank, bytes).
type Sends = Vec<(c_int, &'static [u8])>;
/// Landing areas of a schedule: (remote rank, bytes).
type Recvs = Vec<(c_int, &'static mut [u8])>;

fn no_in_place(send: *const c_void) -> CResult {
    if in_place(send) {
        return Err(err(MPI_ERR_ARG, "MPI_IN_PLACE on an intercommunicator"));
    }
    Ok(())
}

/// Starts the schedule and registers its request.
fn start(
    ic: &InterCommunicator,
    comm: Handle,
    sg: Staged,
    (sends, recvs): (Sends, Recvs),
    request: *mut Handle,
) -> CResult {
    req_ok(request)?;
    let req = exchange_inter(ic, sends, recvs)?;
    register(comm, req, sg, request)
}

/// Runs the nonblocking call `f` to completion (a blocking collective).
pub(crate) fn blocking(f: impl FnOnce(*mut Handle) -> CResult) -> CResult {
    let mut h = std::ptr::null_mut();
    f(&mut h)?;
    crate::p2p::complete(h, true).map(drop)
}

fn remote(ic: &InterCommunicator) -> c_int {
    ic.remote_size()
}

/// `MPI_Ibarrier`.
pub(crate) fn ibarrier(ic: &InterCommunicator, comm: Handle, request: *mut Handle) -> CResult {
    let sends = (0..remote(ic)).map(|r| (r, &[][..])).collect();
    let recvs = (0..remote(ic)).map(|r| (r, &mut [][..])).collect();
    start(ic, comm, Staged::default(), (sends, recvs), request)
}

/// `MPI_Ibcast`.
///
/// # Safety
/// `buf` holds `cnt` elements of `t` until completion (nonblocking contract).
pub(crate) unsafe fn ibcast(
    ic: &InterCommunicator,
    (buf, cnt, t, root): (*mut c_void, Count, Handle, c_int),
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    let (n, l) = (count(cnt)?, layout_of(t)?);
    let mut sg = Staged::default();
    let mut plan = (Sends::new(), Recvs::new());
    match role(ic, root)? {
        Role::Root => {
            // SAFETY: caller.
            let b = unsafe { src(&mut sg, buf, n, &l)? };
            plan.0 = (0..remote(ic)).map(|r| (r, b)).collect();
        }
        Role::Idle => {}
        // SAFETY: caller.
        Role::Member(r) => plan.1.push((r, unsafe { dst(&mut sg, buf, n, l)? })),
    }
    start(ic, comm, sg, plan, request)
}

/// One side of a rooted or all-to-all call: buffer, per-remote-rank (count, element
/// displacement), datatype.
pub(crate) type Side<P> = (P, Vec<(usize, isize)>, Handle);

/// The blocks of `side` as sends.
///
/// # Safety
/// Every block is readable until completion.
unsafe fn send_blocks(sg: &mut Staged, side: Side<*const c_void>) -> CResult<Sends> {
    let l = layout_of(side.2)?;
    let mut v = Vec::with_capacity(side.1.len());
    for (r, (n, d)) in side.1.into_iter().enumerate() {
        // SAFETY: caller.
        v.push((r as c_int, unsafe { src(sg, at(side.0, d, &l), n, &l)? }));
    }
    Ok(v)
}

/// The blocks of `side` as landing areas.
///
/// # Safety
/// Every block is writable until completion.
unsafe fn recv_blocks(sg: &mut Staged, side: Side<*mut c_void>) -> CResult<Recvs> {
    let l = layout_of(side.2)?;
    let mut v = Vec::with_capacity(side.1.len());
    for (r, (n, d)) in side.1.into_iter().enumerate() {
        let p = at(side.0, d, &l).cast_mut();
        // SAFETY: caller.
        v.push((r as c_int, unsafe { dst(sg, p, n, l.clone())? }));
    }
    Ok(v)
}

/// `k` blocks of `n` elements, consecutive.
pub(crate) fn uniform(n: Count, k: c_int) -> CResult<Vec<(usize, isize)>> {
    let n = count(n)?;
    Ok((0..k.max(0) as usize)
        .map(|j| (n, j.wrapping_mul(n) as isize))
        .collect())
}

/// `k` blocks from counts and displacements (of either width).
///
/// # Safety
/// `cs` and `ds` hold `k` values.
pub(crate) unsafe fn varied<C: Wide, D: Wide>(
    cs: *const C,
    ds: *const D,
    k: c_int,
) -> CResult<Vec<(usize, isize)>> {
    let k = k.max(0) as usize;
    // SAFETY: caller.
    let (cs, ds) = unsafe { (wide::counts(cs, k)?, wide::displs(ds, k)?) };
    Ok(cs.into_iter().zip(ds).collect())
}

/// `MPI_Igather(v)`: the root receives block j from remote member j (`recv`, significant
/// at the root); the other group's members send `send` to it.
///
/// # Safety
/// Buffers and arrays as MPI requires (nonblocking contract).
pub(crate) unsafe fn igather(
    ic: &InterCommunicator,
    send: (*const c_void, Count, Handle),
    recv: impl FnOnce() -> CResult<Side<*mut c_void>>,
    root: c_int,
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    let mut sg = Staged::default();
    let mut plan = (Sends::new(), Recvs::new());
    match role(ic, root)? {
        // SAFETY: caller.
        Role::Root => plan.1 = unsafe { recv_blocks(&mut sg, recv()?)? },
        Role::Idle => {}
        Role::Member(r) => {
            no_in_place(send.0)?;
            let (n, l) = (count(send.1)?, layout_of(send.2)?);
            // SAFETY: caller.
            plan.0.push((r, unsafe { src(&mut sg, send.0, n, &l)? }));
        }
    }
    start(ic, comm, sg, plan, request)
}

/// `MPI_Iscatter(v)`: the root sends block j to remote member j (`send`, significant at
/// the root); the other group's members receive into `recv`.
///
/// # Safety
/// Buffers and arrays as MPI requires (nonblocking contract).
pub(crate) unsafe fn iscatter(
    ic: &InterCommunicator,
    send: impl FnOnce() -> CResult<Side<*const c_void>>,
    recv: (*mut c_void, Count, Handle),
    root: c_int,
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    let mut sg = Staged::default();
    let mut plan = (Sends::new(), Recvs::new());
    match role(ic, root)? {
        // SAFETY: caller.
        Role::Root => plan.0 = unsafe { send_blocks(&mut sg, send()?)? },
        Role::Idle => {}
        Role::Member(r) => {
            let (n, l) = (count(recv.1)?, layout_of(recv.2)?);
            // SAFETY: caller.
            plan.1.push((r, unsafe { dst(&mut sg, recv.0, n, l)? }));
        }
    }
    start(ic, comm, sg, plan, request)
}

/// `MPI_Iallgather(v)` (`send` to every remote member) and `MPI_Ialltoall(v)` (`send`'s
/// block j to remote member j): `recv`'s block j from remote member j.
///
/// # Safety
/// Buffers and arrays as MPI requires (nonblocking contract).
pub(crate) unsafe fn iall(
    ic: &InterCommunicator,
    send: Side<*const c_void>,
    recv: Side<*mut c_void>,
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    no_in_place(send.0)?;
    let mut sg = Staged::default();
    // SAFETY: caller.
    let plan = unsafe { (send_blocks(&mut sg, send)?, recv_blocks(&mut sg, recv)?) };
    start(ic, comm, sg, plan, request)
}

/// A part of this member's vector sent to a remote member: (remote rank, element
/// offset, count).
type Part = (c_int, usize, usize);
/// What a receiving member folds and keeps: (count received from each remote member,
/// count kept, element offset kept).
type Kept = (usize, usize, usize);

/// Which reduction.
pub(crate) enum Fold {
    /// `MPI_Ireduce` (root: `MPI_ROOT`, `MPI_PROC_NULL` or the remote root's rank).
    Reduce(c_int),
    /// `MPI_Iallreduce`.
    All,
    /// `MPI_Ireduce_scatter_block`: each remote member gets its block of this member's
    /// vector (the vector's count over the remote group's size).
    ScatterBlock,
    /// `MPI_Ireduce_scatter`: this member's (count, element offset) in the folded vector
    /// (each remote member gets this member's whole vector: the remote group's counts
    /// are not known here).
    Scatter(usize, usize),
}

/// The reductions (module docs). `cnt`: this member's vector, in elements (for the
/// reduce-scatters, the whole vector: its group's total).
///
/// # Safety
/// Buffers as MPI requires (nonblocking contract).
pub(crate) unsafe fn ireduce(
    ic: &InterCommunicator,
    (send, recv, cnt, t, op): (*const c_void, *mut c_void, usize, Handle, Handle),
    k: Fold,
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    no_in_place(send)?;
    let l = layout_of(t)?;
    let red = reducer(op)?;
    validate(&red, &l)?;
    let m = remote(ic);
    // To whom this member sends which part (remote rank, element offset, count), and
    // what it receives from each remote member and keeps of the fold (count in,
    // count kept, offset kept).
    let (gives, takes): (Vec<Part>, Option<Kept>) = match k {
        Fold::Reduce(root) => match role(ic, root)? {
            Role::Root => (Vec::new(), Some((cnt, cnt, 0))),
            Role::Idle => (Vec::new(), None),
            Role::Member(r) => (vec![(r, 0, cnt)], None),
        },
        Fold::All => ((0..m).map(|r| (r, 0, cnt)).collect(), Some((cnt, cnt, 0))),
        Fold::ScatterBlock => {
            let b = if m > 0 { cnt / m as usize } else { 0 };
            if m > 0 && b * m as usize != cnt {
                return Err(err(
                    MPI_ERR_COUNT,
                    format!("a vector of {cnt} elements does not split into {m} blocks"),
                ));
            }
            let mine = cnt / (ic.size().max(1) as usize);
            (
                (0..m).map(|r| (r, r as usize * b, b)).collect(),
                Some((mine, mine, 0)),
            )
        }
        Fold::Scatter(c, off) => ((0..m).map(|r| (r, 0, cnt)).collect(), Some((cnt, c, off))),
    };
    let mut sg = Staged::default();
    let mut plan = (Sends::new(), Recvs::new());
    for (r, off, c) in gives {
        // SAFETY: caller (the vector is readable until completion).
        plan.0.push((r, unsafe {
            copy(&mut sg, at(send, off as isize, &l), c, &l)?
        }));
    }
    if let Some((n, c, off)) = takes.filter(|_| m > 0) {
        let m = m as usize;
        let len = n * l.size;
        if recv.is_null() && c * l.size > 0 {
            return Err(err(MPI_ERR_BUFFER, "invalid buffer address"));
        }
        let first = sg.len();
        for r in 0..m {
            plan.1.push((r as c_int, sg.hold(vec![0; len])));
        }
        sg.then(Box::new(move |b, _| {
            let mut acc = b[first].to_vec();
            for part in &b[first + 1..first + m] {
                let mut next = part.to_vec();
                red.fold(t, &l, n, &acc, &mut next)?;
                acc = next;
            }
            let kept = &acc[off * l.size..][..c * l.size];
            // SAFETY: the receive buffer holds c elements, valid at completion.
            unsafe { unpack(&l, kept, recv, c) }
        }));
    }
    start(ic, comm, sg, plan, request)
}
