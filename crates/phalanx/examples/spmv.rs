//! Iterated sparse matrix–vector product (seed 000 §5, the PolyFEM solver kernel).
//!
//! `y = A·x`, then `x ← y / ‖y‖`, `iterations` times (default 100) on a vector of length
//! n (default 4400, the paper's 110000 reduced 25×) with a sparse A of density ≈ 0.02 %
//! (default; `round(density × n²)` nonzeros). The sparsity is deterministic random and
//! symmetric with positive values, like an FEM stiffness matrix: a nonzero symmetric
//! nonnegative matrix is never nilpotent, so with a positive start vector `A^k x` never
//! vanishes and the normalization is always defined.
//!
//! Rows are block-distributed (`w = ceil(n / p)` rows per rank, the last ranks fewer,
//! padded to w for the collective). Each iteration a rank multiplies its rows by the
//! whole x, then one `all_gather_into` reassembles y everywhere, and every rank
//! normalizes the whole y itself (the same summation order as the sequential code, so
//! the results agree to the last bit). The timed loop is the slowest rank's.
//!
//! Rank 0 then runs the sequential code (timed; it is also the 1-rank time for the
//! speed-up, measured on the same machine in the same job while the other ranks wait)
//! and compares the final x; a relative error above 1e-12 is a mismatch and every rank
//! exits with status 1.
//!
//! Usage: `phalanx run -n P spmv [n (4400)] [density % (0.02)] [iterations (100)]`.
use phalanx::collective::SystemOperation;
use phalanx::environment::time;
use phalanx::traits::*;

/// Largest tolerated max |x_parallel - x_sequential| / max |x_sequential|.
const TOLERANCE: f64 = 1e-12;

/// splitmix64: a small deterministic generator, identical on every rank.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Rows [lo, hi) of A in compressed sparse row form.
struct Csr {
    /// Row r's entries are `start[r - lo]..start[r - lo + 1]`.
    start: Vec<usize>,
    col: Vec<usize>,
    val: Vec<f64>,
}

/// The nonzeros of A, (row, col, value), sorted by row then column: symmetric pairs
/// (i, j), (j, i) with i ≠ j, values in [0.5, 1.5). Duplicates are kept (they add up).
fn entries(n: usize, nnz: usize) -> Vec<(usize, usize, f64)> {
    let mut rng = Rng(0x5eed_0000_0000_0042);
    let mut e = Vec::with_capacity(nnz + 1);
    if n < 2 {
        return e;
    }
    while e.len() < nnz {
        let (i, j) = (rng.below(n), rng.below(n));
        if i == j {
            continue;
        }
        let v = 0.5 + rng.unit();
        e.push((i, j, v));
        e.push((j, i, v));
    }
    e.sort_by_key(|&(i, j, _)| (i, j));
    e
}

fn csr(entries: &[(usize, usize, f64)], lo: usize, hi: usize) -> Csr {
    let mut m = Csr {
        start: vec![0],
        col: Vec::new(),
        val: Vec::new(),
    };
    let mut it = entries.iter().filter(|e| e.0 >= lo && e.0 < hi).peekable();
    for r in lo..hi {
        while let Some(&(_, j, v)) = it.next_if(|e| e.0 == r) {
            m.col.push(j);
            m.val.push(v);
        }
        m.start.push(m.col.len());
    }
    m
}

/// `y[r] = Σ A[lo + r][j] x[j]` for the rows of `a`.
fn multiply(a: &Csr, x: &[f64], y: &mut [f64]) {
    for (r, yr) in y.iter_mut().enumerate().take(a.start.len() - 1) {
        let mut s = 0.0;
        for k in a.start[r]..a.start[r + 1] {
            s += a.val[k] * x[a.col[k]];
        }
        *yr = s;
    }
}

/// `x ← y / ‖y‖` (x and y of length n).
fn normalize(y: &[f64], x: &mut [f64]) {
    let norm = y.iter().map(|v| v * v).sum::<f64>().sqrt();
    for (xi, yi) in x.iter_mut().zip(y) {
        *xi = yi / norm;
    }
}

fn start_vector(n: usize) -> Vec<f64> {
    (0..n).map(|i| 1.0 + (i % 7) as f64 / 7.0).collect()
}

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    match std::env::args().nth(i) {
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("usage: spmv [n] [density %] [iterations]: bad argument {s:?}");
            std::process::exit(2)
        }),
        None => default,
    }
}

fn main() {
    let n: usize = arg(1, 4400);
    if n < 2 {
        eprintln!("spmv: n must be at least 2 (a 1×1 matrix has no off-diagonal entries)");
        std::process::exit(2);
    }
    let density: f64 = arg(2, 0.02);
    let iterations: usize = arg(3, 100);
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let (rank, p) = (world.rank() as usize, world.size() as usize);
    let root = world.process_at_rank(0);

    // At least one symmetric pair, so that y never vanishes.
    let target = ((density / 100.0 * (n * n) as f64).round() as usize).max(2);
    let all = entries(n, target);
    let w = n.div_ceil(p);
    let lo = (rank * w).min(n);
    let hi = ((rank + 1) * w).min(n);
    let a = csr(&all, lo, hi);

    let mut x = start_vector(n);
    let mut y_mine = vec![0.0; w];
    let mut y = vec![0.0; w * p];
    world.barrier();
    let start = time();
    for _ in 0..iterations {
        multiply(&a, &x, &mut y_mine);
        world.all_gather_into(&y_mine[..], &mut y[..]);
        normalize(&y[..n], &mut x);
    }
    let elapsed = time() - start;

    let mut verdict = 0u8;
    if rank == 0 {
        let mut parallel = 0.0f64;
        root.reduce_into_root(&elapsed, &mut parallel, SystemOperation::max());
        // The sequential code: all rows, no communication.
        let whole = csr(&all, 0, n);
        let mut xs = start_vector(n);
        let mut ys = vec![0.0; n];
        let start = time();
        for _ in 0..iterations {
            multiply(&whole, &xs, &mut ys);
            normalize(&ys, &mut xs);
        }
        let sequential = time() - start;
        let scale = xs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let err = xs
            .iter()
            .zip(&x)
            .map(|(s, q)| (s - q).abs())
            .fold(0.0f64, f64::max)
            / scale.max(f64::MIN_POSITIVE);
        let ok = err <= TOLERANCE && xs.iter().chain(&x).all(|v| v.is_finite());
        verdict = u8::from(!ok);
        let per_iter = parallel / iterations.max(1) as f64;
        println!(
            "spmv: n={n}, nnz={} (density {:.4} %), p={p}, {iterations} iterations, \
             time {parallel:.6} s ({:.1} us/iteration), speed-up over 1 rank {:.2} \
             (sequential {sequential:.6} s on rank 0; max relative error {err:.3e}){}",
            all.len(),
            all.len() as f64 * 100.0 / (n * n) as f64,
            per_iter * 1e6,
            sequential / parallel,
            if ok { "" } else { " MISMATCH" }
        );
    } else {
        root.reduce_into(&elapsed, SystemOperation::max());
    }
    root.broadcast_into(&mut verdict);
    if verdict != 0 {
        if rank == 0 {
            eprintln!("spmv: MISMATCH: relative error above {TOLERANCE:e} or not finite");
        }
        std::process::exit(1);
    }
}
