//! Collective operations in the shape of rsmpi's `CommunicatorCollectives` and `Root`.
//!
//! Contract: every member of a communicator makes the same collective calls in the same
//! order (MPI's rule); each call gets the communicator's next sequence number, and its
//! signature (kind, root, operation, type signature of a block) travels with its data, so
//! mismatched calls end in an error naming the ranks instead of a hang or corrupt data.
//! Buffers are typed ([`Buffer`]/[`BufferMut`]); sizes follow MPI: gather/scatter/allgather/
//! all-to-all exchange one block of `sendbuf`'s (or the non-root's `recvbuf`'s) size per
//! member. The algorithm is chosen per call and can be forced with
//! `PHALANX_COLL_<NAME>=<algorithm>` (see [`crate::coll::algos`]).

use crate::coll::algorithm::Algorithm;
use crate::coll::algos::{self, Shape};
use crate::coll::ops::OpKind;
use crate::coll::schedule::{Buf, Plan};
use crate::coll::{signature, CollCall, CollKind};
use crate::datatype::{Buffer, BufferMut, Packed, Partition, PartitionMut, TypeMap};
use crate::datatype::{Described, ReadPtr, WritePtr};
use crate::engine::requests::ReqId;
use crate::error::Error;
use crate::request::{Request, Scope, StaticScope};
use crate::runtime::call;
use crate::topology::{Color, Communicator, SimpleCommunicator};
use crate::Rank;
use board::BoardCall;
use hier::HierCall;
use std::sync::Arc;

mod board;
mod hier;
mod inter;
mod intercoll;
mod lean;
mod root;
mod staged;
use staged::{shape, stage};
mod user;
mod varcount;
pub use inter::create_intercommunicator;
pub use lean::{board_call, LeanCall};
pub use root::Root;
use user::predefined;
pub use user::reduce_local_into;
pub use user::{DynBuffer, DynBufferMut, UnsafeUserFunction, UnsafeUserOperation, UserOperation};

/// A reduction operation.
pub trait Operation {
    /// Which predefined operation.
    fn kind(&self) -> OpKind;
    /// The program's own operation, if this is one ([`UserOperation`]).
    fn user(&self) -> Option<&UserOperation<'_>> {
        None
    }
}

impl Operation for UserOperation<'_> {
    /// Unused: a user operation takes its own path (`user()`), never the core's kernels.
    fn kind(&self) -> OpKind {
        OpKind::Sum
    }
    fn user(&self) -> Option<&UserOperation<'_>> {
        Some(self)
    }
}

impl Operation for &UnsafeUserOperation {
    /// Unused, as for [`UserOperation`].
    fn kind(&self) -> OpKind {
        OpKind::Sum
    }
    fn user(&self) -> Option<&UserOperation<'_>> {
        Some(self.as_user_operation())
    }
}

/// The predefined operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemOperation(OpKind);

impl SystemOperation {
    /// Sum.
    pub fn sum() -> Self {
        SystemOperation(OpKind::Sum)
    }
    /// Product.
    pub fn product() -> Self {
        SystemOperation(OpKind::Product)
    }
    /// Maximum.
    pub fn max() -> Self {
        SystemOperation(OpKind::Max)
    }
    /// Minimum.
    pub fn min() -> Self {
        SystemOperation(OpKind::Min)
    }
    /// Logical and.
    pub fn logical_and() -> Self {
        SystemOperation(OpKind::LogicalAnd)
    }
    /// Logical or.
    pub fn logical_or() -> Self {
        SystemOperation(OpKind::LogicalOr)
    }
    /// Logical exclusive or.
    pub fn logical_xor() -> Self {
        SystemOperation(OpKind::LogicalXor)
    }
    /// Bitwise and.
    pub fn bitwise_and() -> Self {
        SystemOperation(OpKind::BitwiseAnd)
    }
    /// Bitwise or.
    pub fn bitwise_or() -> Self {
        SystemOperation(OpKind::BitwiseOr)
    }
    /// Bitwise exclusive or.
    pub fn bitwise_xor() -> Self {
        SystemOperation(OpKind::BitwiseXor)
    }
}

impl<O: Operation + ?Sized> Operation for &O {
    fn kind(&self) -> OpKind {
        (**self).kind()
    }
    fn user(&self) -> Option<&UserOperation<'_>> {
        (**self).user()
    }
}

impl Operation for SystemOperation {
    fn kind(&self) -> OpKind {
        self.0
    }
}

/// All-reduces of at least this many bytes run as a reduce-scatter and an all-gather
/// (`rsag`) where the point-to-point algorithms serve them (UDP; shared memory with the
/// board off). Measured over UDP at p = 4 on 2 cores (`osu_like allreduce`, 3
/// alternating runs): recursive doubling 51–107 µs at 32 KiB against rsag's 97–119;
/// at 64 KiB rsag 127–185 against 226–301.
const RSAG_MIN: usize = 64 << 10;

/// From this many members, with real multicast, an all-reduce of `RSAG_MIN` or more whose
/// reduced blocks are below `algos::RSAG_MCAST_BLOCK_MIN` is a reduce and one multicast
/// broadcast instead of the reduce-scatter + all-gather. C `MPI_Allreduce`, p = 8, µs
/// rsag / reduce_bcast (3–4 alternating runs): across 4 test hosts (two ranks each,
/// UDP) 64 KiB 530–596 / 430–450, 128 KiB 765–939 / 692–735, 256 KiB alike; over
/// loopback 64 KiB 252–259 / 202–214, 128 KiB 362–370 / 319–323. At p = 4 rsag was as
/// fast or faster (across 4 hosts, 128 KiB 271–322 / 342–353).
///
/// Smaller ones too, instead of recursive doubling, where the reduce is a postal tree
/// (`coll::tree::pays`): the reduce is then the tree's (a binomial one otherwise), and
/// the tree's λ joins the signature. Measured 2026-11-28 over UDP, p = 8, µs rd /
/// reduce_bcast with the tree (`bench/thresholds.py allreduce 8 4:65536
/// PHALANX_COLL_ALLREDUCE rd,reduce_bcast`, medians of 3 alternating runs): one host
/// 4 B 308 / 269, 1 KiB 312 / 224, 8 KiB 405 / 266, 32 KiB 729 / 475; 4 test hosts of
/// two ranks 4 B 388 / 307, 1 KiB 406 / 418, 8 KiB 555 / 509, 32 KiB 912 / 827; 8 test
/// hosts of one rank 4 B 415 / 369, 1 KiB 367 / 327, 8 KiB 587 / 398, 32 KiB 1050 / 676.
const REDUCE_BCAST_MIN_P: usize = 8;

/// With real multicast, from [`REDUCE_BCAST_MIN_P`] members, an all-gather of blocks below
/// this is a gather to member 0 (each block sent straight to it) and one multicast of the
/// whole (`algos::allgather_gather_mcast`) instead of the k-concurrency multicast: two
/// steps whatever p. Measured 2026-11-28 over UDP on 2 cores, p = 8, µs gather +
/// multicast / k-concurrency / recursive doubling (`bench/thresholds.py allgather 8
/// 1:65536 PHALANX_COLL_ALLGATHER mcast,mcast2,rd`, medians of 3 alternating runs): one
/// host 1 B 207 / 258 / 273, 1 KiB 199 / 287 / 296, 8 KiB 379 / 389 / 453, 32 KiB 1000
/// / 1009 / 1187, 64 KiB 1578 / 1846 / 2541; 4 test hosts of two ranks 1 B 257 / 469 /
/// 391, 1 KiB 275 / 361 / 386, 8 KiB 539 / 615 / 620, 32 KiB 1399 / 1514 / 1645, 64 KiB
/// 2800 / 2746 / 3312. At p = 4 (one host) it was no faster: 1 B – 1 KiB 63–72 against
/// 61–70 and 60–71, 2–64 KiB behind the k-concurrency multicast.
const GATHER_MCAST_MAX: usize = 64 << 10;

/// The k-concurrency all-gather's chunk at least (bytes): each of its rounds, k chunks
/// from every member, waits for every member, so a packet-sized chunk on a 1500-byte
/// MTU made a 64 KiB all-gather 46 rounds (measured across 4 test hosts, p = 4:
/// 1.43 ms at 64 KiB with 1.4 KiB chunks; round-robin multicast took 0.24 ms).
const MCAST2_CHUNK_MIN: usize = 64 << 10;

/// What a call runs: the algorithm, and k for the k-concurrency all-gather. It joins the
/// call's signature exactly, so ranks that chose differently (different environment,
/// multicast on some ranks only) get a mismatch error, not a hang.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chosen {
    alg: Algorithm,
    k: u16,
}

impl Chosen {
    fn plain(alg: Algorithm) -> Chosen {
        Chosen { alg, k: 0 }
    }

    /// The bits this choice adds to a call's signature: the algorithm's code in bits
    /// 52..56, k (only for `mcast2`, an all-gather, which has no root) in the root
    /// field, bits 32..48, and a postal tree's λ in bits 60..64 (a reduce + broadcast
    /// all-reduce's reduce on the tree too; 0 when it is binomial).
    fn sig_bits(self) -> u64 {
        let k = match self.alg {
            Algorithm::Mcast2 => (u64::from(self.k) << 32) ^ (0xffff << 32),
            // A postal tree's λ (1..=15) above the collective's kind (1..=10, bits
            // 56..60): ranks on other trees are told.
            Algorithm::Tree | Algorithm::ReduceBcast => u64::from(self.k & 0xf) << 60,
            _ => 0,
        };
        (u64::from(self.alg.code()) << 52) | k
    }
}

/// Like [`choose`], but picks the shared-memory board (`shm`) when the call may run on it
/// and its largest publication (`need` bytes) fits a slot — unless the environment names
/// another algorithm — and the hierarchical form where it is possible (for a reduction,
/// not where the job's ranks share CPUs unless forced: `hier::supported`).
fn choose_board(
    kind: CollKind,
    s: &Shape,
    need: usize,
    mcast: Algorithm,
    p2p: Algorithm,
) -> Chosen {
    let forced = crate::coll::algorithm::choices().forced(kind);
    if board::fits(kind, s.board, need, s.p) && forced.is_none_or(|a| a == Algorithm::Shm) {
        return Chosen::plain(Algorithm::Shm);
    }
    if !s.hosts.is_empty()
        && hier::supported(
            kind,
            need,
            s.multicast,
            forced.is_none() && crate::coll::cost::cpus_shared(),
        )
        && forced.is_none_or(|a| a == Algorithm::Hier)
    {
        // The leaders' network algorithm (multicast or not) is part of the choice.
        return Chosen::plain(if s.multicast {
            Algorithm::HierMcast
        } else {
            Algorithm::Hier
        });
    }
    choose(kind, s, mcast, p2p)
}

/// The algorithm for `kind`: the environment's choice, else multicast-based when real
/// multicast is available, else the point-to-point default.
fn choose(kind: CollKind, s: &Shape, mcast: Algorithm, p2p: Algorithm) -> Chosen {
    // With two members a multicast is a unicast: the one-round point-to-point
    // algorithms (exchange, dissemination) are at least as fast.
    // `shm` and `hier` are only possible where `choose_board` picked them; asked for
    // elsewhere (a nonblocking call, members on several hosts, one rank per host) they
    // mean the default.
    let choices = crate::coll::algorithm::choices();
    let alg = choices
        .forced(kind)
        .filter(|a| *a != Algorithm::Shm && *a != Algorithm::Hier)
        .unwrap_or(if s.multicast && s.p > 2 { mcast } else { p2p });
    Chosen {
        alg,
        k: choices.allgather_k,
    }
}

struct Spec<'a> {
    name: &'static str,
    kind: CollKind,
    root: Option<i32>,
    op: Option<OpKind>,
    dt: TypeMap,
    count: usize,
    send: (*const u8, usize),
    recv: (*mut u8, usize),
    comm: &'a SimpleCommunicator,
}

/// Starts a collective; `None` when it ran to completion on the shared-memory board
/// (blocking calls only).
fn start_with(
    spec: Spec<'_>,
    plan: impl FnOnce(&Shape) -> Result<(Chosen, Plan), Error>,
    blocking: bool,
) -> Option<ReqId> {
    let c = spec.comm;
    let seq = c.next_coll_seq();
    let sh = shape(c, blocking);
    let planned = plan(sh);
    if let Ok((c, _)) = &planned {
        crate::engine::stats::count_collective(spec.kind, c.alg, spec.send.1, sh.p);
        tracing::debug!(
            rank = sh.world[sh.me],
            collective = spec.name,
            algorithm = c.alg.name(),
            members = sh.p,
            seq,
            "collective"
        );
    }
    let chosen = planned.as_ref().map_or(0, |(c, _)| c.sig_bits());
    let planned = planned.map(|(_, p)| p);
    let sig = signature(
        spec.kind,
        spec.root.map(|r| r as u32),
        spec.op,
        &spec.dt,
        spec.count,
    ) ^ chosen;
    let call_ = CollCall {
        ctx: c.context(),
        seq,
        sig,
        op: spec.op,
        dt: spec.dt,
        send: spec.send,
        recv: spec.recv,
    };
    let (kind, root) = (spec.kind, spec.root.map_or(0, |r| r as usize));
    // Taken by reference into the engine's closure (not copied into it on every call).
    let (mut planned, mut call_) = (Some(planned), Some(call_));
    call(spec.name, |e| {
        let (Some(planned), Some(call_)) = (planned.take(), call_.take()) else {
            unreachable!("the engine runs the call once")
        };
        if !call_.dt.is_contiguous() {
            return Err(Error::InvalidArg(
                "collectives need a contiguous datatype".into(),
            ));
        }
        let planned = planned?;
        if planned.hier {
            e.hier_collective(&HierCall {
                call: &call_,
                kind,
                root,
                world: &sh.world,
                hosts: &sh.hosts,
                me: sh.me,
                layout: planned.layout.as_deref(),
            })?;
            return Ok(None);
        }
        if planned.board {
            e.board_collective(&BoardCall {
                call: &call_,
                kind,
                root,
                world: &sh.world,
                me: sh.me,
                phase: 0,
                layout: planned.layout.as_deref(),
                slots: (!sh.board_slots.is_empty()).then_some(&sh.board_slots[..]),
            })?;
            return Ok(None);
        }
        e.start_collective(call_, planned).map(Some)
    })
}

fn start(spec: Spec<'_>, plan: impl FnOnce(&Shape) -> Result<(Chosen, Plan), Error>) -> ReqId {
    match start_with(spec, plan, false) {
        Some(id) => id,
        None => unreachable!("nonblocking collectives never run on the board"),
    }
}

fn run(spec: Spec<'_>, plan: impl FnOnce(&Shape) -> Result<(Chosen, Plan), Error>) {
    let name = spec.name;
    // At MPI_THREAD_MULTIPLE a blocking collective runs as a request (not on the board,
    // whose waits hold the engine), so its wait lets other threads call meanwhile.
    let multiple = crate::runtime::multiple();
    if let Some(id) = start_with(spec, plan, !multiple) {
        crate::runtime::or_fatal(name, crate::runtime::wait_request(id));
    }
}

/// Whether both buffers' datatypes are contiguous (else a blocking collective runs on
/// packed copies: datatype::Packed).
fn contiguous<S: ?Sized + Described, R: ?Sized + Described>(s: &S, r: &R) -> bool {
    s.datatype().is_contiguous() && r.datatype().is_contiguous()
}

fn bytes<B: ?Sized + Described>(b: &B) -> usize {
    b.elements() * b.datatype().size()
}

fn check(cond: bool, what: &str) -> Result<(), Error> {
    if cond {
        Ok(())
    } else {
        Err(Error::InvalidArg(what.into()))
    }
}

/// Checks the root-only buffer of a rooted collective: at the root it must hold `need`
/// bytes; elsewhere the `_root` variant must not be called.
fn root_buffer(
    is_root: bool,
    absent: bool,
    have: usize,
    need: usize,
    call: &str,
) -> Result<(), Error> {
    // The message is formatted only when the check fails (this runs on every call).
    if is_root && have < need {
        return Err(Error::InvalidArg(format!(
            "{call}: root buffer of {have} bytes, need {need}"
        )));
    }
    if !is_root && !absent {
        return Err(Error::InvalidArg(format!(
            "{call} called on a rank that is not the root"
        )));
    }
    Ok(())
}

/// Collectives every member of a communicator calls.
pub trait CommunicatorCollectives: Communicator {
    /// Blocks until every member has called it.
    fn barrier(&self) {
        if let Some(x) = intercoll::sides(self.as_simple()) {
            return x.barrier();
        }
        let c = self.as_simple();
        run(barrier_spec(c), barrier_plan)
    }

    /// Starts a barrier; the request completes once every member has called it.
    fn immediate_barrier(&self) -> Request<'static, (), StaticScope> {
        let c = self.as_simple();
        Request::new(start(barrier_spec(c), barrier_plan), StaticScope, c, &())
    }

    /// All-gather of different counts (`MPI_Allgatherv`): block i of `recvbuf` gets
    /// member i's elements on every member (collective/varcount.rs).
    fn all_gather_varcount_into<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut crate::datatype::PartitionMut<'_, R>,
    ) {
        if let Some(x) = intercoll::sides(self.as_simple()) {
            return intercoll::all_gather_varcount(x, sendbuf, recvbuf);
        }
        varcount::allgatherv(self.as_simple(), sendbuf, recvbuf, true);
    }

    /// Starts an all-gather of different counts (`MPI_Iallgatherv`; contiguous types).
    fn immediate_all_gather_varcount_into<'a, 'b, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut PartitionMut<'b, R>,
    ) -> Request<'a, PartitionMut<'b, R>, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let c = self.as_simple();
        let id = varcount::allgatherv(c, sendbuf, &mut *recvbuf, false);
        Request::new(id.expect("immediate"), scope, c, &*recvbuf)
    }

    /// All-to-all of different counts (`MPI_Alltoallv`; contiguous types): block j of
    /// `sendbuf` goes to member j, block i of `recvbuf` comes from member i.
    fn all_to_all_varcount_into<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &Partition<'_, S>,
        recvbuf: &mut PartitionMut<'_, R>,
    ) {
        if let Some(x) = intercoll::sides(self.as_simple()) {
            return intercoll::all_to_all_varcount(x, sendbuf, recvbuf);
        }
        varcount::alltoallv(self.as_simple(), sendbuf, recvbuf, true);
    }

    /// Starts an all-to-all of different counts (`MPI_Ialltoallv`).
    fn immediate_all_to_all_varcount_into<'a, 'b, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a Partition<'a, S>,
        recvbuf: &'a mut PartitionMut<'b, R>,
    ) -> Request<'a, PartitionMut<'b, R>, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let c = self.as_simple();
        let id = varcount::alltoallv(c, sendbuf, &mut *recvbuf, false);
        Request::new(id.expect("immediate"), scope, c, &*recvbuf)
    }

    /// Member i receives in `recvbuf` the reduction with `op` of block i of every
    /// member's `sendbuf` (`MPI_Reduce_scatter_block`; predefined operations).
    fn reduce_scatter_block_into<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O)
    where
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation,
    {
        let k = predefined("reduce_scatter_block_into", &op);
        if let Some(x) = intercoll::sides(self.as_simple()) {
            return intercoll::reduce_scatter_block(x, sendbuf, recvbuf, op);
        }
        varcount::reduce_scatter_block(self.as_simple(), sendbuf, recvbuf, k, true);
    }

    /// Starts a reduce-scatter (`MPI_Ireduce_scatter_block`).
    fn immediate_reduce_scatter_block_into<'a, Sc, S, R, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation,
    {
        let c = self.as_simple();
        let k = predefined("immediate_reduce_scatter_block_into", &op);
        let id = varcount::reduce_scatter_block(c, sendbuf, &mut *recvbuf, k, false);
        Request::new(id.expect("immediate"), scope, c, &*recvbuf)
    }

    /// Gathers every member's `sendbuf` into every member's `recvbuf` (rank order).
    fn all_gather_into<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        if let Some(x) = intercoll::sides(self.as_simple()) {
            return intercoll::all_gather(x, sendbuf, recvbuf);
        }
        if !contiguous(sendbuf, recvbuf) {
            let mut r = Packed::of_mut(&mut *recvbuf);
            self.all_gather_into(&Packed::of(sendbuf), &mut r);
            return r.unpack_into(recvbuf);
        }
        let c = self.as_simple();
        let (spec, plan) = all_gather_spec(c, sendbuf, recvbuf);
        run(spec, plan)
    }

    /// Starts an all-gather; `recvbuf` is complete once the request completes.
    fn immediate_all_gather_into<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let c = self.as_simple();
        let (spec, plan) = if contiguous(sendbuf, recvbuf) {
            all_gather_spec(c, sendbuf, recvbuf)
        } else {
            let (s, r) = stage(Some(sendbuf), Some(&mut *recvbuf as *mut R));
            all_gather_spec(c, s.unwrap(), r.unwrap())
        };
        Request::new(start(spec, plan), scope, c, &*recvbuf)
    }

    /// Member i sends block j of `sendbuf` to member j, which stores it as block i.
    fn all_to_all_into<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        if let Some(x) = intercoll::sides(self.as_simple()) {
            return intercoll::all_to_all(x, sendbuf, recvbuf);
        }
        if !contiguous(sendbuf, recvbuf) {
            let mut r = Packed::of_mut(&mut *recvbuf);
            self.all_to_all_into(&Packed::of(sendbuf), &mut r);
            return r.unpack_into(recvbuf);
        }
        let (spec, plan) = all_to_all_spec(self.as_simple(), sendbuf, recvbuf);
        run(spec, plan)
    }

    /// Starts an all-to-all; `recvbuf` is complete once the request completes.
    fn immediate_all_to_all_into<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let c = self.as_simple();
        let (spec, plan) = if contiguous(sendbuf, recvbuf) {
            all_to_all_spec(c, sendbuf, recvbuf)
        } else {
            let (s, r) = stage(Some(sendbuf), Some(&mut *recvbuf as *mut R));
            all_to_all_spec(c, s.unwrap(), r.unwrap())
        };
        Request::new(start(spec, plan), scope, c, &*recvbuf)
    }

    /// Reduces every member's `sendbuf` element-wise with `op` into every `recvbuf`.
    fn all_reduce_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        let c = self.as_simple();
        if let Some(x) = intercoll::sides(c) {
            return intercoll::all_reduce(x, sendbuf, recvbuf, op);
        }
        if let Some(u) = op.user() {
            return user::all_reduce(c, sendbuf, recvbuf, u);
        }
        if !contiguous(sendbuf, recvbuf) {
            let mut r = Packed::of_mut(&mut *recvbuf);
            self.all_reduce_into(&Packed::of(sendbuf), &mut r, op);
            return r.unpack_into(recvbuf);
        }
        let (spec, plan) = all_reduce_spec(c, sendbuf, recvbuf, op.kind());
        run(spec, plan)
    }

    /// Starts an all-reduce; `recvbuf` holds the result once the request completes.
    fn immediate_all_reduce_into<'a, Sc, S, R, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation + 'a,
    {
        start_reduction(
            self.as_simple(),
            scope,
            sendbuf,
            recvbuf,
            op,
            user::Fold::All,
            (all_reduce_spec_boxed, all_reduce_spec_boxed),
        )
    }

    /// Inclusive prefix reduction: member i gets `op` over members 0..=i.
    fn scan_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        if intercoll::sides(self.as_simple()).is_some() {
            intercoll::unsupported("scan_into");
        }
        if let Some(u) = op.user() {
            return user::scan(self.as_simple(), sendbuf, recvbuf, u, false);
        }
        if !contiguous(sendbuf, recvbuf) {
            let mut r = Packed::of_mut(&mut *recvbuf);
            self.scan_into(&Packed::of(sendbuf), &mut r, op);
            return r.unpack_into(recvbuf);
        }
        let (spec, plan) = scan_spec(self.as_simple(), sendbuf, recvbuf, op.kind());
        run(spec, plan)
    }

    /// Starts an inclusive prefix reduction; `recvbuf` holds the result once it completes.
    fn immediate_scan_into<'a, Sc, S, R, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation + 'a,
    {
        start_reduction(
            self.as_simple(),
            scope,
            sendbuf,
            recvbuf,
            op,
            user::Fold::Prefix,
            (scan_spec, scan_spec),
        )
    }

    /// Exclusive prefix reduction: member i > 0 gets `op` over members 0..i; member 0's
    /// `recvbuf` is left unchanged (undefined in MPI).
    fn exclusive_scan_into<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        if intercoll::sides(self.as_simple()).is_some() {
            intercoll::unsupported("exclusive_scan_into");
        }
        if let Some(u) = op.user() {
            return user::scan(self.as_simple(), sendbuf, recvbuf, u, true);
        }
        if !contiguous(sendbuf, recvbuf) {
            let mut r = Packed::of_mut(&mut *recvbuf);
            self.exclusive_scan_into(&Packed::of(sendbuf), &mut r, op);
            return r.unpack_into(recvbuf);
        }
        let (spec, plan) = exscan_spec(self.as_simple(), sendbuf, recvbuf, op.kind());
        run(spec, plan)
    }

    /// Starts an exclusive prefix reduction; `recvbuf` holds the result once it completes.
    fn immediate_exclusive_scan_into<'a, Sc, S, R, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation + 'a,
    {
        start_reduction(
            self.as_simple(),
            scope,
            sendbuf,
            recvbuf,
            op,
            user::Fold::Exclusive,
            (exscan_spec, exscan_spec),
        )
    }
}

type PlanFn = Box<dyn FnOnce(&Shape) -> Result<(Chosen, Plan), Error>>;

/// The spec of a reduction over every member (all-reduce, scans) for buffers `S`, `R`.
type ReductionSpec<S, R> =
    for<'c> fn(&'c SimpleCommunicator, &S, &mut R, OpKind) -> (Spec<'c>, PlanFn);

/// Starts an all-member reduction: with a user operation the gathered contributions are
/// folded as `fold` says (collective/user.rs); otherwise the spec runs on the buffers,
/// or on packed stand-ins of non-contiguous ones (`stage`).
fn start_reduction<'a, Sc, S, R, O>(
    c: &SimpleCommunicator,
    scope: Sc,
    sendbuf: &'a S,
    recvbuf: &'a mut R,
    op: O,
    fold: user::Fold,
    (direct, packed): (ReductionSpec<S, R>, ReductionSpec<Packed, Packed>),
) -> Request<'a, R, Sc>
where
    Sc: Scope<'a>,
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
    O: Operation + 'a,
{
    if op.user().is_some() {
        let out = Some(&mut *recvbuf as *mut R);
        let id = user::start(c, sendbuf, out, op, fold);
        return Request::new(id, scope, c, &*recvbuf);
    }
    let (spec, plan) = if contiguous(sendbuf, recvbuf) {
        direct(c, sendbuf, recvbuf, op.kind())
    } else {
        let (s, r) = stage(Some(sendbuf), Some(&mut *recvbuf as *mut R));
        packed(c, s.unwrap(), r.unwrap(), op.kind())
    };
    Request::new(start(spec, plan), scope, c, &*recvbuf)
}

fn exscan_spec<'c, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    c: &'c SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
    op: OpKind,
) -> (Spec<'c>, PlanFn) {
    let spec = reduction_spec(
        c,
        ("exclusive_scan_into", CollKind::Exscan),
        sendbuf,
        recvbuf,
        op,
    );
    let (len, recv_len) = (spec.send.1, spec.recv.1);
    let plan = move |s: &Shape| {
        check(
            recv_len >= len,
            "exclusive_scan_into: receive buffer smaller than send buffer",
        )?;
        let c = choose(CollKind::Exscan, s, Algorithm::Linear, Algorithm::Linear);
        Ok((c, algos::exscan(s, len)))
    };
    (spec, Box::new(plan))
}

fn barrier_spec(c: &SimpleCommunicator) -> Spec<'_> {
    Spec {
        name: "barrier",
        kind: CollKind::Barrier,
        root: None,
        op: None,
        dt: crate::datatype::type_map_of::<u8>(),
        count: 0,
        send: (std::ptr::null(), 0),
        recv: (std::ptr::null_mut(), 0),
        comm: c,
    }
}

fn barrier_plan(s: &Shape) -> Result<(Chosen, Plan), Error> {
    let c = choose_board(
        CollKind::Barrier,
        s,
        0,
        Algorithm::Mcast,
        Algorithm::Dissemination,
    );
    Ok((
        c,
        match c.alg {
            Algorithm::Shm => Plan::on_board(),
            Algorithm::Hier | Algorithm::HierMcast => Plan::hierarchical(),
            Algorithm::Mcast => algos::barrier_mcast(s),
            _ => algos::barrier_dissemination(s),
        },
    ))
}

fn all_gather_spec<'c, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    c: &'c SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
) -> (Spec<'c>, PlanFn) {
    let block = bytes(sendbuf);
    let p = c.size() as usize;
    let recv_len = bytes(recvbuf);
    let spec = Spec {
        name: "all_gather_into",
        kind: CollKind::Allgather,
        root: None,
        op: None,
        dt: sendbuf.datatype(),
        count: sendbuf.elements(),
        send: (sendbuf.buffer_ptr(), block),
        recv: (recvbuf.buffer_mut_ptr(), recv_len),
        comm: c,
    };
    let plan = move |s: &Shape| {
        check(
            recv_len >= p * block,
            "all_gather_into: receive buffer smaller than size × send buffer",
        )?;
        let default_p2p = if p.is_power_of_two() {
            Algorithm::Rd
        } else {
            Algorithm::Ring
        };
        let mut c = choose_board(
            CollKind::Allgather,
            s,
            block,
            Algorithm::Mcast2,
            default_p2p,
        );
        if c.alg == Algorithm::Rd && !p.is_power_of_two() {
            c.alg = Algorithm::Ring; // what runs: recursive doubling needs 2^n members
        }
        let forced = crate::coll::algorithm::choices().forced(CollKind::Allgather);
        if c.alg == Algorithm::Mcast2
            && forced.is_none()
            && p >= REDUCE_BCAST_MIN_P
            && block < GATHER_MCAST_MAX
        {
            c = Chosen::plain(Algorithm::Mcast);
        }
        let k = usize::from(c.k);
        Ok((
            c,
            match c.alg {
                Algorithm::Shm => Plan::on_board(),
                Algorithm::Mcast => algos::allgather_gather_mcast(s, block),
                Algorithm::Mcast1 => algos::allgather_mcast_rr(s, block),
                Algorithm::Mcast2 => {
                    algos::allgather_mcast_k(s, block, s.packet.max(MCAST2_CHUNK_MIN), k)
                }
                Algorithm::Rd => algos::allgather_rd(s, block),
                _ => algos::allgather_ring(s, block),
            },
        ))
    };
    (spec, Box::new(plan))
}

fn all_to_all_spec<'c, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    c: &'c SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
) -> (Spec<'c>, PlanFn) {
    let p = c.size() as usize;
    let total = bytes(sendbuf);
    let recv_len = bytes(recvbuf);
    let spec = Spec {
        name: "all_to_all_into",
        kind: CollKind::Alltoall,
        root: None,
        op: None,
        dt: sendbuf.datatype(),
        count: sendbuf.elements() / p.max(1),
        send: (sendbuf.buffer_ptr(), total),
        recv: (recvbuf.buffer_mut_ptr(), recv_len),
        comm: c,
    };
    let plan = move |s: &Shape| {
        check(
            total.is_multiple_of(p),
            "all_to_all_into: send buffer not divisible by size",
        )?;
        check(
            recv_len >= total,
            "all_to_all_into: receive buffer smaller than send buffer",
        )?;
        let need = total / p * p;
        let c = choose_board(
            CollKind::Alltoall,
            s,
            need,
            Algorithm::Pairwise,
            Algorithm::Pairwise,
        );
        Ok((
            c,
            match c.alg {
                Algorithm::Shm => Plan::on_board(),
                _ => algos::alltoall_pairwise(s, total / p),
            },
        ))
    };
    (spec, Box::new(plan))
}

/// The spec of an element-wise reduction over whole buffers (all-reduce, scan).
fn reduction_spec<'c, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    c: &'c SimpleCommunicator,
    (name, kind): (&'static str, CollKind),
    sendbuf: &S,
    recvbuf: &mut R,
    op: OpKind,
) -> Spec<'c> {
    Spec {
        name,
        kind,
        root: None,
        op: Some(op),
        dt: sendbuf.datatype(),
        count: sendbuf.elements(),
        send: (sendbuf.buffer_ptr(), bytes(sendbuf)),
        recv: (recvbuf.buffer_mut_ptr(), bytes(recvbuf)),
        comm: c,
    }
}

fn scan_spec<'c, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    c: &'c SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
    op: OpKind,
) -> (Spec<'c>, PlanFn) {
    let spec = reduction_spec(c, ("scan_into", CollKind::Scan), sendbuf, recvbuf, op);
    let (len, recv_len) = (spec.send.1, spec.recv.1);
    let plan = move |s: &Shape| {
        check(
            recv_len >= len,
            "scan_into: receive buffer smaller than send buffer",
        )?;
        Ok(
            match choose_board(CollKind::Scan, s, len, Algorithm::Linear, Algorithm::Linear) {
                c if c.alg == Algorithm::Shm => (c, Plan::on_board()),
                c => (c, algos::scan(s, len)),
            },
        )
    };
    (spec, Box::new(plan))
}

/// [`all_reduce_spec`] with its plan boxed (a [`ReductionSpec`]).
fn all_reduce_spec_boxed<'c, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    c: &'c SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
    op: OpKind,
) -> (Spec<'c>, PlanFn) {
    let (s, f) = all_reduce_spec(c, sendbuf, recvbuf, op);
    (s, Box::new(f))
}

/// The plan is returned unboxed: a blocking all-reduce takes no allocation for it.
fn all_reduce_spec<'c, S: ?Sized + Buffer, R: ?Sized + BufferMut>(
    c: &'c SimpleCommunicator,
    sendbuf: &S,
    recvbuf: &mut R,
    op: OpKind,
) -> (
    Spec<'c>,
    impl FnOnce(&Shape) -> Result<(Chosen, Plan), Error> + 'static,
) {
    let spec = reduction_spec(
        c,
        ("all_reduce_into", CollKind::Allreduce),
        sendbuf,
        recvbuf,
        op,
    );
    let (len, recv_len, esz) = (spec.send.1, spec.recv.1, spec.dt.size());
    let plan = move |s: &Shape| {
        check(
            recv_len >= len,
            "all_reduce_into: receive buffer smaller than send buffer",
        )?;
        // Large vectors: reduce-scatter + all-gather (the same facts on every member).
        let p2p = if len >= RSAG_MIN && algos::rsag_fits(s.p, len, esz) {
            Algorithm::Rsag
        } else {
            Algorithm::Rd
        };
        // With multicast, from eight members, while the reduced blocks are below
        // `RSAG_MCAST_BLOCK_MIN`: a binomial reduce and one multicast broadcast
        // (`REDUCE_BCAST_MIN_P`); larger ones take rsag with its point-to-point all-gather
        // at eight members and more (`coll::rsag::RSAG_MCAST_Q_MAX`).
        let q = 1usize << s.p.max(1).ilog2();
        // λ, and whether the tree pays, asked only where a reduce + broadcast may be
        // chosen; the same facts on every member.
        let lambda = root::tree_lambda(len, s.packet);
        let tree = s.p >= REDUCE_BCAST_MIN_P && s.multicast && crate::coll::tree::pays(s.p, lambda);
        let mcast = if s.p >= REDUCE_BCAST_MIN_P
            && match p2p {
                Algorithm::Rsag => len / q < algos::RSAG_MCAST_BLOCK_MIN,
                _ => tree,
            } {
            Algorithm::ReduceBcast
        } else {
            p2p
        };
        Ok(
            match choose_board(CollKind::Allreduce, s, len, mcast, p2p) {
                c if c.alg == Algorithm::Shm => (c, Plan::on_board()),
                c if matches!(c.alg, Algorithm::Hier | Algorithm::HierMcast) => {
                    (c, Plan::hierarchical())
                }
                c if c.alg == Algorithm::ReduceBcast => {
                    // The reduce on the postal tree where it pays (its λ in the
                    // signature, as a tree collective's), else the binomial one.
                    let (c, mut plan) = if tree {
                        let c = Chosen {
                            k: lambda as u16,
                            ..c
                        };
                        (c, crate::coll::tree::reduce_tree(s, 0, len, lambda))
                    } else {
                        // No λ in the signature (k is the all-gather's otherwise).
                        (Chosen { k: 0, ..c }, algos::reduce_binomial(s, 0, len))
                    };
                    let b = if s.multicast {
                        algos::bcast_mcast(s, 0, Buf::Recv, len)
                    } else {
                        algos::bcast_binomial(s, 0, Buf::Recv, len)
                    };
                    plan.append(b, 64);
                    (c, plan)
                }
                c if c.alg == Algorithm::Rsag && algos::rsag_fits(s.p, len, esz) => {
                    (c, rsag_plan(s, len, esz, usize::from(c.k)))
                }
                _ => (Chosen::plain(Algorithm::Rd), algos::allreduce(s, len)),
            },
        )
    };
    (spec, plan)
}

/// The reduce-scatter + all-gather all-reduce of `len` bytes on `s`, its all-gather seed
/// 000's k-concurrency multicast (pieces of at least `MCAST2_CHUNK_MIN`) where
/// [`algos::rsag_mcast`] takes it.
fn rsag_plan(s: &Shape, len: usize, esz: usize, k: usize) -> Plan {
    let mcast = algos::rsag_mcast(s, len, s.packet.max(MCAST2_CHUNK_MIN), k);
    algos::allreduce_rsag(s, len, esz, mcast)
}

impl<C: Communicator + ?Sized> CommunicatorCollectives for C {}

/// Splitting takes an allgather of (color, key): it lives with the collectives, so that
/// communicators need nothing above them.
impl SimpleCommunicator {
    /// Splits into one communicator per color, members ordered by rank. Collective.
    pub fn split_by_color(&self, color: Color) -> Option<SimpleCommunicator> {
        self.split_by_color_with_key(color, 0)
    }

    /// The members of this communicator on this rank's host, ordered by `key` then rank
    /// (`MPI_Comm_split_type` with `MPI_COMM_TYPE_SHARED`: members that can share
    /// memory). Collective.
    pub fn split_shared(&self, key: i32) -> SimpleCommunicator {
        let me = self.world_rank(self.rank) as usize;
        let host = call("split_shared", |e| {
            e.host_of
                .get(me)
                .copied()
                .ok_or_else(|| Error::InvalidArg(format!("no host known for world rank {me}")))
        });
        // Host ids are small indices, so the color is defined: a communicator comes back.
        match self.split_by_color_with_key(Color::with_value(host as i32), key) {
            Some(c) => c,
            None => crate::runtime::fatal(
                "split_shared",
                Error::InvalidArg("no communicator for this host".into()),
            ),
        }
    }

    /// Splits into one communicator per color, members ordered by (key, rank).
    /// Collective; members with [`Color::undefined`] get `None`.
    pub fn split_by_color_with_key(&self, color: Color, key: i32) -> Option<SimpleCommunicator> {
        let mine = [color.0, key];
        let mut all = vec![0i32; 2 * self.size as usize];
        self.all_gather_into(&mine[..], &mut all[..]);
        let ctx = self.derive_context(color.0 as u32 as u64 + 1);
        if color.0 == Color::undefined().0 {
            return None;
        }
        let mut group: Vec<(i32, Rank)> = (0..self.size)
            .filter(|&r| all[2 * r as usize] == color.0)
            .map(|r| (all[2 * r as usize + 1], r))
            .collect();
        group.sort();
        let members: Vec<u32> = group.iter().map(|&(_, r)| self.world_rank(r)).collect();
        let rank = group.iter().position(|&(_, r)| r == self.rank)? as Rank;
        let size = members.len() as Rank;
        Some(self.sub(ctx, rank, Some(Arc::new(members)), size))
    }
}
