//! Collectives whose members contribute different counts (rsmpi's varcount forms:
//! `MPI_Gatherv`, `MPI_Scatterv`, `MPI_Allgatherv`, `MPI_Alltoallv`; and
//! `MPI_Reduce_scatter_block`), and the [`Partition`] /
//! [`PartitionMut`] buffers that describe the blocks.
//!
//! Contract: a partition is a buffer of elements of one datatype with, per member, a
//! count and a displacement, both in elements; the blocks must lie inside the buffer and
//! may not overlap in a receive partition (checked: an error through the fatal handler,
//! never a write outside the buffer). With contiguous datatypes a blocking call whose
//! members share this host's board runs on it (`collective::board::var`, chosen from
//! facts every member shares, never from block lengths, which members do not all know);
//! the others run as schedules of the core (`coll::varcount`: blocking and immediate
//! alike, every block straight to where it belongs, `MPI_Alltoallv` and
//! `MPI_Reduce_scatter_block` too).
//! With a non-contiguous local datatype a blocking call runs the same schedule on packed
//! copies of its buffers (the partition's counts and displacements apply to the packed
//! elements unchanged), so every member runs the schedule whatever the others' types;
//! the immediate forms refuse them with an error.

use crate::datatype::{Buffer, BufferMut, Packed, Partition, PartitionMut, TypeMap};
use crate::datatype::{Described, ReadPtr, WritePtr};
use crate::topology::{Communicator, SimpleCommunicator};
use crate::{Count, Rank};

/// One block of a partition: its start and count.
struct Block {
    ptr: *mut u8,
    count: usize,
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
        out.push(Block { ptr, count: c });
    }
    if disjoint {
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[1].0 < w[0].1) {
            bad(call, "blocks of a receive partition overlap".into());
        }
    }
    out
}

fn len_of<B: ?Sized + Described>(b: &B) -> usize {
    b.elements() * b.datatype().extent()
}

// ---- On the core's schedules (blocking and immediate; contiguous datatypes) ----

use super::{run, start, Chosen, PlanFn, Spec};
use crate::coll::algorithm::Algorithm;
use crate::coll::algos::Shape;
use crate::coll::schedule::Plan;
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

/// Whether the local datatypes are contiguous; with others a call runs the same schedule
/// on packed copies (so every member runs the schedule, whatever its local datatypes):
/// local ones for a blocking call, stand-ins unpacked at completion (`stage`) for an
/// immediate one.
fn plain(dts: &[&TypeMap]) -> bool {
    dts.iter().all(|d| d.is_contiguous())
}

fn linear(plan: Plan) -> Result<(Chosen, Plan), crate::Error> {
    Ok((Chosen::plain(Algorithm::Linear), plan))
}

/// The shared-memory board where every member can use it (a blocking call, every member
/// on this host's board; the same facts on every member), else the schedule `sched`.
/// Nothing here depends on block lengths, which the members do not all know.
fn board_or(
    kind: CollKind,
    sh: &Shape,
    layout: impl FnOnce() -> plans::Layout,
    sched: impl FnOnce() -> Plan,
) -> Result<(Chosen, Plan), crate::Error> {
    // A scatter's or all-to-all's pieces need a header and data in each member's cell.
    let pieces = matches!(kind, CollKind::Scatterv | CollKind::Alltoallv);
    if pieces && sh.board < 16 * sh.p {
        return linear(sched());
    }
    let c = super::choose_board(kind, sh, 0, Algorithm::Linear, Algorithm::Linear);
    match c.alg {
        Algorithm::Shm => Ok((c, Plan::on_board_varcount(layout()))),
        Algorithm::Hier | Algorithm::HierMcast => Ok((c, Plan::hierarchical_varcount(layout()))),
        _ => linear(sched()),
    }
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
    if !plain(&dts) && !blocking {
        let out = recv.as_ref().map(|part| &*part.buf as *const R as *mut R);
        let (s, r) = super::stage(Some(send), out);
        return match (recv, r) {
            (Some(part), Some(r)) => {
                let mut pp = PartitionMut::new(r, &part.counts[..], &part.displs[..]);
                gatherv(p, s.unwrap(), Some(&mut pp), false)
            }
            _ => gatherv::<Packed, [u8]>(p, s.unwrap(), None, false),
        };
    }
    if !plain(&dts) {
        // Non-contiguous here: the same schedule on packed copies (every member runs
        // the schedule, whatever its datatypes).
        let ps = Packed::of(send);
        match recv {
            Some(part) => {
                let mut pr = Packed::of_mut(&mut *part.buf);
                {
                    let mut pp = PartitionMut::new(&mut pr, &part.counts[..], &part.displs[..]);
                    gatherv(p, &ps, Some(&mut pp), true);
                }
                pr.unpack_into(&mut *part.buf);
            }
            None => {
                gatherv::<Packed, [u8]>(p, &ps, None, true);
            }
        }
        return None;
    }
    let mine = send.elements() * sdt.size();
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
    let plan: PlanFn = Box::new(move |sh| {
        let recv = blocks.clone();
        board_or(
            CollKind::Gatherv,
            sh,
            || plans::Layout { send: vec![], recv },
            || plans::gatherv(sh, root, mine, &blocks),
        )
    });
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
    if !plain(&dts) && !blocking {
        let (s, r) = super::stage::<S, R>(send.map(|part| part.buf), Some(&mut *recv as *mut R));
        let r = r.unwrap();
        return match (send, s) {
            (Some(part), Some(s)) => {
                let pp = Partition::new(s, &part.counts[..], &part.displs[..]);
                scatterv(p, Some(&pp), r, false)
            }
            _ => scatterv::<Packed, Packed>(p, None, r, false),
        };
    }
    if !plain(&dts) {
        let mut pr = Packed::of_mut(&mut *recv);
        match send {
            Some(part) => {
                let ps = Packed::of(part.buf);
                let pp = Partition::new(&ps, &part.counts[..], &part.displs[..]);
                scatterv(p, Some(&pp), &mut pr, true);
            }
            None => {
                scatterv::<Packed, Packed>(p, None, &mut pr, true);
            }
        }
        pr.unpack_into(recv);
        return None;
    }
    let mine = recv.elements() * rdt.size();
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
    let plan: PlanFn = Box::new(move |sh| {
        let send = blocks.clone();
        board_or(
            CollKind::Scatterv,
            sh,
            || plans::Layout { send, recv: vec![] },
            || plans::scatterv(sh, root, mine, &blocks),
        )
    });
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
    if !plain(&[&sdt, &rdt]) && !blocking {
        let (s, r) = super::stage(Some(send), Some(&mut *recv.buf as *mut R));
        let mut pp = PartitionMut::new(r.unwrap(), &recv.counts[..], &recv.displs[..]);
        return allgatherv(c, s.unwrap(), &mut pp, false);
    }
    if !plain(&[&sdt, &rdt]) {
        let ps = Packed::of(send);
        let mut pr = Packed::of_mut(&mut *recv.buf);
        {
            let mut pp = PartitionMut::new(&mut pr, &recv.counts[..], &recv.displs[..]);
            allgatherv(c, &ps, &mut pp, true);
        }
        pr.unpack_into(&mut *recv.buf);
        return None;
    }
    let len = len_of(&*recv.buf);
    let ptr = recv.buf.buffer_mut_ptr();
    let layout = (&recv.counts[..], &recv.displs[..]);
    let blocks = byte_blocks(call, (ptr, len), &rdt, layout, c.size(), true);
    let mine = send.elements() * sdt.size();
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
    let plan: PlanFn = Box::new(move |sh| {
        let recv = blocks.clone();
        board_or(
            CollKind::Allgatherv,
            sh,
            || plans::Layout { send: vec![], recv },
            || plans::allgatherv(sh, &blocks),
        )
    });
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
    if !plain(&[&sdt, &rdt]) && !blocking {
        let (s, r) = super::stage(Some(send.buf), Some(&mut *recv.buf as *mut R));
        let sp = Partition::new(s.unwrap(), &send.counts[..], &send.displs[..]);
        let mut rp = PartitionMut::new(r.unwrap(), &recv.counts[..], &recv.displs[..]);
        return alltoallv(c, &sp, &mut rp, false);
    }
    if !plain(&[&sdt, &rdt]) {
        let ps = Packed::of(send.buf);
        let mut pr = Packed::of_mut(&mut *recv.buf);
        {
            let sp = Partition::new(&ps, &send.counts[..], &send.displs[..]);
            let mut rp = PartitionMut::new(&mut pr, &recv.counts[..], &recv.displs[..]);
            alltoallv(c, &sp, &mut rp, true);
        }
        pr.unpack_into(&mut *recv.buf);
        return None;
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
    let plan: PlanFn = Box::new(move |sh| {
        let layout = plans::Layout {
            send: sends.clone(),
            recv: recvs.clone(),
        };
        board_or(
            CollKind::Alltoallv,
            sh,
            || layout,
            || plans::alltoallv(sh, &sends, &recvs),
        )
    });
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
    if !plain(&[&sdt, &rdt]) && !blocking {
        let (s, r) = super::stage(Some(send), Some(&mut *recv as *mut R));
        return reduce_scatter_block(c, s.unwrap(), r.unwrap(), op, false);
    }
    if !plain(&[&sdt, &rdt]) {
        let ps = Packed::of(send);
        let mut pr = Packed::of_mut(&mut *recv);
        reduce_scatter_block(c, &ps, &mut pr, op, true);
        pr.unpack_into(recv);
        return None;
    }
    let n = recv.elements();
    let p = c.size() as usize;
    if send.elements() != n * p || sdt.signature() != rdt.signature() {
        bad(
            call,
            format!("{} elements sent for {p} blocks of {n}", send.elements()),
        );
    }
    let block = n * rdt.size();
    let esz = rdt.size().max(1);
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
    let plan: PlanFn = Box::new(move |sh| {
        // The board carries one element per member and step at least.
        if sh.board < sh.p * esz {
            return linear(plans::reduce_scatter_block(sh, block));
        }
        board_or(
            CollKind::ReduceScatterBlock,
            sh,
            plans::Layout::default,
            || plans::reduce_scatter_block(sh, block),
        )
    });
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
