//! [`ShmConfig::from_lookup`]: the `PHALANX_SHM_*` knobs, each with a default and a range.
//!
//! Contract: every value is at most [`MAX_VALUE_LEN`] bytes and inside its documented
//! range, or the result is an error naming the variable, its value (at most
//! [`MAX_SHOWN`](phalanx_wire::shown::MAX_SHOWN) bytes of it) and the range; nothing panics whatever the text. This
//! crate reads no environment itself: the library passes its lookup in.

use std::path::PathBuf;
use std::time::Duration;

use crate::segment::{MAX_BOARD, MAX_RING, MIN_RING, PAGE};
use crate::ShmConfig;

/// Longest value of any `PHALANX_SHM_*` variable (a path: Linux's `PATH_MAX`).
pub const MAX_VALUE_LEN: usize = 4096;
/// Longest `PHALANX_SHM_TIMEOUT`, seconds (one day).
pub const MAX_TIMEOUT_SECS: f64 = 86_400.0;
use phalanx_wire::shown::shown;

impl ShmConfig {
    /// Defaults overridden by, as `get` returns them (the library reads the environment;
    /// this crate reads none):
    /// * `PHALANX_SHM_RING`: bytes per ring (`k`/`m` suffix), a power of two from 1 KiB
    ///   to 1 GiB; default 256 KiB, shrunk under `rings_budget` unless set;
    /// * `PHALANX_SHM_BOARD`: bytes of each collective board buffer (`k`/`m` suffix), a
    ///   multiple of 4 KiB up to 64 MiB, 0 disables the board; default 256 KiB;
    /// * `PHALANX_SHM_DIR`: where the private segment directory is made, at most
    ///   [`MAX_VALUE_LEN`] bytes; default `/dev/shm`;
    /// * `PHALANX_SHM_TIMEOUT`: seconds, more than 0 and at most one day
    ///   ([`MAX_TIMEOUT_SECS`]); default 30;
    /// * `PHALANX_SHM_SINGLE_COPY`: `0` turns `process_vm_readv` off; default `1`.
    ///
    /// A value out of range, malformed or longer than [`MAX_VALUE_LEN`] is an error
    /// naming the variable (module docs).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<ShmConfig, String> {
        let mut cfg = ShmConfig::default();
        let set = |name: &str| -> Result<Option<String>, String> {
            match get(name) {
                Some(v) if v.len() > MAX_VALUE_LEN => Err(format!(
                    "{name} is {} bytes long, more than {MAX_VALUE_LEN}",
                    v.len()
                )),
                Some(v) if !v.trim().is_empty() => Ok(Some(v)),
                _ => Ok(None),
            }
        };
        let bytes = |name: &str, ok: &dyn Fn(usize) -> bool, range: &str| {
            let Some(raw) = set(name)? else {
                return Ok(None);
            };
            let v = raw.trim().to_ascii_lowercase();
            let (num, mul) = match v.strip_suffix('k') {
                Some(n) => (n, 1usize << 10),
                None => match v.strip_suffix('m') {
                    Some(n) => (n, 1 << 20),
                    None => (v.as_str(), 1),
                },
            };
            num.parse::<usize>()
                .ok()
                .and_then(|n| n.checked_mul(mul))
                .filter(|&n| ok(n))
                .map(Some)
                .ok_or_else(|| {
                    format!(
                        "{name}={} is not a byte count (e.g. 65536, 64k, 1m) {range}",
                        shown(&raw)
                    )
                })
        };
        let ring = |n: usize| n.is_power_of_two() && (MIN_RING..=MAX_RING).contains(&n);
        if let Some(n) = bytes(
            "PHALANX_SHM_RING",
            &ring,
            "that is a power of two from 1k to 1024m",
        )? {
            cfg.ring_bytes = n;
            cfg.rings_budget = usize::MAX;
        }
        let board = |n: usize| n.is_multiple_of(PAGE) && n <= MAX_BOARD;
        if let Some(n) = bytes(
            "PHALANX_SHM_BOARD",
            &board,
            "that is a multiple of 4k from 0 to 64m",
        )? {
            cfg.board_bytes = n;
        }
        if let Some(d) = set("PHALANX_SHM_DIR")? {
            cfg.dir = PathBuf::from(d);
        }
        if let Some(v) = set("PHALANX_SHM_TIMEOUT")? {
            let secs = v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| *s > 0.0 && *s <= MAX_TIMEOUT_SECS)
                .ok_or_else(|| {
                    format!(
                        "PHALANX_SHM_TIMEOUT={} is not a number of seconds above 0 and at \
                         most {MAX_TIMEOUT_SECS} (one day)",
                        shown(&v)
                    )
                })?;
            cfg.connect_timeout = Duration::from_secs_f64(secs);
        }
        if let Some(v) = set("PHALANX_SHM_SINGLE_COPY")? {
            cfg.single_copy = match v.trim() {
                "0" => false,
                "1" => true,
                _ => {
                    return Err(format!(
                        "PHALANX_SHM_SINGLE_COPY={} is not 0 or 1",
                        shown(&v)
                    ))
                }
            };
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<ShmConfig, String> {
        ShmConfig::from_lookup(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn defaults_and_valid_values() {
        let d = from(&[]).unwrap();
        assert_eq!((d.ring_bytes, d.board_bytes), (256 << 10, 256 << 10));
        assert_eq!(d.connect_timeout, Duration::from_secs(30));
        let c = from(&[
            ("PHALANX_SHM_RING", "1024m"),
            ("PHALANX_SHM_BOARD", "64m"),
            ("PHALANX_SHM_TIMEOUT", "86400"),
            ("PHALANX_SHM_DIR", &"d".repeat(MAX_VALUE_LEN)),
            ("PHALANX_SHM_SINGLE_COPY", "0"),
        ])
        .unwrap();
        assert_eq!((c.ring_bytes, c.rings_budget), (1 << 30, usize::MAX));
        assert_eq!(c.board_bytes, 64 << 20);
        assert_eq!(c.connect_timeout, Duration::from_secs(86_400));
        assert!(!c.single_copy);
        assert_eq!(
            from(&[("PHALANX_SHM_RING", "1k")]).unwrap().ring_bytes,
            1024
        );
        assert_eq!(from(&[("PHALANX_SHM_BOARD", "0")]).unwrap().board_bytes, 0);
    }

    #[test]
    fn out_of_range_values_name_the_variable() {
        let long = "1".repeat(1 << 20);
        for (name, v) in [
            ("PHALANX_SHM_RING", "2048m"),
            ("PHALANX_SHM_RING", "512"),
            ("PHALANX_SHM_RING", "3k"),
            ("PHALANX_SHM_RING", "18446744073709551615"),
            ("PHALANX_SHM_RING", "18446744073709551615m"),
            ("PHALANX_SHM_BOARD", "65m"),
            ("PHALANX_SHM_BOARD", "5000"),
            ("PHALANX_SHM_TIMEOUT", "86400.5"),
            ("PHALANX_SHM_TIMEOUT", "1e308"),
            ("PHALANX_SHM_TIMEOUT", "inf"),
            ("PHALANX_SHM_TIMEOUT", "NaN"),
            ("PHALANX_SHM_TIMEOUT", "-1"),
            ("PHALANX_SHM_TIMEOUT", "0"),
            ("PHALANX_SHM_SINGLE_COPY", "2"),
            ("PHALANX_SHM_DIR", &long),
            ("PHALANX_SHM_RING", &long),
        ] {
            let e = from(&[(name, v)]).unwrap_err();
            assert!(e.contains(name) && e.len() < 300, "{name}={v:.40}: {e}");
        }
    }
}
