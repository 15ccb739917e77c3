//! Collective operations: schedules progressed by the engine.
//!
//! Contract: a collective call builds a [`schedule::Plan`] (see [`algos`]) and hands it to
//! the engine as a request; the same progress loop that moves point-to-point traffic
//! advances every active schedule, so blocking collectives are "start + wait" and
//! nonblocking ones come for free. Collective fragments travel as `MsgKind::Coll`
//! datagrams on the reliable per-peer streams, keyed by (source, context, collective
//! sequence, step) — never matched against user point-to-point receives. Every fragment
//! carries the caller's *signature* (kind, root, operation, type signature); a fragment
//! whose signature differs from the local call with the same sequence number, a size
//! that differs, or collective data nobody consumed by Finalize ends in
//! [`Error::CollectiveMismatch`] naming both ranks.

pub mod algorithm;
pub mod algos;
pub mod cost;
mod exec;
pub mod ops;
mod rsag;
pub mod schedule;
pub mod tree;
pub mod varcount;

pub(crate) use exec::CollIo;

use crate::datatype::TypeMap;
use crate::error::{Error, Result};
use crate::requests::ReqId;
use ops::OpKind;
use phalanx_wire::Packet;
use schedule::{Buf, CommOp, LocalOp, Plan, Region};
use std::collections::HashMap as StdHashMap;

/// Maps keyed by small integer tuples on the hot path: a multiplicative hash, not SipHash
/// (the keys come from this job's own ranks, after the job-key check).
type HashMap<K, V> = StdHashMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

/// A small multiplicative hasher for integer keys.
#[derive(Default)]
pub(crate) struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_i32(&mut self, n: i32) {
        self.write_u32(n as u32);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// Kinds of collective calls (part of the signature).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CollKind {
    /// Barrier.
    Barrier = 1,
    /// Broadcast.
    Bcast = 2,
    /// Gather.
    Gather = 3,
    /// Scatter.
    Scatter = 4,
    /// Allgather.
    Allgather = 5,
    /// Reduce.
    Reduce = 6,
    /// Allreduce.
    Allreduce = 7,
    /// All-to-all.
    Alltoall = 8,
    /// Inclusive scan.
    Scan = 9,
    /// Communicator split (an allgather of colors and keys).
    Split = 10,
    /// Exclusive scan.
    Exscan = 11,
    /// Gather of different counts.
    Gatherv = 12,
    /// Scatter of different counts.
    Scatterv = 13,
    /// All-gather of different counts.
    Allgatherv = 14,
    /// All-to-all of different counts.
    Alltoallv = 15,
    /// Reduce-scatter with equal blocks.
    ReduceScatterBlock = 16,
}

impl CollKind {
    /// Every kind, in code order.
    pub const ALL: [CollKind; 16] = [
        CollKind::Barrier,
        CollKind::Bcast,
        CollKind::Gather,
        CollKind::Scatter,
        CollKind::Allgather,
        CollKind::Reduce,
        CollKind::Allreduce,
        CollKind::Alltoall,
        CollKind::Scan,
        CollKind::Split,
        CollKind::Exscan,
        CollKind::Gatherv,
        CollKind::Scatterv,
        CollKind::Allgatherv,
        CollKind::Alltoallv,
        CollKind::ReduceScatterBlock,
    ];

    /// The kind's name in messages and statistics (`all_reduce`, …).
    pub fn label(self) -> &'static str {
        Self::name(self as u8)
    }

    fn name(b: u8) -> &'static str {
        match b {
            1 => "barrier",
            2 => "broadcast",
            3 => "gather",
            4 => "scatter",
            5 => "all_gather",
            6 => "reduce",
            7 => "all_reduce",
            8 => "all_to_all",
            9 => "scan",
            10 => "split",
            11 => "exclusive_scan",
            12 => "gather_varcount",
            13 => "scatter_varcount",
            14 => "all_gather_varcount",
            15 => "all_to_all_varcount",
            16 => "reduce_scatter_block",
            _ => "unknown collective",
        }
    }
}

/// The signature of a call: kind, root, operation and a hash of the type signature of
/// one block (MPI matches type signatures, not element counts of derived types).
pub fn signature(
    kind: CollKind,
    root: Option<u32>,
    op: Option<OpKind>,
    dt: &TypeMap,
    count: usize,
) -> u64 {
    signature_of(kind, root, op, type_hash(dt, count))
}

/// [`signature`] from the hash of the block's type signature ([`type_hash`]).
#[inline]
pub(crate) fn signature_of(
    kind: CollKind,
    root: Option<u32>,
    op: Option<OpKind>,
    hash: u32,
) -> u64 {
    ((kind as u64) << 56)
        | ((op.map_or(0, |o| o as u8) as u64) << 48)
        | ((root.map_or(0xffff, |r| r.min(0xfffe)) as u64) << 32)
        | hash as u64
}

/// The hash of the type signature of `count` elements of `dt` (the low half of a
/// [`signature`]).
pub(crate) fn type_hash(dt: &TypeMap, count: usize) -> u32 {
    // A word at a time (every call computes it): multiply, then fold the high bits down.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |x: u64| {
        h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3);
        h ^= h >> 29;
    };
    // The runs of the whole block's type signature, merged across element boundaries,
    // so that layouts with the same signature (a structure twice, or a contiguous type of
    // two structures once) hash alike.
    match dt.signature() {
        [(p, n)] => {
            mix(*p as u64);
            mix((*n * count) as u64);
        }
        runs => {
            let mut cur: Option<(crate::datatype::Primitive, usize)> = None;
            for &(p, n) in (0..count).flat_map(|_| runs.iter()) {
                match &mut cur {
                    Some((q, k)) if *q == p => *k += n,
                    _ => {
                        if let Some((q, k)) = cur.replace((p, n)) {
                            mix(q as u64);
                            mix(k as u64);
                        }
                    }
                }
            }
            if let Some((q, k)) = cur {
                mix(q as u64);
                mix(k as u64);
            }
        }
    }
    (h ^ (h >> 32)) as u32
}

/// Human-readable form of a signature for error messages.
pub fn describe(sig: u64) -> String {
    let kind = CollKind::name(((sig >> 56) & 0xf) as u8);
    let op = ((sig >> 48) & 0xf) as u8;
    let alg = ((sig >> 52) & 0xf) as u8;
    let root = ((sig >> 32) & 0xffff) as u32;
    let mut s = format!("{kind}(");
    let mcast2 = alg == algorithm::Algorithm::Mcast2.code();
    if root != 0xffff && !mcast2 {
        s += &format!("root {root}, ");
    }
    if op != 0 {
        s += &format!("op #{op}, ");
    }
    let tree = alg == algorithm::Algorithm::Tree.code();
    if tree || (alg == algorithm::Algorithm::ReduceBcast.code() && sig >> 60 != 0) {
        // A postal tree's λ sits above the kind (a reduce + broadcast all-reduce's
        // reduce on a tree too).
        s += &format!("λ {}, ", sig >> 60);
    }
    if let Some(a) = algorithm::Algorithm::from_code(alg) {
        s += &format!("algorithm #{alg} {}, ", a.name());
        if a == algorithm::Algorithm::Mcast2 {
            s += &format!("k {root}, ");
        }
    }
    s += &format!("types #{:08x})", sig as u32);
    s
}

type Key = (u32, u32, u32, i32);

struct Posted {
    sched: ReqId,
    ptr: *mut u8,
    len: usize,
    got: usize,
    started: bool,
}

struct Partial {
    data: Vec<u8>,
    total: u64,
    /// Signature the sender's call carried.
    sig: u64,
}

pub(crate) struct Sched {
    ctx: u32,
    seq: u32,
    sig: u64,
    op: Option<OpKind>,
    dt: TypeMap,
    send: (*const u8, usize),
    recv: (*mut u8, usize),
    tmps: Vec<Vec<u8>>,
    plan: Plan,
    cur: usize,
    in_round: bool,
    outstanding: usize,
    /// When the current round started waiting (ns), and whether its sources were probed.
    round_since: u64,
    probed: bool,
}

/// Step id of a signature probe: no data, only the sender's signature for the call.
pub(crate) const PROBE_STEP: i32 = -1;

impl Sched {
    fn ptr(&mut self, r: Region) -> *mut u8 {
        let base = match r.buf {
            Buf::Send => self.send.0 as *mut u8,
            Buf::Recv => self.recv.0,
            Buf::Tmp(i) => self.tmps[i].as_mut_ptr(),
        };
        if base.is_null() {
            // An absent buffer (e.g. a non-root's receive buffer) only has empty regions.
            return std::ptr::NonNull::dangling().as_ptr();
        }
        // SAFETY: regions were checked against their buffers in `start`.
        unsafe { base.add(r.off) }
    }
    fn cap(&self, b: Buf) -> usize {
        match b {
            Buf::Send => self.send.1,
            Buf::Recv => self.recv.1,
            // The plan's size, not the buffer's: a kept one may be longer.
            Buf::Tmp(i) => self.plan.tmps.get(i).copied().unwrap_or(0),
        }
    }
    fn check(&self) -> Result<()> {
        let ok = |r: &Region| r.off + r.len <= self.cap(r.buf);
        for round in &self.plan.rounds {
            for c in &round.comm {
                let r = match c {
                    CommOp::Send { from, .. } => from,
                    CommOp::Recv { into, .. } => into,
                };
                if !ok(r) {
                    return Err(Error::InvalidArg(format!(
                        "{}: buffer too small for the collective",
                        describe(self.sig)
                    )));
                }
            }
            for l in &round.local {
                let (a, b) = match l {
                    LocalOp::Copy { from, to } => (from, to),
                    LocalOp::Reduce { from, into } => (from, into),
                };
                if !ok(a) || !ok(b) {
                    return Err(Error::InvalidArg(format!(
                        "{}: buffer too small for the collective",
                        describe(self.sig)
                    )));
                }
            }
        }
        Ok(())
    }
}

/// What a collective call hands the engine.
#[derive(Clone)]
pub struct CollCall {
    /// Communicator context.
    pub ctx: u32,
    /// Collective sequence number on that communicator.
    pub seq: u32,
    /// Signature of the call.
    pub sig: u64,
    /// Reduction, if any.
    pub op: Option<OpKind>,
    /// Element datatype (for reductions).
    pub dt: TypeMap,
    /// Send buffer.
    pub send: (*const u8, usize),
    /// Receive buffer.
    pub recv: (*mut u8, usize),
}

/// Collective state of an engine.
#[derive(Default)]
pub(crate) struct CollState {
    scheds: HashMap<ReqId, Sched>,
    active: Vec<ReqId>,
    posted: HashMap<Key, Posted>,
    unexpected: HashMap<Key, Partial>,
    unexpected_bytes: usize,
    /// Local signatures of recent calls: (context, sequence) → signature.
    sigs: HashMap<(u32, u32), u64>,
    /// Signatures of data that arrived before the local call: (context, seq) → (src, sig).
    early: HashMap<(u32, u32), (u32, u64)>,
    error: Option<Error>,
    /// Temporary buffers of finished schedules, kept for the next ones ([`TmpPool`]).
    spare: TmpPool,
}

/// Temporary buffers of finished schedules, reused as they are (stale contents, maybe
/// longer than asked: every plan fills a temporary, by a copy or a receive of its whole
/// size, before it reads it, and regions are checked against the plan's sizes; the
/// plan simulator runs with garbage-filled temporaries) so that a large collective does
/// not allocate and zero its temporaries on every call. At most [`TmpPool::MAX_BUFS`] buffers and
/// [`TmpPool::MAX_BYTES`] bytes are kept.
#[derive(Default)]
pub(crate) struct TmpPool {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

impl TmpPool {
    const MAX_BUFS: usize = 8;
    const MAX_BYTES: usize = 32 << 20;

    /// A buffer of at least `n` bytes: the smallest kept one that is long enough, as it
    /// is, else a new one.
    pub(crate) fn take(&mut self, n: usize) -> Vec<u8> {
        if n == 0 {
            return Vec::new();
        }
        let fit = (0..self.bufs.len())
            .filter(|&i| self.bufs[i].len() >= n)
            .min_by_key(|&i| self.bufs[i].len());
        let Some(i) = fit else {
            return vec![0u8; n];
        };
        let v = self.bufs.swap_remove(i);
        self.bytes -= v.capacity();
        v
    }

    /// Keeps `bufs` for later, within the bounds (the rest is freed; the bytes counted
    /// are the allocations').
    pub(crate) fn give(&mut self, bufs: Vec<Vec<u8>>) {
        for v in bufs {
            if v.is_empty()
                || self.bufs.len() >= Self::MAX_BUFS
                || self.bytes + v.capacity() > Self::MAX_BYTES
            {
                continue;
            }
            self.bytes += v.capacity();
            self.bufs.push(v);
        }
    }
}

impl CollState {
    pub(crate) fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    /// Records an error that ends the current collective wait.
    pub(crate) fn fail(&mut self, e: Error) {
        self.error.get_or_insert(e);
    }

    fn mismatch(rank: u32, ctx: u32, seq: u32, local: u64, src: u32, remote: u64) -> Error {
        Error::CollectiveMismatch {
            context: ctx,
            seq,
            local: rank,
            local_call: describe(local),
            remote: src,
            remote_call: describe(remote),
        }
    }

    fn size_mismatch(&self, rank: u32, key: Key, want: usize, got: u64) -> Error {
        let local = self.sigs.get(&(key.1, key.2)).copied().unwrap_or(0);
        Error::CollectiveMismatch {
            context: key.1,
            seq: key.2,
            local: rank,
            local_call: format!("{} expecting {want} bytes", describe(local)),
            remote: key.0,
            remote_call: format!("a matching call sending {got} bytes"),
        }
    }

    fn recv_done(&mut self, id: ReqId) {
        if let Some(s) = self.scheds.get_mut(&id) {
            s.outstanding = s.outstanding.saturating_sub(1);
        }
    }

    /// No collective in flight.
    pub(crate) fn idle(&self) -> bool {
        self.scheds.is_empty()
    }

    /// World ranks some posted collective receive is waiting on.
    pub(crate) fn waiting_on(&self) -> impl Iterator<Item = u32> + '_ {
        self.posted.keys().map(|k| k.0)
    }

    /// Compares `src`'s signature for call (ctx, seq) with this rank's, now or (kept in
    /// `early`) when this rank makes that call. False when they differ: the error is
    /// raised and the data must not be used.
    fn check_signature(&mut self, rank: u32, ctx: u32, seq: u32, src: u32, sig: u64) -> bool {
        match self.sigs.get(&(ctx, seq)) {
            Some(&mine) if mine != sig => {
                let e = Self::mismatch(rank, ctx, seq, mine, src, sig);
                self.error.get_or_insert(e);
                false
            }
            Some(_) => true,
            None => {
                self.early.entry((ctx, seq)).or_insert((src, sig));
                true
            }
        }
    }

    /// Takes one in-order collective fragment (`payload` = 8-byte signature + data).
    /// Returns false to refuse it for lack of buffer space (the sender will resend).
    pub(crate) fn deliver(
        &mut self,
        rank: u32,
        limit: usize,
        pkt: &Packet<'_>,
        local: bool,
    ) -> Result<bool, ()> {
        let src = pkt.src();
        let (ctx, seq, step) = (pkt.context(), pkt.aux32(), pkt.tag());
        let key = (src, ctx, seq, step);
        let payload = pkt.payload();
        let Some(sig) = payload.get(..8).and_then(|b| b.try_into().ok()) else {
            return Err(());
        };
        let sig = u64::from_le_bytes(sig);
        let data = &payload[8..];
        let (total, off) = (pkt.msg_len(), pkt.aux());
        // A mismatched call's data is taken off the link and dropped: no fragment of it
        // (each carries the signature) reaches a buffer, and the raised error stops
        // every schedule (`advance`) before any result is returned. Once an error is
        // raised nothing more is taken in.
        if self.error.is_some() || !self.check_signature(rank, ctx, seq, src, sig) {
            return Ok(true);
        }
        if step == PROBE_STEP {
            // A probe carries only the signature.
            return Ok(true);
        }
        if let Some(len) = self.posted.get(&key).map(|p| p.len) {
            if off == 0 && total as usize != len {
                let e = self.size_mismatch(rank, key, len, total);
                self.error.get_or_insert(e);
                return Ok(true);
            }
        }
        if let Some(p) = self.posted.get_mut(&key) {
            p.started = true;
            let start = (off as usize).min(p.len);
            let n = data.len().min(p.len - start);
            // SAFETY: `ptr` addresses `len` bytes; `start + n <= len`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.ptr.add(start), n) };
            p.got += data.len();
            if p.got as u64 >= total {
                let id = p.sched;
                self.posted.remove(&key);
                self.recv_done(id);
            }
            return Ok(true);
        }
        match self.unexpected.get_mut(&key) {
            Some(part) => part.data.extend_from_slice(data),
            None => {
                if total > limit as u64 {
                    // No collective message can be that large here: corrupt input.
                    return Err(());
                }
                if !local
                    && !self.unexpected.is_empty()
                    && self.unexpected_bytes.saturating_add(total as usize) > limit
                {
                    return Ok(false);
                }
                self.unexpected_bytes = self.unexpected_bytes.saturating_add(total as usize);
                let mut v = Vec::with_capacity((total as usize).min(1 << 20));
                v.extend_from_slice(data);
                self.unexpected.insert(
                    key,
                    Partial {
                        data: v,
                        total,
                        sig,
                    },
                );
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{Primitive, TypeMap};

    #[test]
    fn signatures_hash_the_whole_block_whatever_the_layout() {
        let (i, f) = (
            TypeMap::primitive(Primitive::I32),
            TypeMap::primitive(Primitive::F64),
        );
        let s = TypeMap::try_structured(&[1, 1], &[0, 8], &[&i, &f]).unwrap();
        let two = TypeMap::try_contiguous(2, &s).unwrap();
        let sig = |t: &TypeMap, n| signature(CollKind::Bcast, Some(0), None, t, n);
        assert_eq!(sig(&s, 2), sig(&two, 1));
        assert_ne!(sig(&s, 2), sig(&s, 1));
        let v = TypeMap::try_vector(2, 2, 3, &f).unwrap();
        assert_eq!(sig(&v, 1), sig(&f, 4));
        let swapped = TypeMap::try_structured(&[1, 1], &[8, 0], &[&f, &i]).unwrap();
        assert_ne!(sig(&s, 1), sig(&swapped, 1));
    }

    #[test]
    fn temporaries_are_reused_within_their_bounds() {
        let mut pool = TmpPool::default();
        let a = pool.take(1000);
        assert_eq!(a.len(), 1000);
        let p = a.as_ptr();
        pool.give(vec![a, vec![7u8; 50]]);
        // The smallest long enough, as it is (no shorter, contents kept).
        let b = pool.take(40);
        assert_eq!((b.len(), b[0]), (50, 7));
        let c = pool.take(900);
        assert_eq!((c.as_ptr(), c.len()), (p, 1000));
        // Nothing long enough: a new one, the kept ones stay; none taken for nothing.
        pool.give(vec![c]);
        let d = pool.take(3000);
        assert_eq!(d.len(), 3000);
        assert_eq!((pool.bufs.len(), pool.bytes), (1, 1000));
        assert!(pool.take(0).is_empty());
        assert_eq!(pool.bufs.len(), 1);
        let _ = pool.take(1);
        assert_eq!(pool.bytes, 0);
        // At most MAX_BUFS buffers and MAX_BYTES bytes are kept.
        pool.give((0..20).map(|_| vec![0u8; 10]).collect());
        assert_eq!(pool.bufs.len(), TmpPool::MAX_BUFS);
        let mut pool = TmpPool::default();
        let big = vec![0u8; TmpPool::MAX_BYTES];
        let cap = big.capacity();
        pool.give(vec![big, vec![0u8; 1]]);
        assert_eq!((pool.bufs.len(), pool.bytes), (1, cap));
    }
}
