//! One multicast broadcast of `bytes` from rank 0 over the world, then one over the
//! even ranks only; every rank prints its counters so a caller can check that the root
//! put each packet on the wire once and that the odd ranks' kernel filters kept the
//! even-only packets out of user space.
//!
//! Usage: `phalanx run -n 8 mcast_counts [bytes]` (default 65536).
use phalanx::topology::Color;
use phalanx::traits::*;

fn main() {
    let bytes: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(65536);
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let rank = world.rank();
    world.barrier();
    let before = phalanx::testing::stats().expect("stats");
    let mut buf: Vec<u8> = (0..bytes)
        .map(|i| if rank == 0 { i as u8 } else { 0 })
        .collect();
    world.process_at_rank(0).broadcast_into(&mut buf[..]);
    let after = phalanx::testing::stats().expect("stats");
    assert!(
        buf.iter().enumerate().all(|(i, &b)| b == i as u8),
        "broadcast data wrong"
    );
    let packet = phalanx::testing::coll_packet().expect("packet size");
    println!(
        "mcast_counts: rank {rank}: bcast_data={} bcast_multicasts={} bcast_resent={} packets_expected={} multicast={}",
        after.urtp_data - before.urtp_data,
        after.urtp_multicasts - before.urtp_multicasts,
        after.urtp_resent - before.urtp_resent,
        bytes.div_ceil(packet),
        phalanx::testing::multicast().unwrap_or(false),
    );
    world.barrier();
    // Even ranks only: the odd ranks receive the multicasts on their sockets, and their
    // filters drop them in the kernel.
    let before = phalanx::testing::stats().expect("stats");
    let evens = world.split_by_color(if rank % 2 == 0 {
        Color::with_value(0)
    } else {
        Color::undefined()
    });
    if let Some(c) = &evens {
        let mut b = vec![rank as u8; bytes];
        c.process_at_rank(0).broadcast_into(&mut b[..]);
        assert!(b.iter().all(|&x| x == 0), "even broadcast data wrong");
    }
    world.barrier();
    let after = phalanx::testing::stats().expect("stats");
    println!(
        "mcast_counts: rank {rank}: member={} not_target_in_user_space={} kernel_drops={}",
        evens.is_some(),
        after.drop_not_target - before.drop_not_target,
        after.kernel_drops - before.kernel_drops,
    );
}
