//! rsmpi's `mpi::ffi` beside the Rust API, the way rsmpi programs mix them: the C
//! functions on the Rust API's universe (no `MPI_Init`), handles from `as_raw()` of a
//! communicator, a datatype and an operation, and messages crossing between a C send and
//! a Rust receive (and back); a matched message received through C by its handle
//! (`AsRawMut`), one whose handle was asked for received in Rust, one dropped; requests
//! handed across (`into_raw` to a C `MPI_Wait`, a C `MPI_Irecv` through `from_raw` to a
//! Rust wait).

use mpi::collective::SystemOperation;
use mpi::ffi;
use mpi::traits::*;
use std::ffi::{c_int, c_void};

fn main() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());

    let (mut r, mut s, mut flag): (c_int, c_int, c_int) = (-1, -1, 0);
    // SAFETY: valid handles and writable ints.
    unsafe {
        assert_eq!(ffi::MPI_Initialized(&mut flag), ffi::MPI_SUCCESS);
        assert_eq!(
            ffi::MPI_Comm_rank(ffi::RSMPI_COMM_WORLD, &mut r),
            ffi::MPI_SUCCESS
        );
        assert_eq!(ffi::MPI_Comm_size(world.as_raw(), &mut s), ffi::MPI_SUCCESS);
    }
    assert_eq!((flag, r, s), (1, rank, size));
    assert_eq!(world.as_raw(), ffi::RSMPI_COMM_WORLD);

    // A C reduction on a communicator the Rust API made.
    let dup = world.duplicate();
    assert_eq!(dup.as_raw(), dup.as_raw(), "one handle per communicator");
    let mut sum: i32 = -1;
    // SAFETY: one i32 in, one out; handles from as_raw.
    let rc = unsafe {
        ffi::MPI_Allreduce(
            &rank as *const i32 as *const c_void,
            &mut sum as *mut i32 as *mut c_void,
            1,
            i32::equivalent_datatype().as_raw(),
            SystemOperation::sum().as_raw(),
            dup.as_raw(),
        )
    };
    assert_eq!(rc, ffi::MPI_SUCCESS);
    assert_eq!(sum, size * (size - 1) / 2);

    // C send → Rust receive, Rust send → C receive, on the world.
    if size > 1 {
        if rank == 0 {
            let v: f64 = 2.5;
            // SAFETY: one double.
            let rc = unsafe {
                ffi::MPI_Send(
                    &v as *const f64 as *const c_void,
                    1,
                    ffi::RSMPI_DOUBLE,
                    1,
                    7,
                    world.as_raw(),
                )
            };
            assert_eq!(rc, ffi::MPI_SUCCESS);
            let (back, status) = world.process_at_rank(1).receive_with_tag::<u64>(8);
            assert_eq!((back, status.source_rank()), (99, 1));
        } else if rank == 1 {
            let (v, _) = world.process_at_rank(0).receive_with_tag::<f64>(7);
            assert_eq!(v, 2.5);
            world.process_at_rank(0).send_with_tag(&99u64, 8);
        }
    }
    let mut st = std::mem::MaybeUninit::<ffi::MPI_Status>::zeroed();
    if size > 1 && rank == 1 {
        let mut got: u64 = 0;
        // SAFETY: one u64, writable status.
        let rc = unsafe {
            ffi::MPI_Recv(
                &mut got as *mut u64 as *mut c_void,
                1,
                ffi::RSMPI_UINT64_T,
                0,
                9,
                world.as_raw(),
                st.as_mut_ptr(),
            )
        };
        assert_eq!(rc, ffi::MPI_SUCCESS);
        assert_eq!(got, 1234);
    } else if size > 1 && rank == 0 {
        world.process_at_rank(1).send_with_tag(&1234u64, 9);
    }
    // Matched messages and C (rsmpi's `AsRawMut` for `Message`), around the ring.
    let next = world.process_at_rank((rank + 1) % size);
    let from = (rank + size - 1) % size;
    let prev = world.process_at_rank(from);
    let (first, second) = (rank as i64 * 3, [rank as u16; 4]);
    mpi::request::scope(|scope| {
        let a = next.immediate_send_with_tag(scope, &first, 20);
        let b = next.immediate_send_with_tag(scope, &second, 21);
        let c = next.immediate_send_with_tag(scope, &7u8, 22);
        // Received by MPI_Mrecv through the handle in the message.
        let (mut msg, status) = prev.matched_probe_with_tag(20);
        assert_eq!(status.source_rank(), from);
        let h = msg.as_raw();
        assert_ne!(h, ffi::RSMPI_MESSAGE_NULL);
        assert_eq!(msg.as_raw(), h, "one handle per message");
        let mut x: i64 = -1;
        // SAFETY: one i64, the message's handle, a writable status.
        let rc = unsafe {
            ffi::MPI_Mrecv(
                &mut x as *mut i64 as *mut c_void,
                1,
                ffi::RSMPI_INT64_T,
                msg.as_raw_mut(),
                st.as_mut_ptr(),
            )
        };
        assert_eq!(rc, ffi::MPI_SUCCESS);
        assert_eq!(x, from as i64 * 3);
        assert_eq!(msg.as_raw(), ffi::RSMPI_MESSAGE_NULL);
        drop(msg);
        // Its handle asked for, received in Rust.
        let (msg, _) = prev.matched_probe_with_tag(21);
        assert_ne!(msg.as_raw(), ffi::RSMPI_MESSAGE_NULL);
        let mut y = [0u16; 4];
        msg.matched_receive_into(&mut y);
        assert_eq!(y, [from as u16; 4]);
        // Its handle asked for, dropped: thrown away, so its send completes.
        let (msg, _) = prev.matched_probe_with_tag(22);
        let _ = msg.as_raw();
        drop(msg);
        a.wait();
        b.wait();
        c.wait();
    });

    // Requests across (rsmpi's `Request::into_raw`/`from_raw`): a Rust receive finished by
    // C's MPI_Wait, and a C MPI_Irecv finished by the Rust request it becomes.
    if size > 1 {
        let peer = if rank == 0 { 1 } else { 0 };
        if rank < 2 {
            let mut got = [0u64; 3];
            let mut st = ffi::MPI_Status::empty(-1);
            mpi::request::scope(|sc| {
                let rq = world.process_at_rank(peer).immediate_receive_into_with_tag(
                    sc,
                    &mut got[..],
                    31,
                );
                // SAFETY: completed below, inside the scope.
                let (mut h, _, _) = unsafe { rq.into_raw() };
                assert_ne!(h, ffi::RSMPI_REQUEST_NULL);
                world
                    .process_at_rank(peer)
                    .send_with_tag(&[rank as u64, 8, 9][..], 31);
                // SAFETY: a live request handle and a writable status.
                unsafe { assert_eq!(ffi::MPI_Wait(&mut h, &mut st), ffi::MPI_SUCCESS) };
                assert_eq!(h, ffi::RSMPI_REQUEST_NULL);
            });
            assert_eq!(
                got,
                [peer as u64, 8, 9],
                "a Rust receive completed by MPI_Wait"
            );
            assert_eq!((st.MPI_SOURCE, st.MPI_TAG), (peer, 31));
            let mut back = [0i32; 2];
            let mut h: ffi::MPI_Request = ffi::RSMPI_REQUEST_NULL;
            // SAFETY: two writable ints, valid until the request completes below.
            let rc = unsafe {
                ffi::MPI_Irecv(
                    back.as_mut_ptr() as *mut c_void,
                    2,
                    ffi::RSMPI_INT32_T,
                    peer,
                    32,
                    ffi::RSMPI_COMM_WORLD,
                    &mut h,
                )
            };
            assert_eq!(rc, ffi::MPI_SUCCESS);
            world
                .process_at_rank(peer)
                .send_with_tag(&[rank * 10, rank * 10 + 1][..], 32);
            let status = mpi::request::scope(|sc| {
                // SAFETY: a live receive into `back`, not used afterwards.
                let rq = unsafe { mpi::request::Request::from_raw(h, &back, sc) };
                rq.wait()
            });
            assert_eq!(
                back,
                [peer * 10, peer * 10 + 1],
                "a C receive completed in Rust"
            );
            assert_eq!((status.source_rank(), status.tag()), (peer, 32));
            // A send that completed as it started: its handle is a completed request.
            mpi::request::scope(|sc| {
                let rq = world
                    .process_at_rank(peer)
                    .immediate_send_with_tag(sc, &7u8, 33);
                // SAFETY: completed below.
                let (mut h, _, _) = unsafe { rq.into_raw() };
                // SAFETY: as above.
                unsafe {
                    assert_eq!(
                        ffi::MPI_Wait(&mut h, ffi::RSMPI_STATUS_IGNORE),
                        ffi::MPI_SUCCESS
                    )
                };
            });
            let (v, _) = world.process_at_rank(peer).receive_with_tag::<u8>(33);
            assert_eq!(v, 7);
        }
    }

    // The same on a communicator whose ranks are not world ranks (reversed): statuses
    // name its ranks, whichever side completes the request.
    if size > 1 {
        let rev = world
            .split_by_color_with_key(mpi::topology::Color::with_value(0), -rank)
            .expect("a color");
        let me = rev.rank();
        assert_eq!(me, size - 1 - rank);
        if me < 2 {
            let peer = 1 - me;
            let mut got = [0i32; 1];
            let mut st = ffi::MPI_Status::empty(-1);
            mpi::request::scope(|sc| {
                let rq =
                    rev.process_at_rank(peer)
                        .immediate_receive_into_with_tag(sc, &mut got[..], 41);
                // SAFETY: completed below, inside the scope.
                let (mut h, _, _) = unsafe { rq.into_raw() };
                rev.process_at_rank(peer).send_with_tag(&[me][..], 41);
                // SAFETY: a live request handle and a writable status.
                unsafe { assert_eq!(ffi::MPI_Wait(&mut h, &mut st), ffi::MPI_SUCCESS) };
            });
            assert_eq!((got[0], st.MPI_SOURCE), (peer, peer), "into_raw on a split");
            let mut back = [0i32; 1];
            let mut h: ffi::MPI_Request = ffi::RSMPI_REQUEST_NULL;
            // SAFETY: one writable int, valid until the request completes below.
            let rc = unsafe {
                ffi::MPI_Irecv(
                    back.as_mut_ptr() as *mut c_void,
                    1,
                    ffi::RSMPI_INT32_T,
                    peer,
                    42,
                    rev.as_raw(),
                    &mut h,
                )
            };
            assert_eq!(rc, ffi::MPI_SUCCESS);
            rev.process_at_rank(peer).send_with_tag(&[me][..], 42);
            let status = mpi::request::scope(|sc| {
                // SAFETY: a live receive into `back`, not used afterwards.
                let rq = unsafe { mpi::request::Request::from_raw(h, &back, sc) };
                rq.wait()
            });
            assert_eq!(
                (back[0], status.source_rank()),
                (peer, peer),
                "from_raw on a split"
            );
        }
    }

    // Handles back to Rust objects (rsmpi's FromRaw), a group through C.
    // SAFETY: live handles from as_raw.
    let back = unsafe { mpi::topology::SimpleCommunicator::from_raw(dup.as_raw()) };
    assert_eq!((back.rank(), back.size()), (rank, size));
    let g = world.group().as_raw();
    let mut gs: c_int = -1;
    // SAFETY: a live group handle, a writable int.
    unsafe { assert_eq!(ffi::MPI_Group_size(g, &mut gs), ffi::MPI_SUCCESS) };
    assert_eq!(gs, size);
    // SAFETY: as above.
    let group = unsafe { mpi::topology::UserGroup::from_raw(g) };
    assert_eq!(group.rank(), Some(rank));
    // SAFETY: the world handle.
    unsafe { assert_eq!(ffi::MPI_Barrier(ffi::RSMPI_COMM_WORLD), ffi::MPI_SUCCESS) };
    println!("rank {rank} of {size}: ffi ok");
}
