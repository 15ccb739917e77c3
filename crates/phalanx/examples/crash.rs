//! Misbehaving ranks, to show (and test) how the launcher ends a job.
//!
//! Usage: `phalanx run -n 4 crash MODE` with MODE one of `panic`, `exit3`, `kill`
//! (rank 1 SIGKILLs itself), `nofinalize` (rank 1 exits 0 without finalizing), `deadlock`
//! (rank 1 waits for a message nobody sends; ends only at `--timeout`), `mismatch` (rank 1
//! broadcasts from root 1 while the others use root 0), `mismatch_reduce` (rank 2 reduces
//! other types with another operation, same byte count), `mismatch_alg` (an all-gather
//! by k-concurrency multicast, rank 1 with another k), `panic_pending` (rank 1 panics with a receive in
//! flight), `mismatch_swap` (2 ranks, each names the other as broadcast root). Every rank first
//! prints `pid RANK PID` so a caller can check that no process survives.
use phalanx::traits::*;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode == "mismatch_alg" {
        // Every rank runs the k-concurrency multicast all-gather; rank 1 alone with
        // another k.
        std::env::set_var("PHALANX_COLL_ALLGATHER", "mcast2");
        if std::env::var("PHALANX_RANK").as_deref() == Ok("1") {
            std::env::set_var("PHALANX_COLL_ALLGATHER_K", "3");
        }
    }
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let rank = world.rank();
    println!("pid {rank} {}", std::process::id());
    // Every rank reports to rank 1 after printing its pid, so the job is fully up (and
    // every pid line written) before rank 1 misbehaves.
    if rank == 1 {
        for _ in 1..world.size() {
            let _ = world.any_process().receive_with_tag::<i32>(5);
        }
    } else {
        world.process_at_rank(1).send_with_tag(&rank, 5);
    }
    if mode == "mismatch_reduce" {
        // Same byte count, different type signature and operation on rank 2.
        if rank == 2 {
            let x = [1.0f32; 4];
            world
                .process_at_rank(0)
                .reduce_into(&x[..], phalanx::collective::SystemOperation::max());
        } else if rank == 0 {
            let x = [1u64; 2];
            let mut y = [0u64; 2];
            // Rank 0 is busy elsewhere first, so the others' data arrives early.
            std::thread::sleep(std::time::Duration::from_millis(300));
            world.process_at_rank(0).reduce_into_root(
                &x[..],
                &mut y[..],
                phalanx::collective::SystemOperation::sum(),
            );
        } else {
            let x = [1u64; 2];
            world
                .process_at_rank(0)
                .reduce_into(&x[..], phalanx::collective::SystemOperation::sum());
        }
        world.barrier();
        return;
    }
    if mode == "mismatch_swap" {
        // Ranks 0 and 1 each name the other as root: both wait to receive.
        let root = if rank == 0 { 1 } else { 0 };
        let mut x = [rank as u64; 4];
        world.process_at_rank(root).broadcast_into(&mut x[..]);
        return;
    }
    if mode == "mismatch_alg" {
        let x = [rank as u64; 4];
        let mut all = vec![0u64; 4 * world.size() as usize];
        world.all_gather_into(&x[..], &mut all[..]);
        world.barrier();
        return;
    }
    if mode == "panic_pending" && rank == 1 {
        let mut buf = [0u8; 8];
        phalanx::request::scope(|s| {
            let _r = world
                .process_at_rank(0)
                .immediate_receive_into_with_tag(s, &mut buf[..], 123);
            panic!("rank 1 panics with a receive in flight");
        });
    }
    if mode == "mismatch" {
        let root = if rank == 1 { 1 } else { 0 };
        let mut x = [rank as u64; 4];
        world.process_at_rank(root).broadcast_into(&mut x[..]);
        world.barrier();
        return;
    }
    if rank == 1 {
        match mode.as_str() {
            "panic" => panic!("rank 1 panics on purpose"),
            "exit3" => std::process::exit(3),
            // SAFETY: sending a signal to our own pid has no memory-safety implications.
            "kill" => unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            },
            "nofinalize" => std::process::exit(0),
            "deadlock" => {
                let _ = world.process_at_rank(0).receive_with_tag::<u64>(99);
            }
            _ => {}
        }
    }
    // The other ranks wait for a message that never comes (rank 1 is gone): only the
    // launcher can end them.
    if rank != 1 {
        let _ = world.process_at_rank(1).receive_with_tag::<u64>(77);
    }
}
