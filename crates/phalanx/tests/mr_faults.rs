//! The stress example under injected loss, duplication and reordering: 20 fault seeds,
//! every checksum right, no Finalize warning, and the counters show the faults were real.

mod common;
use common::*;
use std::time::Duration;

fn stress_with_faults(seeds: std::ops::Range<u64>) {
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
            &[("PHALANX_FAULTS", &faults), ("PHALANX_STATS", "1")],
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
        let sum = |key: &str| -> u64 {
            r.stderr
                .lines()
                .filter(|l| l.starts_with("phalanx stats"))
                .flat_map(|l| l.split_whitespace())
                .filter_map(|w| w.strip_prefix(key))
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        };
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
