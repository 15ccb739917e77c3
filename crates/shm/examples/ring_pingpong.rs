//! Raw ring ping-pong between two threads (the transport alone, no engine):
//! `cargo run --release -p phalanx-shm --example ring_pingpong [iterations] [bytes]`.
//! Prints the one-way latency; a baseline for the engine's shared-memory latency.
use phalanx_shm::{ShmConfig, ShmTransport};
use std::time::Instant;

fn main() {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let size: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(8);
    let name = format!("phalanx-ringpp-{}", std::process::id());
    let n2 = name.clone();
    let peer = std::thread::spawn(move || {
        let mut t = ShmTransport::connect(&n2, &[0, 1], 1, ShmConfig::default()).unwrap();
        let frame = vec![1u8; size];
        for _ in 0..iters {
            let mut got = false;
            while !got {
                t.recv(&mut |_, _| {
                    got = true;
                    true
                })
                .unwrap();
            }
            while !t.send(0, &frame).unwrap() {}
        }
    });
    let mut t = ShmTransport::connect(&name, &[0, 1], 0, ShmConfig::default()).unwrap();
    let frame = vec![2u8; size];
    let mut start = Instant::now();
    for i in 0..iters {
        if i == iters / 10 {
            start = Instant::now();
        }
        while !t.send(1, &frame).unwrap() {}
        let mut got = false;
        while !got {
            t.recv(&mut |_, _| {
                got = true;
                true
            })
            .unwrap();
        }
    }
    let n = iters - iters / 10;
    println!(
        "{size} B frames: one-way {:.3} us",
        start.elapsed().as_secs_f64() * 1e6 / n as f64 / 2.0
    );
    peer.join().unwrap();
}
