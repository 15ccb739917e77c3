//! The Jacobi iteration over real processes, p ∈ {1, 2, 4}, over shared memory and UDP:
//! the row-distributed iteration with halo exchange and all_reduce convergence check
//! must reproduce the sequential grid bit for bit (the example compares and exits 1 on
//! a mismatch). Even and uneven row blocks, fixed counts and a tolerance stop. Timings
//! are printed by the example but never asserted.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// Runs `jacobi args...` on `n` ranks over `transport` and checks its report.
fn jacobi(transport: &str, n: usize, args: &[&str]) {
    let ex = example("jacobi").display().to_string();
    let np = n.to_string();
    let mut argv = vec!["-n", &np, &ex];
    argv.extend_from_slice(args);
    let r = run(&argv, &[("PHALANX_TRANSPORT", transport)], LIMIT);
    assert!(r.ok(), "jacobi {transport} p={n} {args:?}\n{}", r.dump());
    let report: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.contains("jacobi: "))
        .collect();
    assert_eq!(report.len(), 1, "one report line\n{}", r.dump());
    assert!(
        report[0].contains(&format!("p={n},"))
            && report[0].contains("speed-up over 1 rank")
            && report[0].contains("bit-identical")
            && !report[0].contains("MISMATCH"),
        "{}",
        r.dump()
    );
}

fn jacobi_all(transport: &str) {
    for n in [1, 2, 4] {
        // Divisible rows, uneven rows, and a tolerance stop.
        jacobi(transport, n, &["16", "200"]);
        jacobi(transport, n, &["13", "150"]);
        jacobi(transport, n, &["8", "100000", "1e-9"]);
    }
}

#[test]
fn mr_jacobi_shm_p1_p2_p4() {
    jacobi_all("shm");
}

#[test]
fn mr_jacobi_udp_p1_p2_p4() {
    jacobi_all("udp");
}
