//! Property tests of go-back-n over the simulated lossy network.
//!
//! Every endpoint runs a `Gbn` plus a small application that sends random messages
//! (0..4000 payload bytes, random destinations, a per-(src,dst) counter in `aux` and in
//! the first payload bytes) and checks at the receiver: exactly once, in order, right
//! bytes; at the end every endpoint is `all_acked()` and every message arrived. Half the
//! messages leave with their payload by reference (`send_tail`, as zero-copy rendezvous
//! data does), some of those taken back into the window (`own_tails`, as a freed request
//! does); at the end no window holds a reference any more.
//!
//! Scenarios (rank count, message count, window, ACK policy, sequence wrap, delays,
//! duplication, reordering, partitions, refusals) are drawn by proptest and a failure is
//! shrunk to a minimal scenario; its report names the run's seed and the command that
//! replays it (see `phalanx_sim::prop`).

use phalanx_proto::gbn::{Gbn, GbnConfig, GbnEvent, GbnStats, Shared, Tail, Verdict};
use phalanx_sim::prop::{arb_partition, check};
use phalanx_sim::{Dest, Faults, Limits, Node, Sim, SmallRng};
use phalanx_wire::{Header, Kind, MsgKind, Packet};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const JOB_KEY: u64 = 0xfeed_beef_0123_4567;

#[derive(Debug, Clone)]
struct Scenario {
    n: u32,
    msgs_per_node: u32,
    faults: Faults,
    gbn: GbnConfig,
    /// Probability that the application does not accept a deliverable packet.
    refuse: f64,
    /// Max gap between application sends (ns); 0 = all at once.
    send_gap_ns: u64,
}

fn content(src: u32, dst: u32, counter: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = (src as u64) << 48 ^ (dst as u64) << 32 ^ counter.wrapping_mul(0x9e37_79b9);
    for i in 0..len {
        if i < 8 {
            v.push(counter.to_le_bytes()[i]);
        } else {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            v.push((x >> 56) as u8);
        }
    }
    v
}

struct App {
    rank: u32,
    n: u32,
    gbn: Gbn,
    rng: SmallRng,
    remaining: u32,
    next_send_at: u64,
    outbox: Option<(u32, Vec<u8>, Option<Tail>)>,
    /// The buffers tails were sent from.
    shared: Vec<Arc<dyn Shared>>,
    sent_to: Vec<u64>,
    recv_from: Vec<u64>,
    refuse: f64,
    send_gap_ns: u64,
    flushed: bool,
    failures: Vec<String>,
    events: Vec<GbnEvent>,
}

impl App {
    fn new(rank: u32, sc: &Scenario, seed: u64) -> App {
        App {
            rank,
            n: sc.n,
            gbn: Gbn::new(sc.gbn.clone(), JOB_KEY, rank, sc.n),
            rng: SmallRng::seed_from_u64(seed.wrapping_mul(1000).wrapping_add(rank as u64)),
            remaining: sc.msgs_per_node,
            next_send_at: 0,
            outbox: None,
            shared: Vec::new(),
            sent_to: vec![0; sc.n as usize],
            recv_from: vec![0; sc.n as usize],
            refuse: sc.refuse,
            send_gap_ns: sc.send_gap_ns,
            flushed: false,
            failures: Vec::new(),
            events: Vec::new(),
        }
    }

    fn fail(&mut self, s: String) {
        if self.failures.len() < 10 {
            self.failures.push(format!("rank {}: {}", self.rank, s));
        }
    }

    fn generate(&mut self, now: u64) {
        while self.remaining > 0 && now >= self.next_send_at {
            if self.outbox.is_none() {
                let dst = self.rng.gen_range(0..self.n);
                let len = if self.rng.gen_bool(0.3) {
                    self.rng.gen_range(0..16)
                } else {
                    self.rng.gen_range(0..4000)
                };
                let counter = self.sent_to[dst as usize];
                let mut h = Header::new(Kind::GbnData, JOB_KEY, self.rank);
                h.msg = MsgKind::Eager;
                h.tag = dst as i32;
                h.aux = counter;
                h.msg_len = len as u64;
                let body = content(self.rank, dst, counter, len);
                if self.rng.gen_bool(0.5) {
                    // The payload after its first bytes by reference.
                    let cut = len.min(self.rng.gen_range(0..12));
                    let d = h.to_datagram(&body[..cut]);
                    let src: Arc<dyn Shared> = Arc::new(Bytes(body));
                    let tail = Tail::new(src.clone(), cut, len - cut);
                    self.shared.push(src);
                    self.outbox = Some((dst, d, tail));
                } else {
                    self.outbox = Some((dst, h.to_datagram(&body), None));
                }
            }
            let Some((dst, d, tail)) = self.outbox.take() else {
                break;
            };
            let sent = match tail {
                Some(t) => self
                    .gbn
                    .send_tail(now, dst, d, t)
                    .map_err(|(d, t)| (d, Some(t))),
                None => self.gbn.send(now, dst, d).map_err(|d| (d, None)),
            };
            // Now and then the owner takes a buffer back while it is in flight.
            if sent.is_ok() && self.rng.gen_bool(0.1) {
                if let Some(src) = self.shared.last() {
                    self.gbn.own_tails(&**src);
                }
            }
            match sent {
                Ok(()) => {
                    self.sent_to[dst as usize] += 1;
                    self.remaining -= 1;
                    // Bursty: often send the next one at once.
                    if self.send_gap_ns > 0 && self.rng.gen_bool(0.5) {
                        self.next_send_at = now + self.rng.gen_range(0..self.send_gap_ns);
                    }
                }
                Err((d, t)) => {
                    self.outbox = Some((dst, d, t));
                    break;
                }
            }
        }
    }
}

/// A buffer tails refer to.
struct Bytes(Vec<u8>);

impl Shared for Bytes {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl Node for App {
    fn handle_datagram(&mut self, now: u64, from: u32, data: &[u8]) {
        let pkt = match Packet::new_checked(data) {
            Ok(p) => p,
            Err(e) => return self.fail(format!("undecodable datagram from {from}: {e}")),
        };
        if pkt.job_key() != JOB_KEY || pkt.src() != from {
            return self.fail(format!("bad key or src {} from {from}", pkt.src()));
        }
        match self.gbn.handle_packet(now, &pkt) {
            Verdict::Deliver => {
                if self.rng.gen_bool(self.refuse) {
                    return; // out of buffers: not accepted, must be retransmitted
                }
                let expect = self.recv_from[from as usize];
                let len = pkt.payload().len();
                if pkt.aux() != expect {
                    return self.fail(format!(
                        "from {from}: got message #{} expected #{expect}",
                        pkt.aux()
                    ));
                }
                if pkt.tag() != self.rank as i32 || pkt.msg_len() != len as u64 {
                    return self.fail(format!("from {from} #{expect}: wrong tag/len"));
                }
                if pkt.payload() != content(from, self.rank, expect, len).as_slice() {
                    return self.fail(format!("from {from} #{expect}: corrupted payload"));
                }
                self.recv_from[from as usize] += 1;
                self.gbn.accept(now, from);
            }
            Verdict::Invalid(why) => self.fail(format!("Invalid from {from}: {why}")),
            Verdict::AckOnly | Verdict::Duplicate | Verdict::OutOfOrder => {}
        }
        while let Some(e) = self.gbn.poll_event() {
            self.events.push(e);
        }
    }

    fn poll_transmit(&mut self, now: u64) -> Option<(Dest, Vec<u8>)> {
        self.generate(now);
        if self.remaining == 0 && self.outbox.is_none() && !self.flushed {
            self.flushed = true;
            self.gbn.flush_acks(now);
        }
        self.gbn
            .poll_transmit(now)
            .map(|(p, b)| (Dest::One(p), b.to_vec()))
    }

    fn poll_timeout(&self) -> Option<u64> {
        let app = (self.remaining > 0 && self.outbox.is_none()).then_some(self.next_send_at);
        match (self.gbn.poll_timeout(), app) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: u64) {
        self.gbn.handle_timeout(now);
        while let Some(e) = self.gbn.poll_event() {
            self.events.push(e);
        }
    }
}

/// Runs one scenario with simulator seed `seed`: the statistics, or every problem found.
fn run_one(seed: u64, sc: &Scenario) -> Result<GbnStats, String> {
    let nodes = (0..sc.n).map(|r| App::new(r, sc, seed)).collect();
    let mut sim = Sim::new(seed, nodes, sc.faults.clone());
    let limits = Limits {
        max_steps: 2_000_000,
        max_time_ns: 600_000_000_000,
    };
    let stats = sim.run(limits).map_err(|e| e.to_string())?;
    let mut problems = Vec::new();
    for a in &sim.nodes {
        problems.extend(a.failures.iter().cloned());
        if !a.gbn.all_acked() {
            problems.push(format!(
                "rank {} not all_acked: {:?}",
                a.rank,
                a.gbn.unacked_peers()
            ));
        }
        let held = a.shared.iter().filter(|s| Arc::strong_count(s) > 1).count();
        if held > 0 {
            problems.push(format!("rank {}: {held} buffers still referenced", a.rank));
        }
        if a.remaining != 0 || a.outbox.is_some() {
            problems.push(format!("rank {} did not send everything", a.rank));
        }
        if !a.events.is_empty() {
            problems.push(format!("rank {} events {:?}", a.rank, a.events));
        }
        for b in &sim.nodes {
            let (s, r) = (a.sent_to[b.rank as usize], b.recv_from[a.rank as usize]);
            if s != r {
                problems.push(format!("{} -> {}: sent {s} received {r}", a.rank, b.rank));
            }
        }
    }
    if !problems.is_empty() {
        let st: Vec<_> = sim.nodes.iter().map(|a| a.gbn.stats().clone()).collect();
        return Err(format!(
            "{}\n  sim {stats:?}\n  gbn {st:?}",
            problems.join("\n")
        ));
    }
    let mut total = GbnStats::default();
    for a in &sim.nodes {
        add(&mut total, a.gbn.stats());
    }
    Ok(total)
}

fn add(t: &mut GbnStats, s: &GbnStats) {
    t.data_sent += s.data_sent;
    t.retransmits += s.retransmits;
    t.pure_acks_sent += s.pure_acks_sent;
    t.dup_acks_sent += s.dup_acks_sent;
    t.delivered += s.delivered;
    t.duplicates += s.duplicates;
    t.out_of_order += s.out_of_order;
    t.stale_acks += s.stale_acks;
    t.timeouts += s.timeouts;
    t.fast_retransmits += s.fast_retransmits;
    t.invalid += s.invalid;
}

/// (simulator seed, scenario) with `loss` and one of `ns` ranks: eager ACK, a start just
/// below the sequence wrap, small windows and bursts, windows bounded in bytes, jitter,
/// duplication, reordering, refusals and bursty sends each on or off. Shrinking turns
/// features off and counts down.
fn arb_scenario(ns: &'static [u32], loss: f64) -> impl Strategy<Value = (u64, Scenario)> {
    (
        any::<u64>(),
        prop::sample::select(ns),
        1u32..40,
        any::<bool>(),
        prop::option::weighted(0.33, 0u32..4),
        (
            prop::option::weighted(0.2, (1u32..10, 1u32..5, 1u32..6)),
            prop::option::weighted(0.2, 100usize..20_000),
        ),
        5_000u64..55_000,
        prop::option::weighted(0.25, 0u64..5_000),
        prop::bool::weighted(0.75),
        prop::bool::weighted(0.75),
        prop::bool::weighted(1.0 / 7.0),
        any::<bool>(),
    )
        .prop_map(
            move |(
                seed,
                n,
                msgs,
                eager,
                wrap,
                (small, bytes),
                delay,
                jitter,
                dup,
                reorder,
                refuse,
                gap,
            )| {
                let mut gbn = GbnConfig {
                    eager_ack: eager,
                    ..GbnConfig::default()
                };
                if let Some(below) = wrap {
                    gbn.initial_seq = u32::MAX - below;
                }
                if let Some((window, burst, threshold)) = small {
                    gbn.window = window;
                    gbn.retx_burst = burst;
                    gbn.ack_threshold = threshold;
                }
                if let Some(b) = bytes {
                    // A window bounded in bytes: a few datagrams, or less than one.
                    gbn.window_bytes = b;
                    gbn.ack_bytes = (b / 2).max(1);
                }
                let faults = Faults {
                    base_delay_ns: delay,
                    jitter_ns: jitter.unwrap_or(0),
                    loss,
                    dup: if dup { 0.05 } else { 0.0 },
                    reorder: if reorder { 0.1 } else { 0.0 },
                    reorder_delay_ns: 200_000,
                    partitions: Vec::new(),
                };
                let sc = Scenario {
                    n,
                    msgs_per_node: msgs,
                    faults,
                    gbn,
                    refuse: if refuse { 0.1 } else { 0.0 },
                    send_gap_ns: if gap { 500_000 } else { 0 },
                };
                (seed, sc)
            },
        )
}

fn run_loss(name: &str, loss: f64, cases: u32) {
    let total = std::cell::RefCell::new(GbnStats::default());
    check(
        "gbn_props",
        name,
        cases,
        arb_scenario(&[2, 3, 5, 8], loss),
        |(seed, sc)| {
            add(&mut total.borrow_mut(), &run_one(*seed, sc)?);
            Ok(())
        },
    );
    // Visible with --nocapture: shows the fault paths were exercised.
    eprintln!("[{name}] totals {:?}", total.borrow());
}

#[test]
fn loss_0() {
    run_loss("loss_0", 0.0, 1200);
}

#[test]
fn loss_1pct() {
    run_loss("loss_1pct", 0.01, 1200);
}

#[test]
fn loss_10pct() {
    run_loss("loss_10pct", 0.10, 1200);
}

#[test]
fn loss_30pct() {
    run_loss("loss_30pct", 0.30, 1200);
}

/// Long streams between two ranks crossing the u32 wrap, with bulk windows.
#[test]
fn wrap_long_stream() {
    let strategy = (
        arb_scenario(&[2], 0.0),
        prop::sample::select(&[0.0, 0.05, 0.2][..]),
        0u32..300,
    )
        .prop_map(|((seed, mut sc), loss, below)| {
            sc.faults.loss = loss;
            sc.msgs_per_node = 400;
            sc.gbn.initial_seq = u32::MAX - below;
            sc.gbn.window = 128;
            sc.gbn.retx_burst = 64;
            sc.send_gap_ns = 0;
            (seed, sc)
        });
    check(
        "gbn_props",
        "wrap_long_stream",
        30,
        strategy,
        |(seed, sc)| run_one(*seed, sc).map(drop),
    );
}

/// A link (or a whole rank) down for a while; the protocol must recover afterwards.
#[test]
fn partitions() {
    let strategy = (
        arb_scenario(&[2, 3, 5], 0.02),
        arb_partition(0..5_000_000, 1_000_000..300_000_000),
    )
        .prop_map(|((seed, mut sc), cut)| {
            sc.faults.partitions.push(cut.for_ranks(sc.n));
            (seed, sc)
        });
    check("gbn_props", "partitions", 100, strategy, |(seed, sc)| {
        run_one(*seed, sc).map(drop)
    });
}
