//! Raw UDP ping-pong over 127.0.0.1: two threads, each with its own
//! `UdpTransport`, spin on nonblocking `recv_batch` and bounce 1 byte.
//! Prints the mean one-way latency (round trip / 2) in µs.
//!
//! Run: `cargo run --release -p phalanx-transport --example udp_pingpong [iters]`

use std::net::Ipv4Addr;
use std::time::Instant;

use phalanx_transport::{Transport, UdpTransport};

fn wait_one(t: &mut UdpTransport) {
    loop {
        if t.recv_batch(&mut |_, _| {}).expect("recv_batch") > 0 {
            return;
        }
        std::hint::spin_loop();
    }
}

fn main() -> std::io::Result<()> {
    let iters: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("iters must be an integer"))
        .unwrap_or(100_000);
    let warmup = (iters / 10).max(100);
    let mut ping = UdpTransport::bind(Ipv4Addr::LOCALHOST)?;
    let mut pong = UdpTransport::bind(Ipv4Addr::LOCALHOST)?;
    let peers = vec![ping.local_addr(), pong.local_addr()];
    ping.set_peers(peers.clone());
    pong.set_peers(peers);

    let total = warmup + iters;
    let echo = std::thread::spawn(move || {
        for _ in 0..total {
            wait_one(&mut pong);
            pong.send_to(0, &[1]).expect("send");
        }
    });

    for _ in 0..warmup {
        ping.send_to(1, &[0]).expect("send");
        wait_one(&mut ping);
    }
    let t0 = Instant::now();
    for _ in 0..iters {
        ping.send_to(1, &[0]).expect("send");
        wait_one(&mut ping);
    }
    let elapsed = t0.elapsed();
    echo.join().expect("echo thread");
    let one_way_us = elapsed.as_secs_f64() * 1e6 / (2.0 * iters as f64);
    println!(
        "udp ping-pong 1 byte over 127.0.0.1: {iters} round trips, one-way {one_way_us:.2} us"
    );
    let s = ping.stats();
    println!("ping stats: {s:?}");
    Ok(())
}
