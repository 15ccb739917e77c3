//! `phalanx run --hostfile` over real ssh: an sshd (OpenSSH) in each of four network
//! namespaces ([`SshNet`]), ranks started by a `phalanx proxy` that ssh starts on each
//! host. A launch over ssh keeps the promises of a local one: tagged output, forwarded
//! environment, exit codes, kill-all on the first failure, `--timeout`, and no process
//! left on any host — also when the launcher itself is killed. Unreachable hosts, a
//! missing remote `phalanx` and too few slots are clear errors.
//!
//! Needs root, iproute2 and `openssh-server`. With `PHALANX_TEST_SSH=1` (CI sets it) a
//! missing sshd is a failure; without it these tests say they were skipped and why.

mod common;

use common::*;
use phalanx_netns::SshNet;
use std::path::PathBuf;
use std::time::Duration;

/// A file removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str, text: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("phalanx-ssh-{tag}-{}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Asserts that no host holds anything but its sshd (bounded wait for sessions to end).
fn assert_no_strays(net: &SshNet) {
    let strays = net.wait_no_strays(Duration::from_secs(20));
    for (host, pids) in strays.iter().enumerate() {
        let what: Vec<String> = pids
            .iter()
            .map(|&p| format!("{p}: {}", SshNet::describe(p)))
            .collect();
        assert!(pids.is_empty(), "host {host} kept processes: {what:?}");
    }
}

#[test]
fn ssh_hosts_run_like_local_ones() {
    let Some(net) = SshNet::for_test(4) else {
        return;
    };
    let hf = TempFile::new("hosts", &net.hostfile(2));
    let cmd = net.launcher_cmd();
    let o = run(&[
        "run",
        "--hostfile",
        hf.path(),
        "--launcher-cmd",
        &cmd,
        "--tag-output",
        "--stats=json",
        FAKE,
        "ok",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    for r in 0..8 {
        // Tagged, on host r / 2 (slots fill in order), PHALANX_IP found that host's
        // address.
        let ip = net.net().ips()[r / 2];
        let want = format!("[{r}] fake-rank rank={r} size=8 ");
        let line = o.stdout.lines().find(|l| l.starts_with(&want));
        let line = line.unwrap_or_else(|| panic!("no line of rank {r}:\n{}", o.stdout));
        assert!(line.contains(&format!("ip={ip} ")), "{line}");
    }
    // Every rank's counters came back through its host's proxy (`--stats=json`).
    assert!(o.stderr.contains("\"ranks\": 8,"), "{}", o.stderr);
    assert!(o.stderr.contains("\"missing\": []"), "{}", o.stderr);
    assert_no_strays(&net);

    // Environment: -x VAR=VALUE, -x VAR (this environment's value), PHALANX_* unasked.
    // A program that never connects (like `phalanx run hostname`) is fine.
    let o = run_env(
        &[
            "run",
            "--hostfile",
            hf.path(),
            "--launcher-cmd",
            &cmd,
            "-n",
            "4",
            "-x",
            "PHX_SET=given",
            "-x",
            "PHX_PASS",
            "sh",
            "-c",
            "echo env $PHALANX_RANK $PHX_SET $PHX_PASS $PHALANX_TEST_MARK",
        ],
        &[("PHX_PASS", "passed"), ("PHALANX_TEST_MARK", "marked")],
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    for r in 0..4 {
        let want = format!("env {r} given passed marked");
        assert!(o.stdout.lines().any(|l| l == want), "{want}:\n{}", o.stdout);
    }
    assert_no_strays(&net);
}

#[test]
fn ssh_failures_end_the_job_everywhere() {
    let Some(net) = SshNet::for_test(4) else {
        return;
    };
    let hf = TempFile::new("fail", &net.hostfile(2));
    let cmd = net.launcher_cmd();
    let base = ["run", "--hostfile", hf.path(), "--launcher-cmd", &cmd];
    // Rank 1 exits 3 after the rendezvous: the others, on every host, are ended.
    let o = run(&[&base[..], &[FAKE, "exit3"]].concat());
    assert_eq!(o.code, Some(3), "{}", o.stderr);
    assert!(
        o.stderr.contains("phalanx: rank 1 exited with code 3"),
        "{}",
        o.stderr
    );
    assert_no_strays(&net);
    // Killed by a signal.
    let o = run(&[&base[..], &[FAKE, "sigkill"]].concat());
    assert_eq!(o.code, Some(128 + libc::SIGKILL), "{}", o.stderr);
    assert_no_strays(&net);
    // A rank ignoring SIGTERM and Abort: --timeout says what each waits on, then
    // SIGKILL after the grace period.
    let o = run(&[
        &base[..],
        &["--timeout", "2", "--kill-grace", "1", FAKE, "hangterm"],
    ]
    .concat());
    assert_eq!(o.code, Some(124), "{}", o.stderr);
    assert!(
        o.stderr.contains("rank 1: waiting in receive from rank 0"),
        "{}",
        o.stderr
    );
    assert_no_strays(&net);
}

#[test]
fn ssh_launcher_killed_leaves_nothing_behind() {
    let Some(net) = SshNet::for_test(4) else {
        return;
    };
    let hf = TempFile::new("kill", &net.hostfile(2));
    let cmd = net.launcher_cmd();
    let mut child = start(&[
        "run",
        "--hostfile",
        hf.path(),
        "--launcher-cmd",
        &cmd,
        FAKE,
        "hangterm",
    ]);
    let out = child.stdout.take().unwrap();
    // Wait (bounded) until all eight ranks run, then SIGKILL the launcher: its ssh
    // sessions die with it, and every proxy kills its ranks.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut n = 0;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if line.starts_with("fake-rank rank=") {
                n += 1;
                if n == 8 {
                    let _ = tx.send(());
                }
            }
        }
    });
    let started = rx.recv_timeout(LIMIT);
    child.kill().unwrap();
    child.wait().unwrap();
    started.expect("the ranks started");
    assert_no_strays(&net);
}

#[test]
fn ssh_errors_are_clear() {
    let Some(net) = SshNet::for_test(4) else {
        return;
    };
    let cmd = net.launcher_cmd();
    // Nothing listens on the bridge's port 22: ssh's own words say why.
    let bad = TempFile::new("refused", &format!("{} slots=2\n", net.net().bridge_ip()));
    let o = run(&[
        "run",
        "--hostfile",
        bad.path(),
        "--launcher-cmd",
        &cmd,
        FAKE,
        "ok",
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    let want = format!("cannot reach host {}", net.net().bridge_ip());
    assert!(o.stderr.contains(&want), "{}", o.stderr);
    assert!(o.stderr.contains("Connection refused"), "{}", o.stderr);

    let hf = TempFile::new("hosts", &net.hostfile(2));
    let base = ["run", "--hostfile", hf.path(), "--launcher-cmd", &cmd];
    // No phalanx at that path on the hosts.
    let o = run(&[
        &base[..],
        &["--remote-phalanx", "/nonexistent/phalanx", FAKE, "ok"],
    ]
    .concat());
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("/nonexistent/phalanx"), "{}", o.stderr);
    // More ranks than slots, unless asked for.
    let o = run(&[&base[..], &["-n", "9", FAKE, "ok"]].concat());
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("only 8 slots"), "{}", o.stderr);
    let o = run(&[&base[..], &["-n", "9", "--oversubscribe", FAKE, "ok"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    // The program is missing on the host.
    let o = run(&[&base[..], &["/nonexistent/prog"]].concat());
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains("cannot start /nonexistent/prog"),
        "{}",
        o.stderr
    );
    // ssh hosts with --launcher local.
    let o = run(&[&base[..], &["--launcher", "local", FAKE, "ok"]].concat());
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("--launcher local"), "{}", o.stderr);
    assert_no_strays(&net);
}
