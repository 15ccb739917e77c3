//! `Packet::new_checked` plus every accessor and a `Header` round trip never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use phalanx_wire::{serial, stamp, Header, Packet, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::new_checked(data) else {
        // Invalid input must also be rejected by Header::parse.
        assert!(Header::parse(data).is_err());
        return;
    };
    let _ = (
        p.kind(),
        p.msg_kind(),
        p.flags(),
        p.job_key(),
        p.src(),
        p.context(),
        p.seq(),
        p.ack(),
        p.tag(),
        p.aux32(),
        p.msg_len(),
        p.aux(),
    );
    let ext = p.extension();
    let payload = p.payload();
    assert_eq!(HEADER_LEN + ext.len() + payload.len(), data.len());
    assert_eq!(p.as_bytes(), data);
    let h = p.header();
    assert_eq!(Header::parse(data), Ok(h));
    // Round trip: emitting the header reproduces the first HEADER_LEN bytes.
    let mut out = [0u8; HEADER_LEN];
    assert!(h.emit(&mut out).is_some());
    assert_eq!(&out[..], &data[..HEADER_LEN]);
    let mut rest = ext.to_vec();
    rest.extend_from_slice(payload);
    let d = h.to_datagram(&rest);
    assert_eq!(d, data);
    // Stamping in place changes only its field.
    let mut m = d.clone();
    let _ = stamp::seq(&mut m, h.seq.wrapping_add(1));
    let _ = stamp::ack(&mut m, h.ack.wrapping_sub(1));
    let _ = stamp::flags(&mut m, !h.flags);
    if let Ok(q) = Packet::new_checked(&m) {
        assert_eq!(q.seq(), h.seq.wrapping_add(1));
        assert_eq!(q.ack(), h.ack.wrapping_sub(1));
        assert_eq!(q.flags(), !h.flags);
        let _ = serial::diff(q.seq(), h.seq);
    }
});
