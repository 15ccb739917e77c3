//! rsmpi's collectives beyond the README: exclusive scans (blocking and immediate),
//! local reductions, operations passed by reference, the varcount collectives (blocking
//! and immediate, all-to-all too) and reduce-scatter.

// rsmpi's documentation passes operations by reference (`&SystemOperation::sum()`): that
// form is what this example checks compiles.
#![allow(clippy::needless_borrows_for_generic_args)]

use mpi::collective::{self, SystemOperation, UnsafeUserOperation, UserOperation};
use mpi::datatype::{Partition, PartitionMut, UserDatatype, View};
use mpi::traits::*;
use mpi::Count;

/// rsmpi's `UnsafeUserFunction`: the C signature of `MPI_User_function`.
unsafe extern "C" fn c_add(
    invec: *mut std::ffi::c_void,
    inoutvec: *mut std::ffi::c_void,
    len: *mut std::ffi::c_int,
    _datatype: *mut mpi::ffi::MPI_Datatype,
) {
    // SAFETY: the reduction passes `len` i32s in both buffers (it runs on i32s only).
    let (x, y) = unsafe {
        (
            std::slice::from_raw_parts(invec as *const i32, *len as usize),
            std::slice::from_raw_parts_mut(inoutvec as *mut i32, *len as usize),
        )
    };
    for (a, b) in x.iter().zip(y) {
        *b += a;
    }
}

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

    // A user operation, as rsmpi's reduce example writes it.
    let add = UserOperation::commutative(|x, y| {
        let x: &[mpi::Rank] = x.downcast().unwrap();
        let y: &mut [mpi::Rank] = y.downcast().unwrap();
        for (&x_i, y_i) in x.iter().zip(y) {
            *y_i += x_i;
        }
    });
    let mut sum: mpi::Rank = 0;
    world.all_reduce_into(&rank, &mut sum, &add);
    assert_eq!(sum, size * (size - 1) / 2);

    // A non-commutative one: composing affine maps x -> a x + b, (a, b) pairs, must
    // combine in rank order.
    let compose = UserOperation::associative(|f, g| {
        let f: &[i64] = f.downcast().unwrap();
        let g: &mut [i64] = g.downcast().unwrap();
        for (f, g) in f.chunks_exact(2).zip(g.chunks_exact_mut(2)) {
            let (a, b) = (f[0] * g[0], f[0] * g[1] + f[1]);
            g.copy_from_slice(&[a, b]);
        }
    });
    let mine = [2i64, rank as i64 + 1];
    let fold = |upto: mpi::Rank| {
        (1..=upto).fold([2i64, 1], |acc, r| {
            [acc[0] * 2, acc[0] * (r as i64 + 1) + acc[1]]
        })
    };
    let mut all = [0i64; 2];
    world.all_reduce_into(&mine[..], &mut all[..], &compose);
    assert_eq!(all, fold(size - 1), "all-reduce in rank order");
    let root = world.process_at_rank(size - 1);
    if rank == size - 1 {
        let mut at_root = [0i64; 2];
        root.reduce_into_root(&mine[..], &mut at_root[..], &compose);
        assert_eq!(at_root, fold(size - 1));
    } else {
        root.reduce_into(&mine[..], &compose);
    }
    let mut prefix = [0i64; 2];
    world.scan_into(&mine[..], &mut prefix[..], &compose);
    assert_eq!(prefix, fold(rank), "scan in rank order");
    let mut before = [-1i64; 2];
    world.exclusive_scan_into(&mine[..], &mut before[..], &compose);
    if rank > 0 {
        assert_eq!(before, fold(rank - 1), "exclusive scan in rank order");
    } else {
        assert_eq!(before, [-1, -1]);
    }
    // The immediate forms with the same non-commutative operation (an all-gather of the
    // contributions, folded in rank order when the request completes).
    let (mut all, mut prefix, mut before, mut at_root) =
        ([0i64; 2], [0i64; 2], [-1i64; 2], [0i64; 2]);
    mpi::request::scope(|scope| {
        let a = world.immediate_all_reduce_into(scope, &mine[..], &mut all[..], &compose);
        let s = world.immediate_scan_into(scope, &mine[..], &mut prefix[..], &compose);
        let e = world.immediate_exclusive_scan_into(scope, &mine[..], &mut before[..], &compose);
        if rank == size - 1 {
            root.immediate_reduce_into_root(scope, &mine[..], &mut at_root[..], &compose)
                .wait();
        } else {
            root.immediate_reduce_into(scope, &mine[..], &compose)
                .wait();
        }
        e.wait();
        s.wait();
        a.wait();
    });
    assert_eq!(all, fold(size - 1), "immediate all-reduce in rank order");
    assert_eq!(prefix, fold(rank), "immediate scan in rank order");
    if rank > 0 {
        assert_eq!(
            before,
            fold(rank - 1),
            "immediate exclusive scan in rank order"
        );
    } else {
        assert_eq!(before, [-1, -1]);
    }
    if rank == size - 1 {
        assert_eq!(at_root, fold(size - 1), "immediate reduce in rank order");
    }

    let mut local = [3i64, 4];
    collective::reduce_local_into(&[2i64, 1][..], &mut local[..], &compose);
    assert_eq!(local, [6, 9], "(2x + 1) after (3x + 4)");

    // Varcount forms, as rsmpi's examples write them: rank r contributes r elements.
    let counts: Vec<Count> = (0..size).collect();
    let displs: Vec<Count> = counts
        .iter()
        .scan(0, |acc, &x| {
            let tmp = *acc;
            *acc += x;
            Some(tmp)
        })
        .collect();
    let total = (size * (size - 1) / 2) as usize;
    let expected: Vec<mpi::Rank> = (0..size).flat_map(|r| 0..r).collect();
    let msg: Vec<mpi::Rank> = (0..rank).collect();
    let root = world.process_at_rank(0);
    if rank == 0 {
        let mut buf = vec![-1; total];
        {
            let mut partition = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
            root.gather_varcount_into_root(&msg[..], &mut partition);
        }
        assert_eq!(buf, expected, "gather_varcount");
        let partition = Partition::new(&expected[..], counts.clone(), &displs[..]);
        let mut mine: Vec<mpi::Rank> = vec![];
        root.scatter_varcount_into_root(&partition, &mut mine[..]);
    } else {
        root.gather_varcount_into(&msg[..]);
        let mut mine = vec![-1; rank as usize];
        root.scatter_varcount_into(&mut mine[..]);
        assert_eq!(mine, msg, "scatter_varcount");
    }
    let mut everyone = vec![-1; total];
    {
        let mut partition = PartitionMut::new(&mut everyone[..], &counts[..], &displs[..]);
        world.all_gather_varcount_into(&msg[..], &mut partition);
    }
    assert_eq!(everyone, expected, "all_gather_varcount");
    // With gaps between the blocks: what lies between them stays as it was.
    let spaced: Vec<Count> = displs.iter().zip(0..).map(|(&d, i)| d + i).collect();
    let mut gappy = vec![-7; total + size as usize];
    {
        let mut partition = PartitionMut::new(&mut gappy[..], &counts[..], &spaced[..]);
        world.all_gather_varcount_into(&msg[..], &mut partition);
    }
    for (r, (&c, &d)) in counts.iter().zip(&spaced).enumerate() {
        let (c, d) = (c as usize, d as usize);
        assert_eq!(
            gappy[d..d + c],
            expected[displs[r] as usize..displs[r] as usize + c]
        );
        if d + c < gappy.len() && !spaced.contains(&((d + c) as Count)) {
            assert_eq!(gappy[d + c], -7, "the gap after block {r} untouched");
        }
    }

    // Senders whose elements are strided (a vector view) while the root's partition is
    // plain: every member still runs the same collective (the senders pack locally).
    if rank == 0 {
        let mut buf = vec![-1; total];
        {
            let mut partition = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
            root.gather_varcount_into_root(&msg[..], &mut partition);
        }
        assert_eq!(buf, expected, "gather_varcount from strided senders");
    } else {
        let strided: Vec<mpi::Rank> = (0..2 * rank)
            .map(|k| if k % 2 == 0 { k / 2 } else { -9 })
            .collect();
        let t = UserDatatype::vector(rank, 1, 2, &mpi::Rank::equivalent_datatype());
        // SAFETY: one vector element of `rank` ints with stride 2 lies inside `strided`.
        let v = unsafe { View::with_count_and_datatype(&strided[..], 1, &t) };
        root.gather_varcount_into(&v);
    }

    // The immediate forms (rsmpi's immediate_*_varcount examples).
    let mut everyone = vec![-1; total];
    {
        let mut partition = PartitionMut::new(&mut everyone[..], &counts[..], &displs[..]);
        mpi::request::scope(|scope| {
            world
                .immediate_all_gather_varcount_into(scope, &msg[..], &mut partition)
                .wait();
        });
    }
    assert_eq!(everyone, expected, "immediate_all_gather_varcount");
    if rank == 0 {
        let mut buf = vec![-1; total];
        {
            let mut partition = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
            mpi::request::scope(|scope| {
                root.immediate_gather_varcount_into_root(scope, &msg[..], &mut partition)
                    .wait();
            });
        }
        assert_eq!(buf, expected, "immediate_gather_varcount");
        let partition = Partition::new(&expected[..], counts.clone(), &displs[..]);
        let mut mine: Vec<mpi::Rank> = vec![];
        mpi::request::scope(|scope| {
            root.immediate_scatter_varcount_into_root(scope, &partition, &mut mine[..])
                .wait();
        });
    } else {
        mpi::request::scope(|scope| {
            root.immediate_gather_varcount_into(scope, &msg[..]).wait();
        });
        let mut mine = vec![-1; rank as usize];
        mpi::request::scope(|scope| {
            root.immediate_scatter_varcount_into(scope, &mut mine[..])
                .wait();
        });
        assert_eq!(mine, msg, "immediate_scatter_varcount");
    }

    // All-to-all of different counts: rank i sends j + 1 values i * 100 + j to rank j.
    let n = size as usize;
    let scounts: Vec<Count> = (0..size).map(|j| j + 1).collect();
    let sdispls: Vec<Count> = (0..size).map(|j| j * (j + 1) / 2).collect();
    let sendv: Vec<i32> = (0..size)
        .flat_map(|j| std::iter::repeat_n(rank * 100 + j, j as usize + 1))
        .collect();
    let rcounts: Vec<Count> = vec![rank + 1; n];
    let rdispls: Vec<Count> = (0..size).map(|i| i * (rank + 1)).collect();
    let want: Vec<i32> = (0..size)
        .flat_map(|i| std::iter::repeat_n(i * 100 + rank, rank as usize + 1))
        .collect();
    let mut got = vec![-1; want.len()];
    {
        let sp = Partition::new(&sendv[..], &scounts[..], &sdispls[..]);
        let mut rp = PartitionMut::new(&mut got[..], &rcounts[..], &rdispls[..]);
        world.all_to_all_varcount_into(&sp, &mut rp);
    }
    assert_eq!(got, want, "all_to_all_varcount");
    let mut got = vec![-1; want.len()];
    {
        let sp = Partition::new(&sendv[..], &scounts[..], &sdispls[..]);
        let mut rp = PartitionMut::new(&mut got[..], &rcounts[..], &rdispls[..]);
        mpi::request::scope(|scope| {
            world
                .immediate_all_to_all_varcount_into(scope, &sp, &mut rp)
                .wait();
        });
    }
    assert_eq!(got, want, "immediate_all_to_all_varcount");

    // Reduce-scatter: rank i gets the sums of block i (2 values) over every rank.
    let blocks: Vec<i64> = (0..2 * size as i64)
        .map(|k| rank as i64 * 1000 + k)
        .collect();
    let ranks_sum: i64 = (0..size as i64).sum();
    let want = [
        ranks_sum * 1000 + n as i64 * (2 * rank as i64),
        ranks_sum * 1000 + n as i64 * (2 * rank as i64 + 1),
    ];
    let mut mine = [0i64; 2];
    world.reduce_scatter_block_into(&blocks[..], &mut mine[..], SystemOperation::sum());
    assert_eq!(mine, want, "reduce_scatter_block");
    let mut mine = [0i64; 2];
    mpi::request::scope(|scope| {
        world
            .immediate_reduce_scatter_block_into(
                scope,
                &blocks[..],
                &mut mine[..],
                SystemOperation::sum(),
            )
            .wait();
    });
    assert_eq!(mine, want, "immediate_reduce_scatter_block");

    // An operation given as a C function, used by reference as rsmpi does.
    // SAFETY: c_add is only used on i32 buffers.
    let op = unsafe { UnsafeUserOperation::commutative(c_add) };
    let mut sum = 0i32;
    world.all_reduce_into(&rank, &mut sum, &op);
    assert_eq!(sum, size * (size - 1) / 2, "UnsafeUserOperation");
    assert_eq!(world.process_at_rank(0).root_rank(), 0);
    assert_eq!(world.target_size(), size);

    world.barrier();
    println!("rank {rank} of {size}: collectives ok");
}
