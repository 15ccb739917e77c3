//! rsmpi's remaining point-to-point and request API, used the way its documentation and
//! examples use it: matched probes and `Message`s (also on a large message whose data
//! has not moved yet), `ReceiveFuture`, buffered sends against an attached buffer,
//! cancelling a posted receive (`Request::cancel`, `CancelGuard`), and request
//! collections (`multiple_scope`, `RequestCollection`) with every wait and test.
//! Every result is checked exactly.

use mpi::point_to_point::Status;
use mpi::request::{CancelGuard, RequestCollection, Scope, WaitGuard};
use mpi::traits::*;
use mpi::Rank;

const COUNT: usize = 64;

fn main() {
    let mut universe = mpi::initialize().unwrap();
    let world = universe.world();
    let size = world.size();
    let rank = world.rank();
    let next = world.process_at_rank((rank + 1) % size);
    let prev_rank = (rank - 1 + size) % size;
    let prev = world.process_at_rank(prev_rank);

    // Matched probe: the probed message is taken out of matching. Two messages from the
    // previous rank; the matched probe takes the first, a receive for any tag then gets
    // the second, and the `Message` still receives the first.
    let a = [rank; 3];
    let b = [10 * rank; 5];
    mpi::request::scope(|scope| {
        let _sa = WaitGuard::from(next.immediate_send_with_tag(scope, &a[..], 1));
        let _sb = WaitGuard::from(next.immediate_send_with_tag(scope, &b[..], 2));
        let (msg, status) = prev.matched_probe();
        assert_eq!((status.source_rank(), status.tag()), (prev_rank, 1));
        assert_eq!(status.count(Rank::equivalent_datatype()), 3);
        assert!(!msg.is_no_proc());
        // Nothing but the second message can be received or probed now.
        let st = prev.probe();
        assert_eq!(st.tag(), 2);
        let (second, st) = prev.receive_vec::<Rank>();
        assert_eq!((second, st.tag()), (vec![10 * prev_rank; 5], 2));
        assert!(prev.immediate_matched_probe().is_none());
        let (first, st) = (msg, status).matched_receive_vec::<Rank>();
        assert_eq!((first, st.source_rank()), (vec![prev_rank; 3], prev_rank));
    });
    world.barrier();

    // A single value through `matched_receive`, and `matched_receive_into`.
    let x = 1.5f64 * rank as f64;
    let v = [rank as u16; 7];
    mpi::request::scope(|scope| {
        let _s1 = WaitGuard::from(next.immediate_send_with_tag(scope, &x, 7));
        let _s2 = WaitGuard::from(next.immediate_send_with_tag(scope, &v[..], 8));
        let (msg, status) = prev.matched_probe_with_tag(7);
        assert_eq!(status.tag(), 7);
        let (y, st): (f64, Status) = msg.matched_receive();
        assert_eq!((y, st.tag()), (1.5 * prev_rank as f64, 7));
        let (msg, _) = prev.matched_probe_with_tag(8);
        let mut w = [0u16; 7];
        let st = msg.matched_receive_into(&mut w[..]);
        assert_eq!(
            (w, st.count(u16::equivalent_datatype())),
            ([prev_rank as u16; 7], 7)
        );
    });
    world.barrier();

    // A large message (rendezvous: its data moves only when it is received), probed
    // with `immediate_matched_probe` as rsmpi's example does, received with
    // `immediate_matched_receive_into`.
    let big: Vec<u32> = (0..300_000u32).map(|i| i ^ rank as u32).collect();
    let mut got = vec![0u32; big.len()];
    // And a middle-sized one: eager, in many fragments over UDP, probed when its first
    // fragment is in (the rest is appended to the probed message).
    let mid: Vec<u64> = (0..2000u64).map(|i| i * 3 + rank as u64).collect();
    mpi::request::scope(|scope| {
        let _m = WaitGuard::from(next.immediate_send_with_tag(scope, &mid[..], 12));
        let (v, st) = prev.matched_probe_with_tag(12).matched_receive_vec::<u64>();
        assert_eq!(st.count(u64::equivalent_datatype()), 2000);
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &x)| x == i as u64 * 3 + prev_rank as u64));
        let _s = WaitGuard::from(next.immediate_send_with_tag(scope, &big[..], 11));
        let (msg, status) = loop {
            if let Some(p) = prev.immediate_matched_probe_with_tag(11) {
                break p;
            }
        };
        assert_eq!(status.count(u32::equivalent_datatype()), big.len() as i32);
        let data = msg
            .immediate_matched_receive_into(scope, &mut got[..])
            .wait_for_data();
        assert!(data
            .iter()
            .enumerate()
            .all(|(i, &x)| x == i as u32 ^ prev_rank as u32));
    });
    world.barrier();

    // ReceiveFuture: `get`, and `try` until it is there.
    let future = prev.immediate_receive_with_tag::<i64>(20);
    next.send_with_tag(&(rank as i64 * 1000), 20);
    let (v, st) = future.get();
    assert_eq!((v, st.source_rank()), (prev_rank as i64 * 1000, prev_rank));
    // An array is a buffer of its elements (two i16s), received as one derived `Pair`.
    #[derive(Equivalence, Clone, Copy, PartialEq, Debug)]
    struct Pair([i16; 2]);
    let mut future = prev.immediate_receive::<Pair>();
    world.barrier();
    next.send(&[rank as i16, -(rank as i16)]);
    let (v, _) = loop {
        match future.r#try() {
            Ok(r) => break r,
            Err(f) => future = f,
        }
    };
    assert_eq!(v, Pair([prev_rank as i16, -(prev_rank as i16)]));
    world.barrier();

    // Buffered sends against an attached buffer: room for two messages in flight.
    let msg: Vec<f32> = (0..1000).map(|i| (i * (rank + 1)) as f32).collect();
    let need = 4 * msg.len() + 512;
    universe.set_buffer_size(2 * need);
    assert_eq!(universe.buffer_size(), 2 * need);
    next.buffered_send_with_tag(&msg[..], 30);
    mpi::request::scope(|scope| {
        let r = next.immediate_buffered_send_with_tag(scope, &msg[..], 31);
        r.wait();
    });
    for tag in [30, 31] {
        let (v, st) = prev.receive_vec_with_tag::<f32>(tag);
        assert_eq!(st.tag(), tag);
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (i as i32 * (prev_rank + 1)) as f32));
    }
    universe.detach_buffer();
    assert_eq!(universe.buffer_size(), 0);
    world.barrier();

    // Cancel: a receive nobody sends to is cancelled and reports it; the message sent
    // afterwards goes to the receive posted after it. A send that already left is not
    // cancelled (MPI allows that) and is received normally.
    let mut y = -1i32;
    let mut z = -1i32;
    let five = 5 * rank;
    mpi::request::scope(|scope| {
        let r = world
            .this_process()
            .immediate_receive_into_with_tag(scope, &mut y, 40);
        r.cancel();
        let st = r.wait();
        assert!(st.is_cancelled());
        let r2 = world
            .this_process()
            .immediate_receive_into_with_tag(scope, &mut z, 40);
        world.this_process().send_with_tag(&rank, 40);
        assert!(!r2.wait().is_cancelled());

        let s = world
            .this_process()
            .immediate_send_with_tag(scope, &five, 41);
        s.cancel();
        if !s.wait().is_cancelled() {
            let (v, _) = world.this_process().receive_with_tag::<Rank>(41);
            assert_eq!(v, 5 * rank);
        }
    });
    assert_eq!((y, z), (-1, rank));
    let mut w = -1i32;
    mpi::request::scope(|scope| {
        let _g = CancelGuard::from(prev.immediate_receive_into_with_tag(scope, &mut w, 42));
    });
    assert_eq!(w, -1);
    world.barrier();

    // Request collections, as rsmpi's immediate_multiple_* examples use them.
    let mut result = vec![0; COUNT];
    mpi::request::multiple_scope(2 * COUNT, |scope, coll| {
        for _ in 0..COUNT {
            coll.add(next.immediate_send(scope, &rank));
        }
        for val in result.iter_mut() {
            coll.add(prev.immediate_receive_into(scope, val));
        }
        let (mut sent, mut received) = (0, 0);
        while coll.incomplete() > 0 {
            let (i, _, data) = coll.wait_any().unwrap();
            if i < COUNT {
                assert_eq!(*data, rank);
                sent += 1;
            } else {
                assert_eq!(*data, prev_rank);
                received += 1;
            }
        }
        assert_eq!((sent, received), (COUNT, COUNT));
        assert!(coll.wait_any().is_none());
    });
    assert!(result.iter().all(|&v| v == prev_rank));

    let blocks: Vec<[i32; 4]> = (0..COUNT as i32).map(|i| [rank, i, -i, 7]).collect();
    let check = |got: &[(usize, Status, &[i32; 4])], recv_from: Rank| {
        for (i, _, d) in got {
            let k = (*i % COUNT) as i32;
            let from = if *i < COUNT { rank } else { recv_from };
            assert_eq!(**d, [from, k, -k, 7]);
        }
    };
    for how in ["wait_some", "wait_all", "test_any", "test_some", "test_all"] {
        let mut recv = vec![[0i32; 4]; COUNT];
        mpi::request::multiple_scope(2 * COUNT, |scope, coll| {
            send_recv(&world, scope, coll, &next, &prev, &blocks, &mut recv);
            let mut all = Vec::new();
            let mut out = Vec::new();
            match how {
                "wait_some" => {
                    while coll.incomplete() > 0 {
                        coll.wait_some(&mut out);
                        assert!(!out.is_empty());
                        all.append(&mut out);
                    }
                }
                "wait_all" => {
                    coll.wait_all(&mut out);
                    all.append(&mut out);
                }
                "test_any" => {
                    while coll.incomplete() > 0 {
                        if let Some(r) = coll.test_any() {
                            all.push(r);
                        }
                    }
                }
                "test_some" => {
                    while coll.incomplete() > 0 {
                        coll.test_some(&mut out);
                        all.append(&mut out);
                    }
                }
                _ => {
                    while !coll.test_all(&mut out) {
                        assert!(out.is_empty());
                    }
                    all.append(&mut out);
                }
            }
            assert_eq!(coll.incomplete(), 0);
            let mut idx: Vec<usize> = all.iter().map(|r| r.0).collect();
            idx.sort();
            assert_eq!(idx, (0..2 * COUNT).collect::<Vec<_>>(), "{how}");
            check(&all, prev_rank);
        });
        for (k, r) in recv.iter().enumerate() {
            assert_eq!(*r, [prev_rank, k as i32, -(k as i32), 7]);
        }
    }

    // Immediate barriers in a collection (rsmpi's immediate_multiple_barrier).
    mpi::request::multiple_scope(8, |_, coll| {
        for _ in 0..8 {
            coll.add(world.immediate_barrier());
        }
        let mut out = Vec::new();
        coll.wait_all(&mut out);
        assert_eq!(out.len(), 8);
    });

    println!("rank {rank} of {size}: requests ok");
}

/// Sends every block of `x` to `next` and receives as many from `prev` into `recv`,
/// all added to `coll` (as rsmpi's immediate_multiple_test does).
fn send_recv<'a, S: Scope<'a> + Copy, C: Communicator>(
    _world: &C,
    scope: S,
    coll: &mut RequestCollection<'a, [i32; 4]>,
    next: &mpi::topology::Process<'_>,
    prev: &mpi::topology::Process<'_>,
    x: &'a [[i32; 4]],
    recv: &'a mut [[i32; 4]],
) {
    for elm in x {
        coll.add(next.immediate_send(scope, elm));
    }
    for elm in recv.iter_mut() {
        coll.add(prev.immediate_receive_into(scope, elm));
    }
}
