//! Random all-pairs traffic of many sizes (below and above the rendezvous threshold),
//! received with wildcard and specific receives; every message is checksummed and the
//! per-sender order checked. Exits non-zero on any mismatch.
//!
//! Usage: `phalanx run -n 4 stress [rounds] [messages_per_rank] [seed]`.
use phalanx::traits::*;
use rand::{rngs::SmallRng, Rng, SeedableRng};

const SIZES: [usize; 12] = [
    0, 1, 7, 64, 1000, 1472, 4000, 20_000, 65_000, 70_000, 150_000, 400_000,
];

#[derive(Clone, Copy)]
struct Msg {
    src: usize,
    dst: usize,
    len: usize,
    tag: i32,
    index: u64,
}

/// The whole job's traffic for a round; every rank computes the same plan.
fn plan(seed: u64, round: usize, size: usize, per_rank: usize) -> Vec<Msg> {
    let mut rng =
        SmallRng::seed_from_u64(seed ^ (round as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut out = Vec::new();
    for src in 0..size {
        for i in 0..per_rank {
            let big = rng.gen_bool(0.05);
            let len = if big {
                SIZES[rng.gen_range(8..SIZES.len())]
            } else {
                SIZES[rng.gen_range(0..8)]
            };
            out.push(Msg {
                src,
                dst: rng.gen_range(0..size),
                len,
                tag: rng.gen_range(0..4),
                index: i as u64,
            });
        }
    }
    out
}

fn byte_at(m: &Msg, i: usize) -> u8 {
    (m.src as u64 * 131 + m.dst as u64 * 31 + m.index * 7 + i as u64 * 13) as u8
}

/// Message body: [src u32][index u64][payload ...]; the first 12 bytes only if len >= 12.
fn body(m: &Msg) -> Vec<u8> {
    let mut v: Vec<u8> = (0..m.len).map(|i| byte_at(m, i)).collect();
    if m.len >= 12 {
        v[..4].copy_from_slice(&(m.src as u32).to_le_bytes());
        v[4..12].copy_from_slice(&m.index.to_le_bytes());
    }
    v
}

fn fail(rank: i32, what: String) -> ! {
    eprintln!("stress: rank {rank}: MISMATCH: {what}");
    std::process::exit(1);
}

/// All ranks report to rank 0, which then releases them.
fn barrier(c: &phalanx::topology::SimpleCommunicator) {
    if c.rank() == 0 {
        for _ in 1..c.size() {
            let _ = c.any_process().receive::<u8>();
        }
        for r in 1..c.size() {
            c.process_at_rank(r).send(&0u8);
        }
    } else {
        c.process_at_rank(0).send(&0u8);
        let _ = c.process_at_rank(0).receive::<u8>();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let per_rank: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(150);
    let seed: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let universe = phalanx::initialize().expect("phalanx initialized twice");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let me = rank as usize;
    // Rounds are separated by a barrier on a communicator of its own, so a fast rank's
    // next round never meets a slow rank's wildcard receives.
    let control = world.duplicate();
    let mut received = 0usize;
    let mut bytes = 0usize;
    for round in 0..rounds {
        let all = plan(seed, round, size as usize, per_rank);
        let mine: Vec<Msg> = all.iter().filter(|m| m.src == me).copied().collect();
        let incoming: Vec<Msg> = all.iter().filter(|m| m.dst == me).copied().collect();
        let bodies: Vec<Vec<u8>> = mine.iter().map(body).collect();
        let wildcard = round % 2 == 0;
        phalanx::request::scope(|scope| {
            let reqs: Vec<_> = mine
                .iter()
                .zip(&bodies)
                .map(|(m, b)| {
                    world.process_at_rank(m.dst as i32).immediate_send_with_tag(
                        scope,
                        &b[..],
                        m.tag,
                    )
                })
                .collect();
            if wildcard {
                // Any source, any tag: per sender, messages arrive in send order.
                let mut next_from = vec![0usize; size as usize];
                let expected_from: Vec<Vec<Msg>> = (0..size as usize)
                    .map(|s| incoming.iter().filter(|m| m.src == s).copied().collect())
                    .collect();
                for _ in 0..incoming.len() {
                    let (v, st) = world.any_process().receive_vec::<u8>();
                    let s = st.source_rank() as usize;
                    let Some(m) = expected_from[s].get(next_from[s]) else {
                        fail(rank, format!("unexpected extra message from rank {s}"));
                    };
                    next_from[s] += 1;
                    if st.tag() != m.tag || v != body(m) {
                        fail(rank, format!(
                            "round {round}: message {} from rank {s} (len {}, tag {}) arrived as len {} tag {}",
                            m.index, m.len, m.tag, v.len(), st.tag()
                        ));
                    }
                    bytes += v.len();
                }
            } else {
                // Specific sources and tags, highest tag first: exercises matching of
                // the unexpected queue out of arrival order.
                let mut order = incoming.clone();
                order.sort_by_key(|m| (std::cmp::Reverse(m.tag), m.src, m.index));
                for m in &order {
                    let mut buf = vec![0u8; m.len];
                    let st = world
                        .process_at_rank(m.src as i32)
                        .receive_into_with_tag(&mut buf[..], m.tag);
                    if st.byte_count() as usize != m.len || buf != body(m) {
                        fail(
                            rank,
                            format!(
                                "round {round}: message {} from rank {} tag {} has wrong bytes",
                                m.index, m.src, m.tag
                            ),
                        );
                    }
                    bytes += m.len;
                }
            }
            for r in reqs {
                r.wait();
            }
        });
        received += incoming.len();
        barrier(&control);
    }
    println!("stress: rank {rank}: {received} messages, {bytes} bytes, all checksums ok");
}
