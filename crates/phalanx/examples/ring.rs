//! A message travels around the ring many times; reports the one-hop latency
//! (total time / hops), as in the ring latency test of seed 003.
//!
//! Usage: `phalanx run -n 4 ring [words] [laps]` (defaults: 1 word of 8 bytes, 10000 laps).
use phalanx::traits::*;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let words: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let laps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);
    let mut buf = vec![0u64; words];
    let warmup = (laps / 10).max(1);
    let mut t0 = 0.0;
    for lap in 0..laps + warmup {
        if lap == warmup {
            t0 = phalanx::environment::time();
        }
        if rank == 0 {
            buf[0] = lap as u64;
            next.send(&buf[..]);
            prev.receive_into(&mut buf[..]);
            assert_eq!(buf[0], lap as u64 + size as u64 - 1, "token corrupted");
        } else {
            prev.receive_into(&mut buf[..]);
            buf[0] += 1;
            next.send(&buf[..]);
        }
    }
    if rank == 0 {
        let dt = phalanx::environment::time() - t0;
        let hops = (laps * size as usize) as f64;
        println!(
            "ring: {size} ranks, {} bytes, {laps} laps: one-hop latency {:.2} us",
            words * 8,
            dt * 1e6 / hops
        );
    }
}
