//! Shared by the benchmark tests: where the launcher is, built first when missing.

use std::path::PathBuf;
use std::process::Command;

/// target/<profile> of this test binary (it lives in target/<profile>/deps).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// The launcher, built first if this profile has none yet.
pub fn launcher() -> PathBuf {
    let dir = profile_dir();
    let path = dir.join("phalanx");
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "phalanx-cli"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        assert!(
            cmd.status().expect("run cargo build").success(),
            "building the launcher failed"
        );
    }
    path
}
