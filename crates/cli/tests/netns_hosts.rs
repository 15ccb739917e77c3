//! `phalanx run --hostfile` with `netns:NAME` hosts: ranks in network namespaces on a
//! bridge reach the launcher over the bridge. Needs root and iproute2; without them these
//! tests fail with the reason (never pass silently).

mod common;

use std::net::Ipv4Addr;
use std::path::PathBuf;

use common::*;
use phalanx_netns::TestNet;

/// A hostfile listing every namespace of `net` with one slot (removed on drop).
struct Hostfile(PathBuf);

impl Hostfile {
    fn new(net: &TestNet, extra: &str) -> Hostfile {
        let path = std::env::temp_dir().join(format!(
            "phalanx-hostfile-{}-{}",
            std::process::id(),
            net.bridge()
        ));
        let mut text = String::from("# test namespaces\n");
        for n in net.names() {
            text.push_str(&format!("netns:{n} slots=1\n"));
        }
        text.push_str(extra);
        std::fs::write(&path, text).unwrap();
        Hostfile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Hostfile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The `ip=` each rank reported, by rank.
fn rank_ips(stdout: &str, n: usize) -> Vec<Ipv4Addr> {
    (0..n)
        .map(|r| {
            let key = format!("fake-rank rank={r} ");
            let line = stdout
                .lines()
                .find(|l| l.contains(&key))
                .unwrap_or_else(|| panic!("rank {r} missing"));
            let ip = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("ip="))
                .unwrap();
            ip.parse().unwrap()
        })
        .collect()
}

#[test]
fn one_rank_per_namespace_completes() {
    let net = TestNet::create(4).expect("network namespaces for the launcher test");
    let hf = Hostfile::new(&net, "");
    let o = run(&["run", "--hostfile", hf.path(), FAKE, "ok"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    // Rank r ran in namespace r (PHALANX_IP=auto found its veth address).
    assert_eq!(rank_ips(&o.stdout, 4), net.ips());
    assert!(o.stdout.contains("size=4 "), "{}", o.stdout);
    assert_eq!(o.pids().len(), 4);
    assert_gone(&o.pids());
}

#[test]
fn mixed_hosts_and_explicit_boot_ip() {
    let net = TestNet::create(2).expect("network namespaces for the launcher test");
    let hf = Hostfile::new(&net, "localhost slots=2\n");
    let bridge = net.bridge_ip().to_string();
    let o = run(&[
        "run",
        "-n",
        "5",
        "--oversubscribe",
        "--boot-ip",
        &bridge,
        "--hostfile",
        hf.path(),
        FAKE,
        "ok",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let ips = rank_ips(&o.stdout, 5);
    // Fill by slots, then wrap: ns0, ns1, localhost ×2, ns0. The ranks of this machine
    // bind the address the namespaces reach it at (the bridge), not loopback.
    let here = net.bridge_ip();
    assert_eq!(ips, [net.ips()[0], net.ips()[1], here, here, net.ips()[0]]);
    assert_gone(&o.pids());
}

#[test]
fn failing_rank_in_a_namespace_ends_the_job() {
    let net = TestNet::create(3).expect("network namespaces for the launcher test");
    let hf = Hostfile::new(&net, "");
    // Rank 1 (namespace 1) panics after the rendezvous; 0 and 2 wait for Release.
    let o = run(&["run", "--hostfile", hf.path(), FAKE, "panic"]);
    assert_eq!(o.code, Some(101), "{}", o.stderr);
    assert!(
        o.stderr.contains("phalanx: rank 1 exited with code 101"),
        "{}",
        o.stderr
    );
    assert_eq!(o.pids().len(), 3);
    assert_gone(&o.pids());
    // A rank ignoring SIGTERM in a namespace is SIGKILLed at the timeout.
    let o = run(&[
        "run",
        "--hostfile",
        hf.path(),
        "--timeout",
        "1",
        "--kill-grace",
        "1",
        FAKE,
        "hangterm",
    ]);
    assert_eq!(o.code, Some(124), "{}", o.stderr);
    assert_eq!(o.pids().len(), 3);
    assert_gone(&o.pids());
}

#[test]
fn bad_hostfiles_are_reported() {
    let path = std::env::temp_dir().join(format!("phalanx-badhf-{}", std::process::id()));
    std::fs::write(&path, "localhost\nnode7.example.org cores=4\n").unwrap();
    let o = run(&["run", "--hostfile", path.to_str().unwrap(), FAKE, "ok"]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(o.code, Some(2));
    assert!(o.stderr.contains("line 2"), "{}", o.stderr);
    // A namespace that does not exist: the rank cannot start, the job fails.
    let path = std::env::temp_dir().join(format!("phalanx-nons-{}", std::process::id()));
    std::fs::write(&path, "netns:phxt-does-not-exist\n").unwrap();
    let o = run(&["run", "--hostfile", path.to_str().unwrap(), FAKE, "ok"]);
    let _ = std::fs::remove_file(&path);
    assert_ne!(o.code, Some(0));
    assert!(o.stderr.contains("phxt-does-not-exist"), "{}", o.stderr);
}
