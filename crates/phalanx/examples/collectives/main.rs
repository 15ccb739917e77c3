//! Checks every collective against a sequential computation: broadcast, gather, scatter,
//! all_gather, reduce, all_reduce, all_to_all, scan and barrier, over every root (or the
//! `roots` chosen) and a range of sizes (0 bytes to 1 MiB), and the varcount collectives
//! (`varcount.rs`), also on a communicator split from the world.
//! Exits non-zero on the first wrong byte.
//!
//! Usage: `phalanx run -n 5 collectives [max_bytes] [roots]`: `roots` limits the rooted
//! collectives to that many roots spread over the ranks (the first and the last among
//! them; default every root), for jobs so large that every root would take minutes.
use phalanx::collective::SystemOperation;
use phalanx::traits::*;

mod varcount;

fn fail(rank: i32, what: String) -> ! {
    eprintln!("collectives: rank {rank}: MISMATCH: {what}");
    std::process::exit(1);
}

/// How many roots the rooted collectives check (the `roots` argument, read once; every
/// root without it). One that is not a whole number of at least 2 ends the program with
/// a message.
fn root_limit() -> i32 {
    static LIMIT: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| match std::env::args().nth(2) {
        None => i32::MAX,
        Some(a) => match a.parse::<i32>() {
            Ok(n) if n >= 2 => n,
            _ => {
                eprintln!("collectives: roots must be a whole number of at least 2, not '{a}'");
                std::process::exit(2);
            }
        },
    })
}

/// The roots to check on a communicator of `size` ranks: every one, or [`root_limit`] of
/// them spread evenly with the first and the last always among them. Every rank computes
/// the same from the same argument.
pub fn roots(size: i32) -> Vec<i32> {
    let limit = root_limit();
    if limit >= size {
        return (0..size).collect();
    }
    let mut v: Vec<i32> = (0..limit - 1)
        .map(|i| (i64::from(i) * i64::from(size - 1) / i64::from(limit - 1)) as i32)
        .collect();
    v.push(size - 1);
    v.dedup();
    v
}

fn val(rank: i32, i: usize, salt: u64) -> u64 {
    (rank as u64 + 1).wrapping_mul(0x9e37_79b9) ^ (i as u64).wrapping_mul(31) ^ salt
}

fn check_comm(c: &phalanx::topology::SimpleCommunicator, max: usize, label: &str) {
    let (rank, size) = (c.rank(), c.size());
    let p = size as usize;
    let mut counts = vec![0usize, 1, 3, 100];
    let mut n = 1024;
    while n * 8 <= max {
        counts.push(n);
        n *= 8;
    }
    counts.push(max / 8);
    for (ci, &count) in counts.iter().enumerate() {
        let salt = ci as u64;
        for root in roots(size) {
            let rp = c.process_at_rank(root);
            // Broadcast.
            let mut b: Vec<u64> = if rank == root {
                (0..count).map(|i| val(root, i, salt)).collect()
            } else {
                vec![0; count]
            };
            rp.broadcast_into(&mut b[..]);
            if (0..count).any(|i| b[i] != val(root, i, salt)) {
                fail(
                    rank,
                    format!("{label}: broadcast of {count} u64 from root {root}"),
                );
            }
            // Gather.
            let mine: Vec<u64> = (0..count).map(|i| val(rank, i, salt)).collect();
            if rank == root {
                let mut all = vec![0u64; count * p];
                rp.gather_into_root(&mine[..], &mut all[..]);
                for r in 0..p {
                    if (0..count).any(|i| all[r * count + i] != val(r as i32, i, salt)) {
                        fail(
                            rank,
                            format!("{label}: gather of {count} u64 at root {root}, block {r}"),
                        );
                    }
                }
            } else {
                rp.gather_into(&mine[..]);
            }
            // Scatter.
            let mut part = vec![0u64; count];
            if rank == root {
                let all: Vec<u64> = (0..count * p).map(|i| val(root, i, salt)).collect();
                rp.scatter_into_root(&all[..], &mut part[..]);
            } else {
                rp.scatter_into(&mut part[..]);
            }
            if (0..count).any(|i| part[i] != val(root, rank as usize * count + i, salt)) {
                fail(
                    rank,
                    format!("{label}: scatter of {count} u64 from root {root}"),
                );
            }
            // Reduce (sum).
            let x: Vec<i64> = (0..count)
                .map(|i| (rank as i64 + 1) * (i as i64 + 1))
                .collect();
            let tri = (p * (p + 1) / 2) as i64;
            if rank == root {
                let mut r = vec![0i64; count];
                rp.reduce_into_root(&x[..], &mut r[..], SystemOperation::sum());
                if (0..count).any(|i| r[i] != tri * (i as i64 + 1)) {
                    fail(
                        rank,
                        format!("{label}: reduce of {count} i64 at root {root}"),
                    );
                }
            } else {
                rp.reduce_into(&x[..], SystemOperation::sum());
            }
        }
        // All-gather.
        let mine: Vec<u64> = (0..count).map(|i| val(rank, i, salt)).collect();
        let mut all = vec![0u64; count * p];
        c.all_gather_into(&mine[..], &mut all[..]);
        for r in 0..p {
            if (0..count).any(|i| all[r * count + i] != val(r as i32, i, salt)) {
                fail(
                    rank,
                    format!("{label}: all_gather of {count} u64, block {r}"),
                );
            }
        }
        // All-reduce (max over f64, sum over u64).
        let f: Vec<f64> = (0..count).map(|i| (rank as f64) * 0.5 + i as f64).collect();
        let mut g = vec![0f64; count];
        c.all_reduce_into(&f[..], &mut g[..], SystemOperation::max());
        if (0..count).any(|i| g[i] != (size - 1) as f64 * 0.5 + i as f64) {
            fail(rank, format!("{label}: all_reduce max of {count} f64"));
        }
        // Scan (sum).
        let x: Vec<u32> = (0..count).map(|i| rank as u32 + i as u32).collect();
        let mut s = vec![0u32; count];
        c.scan_into(&x[..], &mut s[..], SystemOperation::sum());
        let r = rank as u32;
        if (0..count).any(|i| s[i] != r * (r + 1) / 2 + (r + 1) * i as u32) {
            fail(rank, format!("{label}: scan of {count} u32"));
        }
        // All-to-all: block j of rank i holds val(i, j).
        let blk = count.min(4096);
        let send: Vec<u64> = (0..blk * p)
            .map(|k| val(rank, k / blk.max(1), salt))
            .collect();
        let mut recv = vec![0u64; blk * p];
        c.all_to_all_into(&send[..], &mut recv[..]);
        for src in 0..p {
            if (0..blk).any(|k| recv[src * blk + k] != val(src as i32, rank as usize, salt)) {
                fail(
                    rank,
                    format!("{label}: all_to_all of {blk} u64 blocks, from {src}"),
                );
            }
        }
        c.barrier();
    }
    // Nonblocking collectives overlap: an all-reduce and a barrier in flight together.
    let x = [rank as u64 + 1; 16];
    let mut y = [0u64; 16];
    let mut g = vec![0u64; p];
    let me = [rank as u64];
    phalanx::request::scope(|scope| {
        let r = c.immediate_all_reduce_into(scope, &x[..], &mut y[..], SystemOperation::sum());
        let a = c.immediate_all_gather_into(scope, &me[..], &mut g[..]);
        let b = c.immediate_barrier();
        b.wait();
        a.wait();
        r.wait();
    });
    if y.iter().any(|&v| v != (p * (p + 1) / 2) as u64) || g != (0..p as u64).collect::<Vec<_>>() {
        fail(rank, format!("{label}: nonblocking all_reduce/all_gather"));
    }
    immediate_rooted(c, label);
}

/// Every immediate collective started together, with a point-to-point ring exchange done
/// while they are in flight (they must progress without being waited on), every root (or
/// the `roots` chosen).
fn immediate_rooted(c: &phalanx::topology::SimpleCommunicator, label: &str) {
    let (rank, p) = (c.rank(), c.size() as usize);
    let r = rank as u64;
    for root in roots(p as i32) {
        let rp = c.process_at_rank(root);
        let is_root = rank == root;
        let mut bc = [if is_root { 7 + root as u64 } else { 0 }; 300];
        let mine = [r * 10; 3];
        let mut gathered = vec![0u64; 3 * p];
        let scat: Vec<u64> = (0..2 * p as u64).map(|i| i + 100).collect();
        let mut piece = [0u64; 2];
        let mut red = [0u64; 5];
        let contrib = [r + 1; 5];
        let a2a: Vec<u64> = (0..p as u64).map(|j| r * 1000 + j).collect();
        let mut a2a_out = vec![0u64; p];
        let mut scanned = [0u64; 2];
        let scan_in = [r; 2];
        let (next, prev) = ((rank + 1) % p as i32, (rank + p as i32 - 1) % p as i32);
        let mut ring = [0u64; 1];
        let token = [r];
        phalanx::request::scope(|s| {
            let b = rp.immediate_broadcast_into(s, &mut bc[..]);
            let g_root =
                is_root.then(|| rp.immediate_gather_into_root(s, &mine[..], &mut gathered[..]));
            let g_leaf = (!is_root).then(|| rp.immediate_gather_into(s, &mine[..]));
            let (sc_root, sc_leaf) = if is_root {
                (
                    Some(rp.immediate_scatter_into_root(s, &scat[..], &mut piece[..])),
                    None,
                )
            } else {
                (None, Some(rp.immediate_scatter_into(s, &mut piece[..])))
            };
            let rd_root = is_root.then(|| {
                rp.immediate_reduce_into_root(s, &contrib[..], &mut red[..], SystemOperation::sum())
            });
            let rd_leaf = (!is_root)
                .then(|| rp.immediate_reduce_into(s, &contrib[..], SystemOperation::sum()));
            let at = c.immediate_all_to_all_into(s, &a2a[..], &mut a2a_out[..]);
            let sn =
                c.immediate_scan_into(s, &scan_in[..], &mut scanned[..], SystemOperation::sum());
            // Point-to-point while every collective above is in flight.
            let tx = c.process_at_rank(next).immediate_send(s, &token[..]);
            c.process_at_rank(prev).receive_into(&mut ring[..]);
            tx.wait();
            sn.wait();
            at.wait();
            rd_root.map(|q| q.wait());
            rd_leaf.map(|q| q.wait());
            sc_root.map(|q| q.wait());
            sc_leaf.map(|q| q.wait());
            g_root.map(|q| q.wait());
            g_leaf.map(|q| q.wait());
            b.wait();
        });
        let ok = bc.iter().all(|&v| v == 7 + root as u64)
            && (!is_root || (0..p).all(|i| gathered[3 * i..3 * i + 3] == [i as u64 * 10; 3]))
            && piece == [100 + 2 * r, 101 + 2 * r]
            && (!is_root || red == [(p * (p + 1) / 2) as u64; 5])
            && (0..p).all(|j| a2a_out[j] == j as u64 * 1000 + r)
            && scanned == [(0..=r).sum::<u64>(); 2]
            && ring == [prev as u64];
        if !ok {
            fail(
                rank,
                format!("{label}: immediate rooted collectives, root {root}"),
            );
        }
    }
}

fn main() {
    let max: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1 << 20);
    // A bad `roots` argument is refused before the job starts communicating.
    root_limit();
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    check_comm(&world, max, "world");
    varcount::check(&world, max, "world");
    // Halves of the world, ranked in reverse order.
    let color = world.rank() % 2;
    if let Some(half) =
        world.split_by_color_with_key(phalanx::topology::Color::with_value(color), -world.rank())
    {
        check_comm(&half, max.min(1 << 16), "split");
        varcount::check(&half, max.min(1 << 16), "split");
    }
    let dup = world.duplicate();
    check_comm(&dup, 4096, "duplicate");
    println!(
        "collectives: rank {} of {}: all collectives ok",
        world.rank(),
        world.size()
    );
}
