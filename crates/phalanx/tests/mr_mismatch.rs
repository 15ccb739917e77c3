//! Mismatched collectives end in an error naming the ranks, never in wrong data and
//! never in a hang (issue 13 item 3): a rank that skips a barrier and finalizes, a
//! broadcast against a reduction, different roots, all-reduces of different types —
//! over shared memory and UDP, with 2, 4 and 8 ranks. The `mismatch` example checks
//! every result it returns and prints `WRONG DATA` otherwise.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn check(case: &str) {
    let ex = example("mismatch").display().to_string();
    for transport in ["shm", "udp"] {
        for n in ["2", "4", "8"] {
            let what = format!("{case} over {transport}, {n} ranks");
            let r = run(
                &["-n", n, "--timeout", "30", &ex, case],
                &[("PHALANX_TRANSPORT", transport)],
                LIMIT,
            );
            assert!(!r.ok(), "{what}: the job succeeded\n{}", r.dump());
            assert_ne!(r.code, Some(124), "{what}: it hung\n{}", r.dump());
            assert!(!r.stdout.contains("WRONG DATA"), "{what}\n{}", r.dump());
            assert!(
                r.stderr.contains("collective mismatch") && r.stderr.contains("rank 1"),
                "{what}\n{}",
                r.dump()
            );
        }
    }
}

#[test]
fn mr_mismatch_skipped_barrier_then_finalize() {
    check("skip_barrier");
}

#[test]
fn mr_mismatch_bcast_against_reduce() {
    check("bcast_reduce");
}

#[test]
fn mr_mismatch_different_roots() {
    check("roots");
}

#[test]
fn mr_mismatch_allreduce_types() {
    check("allreduce_types");
}
