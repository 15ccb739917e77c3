//! Two-process shared-memory ping-pong.
//!
//! `cargo run --release -p phalanx-shm --example shm_pingpong [iterations]`
//!
//! Starts a second copy of itself (rank 1), pins the ranks to CPUs 0 and 1 when there are
//! two, and measures, spinning (no sleeps):
//! * one-way latency of a 1-byte frame (round trip / 2),
//! * a 1 MiB transfer by `process_vm_readv` (descriptor frame → pull → completion frame),
//! * the same 1 MiB through the ring (pipelined two-copy fallback, 32 KiB chunks).

use std::time::Instant;

use phalanx_shm::{read_remote, ShmConfig, ShmTransport};

const ROLE: &str = "PHALANX_SHM_PINGPONG_RANK";
const MIB: usize = 1 << 20;
const CHUNK: usize = 32 << 10;

fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Spin until a frame from `peer` arrives; hand it to `f` and consume it.
fn recv_one(t: &mut ShmTransport, peer: u32, mut f: impl FnMut(&[u8])) {
    loop {
        if let Some(fr) = t.peek(peer).expect("peek") {
            f(fr);
            t.release(peer).expect("release");
            return;
        }
        // No `pause` here: on this CPU it costs more than a cache-line transfer.
    }
}

fn send_spin(t: &mut ShmTransport, peer: u32, frame: &[u8]) {
    while !t.send(peer, frame).expect("send") {
        // No `pause` here: on this CPU it costs more than a cache-line transfer.
    }
}

fn main() {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let (rank, name) = match std::env::var(ROLE) {
        Ok(v) => {
            let (r, n) = v.split_once(':').expect("role");
            (r.parse::<u32>().expect("rank"), n.to_string())
        }
        Err(_) => (0, format!("phalanx-pingpong-{}", std::process::id())),
    };
    let child = (rank == 0).then(|| {
        std::process::Command::new(std::env::current_exe().expect("exe"))
            .arg(iters.to_string())
            .env(ROLE, format!("1:{name}"))
            .spawn()
            .expect("spawn rank 1")
    });
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if ncpu >= 2 {
        pin(rank as usize);
    }
    let mut t = ShmTransport::connect(&name, &[0, 1], rank, ShmConfig::default()).expect("connect");
    let peer = 1 - rank;

    // 1-byte ping-pong.
    let warm = iters / 10;
    let mut start = Instant::now();
    for i in 0..warm + iters {
        if i == warm {
            start = Instant::now();
        }
        if rank == 0 {
            send_spin(&mut t, peer, &[i as u8]);
            recv_one(&mut t, peer, |f| assert_eq!(f, [i as u8]));
        } else {
            recv_one(&mut t, peer, |f| assert_eq!(f, [i as u8]));
            send_spin(&mut t, peer, &[i as u8]);
        }
    }
    let one_way = start.elapsed().as_secs_f64() / (2 * iters) as f64 * 1e6;

    // 1 MiB by process_vm_readv: rank 0 publishes (pid, addr, len), rank 1 pulls, replies.
    let reps = 300;
    let src: Vec<u8> = (0..MIB).map(|i| (i * 7 + 3) as u8).collect();
    let mut dst = vec![0u8; MIB];
    let single = t.can_be_read_by(1).unwrap_or(false) || t.can_read_from(0).unwrap_or(false);
    let mut single_us = f64::NAN;
    let mut pull = 0.0;
    if single {
        for i in 0..reps + 20 {
            if i == 20 {
                start = Instant::now();
            }
            if rank == 0 {
                let mut d = [0u8; 24];
                d[..8].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
                d[8..16].copy_from_slice(&(src.as_ptr() as u64).to_le_bytes());
                d[16..].copy_from_slice(&(src.len() as u64).to_le_bytes());
                send_spin(&mut t, peer, &d);
                recv_one(&mut t, peer, |f| assert_eq!(f, b"done"));
            } else {
                let mut d = [0u64; 3];
                recv_one(&mut t, peer, |f| {
                    for (k, w) in d.iter_mut().enumerate() {
                        *w = u64::from_le_bytes(f[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
                    }
                });
                let t0 = Instant::now();
                read_remote(d[0] as i32, d[1] as usize, &mut dst[..d[2] as usize])
                    .expect("process_vm_readv");
                if i >= 20 {
                    pull += t0.elapsed().as_secs_f64();
                }
                send_spin(&mut t, peer, b"done");
            }
        }
        single_us = start.elapsed().as_secs_f64() / reps as f64 * 1e6;
        if rank == 1 {
            eprintln!(
                "  (rank 1: process_vm_readv itself {:.1} µs per MiB)",
                pull / reps as f64 * 1e6
            );
            assert!(dst == src, "single-copy bytes differ");
        }
    }

    // 1 MiB through the ring (two-copy, pipelined).
    for i in 0..reps + 20 {
        if i == 20 {
            start = Instant::now();
        }
        if rank == 0 {
            let mut off = 0;
            while off < MIB {
                off = t
                    .send_chunked(peer, &src, off, CHUNK, 8, &mut |o, _, h| {
                        h.copy_from_slice(&(o as u64).to_le_bytes())
                    })
                    .expect("send_chunked");
            }
            recv_one(&mut t, peer, |f| assert_eq!(f, b"done"));
        } else {
            let mut got = 0;
            while got < MIB {
                recv_one(&mut t, peer, |f| {
                    let o = u64::from_le_bytes(f[..8].try_into().expect("8 bytes")) as usize;
                    dst[o..o + f.len() - 8].copy_from_slice(&f[8..]);
                    got += f.len() - 8;
                });
            }
            send_spin(&mut t, peer, b"done");
        }
    }
    let two_copy_us = start.elapsed().as_secs_f64() / reps as f64 * 1e6;
    if rank == 1 {
        assert!(dst == src, "two-copy bytes differ");
        return;
    }
    let status = child.expect("rank 0 started rank 1").wait().expect("wait");
    assert!(status.success(), "rank 1 failed: {status}");
    println!(
        "phalanx-shm ping-pong, {ncpu} CPUs, {iters} round trips, single copy {:?}",
        t.single_copy()
    );
    println!("  1 B one-way latency:          {one_way:.3} µs");
    println!(
        "  1 MiB via process_vm_readv:   {single_us:.1} µs  ({:.2} GB/s)",
        MIB as f64 / single_us / 1e3
    );
    println!(
        "  1 MiB via ring (two-copy):    {two_copy_us:.1} µs  ({:.2} GB/s)",
        MIB as f64 / two_copy_us / 1e3
    );
}
