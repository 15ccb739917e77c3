//! Dynamic processes the way rsmpi's `spawn` and `spawn_multiple` examples use them:
//! the world's rank 0 spawns copies of this program, which find their parents through
//! `world.parent()`; both sides exchange point-to-point messages over the
//! intercommunicator, meet in its barrier, all-reduce and all-gather over it (each group
//! gets the other's data), merge it and reduce over the merged
//! communicator. Then `spawn_multiple` starts two programs (two processes of one, one of
//! the other) in one new world, whose members check their arguments and receive a
//! broadcast over the merged communicator.

use mpi::collective::SystemOperation;
use mpi::topology::MergeOrder;
use mpi::traits::*;
use std::env;
use std::process::Command;

fn self_with_arg(arg: &str) -> Command {
    let mut exe = Command::new(env::current_exe().expect("current_exe"));
    exe.arg(arg);
    exe
}

/// Every member of `merged` contributes its rank; the sum is known.
fn check_merged_sum(merged: &mpi::topology::SimpleCommunicator) {
    let mut sum = 0i32;
    merged.all_reduce_into(&merged.rank(), &mut sum, SystemOperation::sum());
    let n = merged.size();
    assert_eq!(
        sum,
        n * (n - 1) / 2,
        "allreduce over the merged communicator"
    );
}

fn child(world: &mpi::topology::SimpleCommunicator, parent: mpi::topology::InterCommunicator) {
    let arg = env::args().nth(1).expect("an argument from the parent");
    let (rank, size) = (world.rank(), world.size());
    match arg.as_str() {
        "from_parent" => {
            assert_eq!(size, 2);
            parent.process_at_rank(0).send(&(rank * 10 + 7));
            let (v, status) = parent.process_at_rank(0).receive::<i32>();
            assert_eq!(v, 1000 + rank);
            assert_eq!(status.source_rank(), 0);
            parent.barrier();
            let merged = parent.merge(MergeOrder::High);
            // The parents (Low) come first.
            assert_eq!(merged.rank(), parent.remote_size() + rank);
            check_merged_sum(&merged);
            // Collectives straight on the intercommunicator: each group gets the
            // other's data (the parents contribute 100 × (rank + 1)).
            let np = parent.remote_size();
            let mut sum = 0;
            parent.all_reduce_into(&(rank + 1), &mut sum, SystemOperation::sum());
            assert_eq!(
                sum,
                100 * np * (np + 1) / 2,
                "all_reduce over the intercommunicator"
            );
            let mut ranks = vec![-1; np as usize];
            parent.all_gather_into(&rank, &mut ranks[..]);
            assert_eq!(ranks, (0..np).collect::<Vec<_>>());
            world.barrier();
        }
        "FirstChild" | "SecondChild" => {
            assert_eq!(size, 3);
            assert_eq!(arg == "FirstChild", rank < 2, "rank {rank} got {arg}");
            let merged = parent.merge(MergeOrder::High);
            let mut v = [0u64; 4];
            merged.process_at_rank(0).broadcast_into(&mut v[..]);
            assert_eq!(v, [1, 2, 3, parent.remote_size() as u64]);
            check_merged_sum(&merged);
        }
        "from_self" => {
            assert_eq!((size, parent.remote_size()), (1, 1));
            parent.process_at_rank(0).send(&(0xabcd_u32 + arg_index()));
        }
        other => panic!("unexpected argument {other:?}"),
    }
    println!("child {rank} of {size} ({arg}): spawn ok");
}

/// The second argument, a number (0 when absent).
fn arg_index() -> u32 {
    env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(0)
}

fn main() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    if let Some(parent) = world.parent() {
        child(&world, parent);
        return;
    }
    let (rank, size) = (world.rank(), world.size());

    // rsmpi's spawn.rs: one program, two copies.
    let child = world
        .process_at_rank(0)
        .spawn(&self_with_arg("from_parent"), 2)
        .expect("spawn");
    assert_eq!(child.remote_size(), 2);
    assert_eq!(child.size(), size);
    assert_eq!(child.rank(), rank);
    if rank == 0 {
        let mut seen = [false; 2];
        for _ in 0..2 {
            let (v, status) = child.any_process().receive::<i32>();
            let from = status.source_rank();
            assert_eq!(v, from * 10 + 7);
            seen[from as usize] = true;
        }
        assert_eq!(seen, [true, true]);
        for r in 0..2 {
            child.process_at_rank(r).send(&(1000 + r));
        }
    }
    child.barrier();
    let merged = child.merge(MergeOrder::Low);
    assert_eq!(merged.rank(), rank);
    assert_eq!(merged.size(), size + 2);
    check_merged_sum(&merged);
    let mut sum = 0;
    child.all_reduce_into(&(100 * (rank + 1)), &mut sum, SystemOperation::sum());
    assert_eq!(sum, 1 + 2, "all_reduce over the intercommunicator");
    let mut ranks = vec![-1; 2];
    child.all_gather_into(&rank, &mut ranks[..]);
    assert_eq!(ranks, vec![0, 1]);

    // rsmpi's spawn_multiple.rs: two programs in one new world.
    let child_sizes = [2, 1];
    let commands = vec![self_with_arg("FirstChild"), self_with_arg("SecondChild")];
    let children = world
        .process_at_rank(0)
        .spawn_multiple(&commands, &child_sizes)
        .expect("spawn_multiple");
    assert_eq!(children.remote_size(), child_sizes.iter().sum::<i32>());
    let merged = children.merge(MergeOrder::Low);
    let mut v = [1u64, 2, 3, size as u64];
    merged.process_at_rank(0).broadcast_into(&mut v[..]);
    check_merged_sum(&merged);

    // Spawns from one rank alone (rsmpi's `SimpleCommunicator::self_comm()`), twice:
    // each intercommunicator reaches only its own child. The world's collectives go on
    // as before on every rank, spawning or not.
    if rank == 0 {
        let me = mpi::topology::SimpleCommunicator::self_comm();
        let mut kids = Vec::new();
        for i in 0..2u32 {
            let mut cmd = self_with_arg("from_self");
            cmd.arg(i.to_string());
            kids.push(
                me.process_at_rank(0)
                    .spawn(&cmd, 1)
                    .expect("spawn from self"),
            );
        }
        for (i, kid) in kids.iter().enumerate() {
            let (v, _) = kid.any_process().receive::<u32>();
            assert_eq!(v, 0xabcd + i as u32, "each intercommunicator its own child");
        }
    }
    let mut big = vec![0u8; 64 << 10];
    if rank == 0 {
        big.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    }
    world.process_at_rank(0).broadcast_into(&mut big[..]);
    assert!(
        big.iter().enumerate().all(|(i, &b)| b == i as u8),
        "broadcast after a spawn"
    );
    let mine = vec![rank as u64; 50_000];
    let mut sums = vec![0u64; 50_000];
    world.all_reduce_into(&mine[..], &mut sums[..], SystemOperation::sum());
    assert!(sums.iter().all(|&x| x == (size * (size - 1) / 2) as u64));

    println!("rank {rank} of {size}: spawn ok");
}
