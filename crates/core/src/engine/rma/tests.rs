//! Wire forms of the one-sided control messages.

use super::*;
use crate::datatype::TypeMap;
use crate::error::ErrorClass;

#[test]
fn control_messages_round_trip_and_garbage_never_panics() {
    let c = Ctrl {
        kind: kind::GET_ACC,
        op: AccOp::Op(OpKind::Max).code(),
        lock: LOCK_SHARED,
        inline: true,
        far_dt: false,
        dt_len: 3,
        reply: 77,
        disp: 1 << 40,
        count: 9,
        data_len: 2,
        n: 5,
    };
    let m = c.encode(b"abc", b"xy");
    let (d, dt, data) = Ctrl::decode(&m).unwrap();
    assert_eq!(
        (d.kind, d.op, d.lock, d.inline, d.far_dt),
        (c.kind, c.op, c.lock, true, false)
    );
    assert_eq!(
        (d.reply, d.disp, d.count, d.data_len, d.n),
        (77, 1 << 40, 9, 2, 5)
    );
    assert_eq!((dt, data), (&b"abc"[..], &b"xy"[..]));
    let far = Ctrl {
        far_dt: true,
        inline: false,
        dt_len: 1000,
        ..c
    };
    let fm = far.encode(b"ignored", &[]);
    let (d, dt, _) = Ctrl::decode(&fm).unwrap();
    assert!(d.far_dt && dt.is_empty() && d.dt_len == 1000);
    for k in 0..m.len() {
        let _ = Ctrl::decode(&m[..k]);
    }
    let mut x = m.clone();
    x[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(Ctrl::decode(&x).is_none());
    for code in 0..=255u8 {
        let _ = AccOp::from_code(code);
    }
    assert_eq!(
        AccOp::from_code(AccOp::Replace.code()),
        Some(AccOp::Replace)
    );
    assert_eq!(AccOp::from_code(AccOp::NoOp.code()), Some(AccOp::NoOp));
    assert_eq!(
        AccOp::from_code(OpKind::BitwiseXor as u8),
        Some(AccOp::Op(OpKind::BitwiseXor))
    );
}

/// A single-rank engine with a 64-byte window of 8-byte units on context `CTX`, its
/// memory (the window is bytes 8..72 of `mem`, guards around it), and a way to send it
/// raw control messages.
const CTX: u32 = 0x5a5a;

fn engine_with_window(mem: &mut [u8; 80]) -> Engine {
    let mut e = Engine::init().unwrap();
    let base = mem.as_mut_ptr() as usize + 8;
    let fixed = WinMem::Fixed {
        base,
        size: 64,
        disp_unit: 8,
    };
    e.rma_register(CTX, vec![0], fixed).unwrap();
    e
}

fn deliver(e: &mut Engine, msg: Vec<u8>) {
    let id = e
        .isend_mode(SendBuf::Owned(msg), 0, TAG_CTRL, CTX, false)
        .unwrap();
    e.wait(id).unwrap();
    for _ in 0..8 {
        e.progress().unwrap();
        e.rma_poll().unwrap();
    }
}

fn u64s() -> Vec<u8> {
    crate::datatype::type_map_of::<u64>().to_wire()
}

#[test]
fn malformed_operations_are_refused_and_never_write_outside_the_window() {
    let mut mem = [0xeeu8; 80];
    let mut e = engine_with_window(&mut mem);
    let before = e.stats.drop_invalid;
    // A put whose message carries more bytes than it declares: only the declared
    // element is written.
    let put = Ctrl {
        kind: kind::PUT,
        inline: true,
        disp: 7,
        count: 1,
        data_len: 8,
        ..Ctrl::default()
    };
    deliver(&mut e, put.encode(&u64s(), &[1u8; 24]));
    assert_eq!(&mem[64..72], &[1u8; 8]);
    assert_eq!(&mem[72..80], &[0xee; 8], "written past the window");
    // A strided type whose span wraps around: refused, nothing written.
    let huge = TypeMap::try_hvector(2, 1, 1 << 61, &crate::datatype::type_map_of::<u8>()).unwrap();
    let wrap = Ctrl {
        kind: kind::PUT,
        inline: true,
        count: 8,
        data_len: 16,
        ..Ctrl::default()
    };
    deliver(&mut e, wrap.encode(&huge.to_wire(), &[2u8; 16]));
    // Compare-and-swap with the wrong length, a lock of an unknown kind, an
    // accumulate past the end, garbage: all refused.
    let cas = Ctrl {
        kind: kind::CAS,
        inline: true,
        count: 1,
        data_len: 9,
        ..Ctrl::default()
    };
    deliver(&mut e, cas.encode(&u64s(), &[3u8; 9]));
    let lock = Ctrl {
        kind: kind::LOCK,
        lock: 7,
        ..Ctrl::default()
    };
    deliver(&mut e, lock.encode(&[], &[]));
    let acc = Ctrl {
        kind: kind::ACC,
        op: AccOp::Replace.code(),
        inline: true,
        disp: 8,
        count: 1,
        data_len: 8,
        ..Ctrl::default()
    };
    deliver(&mut e, acc.encode(&u64s(), &[4u8; 8]));
    deliver(&mut e, vec![0xff; 30]);
    assert_eq!(&mem[..8], &[0xee; 8]);
    assert_eq!(&mem[72..], &[0xee; 8]);
    assert_eq!(&mem[8..64], &[0xee; 56], "refused operations wrote");
    assert!(
        e.stats.drop_invalid >= before + 5,
        "{}",
        e.stats.drop_invalid - before
    );
    // The window still works: a lock is granted after all that.
    e.rma_sync_msg(CTX, 0, kind::LOCK, LOCK_EXCLUSIVE).unwrap();
    e.rma_sync_msg(CTX, 0, kind::UNLOCK, 0).unwrap();
    e.rma_unregister(CTX).unwrap();
}

#[test]
fn a_get_outside_the_window_is_answered_empty_and_reported() {
    let mut mem = [0u8; 80];
    let mut e = engine_with_window(&mut mem);
    let mut out = [0u8; 8];
    let c = Ctrl {
        kind: kind::GET,
        disp: 8,
        count: 1,
        ..Ctrl::default()
    };
    let ans = RecvBuf::Raw(out.as_mut_ptr(), 8);
    let u = crate::datatype::type_map_of::<u64>();
    e.rma_issue(CTX, 0, c, &u, SendBuf::Owned(Vec::new()), Some(ans))
        .unwrap();
    let err = e.rma_finish_local(CTX).unwrap_err();
    assert_eq!(err.class(), ErrorClass::RmaRange);
    e.rma_unregister(CTX).unwrap();
}

#[test]
fn accumulates_of_one_origin_apply_in_order_behind_staged_data() {
    // A large accumulate (its data follows the control message) and then a small one
    // from the same origin: the small one waits for the large one.
    let mut mem = [0u8; 80];
    let mut e = engine_with_window(&mut mem);
    let u = crate::datatype::type_map_of::<u64>();
    let sum = AccOp::Op(OpKind::Sum).code();
    e.rma.get_mut(CTX).unwrap().issued[0] = 0;
    let big = Ctrl {
        kind: kind::ACC,
        op: sum,
        count: 8,
        data_len: 64,
        ..Ctrl::default()
    };
    // Sent as a control message without its data yet.
    deliver(&mut e, big.encode(&u.to_wire(), &[]));
    let small = Ctrl {
        kind: kind::ACC,
        op: AccOp::Replace.code(),
        inline: true,
        count: 1,
        data_len: 8,
        ..Ctrl::default()
    };
    deliver(&mut e, small.encode(&u.to_wire(), &100u64.to_ne_bytes()));
    assert_eq!(
        &mem[8..16],
        &[0u8; 8],
        "applied before the earlier accumulate"
    );
    let data: Vec<u8> = (0..8u64).flat_map(|_| 5u64.to_ne_bytes()).collect();
    let id = e
        .isend_mode(SendBuf::Owned(data), 0, TAG_DATA, CTX, false)
        .unwrap();
    e.wait(id).unwrap();
    for _ in 0..8 {
        e.progress().unwrap();
        e.rma_poll().unwrap();
    }
    // Sum first (0 + 5), then replace (100).
    assert_eq!(u64::from_ne_bytes(mem[8..16].try_into().unwrap()), 100);
    assert_eq!(u64::from_ne_bytes(mem[16..24].try_into().unwrap()), 5);
    e.rma_unregister(CTX).unwrap();
}
