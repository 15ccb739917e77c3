//! Mismatched collectives, one case per run: every rank checks what its call returned
//! and prints `WRONG DATA` if it returned anything but what a matched call would have.
//! The job must end in an error naming the ranks, before any wrong data is returned,
//! and never hang.
//!
//! Usage: `phalanx run -n P mismatch CASE` with CASE one of `skip_barrier` (rank 1
//! skips a barrier and finalizes), `bcast_reduce` (rank 1 reduces to root 0 while the
//! others broadcast from root 0), `roots` (rank 1 broadcasts from root 1, the others
//! from root 0), `allreduce_types` (rank 1 sums f64, the others u64, same bytes).
use phalanx::collective::SystemOperation;
use phalanx::traits::*;

fn main() {
    let case = std::env::args().nth(1).unwrap_or_default();
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let odd = rank == 1;
    let wrong = |what: &str| println!("mismatch: rank {rank}: WRONG DATA returned by {what}");
    match case.as_str() {
        "skip_barrier" => {
            if !odd {
                world.barrier();
            }
        }
        "bcast_reduce" => {
            let root = world.process_at_rank(0);
            if odd {
                root.reduce_into(&[7u64; 4][..], SystemOperation::sum());
            } else {
                let mut x = if rank == 0 { [5u64; 4] } else { [0u64; 4] };
                root.broadcast_into(&mut x[..]);
                if x != [5u64; 4] {
                    wrong("broadcast");
                }
            }
        }
        "roots" => {
            let r = if odd { 1 } else { 0 };
            let mut x = if rank == r {
                [10 + r as u64; 4]
            } else {
                [0u64; 4]
            };
            world.process_at_rank(r).broadcast_into(&mut x[..]);
            if x != [10 + r as u64; 4] {
                wrong("broadcast");
            }
        }
        "allreduce_types" => {
            if odd {
                let mut y = [0f64; 4];
                world.all_reduce_into(&[1f64; 4][..], &mut y[..], SystemOperation::sum());
                if y != [size as f64; 4] {
                    wrong("all_reduce");
                }
            } else {
                let mut y = [0u64; 4];
                world.all_reduce_into(&[1u64; 4][..], &mut y[..], SystemOperation::sum());
                if y != [size as u64; 4] {
                    wrong("all_reduce");
                }
            }
        }
        other => panic!("unknown case {other:?}"),
    }
    println!("mismatch: rank {rank}: returned");
}
