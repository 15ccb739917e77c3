//! What the datagram MAC costs on this CPU, one core, no I/O: nanoseconds to seal (make a
//! trailer) and to open one datagram of each size, and the sealing rate. The sizes are a
//! small control datagram, a datagram over a 1500-byte MTU, and loopback's largest.
//!
//! `cargo run --release -p phalanx-transport --example mac_speed`

use phalanx_transport::mac::{datagram_key, Seal};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let key = datagram_key(&[7; 32]);
    let mut sealer = Seal::new(&key, 1);
    let opener = Seal::new(&key, 2);
    println!(
        "# {:>6} {:>10} {:>10} {:>10}",
        "bytes", "seal(ns)", "open(ns)", "seal GB/s"
    );
    for len in [64usize, 1444, 8192, 65_000] {
        let datagram = vec![0xab; len];
        let iters = (400_000_000 / (len + 200)).max(1000);
        let start = Instant::now();
        for _ in 0..iters {
            black_box(sealer.trailer(black_box(&datagram)));
        }
        let seal = start.elapsed().as_secs_f64() / iters as f64;
        let sealed = [&datagram[..], &sealer.trailer(&datagram)[..]].concat();
        let start = Instant::now();
        for _ in 0..iters {
            assert!(black_box(opener.open(black_box(&sealed))).is_some());
        }
        let open = start.elapsed().as_secs_f64() / iters as f64;
        println!(
            "  {len:>6} {:>10.1} {:>10.1} {:>10.1}",
            seal * 1e9,
            open * 1e9,
            len as f64 / seal / 1e9
        );
    }
}
