//! Every collective over real processes: p ∈ {1, 2, 3, 4, 5, 8}, every root, sizes from 0
//! bytes to 1 MiB, on the world, a split and a duplicate; again under injected loss,
//! duplication and reordering; and mismatched calls end in an error naming the ranks.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(150);

fn collectives(n: usize, max: usize, faults: Option<&str>) {
    let ex = example("collectives").display().to_string();
    let np = n.to_string();
    let maxs = max.to_string();
    let env: Vec<(&str, &str)> = faults
        .map(|f| vec![("PHALANX_FAULTS", f)])
        .unwrap_or_default();
    let r = run(&["-n", &np, &ex, &maxs], &env, LIMIT);
    assert!(r.ok(), "p={n} faults={faults:?}\n{}", r.dump());
    assert_eq!(
        r.stdout.matches("all collectives ok").count(),
        n,
        "p={n}\n{}",
        r.dump()
    );
}

#[test]
fn mr_collectives_p1_p2_p3() {
    for n in [1, 2, 3] {
        collectives(n, 1 << 20, None);
    }
}

#[test]
fn mr_collectives_p4_p5() {
    for n in [4, 5] {
        collectives(n, 1 << 20, None);
    }
}

#[test]
fn mr_collectives_p8() {
    collectives(8, 1 << 17, None);
}

#[test]
fn mr_collectives_under_faults() {
    for (n, seed) in [(3, 11), (4, 12), (5, 13)] {
        let f = format!("loss=0.08,dup=0.02,reorder=0.05,seed={seed}");
        collectives(n, 1 << 17, Some(&f));
    }
}

#[test]
fn mr_collective_mismatch_names_ranks() {
    let r = run(
        &[
            "-n",
            "4",
            &example("crash").display().to_string(),
            "mismatch",
        ],
        &[],
        LIMIT,
    );
    assert!(!r.ok(), "{}", r.dump());
    assert!(r.stderr.contains("collective mismatch"), "{}", r.dump());
    assert!(r.stderr.contains("broadcast(root 1"), "{}", r.dump());
    assert!(r.stderr.contains("broadcast(root 0"), "{}", r.dump());
    for p in r.pids() {
        assert!(gone(p), "rank process {p} survived the job");
    }
}
