//! The launcher-provided environment and the identity of the host a process runs on.
//!
//! Contract: [`BootEnv::from_env`] is `Ok(None)` exactly when [`ENV_BOOT`] is unset (a
//! singleton run); when it is set, rank, size and address must all be present and valid
//! (`rank < size`). Every value is bounded: [`ENV_SIZE`] is `1..=`[`MAX_RANKS`] (what
//! `phalanx run -n` allows), [`ENV_BOOT`] at most [`MAX_ADDR_LEN`] bytes, the secret
//! exactly 64 hex digits; past a bound the error names the variable (never echoing the
//! secret, and never more than [`MAX_ADDR_LEN`] bytes of a value). [`HostInfo::current`] never fails: unreadable `/proc` entries yield an
//! empty boot id or inode 0, which only weakens same-host detection.

use crate::msg::PROTOCOL_VERSION;
use crate::{BootError, Secret};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;

/// Environment variable holding the rank (0-based) of the process.
pub const ENV_RANK: &str = "PHALANX_RANK";
/// Environment variable holding the number of ranks in the job.
pub const ENV_SIZE: &str = "PHALANX_SIZE";
/// Environment variable holding the launcher's TCP address (`ip:port`).
pub const ENV_BOOT: &str = "PHALANX_BOOT";
/// Environment variable holding the job's secret (64 hex digits, [`crate::auth`]).
pub const ENV_SECRET: &str = "PHALANX_JOB_SECRET";

/// Environment variable of a process started by `MPI_Comm_spawn`:
/// `first:count:context:p0,p1,…` — its world is job ranks `first..first + count`, its
/// parent intercommunicator has context `context` and remote group `p0, p1, …` (job
/// ranks).
pub const ENV_SPAWNED: &str = "PHALANX_SPAWNED";

/// What [`ENV_SPAWNED`] says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnedEnv {
    /// Job rank of rank 0 of this process's world.
    pub first: u32,
    /// Size of its world.
    pub count: u32,
    /// Context of the parent intercommunicator.
    pub context: u32,
    /// The parents (job ranks), in the spawning communicator's order.
    pub parents: Vec<u32>,
}

impl SpawnedEnv {
    /// The value of [`ENV_SPAWNED`] for these fields.
    pub fn to_value(&self) -> String {
        let parents: Vec<String> = self.parents.iter().map(u32::to_string).collect();
        format!(
            "{}:{}:{}:{}",
            self.first,
            self.count,
            self.context,
            parents.join(",")
        )
    }

    /// Parses a value of [`ENV_SPAWNED`]; the error names the variable.
    pub fn parse(v: &str) -> Result<SpawnedEnv, BootError> {
        let bad = || {
            BootError::BadEnv(format!(
                "{ENV_SPAWNED}={:?} is not first:count:context:parents",
                shown(v)
            ))
        };
        let mut it = v.trim().splitn(4, ':');
        let mut next = || it.next().ok_or_else(bad);
        let first = bounded_u32(ENV_SPAWNED, next()?, MAX_RANKS)?;
        let count = bounded_u32(ENV_SPAWNED, next()?, MAX_RANKS)?;
        let context = next()?.parse::<u32>().map_err(|_| bad())?;
        let parents = next()?
            .split(',')
            .map(|p| bounded_u32(ENV_SPAWNED, p, MAX_RANKS))
            .collect::<Result<Vec<u32>, _>>()?;
        if count == 0 || parents.is_empty() || parents.len() > MAX_RANKS as usize {
            return Err(bad());
        }
        Ok(SpawnedEnv {
            first,
            count,
            context,
            parents,
        })
    }
}

/// Largest job: [`ENV_SIZE`] and `PMI_SIZE` are `1..=MAX_RANKS` (`phalanx run -n` takes
/// at most as many).
pub const MAX_RANKS: u32 = 65536;
/// Longest [`ENV_BOOT`] (an `ip:port` needs at most 47 bytes).
pub const MAX_ADDR_LEN: usize = 256;

/// The first `MAX_ADDR_LEN` bytes of `v` (at a character boundary), for messages.
pub(crate) fn shown(v: &str) -> &str {
    let mut end = v.len().min(MAX_ADDR_LEN);
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    &v[..end]
}

/// A rank count or index from `name`, `0..=max`; the error names the variable.
pub(crate) fn bounded_u32(name: &str, v: &str, max: u32) -> Result<u32, BootError> {
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|&n| n <= max)
        .ok_or_else(|| {
            BootError::BadEnv(format!(
                "{name}={:?} is not a number from 0 to {max}",
                shown(v)
            ))
        })
}

/// Where this rank sits in the job and how to reach its launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootEnv {
    /// This process's rank, `0..size`.
    pub rank: u32,
    /// Number of ranks in the job (at least 1).
    pub size: u32,
    /// The launcher's rendezvous address.
    pub addr: SocketAddr,
    /// The job's secret.
    pub secret: Secret,
}

impl BootEnv {
    /// Reads [`ENV_RANK`], [`ENV_SIZE`], [`ENV_BOOT`] and [`ENV_SECRET`].
    ///
    /// `Ok(None)` when `PHALANX_BOOT` is unset (singleton run); `Err(BadEnv)` naming the
    /// variable when a value is missing or malformed.
    pub fn from_env() -> Result<Option<BootEnv>, BootError> {
        Self::from_lookup(|k| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned()))
    }

    /// Same as [`BootEnv::from_env`] over an arbitrary lookup (used by tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<BootEnv>, BootError> {
        let Some(boot) = get(ENV_BOOT) else {
            return Ok(None);
        };
        if boot.len() > MAX_ADDR_LEN {
            return Err(BootError::BadEnv(format!(
                "{ENV_BOOT} is {} bytes long, more than {MAX_ADDR_LEN} (an ip:port address)",
                boot.len()
            )));
        }
        let addr: SocketAddr = boot.trim().parse().map_err(|_| {
            BootError::BadEnv(format!("{ENV_BOOT}={boot:?} is not an ip:port address"))
        })?;
        let num = |name: &str| -> Result<u32, BootError> {
            let v = get(name).ok_or_else(|| {
                BootError::BadEnv(format!("{ENV_BOOT} is set but {name} is missing"))
            })?;
            bounded_u32(name, &v, MAX_RANKS)
        };
        let rank = num(ENV_RANK)?;
        let size = num(ENV_SIZE)?;
        if size == 0 {
            return Err(BootError::BadEnv(format!(
                "{ENV_SIZE} must be from 1 to {MAX_RANKS}"
            )));
        }
        if rank >= size {
            return Err(BootError::BadEnv(format!(
                "{ENV_RANK}={rank} is out of range for {ENV_SIZE}={size}"
            )));
        }
        let secret = get(ENV_SECRET)
            .ok_or_else(|| {
                BootError::BadEnv(format!("{ENV_BOOT} is set but {ENV_SECRET} is missing"))
            })
            .and_then(|v| {
                // Never echo the value: it is the job's secret.
                Secret::from_hex(&v)
                    .ok_or_else(|| BootError::BadEnv(format!("{ENV_SECRET} is not 64 hex digits")))
            })?;
        Ok(Some(BootEnv {
            rank,
            size,
            addr,
            secret,
        }))
    }
}

/// What the launcher needs to know about a rank's host to check the job is homogeneous and
/// what peers need to know to pick a transport (same kernel + netns = same host).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct HostInfo {
    /// `/proc/sys/kernel/random/boot_id`, trimmed (empty if unreadable).
    pub boot_id: String,
    /// Inode of `/proc/self/ns/net` (0 if unreadable).
    pub netns_ino: u64,
    /// `cfg!(target_endian = "little")`.
    pub little_endian: bool,
    /// `usize::BITS`.
    pub pointer_width: u32,
    /// [`PROTOCOL_VERSION`] of the binary.
    pub abi_version: u32,
}

impl HostInfo {
    /// Describes the calling process's host.
    pub fn current() -> HostInfo {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let netns_ino = std::fs::metadata("/proc/self/ns/net")
            .map(|m| m.ino())
            .unwrap_or(0);
        HostInfo {
            boot_id,
            netns_ino,
            little_endian: cfg!(target_endian = "little"),
            pointer_width: usize::BITS,
            abi_version: PROTOCOL_VERSION,
        }
    }

    fn arch(&self) -> (bool, u32, u32) {
        (self.little_endian, self.pointer_width, self.abi_version)
    }

    fn describe(&self) -> String {
        format!(
            "{}-endian, {}-bit, protocol {}",
            if self.little_endian { "little" } else { "big" },
            self.pointer_width,
            self.abi_version
        )
    }
}

/// Checks that all ranks run on alike hosts (byte order, pointer width, protocol version).
///
/// `hosts` is `(rank, host)` in any order; rank order decides the reference (the lowest
/// rank). On mismatch the error names the reference and every rank that differs.
pub fn check_hosts(hosts: &[(u32, &HostInfo)]) -> Result<(), String> {
    let mut sorted: Vec<&(u32, &HostInfo)> = hosts.iter().collect();
    sorted.sort_by_key(|(r, _)| *r);
    let Some((r0, h0)) = sorted.first() else {
        return Ok(());
    };
    let odd: Vec<String> = sorted
        .iter()
        .filter(|(_, h)| h.arch() != h0.arch())
        .map(|(r, h)| format!("rank {r} ({})", h.describe()))
        .collect();
    if odd.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "hosts are not alike: rank {r0} is {} but {} differ{}",
            h0.describe(),
            odd.join(", "),
            if odd.len() == 1 { "s" } else { "" }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawned_env_round_trips_and_rejects_garbage() {
        let e = SpawnedEnv {
            first: 4,
            count: 2,
            context: 0xdead_beee,
            parents: vec![0, 2, 3],
        };
        assert_eq!(e.to_value(), "4:2:3735928558:0,2,3");
        assert_eq!(SpawnedEnv::parse(&e.to_value()).unwrap(), e);
        for bad in [
            "",
            "4:2:1",
            "4:0:1:0",
            "4:2:1:",
            "4:2:x:0",
            "4:2:1:0,,1",
            "70000:1:1:0",
        ] {
            let err = SpawnedEnv::parse(bad).unwrap_err().to_string();
            assert!(err.contains(ENV_SPAWNED), "{bad:?}: {err}");
        }
    }

    const SECRET: &str = "abababababababababababababababababababababababababababababababab";

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn env_unset_is_singleton() {
        assert_eq!(BootEnv::from_lookup(lookup(&[])).unwrap(), None);
        // rank/size without the boot address are ignored.
        assert_eq!(
            BootEnv::from_lookup(lookup(&[(ENV_RANK, "x")])).unwrap(),
            None
        );
    }

    #[test]
    fn env_parses() {
        let vars = [
            (ENV_BOOT, "127.0.0.1:4000"),
            (ENV_RANK, "2"),
            (ENV_SIZE, "4"),
            (ENV_SECRET, SECRET),
        ];
        let env = BootEnv::from_lookup(lookup(&vars)).unwrap().unwrap();
        assert_eq!(env.secret, Secret([0xab; 32]));
        assert_eq!(env.rank, 2);
        assert_eq!(env.size, 4);
        assert_eq!(env.addr, "127.0.0.1:4000".parse().unwrap());
    }

    #[test]
    fn env_errors_name_the_variable() {
        let cases: &[&[(&str, &str)]] = &[
            &[(ENV_BOOT, "nope"), (ENV_RANK, "0"), (ENV_SIZE, "1")],
            &[(ENV_BOOT, "127.0.0.1:1"), (ENV_SIZE, "1")],
            &[(ENV_BOOT, "127.0.0.1:1"), (ENV_RANK, "-1"), (ENV_SIZE, "1")],
            &[(ENV_BOOT, "127.0.0.1:1"), (ENV_RANK, "1"), (ENV_SIZE, "1")],
            &[(ENV_BOOT, "127.0.0.1:1"), (ENV_RANK, "0"), (ENV_SIZE, "0")],
            &[(ENV_BOOT, "127.0.0.1:1"), (ENV_RANK, "0"), (ENV_SIZE, "1")],
            &[
                (ENV_BOOT, "127.0.0.1:1"),
                (ENV_RANK, "0"),
                (ENV_SIZE, "1"),
                (ENV_SECRET, "ab12"),
            ],
        ];
        for vars in cases {
            match BootEnv::from_lookup(lookup(vars)) {
                Err(BootError::BadEnv(msg)) => {
                    assert!(msg.contains("PHALANX_"), "{msg}");
                    assert!(!msg.contains("ab12"), "a secret is never echoed: {msg}");
                }
                other => panic!("{vars:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn env_bounds() {
        let with = |rank: &str, size: &str| {
            BootEnv::from_lookup(lookup(&[
                (ENV_BOOT, "127.0.0.1:1"),
                (ENV_RANK, rank),
                (ENV_SIZE, size),
                (ENV_SECRET, SECRET),
            ]))
        };
        assert_eq!(with("65535", "65536").unwrap().unwrap().size, MAX_RANKS);
        let huge = "18446744073709551615";
        let long = "7".repeat(1 << 20);
        for (rank, size, var) in [
            ("0", "65537", ENV_SIZE),
            ("0", huge, ENV_SIZE),
            (huge, "4", ENV_RANK),
            ("0", &long[..], ENV_SIZE),
        ] {
            match with(rank, size) {
                Err(BootError::BadEnv(m)) => {
                    assert!(m.contains(var) && m.contains("65536"), "{m}");
                    assert!(m.len() < 1024, "the value is not echoed whole: {}", m.len());
                }
                other => panic!("{rank} {size}: {other:?}"),
            }
        }
        let long_boot = format!("127.0.0.1:{}", "1".repeat(1 << 20));
        match BootEnv::from_lookup(lookup(&[(ENV_BOOT, long_boot.as_str())])) {
            Err(BootError::BadEnv(m)) => assert!(m.contains(ENV_BOOT) && m.len() < 1024, "{m}"),
            other => panic!("{other:?}"),
        }
        let long_secret = "ab".repeat(1 << 19);
        let e = BootEnv::from_lookup(lookup(&[
            (ENV_BOOT, "127.0.0.1:1"),
            (ENV_RANK, "0"),
            (ENV_SIZE, "1"),
            (ENV_SECRET, long_secret.as_str()),
        ]));
        assert!(matches!(e, Err(BootError::BadEnv(m)) if m.contains(ENV_SECRET) && m.len() < 200));
    }

    #[test]
    fn host_check() {
        let a = HostInfo::current();
        assert_eq!(a.abi_version, PROTOCOL_VERSION);
        let mut b = a.clone();
        b.pointer_width = 32;
        b.boot_id = "other".into();
        assert!(check_hosts(&[(0, &a), (1, &a)]).is_ok());
        let mut c = a.clone();
        c.boot_id = "another host".into(); // different hosts are fine if alike
        assert!(check_hosts(&[(1, &c), (0, &a)]).is_ok());
        let err = check_hosts(&[(2, &b), (0, &a), (1, &a), (3, &b)]).unwrap_err();
        assert!(err.contains("rank 2") && err.contains("rank 3"), "{err}");
        assert!(!err.contains("rank 1 "), "{err}");
    }
}
