//! Seed 001's bandwidth job: rank 0 streams windows of messages of one size to rank 1
//! for a fixed wall-clock time and reports the bandwidth over that time — the time the
//! job was suspended by the gang scheduler included, so the sum over concurrent jobs is
//! the aggregate bandwidth the cluster delivered.
//!
//! Usage: `phalanx run -n 2 gang_bw [bytes (16384)] [seconds (3)]`. Each window is one
//! control message (continue or stop, decided by rank 0's clock), 64 nonblocking sends
//! of `bytes`, and a 4-byte acknowledgement. Prints
//! `gang_bw: bytes=B seconds=S MB/s=X messages=N`.
use phalanx::request::{scope, wait_all};
use phalanx::traits::*;

const WINDOW: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let size: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(16 << 10);
    let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    if world.size() != 2 {
        eprintln!("gang_bw needs exactly 2 ranks");
        std::process::exit(2);
    }
    let rank = world.rank();
    let peer = world.process_at_rank(1 - rank);
    let mut ack = [0u8; 4];
    let mut messages = 0u64;
    if rank == 0 {
        let data = vec![7u8; size];
        let start = phalanx::environment::time();
        loop {
            let go = i32::from(phalanx::environment::time() - start < secs);
            peer.send(&go);
            if go == 0 {
                break;
            }
            scope(|sc| {
                let reqs = (0..WINDOW)
                    .map(|_| peer.immediate_send(sc, &data[..]))
                    .collect();
                wait_all(reqs);
            });
            peer.receive_into(&mut ack[..]);
            messages += WINDOW as u64;
        }
        let elapsed = phalanx::environment::time() - start;
        println!(
            "gang_bw: bytes={size} seconds={elapsed:.3} MB/s={:.3} messages={messages}",
            messages as f64 * size as f64 / 1e6 / elapsed
        );
    } else {
        let mut bufs = vec![0u8; size * WINDOW];
        loop {
            let (go, _) = peer.receive::<i32>();
            if go == 0 {
                break;
            }
            scope(|sc| {
                let reqs = bufs
                    .chunks_mut(size.max(1))
                    .take(WINDOW)
                    .map(|b| peer.immediate_receive_into(sc, b))
                    .collect();
                wait_all(reqs);
            });
            peer.send(&ack[..]);
            messages += WINDOW as u64;
        }
        if bufs.iter().take(size).any(|&b| b != 7) && messages > 0 {
            eprintln!("gang_bw: corrupted data");
            std::process::exit(1);
        }
    }
}
