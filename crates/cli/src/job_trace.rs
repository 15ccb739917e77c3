//! `phalanx run --trace FILE` (or `PHALANX_TRACE=FILE`): the job's timeline as one
//! Chrome trace-event file that Perfetto's UI (ui.perfetto.dev) and `chrome://tracing`
//! open — every rank a process, the launcher one more.
//!
//! Contract:
//! * Ranks record into a bounded ring ([`phalanx::trace`] in the library) and send it at
//!   Finalize ([`phalanx_boot::TraceChunk`]); the launcher keeps at most
//!   [`MAX_EVENTS_PER_RANK`] events of each and says what was lost (the rank's ring
//!   overwrote its oldest, or the launcher's bound cut the newest).
//! * Clocks: every event is `CLOCK_MONOTONIC`. A rank on the launcher's kernel (this
//!   machine and its test hosts: the same boot id) shares the launcher's clock exactly.
//!   Another host's offset is estimated from the clock it sent with its hello and with
//!   each part of its trace, against the launcher's clock at their arrival: the smallest
//!   estimate wins (a message's delay only ever adds), so it is late by at most the
//!   fastest of those one-way delays.
//! * The file: `X` slices for library calls (name, duration) and for each message's send
//!   and arrival (peer, tag, bytes in `args`), `i` instants for collectives (algorithm,
//!   members, bytes) and the library's log events (retransmissions, drops, warnings) and
//!   the launcher's events; each point-to-point message is a flow (`s` at its send, `f`
//!   at its arrival, `bp: e`) whose id names (source, destination, number) — only when
//!   both ends were recorded. Events are written per track (process, thread) in time
//!   order; timestamps are microseconds from the launcher's start.
//! * A file that cannot be written is reported on stderr; the job's exit code stays.

use phalanx_boot::{TraceChunk, TraceEvent};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// Events kept per rank (a rank's ring is at most this large, usually far smaller).
pub const MAX_EVENTS_PER_RANK: usize = 1 << 22;
/// Events kept for the whole job (a few hundred bytes each in the launcher's memory).
pub const MAX_EVENTS: usize = 1 << 23;
/// Launcher events kept.
const MAX_LAUNCHER_EVENTS: usize = 1 << 16;

/// Event kinds on the wire (`phalanx::trace::Kind`).
const CALL: u8 = 0;
const SEND: u8 = 1;
const RECV: u8 = 2;
const COLL: u8 = 3;
const LOG: u8 = 4;
const PHASE: u8 = 5;

/// An event on its track: timestamp, order among equal timestamps, the event.
type Placed = (f64, f64, Value);

#[derive(Default)]
struct RankTrace {
    events: Vec<TraceEvent>,
    /// Overwritten in the rank's ring.
    lost: u64,
    /// Cut here for [`MAX_EVENTS_PER_RANK`].
    cut: u64,
    /// Smallest (launcher clock − rank clock) seen; None = not measured.
    offset: Option<i128>,
    /// The rank runs on the launcher's kernel.
    same_clock: bool,
    host: String,
    done: bool,
}

/// The job's timeline as the launcher gathers it.
pub struct Timeline {
    path: PathBuf,
    /// Events kept so far, every rank.
    kept: usize,
    start: u64,
    boot_id: String,
    ranks: Vec<RankTrace>,
    launcher: Vec<(u64, String)>,
}

impl Timeline {
    /// A timeline of `size` ranks, written to `path` at the end.
    pub fn new(path: PathBuf, size: usize) -> Timeline {
        let boot_id = phalanx_boot::HostInfo::current().boot_id;
        let mut t = Timeline {
            path,
            kept: 0,
            start: phalanx_boot::monotonic_ns(),
            boot_id,
            ranks: (0..size).map(|_| RankTrace::default()).collect(),
            launcher: Vec::new(),
        };
        t.mark("launcher started");
        t
    }

    fn rank(&mut self, r: usize) -> &mut RankTrace {
        if self.ranks.len() <= r {
            self.ranks.resize_with(r + 1, RankTrace::default);
        }
        &mut self.ranks[r]
    }

    /// A launcher event now.
    pub fn mark(&mut self, what: impl Into<String>) {
        if self.launcher.len() < MAX_LAUNCHER_EVENTS {
            self.launcher
                .push((phalanx_boot::monotonic_ns(), what.into()));
        }
    }

    fn clock_sample(&mut self, r: usize, rank_clock: u64) {
        if rank_clock == 0 {
            return;
        }
        let here = phalanx_boot::monotonic_ns();
        let t = self.rank(r);
        let est = i128::from(here) - i128::from(rank_clock);
        t.offset = Some(t.offset.map_or(est, |o| o.min(est)));
    }

    /// Rank `r` said hello from `host` (its boot id) with its clock at sending.
    pub fn hello(&mut self, r: usize, boot_id: &str, netns: u64, clock_ns: u64) {
        let same = !boot_id.is_empty() && boot_id == self.boot_id;
        self.clock_sample(r, clock_ns);
        let t = self.rank(r);
        t.same_clock = same;
        t.host = format!("{}/{netns}", boot_id.chars().take(8).collect::<String>());
    }

    /// A part of rank `r`'s trace.
    pub fn chunk(&mut self, r: usize, c: TraceChunk) {
        self.clock_sample(r, c.clock_ns);
        let job_room = MAX_EVENTS.saturating_sub(self.kept);
        let t = self.rank(r);
        t.lost = c.lost;
        t.done |= c.last;
        let room = MAX_EVENTS_PER_RANK
            .saturating_sub(t.events.len())
            .min(job_room);
        let n = c.events.len();
        t.events.extend(c.events.into_iter().take(room));
        t.cut += n.saturating_sub(room) as u64;
        self.kept += n.min(room);
    }

    /// The offset to add to rank `r`'s clock for the launcher's.
    fn offset(&self, r: usize) -> i128 {
        let t = &self.ranks[r];
        if t.same_clock {
            0
        } else {
            t.offset.unwrap_or(0)
        }
    }

    /// Writes the file and says what was lost (module docs).
    pub fn write(&self) {
        for (r, t) in self.ranks.iter().enumerate() {
            if t.lost > 0 {
                eprintln!(
                    "phalanx: trace: rank {r}: its ring overwrote its {} oldest events \
                     (PHALANX_TRACE_EVENTS sets the ring's size)",
                    t.lost
                );
            }
            if t.cut > 0 {
                eprintln!(
                    "phalanx: trace: rank {r}: {} newest events dropped (more than {} events \
                     of a rank or {} of the job)",
                    t.cut, MAX_EVENTS_PER_RANK, MAX_EVENTS
                );
            }
        }
        let missing: Vec<usize> = (0..self.ranks.len())
            .filter(|&r| !self.ranks[r].done)
            .collect();
        if !missing.is_empty() {
            eprintln!("phalanx: trace: ranks {missing:?} sent no (complete) trace: they did not reach Finalize");
        }
        let doc = self.document();
        let text = match serde_json::to_string(&doc) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("phalanx: trace: cannot encode the trace: {e}");
                return;
            }
        };
        if let Err(e) = std::fs::write(&self.path, text) {
            eprintln!("phalanx: trace: cannot write {}: {e}", self.path.display());
        }
    }

    /// The trace-event document (module docs).
    pub fn document(&self) -> Value {
        let us = |ns: i128| (ns - i128::from(self.start)) as f64 / 1000.0;
        // Flows: only for messages whose both ends are here.
        let mut sends: HashMap<(u64, u64, u64), ()> = HashMap::new();
        let mut arrivals: HashMap<(u64, u64, u64), ()> = HashMap::new();
        for (r, t) in self.ranks.iter().enumerate() {
            for e in &t.events {
                match e.2 {
                    SEND => {
                        sends.insert((r as u64, e.5, e.8), ());
                    }
                    RECV => {
                        arrivals.insert((e.5, r as u64, e.8), ());
                    }
                    _ => {}
                }
            }
        }
        let flow_id = |src: u64, dst: u64, n: u64| -> u64 {
            ((src & 0xF_FFFF) << 44) | ((dst & 0xF_FFFF) << 24) | (n & 0xFF_FFFF)
        };
        // Per track (pid, tid): (ts, order key, event).
        let mut tracks: BTreeMap<(u64, u64), Vec<Placed>> = BTreeMap::new();
        let mut meta = Vec::new();
        for (r, t) in self.ranks.iter().enumerate() {
            let pid = r as u64;
            meta.push(
                json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                "args": {"name": format!("rank {r}")}}),
            );
            meta.push(
                json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                "args": {"sort_index": r}}),
            );
            let off = self.offset(r);
            for e in &t.events {
                let ts = us(i128::from(e.0) + off);
                let dur = e.1 as f64 / 1000.0;
                let tid = u64::from(e.9);
                let track = tracks.entry((pid, tid)).or_default();
                // Longer first at one timestamp: a parent before its children.
                let key = -dur;
                match e.2 {
                    CALL | PHASE => track.push((
                        ts,
                        key,
                        json!({"ph": "X", "name": e.3,
                            "cat": if e.2 == CALL { "call" } else { "phase" },
                        "ts": ts, "dur": dur, "pid": pid, "tid": tid}),
                    )),
                    SEND | RECV => {
                        let send = e.2 == SEND;
                        let (src, dst) = if send { (pid, e.5) } else { (e.5, pid) };
                        let name = if send {
                            format!("send → {}", e.5)
                        } else {
                            format!("recv ← {}", e.5)
                        };
                        track.push((ts, key, json!({"ph": "X", "name": name, "cat": "message",
                            "ts": ts, "dur": 0.0, "pid": pid, "tid": tid,
                            "args": {"peer": e.5, "tag": e.6 as i64 as i32, "bytes": e.7, "n": e.8}})));
                        let both = sends.contains_key(&(src, dst, e.8))
                            && arrivals.contains_key(&(src, dst, e.8));
                        if both {
                            let id = flow_id(src, dst, e.8);
                            let f = if send {
                                json!({"ph": "s", "name": "message", "cat": "message", "id": id,
                                    "ts": ts, "pid": pid, "tid": tid,
                                    "args": {"tag": e.6 as i64 as i32, "bytes": e.7}})
                            } else {
                                json!({"ph": "f", "bp": "e", "name": "message", "cat": "message",
                                    "id": id, "ts": ts, "pid": pid, "tid": tid,
                                    "args": {"tag": e.6 as i64 as i32, "bytes": e.7}})
                            };
                            // After its slice at the same timestamp.
                            track.push((ts, f64::INFINITY, f));
                        }
                    }
                    COLL => track.push((
                        ts,
                        key,
                        json!({"ph": "i", "s": "t", "name": e.3,
                        "cat": "collective", "ts": ts, "pid": pid, "tid": tid,
                        "args": {"algorithm": e.4, "members": e.5, "bytes": e.7}}),
                    )),
                    LOG => track.push((
                        ts,
                        key,
                        json!({"ph": "i", "s": "t", "name": e.3,
                        "cat": "log", "ts": ts, "pid": pid, "tid": tid,
                        "args": {"fields": e.4}}),
                    )),
                    _ => {}
                }
            }
        }
        let lpid = self.ranks.len() as u64;
        meta.push(
            json!({"ph": "M", "name": "process_name", "pid": lpid, "tid": 0,
            "args": {"name": "launcher"}}),
        );
        meta.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": lpid, "tid": 0,
            "args": {"sort_index": lpid}}),
        );
        let track = tracks.entry((lpid, 0)).or_default();
        for (ns, what) in &self.launcher {
            let ts = us(i128::from(*ns));
            track.push((
                ts,
                0.0,
                json!({"ph": "i", "s": "p", "name": what, "cat": "launcher",
                "ts": ts, "pid": lpid, "tid": 0}),
            ));
        }
        let mut events = meta;
        for (_, mut evs) in tracks {
            evs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            events.extend(evs.into_iter().map(|(_, _, v)| v));
        }
        let lost: u64 = self.ranks.iter().map(|t| t.lost + t.cut).sum();
        json!({
            "traceEvents": events,
            "displayTimeUnit": "ns",
            "otherData": {
                "producer": "phalanx run --trace",
                "ranks": self.ranks.len(),
                "events_lost": lost,
                "hosts": self.ranks.iter().map(|t| t.host.clone()).collect::<Vec<_>>(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, dur: u64, kind: u8, name: &str, a: u64, n: u64) -> TraceEvent {
        TraceEvent(ts, dur, kind, name.into(), String::new(), a, 7, 8, n, 1)
    }

    #[test]
    fn messages_become_flows_only_with_both_ends() {
        let mut t = Timeline::new(PathBuf::from("/nonexistent/x.json"), 2);
        let s = t.start;
        t.hello(0, &t.boot_id.clone(), 1, s);
        t.hello(1, &t.boot_id.clone(), 1, s);
        t.chunk(
            0,
            TraceChunk {
                events: vec![
                    ev(s + 1000, 5000, CALL, "MPI_Send", 0, 0),
                    ev(s + 2000, 0, SEND, "send", 1, 0),
                    ev(s + 3000, 0, SEND, "send", 1, 1),
                ],
                lost: 0,
                clock_ns: s,
                last: true,
            },
        );
        t.chunk(
            1,
            TraceChunk {
                events: vec![ev(s + 2500, 0, RECV, "recv", 0, 0)],
                lost: 0,
                clock_ns: s,
                last: true,
            },
        );
        let d = t.document();
        let evs = d["traceEvents"].as_array().unwrap();
        let flows: Vec<_> = evs
            .iter()
            .filter(|e| e["ph"] == "s" || e["ph"] == "f")
            .collect();
        // Message 0 has both ends; message 1 never arrived: no flow for it.
        assert_eq!(flows.len(), 2, "{flows:?}");
        assert_eq!(flows[0]["id"], flows[1]["id"]);
        let call = evs.iter().find(|e| e["name"] == "MPI_Send").unwrap();
        assert_eq!(
            (call["ts"].as_f64(), call["dur"].as_f64()),
            (Some(1.0), Some(5.0))
        );
        assert!(evs.iter().any(|e| e["name"] == "launcher started"));
    }

    #[test]
    fn another_kernels_clock_is_aligned_by_its_smallest_estimate() {
        let mut t = Timeline::new(PathBuf::from("/nonexistent/x.json"), 1);
        // The rank's clock runs 1 s behind; its hello took long, its trace part less.
        let now = phalanx_boot::monotonic_ns();
        t.hello(0, "another-kernel", 1, now - 1_000_000_000 - 5_000_000);
        assert!(t.offset(0) >= 1_005_000_000);
        t.clock_sample(0, phalanx_boot::monotonic_ns() - 1_000_000_000);
        let o = t.offset(0);
        assert!((1_000_000_000..1_005_000_000).contains(&o), "{o}");
    }
}
