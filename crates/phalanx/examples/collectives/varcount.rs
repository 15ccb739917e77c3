//! The varcount collectives (gather, scatter, all-gather and all-to-all with a count per
//! member, and the block reduce-scatter) against a sequential computation: blocks of
//! mixed lengths (empty, one element, around the board's buffer, up to `max` bytes),
//! gaps between the receive blocks that must stay untouched, every root (or the `roots`
//! chosen).

use super::{fail, val};
use phalanx::collective::SystemOperation;
use phalanx::datatype::{Partition, PartitionMut};
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::*;
use phalanx::Count;

const GAP: u64 = 0xdead_beef;

/// Elements member `j` contributes in round `r` (every member computes the same).
fn len(j: usize, r: usize, max: usize) -> usize {
    match (j + r) % 5 {
        0 => 0,
        1 => 1 + j,
        2 => (max / 8) >> (j % 3),
        3 => 100 + 37 * j,
        _ => 4096 + j,
    }
}

/// Displacements of `counts` with one element of gap after every block.
fn spaced(counts: &[usize]) -> (Vec<Count>, Vec<Count>, usize) {
    let mut displs = Vec::with_capacity(counts.len());
    let mut at = 0;
    for &c in counts {
        displs.push(at as Count);
        at += c + 1;
    }
    (counts.iter().map(|&c| c as Count).collect(), displs, at)
}

/// Checks `buf` holds block j = `want(j, i)` at `displs[j]` and the gaps untouched.
fn check_blocks(
    buf: &[u64],
    counts: &[usize],
    want: impl Fn(usize, usize) -> u64,
) -> Result<(), String> {
    let mut at = 0;
    for (j, &c) in counts.iter().enumerate() {
        if let Some(i) = (0..c).find(|&i| buf[at + i] != want(j, i)) {
            return Err(format!("block {j} element {i} of {c}"));
        }
        if buf[at + c] != GAP {
            return Err(format!("the gap after block {j}"));
        }
        at += c + 1;
    }
    Ok(())
}

pub fn check(c: &SimpleCommunicator, max: usize, label: &str) {
    let (rank, size) = (c.rank(), c.size());
    let (me, p) = (rank as usize, size as usize);
    for r in 0..5 {
        let salt = 1000 + r as u64;
        let counts: Vec<usize> = (0..p).map(|j| len(j, r, max)).collect();
        let (cc, displs, total) = spaced(&counts);
        let mine: Vec<u64> = (0..counts[me]).map(|i| val(rank, i, salt)).collect();
        for root in super::roots(size) {
            let rp = c.process_at_rank(root);
            let what = |w: &str| format!("{label}: {w} round {r} root {root}");
            // Gather.
            if rank == root {
                let mut buf = vec![GAP; total];
                {
                    let mut part = PartitionMut::new(&mut buf[..], &cc[..], &displs[..]);
                    rp.gather_varcount_into_root(&mine[..], &mut part);
                }
                if let Err(e) = check_blocks(&buf, &counts, |j, i| val(j as i32, i, salt)) {
                    fail(rank, format!("{}: {e}", what("gather_varcount")));
                }
            } else {
                rp.gather_varcount_into(&mine[..]);
            }
            // Scatter: block j of the root's buffer is member j's.
            let mut got = vec![GAP; counts[me]];
            if rank == root {
                let mut buf = vec![GAP; total];
                for (j, &n) in counts.iter().enumerate() {
                    for i in 0..n {
                        buf[displs[j] as usize + i] = val(j as i32, i, salt ^ 7);
                    }
                }
                let part = Partition::new(&buf[..], &cc[..], &displs[..]);
                rp.scatter_varcount_into_root(&part, &mut got[..]);
            } else {
                rp.scatter_varcount_into(&mut got[..]);
            }
            if let Some(i) = (0..counts[me]).find(|&i| got[i] != val(rank, i, salt ^ 7)) {
                fail(rank, format!("{}: element {i}", what("scatter_varcount")));
            }
        }
        // All-gather.
        let mut buf = vec![GAP; total];
        {
            let mut part = PartitionMut::new(&mut buf[..], &cc[..], &displs[..]);
            c.all_gather_varcount_into(&mine[..], &mut part);
        }
        if let Err(e) = check_blocks(&buf, &counts, |j, i| val(j as i32, i, salt)) {
            fail(rank, format!("{label}: all_gather_varcount round {r}: {e}"));
        }
        // All-to-all: member i sends len(i·p + j) elements to member j. From 32 members
        // every block but one per member (to its successor, up to 4096 + p² elements: as
        // large as the board's buffers) is cut to 2^20 / p² elements: p² blocks of up to
        // 4096 + p² elements took 4 s a call to fill and check at 64 ranks on two cores.
        let cap = if p >= 32 {
            (1usize << 20) / (p * p)
        } else {
            usize::MAX
        };
        let pair = |i: usize, j: usize| {
            let n = len(i * p + j, r, max / p.max(1));
            if j == (i + 1) % p {
                n
            } else {
                n.min(cap)
            }
        };
        let sends: Vec<usize> = (0..p).map(|j| pair(me, j)).collect();
        let recvs: Vec<usize> = (0..p).map(|j| pair(j, me)).collect();
        let (sc, sd, stotal) = spaced(&sends);
        let (rc, rd, rtotal) = spaced(&recvs);
        let mut sbuf = vec![GAP; stotal];
        for (j, &n) in sends.iter().enumerate() {
            for i in 0..n {
                sbuf[sd[j] as usize + i] = val((me * p + j) as i32, i, salt);
            }
        }
        let mut rbuf = vec![GAP; rtotal];
        {
            let sp = Partition::new(&sbuf[..], &sc[..], &sd[..]);
            let mut part = PartitionMut::new(&mut rbuf[..], &rc[..], &rd[..]);
            c.all_to_all_varcount_into(&sp, &mut part);
        }
        if let Err(e) = check_blocks(&rbuf, &recvs, |j, i| val((j * p + me) as i32, i, salt)) {
            fail(rank, format!("{label}: all_to_all_varcount round {r}: {e}"));
        }
        // Block reduce-scatter: member j gets the sum of block j of every vector.
        let n = len(r + 1, r, max);
        let v: Vec<u64> = (0..n * p).map(|i| (me * 31 + i) as u64 % 1000).collect();
        let mut out = vec![GAP; n];
        c.reduce_scatter_block_into(&v[..], &mut out[..], SystemOperation::sum());
        let want = |i: usize| {
            (0..p)
                .map(|k| (k * 31 + me * n + i) as u64 % 1000)
                .sum::<u64>()
        };
        if let Some(i) = (0..n).find(|&i| out[i] != want(i)) {
            fail(
                rank,
                format!("{label}: reduce_scatter_block round {r}: element {i} of {n}"),
            );
        }
    }
}
