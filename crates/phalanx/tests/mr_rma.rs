//! One-sided communication over real processes (example `rma`, which checks every
//! operation under every synchronization mode and window flavor): 1 to 5 ranks on
//! shared memory, over UDP, with data past a control message and strided target types
//! whose description leads the data, and under injected loss, duplication and
//! reordering.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn rma(n: usize, elems: usize, env: &[(&str, &str)]) {
    let ex = example("rma").display().to_string();
    let np = n.to_string();
    let e = elems.to_string();
    let r = run(&["-n", &np, &ex, &e], env, LIMIT);
    assert!(r.ok(), "p={n} elems={elems} {env:?}\n{}", r.dump());
    assert_eq!(
        r.stdout.matches("rma ok").count(),
        n,
        "p={n} {env:?}\n{}",
        r.dump()
    );
}

#[test]
fn mr_rma_shared_memory_p1_to_p5() {
    for n in 1..=5 {
        rma(n, 3000, &[]);
    }
    // Inline data only; and strided target types too large for a control message.
    rma(3, 4, &[]);
    rma(2, 40_000, &[]);
}

#[test]
fn mr_rma_over_udp() {
    for n in [2, 4] {
        rma(n, 3000, &[("PHALANX_TRANSPORT", "udp")]);
    }
    rma(3, 40_000, &[("PHALANX_TRANSPORT", "udp")]);
}

#[test]
fn mr_rma_under_faults() {
    for (n, seed) in [(3, "3"), (4, "11")] {
        let f = format!("loss=0.1,dup=0.02,reorder=0.05,seed={seed}");
        rma(n, 3000, &[("PHALANX_FAULTS", &f)]);
    }
}
