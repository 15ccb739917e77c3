//! The stress example under injected loss, duplication and reordering: 20 fault seeds,
//! every checksum right, no Finalize warning, and the counters show the faults were real
//! — over UDP, and over shared-memory rings (the fault injector wraps either medium
//! under the protocols), where careful links also report a loss naming the link.

mod common;
use common::*;
use std::time::Duration;

fn stress_with_faults(seeds: std::ops::Range<u64>) {
    stress_with_faults_on(seeds, &[]);
}

fn stress_with_faults_on(seeds: std::ops::Range<u64>, env: &[(&str, &str)]) {
    for seed in seeds {
        let faults = format!("loss=0.1,dup=0.02,reorder=0.05,seed={seed}");
        let r = run(
            &[
                "-n",
                "4",
                &example("stress").display().to_string(),
                "2",
                "80",
                &seed.to_string(),
            ],
            &[
                &[("PHALANX_FAULTS", faults.as_str()), ("PHALANX_STATS", "1")],
                env,
            ]
            .concat(),
            Duration::from_secs(100),
        );
        assert!(r.ok(), "fault seed {seed}:\n{}", r.dump());
        assert_eq!(
            r.stdout.matches("all checksums ok").count(),
            4,
            "fault seed {seed}:\n{}",
            r.dump()
        );
        assert!(
            !r.stderr.contains("warning"),
            "fault seed {seed}:\n{}",
            r.dump()
        );
        let sum = |key: &str| r.stat(key);
        assert!(
            sum("faults_dropped=") > 0,
            "seed {seed}: no loss injected\n{}",
            r.dump()
        );
        assert!(
            sum("retransmits=") > 0,
            "seed {seed}: no retransmission\n{}",
            r.dump()
        );
    }
}

#[test]
fn mr_stress_faults_seeds_0_5() {
    stress_with_faults(0..5);
}
#[test]
fn mr_stress_faults_seeds_5_10() {
    stress_with_faults(5..10);
}
#[test]
fn mr_stress_faults_seeds_10_15() {
    stress_with_faults(10..15);
}
#[test]
fn mr_stress_faults_seeds_15_20() {
    stress_with_faults(15..20);
}

/// Go-back-n over shared-memory rings with faults injected under it: every datagram to
/// a rank of this host goes through its ring, and the protocol recovers.
#[test]
fn mr_stress_faults_on_shared_memory_rings() {
    stress_with_faults_on(20..23, &[("PHALANX_TRANSPORT", "shm")]);
    let r = run(
        &[
            "-n",
            "4",
            &example("stress").display().to_string(),
            "1",
            "40",
            "1",
        ],
        &[
            ("PHALANX_TRANSPORT", "shm"),
            ("PHALANX_FAULTS", "loss=0.1,seed=1"),
            ("PHALANX_STATS", "1"),
        ],
        Duration::from_secs(100),
    );
    assert!(r.ok(), "{}", r.dump());
    assert!(r.stat("shm_sent=") > 0, "no ring traffic\n{}", r.dump());
}

/// The careful protocol over faulty rings (a network declared reliable that is not):
/// the loss ends the job with an error naming the link, in bounded time.
#[test]
fn mr_careful_on_faulty_shared_memory_names_the_link() {
    let r = run(
        &[
            "-n",
            "4",
            &example("stress").display().to_string(),
            "2",
            "60",
            "4",
        ],
        &[
            ("PHALANX_TRANSPORT", "shm"),
            ("PHALANX_RELIABLE_NET", "1"),
            ("PHALANX_FAULTS", "loss=0.02,seed=3"),
            ("PHALANX_CAREFUL_STALL", "2s"),
        ],
        Duration::from_secs(100),
    );
    assert!(!r.ok(), "{}", r.dump());
    assert!(
        r.stderr.contains("careful link") || r.stderr.contains("suspected loss"),
        "{}",
        r.dump()
    );
}
