//! `Threading::Multiple` from Rust: four threads per rank, each with its own duplicate of
//! the world moved into it, ping-pong with the same thread of the partner rank (eager
//! and rendezvous sizes), exchange with nonblocking calls, and run collectives on their
//! communicator — all at once. Every message is checked; each rank prints
//! "threads ok rank R". Ranks pair up (0-1, 2-3, ...): run on an even number of ranks.
//!
//! With `funneled` instead, phalanx is initialized at `Threading::Funneled` and a second
//! thread's barrier must end the job with an error naming the thread rule.
//!
//! Usage: `phalanx run -n 2 threads [iterations | funneled]`.
use phalanx::collective::SystemOperation;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::*;
use phalanx::Threading;

const THREADS: usize = 4;

fn worker(comm: SimpleCommunicator, t: usize, iters: usize) {
    let rank = comm.rank();
    let size = comm.size();
    let peer = comm.process_at_rank(rank ^ 1);
    let tag = t as i32;
    for &n in &[8usize, 40_000, 300_000] {
        let reps = if n > 100_000 { 3 } else { iters };
        for it in 0..reps {
            let stamp = |i: usize| (t * 31 + it * 7 + i) as u8;
            let out: Vec<u8> = (0..n).map(stamp).collect();
            let mut got = vec![0u8; n];
            if rank % 2 == 0 {
                peer.send_with_tag(&out[..], tag);
                peer.receive_into_with_tag(&mut got[..], tag);
            } else {
                peer.receive_into_with_tag(&mut got[..], tag);
                peer.send_with_tag(&out[..], tag);
            }
            assert!(
                got == out,
                "thread {t}: {n} bytes, iteration {it}: wrong data"
            );
        }
    }
    for it in 0..iters {
        let out = [rank as u64 * 1_000_000 + (t * 1000 + it) as u64; 4];
        let mut got = [0u64; 4];
        phalanx::request::scope(|scope| {
            let r = peer.immediate_receive_into_with_tag(scope, &mut got[..], 10 + tag);
            let s = peer.immediate_send_with_tag(scope, &out[..], 10 + tag);
            s.wait();
            r.wait();
        });
        assert_eq!(
            got[0],
            (rank ^ 1) as u64 * 1_000_000 + (t * 1000 + it) as u64
        );
    }
    for it in 0..iters {
        let v = (rank as usize + t + it) as u64;
        let mut sum = 0u64;
        comm.all_reduce_into(&v, &mut sum, SystemOperation::sum());
        let p = size as u64;
        assert_eq!(sum, p * (t + it) as u64 + p * (p - 1) / 2, "thread {t}");
        let root = comm.process_at_rank((it % size as usize) as i32);
        let mut b = if rank == root.rank() {
            (t * 1000 + it) as u64
        } else {
            0
        };
        root.broadcast_into(&mut b);
        assert_eq!(b, (t * 1000 + it) as u64);
    }
    comm.barrier();
}

fn main() {
    let arg = std::env::args().nth(1);
    if arg.as_deref() == Some("funneled") {
        let (universe, level) = phalanx::initialize_with_threading(Threading::Funneled)
            .expect("phalanx initialized twice");
        assert_eq!(level, Threading::Funneled);
        let world = universe.world();
        std::thread::scope(|s| {
            s.spawn(move || world.barrier());
        });
        println!("not reached");
        return;
    }
    let iters: usize = arg.and_then(|s| s.parse().ok()).unwrap_or(100);
    let (universe, level) =
        phalanx::initialize_with_threading(Threading::Multiple).expect("phalanx initialized twice");
    assert_eq!(level, Threading::Multiple);
    let world = universe.world();
    assert!(
        world.size() % 2 == 0,
        "threads needs an even number of ranks"
    );
    // Duplicates made in the same order on every rank, one per thread.
    let comms: Vec<SimpleCommunicator> = (0..THREADS).map(|_| world.duplicate()).collect();
    std::thread::scope(|s| {
        for (t, c) in comms.into_iter().enumerate() {
            s.spawn(move || worker(c, t, iters));
        }
    });
    world.barrier();
    println!("threads ok rank {}", world.rank());
}
