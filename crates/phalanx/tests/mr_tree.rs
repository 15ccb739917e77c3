//! Broadcast along the postal model's optimal tree (seed 002) on real processes without
//! multicast (`PHALANX_MCAST=0`, UDP): every byte right for 16 ranks and sizes up to
//! 1 MiB under injected loss, duplication and reordering — with λ forced and from the
//! cost model, with and without packet-wise pipelining; the tree runs when asked for,
//! the binomial tree stays the default (see `collective/root.rs` for why).

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(150);

fn bcast_check(n: &str, env: &[(&str, &str)]) -> Run {
    let ex = example("bcast_check").display().to_string();
    let mut all = vec![("PHALANX_TRANSPORT", "udp"), ("PHALANX_MCAST", "0")];
    all.extend_from_slice(env);
    run(&["-n", n, &ex, "1048576", "1"], &all, LIMIT)
}

fn assert_all_ok(r: &Run, n: usize, what: &str) {
    assert!(r.ok(), "{what}:\n{}", r.dump());
    assert_eq!(
        r.stdout.matches("broadcasts ok").count(),
        n,
        "{what}:\n{}",
        r.dump()
    );
}

#[test]
fn mr_tree_bcast_is_exact_under_faults() {
    let faults = "loss=0.05,dup=0.03,reorder=0.05,seed=21";
    for (lambda, pipeline) in [("3", "1"), ("3", "0"), ("1", "1"), ("15", "1")] {
        let env = [
            ("PHALANX_COLL_BCAST", "tree"),
            ("PHALANX_COLL_LAMBDA", lambda),
            ("PHALANX_COLL_PIPELINE", pipeline),
            ("PHALANX_FAULTS", faults),
        ];
        let r = bcast_check("16", &env);
        assert_all_ok(&r, 16, &format!("λ={lambda} pipeline={pipeline}"));
    }
    // λ from the cost model, odd group size.
    let env = [("PHALANX_COLL_BCAST", "tree"), ("PHALANX_FAULTS", faults)];
    assert_all_ok(&bcast_check("7", &env), 7, "model λ, 7 ranks");
}

#[test]
fn mr_tree_runs_when_asked_and_binomial_is_the_default() {
    // PHALANX_LOG=debug names each collective's algorithm.
    let debug = ("PHALANX_LOG", "debug");
    let r = bcast_check("6", &[debug, ("PHALANX_COLL_BCAST", "tree")]);
    assert_all_ok(&r, 6, "tree");
    let line = "collective=\"broadcast_into\" algorithm=";
    assert!(
        r.stderr.contains(&format!("{line}\"tree\"")),
        "{}",
        r.dump()
    );
    let r = bcast_check("6", &[debug]);
    assert_all_ok(&r, 6, "default");
    assert!(
        r.stderr.contains(&format!("{line}\"binomial\"")),
        "{}",
        r.dump()
    );
}

#[test]
fn mr_tree_lambdas_that_differ_are_a_mismatch() {
    // Ranks whose figures differ (here rank 1 is given another λ) would build other
    // trees: the tree's λ travels in the call's signature, so they get a clear error
    // naming both, not a hang.
    let ex = example("bcast_check").display().to_string();
    let script = format!(
        "if [ \"$PHALANX_RANK\" = 1 ]; then export PHALANX_COLL_LAMBDA=4; fi; exec {ex} 65536 1"
    );
    let env = [
        ("PHALANX_TRANSPORT", "udp"),
        ("PHALANX_MCAST", "0"),
        ("PHALANX_COLL_BCAST", "tree"),
        ("PHALANX_COLL_LAMBDA", "2"),
    ];
    let r = run(
        &["-n", "4", "--timeout", "60", "sh", "-c", &script],
        &env,
        LIMIT,
    );
    assert!(!r.ok(), "{}", r.dump());
    assert!(r.stderr.contains("collective mismatch"), "{}", r.dump());
    assert!(
        r.stderr.contains("λ 4") && r.stderr.contains("λ 2"),
        "{}",
        r.dump()
    );
    assert_ne!(r.code, Some(124), "it hung instead:\n{}", r.dump());
}
