//! Arbitrary bytes drive a `Urtp` of rank 0 in a job of 5: the input is split into
//! commands (receive a datagram — raw, or a valid URTP packet with fuzzed fields and a
//! fuzzed multicast extension —, send, pop, want, advance time, flush); nothing may
//! panic, every emitted datagram must decode and the bounds must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use phalanx_proto::urtp::{Targets, Urtp, UrtpConfig};
use phalanx_wire::{flags, Header, Kind, Packet, HEADER_LEN};

const KEY: u64 = 7;
const SIZE: u32 = 5;

fuzz_target!(|data: &[u8]| {
    let Some((&cfg_byte, mut rest)) = data.split_first() else {
        return;
    };
    let cfg = UrtpConfig {
        window: 1 + (cfg_byte & 7) as u32,
        block_ack_threshold: 1 + ((cfg_byte >> 3) & 3) as u32,
        initial_seq: if cfg_byte & 0x40 != 0 {
            u32::MAX - 3
        } else {
            0
        },
        max_backoffs: 3,
        rx_extra: (cfg_byte >> 7) as u32,
        ..UrtpConfig::default()
    };
    let pool = (SIZE as usize - 1) * cfg.window as usize + cfg.rx_extra as usize;
    let mut u = Urtp::new(cfg, KEY, 0, SIZE);
    if cfg_byte & 0x20 != 0 {
        u.set_max_datagram(200);
    }
    let mut now = 0u64;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        let arg = (op >> 3) as u32;
        match op % 8 {
            0 => {
                // A raw datagram: length byte, then that many bytes.
                let Some((&len, tail)) = rest.split_first() else {
                    break;
                };
                let n = (len as usize).min(tail.len());
                let (bytes, tail) = tail.split_at(n);
                rest = tail;
                if let Ok(p) = Packet::new_checked(bytes) {
                    let _ = u.handle_packet(now, &p);
                }
            }
            1 => {
                // A well-formed header with fuzzed fields: kind, flags, src, seq, ack,
                // then an extension of up to 15 fuzzed bytes (a multicast bitmap and
                // counters when MULTICAST is set).
                if rest.len() < 12 {
                    break;
                }
                let (f, tail) = rest.split_at(12);
                rest = tail;
                let kind = [Kind::UrtpData, Kind::UrtpAck, Kind::UrtpReq][f[0] as usize % 3];
                let mut h = Header::new(kind, KEY, f[1] as u32 % (SIZE + 1));
                h.flags = f[2];
                h.seq = u32::from_le_bytes([f[3], f[4], f[5], f[6]]).wrapping_add(
                    if f[0] & 0x80 != 0 { u32::MAX - 3 } else { 0 },
                );
                h.ack = u32::from_le_bytes([f[7], f[8], f[9], f[10]]);
                let ext_n = (f[11] & 15) as usize;
                let m = ext_n.min(rest.len());
                let (ext, tail) = rest.split_at(m);
                rest = tail;
                h.ext_len = m as u16;
                let mut body = ext.to_vec();
                body.extend_from_slice(&[f[11]; 3]);
                let d = h.to_datagram(&body);
                if let Ok(p) = Packet::new_checked(&d) {
                    let _ = u.handle_packet(now, &p);
                }
            }
            2 => {
                let mut t = Targets::new();
                for r in 0..SIZE + 1 {
                    if arg & (1 << r) != 0 {
                        t.insert(r);
                    }
                }
                let h = Header::new(Kind::UrtpData, 0, 0);
                let _ = u.send(now, &t, &h, &[op; 150][..(op as usize) % 150]);
                let _ = u.send_space(&t);
            }
            3 => u.pop(now, arg % (SIZE + 1)),
            4 => u.want(now, arg % (SIZE + 1)),
            5 => {
                now = now.saturating_add((op as u64) << 17);
                u.handle_timeout(now);
            }
            6 => u.flush_acks(now),
            _ => {
                if let Some(t) = u.poll_timeout() {
                    now = now.max(t);
                    u.handle_timeout(now);
                }
            }
        }
        let mut n = 0u32;
        while let Some(tx) = u.poll_transmit(now) {
            let p = Packet::new_checked(tx.bytes).expect("emitted datagrams decode");
            assert_eq!(p.src(), 0);
            assert!(p.flags() & flags::MULTICAST == 0 || tx.targets.len() > 1);
            assert!(tx.bytes.len() >= HEADER_LEN);
            n += 1;
            assert!(n < 100_000);
        }
        while u.poll_event().is_some() {}
        for r in 0..SIZE {
            if let Some(p) = u.peek(r) {
                assert_eq!(p.src(), r);
            }
        }
        assert!(u.buffered() <= pool);
        let _ = (
            u.all_acked(),
            u.owes_acks(),
            u.unacked_peers(),
            u.last_sent_to(arg),
            u.stats(),
        );
    }
});
