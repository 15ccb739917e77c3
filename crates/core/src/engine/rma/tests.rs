//! Wire forms of the one-sided control messages.

use super::*;

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
