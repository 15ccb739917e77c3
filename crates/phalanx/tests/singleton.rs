//! The API on a singleton (a program started without the launcher): self-messages of
//! every shape go through the same matching, eager and rendezvous paths as remote ones.

use phalanx::datatype::{Equivalence, Primitive, TypeMap};
use phalanx::traits::*;

#[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
struct Particle {
    pos: [f64; 3],
    id: u64,
    charge: i32,
    kind: u32,
}

#[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
struct Pair(u16, i16);

/// Rust lays these fields out in another order than declared; no padding either way.
#[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
struct Reordered {
    a: u8,
    b: u32,
    c: u8,
    d: u16,
}

#[test]
fn singleton_self_messaging() {
    std::env::remove_var("PHALANX_BOOT");
    let universe = phalanx::initialize().expect("first initialize");
    assert!(
        phalanx::initialize().is_none(),
        "second initialize must return None"
    );
    assert_eq!(universe.threading_support(), phalanx::Threading::Funneled);
    let world = universe.world();
    assert_eq!((world.rank(), world.size()), (0, 1));
    let me = world.process_at_rank(0);

    // A value, a derived struct, a tuple struct.
    me.send(&7u32);
    assert_eq!(me.receive::<u32>().0, 7);
    let p = Particle {
        pos: [1.0, -2.5, 3.25],
        id: 99,
        charge: -1,
        kind: 4,
    };
    me.send_with_tag(&p, 3);
    let (q, st) = me.receive_with_tag::<Particle>(3);
    assert_eq!((q, st.tag(), st.source_rank()), (p, 3, 0));
    me.send(&Pair(65535, -1));
    assert_eq!(me.receive::<Pair>().0, Pair(65535, -1));
    assert_eq!(
        Particle::equivalent_datatype().signature(),
        &[
            (Primitive::F64, 3),
            (Primitive::U64, 1),
            (Primitive::I32, 1),
            (Primitive::U32, 1)
        ]
    );

    // Tag matching out of arrival order; wildcards take arrival order.
    me.send_with_tag(&1u8, 1);
    me.send_with_tag(&2u8, 2);
    me.send_with_tag(&3u8, 1);
    assert_eq!(me.receive_with_tag::<u8>(2).0, 2);
    assert_eq!(world.any_process().receive::<u8>().0, 1);
    assert_eq!(me.receive::<u8>().0, 3);

    // Zero bytes, eager and rendezvous sizes, probe and receive_vec.
    for n in [0usize, 1, 1000, 65_000, 70_000, 1 << 20] {
        // A blocking send to self of a rendezvous-sized message would wait for a receive
        // that is never posted (as MPI allows), so send without blocking.
        let v: Vec<u32> = (0..n as u32).collect();
        phalanx::request::scope(|scope| {
            let s = me.immediate_send(scope, &v[..]);
            let st = me.probe();
            assert_eq!(st.count(u32::equivalent_datatype()), n as i32);
            let (w, _) = me.receive_vec::<u32>();
            assert_eq!(w, v);
            s.wait();
        });
    }

    // Nonblocking, receive posted before the send, in a local scope.
    let mut got = vec![0f64; 100_000];
    let data: Vec<f64> = (0..100_000).map(|i| i as f64 * 0.5).collect();
    phalanx::request::scope(|scope| {
        let r = me.immediate_receive_into_with_tag(scope, &mut got[..], 9);
        let s = me.immediate_send_with_tag(scope, &data[..], 9);
        let st = r.wait();
        s.wait();
        assert_eq!(st.count(f64::equivalent_datatype()), 100_000);
    });
    assert_eq!(got, data);

    // A receive buffer larger than the message reports the real count.
    me.send(&[1i64, 2, 3][..]);
    let mut big = [0i64; 8];
    let st = me.receive_into(&mut big[..]);
    assert_eq!(st.count(i64::equivalent_datatype()), 3);
    assert_eq!(&big[..3], &[1, 2, 3]);

    // Messages on a duplicate never match the parent's receives.
    let dup = world.duplicate();
    dup.process_at_rank(0).send(&5u8);
    me.send(&6u8);
    assert_eq!(me.receive::<u8>().0, 6);
    assert_eq!(dup.process_at_rank(0).receive::<u8>().0, 5);

    // Test: a receive nobody has sent to stays incomplete.
    let mut x = 0u8;
    phalanx::request::scope(|scope| {
        let r = me.immediate_receive_into_with_tag(scope, &mut x, 42);
        let r = r.test().expect_err("nothing was sent yet");
        me.send_with_tag(&8u8, 42);
        r.wait();
    });
    assert_eq!(x, 8);
    let _ = TypeMap::primitive(Primitive::U8);

    // A struct whose fields Rust reorders is still one contiguous block, usable in
    // collectives (reductions walk the signature in memory order).
    assert!(Reordered::equivalent_datatype().is_contiguous());
    let r = [Reordered {
        a: 1,
        b: 2,
        c: 3,
        d: 4,
    }; 3];
    let mut out = [Reordered {
        a: 0,
        b: 0,
        c: 0,
        d: 0,
    }; 3];
    world.all_reduce_into(
        &r[..],
        &mut out[..],
        phalanx::collective::SystemOperation::sum(),
    );
    assert_eq!(out, r);
}
