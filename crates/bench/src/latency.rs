//! Ping-pong latency (the osu_latency measurement).
//!
//! For each size, after a pair barrier, rank 0 sends and waits for the echo while rank 1
//! receives and echoes; the first `warmup` round trips are not timed. Latency is half the
//! mean round-trip time, in microseconds.

use crate::options::Plan;
use crate::report;
use crate::sync::pair_barrier;
use phalanx::environment::time;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::*;

/// Runs the latency test and prints its table on rank 0.
pub fn run(world: &SimpleCommunicator, plan: &Plan) {
    let rank = world.rank();
    let peer = world.process_at_rank(1 - rank);
    let mut send = vec![b'a'; plan.max_size()];
    let mut recv = vec![b'b'; plan.max_size()];
    if rank == 0 {
        report::header("Latency", "Latency (us)");
    }
    for &size in &plan.sizes {
        let (iterations, warmup) = plan.counts(size);
        let (s, r) = (&mut send[..size], &mut recv[..size]);
        pair_barrier(world);
        let mut start = time();
        for i in 0..iterations + warmup {
            if i == warmup {
                start = time();
            }
            if rank == 0 {
                peer.send(&s[..]);
                peer.receive_into(&mut r[..]);
            } else {
                peer.receive_into(&mut r[..]);
                peer.send(&s[..]);
            }
        }
        let elapsed = time() - start;
        if rank == 0 {
            report::row(size, elapsed * 1e6 / (2.0 * iterations as f64));
        }
    }
}
