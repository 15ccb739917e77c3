//! Multi-pair bandwidth and message rate (the osu_mbw_mr measurement, OMB 7.x loop).
//!
//! With `p` ranks, rank `r < p/2` sends to rank `r + p/2` (an odd `p` leaves the last rank
//! idle, as in OSU). Every iteration starts with an untimed barrier of all ranks; then each
//! sender times `window` nonblocking sends of one size, waits for them all and receives a
//! 4-byte acknowledgement, while its receiver starts `window` nonblocking receives (all
//! into one buffer, see [`SharedTarget`]), waits for them and sends the acknowledgement.
//! The senders' summed times are averaged over the pairs (a sum-reduce to rank 0, other
//! ranks adding 0); the aggregate bandwidth is `pairs * size * window * iterations /
//! time` in MB/s and the message rate `pairs * window * iterations / time` (the same
//! as OSU's `bandwidth * 10^6 / size`, and defined for size 0) in messages per second.

use crate::bw::{recv_window, send_window, SharedTarget, Slot};
use crate::options::Plan;
use crate::report;
use phalanx::collective::SystemOperation;
use phalanx::environment::time;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::*;

/// Runs the multi-pair test and prints its table (`# Size  MB/s  Messages/s`) on rank 0.
pub fn run(world: &SimpleCommunicator, plan: &Plan) {
    let rank = world.rank();
    let pairs = world.size() / 2;
    let send = vec![b'a'; plan.max_size()];
    let mut recv = vec![b'b'; plan.max_size()];
    let mut ack = [0u8; 4];
    if rank == 0 {
        let comment = format!("[ pairs: {pairs} ] [ window size: {} ]", plan.window);
        report::header_columns(
            "Multiple Bandwidth / Message Rate",
            &comment,
            &["MB/s", "Messages/s"],
        );
    }
    for &size in &plan.sizes {
        let (iterations, warmup) = plan.counts(size);
        let target = SharedTarget::new(&mut recv[..size]);
        let mut slots: Vec<Slot<'_>> = (0..plan.window).map(|_| target.slot()).collect();
        let mut timed = 0.0;
        world.barrier();
        for i in 0..iterations + warmup {
            world.barrier();
            if rank < pairs {
                let peer = world.process_at_rank(rank + pairs);
                let start = time();
                send_window(&peer, &send[..size], plan.window, &mut ack);
                if i >= warmup {
                    timed += time() - start;
                }
            } else if rank < 2 * pairs {
                let peer = world.process_at_rank(rank - pairs);
                recv_window(&peer, &mut slots, &ack);
            }
        }
        let root = world.process_at_rank(0);
        if rank == 0 {
            let mut sum = 0.0f64;
            root.reduce_into_root(&timed, &mut sum, SystemOperation::sum());
            let mean = sum / pairs as f64;
            let messages = pairs as f64 * plan.window as f64 * iterations as f64;
            let bytes = messages * size as f64;
            report::row_values(size, &[bytes / 1e6 / mean, messages / mean]);
        } else {
            root.reduce_into(&timed, SystemOperation::sum());
        }
    }
}
