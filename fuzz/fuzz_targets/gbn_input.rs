//! Arbitrary bytes drive a `Gbn`: the input is split into commands (receive a datagram,
//! accept, send, advance time, flush) — nothing may panic and every emitted datagram
//! must decode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use phalanx_proto::gbn::{Gbn, GbnConfig, Verdict};
use phalanx_wire::{Header, Kind, Packet};

const KEY: u64 = 7;

fuzz_target!(|data: &[u8]| {
    let Some((&cfg_byte, mut rest)) = data.split_first() else {
        return;
    };
    let cfg = GbnConfig {
        window: 1 + (cfg_byte & 7) as u32,
        retx_burst: ((cfg_byte >> 3) & 3) as u32,
        eager_ack: cfg_byte & 0x20 != 0,
        initial_seq: if cfg_byte & 0x40 != 0 {
            u32::MAX - 3
        } else {
            0
        },
        ack_threshold: 2,
        max_backoffs: 3,
        ..GbnConfig::default()
    };
    let peers = 3;
    let mut g = Gbn::new(cfg, KEY, 0, peers);
    let mut now = 0u64;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        match op % 6 {
            0 | 1 => {
                // A datagram: length byte, then that many bytes.
                let Some((&len, tail)) = rest.split_first() else {
                    break;
                };
                let n = (len as usize).min(tail.len());
                let (bytes, tail) = tail.split_at(n);
                rest = tail;
                if let Ok(p) = Packet::new_checked(bytes) {
                    let v = g.handle_packet(now, &p);
                    if v == Verdict::Deliver && op & 0x80 == 0 {
                        g.accept(now, p.src());
                    }
                }
            }
            2 => g.accept(now, (op >> 4) as u32 % (peers + 1)),
            3 => {
                let peer = (op >> 4) as u32 % (peers + 1);
                let mut h = Header::new(Kind::GbnData, KEY, 0);
                h.flags = op;
                let _ = g.send(now, peer, h.to_datagram(&[op]));
            }
            4 => {
                now = now.saturating_add((op as u64) << 18);
                g.handle_timeout(now);
            }
            _ => g.flush_acks(now),
        }
        let mut n = 0u32;
        while let Some((_, d)) = g.poll_transmit(now) {
            assert!(Packet::new_checked(d).is_ok());
            n += 1;
            assert!(n < 100_000);
        }
        while g.poll_event().is_some() {}
        let _ = (
            g.poll_timeout(),
            g.all_acked(),
            g.owes_acks(),
            g.unacked_peers(),
        );
    }
});
