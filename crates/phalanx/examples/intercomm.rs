//! Checks the collectives on an intercommunicator against a sequential computation: the
//! world split into a low group (the first ⌈p/2⌉ ranks) and a high group, joined by
//! `create_intercommunicator`; every collective MPI defines there, in both directions,
//! with the root in either group. Exits non-zero on the first wrong value.
//!
//! Usage: `phalanx run -n 5 intercomm` (2 ranks or more).
use phalanx::collective::{create_intercommunicator, SystemOperation};
use phalanx::datatype::{Partition, PartitionMut};
use phalanx::topology::{Color, InterCommunicator};
use phalanx::traits::*;
use phalanx::Count;

fn fail(rank: i32, what: String) -> ! {
    eprintln!("intercomm: rank {rank}: MISMATCH: {what}");
    std::process::exit(1);
}

/// The value world rank `w` contributes at index `i`.
fn val(w: usize, i: usize) -> u64 {
    (w as u64 + 1) * 1000 + i as u64
}

/// Elements world rank `w` contributes to a varcount call.
fn vlen(w: usize) -> usize {
    [3, 0, 1, 7, 2, 5][w % 6]
}

fn main() {
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let (wr, wp) = (world.rank() as usize, world.size() as usize);
    if wp < 2 {
        println!("intercomm: rank 0 of 1: needs 2 ranks, nothing to check: intercomm ok");
        return;
    }
    let nlow = wp.div_ceil(2);
    let low = wr < nlow;
    let local = world
        .split_by_color(Color::with_value(low as i32))
        .expect("every rank has a color");
    // World ranks of the remote group, in its rank order.
    let remote: Vec<usize> = if low {
        (nlow..wp).collect()
    } else {
        (0..nlow).collect()
    };
    let q = remote.len();
    let remote_leader = if low { nlow as i32 } else { 0 };
    let ic: InterCommunicator =
        create_intercommunicator(&local, 0, &world, remote_leader, 77).expect("intercommunicator");
    assert_eq!(ic.remote_size() as usize, q);
    let me = local.rank() as usize;
    let check = |ok: bool, what: &str| {
        if !ok {
            fail(world.rank(), what.into());
        }
    };

    ic.barrier();
    CommunicatorCollectives::barrier(&ic);

    // All-gather: every remote member's 3 values.
    let mine: Vec<u64> = (0..3).map(|i| val(wr, i)).collect();
    let mut got = vec![0u64; 3 * q];
    ic.all_gather_into(&mine[..], &mut got[..]);
    let want: Vec<u64> = remote
        .iter()
        .flat_map(|&w| (0..3).map(move |i| val(w, i)))
        .collect();
    check(got == want, "all_gather_into");

    // All-reduce: the sum of the remote group's values.
    let mut sum = vec![0u64; 3];
    ic.all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum());
    let want: Vec<u64> = (0..3)
        .map(|i| remote.iter().map(|&w| val(w, i)).sum())
        .collect();
    check(sum == want, "all_reduce_into");

    // All-to-all: 2 values to each remote member j: val(wr, 10 j + k).
    let send: Vec<u64> = (0..q)
        .flat_map(|j| (0..2).map(move |k| val(wr, 10 * j + k)))
        .collect();
    let mut recv = vec![0u64; 2 * q];
    ic.all_to_all_into(&send[..], &mut recv[..]);
    let want: Vec<u64> = remote
        .iter()
        .flat_map(|&w| (0..2).map(move |k| val(w, 10 * me + k)))
        .collect();
    check(recv == want, "all_to_all_into");

    // All-gather varcount: remote member j contributes vlen(its world rank) values.
    let mine: Vec<u64> = (0..vlen(wr)).map(|i| val(wr, i)).collect();
    let counts: Vec<Count> = remote.iter().map(|&w| vlen(w) as Count).collect();
    let displs: Vec<Count> = counts
        .iter()
        .scan(0, |a, &c| {
            let d = *a;
            *a += c + 1;
            Some(d)
        })
        .collect();
    let mut buf = vec![u64::MAX; counts.iter().sum::<Count>() as usize + q];
    {
        let mut part = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
        ic.all_gather_varcount_into(&mine[..], &mut part);
    }
    for (j, &w) in remote.iter().enumerate() {
        let d = displs[j] as usize;
        check(
            (0..vlen(w)).all(|i| buf[d + i] == val(w, i)) && buf[d + vlen(w)] == u64::MAX,
            "all_gather_varcount_into",
        );
    }

    // All-to-all varcount: (my world rank + remote world rank) % 4 values each way.
    let n = |a: usize, b: usize| (a + b) % 4;
    let sc: Vec<Count> = remote.iter().map(|&w| n(wr, w) as Count).collect();
    let sd: Vec<Count> = sc
        .iter()
        .scan(0, |a, &c| {
            let d = *a;
            *a += c;
            Some(d)
        })
        .collect();
    let sbuf: Vec<u64> = remote
        .iter()
        .flat_map(|&w| (0..n(wr, w)).map(move |k| val(wr, 100 * w + k)))
        .collect();
    let rc = sc.clone();
    let rd: Vec<Count> = rc
        .iter()
        .scan(0, |a, &c| {
            let d = *a;
            *a += c + 2;
            Some(d)
        })
        .collect();
    let mut rbuf = vec![u64::MAX; (rc.iter().sum::<Count>() as usize) + 2 * q];
    {
        let sp = Partition::new(&sbuf[..], &sc[..], &sd[..]);
        let mut rp = PartitionMut::new(&mut rbuf[..], &rc[..], &rd[..]);
        ic.all_to_all_varcount_into(&sp, &mut rp);
    }
    for (j, &w) in remote.iter().enumerate() {
        let d = rd[j] as usize;
        check(
            (0..n(wr, w)).all(|k| rbuf[d + k] == val(w, 100 * wr + k)),
            "all_to_all_varcount_into",
        );
    }

    // Reduce-scatter block: both groups reduce vectors of the same length T (MPI's
    // rule), scattered over the other group in blocks of T / its size.
    let t = 2 * nlow * (wp - nlow);
    let rc = t / local.size() as usize;
    let v: Vec<u64> = (0..t).map(|i| (wr * 7 + i) as u64).collect();
    let mut out = vec![0u64; rc];
    ic.reduce_scatter_block_into(&v[..], &mut out[..], SystemOperation::sum());
    let want: Vec<u64> = (0..rc)
        .map(|i| remote.iter().map(|&w| (w * 7 + me * rc + i) as u64).sum())
        .collect();
    check(out == want, "reduce_scatter_block_into");

    // Rooted: every root of either group in turn.
    for root_low in [true, false] {
        let nroot = if root_low { nlow } else { wp - nlow };
        for r in 0..nroot {
            let root_world = if root_low { r } else { nlow + r };
            let in_root_group = low == root_low;
            if in_root_group {
                let i_am_root = wr == root_world;
                if !i_am_root {
                    continue; // MPI_PROC_NULL: no part
                }
                // Broadcast.
                let b: Vec<u64> = (0..4).map(|i| val(wr, i)).collect();
                ic.broadcast_root(&b[..]);
                // Gather.
                let mut g = vec![0u64; 2 * q];
                ic.gather_root(&mut g[..]);
                let want: Vec<u64> = remote
                    .iter()
                    .flat_map(|&w| (0..2).map(move |i| val(w, i)))
                    .collect();
                check(g == want, "gather_root");
                // Gather varcount.
                let counts: Vec<Count> = remote.iter().map(|&w| vlen(w) as Count).collect();
                let displs: Vec<Count> = counts
                    .iter()
                    .scan(0, |a, &c| {
                        let d = *a;
                        *a += c;
                        Some(d)
                    })
                    .collect();
                let mut g = vec![0u64; counts.iter().sum::<Count>() as usize];
                {
                    let mut part = PartitionMut::new(&mut g[..], &counts[..], &displs[..]);
                    ic.gather_varcount_root(&mut part);
                }
                let want: Vec<u64> = remote
                    .iter()
                    .flat_map(|&w| (0..vlen(w)).map(move |i| val(w, i)))
                    .collect();
                check(g == want, "gather_varcount_root");
                // Scatter: 2 values for each remote member.
                let s: Vec<u64> = (0..2 * q).map(|i| val(wr, 50 + i)).collect();
                ic.scatter_root(&s[..]);
                // Scatter varcount.
                let s: Vec<u64> = remote
                    .iter()
                    .enumerate()
                    .flat_map(|(j, &w)| (0..vlen(w)).map(move |i| val(j, i)))
                    .collect();
                let part = Partition::new(&s[..], &counts[..], &displs[..]);
                ic.scatter_varcount_root(&part);
                // Reduce.
                let mut red = vec![0u64; 3];
                ic.reduce_root(&mut red[..]);
                let want: Vec<u64> = (0..3)
                    .map(|i| remote.iter().map(|&w| val(w, i)).sum())
                    .collect();
                check(red == want, "reduce_root");
            } else {
                let rp = ic.process_at_rank(r as i32);
                let mut b = vec![0u64; 4];
                rp.broadcast_into(&mut b[..]);
                check(
                    b == (0..4).map(|i| val(root_world, i)).collect::<Vec<_>>(),
                    "broadcast_into (remote root)",
                );
                let mine: Vec<u64> = (0..2).map(|i| val(wr, i)).collect();
                rp.gather_into(&mine[..]);
                let mine: Vec<u64> = (0..vlen(wr)).map(|i| val(wr, i)).collect();
                rp.gather_varcount_into(&mine[..]);
                let mut s = vec![0u64; 2];
                rp.scatter_into(&mut s[..]);
                check(
                    s == vec![val(root_world, 50 + 2 * me), val(root_world, 51 + 2 * me)],
                    "scatter_into (remote root)",
                );
                let mut s = vec![0u64; vlen(wr)];
                rp.scatter_varcount_into(&mut s[..]);
                check(
                    s == (0..vlen(wr)).map(|i| val(me, i)).collect::<Vec<_>>(),
                    "scatter_varcount_into (remote root)",
                );
                let mine: Vec<u64> = (0..3).map(|i| val(wr, i)).collect();
                rp.reduce_into(&mine[..], SystemOperation::sum());
            }
        }
    }
    ic.barrier();
    println!(
        "intercomm: rank {} of {}: intercomm ok",
        world.rank(),
        world.size()
    );
}
