//! Fault injection.
//!
//! Contract:
//! * [`Faulty`] wraps any [`Transport`] and, on the send path only, drops,
//!   duplicates, reorders and delays datagrams at the rates of a
//!   [`FaultConfig`]. Receiving, fds and `max_datagram` pass through.
//! * The random stream is a `SmallRng` seeded from `(seed, rank)`: ranks
//!   differ, and the same sequence of calls replays the same faults.
//! * Multicast and multi-send: over unicast fan-out each receiver gets its own fate (the
//!   survivors still leave in one inner call); a multicast over a real group can only be
//!   dropped, duplicated or held as a whole (see [`Faulty::send_multicast`]).
//! * A dropped datagram is reported as sent (`Ok(true)`): it models loss in
//!   the network, not local back-pressure. It is counted in `faults_dropped`.
//! * A duplicated datagram is sent twice back to back (`faults_duplicated`).
//! * A reordered datagram is held (one at a time) and sent right after the
//!   next datagram sent, or at the latest [`REORDER_HOLD_NS`] after it was
//!   held, whichever comes first (`faults_reordered`).
//! * With `delay_us > 0` every datagram that leaves is queued and handed to
//!   the inner transport `delay_us` later, in order.
//! * Timed release needs [`Transport::service`]. Faulty has no clock of its
//!   own: a datagram held or queued since the last `service` call reports
//!   the last `now` seen as its deadline (i.e. "due now"), and the next
//!   `service(now)` stamps it with `now + hold/delay`. Callers must therefore
//!   call `service` when `next_deadline()` is at or before their clock.
//!   Datagrams still held when the wrapper is dropped are lost.

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::os::fd::RawFd;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{Rank, Transport, TransportStats};

/// Longest time a reordered datagram is held when nothing else is sent (ns).
pub const REORDER_HOLD_NS: u64 = 200_000;

/// Largest `delay_us` [`FaultConfig::parse`] takes: 10 s.
pub const MAX_DELAY_US: u64 = 10_000_000;

/// Fault rates and seed, usually from `PHALANX_FAULTS`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultConfig {
    /// Probability that a datagram is dropped, in [0, 1).
    pub loss: f64,
    /// Probability that a datagram is sent twice, in [0, 1).
    pub dup: f64,
    /// Probability that a datagram is held back behind the next one, in [0, 1).
    pub reorder: f64,
    /// Fixed extra delay for every datagram, µs (0 = none; at most [`MAX_DELAY_US`]).
    pub delay_us: u64,
    /// Base seed; each rank derives its own stream from (seed, rank).
    pub seed: u64,
}

/// Why a fault specification was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultParseError {
    /// An item without `=`.
    #[error(
        "fault spec item {item:?} is not key=value (keys: loss, dup, reorder, delay_us, seed)"
    )]
    NotKeyValue { item: String },
    /// A key that is not one of loss, dup, reorder, delay_us, seed.
    #[error("unknown fault key {key:?} (keys: loss, dup, reorder, delay_us, seed)")]
    UnknownKey { key: String },
    /// The same key twice.
    #[error("fault key {key:?} given more than once")]
    DuplicateKey { key: String },
    /// A value that does not parse as the key's type.
    #[error("fault key {key:?}: {value:?} is not a valid {expected}")]
    BadValue {
        key: String,
        value: String,
        expected: &'static str,
    },
    /// A rate outside [0, 1).
    #[error("fault key {key:?}: rate {value} must be in [0, 1)")]
    RateOutOfRange { key: String, value: String },
    /// A `delay_us` above [`MAX_DELAY_US`].
    #[error("fault key \"delay_us\": {value} µs is more than {MAX_DELAY_US} (10 s)")]
    DelayOutOfRange { value: u64 },
    /// `PHALANX_FAULTS` is not UTF-8.
    #[error("PHALANX_FAULTS is not valid UTF-8")]
    NotUnicode,
}

impl FaultConfig {
    /// Parses e.g. `"loss=0.1,dup=0.02,reorder=0.05,seed=7"`. Keys are
    /// optional (default 0), in any order, at most once each; `delay_us` (at most
    /// [`MAX_DELAY_US`]) is accepted too. Whitespace around items, keys and values is ignored, as
    /// are empty items.
    pub fn parse(s: &str) -> Result<FaultConfig, FaultParseError> {
        let mut cfg = FaultConfig::default();
        let mut seen: Vec<&str> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) =
                item.split_once('=')
                    .ok_or_else(|| FaultParseError::NotKeyValue {
                        item: item.to_string(),
                    })?;
            let (key, value) = (key.trim(), value.trim());
            if seen.contains(&key) {
                return Err(FaultParseError::DuplicateKey {
                    key: key.to_string(),
                });
            }
            match key {
                "loss" => cfg.loss = parse_rate(key, value)?,
                "dup" => cfg.dup = parse_rate(key, value)?,
                "reorder" => cfg.reorder = parse_rate(key, value)?,
                "delay_us" => {
                    cfg.delay_us = parse_u64(key, value)?;
                    if cfg.delay_us > MAX_DELAY_US {
                        return Err(FaultParseError::DelayOutOfRange {
                            value: cfg.delay_us,
                        });
                    }
                }
                "seed" => cfg.seed = parse_u64(key, value)?,
                _ => {
                    return Err(FaultParseError::UnknownKey {
                        key: key.to_string(),
                    })
                }
            }
            seen.push(key);
        }
        Ok(cfg)
    }
}

fn parse_rate(key: &str, value: &str) -> Result<f64, FaultParseError> {
    let r: f64 = value.parse().map_err(|_| FaultParseError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        expected: "probability (e.g. 0.05)",
    })?;
    if !(0.0..1.0).contains(&r) {
        return Err(FaultParseError::RateOutOfRange {
            key: key.to_string(),
            value: value.to_string(),
        });
    }
    Ok(r)
}

fn parse_u64(key: &str, value: &str) -> Result<u64, FaultParseError> {
    value.parse().map_err(|_| FaultParseError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        expected: "non-negative integer",
    })
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Per-rank RNG seed derived from (seed, rank).
fn rank_seed(seed: u64, rank: Rank) -> u64 {
    splitmix64(seed ^ splitmix64(u64::from(rank) ^ 0x7068_616c_616e_7800))
}

/// Where a datagram goes, i.e. which inner call sends it.
#[derive(Debug, Clone)]
enum Dest {
    /// `send_to(rank)`.
    One(Rank),
    /// `multi_send(ranks)`.
    Many(Vec<Rank>),
    /// `send_multicast(targets)`.
    Multicast(Vec<Rank>),
}

struct Pending {
    dest: Dest,
    data: Vec<u8>,
    /// Release time in the caller's clock; `None` until the next `service`.
    due: Option<u64>,
}

/// Fault-injecting wrapper around a transport. See the module docs.
pub struct Faulty<T: Transport> {
    inner: T,
    cfg: FaultConfig,
    rng: SmallRng,
    held: Option<Pending>,
    delayed: VecDeque<Pending>,
    last_now: u64,
    dropped: u64,
    duplicated: u64,
    reordered: u64,
}

impl<T: Transport> Faulty<T> {
    /// Wraps `inner`; the fault stream is seeded from `(cfg.seed, rank)`.
    pub fn new(inner: T, cfg: FaultConfig, rank: Rank) -> Self {
        let rng = SmallRng::seed_from_u64(rank_seed(cfg.seed, rank));
        Faulty {
            inner,
            cfg,
            rng,
            held: None,
            delayed: VecDeque::new(),
            last_now: 0,
            dropped: 0,
            duplicated: 0,
            reordered: 0,
        }
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The wrapped transport, mutably (e.g. for `UdpTransport::set_peers`).
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// The configuration in use.
    pub fn config(&self) -> &FaultConfig {
        &self.cfg
    }

    fn roll(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.gen::<f64>() < p
    }

    /// `len` against the limit to `peer` alone, or (`None`) to every destination.
    fn check_len(&self, peer: Option<Rank>, len: usize) -> std::io::Result<()> {
        let max = match peer {
            Some(p) => self.inner.max_datagram_to(p),
            None => self.inner.max_datagram(),
        };
        if len > max {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("datagram of {len} bytes exceeds max_datagram {max}"),
            ));
        }
        Ok(())
    }

    /// Hands a datagram to the inner transport now. Returns for how many destinations
    /// the inner transport took it.
    fn dispatch(&mut self, dest: &Dest, data: &[u8]) -> std::io::Result<usize> {
        match dest {
            Dest::One(p) => Ok(usize::from(self.inner.send_to(*p, data)?)),
            Dest::Many(v) => self.inner.multi_send(data, v),
            Dest::Multicast(v) => Ok(if self.inner.send_multicast(data, v)? {
                v.len()
            } else {
                0
            }),
        }
    }

    /// Hands a datagram to the wire (or to the delay queue). Returns like `dispatch`.
    fn emit(&mut self, dest: Dest, data: &[u8]) -> std::io::Result<usize> {
        if self.cfg.delay_us == 0 {
            self.dispatch(&dest, data)
        } else {
            let n = match &dest {
                Dest::One(_) => 1,
                Dest::Many(v) | Dest::Multicast(v) => v.len(),
            };
            self.delayed.push_back(Pending {
                dest,
                data: data.to_vec(),
                due: None,
            });
            Ok(n)
        }
    }

    fn release_held(&mut self) -> std::io::Result<()> {
        if let Some(h) = self.held.take() {
            self.emit(h.dest, &h.data)?;
        }
        Ok(())
    }

    /// One fate for the whole datagram, whatever `dest` is: `send_to`, and multicast over
    /// a real group (the network delivers or loses one packet for everyone).
    fn whole(&mut self, dest: Dest, datagram: &[u8]) -> std::io::Result<usize> {
        let one = match dest {
            Dest::One(p) => Some(p),
            _ => None,
        };
        self.check_len(one, datagram.len())?;
        let all = match &dest {
            Dest::One(_) => 1,
            Dest::Many(v) | Dest::Multicast(v) => v.len(),
        };
        if self.roll(self.cfg.loss) {
            self.dropped += 1;
            return Ok(all);
        }
        let dup = self.roll(self.cfg.dup);
        if dup {
            self.duplicated += 1;
        }
        if self.held.is_none() && self.roll(self.cfg.reorder) {
            self.reordered += 1;
            if dup {
                self.emit(dest.clone(), datagram)?;
            }
            self.held = Some(Pending {
                dest,
                data: datagram.to_vec(),
                due: None,
            });
            return Ok(all);
        }
        let sent = self.emit(dest.clone(), datagram)?;
        if dup {
            self.emit(dest, datagram)?;
        }
        self.release_held()?;
        Ok(sent)
    }

    /// A separate fate per receiver (unicast fan-out): each target's copy is dropped,
    /// duplicated or held back on its own roll; the survivors still leave in one inner
    /// call (`send_multicast` when `multicast`, else `multi_send`).
    fn per_target(
        &mut self,
        datagram: &[u8],
        targets: &[Rank],
        multicast: bool,
    ) -> std::io::Result<usize> {
        self.check_len(None, datagram.len())?;
        let was_held = self.held.is_some();
        let mut keep = Vec::with_capacity(targets.len());
        let mut dups = Vec::new();
        for &t in targets {
            if self.roll(self.cfg.loss) {
                self.dropped += 1;
                continue;
            }
            if self.roll(self.cfg.dup) {
                self.duplicated += 1;
                dups.push(t);
            }
            if self.held.is_none() && self.roll(self.cfg.reorder) {
                self.reordered += 1;
                self.held = Some(Pending {
                    dest: Dest::One(t),
                    data: datagram.to_vec(),
                    due: None,
                });
                continue;
            }
            keep.push(t);
        }
        let dest = |v: Vec<Rank>| {
            if multicast {
                Dest::Multicast(v)
            } else {
                Dest::Many(v)
            }
        };
        let kept = keep.len();
        let sent = if keep.is_empty() {
            0
        } else {
            self.emit(dest(keep), datagram)?
        };
        if !dups.is_empty() {
            self.emit(dest(dups), datagram)?;
        }
        if was_held {
            self.release_held()?;
        }
        Ok(targets.len() - (kept - sent.min(kept)))
    }
}

impl<T: Transport> Transport for Faulty<T> {
    fn add_peers(&mut self, addrs: &[SocketAddrV4]) -> bool {
        self.inner.add_peers(addrs)
    }

    fn send_to(&mut self, peer: Rank, datagram: &[u8]) -> std::io::Result<bool> {
        Ok(self.whole(Dest::One(peer), datagram)? == 1)
    }

    /// Over a real group (`inner.multicast_available()`) the datagram gets one fate for
    /// all receivers — the only thing a sender can do to one multicast packet. Over
    /// fan-out every receiver gets its own fate. Tests of the multicast protocols under
    /// loss therefore run with `PHALANX_MCAST=0` (the default when `PHALANX_FAULTS` is
    /// set): the same packets and bitmaps, with per-receiver loss.
    fn send_multicast(&mut self, datagram: &[u8], targets: &[Rank]) -> std::io::Result<bool> {
        let n = if self.inner.multicast_available() {
            self.whole(Dest::Multicast(targets.to_vec()), datagram)?
        } else {
            self.per_target(datagram, targets, true)?
        };
        Ok(n == targets.len())
    }

    fn multi_send(&mut self, datagram: &[u8], peers: &[Rank]) -> std::io::Result<usize> {
        self.per_target(datagram, peers, false)
    }

    fn multicast_available(&self) -> bool {
        self.inner.multicast_available()
    }

    fn recv_batch(&mut self, f: &mut dyn FnMut(SocketAddrV4, &[u8])) -> std::io::Result<usize> {
        self.inner.recv_batch(f)
    }

    fn set_poll_multicast(&mut self, on: bool) {
        self.inner.set_poll_multicast(on)
    }

    fn fds(&self) -> Vec<RawFd> {
        self.inner.fds()
    }

    fn next_deadline(&self) -> Option<u64> {
        let held = self.held.as_ref().map(|h| h.due.unwrap_or(self.last_now));
        // FIFO with non-decreasing stamps; unstamped entries sit at the back.
        let delayed = match (self.delayed.front(), self.delayed.back()) {
            (Some(_), Some(Pending { due: None, .. })) => Some(self.last_now),
            (Some(f), _) => f.due,
            _ => None,
        };
        [held, delayed, self.inner.next_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    fn service(&mut self, now: u64) -> std::io::Result<()> {
        self.last_now = self.last_now.max(now);
        let now = self.last_now;
        if let Some(h) = &mut self.held {
            let due = *h.due.get_or_insert(now.saturating_add(REORDER_HOLD_NS));
            if due <= now {
                self.release_held()?;
            }
        }
        let delay = self.cfg.delay_us.saturating_mul(1000);
        for p in self.delayed.iter_mut().rev() {
            if p.due.is_some() {
                break;
            }
            p.due = Some(now.saturating_add(delay));
        }
        while self.delayed.front().is_some_and(|p| p.due <= Some(now)) {
            let p = self.delayed.pop_front().expect("front exists");
            self.dispatch(&p.dest, &p.data)?;
        }
        self.inner.service(now)
    }

    fn max_datagram(&self) -> usize {
        self.inner.max_datagram()
    }

    fn max_datagram_to(&self, peer: Rank) -> usize {
        self.inner.max_datagram_to(peer)
    }

    fn prepare_sleep(&mut self) -> bool {
        self.inner.prepare_sleep()
    }

    fn stats(&self) -> TransportStats {
        let mut s = self.inner.stats();
        s.faults_dropped += self.dropped;
        s.faults_duplicated += self.duplicated;
        s.faults_reordered += self.reordered;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what reaches the "wire".
    #[derive(Default)]
    struct Log {
        sent: Vec<(Rank, Vec<u8>)>,
        /// Pretend to have a multicast group.
        group: bool,
        multicasts: Vec<Vec<Rank>>,
    }

    impl Transport for Log {
        fn multicast_available(&self) -> bool {
            self.group
        }
        fn send_multicast(&mut self, d: &[u8], targets: &[Rank]) -> std::io::Result<bool> {
            if self.group {
                self.multicasts.push(targets.to_vec());
                Ok(true)
            } else {
                Ok(self.multi_send(d, targets)? == targets.len())
            }
        }
        fn send_to(&mut self, peer: Rank, d: &[u8]) -> std::io::Result<bool> {
            self.sent.push((peer, d.to_vec()));
            Ok(true)
        }
        fn recv_batch(&mut self, _: &mut dyn FnMut(SocketAddrV4, &[u8])) -> std::io::Result<usize> {
            Ok(0)
        }
        fn fds(&self) -> Vec<RawFd> {
            Vec::new()
        }
        fn next_deadline(&self) -> Option<u64> {
            None
        }
        fn service(&mut self, _: u64) -> std::io::Result<()> {
            Ok(())
        }
        fn max_datagram(&self) -> usize {
            1000
        }
        fn stats(&self) -> TransportStats {
            TransportStats::default()
        }
    }

    fn cfg(s: &str) -> FaultConfig {
        FaultConfig::parse(s).unwrap()
    }

    #[test]
    fn delay_is_bounded() {
        assert_eq!(cfg("delay_us=10000000").delay_us, MAX_DELAY_US);
        for bad in ["delay_us=10000001", "delay_us=18446744073709551615"] {
            let e = FaultConfig::parse(bad).unwrap_err();
            assert!(matches!(e, FaultParseError::DelayOutOfRange { .. }), "{e}");
            assert!(e.to_string().contains("delay_us"), "{e}");
        }
        let e = FaultConfig::parse("delay_us=1e308").unwrap_err();
        assert!(e.to_string().contains("delay_us"), "{e}");
    }

    #[test]
    fn reorder_swaps_with_next() {
        // reorder close to 1: the first is held, the second goes out first.
        let mut f = Faulty::new(Log::default(), cfg("reorder=0.999999,seed=1"), 0);
        f.send_to(0, &[1]).unwrap();
        assert!(f.inner().sent.is_empty());
        assert!(f.next_deadline().is_some());
        f.send_to(0, &[2]).unwrap();
        let order: Vec<u8> = f.inner().sent.iter().map(|(_, d)| d[0]).collect();
        assert_eq!(order, vec![2, 1]);
        assert_eq!(f.stats().faults_reordered, 1);
    }

    #[test]
    fn held_released_by_service() {
        let mut f = Faulty::new(Log::default(), cfg("reorder=0.999999"), 3);
        f.send_to(1, &[9]).unwrap();
        let t0 = 1_000_000;
        assert!(f.next_deadline().unwrap() <= t0);
        f.service(t0).unwrap(); // stamps
        assert_eq!(f.next_deadline(), Some(t0 + REORDER_HOLD_NS));
        f.service(t0 + REORDER_HOLD_NS - 1).unwrap();
        assert!(f.inner().sent.is_empty());
        f.service(t0 + REORDER_HOLD_NS).unwrap();
        assert_eq!(f.inner().sent, vec![(1, vec![9])]);
        assert_eq!(f.next_deadline(), None);
    }

    #[test]
    fn delay_queues_in_order() {
        let mut f = Faulty::new(Log::default(), cfg("delay_us=50"), 0);
        f.send_to(0, &[1]).unwrap();
        f.send_to(0, &[2]).unwrap();
        assert!(f.inner().sent.is_empty());
        f.service(10).unwrap();
        assert_eq!(f.next_deadline(), Some(10 + 50_000));
        f.service(10 + 50_000).unwrap();
        let order: Vec<u8> = f.inner().sent.iter().map(|(_, d)| d[0]).collect();
        assert_eq!(order, vec![1, 2]);
    }

    #[test]
    fn oversize_rejected() {
        let mut f = Faulty::new(Log::default(), FaultConfig::default(), 0);
        assert!(f.send_to(0, &[0u8; 1001]).is_err());
    }

    #[test]
    fn fanout_gets_a_fate_per_receiver() {
        let targets: Vec<Rank> = (0..400).collect();
        let mut f = Faulty::new(Log::default(), cfg("loss=0.5,dup=0.1,seed=3"), 0);
        assert!(f.send_multicast(&[7], &targets).unwrap());
        let s = f.stats();
        let got = f.inner().sent.len() as u64;
        assert!((100..300).contains(&s.faults_dropped), "{s:?}");
        assert_eq!(got, 400 - s.faults_dropped + s.faults_duplicated);
        assert!(f.inner().multicasts.is_empty());
        // multi_send likewise, and reports every destination as handed off.
        let mut f = Faulty::new(Log::default(), cfg("loss=0.5,seed=4"), 0);
        assert_eq!(f.multi_send(&[1], &targets).unwrap(), 400);
        assert_eq!(f.inner().sent.len() as u64, 400 - f.stats().faults_dropped);
    }

    #[test]
    fn real_multicast_gets_one_fate() {
        let log = Log {
            group: true,
            ..Log::default()
        };
        let targets: Vec<Rank> = (0..8).collect();
        let mut f = Faulty::new(log, cfg("loss=0.5,seed=5"), 1);
        for _ in 0..200 {
            assert!(f.send_multicast(&[1], &targets).unwrap());
        }
        let m = &f.inner().multicasts;
        assert_eq!(m.len() as u64, 200 - f.stats().faults_dropped);
        assert!(m.iter().all(|t| *t == targets));
        assert!(f.inner().sent.is_empty());
    }

    #[test]
    fn ranks_get_different_streams() {
        assert_ne!(rank_seed(7, 0), rank_seed(7, 1));
        assert_eq!(rank_seed(7, 1), rank_seed(7, 1));
    }
}
