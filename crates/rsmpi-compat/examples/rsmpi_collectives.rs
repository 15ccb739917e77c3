//! rsmpi's collectives beyond the README: exclusive scans (blocking and immediate),
//! local reductions, operations passed by reference.

// rsmpi's documentation passes operations by reference (`&SystemOperation::sum()`): that
// form is what this example checks compiles.
#![allow(clippy::needless_borrows_for_generic_args)]

use mpi::collective::{self, SystemOperation};
use mpi::traits::*;

fn main() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());

    // Exclusive scan: rank i gets the sum of ranks 0..i; rank 0's buffer is untouched.
    let mut below = -1;
    world.exclusive_scan_into(&rank, &mut below, &SystemOperation::sum());
    let want = if rank == 0 { -1 } else { rank * (rank - 1) / 2 };
    assert_eq!(below, want, "exclusive scan (sum) on rank {rank}");

    // Immediate form, with max over a vector.
    let mine = [rank as f64, -(rank as f64)];
    let mut maxes = [f64::NAN; 2];
    mpi::request::scope(|scope| {
        world
            .immediate_exclusive_scan_into(scope, &mine[..], &mut maxes[..], SystemOperation::max())
            .wait();
    });
    if rank > 0 {
        assert_eq!(
            maxes,
            [(rank - 1) as f64, 0.0],
            "exclusive scan (max) on rank {rank}"
        );
    }

    // Inclusive scan with the operation by reference.
    let op = SystemOperation::product();
    let mut prod = 0i64;
    world.scan_into(&(rank as i64 + 1), &mut prod, &op);
    assert_eq!(prod, (1..=rank as i64 + 1).product::<i64>());

    // Local reduction: no communication.
    let mut acc = [1u32, 2, 3];
    collective::reduce_local_into(&[10u32, 20, 30][..], &mut acc[..], SystemOperation::sum());
    assert_eq!(acc, [11, 22, 33]);

    world.barrier();
    println!("rank {rank} of {size}: collectives ok");
}
