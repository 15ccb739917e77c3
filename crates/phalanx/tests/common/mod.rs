//! Helpers for tests that run real multi-rank jobs through the launcher.
//!
//! Binaries come from the same target profile directory as the test executable; the
//! first use builds them (`cargo build --workspace --bins --examples`), which is a no-op
//! when CI has built them already. Every job runs under a hard wall-clock bound so a hang
//! fails the test instead of eating CI.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// target/<profile> of this test binary.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test>
    exe.parent()
        .and_then(|d| d.parent())
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

fn ensure_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = profile_dir();
        if dir.join("phalanx").exists()
            && dir.join("examples/stress").exists()
            && dir.join("examples/crash").exists()
            && dir.join("examples/intruder").exists()
            && dir.join("examples/collectives").exists()
            && dir.join("examples/mcast_counts").exists()
            && dir.join("examples/matmul").exists()
            && dir.join("examples/spmv").exists()
            && dir.join("examples/jacobi").exists()
            && dir.join("examples/switch").exists()
            && dir.join("examples/hello").exists()
            && dir.join("examples/gang_bw").exists()
            && dir.join("examples/forger").exists()
            && dir.join("examples/hijack").exists()
            && dir.join("examples/mismatch").exists()
        {
            return;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--workspace", "--bins", "--examples"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("run cargo build");
        assert!(st.success(), "building the binaries failed");
    });
}

/// The launcher binary.
pub fn phalanx() -> PathBuf {
    ensure_built();
    profile_dir().join("phalanx")
}

/// An example binary of the phalanx crate.
pub fn example(name: &str) -> PathBuf {
    ensure_built();
    profile_dir().join("examples").join(name)
}

/// Result of a job.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
    pub fn dump(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
    /// The sum over the ranks' `phalanx stats` lines (`PHALANX_STATS=1`) of counter `key`
    /// (e.g. `"retransmits="`).
    pub fn stat(&self, key: &str) -> u64 {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("phalanx stats"))
            .flat_map(|l| l.split_whitespace())
            .filter_map(|w| w.strip_prefix(key))
            .filter_map(|v| v.parse::<u64>().ok())
            .sum()
    }
    /// Pids printed by the `crash` example (`pid RANK PID` lines).
    pub fn pids(&self) -> Vec<i32> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("pid "))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
            .collect()
    }
}

/// Runs `phalanx run <args>` with extra environment, killing it after `limit`.
pub fn run(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
    let mut cmd = Command::new(phalanx());
    cmd.arg("run").args(args);
    cmd.env_remove("PHALANX_FAULTS").env_remove("PHALANX_BOOT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_cmd(cmd, limit)
}

/// Runs a command with a hard bound on its duration.
pub fn run_cmd(mut cmd: Command, limit: Duration) -> Run {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let out_pipe = child.stdout.take().expect("stdout");
    let err_pipe = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || read_all(out_pipe));
    let err_t = std::thread::spawn(move || read_all(err_pipe));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > limit {
            // SIGTERM lets the launcher clean up its ranks.
            // SAFETY: signalling our own child process.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let st = child.wait().expect("wait");
            let out = out_t.join().unwrap_or_default();
            let err = err_t.join().unwrap_or_default();
            panic!("job did not finish within {limit:?} (status {st:?})\n{out}\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = Output {
        status,
        stdout: out_t.join().unwrap_or_default().into_bytes(),
        stderr: err_t.join().unwrap_or_default().into_bytes(),
    };
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn read_all(mut r: impl std::io::Read) -> String {
    let mut s = String::new();
    let _ = r.read_to_string(&mut s);
    s
}

/// True when no process with this pid exists any more (zombies count as gone only
/// once reaped, so allow the launcher a moment to reap).
pub fn gone(pid: i32) -> bool {
    for _ in 0..100 {
        // SAFETY: signal 0 only checks for existence.
        let r = unsafe { libc::kill(pid, 0) };
        if r != 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
