//! `phalanx run` over real processes, with `phalanx-fake-rank` as the rank program.
//!
//! Every wait here is bounded ([`LIMIT`]) and nothing asserts a duration: a hung launcher
//! fails the test instead of hanging it.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::sync::mpsc::channel;

fn ok_run(n: u32, tag: bool) {
    let n_s = n.to_string();
    let mut args = vec!["run", "-n", &n_s];
    if tag {
        args.push("--tag-output");
    }
    args.extend(["--stats", FAKE, "ok", "--flag", "-n", "7"]);
    let o = run(&args);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    for r in 0..n {
        let line = format!("fake-rank rank={r} size={n} ");
        let found = o.stdout.lines().find(|l| l.contains(&line));
        let found = found.unwrap_or_else(|| panic!("rank {r} missing from stdout"));
        if tag {
            assert!(found.starts_with(&format!("[{r}] fake-rank")), "{found}");
        } else {
            assert!(found.starts_with("fake-rank"), "{found}");
        }
        assert!(found.contains(&format!("table={n} ")), "{found}");
        assert!(found.ends_with(r#"args=["--flag", "-n", "7"]"#), "{found}");
        // The --stats table has a row per rank (its first cell the rank).
        assert!(
            o.stderr
                .lines()
                .any(|l| l.split_whitespace().next() == Some(&r.to_string())),
            "{}",
            o.stderr
        );
    }
    let all = format!("phalanx: job statistics: {n} of {n} ranks reported\n");
    assert!(o.stderr.contains(&all), "{}", o.stderr);
    // Every rank ran one barrier "with" the fake rank's mode; `sent` is 2 + rank.
    assert!(o.stderr.contains(&format!("mode-ok {n}")), "{}", o.stderr);
    assert_eq!(o.pids().len(), n as usize);
    assert_gone(&o.pids());
}

#[test]
fn ok_one_rank() {
    ok_run(1, false);
}

#[test]
fn ok_four_ranks_tagged() {
    ok_run(4, true);
}

#[test]
fn ok_eight_ranks() {
    ok_run(8, false);
}

#[test]
fn drained_warnings_are_printed() {
    let o = run(&["run", "-n", "2", FAKE, "warn"]);
    assert_eq!(o.code, Some(0));
    assert!(o
        .stderr
        .contains("rank 1: finalize warning: rank 1 gave up on peer 0"));
}

/// Runs a 3-rank job where rank 1 misbehaves per `mode`; checks the code and the message.
fn failing(mode: &str, code: i32, reason: &str) {
    let o = run(&["run", "-n", "3", FAKE, mode]);
    assert_eq!(o.code, Some(code), "{}", o.stderr);
    let msg = format!("phalanx: rank 1 {reason}");
    assert!(
        o.stderr.contains(&msg),
        "expected {msg:?} in:\n{}",
        o.stderr
    );
    assert!(!o.pids().is_empty());
    assert_gone(&o.pids());
}

#[test]
fn panic_fails_the_job() {
    failing("panic", 101, "exited with code 101");
}

#[test]
fn exit_code_is_propagated() {
    failing("exit3", 3, "exited with code 3");
}

#[test]
fn death_by_signal() {
    failing("sigkill", 128 + 9, "killed by signal 9 (SIGKILL)");
}

#[test]
fn exit_without_finalize() {
    failing("nofinalize", 1, "exited without completing Finalize");
}

#[test]
fn unlike_hosts_abort_naming_the_rank() {
    let o = run(&["run", "-n", "3", FAKE, "badhost"]);
    assert_eq!(o.code, Some(1));
    assert!(o.stderr.contains("hosts are not alike"), "{}", o.stderr);
    assert!(o.stderr.contains("rank 1 (little-endian") || o.stderr.contains("rank 1 (big-endian"));
}

#[test]
fn timeout_prints_every_rank_status() {
    let o = run(&["run", "-n", "3", "--timeout", "2", FAKE, "hang"]);
    assert_eq!(o.code, Some(124));
    assert!(
        o.stderr.contains("--timeout of 2 s expired"),
        "{}",
        o.stderr
    );
    assert!(o
        .stderr
        .contains("phalanx: rank 1: waiting in receive from rank 0"));
    for r in [0, 2] {
        let line = format!("phalanx: rank {r}: finalize: drained, waiting for release");
        assert!(o.stderr.contains(&line), "{}", o.stderr);
    }
    assert_eq!(o.pids().len(), 3);
    assert_gone(&o.pids());
}

#[test]
fn sigterm_ignored_escalates_to_sigkill() {
    let o = run(&[
        "run",
        "-n",
        "2",
        "--timeout",
        "1",
        "--kill-grace",
        "1",
        FAKE,
        "hangterm",
    ]);
    assert_eq!(o.code, Some(124));
    assert_eq!(o.pids().len(), 2);
    assert_gone(&o.pids());
}

#[test]
fn ctrl_c_terminates_everything() {
    let n = 3;
    let mut child = start(&["run", "-n", "3", FAKE, "hang"]);
    let err = collect(child.stderr.take().unwrap());
    // Read stdout line by line until every rank has reported its pid.
    let (tx, lines) = channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut pids = Vec::new();
    while pids.len() < n {
        let line = lines.recv_timeout(LIMIT).expect("ranks did not start");
        pids.extend(rank_pids(&line));
    }
    // SAFETY: kill(2) to the launcher we started; no memory is involved.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let code = wait_bounded(&mut child);
    let stderr = err.recv_timeout(LIMIT).unwrap();
    eprintln!("{stderr}");
    assert_eq!(code, Some(130));
    assert!(
        stderr.contains("interrupted by signal 2 (SIGINT)"),
        "{stderr}"
    );
    assert_gone(&pids);
}

#[test]
fn unspawnable_program_exits_2() {
    let o = run(&["run", "-n", "2", "/nonexistent/phalanx-test-prog"]);
    assert_eq!(o.code, Some(2));
    assert!(o
        .stderr
        .contains("cannot start /nonexistent/phalanx-test-prog"));
}

#[test]
fn non_phalanx_programs() {
    assert_eq!(run(&["run", "-n", "3", "true"]).code, Some(0));
    let o = run(&["run", "-n", "2", "sh", "-c", "exit 5"]);
    assert_eq!(o.code, Some(5));
    assert!(o.stderr.contains("exited with code 5"));
}

#[test]
fn start_up_timeout_names_missing_ranks() {
    let o = run(&["run", "-n", "2", "--startup-timeout", "0.5", "sleep", "30"]);
    assert_eq!(o.code, Some(1));
    assert!(
        o.stderr.contains("ranks 0, 1 never connected"),
        "{}",
        o.stderr
    );
}

#[test]
fn version_and_help() {
    let o = run(&["--version"]);
    assert_eq!(o.code, Some(0));
    assert!(o.stdout.starts_with("phalanx "), "{}", o.stdout);
    let o = run(&["run", "--help"]);
    assert_eq!(o.code, Some(0));
    assert!(o.stdout.contains("--tag-output") && o.stdout.contains("Exit status"));
}
