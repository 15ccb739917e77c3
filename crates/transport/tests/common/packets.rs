//! Phalanx-looking datagrams for the filter tests (only the fields the filter reads).
#![allow(dead_code)]

use phalanx_transport::bpf::{
    FLAG_MULTICAST, HEADER_LEN, MAGIC_BYTES, OFF_FLAGS, OFF_JOB_KEY, OFF_SRC, OFF_TARGETS,
};

/// A unicast datagram of job `key` from `src`, with `tag` as its first payload byte.
pub fn unicast(key: u64, src: u32, tag: u8) -> Vec<u8> {
    let mut p = vec![0u8; HEADER_LEN as usize + 1];
    p[..2].copy_from_slice(&MAGIC_BYTES);
    p[2] = 1; // version
    p[3] = 1; // kind
    let k = OFF_JOB_KEY as usize;
    p[k..k + 8].copy_from_slice(&key.to_le_bytes());
    let s = OFF_SRC as usize;
    p[s..s + 4].copy_from_slice(&src.to_le_bytes());
    p[HEADER_LEN as usize] = tag;
    p
}

/// A multicast datagram of job `key` (group of `size` ranks) from `src` to `targets`:
/// header, target bitmap at [`OFF_TARGETS`], one u32 counter per target, then `tag`.
pub fn multicast(key: u64, src: u32, size: u32, targets: &[u32], tag: u8) -> Vec<u8> {
    let mut p = unicast(key, src, 0);
    p.truncate(HEADER_LEN as usize);
    p[OFF_FLAGS as usize] |= FLAG_MULTICAST;
    assert_eq!(p.len(), OFF_TARGETS as usize);
    let mut bitmap = vec![0u8; size.div_ceil(8) as usize];
    for &t in targets {
        bitmap[(t / 8) as usize] |= 1 << (t % 8);
    }
    p.extend_from_slice(&bitmap);
    for r in 0..size {
        p.extend_from_slice(
            &(if targets.contains(&r) {
                100 + r
            } else {
                u32::MAX
            })
            .to_le_bytes(),
        );
    }
    p.push(tag);
    p
}

/// The tag (last byte) of a datagram built here.
pub fn tag(d: &[u8]) -> u8 {
    *d.last().expect("empty datagram")
}
