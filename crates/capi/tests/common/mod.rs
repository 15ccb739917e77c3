//! Helpers shared by the C ABI test binaries (`c_abi.rs`, `c_mpi4.rs`): the launcher
//! and library of this profile (built on first use), `phalanx cc` into the test output
//! directory, and `phalanx run` with a `--timeout` so a hang fails the test.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

pub fn repo() -> PathBuf {
    Path::new(MANIFEST).join("../..").canonicalize().unwrap()
}

pub fn header_dir() -> PathBuf {
    Path::new(MANIFEST).join("include")
}

/// The `phalanx` launcher. The first use runs `cargo build --workspace --bins --examples`
/// for this profile and target dir: the command of the phalanx crate's test helpers, with
/// the features of `cargo test`/`cargo nextest run --workspace`, so it is a no-op after
/// the workspace's test build (`-p phalanx-cli -p phalanx-capi` resolves other features
/// and rebuilt core, cli and capi, ~30 s in CI). It leaves the cdylib under
/// target/<profile>/deps only, and `phalanx cc` links target/<profile>/libmpi_abi.so
/// first: that name is made the freshly built file (a hard link, as cargo's own uplift).
pub fn phalanx() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "--workspace", "--bins", "--examples"])
                .env("CARGO_TARGET_DIR", profile_dir().parent().unwrap());
            if profile_dir().file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            assert!(cmd.status().unwrap().success(), "building phalanx failed");
            link_fresh_library();
            profile_dir().join("phalanx")
        })
        .clone()
}

/// Makes target/<profile>/libmpi_abi.so the cdylib the build just wrote under deps/ (a
/// stale one from an earlier build would otherwise be linked and loaded first). The new
/// name is made under a name of this process's own and renamed over the old one, so a
/// test binary doing the same at once never sees the library missing, and a copy never
/// writes into a file that is the build's own (a hard link of it).
fn link_fresh_library() {
    use std::os::unix::fs::MetadataExt;
    let built = profile_dir().join("deps/libmpi_abi.so");
    let linked = profile_dir().join("libmpi_abi.so");
    let b = std::fs::metadata(&built).expect("the build leaves deps/libmpi_abi.so");
    if std::fs::metadata(&linked).is_ok_and(|l| (l.dev(), l.ino()) == (b.dev(), b.ino())) {
        return;
    }
    let tmp = profile_dir().join(format!(".libmpi_abi.so.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(&built, &tmp).is_err() {
        std::fs::copy(&built, &tmp).expect("copy deps/libmpi_abi.so");
    }
    std::fs::rename(&tmp, &linked).expect("rename the fresh libmpi_abi.so into place");
    // Renaming onto a name of the same file leaves both names: drop this one.
    let _ = std::fs::remove_file(&tmp);
}

pub fn out_dir() -> PathBuf {
    let d = profile_dir().join("capi-tests");
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn show(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Compiles `src` with `phalanx cc` (extra flags first) into the test output dir.
pub fn compile(src: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let exe = out_dir().join(name);
    let o = Command::new(phalanx())
        .arg("cc")
        .args(flags)
        .arg(src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "phalanx cc {}: {}",
        src.display(),
        show(&o)
    );
    exe
}

pub fn c_test(name: &str) -> PathBuf {
    let src = Path::new(MANIFEST)
        .join("tests/c")
        .join(format!("{name}.c"));
    compile(&src, name, &["-std=c11", "-Wall", "-Wextra", "-Werror"])
}

pub fn run(n: u32, exe: &Path, args: &[&str]) -> Output {
    Command::new(phalanx())
        .args(["run", "-n", &n.to_string(), "--timeout", "60"])
        .arg(exe)
        .args(args)
        .output()
        .unwrap()
}

pub fn run_ok(n: u32, exe: &Path, args: &[&str], expect: &str) {
    let o = run(n, exe, args);
    assert!(o.status.success(), "-n {n} {}: {}", exe.display(), show(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(expect),
        "{}",
        show(&o)
    );
}

/// Runs `exe` on `n` ranks with `env`, returning the output.
pub fn run_env(n: u32, exe: &Path, env: &[(&str, &str)]) -> Output {
    Command::new(phalanx())
        .args(["run", "-n", &n.to_string(), "--timeout", "60"])
        .envs(env.iter().copied())
        .arg(exe)
        .output()
        .unwrap()
}

/// Runs `exe` on `n` ranks with `env`: it must succeed and every rank print
/// "NAME ok rank R".
pub fn every_rank_ok(exe: &Path, n: u32, env: &[(&str, &str)], name: &str) {
    let o = run_env(n, exe, env);
    assert!(o.status.success(), "-n {n} {env:?}: {}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for r in 0..n {
        let line = format!("{name} ok rank {r}");
        assert!(
            out.contains(&line),
            "-n {n} {env:?}: no {line:?}: {}",
            show(&o)
        );
    }
}

pub fn threaded_test(name: &str) -> PathBuf {
    let src = Path::new(MANIFEST)
        .join("tests/c")
        .join(format!("{name}.c"));
    compile(
        &src,
        name,
        &["-std=c11", "-Wall", "-Wextra", "-Werror", "-pthread"],
    )
}
