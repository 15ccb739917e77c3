//! Deterministic network simulator for phalanx protocols.
//!
//! `N` endpoints ([`Node`]s) run on virtual time (`u64` nanoseconds) in one thread; all
//! randomness comes from one seeded [`SmallRng`], so a run is a pure function of its seed.
//! A [`NetModel`] decides the fate of every datagram *per receiver* (a multicast
//! [`Dest::Many`] gets an independent fate for each member): lost, delivered once or
//! several times, each copy at its own time. [`Faults`] is the standard model: base delay,
//! jitter, loss, duplication, reordering (an extra random delay) and partitions (a link
//! down for a window of virtual time).
//!
//! [`Sim::run`] drives the nodes until quiescence — no datagram in flight, no node with a
//! pending transmission or timer — or fails with a [`SimError`] naming the seed when the
//! step or virtual-time cap is exceeded (never a hang).
//!
//! # Replaying a failure
//!
//! The property tests (`crates/sim/tests/`) draw their scenarios with proptest through
//! [`prop::check`]: the runner is seeded from `PHALANX_SIM_SEED` (default 0), so every run
//! of the suite sees the same cases, and a failure is shrunk to a minimal scenario and
//! reported with the seed and the command that replays it:
//!
//! ```text
//! PHALANX_SIM_SEED=0 cargo test -p phalanx-sim --test gbn_props loss_10pct -- --nocapture
//! ```
//!
//! Another `PHALANX_SIM_SEED` explores other cases; `PHALANX_SIM_SEEDS=N` sets how many
//! cases each property runs (default: per test). The directed tests that loop over seeds
//! ([`seeds`]) read the same two variables: one seed, or how many.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod prop;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::rc::Rc;

pub use rand::rngs::SmallRng;
use rand::Rng;
pub use rand::SeedableRng;

/// Destination of a datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// One rank.
    One(u32),
    /// Several ranks (multicast): each receiver gets its own fate.
    Many(Vec<u32>),
}

/// A protocol endpoint driven by the simulator (sans-I/O shape).
pub trait Node {
    /// A datagram from rank `from` arrived at virtual time `now`.
    fn handle_datagram(&mut self, now: u64, from: u32, data: &[u8]);
    /// The next datagram to put on the network, if any.
    fn poll_transmit(&mut self, now: u64) -> Option<(Dest, Vec<u8>)>;
    /// The earliest time at which [`Node::handle_timeout`] must be called.
    fn poll_timeout(&self) -> Option<u64>;
    /// Called at (or after) the time returned by [`Node::poll_timeout`].
    fn handle_timeout(&mut self, now: u64);
}

/// Decides the fate of one datagram on the link `from → to`.
pub trait NetModel {
    /// Appends to `out` the arrival time of each copy that will be delivered (none:
    /// lost; several: duplicated). `now` is the send time.
    fn fates(
        &mut self,
        rng: &mut SmallRng,
        now: u64,
        from: u32,
        to: u32,
        len: usize,
        out: &mut Vec<u64>,
    );
}

/// A link (or every link of a rank) down during `[from_ns, until_ns)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// One end (`None`: any rank).
    pub a: Option<u32>,
    /// The other end (`None`: any rank). The partition is symmetric.
    pub b: Option<u32>,
    /// Start of the outage (virtual ns).
    pub from_ns: u64,
    /// End of the outage (virtual ns, exclusive).
    pub until_ns: u64,
}

impl Partition {
    fn cuts(&self, now: u64, x: u32, y: u32) -> bool {
        let m = |e: Option<u32>, r: u32| e.is_none() || e == Some(r);
        now >= self.from_ns
            && now < self.until_ns
            && ((m(self.a, x) && m(self.b, y)) || (m(self.a, y) && m(self.b, x)))
    }
}

/// The standard fault model: every probability is per datagram and per receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct Faults {
    /// One-way delay of every copy (ns).
    pub base_delay_ns: u64,
    /// Uniform extra delay `0..jitter_ns` (ns).
    pub jitter_ns: u64,
    /// Probability that a datagram is lost.
    pub loss: f64,
    /// Probability that a delivered datagram is delivered twice.
    pub dup: f64,
    /// Probability that a copy gets an extra delay `0..reorder_delay_ns` (reordering).
    pub reorder: f64,
    /// Maximum extra delay of a reordered copy (ns).
    pub reorder_delay_ns: u64,
    /// Link outages.
    pub partitions: Vec<Partition>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            base_delay_ns: 10_000,
            jitter_ns: 0,
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            reorder_delay_ns: 0,
            partitions: Vec::new(),
        }
    }
}

impl Faults {
    fn one_delay(&self, rng: &mut SmallRng) -> u64 {
        let mut d = self.base_delay_ns;
        if self.jitter_ns > 0 {
            d += rng.gen_range(0..self.jitter_ns);
        }
        if self.reorder > 0.0 && self.reorder_delay_ns > 0 && rng.gen_bool(self.reorder) {
            d += rng.gen_range(0..self.reorder_delay_ns);
        }
        d
    }
}

fn prob(p: f64) -> f64 {
    if p.is_finite() {
        p.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

impl NetModel for Faults {
    fn fates(
        &mut self,
        rng: &mut SmallRng,
        now: u64,
        from: u32,
        to: u32,
        _len: usize,
        out: &mut Vec<u64>,
    ) {
        if self.partitions.iter().any(|p| p.cuts(now, from, to)) {
            return;
        }
        if rng.gen_bool(prob(self.loss)) {
            return;
        }
        out.push(now.saturating_add(self.one_delay(rng)));
        if rng.gen_bool(prob(self.dup)) {
            out.push(now.saturating_add(self.one_delay(rng)));
        }
    }
}

/// Limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum number of steps (datagram sends, deliveries and timer firings).
    pub max_steps: u64,
    /// Maximum virtual time (ns).
    pub max_time_ns: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 5_000_000,
            max_time_ns: 3_600_000_000_000,
        }
    }
}

/// Counters of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Datagrams handed to the network (a multicast counts once per receiver).
    pub sent: u64,
    /// Copies delivered.
    pub delivered: u64,
    /// Datagrams lost (no copy delivered).
    pub lost: u64,
    /// Extra copies created by duplication.
    pub duplicated: u64,
    /// Steps taken.
    pub steps: u64,
    /// Virtual time at quiescence (ns).
    pub end_ns: u64,
}

/// A run that did not reach quiescence within its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimError {
    /// The seed of the run.
    pub seed: u64,
    /// What went wrong.
    pub reason: String,
    /// Virtual time of the failure (ns).
    pub now: u64,
    /// Steps taken.
    pub steps: u64,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation seed {} failed at t={} ns after {} steps: {} \
             (replay: PHALANX_SIM_SEED={} cargo test -p phalanx-sim)",
            self.seed, self.now, self.steps, self.reason, self.seed
        )
    }
}

impl std::error::Error for SimError {}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: u64,
    serial: u64,
    to: u32,
    from: u32,
    data: Rc<[u8]>,
}

/// The simulator: nodes, network model, seeded RNG and virtual clock.
pub struct Sim<N: Node, M: NetModel> {
    /// The endpoints, indexed by rank.
    pub nodes: Vec<N>,
    /// The network model.
    pub net: M,
    rng: SmallRng,
    seed: u64,
    now: u64,
    serial: u64,
    queue: BinaryHeap<Reverse<InFlight>>,
    stats: SimStats,
    fates: Vec<u64>,
}

impl<N: Node, M: NetModel> Sim<N, M> {
    /// A simulator over `nodes` (rank = index) with the network RNG seeded by `seed`.
    pub fn new(seed: u64, nodes: Vec<N>, net: M) -> Self {
        Sim {
            nodes,
            net,
            rng: SmallRng::seed_from_u64(seed ^ 0x5EED_F00D_u64),
            seed,
            now: 0,
            serial: 0,
            queue: BinaryHeap::new(),
            stats: SimStats::default(),
            fates: Vec::new(),
        }
    }

    /// The seed of this run.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Current virtual time (ns).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Counters so far.
    pub fn stats(&self) -> &SimStats {
        &self.stats
    }

    /// Datagrams currently in flight.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    fn fail(&self, reason: String) -> SimError {
        SimError {
            seed: self.seed,
            reason,
            now: self.now,
            steps: self.stats.steps,
        }
    }

    fn step(&mut self, limits: &Limits) -> Result<(), SimError> {
        self.stats.steps += 1;
        if self.stats.steps > limits.max_steps {
            return Err(self.fail(format!("step cap {} exceeded", limits.max_steps)));
        }
        Ok(())
    }

    fn dispatch(&mut self, from: u32, dest: Dest, data: Vec<u8>) {
        let data: Rc<[u8]> = data.into();
        let n = self.nodes.len() as u32;
        let targets = match dest {
            Dest::One(r) => vec![r],
            Dest::Many(v) => v,
        };
        for to in targets {
            self.stats.sent += 1;
            if to >= n {
                self.stats.lost += 1;
                continue;
            }
            self.fates.clear();
            self.net.fates(
                &mut self.rng,
                self.now,
                from,
                to,
                data.len(),
                &mut self.fates,
            );
            if self.fates.is_empty() {
                self.stats.lost += 1;
            }
            self.stats.duplicated += self.fates.len().saturating_sub(1) as u64;
            for i in 0..self.fates.len() {
                self.serial += 1;
                self.queue.push(Reverse(InFlight {
                    at: self.fates[i].max(self.now),
                    serial: self.serial,
                    to,
                    from,
                    data: data.clone(),
                }));
            }
        }
    }

    /// Runs until quiescence (Ok) or until a limit is exceeded (Err naming the seed).
    pub fn run(&mut self, limits: Limits) -> Result<SimStats, SimError> {
        loop {
            for i in 0..self.nodes.len() {
                while let Some((dest, data)) = self.nodes[i].poll_transmit(self.now) {
                    self.step(&limits)?;
                    self.dispatch(i as u32, dest, data);
                }
            }
            let next_net = self.queue.peek().map(|e| e.0.at);
            let next_timer = self.nodes.iter().filter_map(|n| n.poll_timeout()).min();
            let next = match (next_net, next_timer) {
                (None, None) => {
                    self.stats.end_ns = self.now;
                    return Ok(self.stats.clone());
                }
                (Some(a), None) | (None, Some(a)) => a,
                (Some(a), Some(b)) => a.min(b),
            };
            if next > limits.max_time_ns {
                return Err(self.fail(format!(
                    "virtual time cap {} ns exceeded (next event at {} ns, {} in flight)",
                    limits.max_time_ns,
                    next,
                    self.queue.len()
                )));
            }
            self.step(&limits)?;
            self.now = self.now.max(next);
            let due = matches!(self.queue.peek(), Some(e) if e.0.at <= self.now);
            if due {
                if let Some(Reverse(ev)) = self.queue.pop() {
                    self.stats.delivered += 1;
                    self.nodes[ev.to as usize].handle_datagram(self.now, ev.from, &ev.data);
                }
            } else {
                let now = self.now;
                for node in &mut self.nodes {
                    if node.poll_timeout().is_some_and(|t| t <= now) {
                        node.handle_timeout(now);
                    }
                }
            }
        }
    }
}

/// The seeds a property test should run: only `PHALANX_SIM_SEED` if set (replay),
/// otherwise `0..PHALANX_SIM_SEEDS` if set, otherwise `0..default_count`.
pub fn seeds(default_count: u64) -> Vec<u64> {
    if let Some(s) = std::env::var("PHALANX_SIM_SEED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        return vec![s];
    }
    let n = std::env::var("PHALANX_SIM_SEEDS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default_count);
    (0..n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Echoes every datagram back to its sender once; node 0 starts with `n` pings.
    struct Echo {
        rank: u32,
        start: u32,
        out: Vec<(Dest, Vec<u8>)>,
        got: u32,
    }

    impl Node for Echo {
        fn handle_datagram(&mut self, _now: u64, from: u32, data: &[u8]) {
            self.got += 1;
            if self.rank != 0 {
                self.out.push((Dest::One(from), data.to_vec()));
            }
        }
        fn poll_transmit(&mut self, _now: u64) -> Option<(Dest, Vec<u8>)> {
            if self.start > 0 {
                self.start -= 1;
                return Some((Dest::Many(vec![1, 2]), vec![self.start as u8]));
            }
            self.out.pop()
        }
        fn poll_timeout(&self) -> Option<u64> {
            None
        }
        fn handle_timeout(&mut self, _now: u64) {}
    }

    fn echo_run(seed: u64, faults: Faults) -> (SimStats, u32) {
        let nodes = (0..3)
            .map(|r| Echo {
                rank: r,
                start: if r == 0 { 50 } else { 0 },
                out: Vec::new(),
                got: 0,
            })
            .collect();
        let mut sim = Sim::new(seed, nodes, faults);
        let st = sim.run(Limits::default()).expect("quiescent");
        (st, sim.nodes[0].got)
    }

    #[test]
    fn lossless_multicast_echo() {
        let (st, got) = echo_run(1, Faults::default());
        assert_eq!(got, 100);
        assert_eq!(st.lost, 0);
        assert_eq!(st.end_ns, 20_000);
    }

    #[test]
    fn deterministic_per_seed() {
        let f = Faults {
            loss: 0.2,
            dup: 0.1,
            reorder: 0.3,
            reorder_delay_ns: 50_000,
            ..Faults::default()
        };
        assert_eq!(echo_run(7, f.clone()), echo_run(7, f.clone()));
        let (st, got) = echo_run(8, f);
        assert!(st.lost > 0 && st.duplicated > 0);
        assert!(got < 200);
    }

    #[test]
    fn partition_drops_everything_in_window() {
        let f = Faults {
            partitions: vec![Partition {
                a: Some(0),
                b: None,
                from_ns: 0,
                until_ns: 1,
            }],
            ..Faults::default()
        };
        let (st, got) = echo_run(3, f);
        assert_eq!(got, 0);
        assert_eq!(st.lost, 100);
    }

    struct Spinner;
    impl Node for Spinner {
        fn handle_datagram(&mut self, _: u64, _: u32, _: &[u8]) {}
        fn poll_transmit(&mut self, _: u64) -> Option<(Dest, Vec<u8>)> {
            None
        }
        fn poll_timeout(&self) -> Option<u64> {
            Some(0)
        }
        fn handle_timeout(&mut self, _: u64) {}
    }

    #[test]
    fn cap_names_seed() {
        let mut sim = Sim::new(99, vec![Spinner], Faults::default());
        let e = sim
            .run(Limits {
                max_steps: 1000,
                max_time_ns: 10,
            })
            .unwrap_err();
        assert_eq!(e.seed, 99);
        assert!(e.to_string().contains("seed 99"));
    }
}
