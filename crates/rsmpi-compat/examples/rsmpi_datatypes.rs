//! rsmpi's datatype module, the way its documentation and examples use it: user
//! datatypes (contiguous, vector, indexed, structured and their heterogeneous forms) seen
//! through `View`/`MutView` in point-to-point and collective calls, `Equivalence` written
//! by hand with `type Out`, `dup` and `DynBufferMut`, `pack`/`unpack_into`, `bool`,
//! `num_complex::Complex` and `MpiError`. Every value is checked exactly.

use mpi::datatype::{
    DynBuffer, DynBufferMut, MutView, UncommittedUserDatatype, UserDatatype, View,
};
use mpi::point_to_point as p2p;
use mpi::traits::*;
use mpi::{Address, Count};
use num_complex::{Complex32, Complex64};
use std::mem::{offset_of, size_of};

/// rsmpi's `structured.rs`: three ints described in reverse memory order.
struct MyInts([i32; 3]);

unsafe impl Equivalence for MyInts {
    type Out = UserDatatype;
    fn equivalent_datatype() -> Self::Out {
        let int = i32::equivalent_datatype();
        UserDatatype::structured(
            &[1, 1, 1],
            &[
                (size_of::<i32>() * 2) as Address,
                size_of::<i32>() as Address,
                0,
            ],
            &[&int, &int, &int],
        )
    }
}

type Tuple = ([f32; 2], u8);

/// rsmpi's `complex_datatype.rs`: a bool, padding, nested uncommitted datatypes.
#[derive(Default, Debug, PartialEq)]
struct Mixed {
    b: bool,
    ints: [i32; 4],
    tuple: Tuple,
}

unsafe impl Equivalence for Mixed {
    type Out = UserDatatype;
    fn equivalent_datatype() -> Self::Out {
        UserDatatype::structured(
            &[1, 1, 1],
            &[
                offset_of!(Mixed, b) as Address,
                offset_of!(Mixed, ints) as Address,
                offset_of!(Mixed, tuple) as Address,
            ],
            &[
                bool::equivalent_datatype().into(),
                UncommittedUserDatatype::contiguous(4, &i32::equivalent_datatype()).as_ref(),
                UncommittedUserDatatype::structured(
                    &[2, 1],
                    &[
                        offset_of!(Tuple, 0) as Address,
                        offset_of!(Tuple, 1) as Address,
                    ],
                    &[f32::equivalent_datatype(), u8::equivalent_datatype()],
                )
                .as_ref(),
            ],
        )
    }
}

fn main() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let rank = world.rank();
    let size = world.size();
    let next = world.process_at_rank((rank + 1) % size);
    let previous = world.process_at_rank((rank - 1 + size) % size);
    let from = (rank - 1 + size) % size;
    let f = |r: Count, x: i32| (r * 100 + x) as f64;

    // contiguous: rsmpi's contiguous.rs, a ring of three doubles through views.
    let t = UserDatatype::contiguous(3, &f64::equivalent_datatype());
    let b1: Vec<f64> = (1..=3).map(|x| f(rank, x)).collect();
    let mut b2 = vec![-1.0f64; 3];
    {
        let v1 = unsafe { View::with_count_and_datatype(&b1[..], 1, &t) };
        let mut v2 = unsafe { MutView::with_count_and_datatype(&mut b2[..], 1, &t) };
        let status = p2p::send_receive_into(&v1, &next, &mut v2, &previous);
        assert_eq!(status.source_rank(), from);
        assert_eq!(status.count(f64::equivalent_datatype()), 3);
        assert_eq!(status.count(t.as_ref()), 1);
    }
    assert_eq!(b2, [f(from, 1), f(from, 2), f(from, 3)]);

    // vector: 2 blocks of 2 doubles, 3 apart; the gaps of the receive are untouched.
    let t = UserDatatype::vector(2, 2, 3, &f64::equivalent_datatype());
    let b1: Vec<f64> = (0..6).map(|x| f(rank, x)).collect();
    let mut b2 = vec![-1.0f64; 6];
    {
        let v1 = unsafe { View::with_count_and_datatype(&b1[..], 1, &t) };
        let mut v2 = unsafe { MutView::with_count_and_datatype(&mut b2[..], 1, &t) };
        p2p::send_receive_into(&v1, &next, &mut v2, &previous);
    }
    let g = |x| f(from, x);
    assert_eq!(b2, [g(0), g(1), -1.0, g(3), g(4), -1.0]);

    // Immediate sends and receives of views (the receive unpacks when it completes).
    let mut b3 = vec![-1.0f64; 6];
    {
        let v1 = unsafe { View::with_count_and_datatype(&b1[..], 1, &t) };
        let mut v3 = unsafe { MutView::with_count_and_datatype(&mut b3[..], 1, &t) };
        mpi::request::scope(|scope| {
            let sreq = next.immediate_send(scope, &v1);
            let rreq = previous.immediate_receive_into(scope, &mut v3);
            rreq.wait();
            sreq.wait();
        });
    }
    assert_eq!(b3, b2);

    // Every other constructor: sent through a view, received packed into a vector (a
    // type signature matches whatever the layout).
    let int = i32::equivalent_datatype();
    let data: Vec<i32> = (0..16).map(|x| rank * 100 + x).collect();
    let cases: Vec<(UserDatatype, Vec<i32>)> = vec![
        (
            UserDatatype::heterogeneous_vector(3, 1, 12, &int),
            vec![0, 3, 6],
        ),
        (UserDatatype::indexed(&[1, 2], &[2, 5], &int), vec![2, 5, 6]),
        (
            UserDatatype::heterogeneous_indexed(&[2, 1], &[36, 4], &int),
            vec![9, 10, 1],
        ),
        (
            UserDatatype::indexed_block(2, &[0, 7, 3], &int),
            vec![0, 1, 7, 8, 3, 4],
        ),
        (
            UserDatatype::heterogeneous_indexed_block(1, &[60, 0], &int),
            vec![15, 0],
        ),
    ];
    for (t, want) in &cases {
        let v = unsafe { View::with_count_and_datatype(&data[..], 1, t) };
        next.send(&v);
        let (got, _) = previous.receive_vec::<i32>();
        let want: Vec<i32> = want.iter().map(|x| from * 100 + x).collect();
        assert_eq!(got, want);
    }
    // Two elements of an indexed type step by its extent (lower bound 8, extent 20).
    let t = UserDatatype::indexed(&[1, 2], &[2, 5], &int);
    let v = unsafe { View::with_count_and_datatype(&data[..], 2, &t) };
    next.send(&v);
    let mut back = [-1i32; 16];
    let mut mv = unsafe { MutView::with_count_and_datatype(&mut back[..], 2, &t) };
    previous.receive_into(&mut mv);
    for (i, x) in back.iter().enumerate() {
        let sent = [2, 5, 6, 7, 10, 11].contains(&i);
        assert_eq!(
            *x,
            if sent { from * 100 + i as i32 } else { -1 },
            "element {i}"
        );
    }

    // structured: rsmpi's structured.rs — the type map's order is the message's order.
    let root = world.process_at_rank(0);
    if rank == 0 {
        let mut mine = MyInts([3, 2, 1]);
        root.broadcast_into(&mut mine);
        assert_eq!(mine.0, [3, 2, 1]);
    } else {
        let mut ints = [0i32; 3];
        root.broadcast_into(&mut ints[..]);
        assert_eq!(ints, [1, 2, 3]);
    }
    // A bool, padding and nested uncommitted datatypes (rsmpi's complex_datatype.rs).
    let mut m = if rank == 0 {
        Mixed {
            b: true,
            ints: [1, -2, 3, -4],
            tuple: ([-0.1, 0.1], 7),
        }
    } else {
        Mixed::default()
    };
    root.broadcast_into(&mut m);
    assert!(m.b);
    assert_eq!(m.ints, [1, -2, 3, -4]);
    assert_eq!(m.tuple, ([-0.1, 0.1], 7));
    assert_eq!(
        Mixed::equivalent_datatype().extent(),
        size_of::<Mixed>(),
        "a structure's extent is rounded to its alignment"
    );
    // And point-to-point.
    let mine = Mixed {
        b: rank % 2 == 1,
        ints: [rank; 4],
        tuple: ([rank as f32, 0.5], rank as u8),
    };
    let (theirs, _): (Mixed, _) = p2p::send_receive(&mine, &next, &previous);
    assert_eq!(
        theirs,
        Mixed {
            b: from % 2 == 1,
            ints: [from; 4],
            tuple: ([from as f32, 0.5], from as u8),
        }
    );

    // A broadcast of a view (a vector type) into a view of the same type.
    let t = UserDatatype::vector(3, 1, 2, &f64::equivalent_datatype());
    let mut b = if rank == 0 {
        vec![1.0, -1.0, 2.0, -1.0, 3.0]
    } else {
        vec![0.0; 5]
    };
    {
        let mut v = unsafe { MutView::with_count_and_datatype(&mut b[..], 1, &t) };
        root.broadcast_into(&mut v);
    }
    let gap = if rank == 0 { -1.0 } else { 0.0 };
    assert_eq!(b, [1.0, gap, 2.0, gap, 3.0]);
    // All-gather of views into a plain vector, and of plain values into views.
    let b: Vec<f64> = (0..5).map(|x| f(rank, x)).collect();
    let mut all = vec![0.0f64; 3 * size as usize];
    {
        let v = unsafe { View::with_count_and_datatype(&b[..], 1, &t) };
        world.all_gather_into(&v, &mut all[..]);
    }
    for r in 0..size {
        let at = 3 * r as usize;
        assert_eq!(all[at..at + 3], [f(r, 0), f(r, 2), f(r, 4)]);
    }
    // An all-reduce through a view: the sum of every rank's strided values.
    let mut sum = vec![0.0f64; 5];
    {
        let v = unsafe { View::with_count_and_datatype(&b[..], 1, &t) };
        let mut s = unsafe { MutView::with_count_and_datatype(&mut sum[..], 1, &t) };
        world.all_reduce_into(&v, &mut s, mpi::collective::SystemOperation::sum());
    }
    let total = |x| (0..size).map(|r| f(r, x)).sum::<f64>();
    assert_eq!(sum, [total(0), 0.0, total(2), 0.0, total(4)]);

    // Gather views at the root and scatter back into views; scans, a reduction and an
    // all-to-all through views (element j of the vector type: ints 3j and 3j + 2).
    let sum = mpi::collective::SystemOperation::sum;
    let t = UserDatatype::vector(2, 1, 2, &i32::equivalent_datatype());
    let mine = [rank, -7, rank * 10];
    let v = unsafe { View::with_count_and_datatype(&mine[..], 1, &t) };
    let mut back = [0i32, -5, 0];
    if rank == 0 {
        let mut all = vec![0i32; 2 * size as usize];
        root.gather_into_root(&v, &mut all[..]);
        let want: Vec<i32> = (0..size).flat_map(|r| [r, r * 10]).collect();
        assert_eq!(all, want);
        let mut mv = unsafe { MutView::with_count_and_datatype(&mut back[..], 1, &t) };
        root.scatter_into_root(&all[..], &mut mv);
        let mut red = [-1i32, -5, -1];
        let mut mv = unsafe { MutView::with_count_and_datatype(&mut red[..], 1, &t) };
        root.reduce_into_root(&v, &mut mv, sum());
        let s = (0..size).sum::<i32>();
        assert_eq!(red, [s, -5, 10 * s]);
    } else {
        root.gather_into(&v);
        let mut mv = unsafe { MutView::with_count_and_datatype(&mut back[..], 1, &t) };
        root.scatter_into(&mut mv);
        root.reduce_into(&v, sum());
    }
    assert_eq!(back, [rank, -5, rank * 10]);
    let mut acc = [-1i32, -5, -1];
    {
        let mut mv = unsafe { MutView::with_count_and_datatype(&mut acc[..], 1, &t) };
        world.scan_into(&v, &mut mv, sum());
    }
    let upto = (0..=rank).sum::<i32>();
    assert_eq!(acc, [upto, -5, 10 * upto]);
    let mut ex = [-1i32, -5, -1];
    {
        let mut mv = unsafe { MutView::with_count_and_datatype(&mut ex[..], 1, &t) };
        world.exclusive_scan_into(&v, &mut mv, sum());
    }
    let before = (0..rank).sum::<i32>();
    let want = if rank == 0 {
        [-1, -5, -1]
    } else {
        [before, -5, 10 * before]
    };
    assert_eq!(ex, want, "rank 0's receive buffer is left as it was");
    let n = size as usize;
    let out: Vec<i32> = (0..n as i32)
        .flat_map(|j| [rank * 100 + j, -1, rank * 100 + j + 50])
        .collect();
    let mut got = vec![0i32; 2 * n];
    {
        let v = unsafe { View::with_count_and_datatype(&out[..], size, &t) };
        world.all_to_all_into(&v, &mut got[..]);
    }
    let want: Vec<i32> = (0..size)
        .flat_map(|j| [j * 100 + rank, j * 100 + rank + 50])
        .collect();
    assert_eq!(got, want);

    // dup and DynBufferMut: rsmpi's datatype_dup.rs.
    let int_type = i32::equivalent_datatype().dup();
    let mut ints = if rank == 0 { [1i32, 2, 3, 4] } else { [0; 4] };
    let mut buffer = unsafe { DynBufferMut::from_raw(ints.as_mut_ptr(), 4, int_type.as_ref()) };
    root.broadcast_into(&mut buffer);
    assert_eq!(ints, [1, 2, 3, 4]);
    let d = DynBuffer::new(&ints[..]);
    assert!(d.is::<i32>() && !d.is::<u32>());
    assert_eq!(d.downcast::<i32>(), Some(&[1, 2, 3, 4][..]));
    next.send(&d);
    let (got, _) = previous.receive_vec::<i32>();
    assert_eq!(got, [1, 2, 3, 4]);

    // pack / unpack_into / pack_size: rsmpi's pack.rs, with a vector view, over the ring.
    let t = UserDatatype::vector(2, 1, 2, &i32::equivalent_datatype());
    let src = [rank, -1, rank + 10, -1];
    let v = unsafe { View::with_count_and_datatype(&src[..], 1, &t) };
    assert_eq!(world.pack_size(1, &t), 8);
    let packed = world.pack(&v);
    assert_eq!(packed.len(), 8);
    next.send(&packed[..]);
    let (bytes, _) = previous.receive_vec::<u8>();
    let mut dst = [0i32; 4];
    let mut mv = unsafe { MutView::with_count_and_datatype(&mut dst[..], 1, &t) };
    let pos = unsafe { world.unpack_into(&bytes, &mut mv, 0) };
    assert_eq!(pos, 8);
    assert_eq!(dst, [from, 0, from + 10, 0]);
    let mut buf = vec![0u8; 12];
    assert_eq!(world.pack_into(&[7i32][..], &mut buf, 0), 4);
    assert_eq!(world.pack_into(&v, &mut buf, 4), 12);
    let mut one = 0i32;
    let mut two = [0i32; 2];
    unsafe {
        assert_eq!(world.unpack_into(&buf, &mut one, 0), 4);
        assert_eq!(world.unpack_into(&buf, &mut two[..], 4), 12);
    }
    assert_eq!((one, two), (7, [rank, rank + 10]));

    // bool: rsmpi's all_gather_bool.rs, and bytes that are not 0 or 1 never make an
    // invalid bool (they arrive as true).
    let mut a = vec![0u8; size as usize];
    world.all_gather_into(&(rank % 2 == 0), &mut a[..]);
    let want: Vec<u8> = (0..size).map(|i| (i % 2 == 0) as u8).collect();
    assert_eq!(a, want);
    let mut flags = vec![true; size as usize];
    world.all_gather_into(&(rank % 2 == 1), &mut flags[..]);
    let want: Vec<bool> = (0..size).map(|i| i % 2 == 1).collect();
    assert_eq!(flags, want);
    next.send(&[0u8, 1, 2, 255][..]);
    let mut got = [false; 4];
    previous.receive_into(&mut got[..]);
    assert_eq!(got, [false, true, true, true]);
    let raw: Vec<u8> = got
        .iter()
        .map(|b| unsafe { *(b as *const bool as *const u8) })
        .collect();
    assert_eq!(raw, [0, 1, 1, 1], "every bool byte is 0 or 1");
    next.send(&7u8);
    let (b, _) = previous.receive::<bool>();
    assert!(b);
    let mut any = false;
    world.all_reduce_into(
        &(rank == 0),
        &mut any,
        mpi::collective::SystemOperation::logical_or(),
    );
    assert!(any);

    // Complex numbers (the `complex` feature): rsmpi's complex_numbers.rs, and complex
    // sums and products.
    let mut data = if rank == 0 {
        vec![
            Complex64::new(1.0, 2.0),
            Complex64::new(2.0, 3.0),
            Complex64::new(3.0, 4.0),
        ]
    } else {
        vec![Complex64::new(0.0, 0.0); 3]
    };
    root.broadcast_into(&mut data);
    assert_eq!(
        data,
        [
            Complex64::new(1.0, 2.0),
            Complex64::new(2.0, 3.0),
            Complex64::new(3.0, 4.0)
        ]
    );
    let z = Complex32::new(0.0, 1.0); // i
    let mut prod = Complex32::new(0.0, 0.0);
    world.all_reduce_into(&z, &mut prod, mpi::collective::SystemOperation::product());
    let want = (0..size).fold(Complex32::new(1.0, 0.0), |acc, _| acc * z);
    assert_eq!(prod, want, "i to the power {size}");
    let mut s = Complex32::new(0.0, 0.0);
    world.all_reduce_into(
        &Complex32::new(rank as f32, 1.0),
        &mut s,
        mpi::collective::SystemOperation::sum(),
    );
    assert_eq!(
        s,
        Complex32::new((0..size).sum::<i32>() as f32, size as f32)
    );

    // The immediate collectives with non-contiguous buffers (packed stand-ins, unpacked
    // when the request completes): a broadcast of a vector view, an all-reduce from and
    // into strided views, a gather into a view at the root, and bools.
    let t = UserDatatype::vector(2, 2, 3, &f64::equivalent_datatype());
    let mut b = if rank == 0 {
        vec![1.0, 2.0, -5.0, 3.0, 4.0, -5.0]
    } else {
        vec![-1.0f64; 6]
    };
    {
        let mut v = unsafe { MutView::with_count_and_datatype(&mut b[..], 1, &t) };
        mpi::request::scope(|scope| {
            world
                .process_at_rank(0)
                .immediate_broadcast_into(scope, &mut v)
                .wait();
        });
    }
    let gap = if rank == 0 { -5.0 } else { -1.0 };
    assert_eq!(
        b,
        [1.0, 2.0, gap, 3.0, 4.0, gap],
        "immediate broadcast of a view"
    );
    let src: Vec<f64> = (0..6).map(|x| (rank + x) as f64).collect();
    let mut dst = vec![-1.0f64; 6];
    {
        let v1 = unsafe { View::with_count_and_datatype(&src[..], 1, &t) };
        let mut v2 = unsafe { MutView::with_count_and_datatype(&mut dst[..], 1, &t) };
        mpi::request::scope(|scope| {
            world
                .immediate_all_reduce_into(
                    scope,
                    &v1,
                    &mut v2,
                    mpi::collective::SystemOperation::sum(),
                )
                .wait();
        });
    }
    let ranks: f64 = (0..size).map(|r| r as f64).sum();
    let s = |x: i32| ranks + (size * x) as f64;
    assert_eq!(
        dst,
        [s(0), s(1), -1.0, s(3), s(4), -1.0],
        "immediate all-reduce of views"
    );
    let mine = [rank % 2 == 0, true];
    let mut all = vec![false; 2 * size as usize];
    mpi::request::scope(|scope| {
        world
            .immediate_all_gather_into(scope, &mine[..], &mut all[..])
            .wait();
    });
    for r in 0..size as usize {
        assert_eq!(
            all[2 * r..2 * r + 2],
            [r % 2 == 0, true],
            "immediate all-gather of bools"
        );
    }

    // An immediate all-gather of different counts from strided views: rank r sends its
    // r + 1 values (every other element of its buffer).
    let strided: Vec<i32> = (0..2 * (rank + 1))
        .map(|k| if k % 2 == 0 { rank * 10 + k / 2 } else { -7 })
        .collect();
    let every_other = UserDatatype::vector(rank + 1, 1, 2, &i32::equivalent_datatype());
    let counts: Vec<Count> = (1..=size).collect();
    let displs: Vec<Count> = (0..size).map(|r| r * (r + 1) / 2).collect();
    let mut gathered = vec![-1i32; (size * (size + 1) / 2) as usize];
    {
        let v = unsafe { View::with_count_and_datatype(&strided[..], 1, &every_other) };
        let mut part =
            mpi::datatype::PartitionMut::new(&mut gathered[..], &counts[..], &displs[..]);
        mpi::request::scope(|scope| {
            world
                .immediate_all_gather_varcount_into(scope, &v, &mut part)
                .wait();
        });
    }
    let want: Vec<i32> = (0..size)
        .flat_map(|r| (0..=r).map(move |k| r * 10 + k))
        .collect();
    assert_eq!(
        gathered, want,
        "immediate all-gather varcount of strided views"
    );

    // MpiError (crate root).
    let e: mpi::MpiError = std::ffi::CString::new("a\0b").unwrap_err().into();
    assert!(matches!(e, mpi::MpiError::StringNul(_)));
    assert!(e.to_string().to_lowercase().contains("nul"));

    world.barrier();
    println!("rank {rank} of {size}: datatypes ok");
}
