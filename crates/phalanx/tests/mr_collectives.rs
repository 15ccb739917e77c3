//! Every collective over real processes: p ∈ {1, 2, 3, 4, 5, 8}, every root, sizes from 0
//! bytes to 1 MiB, on the world, a split and a duplicate; again under injected loss,
//! duplication and reordering; the collectives of intercommunicators; and mismatched calls
//! end in an error naming the ranks.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(150);

fn collectives(n: usize, max: usize, faults: Option<&str>) {
    collectives_env(n, max, faults, &[]);
}

fn collectives_env(n: usize, max: usize, faults: Option<&str>, extra: &[(&str, &str)]) {
    let ex = example("collectives").display().to_string();
    let np = n.to_string();
    let maxs = max.to_string();
    let mut env: Vec<(&str, &str)> = faults
        .map(|f| vec![("PHALANX_FAULTS", f)])
        .unwrap_or_default();
    env.extend_from_slice(extra);
    let r = run(&["-n", &np, &ex, &maxs], &env, LIMIT);
    assert!(r.ok(), "p={n} faults={faults:?}\n{}", r.dump());
    assert!(
        !r.stderr.contains("warning"),
        "p={n} faults={faults:?}: finalize did not drain\n{}",
        r.dump()
    );
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
fn mr_collectives_point_to_point_over_udp() {
    // Collectives ride URTP either way; this keeps user point-to-point on UDP too.
    collectives_env(5, 1 << 18, None, &[("PHALANX_TRANSPORT", "udp")]);
    // Eight members with multicast: all-reduces of 64–128 KiB are a binomial reduce and
    // a multicast broadcast by default.
    collectives_env(8, 1 << 17, None, &[("PHALANX_TRANSPORT", "udp")]);
}

/// Point-to-point algorithms forced on shared memory (the board is the default there).
const SCHEDULES: &[(&str, &str)] = &[
    ("PHALANX_TRANSPORT", "shm"),
    ("PHALANX_COLL_BCAST", "binomial"),
    ("PHALANX_COLL_ALLGATHER", "ring"),
    ("PHALANX_COLL_GATHER", "binomial"),
    ("PHALANX_COLL_SCATTER", "binomial"),
    ("PHALANX_COLL_BARRIER", "dissemination"),
    ("PHALANX_COLL_ALLREDUCE", "rd"),
    ("PHALANX_COLL_REDUCE", "binomial"),
    ("PHALANX_COLL_ALLTOALL", "pairwise"),
    ("PHALANX_COLL_SCAN", "linear"),
    ("PHALANX_COLL_GATHERV", "linear"),
    ("PHALANX_COLL_SCATTERV", "linear"),
    ("PHALANX_COLL_ALLGATHERV", "linear"),
    ("PHALANX_COLL_ALLTOALLV", "linear"),
    ("PHALANX_COLL_REDUCE_SCATTER_BLOCK", "linear"),
    ("PHALANX_STATS", "1"),
];

fn board_calls(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter_map(|l| l.split("board_collectives=").nth(1))
        .map(|v| {
            v.split_whitespace()
                .next()
                .unwrap_or("0")
                .parse()
                .unwrap_or(0)
        })
        .collect()
}

#[test]
fn mr_collectives_on_the_shared_memory_board() {
    // Default on one host: blocking collectives run on the board (every rank counts them),
    // calls larger than a slot stream through it in steps — with a 4 KiB slot most do
    // (the varcount collectives' blocks too, whatever their lengths).
    for (n, slot) in [(4, "256k"), (3, "4k"), (5, "4k")] {
        let ex = example("collectives").display().to_string();
        let np = n.to_string();
        let env = [
            ("PHALANX_TRANSPORT", "shm"),
            ("PHALANX_STATS", "1"),
            ("PHALANX_SHM_BOARD", slot),
        ];
        let r = run(&["-n", &np, &ex, "262144"], &env, LIMIT);
        assert!(r.ok(), "p={n} slot={slot}\n{}", r.dump());
        assert_eq!(r.stdout.matches("all collectives ok").count(), n);
        let calls = board_calls(&r.stderr);
        assert_eq!(calls.len(), n, "{}", r.dump());
        assert!(calls.iter().all(|&c| c > 50), "{calls:?}\n{}", r.dump());
    }
}

#[test]
fn mr_collectives_on_the_board_when_every_wait_sleeps() {
    // No spinning or yielding: every wait goes to sleep at once, so data often arrives
    // during the last check before sleeping (it must be taken exactly once). Forced
    // `shm`/`hier` choices also reach calls that cannot use them (nonblocking ones, one
    // host): they must mean the default there.
    for n in [4, 8] {
        let ex = example("collectives").display().to_string();
        let np = n.to_string();
        let env = [
            ("PHALANX_SPIN_US", "0"),
            ("PHALANX_YIELD_US", "0"),
            ("PHALANX_COLL_BARRIER", "shm"),
            ("PHALANX_COLL_ALLREDUCE", "shm"),
            ("PHALANX_COLL_BCAST", "hier"),
        ];
        let r = run(&["-n", &np, &ex, "65536"], &env, LIMIT);
        assert!(r.ok(), "p={n}\n{}", r.dump());
        assert_eq!(r.stdout.matches("all collectives ok").count(), n);
    }
}

#[test]
fn mr_collectives_schedules_over_shared_memory() {
    let ex = example("collectives").display().to_string();
    let r = run(&["-n", "4", &ex, "262144"], SCHEDULES, LIMIT);
    assert!(r.ok(), "{}", r.dump());
    assert_eq!(r.stdout.matches("all collectives ok").count(), 4);
    assert_eq!(board_calls(&r.stderr), vec![0; 4], "{}", r.dump());
}

/// A network declared reliable: collectives take the careful links, one multi-target
/// frame per fragment to several readers (seed 003), and nothing goes through URTP.
#[test]
fn mr_collectives_on_careful_links_use_multi_target_frames() {
    let ex = example("collectives").display().to_string();
    let env = [
        ("PHALANX_TRANSPORT", "udp"),
        ("PHALANX_RELIABLE_NET", "1"),
        ("PHALANX_STATS", "1"),
    ];
    let r = run(&["-n", "4", &ex, "65536"], &env, LIMIT);
    assert!(r.ok(), "{}", r.dump());
    assert_eq!(
        r.stdout.matches("all collectives ok").count(),
        4,
        "{}",
        r.dump()
    );
    let sum = |key: &str| r.stat(key);
    assert!(sum("careful_multi=") > 0, "{}", r.dump());
    assert_eq!(sum("urtp_data="), 0, "{}", r.dump());
    assert_eq!(sum("retransmits="), 0, "{}", r.dump());
}

#[test]
fn mr_collectives_p8() {
    collectives(8, 1 << 17, None);
}

#[test]
fn mr_collectives_under_faults() {
    for (n, seed) in [(1, 10), (2, 16), (3, 11), (4, 12), (5, 13), (8, 14)] {
        let f = format!("loss=0.08,dup=0.02,reorder=0.05,seed={seed}");
        collectives(n, 1 << 17, Some(&f));
    }
    // The full size range (to 1 MiB) under 5 % loss.
    collectives(4, 1 << 20, Some("loss=0.05,dup=0.01,reorder=0.02,seed=15"));
}

/// The multicast-shaped algorithms of seed 000 (fanned out where multicast is off).
/// (Ranks on UDP, so the multicasts are real IP multicasts on loopback.)
const MCAST_ALGOS: [(&str, &str); 7] = [
    ("PHALANX_TRANSPORT", "udp"),
    ("PHALANX_COLL_BCAST", "mcast"),
    ("PHALANX_COLL_ALLGATHER", "mcast2"),
    ("PHALANX_COLL_GATHER", "linear"),
    ("PHALANX_COLL_SCATTER", "mcast"),
    ("PHALANX_COLL_BARRIER", "mcast"),
    ("PHALANX_COLL_ALLREDUCE", "reduce_bcast"),
];

#[test]
fn mr_collectives_multicast_algorithms() {
    for n in [2, 3, 5, 8] {
        collectives_env(n, 1 << 17, None, &MCAST_ALGOS);
    }
    collectives_env(
        4,
        1 << 16,
        None,
        &[
            ("PHALANX_TRANSPORT", "udp"),
            ("PHALANX_COLL_ALLGATHER", "mcast1"),
        ],
    );
    // The same algorithms fanned out over shared-memory rings.
    collectives_env(4, 1 << 16, None, &MCAST_ALGOS[1..]);
    collectives_env(
        4,
        1 << 16,
        None,
        &[
            ("PHALANX_COLL_ALLGATHER", "mcast2"),
            ("PHALANX_COLL_ALLGATHER_K", "1"),
        ],
    );
}

#[test]
fn mr_collectives_multicast_algorithms_under_faults() {
    collectives_env(
        4,
        1 << 16,
        Some("loss=0.1,dup=0.02,reorder=0.05,seed=21"),
        &MCAST_ALGOS,
    );
    // The default algorithms over UDP: from 64 KiB the all-reduce is reduce-scatter +
    // multicast all-gather, here with members beyond the power of two (p = 3, 5) that
    // fold in first and take the multicasts.
    for (n, seed) in [(3, 22), (5, 23)] {
        let f = format!("loss=0.05,dup=0.02,reorder=0.05,seed={seed}");
        collectives_env(n, 1 << 18, Some(&f), &[("PHALANX_TRANSPORT", "udp")]);
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

fn crash_mode(mode: &str, n: &str) -> Run {
    let r = run(
        &["-n", n, &example("crash").display().to_string(), mode],
        &[],
        LIMIT,
    );
    for p in r.pids() {
        assert!(gone(p), "rank process {p} survived the job");
    }
    r
}

#[test]
fn mr_collective_mismatch_of_early_data_is_detected() {
    let r = crash_mode("mismatch_reduce", "3");
    assert!(!r.ok(), "{}", r.dump());
    assert!(r.stderr.contains("collective mismatch"), "{}", r.dump());
    assert!(r.stderr.contains("reduce("), "{}", r.dump());
}

#[test]
fn mr_collective_algorithm_mismatch_is_detected() {
    let r = crash_mode("mismatch_alg", "4");
    assert!(!r.ok(), "{}", r.dump());
    assert!(r.stderr.contains("collective mismatch"), "{}", r.dump());
    assert!(r.stderr.contains("algorithm #"), "{}", r.dump());
}

#[test]
fn mr_panic_with_request_in_flight_ends_the_job() {
    let r = crash_mode("panic_pending", "3");
    assert!(!r.ok(), "{}", r.dump());
    assert!(
        r.stderr.contains("rank 1 exited with code 101"),
        "{}",
        r.dump()
    );
}

#[test]
fn mr_collective_mismatch_with_no_sender_is_detected() {
    // Each of two ranks names the other as root: nobody sends data, the signature
    // probes still find the mismatch.
    let r = crash_mode("mismatch_swap", "2");
    assert!(!r.ok(), "{}", r.dump());
    assert!(r.stderr.contains("collective mismatch"), "{}", r.dump());
    assert!(r.stderr.contains("broadcast(root 1"), "{}", r.dump());
    assert!(r.stderr.contains("broadcast(root 0"), "{}", r.dump());
}

/// `PHALANX_LOG=debug` shows each collective's algorithm and the drops and
/// retransmissions under loss; a bad level or algorithm name is an error naming the
/// variable.
#[test]
fn mr_diagnostics_and_bad_settings() {
    let ex = example("collectives").display().to_string();
    let r = run(
        &["-n", "3", &ex, "256"],
        &[
            ("PHALANX_LOG", "debug"),
            ("PHALANX_TRANSPORT", "udp"),
            ("PHALANX_COLL_BCAST", "binomial"),
            ("PHALANX_FAULTS", "loss=0.1,seed=5"),
            ("PHALANX_STATS", "1"),
        ],
        LIMIT,
    );
    assert!(r.ok(), "{}", r.dump());
    // Losses were repaired: by go-back-n (its debug line names them) or by URTP's resends
    // (which of the two sees a loss depends on the timing of the run).
    let resent: u64 = r
        .stderr
        .lines()
        .filter_map(|l| l.split("urtp_resent=").nth(1))
        .filter_map(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    assert!(
        r.stderr
            .contains("collective rank=0 collective=\"broadcast_into\" algorithm=\"binomial\""),
        "{}",
        r.dump()
    );
    assert!(
        r.stderr.contains("retransmitted datagrams") || resent > 0,
        "{}",
        r.dump()
    );
    for (var, value) in [("PHALANX_LOG", "loud"), ("PHALANX_COLL_BCAST", "ring")] {
        let r = run(&["-n", "2", &ex, "8"], &[(var, value)], LIMIT);
        assert!(!r.ok(), "{var}={value}\n{}", r.dump());
        assert!(r.stderr.contains(var), "{var}={value}\n{}", r.dump());
    }
}

#[test]
fn mr_collectives_on_intercommunicators() {
    // Both groups (the world's halves) check every intercommunicator collective, in both
    // directions and with every root, over shared memory, UDP and lossy UDP.
    let ex = example("intercomm").display().to_string();
    let cases: [(usize, &[(&str, &str)]); 6] = [
        (2, &[]),
        (3, &[]),
        (5, &[("PHALANX_TRANSPORT", "shm")]),
        (4, &[("PHALANX_TRANSPORT", "udp")]),
        (5, &[("PHALANX_TRANSPORT", "udp")]),
        (
            5,
            &[
                ("PHALANX_TRANSPORT", "udp"),
                ("PHALANX_FAULTS", "loss=0.1,dup=0.05,reorder=0.1,seed=11"),
            ],
        ),
    ];
    for (n, env) in cases {
        let np = n.to_string();
        let r = run(&["-n", &np, &ex], env, LIMIT);
        assert!(r.ok(), "p={n} {env:?}\n{}", r.dump());
        assert_eq!(r.stdout.matches("intercomm ok").count(), n, "{}", r.dump());
    }
}
