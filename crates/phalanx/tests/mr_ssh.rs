//! Real programs launched over real ssh from a hostfile: four test hosts (network
//! namespaces, each with its own sshd, see [`SshNet`]), two ranks each — shared memory
//! inside a host, UDP and multicast between hosts, exactly as under a local launch; and
//! a job of this machine's ranks together with ssh hosts.
//!
//! Needs root, iproute2 and `openssh-server`. With `PHALANX_TEST_SSH=1` (CI sets it) a
//! missing sshd is a failure; without it these tests say they were skipped and why.

mod common;
use common::*;
use phalanx_netns::SshNet;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(150);

/// Sum over ranks of counter `key` in PHALANX_STATS output.
fn stat_sum(stderr: &str, key: &str) -> u64 {
    stderr
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(key))
        .filter_map(|v| v.parse::<u64>().ok())
        .sum()
}

#[test]
fn mr_ssh_stress_and_collectives_on_four_hosts() {
    let Some(net) = SshNet::for_test(4) else {
        return;
    };
    let hf = std::env::temp_dir().join(format!("phalanx-mr-ssh-{}", std::process::id()));
    std::fs::write(&hf, net.hostfile(2)).expect("write hostfile");
    let hosts = hf.display().to_string();
    let cmd = net.launcher_cmd();
    let stress = example("stress").display().to_string();
    let collectives = example("collectives").display().to_string();
    // PHALANX_STATS reaches the remote ranks without -x (PHALANX_* is forwarded).
    let env = [("PHALANX_STATS", "1")];
    let base = ["--hostfile", &hosts, "--launcher-cmd", &cmd];
    let r = run(
        &[&base[..], &[&stress, "2", "60", "3"]].concat(),
        &env,
        LIMIT,
    );
    assert!(r.ok(), "{}", r.dump());
    assert_eq!(
        r.stdout.matches("all checksums ok").count(),
        8,
        "{}",
        r.dump()
    );
    assert!(
        stat_sum(&r.stderr, "shm_sent=") > 0,
        "no shared memory\n{}",
        r.dump()
    );
    assert!(stat_sum(&r.stderr, "received=") > 0, "no UDP\n{}", r.dump());
    let r = run(&[&base[..], &[&collectives, "65536"]].concat(), &env, LIMIT);
    assert!(r.ok(), "{}", r.dump());
    assert_eq!(
        r.stdout.matches("all collectives ok").count(),
        8,
        "{}",
        r.dump()
    );
    // This machine and ssh hosts in one job: the local ranks bind an address the
    // remote ones reach (not loopback).
    std::fs::write(&hf, format!("localhost slots=2\n{}", net.hostfile(1))).expect("hostfile");
    let r = run(
        &[&base[..], &[&stress, "2", "60", "3"]].concat(),
        &env,
        LIMIT,
    );
    assert!(r.ok(), "{}", r.dump());
    assert_eq!(
        r.stdout.matches("all checksums ok").count(),
        6,
        "{}",
        r.dump()
    );
    let _ = std::fs::remove_file(&hf);
    let strays = net.wait_no_strays(Duration::from_secs(20));
    assert!(strays.iter().all(Vec::is_empty), "left behind: {strays:?}");
}
