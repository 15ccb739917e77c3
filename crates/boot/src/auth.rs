//! The job's secret and the start-up proof of knowing it.
//!
//! Contract:
//! * [`Secret`] is 32 bytes from the OS's entropy, made by the launcher (or, under PMI,
//!   by rank 0 into the job's key-value space). It reaches a rank in its environment
//!   ([`crate::ENV_SECRET`], 64 hex digits), never on a command line, and never crosses
//!   the network readable: the launcher sends it over no connection of its own; ranks it
//!   starts through `phalanx gang` node daemons get their environment over the daemon's
//!   connection, which is authenticated and then sealed (AES-256-GCM under a key of that
//!   connection, `phalanx_gang::seal`), and ranks on ssh hosts inside ssh. Its `Debug`
//!   form does not show it.
//! * Start-up is challenge–response: on every boot connection the launcher first sends
//!   a fresh random challenge ([`new_nonce`]); the rank's `Hello` carries
//!   [`proof`]`(secret, challenge, rank)` (BLAKE3 keyed by a key derived from the
//!   secret, over the challenge and the rank); the launcher accepts the connection as
//!   that rank only if [`check`] holds (a constant-time comparison), and sends nothing
//!   else to a connection before.
//! * The datagram MAC's key is derived from the same secret with another context
//!   (`phalanx_transport::mac::datagram_key`).

use std::io::Read;

/// A job's secret (module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub [u8; 32]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl Secret {
    /// 32 fresh bytes from the OS.
    pub fn new() -> std::io::Result<Secret> {
        let mut s = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut s)?;
        Ok(Secret(s))
    }

    /// The environment form: 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses the environment form; `None` unless exactly 64 hex digits.
    pub fn from_hex(s: &str) -> Option<Secret> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s.trim(), &mut out).ok()?;
        Some(Secret(out))
    }
}

/// A fresh challenge: 32 random bytes in hex.
pub fn new_nonce() -> std::io::Result<String> {
    Secret::new().map(|s| s.to_hex())
}

fn proof_hash(secret: &Secret, nonce: &str, rank: u32) -> blake3::Hash {
    let key = blake3::derive_key("phalanx 2026-11 start-up proof", &secret.0);
    let mut h = blake3::Hasher::new_keyed(&key);
    h.update(nonce.as_bytes());
    h.update(&rank.to_le_bytes());
    h.finalize()
}

/// The proof a rank sends for `nonce` (module docs), in hex.
pub fn proof(secret: &Secret, nonce: &str, rank: u32) -> String {
    proof_hash(secret, nonce, rank).to_hex().to_string()
}

/// Whether `given` is the proof for `nonce` and `rank` (constant time in its content).
pub fn check(secret: &Secret, nonce: &str, rank: u32, given: &str) -> bool {
    blake3::Hash::from_hex(given.trim()).is_ok_and(|g| g == proof_hash(secret, nonce, rank))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_secret_challenge_and_rank() {
        let s = Secret::new().unwrap();
        assert_eq!(Secret::from_hex(&s.to_hex()), Some(s.clone()));
        assert_eq!(format!("{s:?}"), "Secret(…)");
        for bad in ["", "00", &"g".repeat(64), &"0".repeat(63), &"0".repeat(65)] {
            assert_eq!(Secret::from_hex(bad), None, "{bad}");
        }
        let n = new_nonce().unwrap();
        assert_ne!(n, new_nonce().unwrap());
        let p = proof(&s, &n, 3);
        assert!(check(&s, &n, 3, &p));
        assert!(!check(&s, &n, 4, &p), "another rank");
        assert!(
            !check(&s, &new_nonce().unwrap(), 3, &p),
            "another challenge"
        );
        assert!(!check(&Secret::new().unwrap(), &n, 3, &p), "another secret");
        assert!(!check(&s, &n, 3, ""));
        assert!(!check(&s, &n, 3, "not hex"));
    }
}
