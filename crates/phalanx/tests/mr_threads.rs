//! `Threading::Multiple` from Rust over real processes (example `threads`: four threads
//! per rank, each on its own duplicate of the world, ping-pong, exchange and run
//! collectives at once, every message checked): 2 and 4 ranks on shared memory (also
//! with the progress thread), over UDP and under injected loss, duplication and
//! reordering.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn threads(n: usize, env: &[(&str, &str)]) {
    let ex = example("threads").display().to_string();
    let np = n.to_string();
    let r = run(&["-n", &np, &ex], env, LIMIT);
    assert!(r.ok(), "p={n} {env:?}\n{}", r.dump());
    for rank in 0..n {
        let line = format!("threads ok rank {rank}");
        assert!(
            r.stdout.contains(&line),
            "p={n} {env:?}: no {line:?}\n{}",
            r.dump()
        );
    }
}

#[test]
fn mr_threads_shared_memory() {
    threads(2, &[]);
    threads(4, &[]);
    // With phalanx's progress thread beside the program's four.
    threads(2, &[("PHALANX_PROGRESS_THREAD", "1")]);
}

#[test]
fn mr_threads_over_udp() {
    threads(2, &[("PHALANX_TRANSPORT", "udp")]);
    threads(4, &[("PHALANX_TRANSPORT", "udp")]);
}

#[test]
fn mr_threads_under_faults() {
    for seed in [1, 2] {
        let f = format!("loss=0.1,dup=0.02,reorder=0.05,seed={seed}");
        threads(2, &[("PHALANX_FAULTS", &f)]);
    }
}

/// At `Threading::Funneled` a communicator moved to another thread is refused there: the
/// job ends with an error naming the rule, not undefined behaviour.
#[test]
fn mr_threads_funneled_refuses_another_thread() {
    let ex = example("threads").display().to_string();
    let r = run(&["-n", "2", &ex, "funneled"], &[], LIMIT);
    assert!(!r.ok(), "{}", r.dump());
    assert!(!r.stdout.contains("not reached"), "{}", r.dump());
    assert!(
        r.stderr
            .contains("called from a thread other than the one that initialized phalanx"),
        "{}",
        r.dump()
    );
}
