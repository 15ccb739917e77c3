//! Ping-pong between ranks 0 and 1 over a range of sizes; prints one-way latency.
//!
//! Usage: `phalanx run -n 2 pingpong [max_bytes] [iterations]`.
use phalanx::traits::*;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let max: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1 << 20);
    let iters: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let rank = world.rank();
    if world.size() < 2 {
        eprintln!("pingpong needs 2 ranks");
        std::process::exit(2);
    }
    if rank > 1 {
        return;
    }
    let peer = world.process_at_rank(1 - rank);
    if rank == 0 {
        println!("# Size  Latency (us)");
    }
    let mut size = 0usize;
    loop {
        let mut buf = vec![rank as u8; size];
        let n = if size > 65536 { iters / 10 + 1 } else { iters };
        let mut t0 = 0.0;
        for i in 0..n + 10 {
            if i == 10 {
                t0 = phalanx::environment::time();
            }
            if rank == 0 {
                peer.send(&buf[..]);
                peer.receive_into(&mut buf[..]);
            } else {
                peer.receive_into(&mut buf[..]);
                peer.send(&buf[..]);
            }
        }
        if rank == 0 {
            let us = (phalanx::environment::time() - t0) * 1e6 / (2.0 * n as f64);
            println!("{size:<8}{us:.2}");
        }
        if size >= max {
            break;
        }
        size = if size == 0 { 1 } else { size * 2 };
    }
}
