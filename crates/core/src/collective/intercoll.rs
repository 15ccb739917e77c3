//! The collectives MPI defines on intercommunicators (MPI 4.1 §6.2.2): every member
//! gets the *remote* group's data.
//!
//! Contract: each call is collective over both groups. The local group's work runs as
//! ordinary collectives on its private communicator (`InterSides::local`: board, schedules
//! or multicast as usual); only the two leaders (local rank 0 of each group) talk across,
//! on the intercommunicator's internal context with a tag per kind of exchange, so the
//! traffic never matches a user message:
//! * all-gather (and varcount): gather to the leader, the leaders swap, broadcast;
//! * all-reduce: reduce to the leader, the leaders swap, broadcast (each group gets the
//!   reduction of the other's contributions, combined in the other group's rank order);
//! * reduce-scatter (block): reduce to the leader, the leaders swap the reduced vectors,
//!   the leader scatters the other group's vector;
//! * all-to-all (and varcount): every member exchanges its blocks with every remote
//!   member directly (one message per pair, all in flight at once; an empty block is not
//!   sent, as both ends know its length is 0);
//! * rooted calls (the root lives in the other group): the sending group gathers (or
//!   reduces) to its leader, which sends to the root; a scatter's root sends to the
//!   receiving group's leader, which scatters. The root calls `InterCommunicator`'s
//!   `*_root` methods (`MPI_ROOT`); its group's other members take no part
//!   (`MPI_PROC_NULL`).
//!
//! The immediate forms and the scans are not defined here: calling them on an
//! intercommunicator ends the rank with an error naming the call.

use super::{CommunicatorCollectives, Operation, Root};
use crate::datatype::{
    Buffer, BufferMut, Described, Packed, Partition, PartitionMut, ReadPtr, TypeMap, WritePtr,
};
use crate::point_to_point::{Destination, Source};
use crate::request::scope;
use crate::topology::{Communicator, InterCommunicator, InterSides, SimpleCommunicator};
use crate::{Count, Rank, Tag};

/// Tags on the internal context (0 and 1 are the leaders' word and the broadcast).
const TAG_GATHER: Tag = 2;
const TAG_SCATTER: Tag = 3;
const TAG_REDUCE: Tag = 4;
const TAG_SWAP: Tag = 5;
const TAG_PAIR: Tag = 6;

/// The sides of `c` when it is an intercommunicator's point-to-point side.
pub(crate) fn sides(c: &SimpleCommunicator) -> Option<&InterSides> {
    c.sides.as_deref()
}

/// Ends the rank: `call` has no intercommunicator form here.
pub(crate) fn unsupported(call: &str) -> ! {
    crate::runtime::fatal(
        call,
        crate::Error::InvalidComm(format!(
            "{call} does not run on an intercommunicator (MPI defines no scan there; the \
             immediate forms are not implemented): merge it first \
             (InterCommunicator::merge / MPI_Intercomm_merge)"
        )),
    )
}

fn bad(call: &str, what: String) -> ! {
    crate::runtime::fatal(call, crate::Error::InvalidArg(what))
}

/// The bytes of a buffer of a contiguous datatype.
fn raw<B: ?Sized + Buffer>(b: &B) -> &[u8] {
    let n = b.elements() * b.datatype().size();
    if n == 0 {
        return &[];
    }
    // SAFETY: a contiguous buffer holds count × size bytes at its pointer.
    unsafe { std::slice::from_raw_parts(b.buffer_ptr(), n) }
}

/// The bytes of a writable buffer of a contiguous datatype.
fn raw_mut<B: ?Sized + BufferMut>(b: &mut B) -> &mut [u8] {
    let n = b.elements() * b.datatype().size();
    if n == 0 {
        return &mut [];
    }
    // SAFETY: as above, writable.
    unsafe { std::slice::from_raw_parts_mut(b.buffer_mut_ptr(), n) }
}

fn prefix(counts: &[Count]) -> Vec<Count> {
    counts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect()
}

fn total(counts: &[Count]) -> usize {
    counts.iter().map(|&c| c.max(0) as usize).sum()
}

/// Copies element block j of the packed `from` (blocks back to back, in order) to block
/// j of the contiguous partition `to`.
fn place<R: ?Sized + BufferMut>(call: &str, from: &Packed, to: &mut PartitionMut<'_, R>) {
    let esz = to.buf.datatype().size();
    let src = raw(from);
    let (counts, displs) = (to.counts.to_vec(), to.displs.to_vec());
    let dst = raw_mut(&mut *to.buf);
    let mut at = 0;
    for (j, (&c, &d)) in counts.iter().zip(&displs).enumerate() {
        let (Ok(c), Ok(d)) = (usize::try_from(c), usize::try_from(d)) else {
            bad(call, format!("block {j}: count {c}, displacement {d}"));
        };
        let (n, o) = (c * esz, d * esz);
        if c > 0 && (o + n > dst.len() || at + n > src.len()) {
            bad(
                call,
                format!("block {j} ({c} elements at {d}) outside its buffer"),
            );
        }
        dst[o..o + n].copy_from_slice(&src[at..at + n]);
        at += n;
    }
}

/// The blocks of the contiguous partition `p`, back to back (what `place` undoes).
fn concat<S: ?Sized + Buffer>(call: &str, p: &Partition<'_, S>) -> Packed {
    let dt = p.buf.datatype();
    let esz = dt.size();
    let src = raw(p.buf);
    let mut out = Packed::zeroed(&dt, total(&p.counts));
    let dst = raw_mut(&mut out);
    let mut at = 0;
    for (j, (&c, &d)) in p.counts.iter().zip(p.displs.iter()).enumerate() {
        let (Ok(c), Ok(d)) = (usize::try_from(c), usize::try_from(d)) else {
            bad(call, format!("block {j}: count {c}, displacement {d}"));
        };
        let (n, o) = (c * esz, d * esz);
        if c > 0 && o + n > src.len() {
            bad(
                call,
                format!("block {j} ({c} elements at {d}) outside its buffer"),
            );
        }
        dst[at..at + n].copy_from_slice(&src[o..o + n]);
        at += n;
    }
    out
}

impl InterSides {
    fn leader(&self) -> bool {
        self.local.rank == 0
    }

    /// `MPI_Barrier`: returns once every member of both groups has called it.
    pub(crate) fn barrier(&self) {
        self.local.barrier();
        if self.leader() {
            self.swap(&[0u8][..], &mut [0u8][..]);
        }
        self.local.barrier();
    }

    /// Leaders only: sends `mine` to the remote leader and receives its data into
    /// `theirs`.
    fn swap<S: ?Sized + Buffer, R: ?Sized + BufferMut>(&self, mine: &S, theirs: &mut R) {
        let other = self.internal.process_at_rank(0);
        scope(|s| {
            let sent = other.immediate_send_with_tag(s, mine, TAG_SWAP);
            other.receive_into_with_tag(theirs, TAG_SWAP);
            sent.wait();
        });
    }

    /// The local leader gathers every local member's `send`, back to back in rank order
    /// (`None` elsewhere); counts are exchanged first when `varying`.
    fn gather_local<S: ?Sized + Buffer>(&self, send: &S, varying: bool) -> Option<Packed> {
        let lp = self.local.process_at_rank(0);
        let dt = send.datatype();
        let p = self.local.size as usize;
        if !self.leader() {
            if varying {
                lp.gather_into(&(send.elements() as Count));
                lp.gather_varcount_into(send);
            } else {
                lp.gather_into(send);
            }
            return None;
        }
        if !varying {
            let mut blob = Packed::zeroed(&dt, send.elements() * p);
            lp.gather_into_root(send, &mut blob);
            return Some(blob);
        }
        let mut counts = vec![0 as Count; p];
        lp.gather_into_root(&(send.elements() as Count), &mut counts[..]);
        let displs = prefix(&counts);
        let mut blob = Packed::zeroed(&dt, total(&counts));
        {
            let mut part = PartitionMut::new(&mut blob, &counts[..], &displs[..]);
            lp.gather_varcount_into_root(send, &mut part);
        }
        Some(blob)
    }

    /// The local leader gets the reduction of every local member's `send` (`None`
    /// elsewhere).
    fn reduce_local<S: ?Sized + Buffer, O: Operation>(&self, send: &S, op: O) -> Option<Packed> {
        let lp = self.local.process_at_rank(0);
        if !self.leader() {
            lp.reduce_into(send, op);
            return None;
        }
        let mut mine = Packed::zeroed(&send.datatype(), send.elements());
        lp.reduce_into_root(send, &mut mine, op);
        Some(mine)
    }

    /// Every local member gets `blob` of `n` elements of `dt` from the leader.
    fn share(&self, blob: Option<Packed>, dt: &TypeMap, n: usize) -> Packed {
        let mut b = blob.unwrap_or_else(|| Packed::zeroed(dt, n));
        self.local.process_at_rank(0).broadcast_into(&mut b);
        b
    }
}

/// `MPI_Allgather`: `recv` gets every remote member's `send`, in remote rank order.
pub(crate) fn all_gather<S, R>(x: &InterSides, send: &S, recv: &mut R)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let blob = x.gather_local(send, false);
    if let Some(mine) = blob {
        x.swap(&mine, recv);
    }
    x.local.process_at_rank(0).broadcast_into(recv);
}

/// `MPI_Allgatherv`: block j of `recv` gets remote member j's `send`.
pub(crate) fn all_gather_varcount<S, R>(x: &InterSides, send: &S, recv: &mut PartitionMut<'_, R>)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let call = "all_gather_varcount_into";
    if !recv.buf.datatype().is_contiguous() {
        let mut pr = Packed::of_mut(&mut *recv.buf);
        {
            let mut pp = PartitionMut::new(&mut pr, &recv.counts[..], &recv.displs[..]);
            all_gather_varcount(x, send, &mut pp);
        }
        return pr.unpack_into(&mut *recv.buf);
    }
    let dt = recv.buf.datatype();
    let n = total(&recv.counts);
    let theirs = x.gather_local(send, true).map(|mine| {
        let mut theirs = Packed::zeroed(&dt, n);
        x.swap(&mine, &mut theirs);
        theirs
    });
    let theirs = x.share(theirs, &dt, n);
    place(call, &theirs, recv);
}

/// `MPI_Allreduce`: `recv` gets the reduction of the remote members' `send`.
pub(crate) fn all_reduce<S, R, O>(x: &InterSides, send: &S, recv: &mut R, op: O)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
    O: Operation,
{
    if let Some(mine) = x.reduce_local(send, op) {
        x.swap(&mine, recv);
    }
    x.local.process_at_rank(0).broadcast_into(recv);
}

/// `MPI_Reduce_scatter_block`: the remote group's vectors, reduced, scattered over this
/// group in blocks of `recv`'s count.
pub(crate) fn reduce_scatter_block<S, R, O>(x: &InterSides, send: &S, recv: &mut R, op: O)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
    O: Operation,
{
    let lp = x.local.process_at_rank(0);
    match x.reduce_local(send, op) {
        Some(mine) => {
            let n = recv.elements() * x.local.size as usize;
            let mut theirs = Packed::zeroed(&send.datatype(), n);
            x.swap(&mine, &mut theirs);
            lp.scatter_into_root(&theirs, recv);
        }
        None => lp.scatter_into(recv),
    }
}

/// Sends block j of `sends` to remote member j and receives block j of `recvs` from it,
/// all at once.
fn pairwise(x: &InterSides, sends: &[&[u8]], recvs: Vec<&mut [u8]>) {
    scope(|s| {
        let mut rq = Vec::new();
        let mut sq = Vec::new();
        for (j, b) in recvs.into_iter().enumerate() {
            if !b.is_empty() {
                let from = x.internal.process_at_rank(j as Rank);
                rq.push(from.immediate_receive_into_with_tag(s, b, TAG_PAIR));
            }
        }
        for (j, b) in sends.iter().enumerate() {
            if !b.is_empty() {
                let to = x.internal.process_at_rank(j as Rank);
                sq.push(to.immediate_send_with_tag(s, *b, TAG_PAIR));
            }
        }
        for r in rq {
            r.wait();
        }
        for r in sq {
            r.wait();
        }
    });
}

/// Splits `buf` into `q` equal blocks.
fn equal_blocks(buf: &[u8], q: usize) -> Vec<&[u8]> {
    let b = buf.len() / q.max(1);
    (0..q).map(|j| &buf[j * b..(j + 1) * b]).collect()
}

/// `MPI_Alltoall`: block j of `send` goes to remote member j, block j of `recv` comes
/// from it.
pub(crate) fn all_to_all<S, R>(x: &InterSides, send: &S, recv: &mut R)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    if !send.datatype().is_contiguous() || !recv.datatype().is_contiguous() {
        let mut pr = Packed::of_mut(&mut *recv);
        all_to_all(x, &Packed::of(send), &mut pr);
        return pr.unpack_into(recv);
    }
    let q = x.internal.size as usize;
    let sends = equal_blocks(raw(send), q);
    let r = raw_mut(recv);
    let b = r.len() / q.max(1);
    let recvs: Vec<&mut [u8]> = if b == 0 {
        (0..q).map(|_| <&mut [u8]>::default()).collect()
    } else {
        r.chunks_mut(b).take(q).collect()
    };
    pairwise(x, &sends, recvs);
}

/// The byte ranges of a partition's blocks in its (contiguous) buffer of `len` bytes.
fn ranges(
    call: &str,
    counts: &[Count],
    displs: &[Count],
    esz: usize,
    len: usize,
) -> Vec<(usize, usize)> {
    counts
        .iter()
        .zip(displs)
        .enumerate()
        .map(|(j, (&c, &d))| {
            let (Ok(c), Ok(d)) = (usize::try_from(c), usize::try_from(d)) else {
                bad(call, format!("block {j}: count {c}, displacement {d}"));
            };
            let (o, n) = (d * esz, c * esz);
            if c > 0 && o + n > len {
                bad(
                    call,
                    format!("block {j} ({c} elements at {d}) outside its buffer"),
                );
            }
            (if c > 0 { o } else { 0 }, n)
        })
        .collect()
}

/// `MPI_Alltoallv`: block j of `send` goes to remote member j, block j of `recv` comes
/// from it.
pub(crate) fn all_to_all_varcount<S, R>(
    x: &InterSides,
    send: &Partition<'_, S>,
    recv: &mut PartitionMut<'_, R>,
) where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
{
    let call = "all_to_all_varcount_into";
    if !send.buf.datatype().is_contiguous() || !recv.buf.datatype().is_contiguous() {
        let ps = Packed::of(send.buf);
        let mut pr = Packed::of_mut(&mut *recv.buf);
        {
            let sp = Partition::new(&ps, &send.counts[..], &send.displs[..]);
            let mut rp = PartitionMut::new(&mut pr, &recv.counts[..], &recv.displs[..]);
            all_to_all_varcount(x, &sp, &mut rp);
        }
        return pr.unpack_into(&mut *recv.buf);
    }
    let q = x.internal.size as usize;
    if send.counts.len() != q || recv.counts.len() != q {
        bad(
            call,
            format!(
                "partitions of {} and {} blocks for a remote group of {q}",
                send.counts.len(),
                recv.counts.len()
            ),
        );
    }
    let s = raw(send.buf);
    let ss = ranges(
        call,
        &send.counts,
        &send.displs,
        send.buf.datatype().size(),
        s.len(),
    );
    let sends: Vec<&[u8]> = ss.iter().map(|&(o, n)| &s[o..o + n]).collect();
    let esz = recv.buf.datatype().size();
    let (counts, displs) = (recv.counts.to_vec(), recv.displs.to_vec());
    let r = raw_mut(&mut *recv.buf);
    let mut rs: Vec<(usize, usize, usize)> = ranges(call, &counts, &displs, esz, r.len())
        .into_iter()
        .enumerate()
        .map(|(j, (o, n))| (o, n, j))
        .collect();
    // Disjoint mutable blocks: cut the buffer in offset order.
    rs.sort_unstable();
    let mut recvs: Vec<Option<&mut [u8]>> = (0..q).map(|_| None).collect();
    let mut rest = r;
    let mut at = 0;
    for (o, n, j) in rs {
        if n == 0 {
            recvs[j] = Some(<&mut [u8]>::default());
            continue;
        }
        if o < at {
            bad(call, "blocks of a receive partition overlap".into());
        }
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(o - at);
        let (blk, tail) = tail.split_at_mut(n);
        recvs[j] = Some(blk);
        rest = tail;
        at = o + n;
    }
    pairwise(
        x,
        &sends,
        recvs.into_iter().map(|b| b.unwrap_or_default()).collect(),
    );
}

// ---- Rooted calls: the root is a member of the remote group ----

/// The receiving group's side of `MPI_Bcast` from remote rank `root`.
pub(crate) fn broadcast_from<B: ?Sized + BufferMut>(x: &InterSides, root: Rank, buf: &mut B) {
    if x.leader() {
        x.internal
            .process_at_rank(root)
            .receive_into_with_tag(buf, super::inter::TAG_BCAST);
    }
    x.local.process_at_rank(0).broadcast_into(buf);
}

/// The sending group's side of `MPI_Gather(v)` to remote rank `root`.
pub(crate) fn gather_to<S: ?Sized + Buffer>(x: &InterSides, root: Rank, send: &S, varying: bool) {
    if let Some(blob) = x.gather_local(send, varying) {
        x.internal
            .process_at_rank(root)
            .send_with_tag(&blob, TAG_GATHER);
    }
}

/// The receiving group's side of `MPI_Scatter` from remote rank `root`.
pub(crate) fn scatter_from<R: ?Sized + BufferMut>(x: &InterSides, root: Rank, recv: &mut R) {
    let lp = x.local.process_at_rank(0);
    if x.leader() {
        let mut blob = Packed::zeroed(&recv.datatype(), recv.elements() * x.local.size as usize);
        x.internal
            .process_at_rank(root)
            .receive_into_with_tag(&mut blob, TAG_SCATTER);
        lp.scatter_into_root(&blob, recv);
    } else {
        lp.scatter_into(recv);
    }
}

/// The receiving group's side of `MPI_Scatterv` from remote rank `root`.
pub(crate) fn scatter_varcount_from<R: ?Sized + BufferMut>(
    x: &InterSides,
    root: Rank,
    recv: &mut R,
) {
    let lp = x.local.process_at_rank(0);
    let mine = recv.elements() as Count;
    if !x.leader() {
        lp.gather_into(&mine);
        lp.scatter_varcount_into(recv);
        return;
    }
    let p = x.local.size as usize;
    let mut counts = vec![0 as Count; p];
    lp.gather_into_root(&mine, &mut counts[..]);
    let displs = prefix(&counts);
    let mut blob = Packed::zeroed(&recv.datatype(), total(&counts));
    x.internal
        .process_at_rank(root)
        .receive_into_with_tag(&mut blob, TAG_SCATTER);
    let part = Partition::new(&blob, &counts[..], &displs[..]);
    lp.scatter_varcount_into_root(&part, recv);
}

/// The sending group's side of `MPI_Reduce` to remote rank `root`.
pub(crate) fn reduce_to<S, O>(x: &InterSides, root: Rank, send: &S, op: O)
where
    S: ?Sized + Buffer,
    O: Operation,
{
    if let Some(mine) = x.reduce_local(send, op) {
        x.internal
            .process_at_rank(root)
            .send_with_tag(&mine, TAG_REDUCE);
    }
}

/// The root's sides of the rooted collectives (`MPI_ROOT`): the root lives in this
/// group, the other group sends or receives. This group's other members take no part.
impl InterCommunicator {
    fn remote_leader(&self) -> crate::topology::Process<'_> {
        self.internal.process_at_rank(0)
    }

    /// The root's side of a gather (`MPI_Gather` with `MPI_ROOT`): `recvbuf` gets every
    /// remote member's block, in remote rank order. The remote members call
    /// `process_at_rank(root).gather_into(..)`.
    pub fn gather_root<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) {
        self.remote_leader()
            .receive_into_with_tag(recvbuf, TAG_GATHER);
    }

    /// The root's side of a gather of different counts (`MPI_Gatherv` with `MPI_ROOT`):
    /// block j of `recvbuf` gets remote member j's elements.
    pub fn gather_varcount_root<R: ?Sized + BufferMut>(&self, recvbuf: &mut PartitionMut<'_, R>) {
        if !recvbuf.buf.datatype().is_contiguous() {
            let mut pr = Packed::of_mut(&mut *recvbuf.buf);
            {
                let mut pp = PartitionMut::new(&mut pr, &recvbuf.counts[..], &recvbuf.displs[..]);
                self.gather_varcount_root(&mut pp);
            }
            return pr.unpack_into(&mut *recvbuf.buf);
        }
        let mut blob = Packed::zeroed(&recvbuf.buf.datatype(), total(&recvbuf.counts));
        self.remote_leader()
            .receive_into_with_tag(&mut blob, TAG_GATHER);
        place("gather_varcount_root", &blob, recvbuf);
    }

    /// The root's side of a scatter (`MPI_Scatter` with `MPI_ROOT`): block j of
    /// `sendbuf` goes to remote member j, which calls
    /// `process_at_rank(root).scatter_into(..)`.
    pub fn scatter_root<S: ?Sized + Buffer>(&self, sendbuf: &S) {
        self.remote_leader().send_with_tag(sendbuf, TAG_SCATTER);
    }

    /// The root's side of a scatter of different counts (`MPI_Scatterv` with
    /// `MPI_ROOT`): block j of `sendbuf` goes to remote member j.
    pub fn scatter_varcount_root<S: ?Sized + Buffer>(&self, sendbuf: &Partition<'_, S>) {
        if !sendbuf.buf.datatype().is_contiguous() {
            let ps = Packed::of(sendbuf.buf);
            let pp = Partition::new(&ps, &sendbuf.counts[..], &sendbuf.displs[..]);
            return self.scatter_varcount_root(&pp);
        }
        let blob = concat("scatter_varcount_root", sendbuf);
        self.remote_leader().send_with_tag(&blob, TAG_SCATTER);
    }

    /// The root's side of a reduction (`MPI_Reduce` with `MPI_ROOT`): `recvbuf` gets
    /// the reduction of the remote members' contributions, which call
    /// `process_at_rank(root).reduce_into(..)`.
    pub fn reduce_root<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) {
        self.remote_leader()
            .receive_into_with_tag(recvbuf, TAG_REDUCE);
    }
}
