//! Soak: two processes each send N small frames (8..=56 bytes, sequence number + pattern)
//! to the other at the same time; every frame is checked on arrival, so a lost, duplicated,
//! reordered or damaged frame fails the test. N = 10 million in release builds, 1 million
//! in debug builds; `PHALANX_SHM_SOAK=<n>` overrides.

mod common;

use std::time::{Duration, Instant};

use common::{child, run_ranks};
use phalanx_shm::ShmConfig;

fn frame_len(seq: u64) -> usize {
    8 + (seq % 49) as usize
}

fn pattern(seq: u64, i: usize) -> u8 {
    (seq as u8).wrapping_mul(31).wrapping_add(i as u8)
}

#[test]
fn soak_small_frames_both_directions() {
    let n: u64 = std::env::var("PHALANX_SHM_SOAK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            1_000_000
        } else {
            10_000_000
        });
    if let Some(ctx) = child("soak_small_frames_both_directions") {
        let mut t = ctx.connect(ShmConfig::default());
        let other = 1 - ctx.rank;
        let (mut sent, mut got) = (0u64, 0u64);
        let mut check = 0u64;
        let start = Instant::now();
        let mut idle = 0u32;
        while sent < n || got < n {
            let before = (sent, got);
            while sent < n {
                let len = frame_len(sent);
                let Some(b) = t.reserve(other, len).unwrap() else {
                    break;
                };
                b[..8].copy_from_slice(&sent.to_le_bytes());
                for (i, x) in b[8..].iter_mut().enumerate() {
                    *x = pattern(sent, i);
                }
                t.commit(other, len).unwrap();
                sent += 1;
                if sent % 256 == 0 {
                    break; // interleave receiving
                }
            }
            t.recv(&mut |_, f| {
                let seq = u64::from_le_bytes(f[..8].try_into().unwrap());
                assert_eq!(seq, got, "rank {}: frame out of sequence", ctx.rank);
                assert_eq!(f.len(), frame_len(seq), "frame {seq}: length");
                for (i, x) in f[8..].iter().enumerate() {
                    assert_eq!(*x, pattern(seq, i), "frame {seq}: byte {i}");
                }
                check = check.wrapping_mul(31).wrapping_add(seq ^ f.len() as u64);
                got += 1;
                true
            })
            .unwrap();
            // Both ranks may share a CPU (other load): give the peer the CPU when stuck.
            if (sent, got) == before {
                idle += 1;
                if idle > 100 {
                    std::thread::yield_now();
                }
            } else {
                idle = 0;
            }
        }
        let dt = start.elapsed();
        eprintln!(
            "rank {}: sent and received {n} frames each way in {dt:?} ({:.1} M frames/s per direction), check {check:#x}",
            ctx.rank,
            n as f64 / dt.as_secs_f64() / 1e6
        );
        return;
    }
    run_ranks(
        "soak_small_frames_both_directions",
        2,
        Duration::from_secs(600),
        &[],
    );
}
