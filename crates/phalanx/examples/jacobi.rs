//! Jacobi iteration for Laplace's equation on an N×N grid (seed 003's application).
//!
//! The outer rows and columns are fixed boundary values (top row 1, left column 0.5, the
//! rest 0); every interior point becomes the mean of its four neighbours each sweep,
//! `0.25 · ((up + down) + (left + right))` in that order everywhere, so the parallel
//! sweep computes exactly the sequential one's numbers. Rows are block-distributed
//! (rank r owns rows `r·N/p .. (r+1)·N/p`); before each sweep a rank exchanges its first
//! and last rows with its neighbours (nonblocking sends, blocking receives into halo
//! rows), and after it an `all_reduce` (max) of the largest change decides convergence:
//! stop when it is at most the tolerance (0: never) or after the iteration count. The
//! maximum does not depend on the order of reduction, so every rank stops where the
//! sequential code stops.
//!
//! Rank 0 then gathers the grid, runs the sequential code itself (timed; the 1-rank time
//! of the speed-up, measured in the same job) and compares bit for bit; any difference is
//! a mismatch and every rank exits with status 1.
//!
//! Usage: `phalanx run -n P jacobi [N (64)] [iterations (1000)] [tolerance (0)]`.
use phalanx::collective::SystemOperation;
use phalanx::environment::time;
use phalanx::request::scope;
use phalanx::traits::*;

/// Tag of a row sent to the rank above (lower rank).
const UP: phalanx::Tag = 1;
/// Tag of a row sent to the rank below (higher rank).
const DOWN: phalanx::Tag = 2;
/// Tag of the gathered blocks.
const GATHER: phalanx::Tag = 3;

/// The initial value of grid point (i, j) (boundary values stay forever).
fn initial(n: usize, i: usize, j: usize) -> f64 {
    if i == 0 {
        1.0
    } else if j == 0 && i < n - 1 {
        0.5
    } else {
        0.0
    }
}

/// Rows `lo .. hi` of the grid, with one halo row above and below: `(hi - lo + 2) · n`
/// values, row `lo` at offset n.
fn block(n: usize, lo: usize, hi: usize) -> Vec<f64> {
    let mut u = vec![0.0; (hi - lo + 2) * n];
    for i in lo..hi {
        for j in 0..n {
            u[(i - lo + 1) * n + j] = initial(n, i, j);
        }
    }
    u
}

/// One sweep over rows `lo .. hi` of an N×N grid: `new` from `old` (both with halos);
/// returns the largest change. Boundary points are copied.
fn sweep(n: usize, lo: usize, hi: usize, old: &[f64], new: &mut [f64]) -> f64 {
    let mut change = 0.0f64;
    for i in lo..hi {
        let r = (i - lo + 1) * n;
        if i == 0 || i == n - 1 {
            new[r..r + n].copy_from_slice(&old[r..r + n]);
            continue;
        }
        new[r] = old[r];
        new[r + n - 1] = old[r + n - 1];
        for j in 1..n - 1 {
            let v = 0.25 * ((old[r - n + j] + old[r + n + j]) + (old[r + j - 1] + old[r + j + 1]));
            change = change.max((v - old[r + j]).abs());
            new[r + j] = v;
        }
    }
    change
}

/// The sequential code: returns the grid (no halos), the sweeps done and the last change.
fn sequential(n: usize, iterations: usize, tolerance: f64) -> (Vec<f64>, usize, f64) {
    let mut u = block(n, 0, n);
    let mut v = u.clone();
    let (mut done, mut change) = (0, f64::INFINITY);
    while done < iterations && change > tolerance {
        change = sweep(n, 0, n, &u, &mut v);
        std::mem::swap(&mut u, &mut v);
        done += 1;
    }
    (u[n..(n + 1) * n].to_vec(), done, change)
}

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    match std::env::args().nth(i) {
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("usage: jacobi [N] [iterations] [tolerance]: bad argument {s:?}");
            std::process::exit(2)
        }),
        None => default,
    }
}

fn main() {
    let n: usize = arg(1, 64);
    let iterations: usize = arg(2, 1000);
    let tolerance: f64 = arg(3, 0.0);
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let (rank, p) = (world.rank() as usize, world.size() as usize);
    if n < 3 || n < p {
        if rank == 0 {
            eprintln!("jacobi: N must be at least 3 and at least the number of ranks ({p})");
        }
        std::process::exit(2);
    }
    let bounds = |r: usize| (r * n / p, (r + 1) * n / p);
    let (lo, hi) = bounds(rank);
    let rows = hi - lo;
    let mut u = block(n, lo, hi);
    let mut v = u.clone();
    let above = (rank > 0).then(|| world.process_at_rank(rank as i32 - 1));
    let below = (rank + 1 < p).then(|| world.process_at_rank(rank as i32 + 1));

    world.barrier();
    let start = time();
    let (mut done, mut change) = (0, f64::INFINITY);
    while done < iterations && change > tolerance {
        // Halo exchange: send my first and last rows, receive the neighbours' into the
        // halo rows.
        let (top, rest) = u.split_at_mut(n);
        let (mine, bottom) = rest.split_at_mut(rows * n);
        scope(|s| {
            let up = above
                .as_ref()
                .map(|a| a.immediate_send_with_tag(s, &mine[..n], UP));
            let down = below
                .as_ref()
                .map(|b| b.immediate_send_with_tag(s, &mine[(rows - 1) * n..], DOWN));
            if let Some(a) = &above {
                a.receive_into_with_tag(&mut top[..], DOWN);
            }
            if let Some(b) = &below {
                b.receive_into_with_tag(&mut bottom[..], UP);
            }
            up.map(|r| r.wait());
            down.map(|r| r.wait());
        });
        let mine_change = sweep(n, lo, hi, &u, &mut v);
        world.all_reduce_into(&mine_change, &mut change, SystemOperation::max());
        std::mem::swap(&mut u, &mut v);
        done += 1;
    }
    let elapsed = time() - start;

    let mut verdict = 0u8;
    let root = world.process_at_rank(0);
    if rank == 0 {
        let mut parallel = 0.0f64;
        root.reduce_into_root(&elapsed, &mut parallel, SystemOperation::max());
        let mut grid = vec![0.0; n * n];
        grid[lo * n..hi * n].copy_from_slice(&u[n..(rows + 1) * n]);
        for r in 1..p {
            let (rlo, rhi) = bounds(r);
            world
                .process_at_rank(r as i32)
                .receive_into_with_tag(&mut grid[rlo * n..rhi * n], GATHER);
        }
        let t0 = time();
        let (seq, seq_done, seq_change) = sequential(n, iterations, tolerance);
        let seq_time = time() - t0;
        let differing = seq
            .iter()
            .zip(&grid)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        let max_diff = seq
            .iter()
            .zip(&grid)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f64, f64::max);
        let ok = differing == 0 && seq_done == done && seq_change.to_bits() == change.to_bits();
        verdict = u8::from(!ok);
        println!(
            "jacobi: n={n}, p={p}, {done} iterations (last change {change:.3e}, tolerance \
             {tolerance:e}), time {parallel:.6} s ({:.1} us/iteration), speed-up over 1 rank \
             {:.2} (sequential {seq_time:.6} s on rank 0, {seq_done} iterations; {}){}",
            parallel * 1e6 / done.max(1) as f64,
            seq_time / parallel,
            if differing == 0 {
                "bit-identical".to_string()
            } else {
                format!("{differing} points differ, max difference {max_diff:.3e}")
            },
            if ok { "" } else { " MISMATCH" }
        );
    } else {
        root.reduce_into(&elapsed, SystemOperation::max());
        root.send_with_tag(&u[n..(rows + 1) * n], GATHER);
    }
    root.broadcast_into(&mut verdict);
    if verdict != 0 {
        if rank == 0 {
            eprintln!("jacobi: MISMATCH against the sequential computation");
        }
        std::process::exit(1);
    }
}
