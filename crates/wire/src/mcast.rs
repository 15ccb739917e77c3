//! The URTP multicast extension (packets with [`flags::MULTICAST`]).
//!
//! Layout, starting at the fixed offset [`OFF_TARGETS`] (= [`HEADER_LEN`], the start of
//! the extension area; a kernel BPF filter tests the local rank's bit there):
//!
//! * the **target bitmap**: [`bitmap_len`]`(size)` = ⌈size/8⌉ bytes for a job of `size`
//!   ranks; rank `r` is bit `1 << (r % 8)` of byte `r / 8`; bits at or beyond `size`
//!   must be zero;
//! * one **u32 LE counter per target**, in increasing rank order: the value of the
//!   (sender, target) counter this packet occupies. Only targets carry counters, so the
//!   extension is `⌈size/8⌉ + 4·targets` bytes and `ext_len` covers exactly that.
//!
//! [`TargetsView::new`] validates an extension against the job size and never panics;
//! [`emit`] writes one.

use crate::{flags, Packet, HEADER_LEN};

/// Offset of the target bitmap in the datagram (the start of the extension area).
pub const OFF_TARGETS: usize = HEADER_LEN;

/// Bytes of the target bitmap for a job of `size` ranks.
pub fn bitmap_len(size: u32) -> usize {
    (size as usize).div_ceil(8)
}

/// Extension length for a job of `size` ranks and `targets` targets.
pub fn ext_len(size: u32, targets: usize) -> usize {
    bitmap_len(size) + 4 * targets
}

/// Why a multicast extension is malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McastError {
    /// The packet does not carry [`flags::MULTICAST`].
    NotMulticast,
    /// The extension is shorter than the bitmap or its length does not match the
    /// number of targets.
    Length,
    /// A bit at or beyond the job size is set.
    RankOutOfRange,
    /// The bitmap names no target.
    NoTargets,
}

impl core::fmt::Display for McastError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            McastError::NotMulticast => "not a multicast packet",
            McastError::Length => "multicast extension length mismatch",
            McastError::RankOutOfRange => "multicast target beyond the job size",
            McastError::NoTargets => "multicast packet without targets",
        })
    }
}

impl std::error::Error for McastError {}

/// A validated view of a multicast extension. No method panics.
#[derive(Debug, Clone, Copy)]
pub struct TargetsView<'a> {
    bitmap: &'a [u8],
    counters: &'a [u8],
    size: u32,
}

impl<'a> TargetsView<'a> {
    /// Validates `ext` (the extension bytes) for a job of `size` ranks.
    pub fn new(ext: &'a [u8], size: u32) -> Result<Self, McastError> {
        let bl = bitmap_len(size);
        if ext.len() < bl {
            return Err(McastError::Length);
        }
        let (bitmap, counters) = ext.split_at(bl);
        if size & 7 != 0 {
            if let Some(&last) = bitmap.last() {
                if last >> (size & 7) != 0 {
                    return Err(McastError::RankOutOfRange);
                }
            }
        }
        let n: usize = bitmap.iter().map(|b| b.count_ones() as usize).sum();
        if n == 0 {
            return Err(McastError::NoTargets);
        }
        if counters.len() != 4 * n {
            return Err(McastError::Length);
        }
        Ok(TargetsView {
            bitmap,
            counters,
            size,
        })
    }

    /// The extension of `pkt` (which must carry [`flags::MULTICAST`]).
    pub fn of_packet(pkt: &Packet<'a>, size: u32) -> Result<Self, McastError> {
        if pkt.flags() & flags::MULTICAST == 0 {
            return Err(McastError::NotMulticast);
        }
        TargetsView::new(pkt.extension(), size)
    }

    /// The job size the view was validated for.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Number of targets.
    pub fn len(&self) -> usize {
        self.counters.len() / 4
    }

    /// Never true for a validated view (kept for API symmetry).
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// `rank` is a target.
    pub fn contains(&self, rank: u32) -> bool {
        bitmap_has(self.bitmap, rank)
    }

    /// The counter this packet occupies in the (sender, `rank`) stream, if `rank` is
    /// a target.
    pub fn counter(&self, rank: u32) -> Option<u32> {
        if !self.contains(rank) {
            return None;
        }
        let byte = (rank / 8) as usize;
        let below: usize = self.bitmap[..byte]
            .iter()
            .map(|b| b.count_ones() as usize)
            .sum::<usize>()
            + (self.bitmap[byte] & ((1u8 << (rank % 8)) - 1)).count_ones() as usize;
        let c = self.counters.get(4 * below..4 * below + 4)?;
        Some(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }

    /// (rank, counter) of every target in increasing rank order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + 'a {
        let bitmap = self.bitmap;
        let counters = self.counters;
        (0..bitmap.len() as u32 * 8)
            .filter(move |&r| bitmap_has(bitmap, r))
            .zip(counters.chunks_exact(4))
            .map(|(r, c)| (r, u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
    }
}

/// Bit `rank` of a target bitmap (false beyond its end).
pub fn bitmap_has(bitmap: &[u8], rank: u32) -> bool {
    bitmap
        .get((rank / 8) as usize)
        .is_some_and(|b| b & (1 << (rank % 8)) != 0)
}

/// What the kernel filter checks: `datagram` is a multicast packet whose bitmap (read
/// at [`OFF_TARGETS`]) has `rank`'s bit. False for short or non-multicast datagrams.
pub fn datagram_targets(datagram: &[u8], rank: u32) -> bool {
    let is_mcast = datagram
        .get(crate::OFF_FLAGS)
        .is_some_and(|f| f & flags::MULTICAST != 0);
    is_mcast
        && datagram
            .get(OFF_TARGETS..)
            .is_some_and(|b| bitmap_has(b, rank))
}

/// Writes a multicast extension for a job of `size` ranks into the start of `out`:
/// `entries` are (rank, counter) pairs in strictly increasing rank order. Returns the
/// bytes written ([`ext_len`]), or `None` (with `out` partly written) if `out` is too
/// short, a rank is `>= size`, the ranks are not increasing or there is no entry.
pub fn emit(
    out: &mut [u8],
    size: u32,
    entries: impl IntoIterator<Item = (u32, u32)>,
) -> Option<usize> {
    let bl = bitmap_len(size);
    out.get_mut(..bl)?.fill(0);
    let mut n = 0usize;
    let mut prev: Option<u32> = None;
    for (r, c) in entries {
        if r >= size || prev.is_some_and(|p| p >= r) {
            return None;
        }
        prev = Some(r);
        out[(r / 8) as usize] |= 1 << (r % 8);
        out.get_mut(bl + 4 * n..bl + 4 * n + 4)?
            .copy_from_slice(&c.to_le_bytes());
        n += 1;
    }
    (n > 0).then_some(bl + 4 * n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    fn mcast_datagram(size: u32, entries: &[(u32, u32)], payload: &[u8]) -> Vec<u8> {
        let el = ext_len(size, entries.len());
        let mut h = Header::new(Kind::UrtpData, 1, 0);
        h.flags = flags::MULTICAST;
        h.ext_len = el as u16;
        let mut rest = vec![0u8; el];
        assert_eq!(emit(&mut rest, size, entries.iter().copied()), Some(el));
        rest.extend_from_slice(payload);
        h.to_datagram(&rest)
    }

    #[test]
    fn round_trip_and_fixed_offset() {
        for size in [1u32, 2, 7, 8, 9, 33, 300] {
            let entries: Vec<(u32, u32)> = (0..size)
                .filter(|r| r % 3 != 1)
                .map(|r| (r, r.wrapping_mul(7) ^ 0xdead_0000))
                .collect();
            let d = mcast_datagram(size, &entries, b"xyz");
            let p = Packet::new_checked(&d).unwrap();
            assert_eq!(p.kind(), Kind::UrtpData);
            assert_eq!(p.payload(), b"xyz");
            let v = TargetsView::of_packet(&p, size).unwrap();
            assert_eq!(v.len(), entries.len());
            assert_eq!(v.iter().collect::<Vec<_>>(), entries);
            for r in 0..size + 9 {
                let want = entries.iter().find(|e| e.0 == r).map(|e| e.1);
                assert_eq!(v.counter(r), want);
                assert_eq!(v.contains(r), want.is_some());
                assert_eq!(datagram_targets(&d, r), want.is_some());
            }
        }
    }

    #[test]
    fn rejects_malformed() {
        let d = mcast_datagram(10, &[(1, 5), (9, 6)], b"");
        let p = Packet::new_checked(&d).unwrap();
        assert!(TargetsView::of_packet(&p, 10).is_ok());
        // Too small a job: rank 9 is out of range, or the lengths disagree.
        assert!(TargetsView::of_packet(&p, 9).is_err());
        assert!(TargetsView::of_packet(&p, 17).is_err());
        let ext = p.extension();
        assert_eq!(
            TargetsView::new(&ext[..1], 10).unwrap_err(),
            McastError::Length
        );
        assert_eq!(
            TargetsView::new(&ext[..9], 10).unwrap_err(),
            McastError::Length
        );
        assert_eq!(
            TargetsView::new(&[0, 0], 10).unwrap_err(),
            McastError::NoTargets
        );
        assert_eq!(
            TargetsView::new(&[0, 4, 0, 0, 0, 0], 10).unwrap_err(),
            McastError::RankOutOfRange
        );
        let mut u = Header::new(Kind::UrtpData, 1, 0).to_datagram(&[]);
        assert!(!datagram_targets(&u, 0));
        u[OFF_FLAGS] = flags::MULTICAST;
        assert!(!datagram_targets(&u, 0));
        assert!(!datagram_targets(&u[..3], 0));
        let p = Packet::new_checked(&u).unwrap();
        assert_eq!(
            TargetsView::of_packet(&p, 4).unwrap_err(),
            McastError::Length
        );
        // Emit refuses bad input.
        let mut out = [0u8; 64];
        assert_eq!(emit(&mut out, 8, [(3, 1), (3, 2)]), None);
        assert_eq!(emit(&mut out, 8, [(8, 1)]), None);
        assert_eq!(emit(&mut out, 8, []), None);
        assert_eq!(emit(&mut out[..4], 8, [(0, 1)]), None);
    }

    #[test]
    fn every_byte_mutation_is_safe() {
        let d = mcast_datagram(20, &[(0, 1), (5, 2), (19, 3)], b"pp");
        for i in 0..d.len() {
            for b in [0u8, 1, 0x10, 0x80, 0xff] {
                let mut m = d.clone();
                m[i] = b;
                let _ = datagram_targets(&m, 5);
                if let Ok(p) = Packet::new_checked(&m) {
                    for size in [0, 1, 19, 20, 21, 64] {
                        if let Ok(v) = TargetsView::of_packet(&p, size) {
                            let _ = (v.iter().count(), v.counter(5), v.counter(u32::MAX));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn urtp_kinds_decode() {
        for k in [Kind::UrtpData, Kind::UrtpAck, Kind::UrtpReq] {
            assert_eq!(Kind::from_u8(k as u8), Some(k));
        }
    }
}
