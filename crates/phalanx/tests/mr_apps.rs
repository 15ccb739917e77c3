//! The seed-000 applications over real processes, small sizes, p ∈ {1, 2, 4}: the dense
//! matrix multiply (column blocks + Allgather) and the iterated sparse mat-vec (row
//! blocks + Allgather) must reproduce their sequential results. Uneven blocks (n not a
//! multiple of p, ranks without any columns or rows) are included. Timings are printed
//! by the examples but never asserted.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// Runs `example args...` on `n` ranks and checks it reports a correct result.
fn app(name: &str, n: usize, args: &[&str]) {
    let ex = example(name).display().to_string();
    let np = n.to_string();
    let mut argv = vec!["-n", &np, &ex];
    argv.extend_from_slice(args);
    let r = run(&argv, &[], LIMIT);
    assert!(r.ok(), "{name} p={n} {args:?}\n{}", r.dump());
    let line = format!("{name}: ");
    let report: Vec<&str> = r.stdout.lines().filter(|l| l.contains(&line)).collect();
    assert_eq!(
        report.len(),
        1,
        "{name} p={n}: one report line\n{}",
        r.dump()
    );
    assert!(
        report[0].contains(&format!("p={n},")) && report[0].contains("speed-up over 1 rank"),
        "{}",
        r.dump()
    );
    assert!(!report[0].contains("MISMATCH"), "{}", r.dump());
}

#[test]
fn mr_matmul_p1_p2_p4() {
    for n in [1, 2, 4] {
        // Divisible, uneven, and fewer columns than ranks.
        app("matmul", n, &["64", "1"]);
        app("matmul", n, &["37", "1"]);
        app("matmul", n, &["3", "1"]);
    }
}

#[test]
fn mr_spmv_p1_p2_p4() {
    for n in [1, 2, 4] {
        // Short runs of the paper's shape, plus a denser uneven one.
        app("spmv", n, &["4400", "0.02", "10"]);
        app("spmv", n, &["101", "3", "25"]);
        app("spmv", n, &["3", "50", "5"]);
    }
}
