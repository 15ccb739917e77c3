//! Bounded parsing of environment values for [`super::Config`].
//!
//! Contract: [`Env`] is a snapshot of the environment (or of pairs a test gives). Every
//! accessor returns either a value inside the range its caller states or an
//! [`Error::Init`] naming the variable, quoting at most [`MAX_SHOWN`](phalanx_wire::shown::MAX_SHOWN) bytes of its value
//! and stating the range; whatever the text (not UTF-8, `inf`, `NaN`, 20 digits, a
//! megabyte), nothing panics. No value longer than [`MAX_TEXT_LEN`] bytes is accepted.
//! Unset and empty (or blank) values mean the default.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::ffi::OsString;
use std::ops::RangeInclusive;
use std::time::Duration;

/// Longest value of any variable the library reads (a path: Linux's `PATH_MAX`).
pub const MAX_TEXT_LEN: usize = 4096;
pub use phalanx_wire::shown::shown;

fn init(msg: String) -> Error {
    Error::Init(msg)
}

/// The variables the configuration is read from.
pub struct Env {
    vars: HashMap<OsString, OsString>,
}

impl Env {
    /// This process's environment, as it is now.
    pub fn from_process() -> Env {
        Env::from_pairs(std::env::vars_os())
    }

    /// The given pairs (tests; a later pair of the same name wins).
    pub fn from_pairs<K: Into<OsString>, V: Into<OsString>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Env {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// The value as `std::env::var(name).ok()` would give it (not UTF-8: `None`), for
    /// crates below that bound their own variables.
    pub fn lookup(&self, name: &str) -> Option<String> {
        self.vars
            .get(std::ffi::OsStr::new(name))?
            .to_str()
            .map(str::to_owned)
    }

    /// The variable's text (`None` when unset); not UTF-8, or longer than
    /// [`MAX_TEXT_LEN`] bytes, is an error naming it.
    pub fn text(&self, name: &str) -> Result<Option<&str>> {
        let Some(v) = self.vars.get(std::ffi::OsStr::new(name)) else {
            return Ok(None);
        };
        if v.len() > MAX_TEXT_LEN {
            return Err(init(format!(
                "{name} is {} bytes long, more than {MAX_TEXT_LEN}",
                v.len()
            )));
        }
        v.to_str()
            .map(Some)
            .ok_or_else(|| init(format!("{name}={v:?} is not valid UTF-8")))
    }

    /// The trimmed text, `None` when unset or blank.
    pub fn set(&self, name: &str) -> Result<Option<&str>> {
        Ok(self.text(name)?.map(str::trim).filter(|v| !v.is_empty()))
    }

    /// Every variable whose name starts with `prefix`, each checked as by [`Env::text`].
    pub fn with_prefix(&self, prefix: &str) -> Result<Vec<(&str, &str)>> {
        let mut out = Vec::new();
        for k in self.vars.keys() {
            if let Some(name) = k.to_str().filter(|k| k.starts_with(prefix)) {
                if let Some(v) = self.text(name)? {
                    out.push((name, v));
                }
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// A whole number in `range`; `unit` names it in the error ("µs", "packets").
    pub fn int<T>(&self, name: &str, range: RangeInclusive<T>, unit: &str) -> Result<Option<T>>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        self.in_range(name, range, &format!("a whole number of {unit}"))
    }

    /// A number (fractions allowed) in `range`; `unit` names it in the error.
    pub fn number(
        &self,
        name: &str,
        range: RangeInclusive<f64>,
        unit: &str,
    ) -> Result<Option<f64>> {
        self.in_range(name, range, &format!("a number of {unit}"))
    }

    /// A value of `T` in `range`; the error says it is not `what` in it.
    fn in_range<T>(&self, name: &str, range: RangeInclusive<T>, what: &str) -> Result<Option<T>>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        let Some(v) = self.set(name)? else {
            return Ok(None);
        };
        v.parse::<T>()
            .ok()
            .filter(|n| range.contains(n))
            .map(Some)
            .ok_or_else(|| {
                init(format!(
                    "{name}={} is not {what} from {} to {}",
                    shown(v),
                    range.start(),
                    range.end()
                ))
            })
    }

    /// Seconds (fractions allowed) from 0 to `max`, `default` when unset.
    pub fn secs(&self, name: &str, default: f64, max: f64) -> Result<Duration> {
        let Some(v) = self.set(name)? else {
            return Ok(Duration::from_secs_f64(default));
        };
        v.parse::<f64>()
            .ok()
            .filter(|s| (0.0..=max).contains(s))
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .ok_or_else(|| {
                init(format!(
                    "{name}={} is not a number of seconds from 0 to {max}",
                    shown(v)
                ))
            })
    }

    /// A size in bytes with an optional `k`, `m` or `g` suffix, from 1 to `max`.
    pub fn bytes(&self, name: &str, max: usize) -> Result<Option<usize>> {
        let Some(raw) = self.set(name)? else {
            return Ok(None);
        };
        let v = raw.to_ascii_lowercase();
        // The suffix is one ASCII byte: cutting it keeps a character boundary.
        let (num, shift) = match v.as_bytes().last() {
            Some(b'k') => (&v[..v.len() - 1], 10),
            Some(b'm') => (&v[..v.len() - 1], 20),
            Some(b'g') => (&v[..v.len() - 1], 30),
            _ => (v.as_str(), 0),
        };
        num.trim()
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_mul(1 << shift))
            .filter(|n| (1..=max).contains(n))
            .map(Some)
            .ok_or_else(|| {
                init(format!(
                    "{name}={} is not a size in bytes (k, m, g suffix) from 1 to {max}",
                    shown(raw)
                ))
            })
    }

    /// An on/off switch (`phalanx_transport::parse_switch`).
    pub fn switch(&self, name: &str, default: bool) -> Result<bool> {
        let v = self.text(name)?;
        phalanx_transport::parse_switch(name, v, default).map_err(init)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env::from_pairs(pairs.iter().map(|&(k, v)| (k, v)))
    }

    /// The message of an initialization error.
    fn msg(e: Error) -> String {
        match e {
            Error::Init(m) => m,
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn text_is_bounded_and_utf8() {
        let edge = "a".repeat(MAX_TEXT_LEN);
        let past = "a".repeat(MAX_TEXT_LEN + 1);
        let e = env(&[("A", &edge), ("B", &past), ("C", " ")]);
        assert_eq!(e.text("A").unwrap(), Some(edge.as_str()));
        let m = msg(e.text("B").unwrap_err());
        assert!(
            m.starts_with('B') && m.contains("4096") && m.len() < 200,
            "{m}"
        );
        assert_eq!(e.set("C").unwrap(), None);
        assert_eq!(e.text("D").unwrap(), None);
        use std::os::unix::ffi::OsStringExt;
        let bad = Env::from_pairs([("X", OsString::from_vec(vec![0xff, 0xfe]))]);
        assert!(msg(bad.text("X").unwrap_err()).contains("UTF-8"));
        assert_eq!(bad.lookup("X"), None);
    }

    #[test]
    fn numbers_are_bounded() {
        let e = env(&[
            ("N", "65536"),
            ("M", "65537"),
            ("H", "18446744073709551616"),
        ]);
        assert_eq!(
            e.int::<u32>("N", 1..=65536, "packets").unwrap(),
            Some(65536)
        );
        for n in ["M", "H"] {
            let m = msg(e.int::<u32>(n, 1..=65536, "packets").unwrap_err());
            assert!(m.starts_with(n) && m.contains("1 to 65536"), "{m}");
        }
        let s = env(&[
            ("S", "604800"),
            ("T", "604800.001"),
            ("I", "inf"),
            ("N", "NaN"),
        ]);
        assert_eq!(s.secs("S", 1.0, 604_800.0).unwrap().as_secs(), 604_800);
        assert_eq!(s.secs("U", 1.5, 10.0).unwrap(), Duration::from_millis(1500));
        for n in ["T", "I", "N"] {
            let m = msg(s.secs(n, 1.0, 604_800.0).unwrap_err());
            assert!(m.starts_with(n) && m.contains("604800"), "{m}");
        }
        let r = env(&[("R", "2.5"), ("Q", "0.5"), ("I", "inf"), ("N", "NaN")]);
        assert_eq!(r.number("R", 1.0..=8.0, "ranks").unwrap(), Some(2.5));
        assert_eq!(r.number("U", 1.0..=8.0, "ranks").unwrap(), None);
        for n in ["Q", "I", "N"] {
            let m = msg(r.number(n, 1.0..=8.0, "ranks").unwrap_err());
            assert!(m.starts_with(n) && m.contains("1 to 8"), "{m}");
        }
        let b = env(&[
            ("A", "1024g"),
            ("B", "1025g"),
            ("C", "0"),
            ("D", "16777216T"),
        ]);
        assert_eq!(b.bytes("A", 1 << 40).unwrap(), Some(1 << 40));
        assert_eq!(
            env(&[("K", " 2K ")]).bytes("K", 1 << 40).unwrap(),
            Some(2048)
        );
        assert_eq!(
            env(&[("K", "3m")]).bytes("K", 1 << 40).unwrap(),
            Some(3 << 20)
        );
        for n in ["B", "C", "D"] {
            let m = msg(b.bytes(n, 1 << 40).unwrap_err());
            assert!(m.starts_with(n), "{m}");
        }
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        for len in [4000, 1 << 20] {
            let long = "9".repeat(len);
            let e = env(&[("L", &long)]);
            let m = msg(e.int::<u64>("L", 0..=1, "s").unwrap_err());
            assert!(m.starts_with('L') && m.len() < 200, "{m}");
        }
        assert_eq!(shown("é".repeat(40).as_str()).matches('é').count(), 32);
    }
}
