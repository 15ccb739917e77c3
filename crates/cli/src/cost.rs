//! The cost figures of seed 002 that a job's ranks get: `phalanx run` gives every rank
//! the figures of the launcher's host, so ranks on several hosts build the same trees.
//!
//! Contract ([`job_figures`]): `PHALANX_COST=measure` (in the launcher's environment or
//! the job's, `--env`/`-x`) has the launcher measure this host's loopback UDP (about a
//! second, [`phalanx_transport::cost::measure`]) and pass the figures; any other value
//! stands as given; unset, this host's cache (`phalanx-bench calibrate --save`) is
//! passed when it holds valid figures, and nothing otherwise (the ranks then use the
//! defaults). A malformed cache file is reported and not passed.

use phalanx_transport::cost::{measure, read_cache};
use std::ffi::OsString;

/// The variable.
const VAR: &str = "PHALANX_COST";

/// The `PHALANX_COST` every rank gets, if the launcher sets one (module docs).
pub fn job_figures(job_env: &[(OsString, OsString)]) -> Result<Option<String>, String> {
    let asked = job_env
        .iter()
        .rev()
        .find(|(k, _)| k == VAR)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os(VAR));
    match asked {
        Some(v) if v.to_string_lossy().trim() == "measure" => measure(|_, _, _, _| {})
            .map(|m| Some(m.format()))
            .map_err(|e| format!("{VAR}=measure: cannot measure this host: {e}")),
        Some(_) => Ok(None),
        None => match read_cache() {
            Ok(m) => Ok(m.map(|m| m.format())),
            Err(e) => {
                eprintln!("phalanx: warning: ignoring {e}");
                Ok(None)
            }
        },
    }
}
