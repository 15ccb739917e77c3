//! The seed-003 experiments (§6): ring latency, chain throughput and flooding.
//!
//! Payloads are 8-byte words, 1 … 2000 of them ([`crate::options::SEED003_WORDS`]; `-m [min:]max` in
//! bytes picks a subset).
//!
//! * `ring [--touch]`: a token travels around all p ranks (`-x` warm-up laps, then `-i`
//!   timed laps); the one-hop latency is the lap time / p. With `--touch` rank 0 writes
//!   every word before sending and reads (checks) every word when the token returns, and
//!   every other rank reads and writes (increments) every word before forwarding.
//! * `chain [--touch]`: rank 0 streams `-i` messages (after `-x` warm-up ones) through
//!   ranks 1 … p-2 to rank p-1, which then sends a small acknowledgement back to rank 0.
//!   Every forwarder receives into a fresh buffer and forwards it with a nonblocking send,
//!   keeping at most `-W` sends in flight, so the pipe stays full. Throughput is the
//!   payload of one stream / rank 0's time (start to acknowledgement), in MB/s (10^6 B/s);
//!   the paper's "throughput as seen by the ring" is this times the p-1 senders. With
//!   `--touch` rank 0 writes each message, every forwarder increments every word and rank
//!   p-1 checks every word.
//! * `flood -n N -k K`: every rank starts nonblocking sends of N messages of K fragments
//!   (one fragment = one send of the chosen size) to every other rank before it receives
//!   anything, then receives all of them, checks every word, and waits for its sends.
//!   Fragment g (= message·K + fragment) from rank r carries words `h(r, g + t)`, so the
//!   check also catches reordering or loss. Reports the mean (over `-i` runs after `-x`
//!   warm-up runs) of the slowest rank's completion time in ms. A wrong word ends every
//!   rank with status 1.

use crate::options::{Plan, Test, WORD};
use crate::report;
use phalanx::collective::SystemOperation;
use phalanx::environment::time;
use phalanx::request::{scope, wait_all};
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::*;
use std::collections::VecDeque;

/// Tag of the chain's data messages.
const CHAIN_TAG: phalanx::Tag = 310;
/// Tag of the chain's acknowledgement.
const CHAIN_ACK_TAG: phalanx::Tag = 311;
/// Tag of the flood's fragments.
const FLOOD_TAG: phalanx::Tag = 320;

/// Runs one of the seed-003 tests.
pub fn run(world: &SimpleCommunicator, test: Test, plan: &Plan) {
    if matches!(test, Test::Ring | Test::Chain) && world.size() < 2 {
        if world.rank() == 0 {
            eprintln!("phalanx-bench: this test requires at least two processes");
        }
        std::process::exit(1);
    }
    match test {
        Test::Ring => ring(world, plan),
        Test::Chain => chain(world, plan),
        Test::Flood => flood(world, plan),
        _ => unreachable!("not a seed-003 test"),
    }
}

/// Sums `bad` over all ranks; if any rank saw a wrong word, rank 0 says so and every
/// rank exits with status 1.
fn verdict(world: &SimpleCommunicator, test: &str, size: usize, bad: u64) {
    let mut total = 0u64;
    world.all_reduce_into(&bad, &mut total, SystemOperation::sum());
    if total != 0 {
        if world.rank() == 0 {
            eprintln!("phalanx-bench {test}: CHECKSUM ERROR: {total} wrong words at {size} B");
        }
        std::process::exit(1);
    }
}

fn ring(world: &SimpleCommunicator, plan: &Plan) {
    let (rank, p) = (world.rank() as usize, world.size() as usize);
    let next = world.process_at_rank(((rank + 1) % p) as i32);
    let prev = world.process_at_rank(((rank + p - 1) % p) as i32);
    let mut buf = vec![0u64; plan.max_size() / WORD];
    if rank == 0 {
        let what = if plan.touch {
            ", touching every word"
        } else {
            ""
        };
        report::header_with(
            &format!("Ring Latency (p = {p}{what})"),
            "# Words",
            "Hop latency (us)",
        );
    }
    for &size in &plan.sizes {
        let words = size / WORD;
        let (iterations, warmup) = plan.counts(size);
        let b = &mut buf[..words];
        let mut bad = 0u64;
        world.barrier();
        let mut start = time();
        for lap in 0..iterations + warmup {
            if lap == warmup {
                start = time();
            }
            if rank == 0 {
                if plan.touch {
                    for (j, w) in b.iter_mut().enumerate() {
                        *w = (lap + j) as u64;
                    }
                }
                next.send(&b[..]);
                prev.receive_into(&mut b[..]);
                if plan.touch {
                    for (j, w) in b.iter().enumerate() {
                        bad += u64::from(*w != (lap + j + p - 1) as u64);
                    }
                }
            } else {
                prev.receive_into(&mut b[..]);
                if plan.touch {
                    for w in b.iter_mut() {
                        *w = w.wrapping_add(1);
                    }
                }
                next.send(&b[..]);
            }
        }
        let elapsed = time() - start;
        if rank == 0 {
            report::row(words, elapsed * 1e6 / (iterations * p) as f64);
        }
        verdict(world, "ring", size, bad);
    }
}

fn chain(world: &SimpleCommunicator, plan: &Plan) {
    let (rank, p) = (world.rank() as usize, world.size() as usize);
    if rank == 0 {
        let what = if plan.touch {
            ", touching every word"
        } else {
            ""
        };
        report::header(
            &format!("Chain Throughput (p = {p}{what})"),
            "Throughput (MB/s)",
        );
    }
    for &size in &plan.sizes {
        let words = size / WORD;
        let (iterations, warmup) = plan.counts(size);
        // One buffer per message in flight through this rank (forwarders, and rank 0 when
        // it writes each message).
        let mut big = vec![0u64; iterations.max(warmup) * words];
        let mut bad = 0u64;
        world.barrier();
        chain_stream(world, plan, &mut big, warmup, words, &mut bad);
        world.barrier();
        let elapsed = chain_stream(world, plan, &mut big, iterations, words, &mut bad);
        if rank == 0 {
            report::row(size, (iterations * size) as f64 / 1e6 / elapsed);
        }
        verdict(world, "chain", size, bad);
    }
}

/// One stream of `count` messages of `words` words down the chain; returns this rank's
/// time (rank 0: from the first send to the acknowledgement).
fn chain_stream(
    world: &SimpleCommunicator,
    plan: &Plan,
    big: &mut [u64],
    count: usize,
    words: usize,
    bad: &mut u64,
) -> f64 {
    let (rank, p) = (world.rank() as usize, world.size() as usize);
    let last = p - 1;
    let mut ack = [0u8; 1];
    let start = time();
    if rank == last {
        let prev = world.process_at_rank(rank as i32 - 1);
        let b = &mut big[..words];
        for i in 0..count {
            prev.receive_into_with_tag(&mut b[..], CHAIN_TAG);
            if plan.touch {
                for (j, w) in b.iter().enumerate() {
                    *bad += u64::from(*w != (i + j + p - 2) as u64);
                }
            }
        }
        world
            .process_at_rank(0)
            .send_with_tag(&ack[..], CHAIN_ACK_TAG);
        return time() - start;
    }
    let next = world.process_at_rank(rank as i32 + 1);
    let prev = world.process_at_rank((rank + p - 1) as i32 % p as i32);
    // Untouched, rank 0 sends every message out of the same first buffer.
    let (fixed, pool) = if rank == 0 && !plan.touch {
        let (head, rest) = big.split_at_mut(words);
        (Some(&*head), rest)
    } else {
        (None, big)
    };
    let mut chunks = pool.chunks_mut(words);
    scope(|s| {
        let mut in_flight = VecDeque::with_capacity(plan.window);
        for i in 0..count {
            let chunk: &[u64] = match fixed {
                Some(head) => head,
                None => {
                    let c = chunks.next().expect("a buffer per message");
                    if rank == 0 {
                        for (j, w) in c.iter_mut().enumerate() {
                            *w = (i + j) as u64;
                        }
                    } else {
                        prev.receive_into_with_tag(&mut c[..], CHAIN_TAG);
                        if plan.touch {
                            for w in c.iter_mut() {
                                *w = w.wrapping_add(1);
                            }
                        }
                    }
                    c
                }
            };
            if in_flight.len() >= plan.window {
                let oldest = in_flight.pop_front().expect("nonempty");
                phalanx::request::Request::wait(oldest);
            }
            in_flight.push_back(next.immediate_send_with_tag(s, chunk, CHAIN_TAG));
        }
        wait_all(in_flight.into_iter().collect());
    });
    if rank == 0 {
        world
            .process_at_rank(last as i32)
            .receive_into_with_tag(&mut ack[..], CHAIN_ACK_TAG);
    }
    time() - start
}

/// Word `g` of rank `src`'s flood pattern (splitmix64 of both).
fn pattern_word(src: usize, g: usize) -> u64 {
    let mut z = ((src as u64) << 40 | g as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn flood(world: &SimpleCommunicator, plan: &Plan) {
    let (rank, p) = (world.rank() as usize, world.size() as usize);
    let (n, k) = (plan.messages, plan.fragments);
    let total = n * k;
    let peers: Vec<_> = (0..p).map(|r| world.process_at_rank(r as i32)).collect();
    if rank == 0 {
        report::header_with(
            &format!("Flood (p = {p}, {n} messages x {k} fragments per peer)"),
            "# Words",
            "Time (ms)",
        );
    }
    for &size in &plan.sizes {
        let words = size / WORD;
        let (iterations, warmup) = plan.counts(size);
        // Fragment g is pattern[g .. g + words].
        let pattern: Vec<u64> = (0..total + words).map(|g| pattern_word(rank, g)).collect();
        let mut recv = vec![0u64; words];
        let mut bad = 0u64;
        let mut sum = 0.0;
        for run in 0..iterations + warmup {
            world.barrier();
            let start = time();
            scope(|s| {
                let mut sends = Vec::with_capacity(total * (p - 1));
                for m in 0..n {
                    for d in 1..p {
                        let dest = &peers[(rank + d) % p];
                        for f in 0..k {
                            let g = m * k + f;
                            let frag = &pattern[g..g + words];
                            sends.push(dest.immediate_send_with_tag(s, frag, FLOOD_TAG));
                        }
                    }
                }
                for m in 0..n {
                    for d in 1..p {
                        let src = (rank + p - d) % p;
                        for f in 0..k {
                            let g = m * k + f;
                            peers[src].receive_into_with_tag(&mut recv[..], FLOOD_TAG);
                            for (t, w) in recv.iter().enumerate() {
                                bad += u64::from(*w != pattern_word(src, g + t));
                            }
                        }
                    }
                }
                wait_all(sends);
            });
            let elapsed = time() - start;
            if run >= warmup {
                sum += elapsed;
            }
        }
        let mut slowest = 0.0f64;
        world.all_reduce_into(&sum, &mut slowest, SystemOperation::max());
        if rank == 0 {
            report::row(words, slowest * 1e3 / iterations as f64);
        }
        verdict(world, "flood", size, bad);
    }
}
