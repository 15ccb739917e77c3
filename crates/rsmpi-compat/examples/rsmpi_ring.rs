//! rsmpi's README example: a ring exchange with a nonblocking send under a `WaitGuard`,
//! a blocking receive of a vector from any process, and a broadcast and reduction.

use mpi::collective::SystemOperation;
use mpi::request::WaitGuard;
use mpi::traits::*;

fn main() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let size = world.size();
    let rank = world.rank();

    let next_rank = (rank + 1) % size;
    let previous_rank = (rank - 1 + size) % size;

    let msg = [rank, 2 * rank, 4 * rank];
    mpi::request::scope(|scope| {
        let _sreq = WaitGuard::from(
            world
                .process_at_rank(next_rank)
                .immediate_send(scope, &msg[..]),
        );
        let (msg, status) = world.any_process().receive_vec::<mpi::Rank>();
        let x = status.source_rank();
        assert_eq!(x, previous_rank);
        assert_eq!(vec![x, 2 * x, 4 * x], msg);
    });

    // Every ring message is taken before anyone sends the next ones: the ring's receive
    // matches any source and any tag.
    world.barrier();

    // wait_any: receives from every other rank, completed in whatever order.
    let others: Vec<_> = (0..size).filter(|&r| r != rank).collect();
    let mut got = vec![-1; others.len()];
    mpi::request::scope(|scope| {
        let sends: Vec<_> = others
            .iter()
            .map(|&r| {
                world
                    .process_at_rank(r)
                    .immediate_send_with_tag(scope, &rank, 9)
            })
            .collect();
        let mut recvs: Vec<_> = got
            .iter_mut()
            .zip(&others)
            .map(|(g, &r)| {
                world
                    .process_at_rank(r)
                    .immediate_receive_into_with_tag(scope, g, 9)
            })
            .collect();
        let mut seen = 0;
        while let Some((_, status)) = mpi::request::wait_any(&mut recvs) {
            assert!(others.contains(&status.source_rank()));
            seen += 1;
        }
        assert_eq!(seen, others.len());
        mpi::request::wait_all(sends);
    });
    assert_eq!(got, others);

    let root = world.process_at_rank(0);
    let mut x = if rank == 0 { 2.5f64 } else { 0.0 };
    root.broadcast_into(&mut x);
    assert_eq!(x, 2.5);

    let mut sum = 0;
    world.all_reduce_into(&rank, &mut sum, SystemOperation::sum());
    assert_eq!(sum, size * (size - 1) / 2);
    println!("rank {rank} of {size}: ring ok");
}
