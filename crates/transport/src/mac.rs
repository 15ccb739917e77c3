//! Datagram authentication: every UDP datagram of a job carries a MAC under a key
//! derived from the job's secret, so that nothing a stranger sends is taken, even with
//! the job key read off the wire and the sender's address forged.
//!
//! Contract:
//! * The construction is AES-128-GMAC (AES-GCM with the datagram as associated data and
//!   no plaintext; `aes-gcm`, AES-NI and carry-less multiplication where the CPU has
//!   them). The key is [`datagram_key`] of the job's 32-byte secret (BLAKE3's key
//!   derivation, with its own context string); the secret itself never travels.
//! * A sealed datagram is the datagram followed by a [`TRAILER`]-byte trailer: the
//!   sealer's rank (u32 LE), its counter (u64 LE) and the 16-byte tag. The nonce is
//!   (rank, counter): every rank counts its own sends from 0 and never repeats a value,
//!   so no (key, nonce) pair seals two different datagrams (a datagram sent to several
//!   destinations is one sealing).
//! * [`Seal::open`] returns the datagram without its trailer when the tag is right, else
//!   `None` (the caller drops and counts it). A replayed datagram opens; the protocols
//!   above drop what their windows have seen (go-back-n, URTP and careful sequence
//!   numbers).

use aes_gcm::aead::{AeadInOut, KeyInit};
use aes_gcm::Aes128Gcm;

/// Bytes after every sealed datagram: rank (4), counter (8), tag (16).
pub const TRAILER: usize = 28;
const TAG: usize = 16;

/// The datagram key of a job's secret (module docs).
pub fn datagram_key(secret: &[u8; 32]) -> [u8; 16] {
    let k = blake3::derive_key("phalanx 2026-11 datagram MAC (AES-128-GMAC)", secret);
    let mut out = [0u8; 16];
    out.copy_from_slice(&k[..16]);
    out
}

/// The nonce in a trailer: its first 12 bytes (rank and counter).
fn nonce(trailer: &[u8]) -> &aes_gcm::Nonce<aes_gcm::aead::consts::U12> {
    trailer[..12]
        .try_into()
        .expect("a trailer has 12 nonce bytes")
}

/// One rank's sealing and opening state.
pub struct Seal {
    cipher: Aes128Gcm,
    rank: u32,
    counter: u64,
}

impl Seal {
    /// Seals as `rank` under `key` (from [`datagram_key`]).
    pub fn new(key: &[u8; 16], rank: u32) -> Seal {
        Seal {
            cipher: Aes128Gcm::new(key.into()),
            rank,
            counter: 0,
        }
    }

    /// The same sealer under another key, its counter going on (a nonce is never
    /// reused by one rank, whatever the keys).
    pub fn rekeyed(&self, key: &[u8; 16]) -> Seal {
        Seal {
            cipher: Aes128Gcm::new(key.into()),
            rank: self.rank,
            counter: self.counter,
        }
    }

    /// The trailer that authenticates `datagram` (a fresh nonce each call).
    pub fn trailer(&mut self, datagram: &[u8]) -> [u8; TRAILER] {
        let counter = self.counter;
        self.counter += 1;
        let mut t = [0u8; TRAILER];
        t[..4].copy_from_slice(&self.rank.to_le_bytes());
        t[4..12].copy_from_slice(&counter.to_le_bytes());
        let tag = self
            .cipher
            .encrypt_inout_detached(nonce(&t), datagram, (&mut [][..]).into())
            // Only a message beyond GCM's length limit (64 GiB) fails.
            .unwrap_or_default();
        t[12..].copy_from_slice(&tag);
        t
    }

    /// `sealed` without its trailer if its tag is right (module docs).
    pub fn open<'a>(&self, sealed: &'a [u8]) -> Option<&'a [u8]> {
        let body = sealed.len().checked_sub(TRAILER)?;
        let (datagram, t) = sealed.split_at(body);
        self.cipher
            .decrypt_inout_detached(
                nonce(t),
                datagram,
                (&mut [][..]).into(),
                t[12..12 + TAG].try_into().ok()?,
            )
            .ok()
            .map(|()| datagram)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_datagrams_open_and_anything_else_does_not() {
        let key = datagram_key(&[9; 32]);
        let mut a = Seal::new(&key, 3);
        let b = Seal::new(&key, 5);
        let d = b"header and payload".to_vec();
        let t1 = a.trailer(&d);
        let t2 = a.trailer(&d);
        assert_ne!(t1, t2, "a fresh nonce per sealing");
        let sealed = [&d[..], &t1[..]].concat();
        assert_eq!(b.open(&sealed), Some(&d[..]));
        // Any flipped bit, anywhere, is refused.
        for i in 0..sealed.len() * 8 {
            let mut x = sealed.clone();
            x[i / 8] ^= 1 << (i % 8);
            assert_eq!(b.open(&x), None, "bit {i}");
        }
        // Short, empty, other key, the trailer moved to another datagram.
        assert_eq!(b.open(&sealed[..TRAILER - 1]), None);
        assert_eq!(b.open(&[]), None);
        let other = Seal::new(&datagram_key(&[8; 32]), 5);
        assert_eq!(other.open(&sealed), None);
        assert_eq!(b.open(&[&b"other"[..], &t1[..]].concat()), None);
        // An empty datagram seals too.
        let t = a.trailer(&[]);
        assert_eq!(b.open(&t), Some(&[][..]));
        // The key depends on the secret, and is not the secret.
        assert_ne!(datagram_key(&[9; 32]), datagram_key(&[10; 32]));
        assert_ne!(&datagram_key(&[9; 32])[..], &[9u8; 16][..]);
    }
}
