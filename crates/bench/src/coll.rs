//! Collective latency (the osu_bcast, osu_allgather, ... measurements).
//!
//! For each size, after a barrier, every rank times each call of the collective on its
//! own and runs a barrier (untimed) between calls, as the OSU collective tests do; the
//! first `warmup` calls are not timed. Each rank's mean time per call is summed to rank 0
//! with a reduce and divided by the number of ranks: the latency averaged over iterations
//! and over ranks (seed 000 §4.1). Bcast, gather, scatter and reduce move their root
//! round-robin over the iterations (`root = iteration mod p`), warm-up included.
//!
//! Sizes are OSU's: the block each rank contributes or receives for gather, scatter,
//! allgather and alltoall (so buffers hold `p * size` bytes), the whole message for
//! bcast, and the vector of `f32` (`size / 4` elements; sizes below 4 bytes are skipped)
//! for reduce and allreduce. Algorithms are whatever phalanx picks, including
//! `PHALANX_COLL_<NAME>` overrides from the environment, which the launcher passes on.

use crate::options::{Plan, Test};
use crate::report;
use phalanx::collective::SystemOperation;
use phalanx::environment::time;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::*;

/// Runs one collective test and prints its table on rank 0.
pub fn run(world: &SimpleCommunicator, test: Test, plan: &Plan) {
    if test == Test::Barrier {
        return barrier(world, plan);
    }
    let (rank, p) = (world.rank(), world.size() as usize);
    let max = plan.max_size();
    // Root buffers of gather/scatter and the all-* buffers hold p blocks.
    let mut send = vec![b'a'; max * p];
    let mut recv = vec![b'b'; max * p];
    let fsend = vec![1.0f32; max / 4];
    let mut frecv = vec![0.0f32; max / 4];
    if rank == 0 {
        report::header(title(test), "Avg Latency(us)");
    }
    for &size in &plan.sizes {
        if matches!(test, Test::Reduce | Test::Allreduce) && size < 4 {
            continue;
        }
        let (iterations, warmup) = plan.counts(size);
        let mut total = 0.0;
        world.barrier();
        for i in 0..iterations + warmup {
            let root = (i % p) as i32;
            let rp = world.process_at_rank(root);
            let is_root = rank == root;
            let start = time();
            match test {
                Test::Bcast => rp.broadcast_into(&mut send[..size]),
                Test::Gather if is_root => {
                    rp.gather_into_root(&send[..size], &mut recv[..size * p])
                }
                Test::Gather => rp.gather_into(&send[..size]),
                Test::Scatter if is_root => {
                    rp.scatter_into_root(&send[..size * p], &mut recv[..size])
                }
                Test::Scatter => rp.scatter_into(&mut recv[..size]),
                Test::Reduce if is_root => rp.reduce_into_root(
                    &fsend[..size / 4],
                    &mut frecv[..size / 4],
                    SystemOperation::sum(),
                ),
                Test::Reduce => rp.reduce_into(&fsend[..size / 4], SystemOperation::sum()),
                Test::Allreduce => world.all_reduce_into(
                    &fsend[..size / 4],
                    &mut frecv[..size / 4],
                    SystemOperation::sum(),
                ),
                Test::Allgather => world.all_gather_into(&send[..size], &mut recv[..size * p]),
                Test::Alltoall => world.all_to_all_into(&send[..size * p], &mut recv[..size * p]),
                Test::Latency
                | Test::Bw
                | Test::Bibw
                | Test::MbwMr
                | Test::Barrier
                | Test::Ring
                | Test::Chain
                | Test::Flood
                | Test::Calibrate
                | Test::Multisend => {
                    unreachable!("not a sized collective")
                }
            }
            let elapsed = time() - start;
            if i >= warmup {
                total += elapsed;
            }
            world.barrier();
        }
        if let Some(avg) = average_over_ranks(world, total / iterations as f64) {
            report::row(size, avg * 1e6);
        }
    }
}

/// osu_barrier: one line, the mean barrier time in microseconds.
fn barrier(world: &SimpleCommunicator, plan: &Plan) {
    let (iterations, warmup) = plan.counts(0);
    world.barrier();
    let mut start = time();
    for i in 0..iterations + warmup {
        if i == warmup {
            start = time();
        }
        world.barrier();
    }
    let mean = (time() - start) / iterations as f64;
    if let Some(avg) = average_over_ranks(world, mean) {
        report::single(title(Test::Barrier), "Avg Latency(us)", avg * 1e6);
    }
}

/// The mean of `value` over all ranks, on rank 0 (None elsewhere).
fn average_over_ranks(world: &SimpleCommunicator, value: f64) -> Option<f64> {
    let root = world.process_at_rank(0);
    if world.rank() == 0 {
        let mut sum = 0.0f64;
        root.reduce_into_root(&value, &mut sum, SystemOperation::sum());
        Some(sum / world.size() as f64)
    } else {
        root.reduce_into(&value, SystemOperation::sum());
        None
    }
}

fn title(test: Test) -> &'static str {
    match test {
        Test::Bcast => "Broadcast Latency",
        Test::Allgather => "Allgather Latency",
        Test::Gather => "Gather Latency",
        Test::Scatter => "Scatter Latency",
        Test::Barrier => "Barrier Latency",
        Test::Reduce => "Reduce Latency",
        Test::Allreduce => "Allreduce Latency",
        Test::Alltoall => "All-to-All Latency",
        Test::Latency => "Latency",
        Test::Bw => "Bandwidth",
        Test::Bibw => "Bi-Directional Bandwidth",
        Test::MbwMr => "Multiple Bandwidth / Message Rate",
        Test::Ring => "Ring Latency",
        Test::Chain => "Chain Throughput",
        Test::Flood => "Flood",
        Test::Calibrate => "Cost model",
        Test::Multisend => "Multi-send",
    }
}
