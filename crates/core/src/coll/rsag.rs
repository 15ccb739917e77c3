//! The all-reduce of large vectors (Rabenseifner): a reduce-scatter by recursive halving,
//! then an all-gather — by recursive doubling, or with real multicast below eight
//! members by seed 000's k-concurrency multicast of the reduced blocks.
//!
//! Contract: as [`super::algos`]: the same plan on every member from the same facts
//! (members, length, element size, multicast and its piece size and k), step ids unique
//! per (sender, receiver), the result in the receive buffer. Each block is combined on
//! one member, so every member gets the same bits.

use super::algos::{copy_send, recv, send, Shape};
use super::schedule::{Buf, CommOp, LocalOp, Plan, Region};

/// All-reduce of `len` bytes (elements of `esz` bytes) as a reduce-scatter by recursive
/// halving followed by an all-gather by recursive doubling (Rabenseifner): each member
/// moves about 2·len·(q−1)/q bytes, q the largest power of two ≤ p, instead of len·log p,
/// and combines only its share. With p not a power of two the members from q up first
/// fold their vector into member `i − q` and get the result back at the end. Each block
/// is combined on one member, so every member gets the same bits. Needs at least q
/// elements (the caller checks: [`rsag_fits`]).
///
/// With `mcast` = `Some((chunk, k))` (real multicast) the all-gather is seed 000's
/// k-concurrency multicast instead: each of the q members multicasts its reduced block
/// once, in chunks of about `chunk` bytes, k chunks per round, to every other member —
/// the members from q up included, which then need no result sent back. A member sends
/// len/q bytes in that phase instead of len·(q−1)/q, and seals each datagram once.
pub fn allreduce_rsag(s: &Shape, len: usize, esz: usize, mcast: Option<(usize, usize)>) -> Plan {
    let q = 1usize << s.p.ilog2();
    let extra = s.p - q;
    let n = len / esz.max(1);
    let mut plan = Plan::default();
    let out = Region::new(Buf::Recv, 0, len);
    copy_send(&mut plan, out);
    const RESULT: i32 = 1 << 12;
    if s.me >= q {
        plan.round(vec![send(s.w(s.me - q), 0, out)], vec![]);
        match mcast {
            Some((chunk, k)) => rsag_mcast_gather(&mut plan, s, (q, n, esz), chunk, k),
            None => plan.round(vec![recv(s.w(s.me - q), RESULT, out)], vec![]),
        }
        return plan;
    }
    if s.me < extra {
        let t = Region::new(plan.tmp(len), 0, len);
        plan.round(
            vec![recv(s.w(s.me + q), 0, t)],
            vec![LocalOp::Reduce { from: t, into: out }],
        );
    }
    let bytes = |(lo, hi): (usize, usize)| Region::new(Buf::Recv, lo * esz, (hi - lo) * esz);
    let (mut range, mut parents) = ((0, n), Vec::new());
    let (mut d, mut k) = (q / 2, 1);
    while d >= 1 {
        let partner = s.me ^ d;
        let mid = range.0 + (range.1 - range.0) / 2;
        let (keep, give) = if s.me & d == 0 {
            ((range.0, mid), (mid, range.1))
        } else {
            ((mid, range.1), (range.0, mid))
        };
        let kr = bytes(keep);
        let t = Region::new(plan.tmp(kr.len), 0, kr.len);
        plan.round(
            vec![send(s.w(partner), k, bytes(give)), recv(s.w(partner), k, t)],
            vec![LocalOp::Reduce { from: t, into: kr }],
        );
        parents.push((range, give));
        range = keep;
        d /= 2;
        k += 1;
    }
    if let Some((chunk, k)) = mcast {
        rsag_mcast_gather(&mut plan, s, (q, n, esz), chunk, k);
        return plan;
    }
    // All-gather: undo the halving, each time swapping halves with the same partner.
    let mut d = 1;
    while let Some((parent, theirs)) = parents.pop() {
        let partner = s.me ^ d;
        plan.round(
            vec![
                send(s.w(partner), k, bytes(range)),
                recv(s.w(partner), k, bytes(theirs)),
            ],
            vec![],
        );
        range = parent;
        d *= 2;
        k += 1;
    }
    if s.me < extra {
        plan.round(vec![send(s.w(s.me + q), RESULT, out)], vec![]);
    }
    plan
}

/// The elements `[lo, hi)` member `r` (< q) holds reduced after [`allreduce_rsag`]'s
/// halvings of `n` elements: at each level, the lower half with the level's bit clear.
fn rsag_block(r: usize, q: usize, n: usize) -> (usize, usize) {
    let (mut range, mut d) = ((0, n), q / 2);
    while d >= 1 {
        let mid = range.0 + (range.1 - range.0) / 2;
        range = if r & d == 0 {
            (range.0, mid)
        } else {
            (mid, range.1)
        };
        d /= 2;
    }
    range
}

/// [`allreduce_rsag`]'s multicast all-gather: member r < q owns [`rsag_block`]`(r)` of
/// the receive buffer and multicasts it in pieces of `chunk` bytes (whole elements), k
/// pieces per round; every member receives every other owner's pieces. Steps from
/// `1 << 13` (the piece's index), clear of the reduce-scatter's and the fold's.
fn rsag_mcast_gather(
    plan: &mut Plan,
    s: &Shape,
    (q, n, esz): (usize, usize, usize),
    chunk: usize,
    k: usize,
) {
    const GATHER: i32 = 1 << 13;
    let per = (chunk / esz.max(1)).max(1);
    let blocks: Vec<(usize, usize)> = (0..q).map(|r| rsag_block(r, q, n)).collect();
    let pieces = |r: usize| (blocks[r].1 - blocks[r].0).div_ceil(per);
    let piece = |r: usize, c: usize| {
        let lo = blocks[r].0 + c * per;
        let hi = (lo + per).min(blocks[r].1);
        Region::new(Buf::Recv, lo * esz, (hi - lo) * esz)
    };
    let most = (0..q).map(pieces).max().unwrap_or(0);
    let others: Vec<u32> = (0..s.p).filter(|&i| i != s.me).map(|i| s.w(i)).collect();
    let k = k.max(1);
    let mut j = 0;
    while j < most {
        let end = (j + k).min(most);
        let mut comm = Vec::new();
        if s.me < q {
            for c in j..end.min(pieces(s.me)) {
                comm.push(CommOp::Send {
                    to: others.clone(),
                    step: GATHER + c as i32,
                    from: piece(s.me, c),
                });
            }
        }
        for r in (0..q).filter(|&r| r != s.me) {
            for c in j..end.min(pieces(r)) {
                comm.push(recv(s.w(r), GATHER + c as i32, piece(r, c)));
            }
        }
        if !comm.is_empty() {
            plan.round(comm, vec![]);
        }
        j = end;
    }
}

/// The smallest reduced block (len / q) whose all-gather in [`allreduce_rsag`] takes
/// multicast. C `MPI_Allreduce` over UDP, the same binary with multicast all-gather or
/// not (3 alternating runs): on loopback at p = 8 (8 ranks on 2 cores) 8 KiB blocks
/// took 28 % longer with it and 16 KiB 12 %, 32–64 KiB the same; at p = 4, 16 KiB the
/// same and 32–128 KiB 8–11 % shorter (across 4 test hosts 7–12 %).
pub const RSAG_MCAST_BLOCK_MIN: usize = 32 << 10;

/// The largest power of two of members (q) whose all-gather in [`allreduce_rsag`] takes
/// multicast; from 8 it is point-to-point. C `MPI_Allreduce` at p = 8 over UDP, µs with
/// `PHALANX_MCAST` 1 / 0, medians of 5 alternating runs (2026-11-28, a 2-core Zen 3):
/// 8 ranks on one host 256 KiB 3215 / 3212, 512 KiB 6513 / 5496, 1 MiB 11873 / 10336;
/// across 4 test hosts (two ranks each) 256 KiB 4689 / 3900, 512 KiB 7498 / 7058, 1 MiB
/// 14679 / 15028. With eight members every multicast datagram is received seven times
/// on the same two cores; at p = 4 the multicast all-gather was 7–12 % faster. Measured
/// only with every rank on those two cores: not among 8 or more leaders on separate
/// machines (the hierarchical form's all-reduce takes this rule too).
pub const RSAG_MCAST_Q_MAX: usize = 4;

/// The `mcast` argument of [`allreduce_rsag`] for `len` bytes on `s`: pieces of `chunk`
/// bytes, `k` per round, where real multicast is there, the power of two of members is
/// at most [`RSAG_MCAST_Q_MAX`] and each member's reduced block is at least
/// [`RSAG_MCAST_BLOCK_MIN`] (facts every member shares).
pub fn rsag_mcast(s: &Shape, len: usize, chunk: usize, k: usize) -> Option<(usize, usize)> {
    let q = 1usize << s.p.max(1).ilog2();
    (s.multicast && q <= RSAG_MCAST_Q_MAX && len / q >= RSAG_MCAST_BLOCK_MIN).then_some((chunk, k))
}

/// Whether [`allreduce_rsag`] applies: three members or more and at least one element
/// per member of the largest power of two.
pub fn rsag_fits(p: usize, len: usize, esz: usize) -> bool {
    p >= 3 && esz > 0 && len.is_multiple_of(esz) && len / esz >= 1 << p.ilog2()
}
