//! `phalanx cc [args…]`: compiles and links a C (or C++) program against phalanx's MPI
//! ABI, like `mpicc`.
//!
//! Contract: runs `$PHALANX_CC` (default `cc`) with `-I <include dir>` before the user's
//! arguments and, unless the user only compiles/preprocesses (`-c`, `-E`, `-S`, `-M`,
//! `-MM`), `-L <lib dir> -lmpi_abi -Wl,-rpath,<lib dir>` after them. The include dir holds
//! `mpi.h`, the lib dir `libmpi_abi.so` (a `libmpi_abi.so.1` link, the soname, is created
//! next to it when missing). Both are found through `PHALANX_HOME` (an install prefix with
//! `include/` and `lib/`, or a source tree with `crates/capi/include` and
//! `target/{release,debug}`) or else relative to the `phalanx` executable
//! (`target/<profile>/` of a `cargo build --workspace`, header from this source tree).
//! `--show` prints the command instead of running it. Returns the compiler's exit code.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `mpi.h` and `libmpi_abi.so` are.
#[derive(Debug)]
pub struct Paths {
    /// Directory of `mpi.h`.
    pub include: PathBuf,
    /// Directory of `libmpi_abi.so`.
    pub lib: PathBuf,
}

fn first_with(cands: &[PathBuf], file: &str) -> Option<PathBuf> {
    cands.iter().find(|d| d.join(file).is_file()).cloned()
}

/// Finds the include and library directories.
pub fn locate() -> Result<Paths, String> {
    let src_include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../capi/include");
    let (inc, lib): (Vec<PathBuf>, Vec<PathBuf>) = match crate::bounds::path_var("PHALANX_HOME")? {
        Some(h) => {
            let h = PathBuf::from(h);
            (
                vec![h.join("include"), h.join("crates/capi/include")],
                vec![
                    h.join("lib"),
                    h.join("target/release"),
                    h.join("target/debug"),
                ],
            )
        }
        None => {
            let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
            let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
            (
                vec![dir.join("../include"), dir.join("include"), src_include],
                vec![dir.join("../lib"), dir.clone(), dir.join("deps")],
            )
        }
    };
    let include = first_with(&inc, "mpi.h")
        .ok_or_else(|| format!("mpi.h not found in {inc:?} (set PHALANX_HOME)"))?;
    let include = include.canonicalize().unwrap_or(include);
    let lib = first_with(&lib, "libmpi_abi.so").ok_or_else(|| {
        format!(
            "libmpi_abi.so not found in {lib:?} (run `cargo build --workspace` or set PHALANX_HOME)"
        )
    })?;
    let lib = lib.canonicalize().unwrap_or(lib);
    Ok(Paths { include, lib })
}

/// Makes sure `libmpi_abi.so.1` (the soname the program will ask for) exists in `lib`.
fn ensure_soname_link(lib: &Path) {
    let link = lib.join("libmpi_abi.so.1");
    if !link.exists() {
        let _ = std::fs::remove_file(&link); // a dangling link
        let _ = std::os::unix::fs::symlink("libmpi_abi.so", &link);
    }
}

/// Whether the user's arguments stop before linking.
fn no_link(args: &[OsString]) -> bool {
    args.iter()
        .any(|a| matches!(a.to_str(), Some("-c" | "-E" | "-S" | "-M" | "-MM")))
}

/// The compiler command for `args` (`PHALANX_CC`, default `cc`; [`run`] checked its
/// length).
pub fn command(args: &[OsString], p: &Paths) -> Command {
    let cc = std::env::var_os("PHALANX_CC").unwrap_or_else(|| "cc".into());
    let mut cmd = Command::new(cc);
    cmd.arg("-I").arg(&p.include);
    cmd.args(args);
    if !no_link(args) {
        let mut rpath = OsString::from("-Wl,-rpath,");
        rpath.push(&p.lib);
        cmd.arg("-L").arg(&p.lib).arg("-lmpi_abi").arg(rpath);
    }
    cmd
}

/// Runs `phalanx cc`.
pub fn run(args: Vec<OsString>) -> i32 {
    let show = args.first().is_some_and(|a| a == "--show");
    let args = if show { args[1..].to_vec() } else { args };
    // PHALANX_CC is checked here, `command` uses it.
    let paths = match crate::bounds::path_var("PHALANX_CC").and_then(|_| locate()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("phalanx cc: {e}");
            return 2;
        }
    };
    let mut cmd = command(&args, &paths);
    if show {
        let parts: Vec<String> = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        println!("{}", parts.join(" "));
        return 0;
    }
    ensure_soname_link(&paths.lib);
    match cmd.status() {
        Ok(st) => st.code().unwrap_or(1),
        Err(e) => {
            eprintln!("phalanx cc: cannot run {:?}: {e}", cmd.get_program());
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_flags_only_when_linking() {
        let p = Paths {
            include: "/i".into(),
            lib: "/l".into(),
        };
        let a: Vec<OsString> = vec!["x.c".into(), "-o".into(), "x".into()];
        let cmd = command(&a, &p);
        let v: Vec<_> = cmd.get_args().map(|s| s.to_str().unwrap()).collect();
        assert_eq!(
            v,
            [
                "-I",
                "/i",
                "x.c",
                "-o",
                "x",
                "-L",
                "/l",
                "-lmpi_abi",
                "-Wl,-rpath,/l"
            ]
        );
        let a: Vec<OsString> = vec!["-c".into(), "x.c".into()];
        let cmd = command(&a, &p);
        assert_eq!(cmd.get_args().count(), 4);
    }
}
