//! Helpers shared by the launcher tests: run `phalanx`, collect its output, check that no
//! rank survived. Every wait is bounded.
#![allow(dead_code)]

use std::io::{BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// Bound on any single wait in these tests.
pub const LIMIT: Duration = Duration::from_secs(60);

pub const PHALANX: &str = env!("CARGO_BIN_EXE_phalanx");
pub const FAKE: &str = env!("CARGO_BIN_EXE_phalanx-fake-rank");

pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// The pids the fake ranks reported.
    pub fn pids(&self) -> Vec<i32> {
        rank_pids(&self.stdout)
    }
}

pub fn rank_pids(stdout: &str) -> Vec<i32> {
    stdout
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("pid="))
        .map(|p| p.parse().unwrap())
        .collect()
}

pub fn start(args: &[&str]) -> Child {
    start_env(args, &[])
}

/// [`start`] with extra environment variables.
pub fn start_env(args: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(PHALANX)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start phalanx")
}

/// Collects a pipe into a String on a thread.
pub fn collect(pipe: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(pipe).read_to_string(&mut s);
        let _ = tx.send(s);
    });
    rx
}

/// Waits (bounded) for `child` to exit; kills it and panics if it does not.
pub fn wait_bounded(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("phalanx did not exit within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn run(args: &[&str]) -> Outcome {
    run_env(args, &[])
}

/// [`run`] with extra environment variables.
pub fn run_env(args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let mut child = start_env(args, env);
    let out = collect(child.stdout.take().unwrap());
    let err = collect(child.stderr.take().unwrap());
    let code = wait_bounded(&mut child);
    let outcome = Outcome {
        code,
        stdout: out.recv_timeout(LIMIT).expect("stdout not closed"),
        stderr: err.recv_timeout(LIMIT).expect("stderr not closed"),
    };
    eprintln!(
        "--- phalanx {args:?} → {code:?}\n--- stdout:\n{}--- stderr:\n{}",
        outcome.stdout, outcome.stderr
    );
    outcome
}

/// Asserts every pid is gone (ESRCH), allowing a bounded moment for reaping.
pub fn assert_gone(pids: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for &pid in pids {
        loop {
            // SAFETY: kill with signal 0 only checks for existence; no memory is involved.
            let rc = unsafe { libc::kill(pid, 0) };
            let gone =
                rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            if gone {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "rank process {pid} survived the job"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
