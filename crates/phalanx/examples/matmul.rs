//! Dense matrix–matrix multiply C = A × B with column blocks and Allgather (seed 000 §5).
//!
//! A, B and C are n × n, stored column-major. Following the paper's decomposition, rank i
//! owns the i-th block of columns of A, of B and of C; to compute its block of C,
//! `C_i = A × B_i`, it needs the whole of A, so the ranks first share their column blocks
//! of A with one `all_gather_into`. Blocks are `w = ceil(n / p)` columns wide; the last
//! ranks own fewer (possibly zero) columns and pad their block of A with zero columns for
//! the Allgather, so any p (even p > n) gives the right result.
//!
//! Each rank generates its own blocks of A and B deterministically from the global
//! indices. The timed parallel phase is barrier → Allgather of A → local multiply; its
//! time is the slowest rank's, averaged over `reps` repetitions after one untimed warm-up
//! (the sequential code gets a warm-up too). The blocks of C are
//! then gathered to rank 0, which runs the sequential code (the same kernel over the
//! whole of B, `reps` times, timed) while the other ranks wait: that is both the
//! reference for verification and the 1-rank time for the speed-up, measured on the same
//! machine in the same job. (Under oversubscription the waiting ranks sleep after a
//! bounded spin, so they barely disturb it.) The kernel runs the k loop in the same order
//! in both, so the results agree to the last bit; anything beyond a 1e-9 max abs error
//! is reported as a mismatch and every rank exits with status 1.
//!
//! Usage: `phalanx run -n P matmul [n (512)] [reps (3)]`.
use phalanx::collective::SystemOperation;
use phalanx::environment::time;
use phalanx::traits::*;

/// Largest tolerated |C_parallel - C_sequential|.
const TOLERANCE: f64 = 1e-9;

/// A deterministic value in [-1, 1) for entry (row, col) of matrix `salt`.
fn entry(salt: u64, row: usize, col: usize) -> f64 {
    let mut z = salt
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(((row as u64) << 32) ^ col as u64);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

const SALT_A: u64 = 1;
const SALT_B: u64 = 2;

/// Columns `cols` of matrix `salt` (n rows, column-major), padded with zero columns to `w`.
fn columns(salt: u64, n: usize, cols: std::ops::Range<usize>, w: usize) -> Vec<f64> {
    let mut m = vec![0.0; n * w];
    for (jl, j) in cols.enumerate() {
        for i in 0..n {
            m[jl * n + i] = entry(salt, i, j);
        }
    }
    m
}

/// `c += a × b` for column-major `a` (n × n, possibly with extra trailing columns) and
/// `b`, `c` (n × cols): each column of c is a sum of columns of a, k ascending.
fn multiply(n: usize, a: &[f64], b: &[f64], c: &mut [f64], cols: usize) {
    for j in 0..cols {
        let cj = &mut c[j * n..(j + 1) * n];
        for k in 0..n {
            let bkj = b[j * n + k];
            let ak = &a[k * n..(k + 1) * n];
            for (ci, &aik) in cj.iter_mut().zip(ak) {
                *ci += aik * bkj;
            }
        }
    }
}

fn arg(i: usize, default: usize) -> usize {
    match std::env::args().nth(i) {
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("usage: matmul [n] [reps]: bad number {s:?}");
            std::process::exit(2)
        }),
        None => default,
    }
}

fn main() {
    let n = arg(1, 512).max(1);
    let reps = arg(2, 3).max(1);
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let (rank, p) = (world.rank() as usize, world.size() as usize);
    let root = world.process_at_rank(0);

    // This rank's columns [lo, hi) of A, B and C, in blocks of w.
    let w = n.div_ceil(p);
    let lo = (rank * w).min(n);
    let hi = ((rank + 1) * w).min(n);
    let a_mine = columns(SALT_A, n, lo..hi, w);
    let b_mine = columns(SALT_B, n, lo..hi, w);
    let mut a_full = vec![0.0; n * w * p];
    let mut c_mine = vec![0.0; n * w];

    // Per repetition: [whole parallel phase, its Allgather], maxima over the ranks.
    let (mut parallel, mut comm) = (0.0, 0.0);
    // Repetition 0 is an untimed warm-up (first touch of the buffers, connections).
    for rep in 0..=reps {
        c_mine.fill(0.0);
        world.barrier();
        let start = time();
        world.all_gather_into(&a_mine[..], &mut a_full[..]);
        let gathered = time();
        multiply(n, &a_full, &b_mine, &mut c_mine, hi - lo);
        let times = [time() - start, gathered - start];
        // The run takes as long as its slowest rank.
        let mut slowest = [0.0f64; 2];
        if rank == 0 {
            root.reduce_into_root(&times[..], &mut slowest[..], SystemOperation::max());
        } else {
            root.reduce_into(&times[..], SystemOperation::max());
        }
        if rep > 0 {
            parallel += slowest[0];
            comm += slowest[1];
        }
    }
    parallel /= reps as f64;
    comm /= reps as f64;

    // Collect C on rank 0; rank 0 runs the sequential code and compares.
    let mut verdict = 0u8;
    if rank == 0 {
        let mut c_par = vec![0.0; n * w * p];
        root.gather_into_root(&c_mine[..], &mut c_par[..]);
        let a = columns(SALT_A, n, 0..n, n);
        let b = columns(SALT_B, n, 0..n, n);
        let mut c_seq = vec![0.0; n * n];
        multiply(n, &a, &b, &mut c_seq, n); // warm-up, as above
        let start = time();
        for _ in 0..reps {
            c_seq.fill(0.0);
            multiply(n, &a, &b, &mut c_seq, n);
        }
        let sequential = (time() - start) / reps as f64;
        // Column j of C is at j * n in both layouts (blocks are w whole columns).
        let err = c_seq
            .iter()
            .zip(&c_par[..n * n])
            .map(|(s, q)| (s - q).abs())
            .fold(0.0f64, f64::max);
        let ok = err <= TOLERANCE;
        verdict = u8::from(!ok);
        println!(
            "matmul: n={n}, p={p}, time {parallel:.6} s, speed-up over 1 rank {:.2} \
             (Allgather {comm:.6} s; sequential {sequential:.6} s on rank 0; mean of {reps} \
             runs; max abs error {err:.3e}){}",
            sequential / parallel,
            if ok { "" } else { " MISMATCH" }
        );
    } else {
        root.gather_into(&c_mine[..]);
    }
    root.broadcast_into(&mut verdict);
    if verdict != 0 {
        if rank == 0 {
            eprintln!("matmul: MISMATCH: error above {TOLERANCE:e}");
        }
        std::process::exit(1);
    }
}
