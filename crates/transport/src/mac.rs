//! Datagram authentication: every UDP datagram of a job carries a MAC under a key
//! derived from the job's secret, so that nothing a stranger sends is taken, even with
//! the job key read off the wire and the sender's address forged.
//!
//! Contract:
//! * The construction is AEGIS (draft-irtf-cfrg-aegis-aead), 128-bit key, nonce and tag,
//!   from `libaegis` through the `aegis` crate (AES-NI or VAES picked at run time), by
//!   the datagram's length, which both ends know: up to [`NARROW_MAX`] bytes
//!   AEGIS-128L's AEAD with the datagram as associated data and no plaintext, longer
//!   ones AEGISMAC-128X2 (the MAC mode, two lanes in 256-bit registers). Both take a
//!   datagram in pieces ([`Seal::trailer_parts`]: a header, then a payload left in the
//!   sender's own buffer): the MAC mode absorbs them where they lie, and a short
//!   datagram's pieces are joined on the stack first (the AEAD takes its associated data
//!   whole). Measured 2026-11-28 on this 2-core Zen 3 (`mac_speed` example), ns per
//!   sealing, AEGIS-128L AEAD / AEGISMAC-128L: 64 B 56 / 87, 1444 B 148 / 186; at
//!   65 000 B AEGIS-128X2 AEAD 2330 / AEGISMAC-128X2 1930.
//!   Why AEGIS: the MAC is on every datagram's path, both ends, and on a Zen 3 core
//!   (`mac_speed` example) AES-128-GMAC from AWS-LC sealed a 1444-byte datagram in
//!   469 ns and 65 000 bytes in 13.4 µs (4.8 GB/s: no 256-bit carry-less multiply path
//!   without AVX-512), AEGIS-128L in 132 ns and AEGIS-128X2 65 000 bytes in 2.3 µs
//!   (28 GB/s). The key is [`datagram_key`] of the job's 32-byte secret (BLAKE3's key
//!   derivation, with its own context string); the secret itself never travels. The MAC
//!   mode takes a key of its own, derived from that one the same way, so that no key
//!   serves two constructions.
//! * A sealed datagram is the datagram followed by a [`TRAILER`]-byte trailer: the
//!   sealer's rank (u32 LE), its counter (u64 LE) and the 16-byte tag. The nonce is
//!   (rank, counter) followed by four zero bytes: every rank counts its own sends from 0
//!   and never repeats a value, so no (key, nonce) pair seals two different datagrams (a
//!   datagram sent to several destinations is one sealing).
//! * [`Seal::open`] returns the datagram without its trailer when the tag is right, else
//!   `None` (the caller drops and counts it). A replayed datagram opens; the protocols
//!   above drop what their windows have seen (go-back-n, URTP and careful sequence
//!   numbers).

use aegis::aegis128l::Aegis128L;
use aegis::aegis128x2::Aegis128X2Mac;

/// Bytes after every sealed datagram: rank (4), counter (8), tag (16).
pub const TRAILER: usize = 28;
const TAG: usize = 16;

/// Longest datagram sealed with AEGIS-128L's AEAD; longer ones take AEGISMAC-128X2
/// under its own key (module docs). Measured on a Zen 3 core with both as AEADs, ns
/// AEGIS-128L / AEGIS-128X2: 64 B 48 / 66, 1444 B 132 / 128, 8192 B
/// 500 / 346. The two are even around a 1500-byte MTU's datagrams, where either would
/// do; the switch sits above them, so every datagram of a veth-sized path takes one
/// construction and 128L's shorter start-up serves the small control datagrams.
pub const NARROW_MAX: usize = 2048;

/// The datagram key of a job's secret (module docs).
pub fn datagram_key(secret: &[u8; 32]) -> [u8; 16] {
    let k = blake3::derive_key("phalanx 2026-11 datagram MAC (AEGIS-128L/128X2)", secret);
    let mut out = [0u8; 16];
    out.copy_from_slice(&k[..16]);
    out
}

/// The 16-byte nonce of a trailer: its first 12 bytes (rank and counter), then zeros.
fn nonce(trailer: &[u8]) -> Option<[u8; 16]> {
    let mut n = [0u8; 16];
    n[..12].copy_from_slice(trailer.get(..12)?);
    Some(n)
}

/// The tag of the datagram made of `parts` (in order) under `key` (the MAC mode under
/// `wide`) and `nonce` (module docs: the construction by total length).
fn tag(key: &[u8; 16], wide: &[u8; 16], nonce: &[u8; 16], parts: &[&[u8]]) -> [u8; TAG] {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > NARROW_MAX {
        let mut m = Aegis128X2Mac::<TAG>::new_with_nonce(wide, nonce);
        for p in parts {
            m.update(p);
        }
        return m.finalize();
    }
    match parts {
        [] => Aegis128L::<TAG>::new(key, nonce).encrypt_in_place(&mut [], &[]),
        [one] => Aegis128L::<TAG>::new(key, nonce).encrypt_in_place(&mut [], one),
        _ => {
            let mut joined = [0u8; NARROW_MAX];
            let mut at = 0;
            for p in parts {
                joined[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            Aegis128L::<TAG>::new(key, nonce).encrypt_in_place(&mut [], &joined[..at])
        }
    }
}

/// The MAC mode's key of a datagram key (module docs).
fn wide_key(key: &[u8; 16]) -> [u8; 16] {
    let k = blake3::derive_key("phalanx 2026-11 datagram MAC, AEGISMAC-128X2 key", key);
    let mut out = [0u8; 16];
    out.copy_from_slice(&k[..16]);
    out
}

/// One rank's sealing and opening state.
pub struct Seal {
    key: [u8; 16],
    /// The MAC mode's key ([`wide_key`]).
    wide: [u8; 16],
    rank: u32,
    counter: u64,
}

impl Seal {
    /// Seals as `rank` under `key` (from [`datagram_key`]).
    pub fn new(key: &[u8; 16], rank: u32) -> Seal {
        Seal {
            key: *key,
            wide: wide_key(key),
            rank,
            counter: 0,
        }
    }

    /// The same sealer under another key, its counter going on (a nonce is never
    /// reused by one rank, whatever the keys).
    pub fn rekeyed(&self, key: &[u8; 16]) -> Seal {
        Seal {
            key: *key,
            wide: wide_key(key),
            rank: self.rank,
            counter: self.counter,
        }
    }

    /// The trailer that authenticates `datagram` (a fresh nonce each call).
    pub fn trailer(&mut self, datagram: &[u8]) -> [u8; TRAILER] {
        self.trailer_parts(&[datagram])
    }

    /// The trailer that authenticates the datagram made of `parts`, in order (a fresh
    /// nonce each call): the same as [`trailer`](Self::trailer) of their concatenation.
    pub fn trailer_parts(&mut self, parts: &[&[u8]]) -> [u8; TRAILER] {
        let counter = self.counter;
        self.counter += 1;
        let mut t = [0u8; TRAILER];
        t[..4].copy_from_slice(&self.rank.to_le_bytes());
        t[4..12].copy_from_slice(&counter.to_le_bytes());
        let mut n = [0u8; 16];
        n[..12].copy_from_slice(&t[..12]);
        t[12..].copy_from_slice(&tag(&self.key, &self.wide, &n, parts));
        t
    }

    /// `sealed` without its trailer if its tag is right (module docs).
    pub fn open<'a>(&self, sealed: &'a [u8]) -> Option<&'a [u8]> {
        let body = sealed.len().checked_sub(TRAILER)?;
        let (datagram, t) = sealed.split_at(body);
        let n = nonce(t)?;
        let want: [u8; TAG] = t[12..].try_into().ok()?;
        let ok = if datagram.len() <= NARROW_MAX {
            Aegis128L::<TAG>::new(&self.key, &n)
                .decrypt_in_place(&mut [], &want, datagram)
                .is_ok()
        } else {
            let mut m = Aegis128X2Mac::<TAG>::new_with_nonce(&self.wide, &n);
            m.update(datagram);
            m.verify(&want).is_ok()
        };
        ok.then_some(datagram)
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
        // The tags are AEGIS's (draft-irtf-cfrg-aegis-aead): AEGIS-128L test vector 2 (no
        // message, no associated data) through a trailer (its nonce is rank 0x00020010,
        // counter 0), and the AEGISMAC-128X2 test vector (35 bytes of data), absorbed in
        // pieces: the wire does not depend on the library or on how a datagram is cut.
        let unhex = |h: &str| -> Vec<u8> {
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
                .collect()
        };
        let vk: [u8; 16] = unhex("10010000000000000000000000000000")
            .try_into()
            .expect("16");
        let mut sealer = Seal::new(&vk, 0x0002_0010);
        assert_eq!(
            &sealer.trailer(&[])[12..],
            &unhex("c2b879a67def9d74e6c14f708bbcc9b4")[..]
        );
        let vn: [u8; 16] = unhex("10000200000000000000000000000000")
            .try_into()
            .expect("16");
        let vdata = unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122");
        for cut in [0, 1, 16, 17, 35] {
            let (x, y) = vdata.split_at(cut);
            let mut m = Aegis128X2Mac::<TAG>::new_with_nonce(&vk, &vn);
            m.update(x);
            m.update(y);
            assert_eq!(
                &m.finalize()[..],
                &unhex("6873ee34e6b5c59143b6d35c5e4f2c6e")[..],
                "128X2 cut at {cut}"
            );
            // A short datagram in pieces has the tag of its whole.
            assert_eq!(tag(&vk, &vk, &vn, &[x, y]), tag(&vk, &vk, &vn, &[&vdata]));
        }
        // Both constructions, at the length that switches them, seal and open; a long
        // datagram cut back to the narrow length does not.
        for len in [NARROW_MAX - 1, NARROW_MAX, NARROW_MAX + 1, 65_000] {
            let d: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let sealed = [&d[..], &a.trailer(&d)[..]].concat();
            assert_eq!(b.open(&sealed), Some(&d[..]), "{len} bytes");
            let mut x = sealed.clone();
            x[len / 2] ^= 0x40;
            assert_eq!(b.open(&x), None, "{len} bytes, one bit flipped");
        }
        // Each length takes the construction the module docs say it does, and a datagram
        // sealed in pieces opens whole.
        for (len, wide) in [(NARROW_MAX, false), (NARROW_MAX + 1, true), (65_000, true)] {
            let d: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let t = a.trailer_parts(&[&d[..40], &d[40..]]);
            let n = nonce(&t).expect("12 bytes");
            let want = if wide {
                let mut m = Aegis128X2Mac::<TAG>::new_with_nonce(&wide_key(&key), &n);
                m.update(&d);
                m.finalize()
            } else {
                Aegis128L::<TAG>::new(&key, &n).encrypt_in_place(&mut [], &d)
            };
            assert_eq!(&t[12..], &want[..], "{len} bytes");
            assert_eq!(b.open(&[&d[..], &t[..]].concat()), Some(&d[..]));
        }
        let d = vec![1u8; NARROW_MAX + 1];
        let t = a.trailer(&d);
        assert_eq!(b.open(&[&d[..NARROW_MAX], &t[..]].concat()), None);
        // An empty datagram seals too.
        let t = a.trailer(&[]);
        assert_eq!(b.open(&t), Some(&[][..]));
        // The key depends on the secret, and is not the secret.
        assert_ne!(datagram_key(&[9; 32]), datagram_key(&[10; 32]));
        assert_ne!(&datagram_key(&[9; 32])[..], &[9u8; 16][..]);
    }
}
