//! Property tests of URTP over the simulated lossy network.
//!
//! Every endpoint runs a `Urtp` plus an application that executes a **global program**
//! of collectives (seed 000 §2): the program is drawn from the seed, identically on every
//! rank, and each rank derives its own script of sends and (multi-)receives:
//! broadcast from a rotating root via multicast (split into packets, sometimes inside a
//! random sub-communicator), allgather via multicast (round-robin, algorithm 1, and
//! k-concurrency, algorithm 2), gather via unicast to a root, scatter via packed
//! multicast packets, barrier, and a unicast ring shift. Receivers `want` every packet
//! they wait for, per source in order, and check that **every rank gets exactly the
//! right bytes in the right order** (payload and every message-layer header field); at
//! the end every endpoint must be `all_acked()`, with nothing left buffered.
//!
//! Multicast packets get an independent fate per receiver (`Dest::Many`); in half the
//! runs they also reach non-targets (as IP multicast to the whole job would), which must
//! drop them.
//!
//! Scenarios (rank count, program length, packets per message, window, ACK threshold,
//! sequence wrap, delays, duplication, reordering, partitions) are drawn by proptest and
//! a failure is shrunk to a minimal scenario; its report names the run's seed and the
//! command that replays it (see `phalanx_sim::prop`).

use std::collections::VecDeque;

use phalanx_proto::urtp::{
    Targets, Urtp, UrtpConfig, UrtpDest, UrtpEvent, UrtpSendError, UrtpStats, UrtpVerdict,
};
use phalanx_sim::prop::{arb_partition, check as prop_check};
use phalanx_sim::{Dest, Faults, Limits, Node, Sim, SmallRng};
use phalanx_wire::{Header, Kind, MsgKind, Packet};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

const JOB_KEY: u64 = 0x0123_4567_feed_beef;
const MAX_DATAGRAM: usize = 1500;

/// What a receiver expects of one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    context: u32,
    tag: i32,
    aux32: u32,
    aux: u64,
    msg_len: u64,
    payload: Vec<u8>,
}

#[derive(Debug, Clone)]
enum Action {
    Send {
        targets: Targets,
        exp: Expected,
    },
    /// Receive the listed packets: per source in order, sources in any order.
    Recv {
        from: Vec<(u32, VecDeque<Expected>)>,
    },
}

/// Deterministic content of packet `idx` of collective `coll` from `src`.
fn content(coll: u32, src: u32, idx: u32, len: usize) -> Vec<u8> {
    let mut x = (coll as u64) << 40 ^ (src as u64) << 20 ^ idx as u64 ^ 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

/// Builds per-rank scripts; `ex(...)` makes the packet both sides agree on.
struct Prog {
    n: u32,
    scripts: Vec<Vec<Action>>,
    coll: u32,
    context: u32,
}

impl Prog {
    fn ex(&self, src: u32, step: i32, idx: u32, total: u64, len: usize) -> Expected {
        Expected {
            context: self.context,
            tag: step,
            aux32: self.coll,
            aux: idx as u64,
            msg_len: total,
            payload: content(self.coll, src, idx, len),
        }
    }
    fn send(&mut self, r: u32, targets: Targets, exp: Expected) {
        self.scripts[r as usize].push(Action::Send { targets, exp });
    }
    fn recv(&mut self, r: u32, from: Vec<(u32, VecDeque<Expected>)>) {
        let from: Vec<_> = from.into_iter().filter(|f| !f.1.is_empty()).collect();
        if !from.is_empty() {
            self.scripts[r as usize].push(Action::Recv { from });
        }
    }
    /// Chunk lengths of a message of `len` bytes in packets of `m` (at least one packet).
    fn chunks(len: usize, m: usize) -> Vec<usize> {
        let mut v = Vec::new();
        let mut left = len;
        while left > 0 || v.is_empty() {
            let c = left.min(m);
            v.push(c);
            left -= c;
        }
        v
    }
    fn others(&self, x: u32, members: &[u32]) -> Targets {
        let v: Vec<u32> = members.iter().copied().filter(|&r| r != x).collect();
        Targets::from_ranks(&v)
    }

    fn bcast(&mut self, root: u32, members: &[u32], len: usize, m: usize) {
        let ch = Self::chunks(len, m);
        let tg = self.others(root, members);
        if tg.is_empty() {
            return;
        }
        let exps: VecDeque<Expected> = ch
            .iter()
            .enumerate()
            .map(|(i, &c)| self.ex(root, 0, i as u32, len as u64, c))
            .collect();
        for e in &exps {
            self.send(root, tg.clone(), e.clone());
        }
        for r in tg.iter() {
            self.recv(r, vec![(root, exps.clone())]);
        }
    }

    fn allgather_rr(&mut self, len: usize, m: usize) {
        let ch = Self::chunks(len, m);
        let all: Vec<u32> = (0..self.n).collect();
        for (k, &c) in ch.iter().enumerate() {
            for x in 0..self.n {
                let before: Vec<_> = (0..x)
                    .map(|r| {
                        (
                            r,
                            VecDeque::from([self.ex(r, k as i32, k as u32, len as u64, c)]),
                        )
                    })
                    .collect();
                let after: Vec<_> = (x + 1..self.n)
                    .map(|r| {
                        (
                            r,
                            VecDeque::from([self.ex(r, k as i32, k as u32, len as u64, c)]),
                        )
                    })
                    .collect();
                self.recv(x, before);
                let e = self.ex(x, k as i32, k as u32, len as u64, c);
                let tg = self.others(x, &all);
                self.send(x, tg, e);
                self.recv(x, after);
            }
        }
    }

    fn allgather_k(&mut self, len: usize, m: usize, k: usize) {
        let ch = Self::chunks(len, m);
        let all: Vec<u32> = (0..self.n).collect();
        for round in ch.chunks(k).enumerate() {
            let (ri, cs) = round;
            let base = ri * k;
            for x in 0..self.n {
                for (j, &c) in cs.iter().enumerate() {
                    let i = (base + j) as u32;
                    let e = self.ex(x, ri as i32, i, len as u64, c);
                    let tg = self.others(x, &all);
                    self.send(x, tg, e);
                }
                let from = (0..self.n)
                    .filter(|&r| r != x)
                    .map(|r| {
                        let q = cs
                            .iter()
                            .enumerate()
                            .map(|(j, &c)| self.ex(r, ri as i32, (base + j) as u32, len as u64, c))
                            .collect();
                        (r, q)
                    })
                    .collect();
                self.recv(x, from);
            }
        }
    }

    fn gather(&mut self, root: u32, len: usize, m: usize) {
        let ch = Self::chunks(len, m);
        let mut from = Vec::new();
        for r in (0..self.n).filter(|&r| r != root) {
            let q: VecDeque<Expected> = ch
                .iter()
                .enumerate()
                .map(|(i, &c)| self.ex(r, 1, i as u32, len as u64, c))
                .collect();
            for e in &q {
                self.send(r, Targets::single(root), e.clone());
            }
            from.push((r, q));
        }
        self.recv(root, from);
    }

    /// Blocks of `block` bytes for every rank packed into multicast packets.
    fn scatter_packed(&mut self, root: u32, block: usize, m: usize) {
        let per = (m / block.max(1)).max(1);
        let ranks: Vec<u32> = (0..self.n).collect();
        for (pi, group) in ranks.chunks(per).enumerate() {
            let tg = self.others(root, group);
            if tg.is_empty() {
                continue;
            }
            let len = group.len() * block;
            let e = self.ex(root, 2, pi as u32, (self.n as usize * block) as u64, len);
            self.send(root, tg.clone(), e.clone());
            for r in tg.iter() {
                self.recv(r, vec![(root, VecDeque::from([e.clone()]))]);
            }
        }
    }

    fn ring(&mut self, len: usize, m: usize) {
        let ch = Self::chunks(len, m);
        for x in 0..self.n {
            let to = (x + 1) % self.n;
            let from = (x + self.n - 1) % self.n;
            for (i, &c) in ch.iter().enumerate() {
                let e = self.ex(x, 3, i as u32, len as u64, c);
                self.send(x, Targets::single(to), e);
            }
            let q = ch
                .iter()
                .enumerate()
                .map(|(i, &c)| self.ex(from, 3, i as u32, len as u64, c))
                .collect();
            self.recv(x, vec![(from, q)]);
        }
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    n: u32,
    faults: Faults,
    urtp: UrtpConfig,
    collectives: u32,
    /// Packets per message at most (for small groups).
    max_packets: usize,
    mcast_to_all: bool,
}

/// The global program: identical on every rank (drawn from the seed only).
fn program(seed: u64, sc: &Scenario, max_payload: usize) -> (Vec<Vec<Action>>, Vec<String>) {
    let n = sc.n;
    let w = sc.urtp.window as usize;
    let mut r = SmallRng::seed_from_u64(seed ^ 0x0c0f_fee0);
    let mut p = Prog {
        n,
        scripts: vec![Vec::new(); n as usize],
        coll: 0,
        context: 0,
    };
    let mut names = Vec::new();
    let small = n > 8;
    for c in 0..sc.collectives {
        p.coll = c;
        p.context = 1 + r.gen_range(0..3);
        let m = r.gen_range(32..=max_payload);
        let max_pk = if small { 3 } else { sc.max_packets };
        let len = if r.gen_bool(0.15) {
            0
        } else {
            let pk = r.gen_range(1..=max_pk);
            r.gen_range(1..=m * pk)
        };
        let root = c % n;
        match r.gen_range(0..8) {
            0 | 1 => {
                names.push(format!("bcast(root {root}, {len} B / {m})"));
                let all: Vec<u32> = (0..n).collect();
                p.bcast(root, &all, len, m);
            }
            2 => {
                // Sub-communicator: a random subset containing the root.
                let mut members: Vec<u32> =
                    (0..n).filter(|&x| x == root || r.gen_bool(0.5)).collect();
                members.sort_unstable();
                names.push(format!("bcast(root {root} in {members:?}, {len} B)"));
                p.bcast(root, &members, len, m);
            }
            3 => {
                let len = len.min(m * 3);
                names.push(format!("allgather_rr({len} B / {m})"));
                p.allgather_rr(len, m);
            }
            4 => {
                let k = r.gen_range(1..=w.min(4));
                let len = len.min(m * 4);
                names.push(format!("allgather_k(k {k}, {len} B / {m})"));
                p.allgather_k(len, m, k);
            }
            5 => {
                names.push(format!("gather(root {root}, {len} B / {m})"));
                p.gather(root, len, m);
            }
            6 => {
                let block = r.gen_range(1..=64);
                names.push(format!("scatter_packed(root {root}, block {block})"));
                p.scatter_packed(root, block, m);
            }
            _ => {
                if r.gen_bool(0.5) {
                    names.push(format!("barrier(root {root})"));
                    p.gather(root, 0, m);
                    let all: Vec<u32> = (0..n).collect();
                    p.bcast(root, &all, 0, m);
                } else {
                    // Everyone sends before receiving: at most W packets (MPI-safe).
                    let len = len.min(m * w.min(4));
                    names.push(format!("ring({len} B / {m})"));
                    p.ring(len, m);
                }
            }
        }
    }
    (p.scripts, names)
}

struct App {
    rank: u32,
    n: u32,
    urtp: Urtp,
    script: VecDeque<Action>,
    mcast_to_all: bool,
    flushed: bool,
    failures: Vec<String>,
    events: Vec<UrtpEvent>,
    received: u64,
    /// Whether to take an in-order packet straight from its datagram
    /// (`handle_packet_consume`, as the engine does) or leave it to `peek`/`pop`.
    coin: SmallRng,
}

fn check(p: &Packet<'_>, e: &Expected) -> Result<(), String> {
    let got = Expected {
        context: p.context(),
        tag: p.tag(),
        aux32: p.aux32(),
        aux: p.aux(),
        msg_len: p.msg_len(),
        payload: p.payload().to_vec(),
    };
    if p.kind() != Kind::UrtpData || p.msg_kind() != MsgKind::Eager {
        return Err(format!("wrong kinds {:?}/{:?}", p.kind(), p.msg_kind()));
    }
    if got != *e {
        let short = |x: &Expected| {
            format!(
                "ctx {} tag {} coll {} idx {} total {} len {}",
                x.context,
                x.tag,
                x.aux32,
                x.aux,
                x.msg_len,
                x.payload.len()
            )
        };
        return Err(format!("got [{}] expected [{}]", short(&got), short(e)));
    }
    Ok(())
}

impl App {
    fn fail(&mut self, s: String) {
        if self.failures.len() < 10 {
            self.failures.push(format!("rank {}: {}", self.rank, s));
        }
    }

    /// Runs the script until it blocks.
    fn advance(&mut self, now: u64) {
        loop {
            let Some(action) = self.script.front_mut() else {
                if !self.flushed {
                    self.flushed = true;
                    self.urtp.flush_acks(now);
                }
                return;
            };
            match action {
                Action::Send { targets, exp } => {
                    let mut h = Header::new(Kind::UrtpData, 0, 0);
                    h.msg = MsgKind::Eager;
                    h.context = exp.context;
                    h.tag = exp.tag;
                    h.aux32 = exp.aux32;
                    h.aux = exp.aux;
                    h.msg_len = exp.msg_len;
                    match self.urtp.send(now, targets, &h, &exp.payload) {
                        Ok(()) => {}
                        Err(UrtpSendError::WindowFull { .. }) => return,
                        Err(e) => {
                            let s = format!("send failed: {e}");
                            self.fail(s);
                        }
                    }
                    self.script.pop_front();
                }
                Action::Recv { from } => {
                    let mut errs = Vec::new();
                    for (src, q) in from.iter_mut() {
                        while let Some(e) = q.front() {
                            let Some(p) = self.urtp.peek(*src) else {
                                break;
                            };
                            if let Err(s) = check(&p, e) {
                                errs.push(format!("from {src}: {s}"));
                            }
                            if p.src() != *src {
                                errs.push(format!("peek({src}) gave src {}", p.src()));
                            }
                            self.urtp.pop(now, *src);
                            self.received += 1;
                            q.pop_front();
                        }
                    }
                    from.retain(|f| !f.1.is_empty());
                    let waiting: Vec<u32> = from.iter().map(|f| f.0).collect();
                    for s in errs {
                        self.fail(s);
                    }
                    if waiting.is_empty() {
                        self.script.pop_front();
                        continue;
                    }
                    for src in waiting {
                        self.urtp.want(now, src);
                    }
                    return;
                }
            }
        }
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.urtp.poll_event() {
            self.events.push(e);
        }
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
        // Half the in-order packets the script receives now are taken straight from the
        // datagram, the others through peek/pop.
        let (urtp, script, coin) = (&mut self.urtp, &mut self.script, &mut self.coin);
        let (mut took, mut bad) = (false, None);
        let mut consume = |p: &Packet<'_>| {
            let Some(Action::Recv { from }) = script.front_mut() else {
                return false;
            };
            let Some((_, q)) = from.iter_mut().find(|f| f.0 == p.src()) else {
                return false;
            };
            let Some(e) = q.front() else {
                return false;
            };
            if !coin.gen_bool(0.5) {
                return false;
            }
            if let Err(s) = check(p, e) {
                bad = Some(format!("from {} (taken from the datagram): {s}", p.src()));
            }
            q.pop_front();
            took = true;
            true
        };
        let v = urtp.handle_packet_consume(now, &pkt, &mut consume);
        if took {
            self.received += 1;
        }
        if let Some(s) = bad {
            self.fail(s);
        }
        if let UrtpVerdict::Invalid(why) = v {
            self.fail(format!("Invalid from {from}: {why}"));
        }
        self.drain_events();
        self.advance(now);
    }

    fn poll_transmit(&mut self, now: u64) -> Option<(Dest, Vec<u8>)> {
        self.advance(now);
        let tx = self.urtp.poll_transmit(now)?;
        let dest = match tx.dest {
            UrtpDest::Unicast(r) => Dest::One(r),
            UrtpDest::Multicast if self.mcast_to_all => {
                Dest::Many((0..self.n).filter(|&r| r != self.rank).collect())
            }
            UrtpDest::Multicast => Dest::Many(tx.targets.iter().collect()),
        };
        Some((dest, tx.bytes.to_vec()))
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.urtp.poll_timeout()
    }

    fn handle_timeout(&mut self, now: u64) {
        self.urtp.handle_timeout(now);
        self.drain_events();
        self.advance(now);
    }
}

fn add(t: &mut UrtpStats, s: &UrtpStats) {
    t.data_sent += s.data_sent;
    t.multicasts_sent += s.multicasts_sent;
    t.resent += s.resent;
    t.rto_resent += s.rto_resent;
    t.probes_sent += s.probes_sent;
    t.reqs_sent += s.reqs_sent;
    t.reqs_received += s.reqs_received;
    t.reqs_ignored_unsent += s.reqs_ignored_unsent;
    t.reqs_ignored_recent += s.reqs_ignored_recent;
    t.reqs_stale += s.reqs_stale;
    t.acks_sent += s.acks_sent;
    t.buffered_out_of_order += s.buffered_out_of_order;
    t.delivered += s.delivered;
    t.duplicates += s.duplicates;
    t.not_target += s.not_target;
    t.pool_full_drops += s.pool_full_drops;
    t.out_of_window += s.out_of_window;
    t.invalid += s.invalid;
}

/// Runs one scenario with simulator (and program) seed `seed`: the statistics, or every
/// problem found.
fn run_one(seed: u64, sc: &Scenario) -> Result<UrtpStats, String> {
    let mut probe = Urtp::new(sc.urtp.clone(), JOB_KEY, 0, sc.n);
    probe.set_max_datagram(MAX_DATAGRAM);
    let max_payload = probe.max_payload(sc.n.saturating_sub(1) as usize).min(1200);
    let (scripts, names) = program(seed, sc, max_payload);
    let expected: u64 = scripts
        .iter()
        .flatten()
        .map(|a| match a {
            Action::Recv { from } => from.iter().map(|f| f.1.len() as u64).sum(),
            Action::Send { .. } => 0,
        })
        .sum();
    let nodes = scripts
        .into_iter()
        .enumerate()
        .map(|(r, s)| {
            let mut urtp = Urtp::new(sc.urtp.clone(), JOB_KEY, r as u32, sc.n);
            urtp.set_max_datagram(MAX_DATAGRAM);
            App {
                rank: r as u32,
                n: sc.n,
                urtp,
                script: s.into(),
                mcast_to_all: sc.mcast_to_all,
                flushed: false,
                failures: Vec::new(),
                events: Vec::new(),
                received: 0,
                coin: SmallRng::seed_from_u64(seed ^ (r as u64) << 32 ^ 0xc017),
            }
        })
        .collect();
    let mut sim = Sim::new(seed, nodes, sc.faults.clone());
    let limits = Limits {
        max_steps: 3_000_000,
        max_time_ns: 300_000_000_000,
    };
    let result = sim.run(limits);
    let mut problems = Vec::new();
    if let Err(e) = &result {
        problems.push(e.to_string());
    }
    let mut received = 0;
    for a in &sim.nodes {
        problems.extend(a.failures.iter().cloned());
        received += a.received;
        if !a.script.is_empty() {
            problems.push(format!(
                "rank {} stuck with {} actions left, next {:?}",
                a.rank,
                a.script.len(),
                a.script.front().map(|x| match x {
                    Action::Send { targets, .. } => format!("send to {targets:?}"),
                    Action::Recv { from } => format!(
                        "recv from {:?}",
                        from.iter().map(|f| f.0).collect::<Vec<_>>()
                    ),
                })
            ));
        }
        if !a.urtp.all_acked() {
            problems.push(format!(
                "rank {} not all_acked: {:?}",
                a.rank,
                a.urtp.unacked_peers()
            ));
        }
        if a.urtp.buffered() != 0 {
            problems.push(format!(
                "rank {} has {} packets left",
                a.rank,
                a.urtp.buffered()
            ));
        }
        if !a.events.is_empty() {
            problems.push(format!("rank {} events {:?}", a.rank, a.events));
        }
    }
    if received != expected {
        problems.push(format!("received {received} packets, expected {expected}"));
    }
    if !problems.is_empty() {
        let st: Vec<_> = sim.nodes.iter().map(|a| a.urtp.stats().clone()).collect();
        return Err(format!(
            "{}\n  program {names:?}\n  sim {:?}\n  urtp {st:?}",
            problems.join("\n"),
            sim.stats()
        ));
    }
    let mut total = UrtpStats::default();
    for a in &sim.nodes {
        add(&mut total, a.urtp.stats());
    }
    Ok(total)
}

/// Window and block-ACK settings a scenario varies.
#[derive(Clone, Debug)]
enum Acks {
    Default,
    /// A window of `[1, 2, 3, 4, 8][.0]` packets, threshold `1 + .1 % window`.
    SmallWindow(usize, u32),
    /// The default window with another block-ACK threshold.
    Threshold(u32),
}

/// (seed, scenario) with `loss` and `n` ranks drawn by `ns`: a start just below the
/// counter wrap, small windows or other block-ACK thresholds, jitter, duplication,
/// reordering and multicast to non-targets each on or off. Shrinking turns features off
/// and shortens the program.
fn arb_scenario(
    ns: impl Strategy<Value = u32>,
    loss: f64,
) -> impl Strategy<Value = (u64, Scenario)> {
    (
        any::<u64>(),
        ns,
        prop::option::weighted(0.33, 0u32..8),
        prop_oneof![
            2 => Just(Acks::Default),
            1 => (0usize..5, any::<u32>()).prop_map(|(i, t)| Acks::SmallWindow(i, t)),
            1 => (1u32..64).prop_map(Acks::Threshold),
        ],
        5_000u64..55_000,
        prop::option::weighted(0.5, 0u64..5_000),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.8),
        any::<bool>(),
        0u32..=10,
        any::<bool>(),
    )
        .prop_map(
            move |(
                seed,
                n,
                wrap,
                win,
                delay,
                jitter,
                dup,
                reorder,
                long_reorder,
                colls,
                to_all,
            )| {
                let mut urtp = UrtpConfig::default();
                if let Some(below) = wrap {
                    urtp.initial_seq = u32::MAX - below;
                }
                match win {
                    Acks::Threshold(t) => urtp.block_ack_threshold = t,
                    Acks::SmallWindow(i, t) => {
                        urtp.window = [1, 2, 3, 4, 8][i];
                        urtp.block_ack_threshold = 1 + t % urtp.window;
                    }
                    Acks::Default => {}
                }
                let faults = Faults {
                    base_delay_ns: delay,
                    jitter_ns: jitter.unwrap_or(0),
                    loss,
                    dup: if dup { 0.05 } else { 0.0 },
                    reorder: if reorder { 0.1 } else { 0.0 },
                    reorder_delay_ns: if long_reorder { 2_000_000 } else { 200_000 },
                    partitions: Vec::new(),
                };
                let sc = Scenario {
                    n,
                    faults,
                    urtp,
                    collectives: 4 + colls.min(if n > 8 { 4 } else { 10 }),
                    max_packets: 6,
                    mcast_to_all: to_all,
                };
                (seed, sc)
            },
        )
}

/// Rank counts as the tests weigh them: mostly small, sometimes 16 or 32.
fn ranks() -> impl Strategy<Value = u32> {
    prop_oneof![
        80 => Just(2u32),
        80 => Just(3),
        60 => Just(5),
        40 => Just(8),
        16 => Just(16),
        8 => Just(32),
    ]
}

fn run_loss(name: &str, loss: f64) {
    let total = std::cell::RefCell::new(UrtpStats::default());
    prop_check(
        "urtp_props",
        name,
        284,
        arb_scenario(ranks(), loss),
        |(seed, sc)| {
            add(&mut total.borrow_mut(), &run_one(*seed, sc)?);
            Ok(())
        },
    );
    // Visible with --nocapture: shows the fault paths were exercised.
    eprintln!("[{name}] totals {:?}", total.borrow());
}

#[test]
fn urtp_loss_0() {
    run_loss("urtp_loss_0", 0.0);
}

#[test]
fn urtp_loss_5pct() {
    run_loss("urtp_loss_5pct", 0.05);
}

#[test]
fn urtp_loss_10pct() {
    run_loss("urtp_loss_10pct", 0.10);
}

#[test]
fn urtp_loss_30pct() {
    run_loss("urtp_loss_30pct", 0.30);
}

/// Long messages (up to 40 packets) through small windows, crossing the counter wrap.
#[test]
fn urtp_long_streams_wrap() {
    let strategy = (
        arb_scenario(prop::sample::select(&[2u32, 3, 5, 8][..]), 0.0),
        prop::sample::select(&[0.0, 0.05, 0.2][..]),
        prop::sample::select(&[2u32, 4, 16][..]),
    )
        .prop_map(|((seed, mut sc), loss, window)| {
            sc.faults.loss = loss;
            sc.max_packets = 40;
            sc.collectives = 6;
            sc.urtp.initial_seq = u32::MAX - 20;
            sc.urtp.window = window;
            sc.urtp.block_ack_threshold = window.div_ceil(2);
            (seed, sc)
        });
    prop_check(
        "urtp_props",
        "urtp_long_streams_wrap",
        24,
        strategy,
        |(seed, sc)| run_one(*seed, sc).map(drop),
    );
}

/// A link (or a whole rank) down for a while; REQs and the safety net recover afterwards.
#[test]
fn urtp_partitions() {
    let strategy = (
        arb_scenario(prop::sample::select(&[2u32, 3, 5, 8][..]), 0.02),
        arb_partition(0..3_000_000, 1_000_000..500_000_000),
    )
        .prop_map(|((seed, mut sc), cut)| {
            sc.faults.partitions.push(cut.for_ranks(sc.n));
            (seed, sc)
        });
    prop_check(
        "urtp_props",
        "urtp_partitions",
        40,
        strategy,
        |(seed, sc)| run_one(*seed, sc).map(drop),
    );
}
