//! Collectives whose members contribute different counts (rsmpi's varcount forms:
//! `MPI_Gatherv`, `MPI_Scatterv`, `MPI_Allgatherv`, `MPI_Alltoallv`; and
//! `MPI_Reduce_scatter_block`), and the [`Partition`] /
//! [`PartitionMut`] buffers that describe the blocks.
//!
//! Contract: a partition is a buffer of elements of one datatype with, per member, a
//! count and a displacement, both in elements; the blocks must lie inside the buffer and
//! may not overlap in a receive partition (checked: an error through the fatal handler,
//! never a write outside the buffer). With contiguous datatypes the calls run as
//! schedules of the core (`coll::varcount`: blocking and immediate alike, every block
//! straight to where it belongs, `MPI_Alltoallv` and `MPI_Reduce_scatter_block` too).
//! Otherwise the blocking gather, scatter and all-gather move the data as point-to-point
//! messages on a private duplicate of the communicator, block by block (the gather's
//! root receives each member's block in place; all-gather gathers to member 0 and
//! broadcasts the whole partition); the other calls refuse non-contiguous datatypes.

use crate::datatype::{Buffer, BufferMut, Partition, PartitionMut, TypeMap};
use crate::point_to_point::{Destination, Source};
use crate::topology::{Communicator, SimpleCommunicator};
use crate::{Count, Rank};

/// One block of a partition as a buffer of its own.
struct Block {
    ptr: *mut u8,
    count: usize,
    dt: TypeMap,
}

// SAFETY: a block lies inside its partition's buffer (checked by `blocks`), which the
// partition borrows for the whole call.
unsafe impl Buffer for Block {
    fn buffer_ptr(&self) -> *const u8 {
        self.ptr
    }
    fn count(&self) -> usize {
        self.count
    }
    fn datatype(&self) -> TypeMap {
        self.dt.clone()
    }
}

// SAFETY: as above; a receive partition's blocks do not overlap (checked).
unsafe impl BufferMut for Block {
    fn buffer_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
}

fn bad(call: &str, what: String) -> ! {
    crate::runtime::fatal(call, crate::Error::InvalidArg(what))
}

/// The blocks of a partition over `p` members, checked (module docs): `buf` is the buffer's start and length in bytes, `layout` the counts and
/// displacements.
fn blocks(
    call: &str,
    (ptr, len): (*mut u8, usize),
    dt: &TypeMap,
    (counts, displs): (&[Count], &[Count]),
    p: Rank,
    disjoint: bool,
) -> Vec<Block> {
    let p = p as usize;
    if counts.len() != p || displs.len() != p {
        bad(
            call,
            format!(
                "{} counts and {} displacements for {p} members",
                counts.len(),
                displs.len()
            ),
        );
    }
    let ext = dt.extent().max(1);
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(p);
    let mut out = Vec::with_capacity(p);
    for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        let (Ok(c), Ok(d)) = (usize::try_from(c), usize::try_from(d)) else {
            bad(call, format!("block {i}: count {c}, displacement {d}"));
        };
        let (lo, hi) = (
            d.saturating_mul(ext),
            d.saturating_add(c).saturating_mul(ext),
        );
        if c > 0 && hi > len {
            bad(
                call,
                format!(
                    "block {i} ({c} elements at {d}) outside a buffer of {} elements",
                    len / ext
                ),
            );
        }
        if c > 0 {
            spans.push((lo, hi));
        }
        // SAFETY: `lo` is inside the buffer (checked above) or the block is empty.
        let ptr = if c > 0 { unsafe { ptr.add(lo) } } else { ptr };
        out.push(Block {
            ptr,
            count: c,
            dt: dt.clone(),
        });
    }
    if disjoint {
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[1].0 < w[0].1) {
            bad(call, "blocks of a receive partition overlap".into());
        }
    }
    out
}

fn len_of<B: ?Sized + Buffer>(b: &B) -> usize {
    b.count() * b.datatype().extent()
}

/// Gather of different counts to `root` (`recv` only at the root).
pub(crate) fn gather<S, R>(
    c: &SimpleCommunicator,
    root: Rank,
    send: &S,
    recv: Option<&mut PartitionMut<'_, R>>,
) where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let d = c.duplicate();
    let Some(part) = recv else {
        d.process_at_rank(root).send(send);
        return;
    };
    let len = len_of(&*part.buf);
    let dt = part.buf.datatype();
    let ptr = part.buf.buffer_mut_ptr();
    let mut bs = blocks(
        "gather_varcount_into_root",
        (ptr, len),
        &dt,
        (&part.counts, &part.displs),
        d.size(),
        true,
    );
    for (r, b) in bs.iter_mut().enumerate() {
        let r = r as Rank;
        if r == d.rank() {
            let mut mine = Vec::new();
            // SAFETY: Buffer guarantees `count` elements of its datatype at its pointer.
            unsafe {
                send.datatype()
                    .pack(send.buffer_ptr(), send.count(), &mut mine)
            };
            let n = b.count * dt.size();
            if mine.len() > n {
                bad(
                    "gather_varcount_into_root",
                    format!("the root's {} bytes exceed its block of {n}", mine.len()),
                );
            }
            // SAFETY: the block holds `count` elements; at most that many bytes unpack.
            unsafe { dt.unpack(&mine, b.ptr) };
        } else {
            d.process_at_rank(r).receive_into(b);
        }
    }
}

/// Scatter of different counts from `root` (`send` only at the root).
pub(crate) fn scatter<S, R>(
    c: &SimpleCommunicator,
    root: Rank,
    send: Option<&Partition<'_, S>>,
    recv: &mut R,
) where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let d = c.duplicate();
    let Some(part) = send else {
        d.process_at_rank(root).receive_into(recv);
        return;
    };
    let len = len_of(part.buf);
    let dt = part.buf.datatype();
    let ptr = part.buf.buffer_ptr() as *mut u8;
    let bs = blocks(
        "scatter_varcount_into_root",
        (ptr, len),
        &dt,
        (&part.counts, &part.displs),
        d.size(),
        false,
    );
    for (r, b) in bs.iter().enumerate() {
        let r = r as Rank;
        if r == d.rank() {
            let mut mine = Vec::new();
            // SAFETY: the block holds `count` elements of `dt` inside the partition.
            unsafe { dt.pack(b.ptr, b.count, &mut mine) };
            let rdt = recv.datatype();
            let n = recv.count() * rdt.size();
            if mine.len() > n {
                bad(
                    "scatter_varcount_into_root",
                    format!(
                        "the root's block of {} bytes exceeds its {n}-byte buffer",
                        mine.len()
                    ),
                );
            }
            // SAFETY: BufferMut guarantees room for `count` elements (checked above).
            unsafe { rdt.unpack(&mine, recv.buffer_mut_ptr()) };
        } else {
            d.process_at_rank(r).send(b);
        }
    }
}

/// All-gather of different counts: gathered at member 0, then the whole partition
/// broadcast (every member's partition has the same layout, as MPI requires).
pub(crate) fn all_gather<S, R>(c: &SimpleCommunicator, send: &S, recv: &mut PartitionMut<'_, R>)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    use crate::collective::Root;
    if c.rank() == 0 {
        gather(c, 0, send, Some(&mut *recv));
    } else {
        gather::<S, R>(c, 0, send, None);
    }
    // Block by block: what lies between the blocks stays as it was on every member.
    let len = len_of(&*recv.buf);
    let dt = recv.buf.datatype();
    let ptr = recv.buf.buffer_mut_ptr();
    let layout = (&recv.counts[..], &recv.displs[..]);
    let call = "all_gather_varcount_into";
    let root = c.process_at_rank(0);
    for b in blocks(call, (ptr, len), &dt, layout, c.size(), true).iter_mut() {
        root.broadcast_into(b);
    }
}

// ---- On the core's schedules (blocking and immediate; contiguous datatypes) ----

use super::{run, start, Chosen, PlanFn, Spec};
use crate::coll::algorithm::Algorithm;
use crate::coll::varcount as plans;
use crate::coll::CollKind;
use crate::engine::requests::ReqId;
use crate::topology::Process;

/// Byte blocks `(offset, length)` of a partition over `p` members (checked by `blocks`).
fn byte_blocks(
    call: &str,
    (ptr, len): (*mut u8, usize),
    dt: &TypeMap,
    layout: (&[Count], &[Count]),
    p: Rank,
    disjoint: bool,
) -> Vec<plans::Block> {
    blocks(call, (ptr, len), dt, layout, p, disjoint)
        .iter()
        .map(|b| {
            let n = b.count * dt.size();
            // Blocks lie inside the buffer (checked): the offset is non-negative.
            let off = if n > 0 {
                b.ptr as usize - ptr as usize
            } else {
                0
            };
            (off, n)
        })
        .collect()
}

/// Contiguous datatypes only on the schedules: `fallback` (the blocking gather, scatter
/// and all-gather) goes to point-to-point otherwise, the rest refuse.
fn plain(call: &str, dts: &[&TypeMap], fallback: bool) -> bool {
    let ok = dts.iter().all(|d| d.is_contiguous());
    if !ok && !fallback {
        bad(
            call,
            "needs contiguous datatypes (only the blocking gather, scatter and all-gather \
             of different counts take others)"
                .into(),
        );
    }
    ok
}

fn linear(
    plan: crate::coll::schedule::Plan,
) -> Result<(Chosen, crate::coll::schedule::Plan), crate::Error> {
    Ok((Chosen::plain(Algorithm::Linear), plan))
}

fn spec<'c>(
    name: &'static str,
    kind: CollKind,
    root: Option<Rank>,
    dt: TypeMap,
    send: (*const u8, usize),
    recv: (*mut u8, usize),
    comm: &'c SimpleCommunicator,
) -> Spec<'c> {
    // Count 0: the members' counts differ; the element type is matched.
    Spec {
        name,
        kind,
        root,
        op: None,
        dt,
        count: 0,
        send,
        recv,
        comm,
    }
}

/// `MPI_Gatherv` (`recv` at the root only); `Some` request id when not `blocking`.
pub(crate) fn gatherv<S, R>(
    p: Process<'_>,
    send: &S,
    recv: Option<&mut PartitionMut<'_, R>>,
    blocking: bool,
) -> Option<ReqId>
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let call = "gather_varcount_into";
    let sdt = send.datatype();
    let rdt = recv.as_ref().map(|r| r.buf.datatype());
    let dts: Vec<&TypeMap> = std::iter::once(&sdt).chain(rdt.as_ref()).collect();
    if !plain(call, &dts, blocking) {
        gather(p.comm, p.rank, send, recv);
        return None;
    }
    let mine = send.count() * sdt.size();
    let (rbuf, blocks) = match recv {
        Some(part) => {
            let len = len_of(&*part.buf);
            let ptr = part.buf.buffer_mut_ptr();
            let dt = part.buf.datatype();
            let layout = (&part.counts[..], &part.displs[..]);
            let b = byte_blocks(call, (ptr, len), &dt, layout, p.comm.size(), true);
            if b[p.rank as usize].1 != mine {
                bad(
                    call,
                    format!(
                        "the root sends {mine} bytes to its block of {}",
                        b[p.rank as usize].1
                    ),
                );
            }
            ((ptr, len), b)
        }
        None => ((std::ptr::null_mut(), 0), Vec::new()),
    };
    let s = spec(
        call,
        CollKind::Gatherv,
        Some(p.rank),
        sdt,
        (send.buffer_ptr(), mine),
        rbuf,
        p.comm,
    );
    let root = p.rank as usize;
    let plan: PlanFn = Box::new(move |sh| linear(plans::gatherv(sh, root, mine, &blocks)));
    go(s, plan, blocking)
}

/// `MPI_Scatterv` (`send` at the root only).
pub(crate) fn scatterv<S, R>(
    p: Process<'_>,
    send: Option<&Partition<'_, S>>,
    recv: &mut R,
    blocking: bool,
) -> Option<ReqId>
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let call = "scatter_varcount_into";
    let rdt = recv.datatype();
    let sdt = send.map(|s| s.buf.datatype());
    let dts: Vec<&TypeMap> = std::iter::once(&rdt).chain(sdt.as_ref()).collect();
    if !plain(call, &dts, blocking) {
        scatter(p.comm, p.rank, send, recv);
        return None;
    }
    let mine = recv.count() * rdt.size();
    let (sbuf, blocks) = match send {
        Some(part) => {
            let len = len_of(part.buf);
            let ptr = part.buf.buffer_ptr() as *mut u8;
            let dt = part.buf.datatype();
            let layout = (&part.counts[..], &part.displs[..]);
            let b = byte_blocks(call, (ptr, len), &dt, layout, p.comm.size(), false);
            if b[p.rank as usize].1 > mine {
                bad(
                    call,
                    format!(
                        "the root's block of {} bytes exceeds its {mine}-byte buffer",
                        b[p.rank as usize].1
                    ),
                );
            }
            ((ptr as *const u8, len), b)
        }
        None => ((std::ptr::null(), 0), Vec::new()),
    };
    let r = (recv.buffer_mut_ptr(), mine);
    let s = spec(call, CollKind::Scatterv, Some(p.rank), rdt, sbuf, r, p.comm);
    let root = p.rank as usize;
    let plan: PlanFn = Box::new(move |sh| linear(plans::scatterv(sh, root, mine, &blocks)));
    go(s, plan, blocking)
}

/// `MPI_Allgatherv`.
pub(crate) fn allgatherv<S, R>(
    c: &SimpleCommunicator,
    send: &S,
    recv: &mut PartitionMut<'_, R>,
    blocking: bool,
) -> Option<ReqId>
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let call = "all_gather_varcount_into";
    let (sdt, rdt) = (send.datatype(), recv.buf.datatype());
    if !plain(call, &[&sdt, &rdt], blocking) {
        all_gather(c, send, recv);
        return None;
    }
    let len = len_of(&*recv.buf);
    let ptr = recv.buf.buffer_mut_ptr();
    let layout = (&recv.counts[..], &recv.displs[..]);
    let blocks = byte_blocks(call, (ptr, len), &rdt, layout, c.size(), true);
    let mine = send.count() * sdt.size();
    if blocks[c.rank() as usize].1 != mine {
        bad(
            call,
            format!(
                "{mine} bytes sent to a block of {}",
                blocks[c.rank() as usize].1
            ),
        );
    }
    let s = spec(
        call,
        CollKind::Allgatherv,
        None,
        sdt,
        (send.buffer_ptr(), mine),
        (ptr, len),
        c,
    );
    let plan: PlanFn = Box::new(move |sh| linear(plans::allgatherv(sh, &blocks)));
    go(s, plan, blocking)
}

/// `MPI_Alltoallv` (contiguous datatypes).
pub(crate) fn alltoallv<S, R>(
    c: &SimpleCommunicator,
    send: &Partition<'_, S>,
    recv: &mut PartitionMut<'_, R>,
    blocking: bool,
) -> Option<ReqId>
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let call = "all_to_all_varcount_into";
    let (sdt, rdt) = (send.buf.datatype(), recv.buf.datatype());
    if !plain(call, &[&sdt, &rdt], false) {
        unreachable!("plain() reports non-contiguous datatypes");
    }
    let slen = len_of(send.buf);
    let sptr = send.buf.buffer_ptr() as *mut u8;
    let sl = (&send.counts[..], &send.displs[..]);
    let sends = byte_blocks(call, (sptr, slen), &sdt, sl, c.size(), false);
    let rlen = len_of(&*recv.buf);
    let rptr = recv.buf.buffer_mut_ptr();
    let rl = (&recv.counts[..], &recv.displs[..]);
    let recvs = byte_blocks(call, (rptr, rlen), &rdt, rl, c.size(), true);
    let me = c.rank() as usize;
    if sends[me].1 != recvs[me].1 {
        bad(
            call,
            format!(
                "{} bytes to itself into a block of {}",
                sends[me].1, recvs[me].1
            ),
        );
    }
    let s = spec(
        call,
        CollKind::Alltoallv,
        None,
        sdt,
        (sptr as *const u8, slen),
        (rptr, rlen),
        c,
    );
    let plan: PlanFn = Box::new(move |sh| linear(plans::alltoallv(sh, &sends, &recvs)));
    go(s, plan, blocking)
}

/// `MPI_Reduce_scatter_block` with a predefined operation: member i gets the reduction
/// of block i (`recv`'s count elements) of every member's `send`.
pub(crate) fn reduce_scatter_block<S, R>(
    c: &SimpleCommunicator,
    send: &S,
    recv: &mut R,
    op: crate::coll::ops::OpKind,
    blocking: bool,
) -> Option<ReqId>
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let call = "reduce_scatter_block_into";
    let (sdt, rdt) = (send.datatype(), recv.datatype());
    if !plain(call, &[&sdt, &rdt], false) {
        unreachable!("plain() reports non-contiguous datatypes");
    }
    let n = recv.count();
    let p = c.size() as usize;
    if send.count() != n * p || sdt.signature() != rdt.signature() {
        bad(
            call,
            format!("{} elements sent for {p} blocks of {n}", send.count()),
        );
    }
    let block = n * rdt.size();
    let s = Spec {
        name: call,
        kind: CollKind::ReduceScatterBlock,
        root: None,
        op: Some(op),
        dt: rdt,
        count: n,
        send: (send.buffer_ptr(), block * p),
        recv: (recv.buffer_mut_ptr(), block),
        comm: c,
    };
    let plan: PlanFn = Box::new(move |sh| linear(plans::reduce_scatter_block(sh, block)));
    go(s, plan, blocking)
}

fn go(s: Spec<'_>, plan: PlanFn, blocking: bool) -> Option<ReqId> {
    if blocking {
        run(s, plan);
        None
    } else {
        Some(start(s, plan))
    }
}
