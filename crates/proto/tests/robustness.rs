//! Stable stand-in for the `gbn_input` fuzz target: thousands of seeded random and
//! mutated datagrams fed into a `Gbn` must never panic, and a stream through the same
//! engine must still work afterwards. Deterministic (a tiny xorshift, no dependencies).

use phalanx_proto::gbn::{Gbn, GbnConfig, Verdict};
use phalanx_wire::{Header, Kind, MsgKind, Packet, HEADER_LEN};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const KEY: u64 = 7;

fn valid(rng: &mut Rng, peers: u32) -> Vec<u8> {
    let kind = if rng.below(2) == 0 {
        Kind::GbnData
    } else {
        Kind::GbnAck
    };
    let mut h = Header::new(kind, KEY, rng.below(peers as u64 + 2) as u32);
    h.msg = MsgKind::Eager;
    h.flags = rng.below(16) as u8;
    let near = |r: &mut Rng| (r.below(40) as u32).wrapping_sub(20);
    h.seq = if rng.below(4) == 0 {
        rng.next() as u32
    } else {
        near(rng)
    };
    h.ack = if rng.below(4) == 0 {
        rng.next() as u32
    } else {
        near(rng)
    };
    let len = rng.below(64) as usize;
    h.to_datagram(&vec![0xa5; len])
}

fn mutate(rng: &mut Rng, d: &mut Vec<u8>) {
    for _ in 0..rng.below(4) {
        if d.is_empty() {
            break;
        }
        let i = rng.below(d.len() as u64) as usize;
        d[i] = rng.next() as u8;
    }
    if rng.below(8) == 0 {
        d.truncate(rng.below(d.len() as u64 + 1) as usize);
    }
}

fn drive(g: &mut Gbn, rng: &mut Rng, now: &mut u64, bytes: &[u8]) {
    if let Ok(p) = Packet::new_checked(bytes) {
        let v = g.handle_packet(*now, &p);
        if v == Verdict::Deliver && rng.below(4) != 0 {
            g.accept(*now, p.src());
        }
        // accept() for the wrong peer or without a delivery must be harmless.
        if rng.below(16) == 0 {
            g.accept(*now, rng.below(10) as u32);
        }
    }
    let mut n = 0;
    while let Some((peer, d)) = g.poll_transmit(*now) {
        assert!(d.len() >= HEADER_LEN);
        assert!(
            Packet::new_checked(&d).is_ok(),
            "gbn emitted an invalid datagram"
        );
        let _ = peer;
        n += 1;
        assert!(n < 10_000, "poll_transmit does not terminate");
    }
    if rng.below(8) == 0 {
        *now += rng.below(200_000_000);
        g.handle_timeout(*now);
    }
    if rng.below(16) == 0 {
        let peer = rng.below(5) as u32;
        let mut h = Header::new(Kind::GbnData, KEY, 0);
        h.flags = rng.below(256) as u8;
        let _ = g.send(*now, peer, h.to_datagram(&[1, 2, 3]));
    }
    if rng.below(64) == 0 {
        g.flush_acks(*now);
    }
    while g.poll_event().is_some() {}
    let _ = (
        g.poll_timeout(),
        g.all_acked(),
        g.owes_acks(),
        g.unacked_peers(),
    );
}

#[test]
fn random_and_mutated_datagrams_never_panic() {
    for seed in 1..=200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let peers = 1 + rng.below(4) as u32;
        let cfg = GbnConfig {
            window: 1 + rng.below(8) as u32,
            retx_burst: rng.below(4) as u32,
            ack_threshold: rng.below(4) as u32,
            eager_ack: rng.below(2) == 0,
            initial_seq: if rng.below(2) == 0 { u32::MAX - 5 } else { 0 },
            max_backoffs: 1 + rng.below(4) as u32,
            ..GbnConfig::default()
        };
        let mut g = Gbn::new(cfg, KEY, 0, peers);
        let mut now = 0u64;
        for _ in 0..200 {
            let mut d = match rng.below(3) {
                0 => (0..rng.below(100)).map(|_| rng.next() as u8).collect(),
                _ => valid(&mut rng, peers),
            };
            if rng.below(2) == 0 {
                mutate(&mut rng, &mut d);
            }
            drive(&mut g, &mut rng, &mut now, &d);
        }
    }
}
