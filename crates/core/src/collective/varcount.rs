//! Collectives whose members contribute different counts (rsmpi's varcount forms:
//! `MPI_Gatherv`, `MPI_Scatterv`, `MPI_Allgatherv`), and the [`Partition`] /
//! [`PartitionMut`] buffers that describe the blocks.
//!
//! Contract: a partition is a buffer of elements of one datatype with, per member, a
//! count and a displacement, both in elements; the blocks must lie inside the buffer and
//! may not overlap in a receive partition (checked: an error through the fatal handler,
//! never a write outside the buffer). The data moves as point-to-point messages on a
//! private duplicate of the communicator, block by block straight between the members'
//! buffers and the partition's blocks (the gather's root receives each member's block in
//! place; all-gather gathers to member 0 and broadcasts the whole partition). They are
//! blocking only; the core's schedules, board and hierarchical paths do not take them yet.

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
