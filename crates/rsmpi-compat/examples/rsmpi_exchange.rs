//! rsmpi's point-to-point free functions and environment queries, with a user type
//! derived as `mpi::traits::Equivalence` under the crate name `mpi`.

use mpi::point_to_point as p2p;
use mpi::topology::{CommunicatorRelation, GroupRelation};
use mpi::traits::*;
use mpi::Threading;

#[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
struct Particle {
    position: [f64; 3],
    id: u64,
}

fn main() {
    let (mut universe, threading) = mpi::initialize_with_threading(Threading::Multiple).unwrap();
    assert!(threading <= Threading::Multiple);
    assert_eq!(threading, mpi::environment::threading_support());
    assert!(mpi::environment::is_initialized());
    assert!(!mpi::environment::is_finalized());
    universe.set_buffer_size(1 << 16);
    assert_eq!(universe.buffer_size(), 1 << 16);
    universe.detach_buffer();

    let world = universe.world();
    let size = world.size();
    let rank = world.rank();
    let next = world.process_at_rank((rank + 1) % size);
    let previous = world.process_at_rank((rank - 1 + size) % size);
    let from = (rank - 1 + size) % size;

    // send_receive: a value to the next rank, one from the previous.
    let (x, status): (i32, _) = p2p::send_receive(&rank, &next, &previous);
    assert_eq!((x, status.source_rank()), (from, from));

    // send_receive_into with tags, a derived type.
    let mine = Particle {
        position: [rank as f64, 0.5, -1.0],
        id: rank as u64,
    };
    let mut theirs = Particle {
        position: [0.0; 3],
        id: 0,
    };
    let status = p2p::send_receive_into_with_tags(&mine, &next, 7, &mut theirs, &previous, 7);
    assert_eq!(status.tag(), 7);
    assert_eq!(theirs.id, from as u64);
    assert_eq!(theirs.position, [from as f64, 0.5, -1.0]);

    // send_receive_replace_into: the buffer goes out and comes back replaced.
    let mut buf = [rank; 4];
    p2p::send_receive_replace_into(&mut buf[..], &next, &previous);
    assert_eq!(buf, [from; 4]);

    // Ready-mode sends (the receive is posted first: the barrier orders them).
    let mut got = 0u8;
    mpi::request::scope(|scope| {
        let r = previous.immediate_receive_into_with_tag(scope, &mut got, 3);
        world.barrier();
        // SAFETY: the receive was posted before the barrier (rsmpi's ready sends are
        // `unsafe`: the receive must be posted).
        unsafe { next.ready_send_with_tag(&(rank as u8), 3) };
        r.wait();
    });
    assert_eq!(got, from as u8);

    // Communicators and groups compared; collectives through `&dyn Communicator`.
    let dup = world.duplicate();
    assert_eq!(world.compare(&world), CommunicatorRelation::Identical);
    assert_eq!(world.compare(&dup), CommunicatorRelation::Congruent);
    let group = world.group();
    let first = group.include(&[0]);
    let rest = group.exclude(&[0]);
    assert_eq!(first.union(&rest).compare(&group), GroupRelation::Identical);
    assert_eq!(rest.union(&first).compare(&group), GroupRelation::Similar);
    assert_eq!(group.intersection(&first).size(), 1);
    assert_eq!(
        group.difference(&first).compare(&rest),
        GroupRelation::Identical
    );
    assert_eq!(first.compare(&rest), GroupRelation::Unequal);
    assert_eq!(group.translate_rank(0, &first), Some(0));
    let comm: &dyn Communicator = &dup;
    let mut total = 0;
    comm.all_reduce_into(&1, &mut total, mpi::collective::SystemOperation::sum());
    assert_eq!(total, size);

    // Names and the shared-memory split (all ranks run on this host).
    assert_eq!(world.get_name(), "MPI_COMM_WORLD");
    assert_eq!(dup.get_name(), "", "a duplicate is not the world");
    dup.set_name("my duplicate");
    assert_eq!(dup.get_name(), "my duplicate");
    let local = world.split_shared(-rank);
    assert_eq!(local.size(), size);
    assert_eq!(local.rank(), size - 1 - rank, "ordered by key");

    // Environment.
    let (major, _minor) = mpi::environment::version();
    assert!(major >= 3);
    assert!(mpi::environment::library_version()
        .unwrap()
        .contains("phalanx"));
    assert!(!mpi::environment::processor_name().unwrap().is_empty());
    let t0 = mpi::time();
    assert!(mpi::time() >= t0 && mpi::time_resolution() > 0.0);
    world.barrier();
    println!("rank {rank} of {size}: exchange ok");
}
