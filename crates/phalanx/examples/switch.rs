//! A context switch in the middle of traffic, as the job manager will drive it: every
//! rank sends a burst of eager messages to every other rank (none received yet), then
//! all ranks halt their links, drain what is in flight, save what the links hold, stay
//! stopped, restore and resume — and then receive everything and check every byte and
//! the per-sender order. Exits non-zero on any mismatch or hook error.
//!
//! Usage: `phalanx run -n 4 switch [messages_per_peer] [stop_ms] [switches] [late_rank]
//! [limit_ms]`: `late_rank` computes for 3 s outside the library before its switch (the
//! others' drain then ends after `limit_ms` with an error naming it).
use phalanx::traits::*;
use std::time::Duration;

fn byte_at(src: usize, dst: usize, i: usize, k: usize) -> u8 {
    (src * 131 + dst * 31 + i * 7 + k * 13) as u8
}

/// Sizes below every eager limit, so sends complete without the receiver.
fn len_of(i: usize) -> usize {
    [0, 1, 8, 33, 200, 1000, 1400, 3000][i % 8]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let per_peer: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let stop = Duration::from_millis(args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200));
    let switches: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(2);
    let late: Option<usize> = args.get(4).and_then(|a| a.parse().ok());
    let limit = Duration::from_millis(args.get(5).and_then(|a| a.parse().ok()).unwrap_or(20_000));
    let universe = phalanx::initialize().expect("initialize");
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let mut saved = (0, 0);
    for round in 0..switches {
        // A collective first, so URTP has state across the switch too.
        let mut sum = 0u64;
        world.all_reduce_into(
            &(rank as u64 + round as u64),
            &mut sum,
            phalanx::collective::SystemOperation::sum(),
        );
        let want = (0..size as u64).sum::<u64>() + (size * round) as u64;
        assert_eq!(sum, want, "rank {rank}: allreduce before switch {round}");
        for i in 0..per_peer {
            for dst in (0..size).filter(|&d| d != rank) {
                let v: Vec<u8> = (0..len_of(i))
                    .map(|k| byte_at(rank, dst, i + round, k))
                    .collect();
                world
                    .process_at_rank(dst as i32)
                    .send_with_tag(&v[..], i as i32);
            }
        }
        if late == Some(rank) {
            std::thread::sleep(Duration::from_secs(3));
        }
        match phalanx::testing::context_switch(stop, limit) {
            Ok((n, b)) => {
                saved.0 += n;
                saved.1 += b;
            }
            Err(e) => {
                eprintln!("rank {rank}: context switch {round} failed: {e}");
                std::process::exit(3);
            }
        }
        for src in (0..size).filter(|&s| s != rank) {
            for i in 0..per_peer {
                let (v, st) = world
                    .process_at_rank(src as i32)
                    .receive_vec_with_tag::<u8>(i as i32);
                assert_eq!(st.tag(), i as i32);
                let want: Vec<u8> = (0..len_of(i))
                    .map(|k| byte_at(src, rank, i + round, k))
                    .collect();
                if v != want {
                    eprintln!("rank {rank}: message {i} from {src} wrong after switch {round}");
                    std::process::exit(4);
                }
            }
        }
    }
    world.barrier();
    let s = phalanx::testing::stats().unwrap_or_default();
    println!(
        "rank {rank}: {switches} switches ok, saved {} datagrams ({} bytes), retransmits {}",
        saved.0, saved.1, s.retransmits
    );
}
