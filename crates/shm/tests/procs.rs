//! Rings, flow control, wake-ups, single copy and segment lifetime across real processes.

mod common;

use std::time::Duration;

use common::{child, fill, fnv, poll_in, run_ranks, wait_for, Ctx};
use phalanx_shm::{read_remote, ShmConfig, ShmSegment, ShmTransport, SingleCopy, FAST_FRAME};

const LIMIT: Duration = Duration::from_secs(240);

const SIZES: &[usize] = &[
    0, 1, 7, 8, 47, 48, 55, 56, 57, 63, 64, 65, 120, 1000, 4096, 9000, 30_000, 65_528,
];

fn small_ring() -> ShmConfig {
    ShmConfig {
        ring_bytes: 64 << 10,
        rings_budget: usize::MAX,
        ..ShmConfig::default()
    }
}

/// Every rank sends `per_peer` frames of cycling sizes to every other rank, verifying all
/// it receives (order, length, content); no rank ever blocks (full rings are retried).
fn exchange(ctx: Ctx, per_peer: u64) {
    let mut t = ctx.connect(small_ring());
    assert_eq!(t.max_frame(), 65_528);
    let me = t.rank();
    let peers = t.peers().to_vec();
    let np = peers.len();
    let mut next_tx = vec![0u64; np];
    let mut next_rx = vec![0u64; np];
    let mut buf = vec![0u8; 1 << 16];
    let mut want = vec![0u8; 1 << 16];
    let mut sum = 0u64;
    let mut idle = 0u32;
    while next_tx.iter().chain(&next_rx).any(|c| *c < per_peer) {
        let mut progress = false;
        for (s, p) in peers.iter().enumerate() {
            while next_tx[s] < per_peer {
                let len = SIZES[(next_tx[s] as usize) % SIZES.len()];
                // In-place path for odd frames, copying `send` for even ones.
                let ok = if next_tx[s] % 2 == 1 {
                    match t.reserve(*p, len).unwrap() {
                        Some(b) => {
                            fill(me, *p, next_tx[s], b);
                            t.commit(*p, len).unwrap();
                            true
                        }
                        None => false,
                    }
                } else {
                    fill(me, *p, next_tx[s], &mut buf[..len]);
                    t.send(*p, &buf[..len]).unwrap()
                };
                if !ok {
                    break;
                }
                next_tx[s] += 1;
                progress = true;
            }
        }
        let n = t
            .recv(&mut |from, frame| {
                let s = peers.binary_search(&from).unwrap();
                let idx = next_rx[s];
                let len = SIZES[(idx as usize) % SIZES.len()];
                assert_eq!(frame.len(), len, "frame {idx} {from}→{me}: length");
                fill(from, me, idx, &mut want[..len]);
                assert!(frame == &want[..len], "frame {idx} {from}→{me}: content");
                sum = sum.wrapping_add(fnv(frame));
                next_rx[s] += 1;
                true
            })
            .unwrap();
        progress |= n > 0;
        if progress {
            idle = 0;
        } else {
            idle += 1;
            if idle > 64 {
                std::thread::yield_now();
            }
        }
    }
    assert!(!t.poll_readable());
    eprintln!("rank {me}: exchanged {per_peer} frames with each of {np} peers, checksum {sum:#x}");
}

#[test]
fn frames_of_many_sizes_2_procs() {
    if let Some(ctx) = child("frames_of_many_sizes_2_procs") {
        return exchange(ctx, 3000);
    }
    run_ranks("frames_of_many_sizes_2_procs", 2, LIMIT, &[]);
}

#[test]
fn frames_of_many_sizes_4_procs() {
    if let Some(ctx) = child("frames_of_many_sizes_4_procs") {
        return exchange(ctx, 1500);
    }
    run_ranks("frames_of_many_sizes_4_procs", 4, LIMIT, &[]);
}

/// Rank 0 fills the ring until `send` says full, sleeps until rank 1 drains it, resumes.
#[test]
fn full_ring_blocks_producer_and_resumes() {
    const EXTRA: u64 = 5000;
    if let Some(ctx) = child("full_ring_blocks_producer_and_resumes") {
        let mut t = ctx.connect(ShmConfig {
            ring_bytes: 4096,
            rings_budget: usize::MAX,
            ..ShmConfig::default()
        });
        let mut frame = [0u8; 100];
        if ctx.rank == 0 {
            let mut i = 0u64;
            loop {
                frame[..8].copy_from_slice(&i.to_le_bytes());
                if !t.send(1, &frame).unwrap() {
                    break;
                }
                i += 1;
            }
            assert!(
                i > 0 && i < 4096 / 100,
                "ring of 4 KiB took {i} frames of 100 bytes"
            );
            // Still full: nobody consumes until we announce we sleep.
            assert!(!t.send(1, &frame).unwrap());
            let mut wakes = 0;
            let total = i + EXTRA;
            while i < total {
                frame[..8].copy_from_slice(&i.to_le_bytes());
                if t.send(1, &frame).unwrap() {
                    i += 1;
                    continue;
                }
                if t.prepare_sleep() {
                    assert!(
                        poll_in(t.fd(), 30_000),
                        "producer not woken within 30 s (hang guard)"
                    );
                    wakes += 1;
                }
            }
            assert!(wakes >= 1);
            while !t.send(1, b"e").unwrap() {}
            eprintln!("producer: {total} frames sent, woken {wakes} times");
        } else {
            wait_for("producer to sleep on the full ring", || {
                t.peer_sleeping(0).unwrap()
            });
            // The producer re-checks the ring once more after raising its flag (see the
            // crate docs on sleeping): give it time to really fall asleep.
            std::thread::sleep(std::time::Duration::from_millis(50));
            let mut next = 0u64;
            let mut end = false;
            while !end {
                t.recv(&mut |_, f| {
                    if f.len() == 1 {
                        end = true;
                        return true;
                    }
                    assert_eq!(u64::from_le_bytes(f[..8].try_into().unwrap()), next);
                    next += 1;
                    true
                })
                .unwrap();
                std::thread::yield_now();
            }
            assert!(next > EXTRA);
        }
        return;
    }
    run_ranks("full_ring_blocks_producer_and_resumes", 2, LIMIT, &[]);
}

/// Both ranks sleep on their eventfd between messages; each message wakes the sleeper.
#[test]
fn sleeping_consumer_is_woken() {
    const ROUNDS: u32 = 300;
    if let Some(ctx) = child("sleeping_consumer_is_woken") {
        let mut t = ctx.connect(ShmConfig::default());
        let other = 1 - ctx.rank;
        let mut wakes = 0;
        let mut sleeps = 0;
        for round in 0..ROUNDS {
            let my_turn = (round % 2) == ctx.rank;
            if my_turn {
                // Send only once the peer has announced sleep, so the wake path is exercised.
                wait_for("peer to sleep", || t.peer_sleeping(other).unwrap());
                // The consumer re-checks the rings once more after raising its flag (see the
                // crate docs on sleeping): let it fall asleep for real.
                std::thread::sleep(std::time::Duration::from_millis(2));
                assert!(t.send(other, &round.to_le_bytes()).unwrap());
            } else {
                let mut got = None;
                loop {
                    t.recv(&mut |_, f| {
                        got = Some(u32::from_le_bytes(f.try_into().unwrap()));
                        true
                    })
                    .unwrap();
                    if got.is_some() {
                        break;
                    }
                    if t.prepare_sleep() {
                        sleeps += 1;
                        assert!(
                            poll_in(t.fd(), 30_000),
                            "consumer not woken within 30 s (hang guard)"
                        );
                        wakes += 1;
                    }
                }
                assert_eq!(got, Some(round));
            }
        }
        assert!(sleeps > 0 && wakes == sleeps);
        eprintln!("rank {}: slept and was woken {wakes} times", ctx.rank);
        return;
    }
    run_ranks("sleeping_consumer_is_woken", 2, LIMIT, &[]);
}

const BIG: usize = 8 << 20;
const HDR: usize = 16;

/// Rank 0 offers an 8 MiB buffer to rank 1 twice: by descriptor (single copy, when
/// `can_be_read_by`) and by chunks through the ring (two-copy fallback, always).
fn big_transfer(ctx: Ctx, cfg: ShmConfig, expect: Option<SingleCopy>) {
    let mut t = ctx.connect(cfg);
    if let Some(e) = expect {
        assert_eq!(t.single_copy(), e, "rank {}", ctx.rank);
    }
    eprintln!("rank {}: single copy {:?}", ctx.rank, t.single_copy());
    if ctx.rank == 0 {
        let mut data = vec![0u8; BIG];
        fill(0, 1, 77, &mut data);
        let single = t.can_be_read_by(1).unwrap();
        if single {
            let mut d = [0u8; 24];
            d[..8].copy_from_slice(&(std::process::id() as u64).to_le_bytes());
            d[8..16].copy_from_slice(&(data.as_ptr() as u64).to_le_bytes());
            d[16..].copy_from_slice(&(data.len() as u64).to_le_bytes());
            while !t.send(1, &d).unwrap() {}
            let mut done = false;
            while !done {
                t.recv(&mut |_, f| {
                    assert_eq!(f, b"done");
                    done = true;
                    true
                })
                .unwrap();
            }
        }
        let mut off = 0;
        let mut done = false;
        while off < BIG {
            off = t
                .send_chunked(1, &data, off, 32 << 10, HDR, &mut |o, n, h| {
                    h[..8].copy_from_slice(&(o as u64).to_le_bytes());
                    h[8..].copy_from_slice(&(n as u64).to_le_bytes());
                })
                .unwrap();
            t.recv(&mut |_, f| {
                done |= f == b"done";
                true
            })
            .unwrap();
        }
        // Keep `data` alive until the receiver confirms.
        while !done {
            t.recv(&mut |_, f| {
                done |= f == b"done";
                true
            })
            .unwrap();
        }
    } else {
        let mut want = vec![0u8; BIG];
        fill(0, 1, 77, &mut want);
        let mut dst = vec![0u8; BIG];
        if t.can_read_from(0).unwrap() {
            let mut d = None;
            while d.is_none() {
                t.recv(&mut |_, f| {
                    d = Some(f.to_vec());
                    true
                })
                .unwrap();
            }
            let d = d.unwrap();
            let word = |i: usize| u64::from_le_bytes(d[i..i + 8].try_into().unwrap());
            assert_eq!(word(0) as i32, t.peer_pid(0).unwrap());
            read_remote(
                word(0) as i32,
                word(8) as usize,
                &mut dst[..word(16) as usize],
            )
            .unwrap();
            assert!(dst == want, "single-copy bytes differ");
            while !t.send(0, b"done").unwrap() {}
            dst.fill(0);
        }
        let mut got = 0;
        while got < BIG {
            t.recv(&mut |_, f| {
                let o = u64::from_le_bytes(f[..8].try_into().unwrap()) as usize;
                let n = u64::from_le_bytes(f[8..16].try_into().unwrap()) as usize;
                dst[o..o + n].copy_from_slice(&f[HDR..]);
                got += n;
                true
            })
            .unwrap();
        }
        assert_eq!(fnv(&dst), fnv(&want), "two-copy bytes differ");
        while !t.send(0, b"done").unwrap() {}
    }
}

#[test]
fn large_transfer_single_copy_and_fallback() {
    if let Some(ctx) = child("large_transfer_single_copy_and_fallback") {
        return big_transfer(ctx, ShmConfig::default(), None);
    }
    run_ranks("large_transfer_single_copy_and_fallback", 2, LIMIT, &[]);
}

#[test]
fn large_transfer_single_copy_disabled() {
    if let Some(ctx) = child("large_transfer_single_copy_disabled") {
        let cfg = ShmConfig {
            single_copy: false,
            ..ShmConfig::default()
        };
        return big_transfer(ctx, cfg, Some(SingleCopy::None));
    }
    run_ranks("large_transfer_single_copy_disabled", 2, LIMIT, &[]);
}

/// Drop CAP_SYS_PTRACE from the effective set (no-op when not held).
fn drop_ptrace_cap() {
    #[repr(C)]
    struct Hdr {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Hdr {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget/capset with a v3 header and two data structs, as the ABI requires.
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
        d[0].effective &= !(1 << 19); // CAP_SYS_PTRACE
        assert_eq!(libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()), 0);
    }
}

/// Rank 0 makes itself non-dumpable and rank 1 gives up CAP_SYS_PTRACE: rank 1's reads of
/// rank 0 now fail with EPERM, which connect must detect (the other direction still works).
#[test]
fn eperm_is_detected_and_fallback_used() {
    if let Some(ctx) = child("eperm_is_detected_and_fallback_used") {
        if ctx.rank == 0 {
            // SAFETY: plain prctl on this process.
            assert_eq!(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) }, 0);
        } else {
            drop_ptrace_cap();
        }
        // Both ranks' views: rank 1 cannot read rank 0.
        let cfg = ShmConfig::default();
        return big_transfer(ctx, cfg, Some(SingleCopy::Partial));
    }
    run_ranks("eperm_is_detected_and_fallback_used", 2, LIMIT, &[]);
}

#[test]
fn too_small_segment_fails_at_create() {
    // A size limit (simulated small /dev/shm).
    let name = format!("phalanx-test-{}-limit", std::process::id());
    let cfg = ShmConfig {
        ring_bytes: 1 << 20,
        rings_budget: usize::MAX,
        size_limit: Some(1 << 20),
        ..ShmConfig::default()
    };
    let e = ShmSegment::create(&name, &[0, 1], cfg)
        .err()
        .expect("must fail");
    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull);
    assert!(
        e.to_string().contains("cannot size shared-memory segment"),
        "{e}"
    );
    assert!(!phalanx_shm::private_dir(std::path::Path::new("/dev/shm"))
        .unwrap()
        .join(&name)
        .exists());

    // A real posix_fallocate failure: more than the whole of /dev/shm.
    // SAFETY: statvfs into a zeroed struct; the path literal is NUL-terminated.
    let fs_bytes = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c"/dev/shm".as_ptr(), &mut st), 0);
        st.f_blocks as u64 * st.f_frsize as u64
    };
    let n = (2u32..1024)
        .find(|n| u64::from(n * (n - 1)) << 30 > fs_bytes)
        .unwrap();
    let ranks: Vec<u32> = (0..n).collect();
    let cfg = ShmConfig {
        ring_bytes: 1 << 30,
        rings_budget: usize::MAX,
        ..ShmConfig::default()
    };
    let e = ShmSegment::create(&name, &ranks, cfg)
        .err()
        .expect("must fail");
    eprintln!("{e}");
    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull);
    assert!(e.to_string().contains("posix_fallocate"), "{e}");
    assert!(!phalanx_shm::private_dir(std::path::Path::new("/dev/shm"))
        .unwrap()
        .join(&name)
        .exists());
}

#[test]
fn creator_unlinks_when_attach_never_completes() {
    let name = format!("phalanx-test-{}-orphan", std::process::id());
    let path = phalanx_shm::private_dir(std::path::Path::new("/dev/shm"))
        .unwrap()
        .join(&name);
    let seg = ShmSegment::create(&name, &[3, 5], ShmConfig::default()).unwrap();
    assert!(path.exists());
    assert_eq!(seg.attached(), 1);
    // Connect is bounded: rank 5 never comes.
    let cfg = ShmConfig {
        connect_timeout: Duration::from_millis(200),
        ..ShmConfig::default()
    };
    let e = ShmSegment::open(&format!("{name}-missing"), &[3, 5], 5, cfg.clone())
        .err()
        .unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    assert!(e.to_string().contains("lowest local rank 3"), "{e}");
    drop(seg);
    assert!(!path.exists());
}

#[test]
fn single_rank_and_misuse() {
    let name = format!("phalanx-test-{}-single", std::process::id());
    let mut t = ShmTransport::connect(&name, &[7], 7, ShmConfig::default()).unwrap();
    assert!(!t.segment().path().exists());
    assert!(t.peers().is_empty());
    assert_eq!(t.recv(&mut |_, _| true).unwrap(), 0);
    assert!(t.send(8, b"x").is_err());
    assert!(t.prepare_sleep());
    t.finish_sleep();
    assert_eq!(FAST_FRAME, 56);
    let bad = ShmConfig {
        ring_bytes: 3000,
        rings_budget: usize::MAX,
        ..ShmConfig::default()
    };
    assert!(ShmSegment::create(&name, &[0, 1], bad).is_err());
}
