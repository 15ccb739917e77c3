//! Bounds on what the launcher reads from its environment and command line.
//!
//! Contract: every value read from outside has a documented range, and past it the
//! launcher stops with an error naming the variable (or option), quoting at most
//! [`MAX_SHOWN`](phalanx_wire::shown::MAX_SHOWN) bytes of the value and stating the bound; nothing panics. The
//! variables: `PHALANX_GANG_DIR`, `PHALANX_HOME` and `PHALANX_CC` (paths, at most
//! [`MAX_PATH_LEN`] bytes, [`path_var`]); `SLURM_NTASKS` (1 to
//! [`crate::slurm::MAX_TASKS`]); the time options (0 to [`crate::args::MAX_SECS`]).
//! `PHALANX_COST` is passed to the ranks, which check it; `-x VAR` values are the
//! user's own and travel as the operating system bounds them.

use std::ffi::OsString;

/// Longest path taken from the environment (Linux's `PATH_MAX`).
pub const MAX_PATH_LEN: usize = 4096;
pub use phalanx_wire::shown::shown;

/// The path in variable `name` (`None` when unset); longer than [`MAX_PATH_LEN`] bytes
/// is an error naming it.
pub fn path_var(name: &str) -> Result<Option<OsString>, String> {
    checked_path(name, std::env::var_os(name))
}

fn checked_path(name: &str, v: Option<OsString>) -> Result<Option<OsString>, String> {
    match v {
        Some(p) if p.len() > MAX_PATH_LEN => Err(format!(
            "{name} is {} bytes long, more than {MAX_PATH_LEN}",
            p.len()
        )),
        v => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_bounded() {
        let edge = OsString::from("p".repeat(MAX_PATH_LEN));
        assert_eq!(checked_path("V", Some(edge.clone())), Ok(Some(edge)));
        assert_eq!(checked_path("V", None), Ok(None));
        let e = checked_path("PHALANX_HOME", Some("p".repeat(1 << 20).into())).unwrap_err();
        assert!(e.contains("PHALANX_HOME") && e.len() < 100, "{e}");
        assert!(checked_path("V", Some("p".repeat(MAX_PATH_LEN + 1).into())).is_err());
        assert!(shown(&"x".repeat(1 << 20)).len() < 100);
    }
}
