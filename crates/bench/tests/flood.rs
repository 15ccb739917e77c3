//! The seed-003 flood completes over both transports: 4 ranks, each starting 50 messages
//! of 32 fragments to every other rank before receiving anything, then checking every
//! word (the benchmark exits non-zero on a wrong word). Only completion and the exit
//! status are asserted, never the time.

mod common;

use common::launcher;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(180);

fn flood(transport: &str) {
    let mut cmd = Command::new(launcher());
    cmd.args(["run", "-n", "4", env!("CARGO_BIN_EXE_phalanx-bench")])
        .args(["flood", "-n", "50", "-k", "32", "-i", "1", "-x", "0"])
        .env("PHALANX_TRANSPORT", transport)
        .env_remove("PHALANX_FAULTS")
        .env_remove("PHALANX_BOOT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn the launcher");
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > LIMIT {
            // SIGTERM lets the launcher end its ranks.
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "flood over {transport} did not finish within {LIMIT:?}\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("wait");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "flood over {transport}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    let rows = stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count();
    assert_eq!(rows, 3, "one row per fragment size\n{stdout}\n{stderr}");
}

#[test]
fn flood_completes_over_shm() {
    flood("shm");
}

#[test]
fn flood_completes_over_udp() {
    flood("udp");
}
