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
//! * The file: `X` slices for library calls (name, duration, the bytes their messages and
//!   collectives moved) and for each message's send
//!   and arrival (peer, tag, bytes in `args`), `i` instants for collectives (algorithm,
//!   members, bytes) and the library's log events (retransmissions, drops, warnings) and
//!   the launcher's events; each point-to-point message is a flow (`s` at its send, `f`
//!   at its arrival, `bp: e`) whose id names (source, destination, number) — only when
//!   both ends were recorded. Events are written per track (process, thread) in time
//!   order; timestamps are microseconds from the launcher's start.
//! * A file that cannot be written is reported on stderr; the job's exit code stays.

use phalanx_boot::{TraceChunk, TraceEvent};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::PathBuf;

/// Events kept per rank (a rank's ring is at most this large, usually far smaller).
pub const MAX_EVENTS_PER_RANK: usize = 1 << 22;
/// Events kept for the whole job (a few hundred bytes each in the launcher's memory).
pub const MAX_EVENTS: usize = 1 << 22;
/// Launcher events kept.
const MAX_LAUNCHER_EVENTS: usize = 1 << 16;

/// Event kinds on the wire (`phalanx::trace::Kind`).
const CALL: u8 = 0;
const SEND: u8 = 1;
const RECV: u8 = 2;
const COLL: u8 = 3;
const LOG: u8 = 4;
const PHASE: u8 = 5;

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
            eprintln!(
                "phalanx: trace: ranks {missing:?} sent no (complete) trace: they did not reach \
                 Finalize"
            );
        }
        let written = std::fs::File::create(&self.path).and_then(|f| {
            let mut w = std::io::BufWriter::new(f);
            self.write_to(&mut w)?;
            w.flush()
        });
        if let Err(e) = written {
            eprintln!("phalanx: trace: cannot write {}: {e}", self.path.display());
        }
    }

    /// The trace-event document, parsed (tests).
    #[cfg(test)]
    pub fn document(&self) -> Value {
        let mut out = Vec::new();
        self.write_to(&mut out).expect("to memory");
        serde_json::from_slice(&out).expect("valid JSON")
    }

    /// Writes the trace-event document (module docs) one event at a time: the launcher
    /// holds the events once, plus a 24-byte entry per event for the ordering.
    fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        // Flows: only for messages whose both ends are here.
        let mut sends: HashSet<(u64, u64, u64)> = HashSet::new();
        let mut arrivals: HashSet<(u64, u64, u64)> = HashSet::new();
        for (r, t) in self.ranks.iter().enumerate() {
            for e in &t.events {
                match e.2 {
                    SEND => {
                        sends.insert((r as u64, e.5, e.8));
                    }
                    RECV => {
                        arrivals.insert((e.5, r as u64, e.8));
                    }
                    _ => {}
                }
            }
        }
        // Per track (pid, tid), what goes on it, sorted below.
        let mut tracks: BTreeMap<(u64, u64), Vec<Placed>> = BTreeMap::new();
        for (r, t) in self.ranks.iter().enumerate() {
            let off = self.offset(r);
            for (i, e) in t.events.iter().enumerate() {
                let ts = self.us(i128::from(e.0) + off);
                let track = tracks.entry((r as u64, u64::from(e.9))).or_default();
                let at = Ref::Rank(r as u32, i as u32);
                // Longer first at one timestamp: a parent before its children.
                track.push(Placed(ts, -(e.1 as f64), at));
                if matches!(e.2, SEND | RECV) {
                    let (src, dst) = if e.2 == SEND {
                        (r as u64, e.5)
                    } else {
                        (e.5, r as u64)
                    };
                    if sends.contains(&(src, dst, e.8)) && arrivals.contains(&(src, dst, e.8)) {
                        // After its slice at the same timestamp.
                        track.push(Placed(ts, f64::INFINITY, Ref::Flow(r as u32, i as u32)));
                    }
                }
            }
        }
        let lpid = self.ranks.len() as u64;
        let launcher = tracks.entry((lpid, 0)).or_default();
        for (i, (ns, _)) in self.launcher.iter().enumerate() {
            launcher.push(Placed(
                self.us(i128::from(*ns)),
                0.0,
                Ref::Launcher(i as u32),
            ));
        }
        w.write_all(b"{\"traceEvents\":[\n")?;
        let mut first = true;
        let mut put = |w: &mut dyn Write, v: &Value| -> std::io::Result<()> {
            if !first {
                w.write_all(b",\n")?;
            }
            first = false;
            serde_json::to_writer(&mut *w, v).map_err(std::io::Error::other)
        };
        for r in 0..=self.ranks.len() {
            let name = if r < self.ranks.len() {
                format!("rank {r}")
            } else {
                "launcher".into()
            };
            put(
                w,
                &json!({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                "args": {"name": name}}),
            )?;
            put(
                w,
                &json!({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0,
                "args": {"sort_index": r}}),
            )?;
        }
        for ((pid, tid), mut placed) in tracks {
            placed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            for Placed(ts, _, at) in placed {
                put(w, &self.event(pid, tid, ts, at))?;
            }
        }
        let lost: u64 = self.ranks.iter().map(|t| t.lost + t.cut).sum();
        let other = json!({
            "producer": "phalanx run --trace",
            "ranks": self.ranks.len(),
            "events_lost": lost,
            "hosts": self.ranks.iter().map(|t| t.host.clone()).collect::<Vec<_>>(),
        });
        write!(w, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{other}}}")
    }

    /// Microseconds since the launcher started of launcher-clock `ns`.
    fn us(&self, ns: i128) -> f64 {
        (ns - i128::from(self.start)) as f64 / 1000.0
    }

    /// One event of the document.
    fn event(&self, pid: u64, tid: u64, ts: f64, at: Ref) -> Value {
        let (r, i, flow) = match at {
            Ref::Launcher(i) => {
                let what = &self.launcher[i as usize].1;
                return json!({"ph": "i", "s": "p", "name": what, "cat": "launcher",
                    "ts": ts, "pid": pid, "tid": tid});
            }
            Ref::Rank(r, i) => (r, i, false),
            Ref::Flow(r, i) => (r, i, true),
        };
        let e = &self.ranks[r as usize].events[i as usize];
        let dur = e.1 as f64 / 1000.0;
        let tag = e.6 as i64 as i32;
        match e.2 {
            SEND | RECV if flow => {
                let send = e.2 == SEND;
                let (src, dst) = if send { (pid, e.5) } else { (e.5, pid) };
                let id = flow_id(src, dst, e.8);
                let ph = if send { "s" } else { "f" };
                let mut v = json!({"ph": ph, "name": "message", "cat": "message", "id": id,
                    "ts": ts, "pid": pid, "tid": tid, "args": {"tag": tag, "bytes": e.7}});
                if !send {
                    v["bp"] = json!("e");
                }
                v
            }
            SEND | RECV => {
                let name = if e.2 == SEND {
                    format!("send → {}", e.5)
                } else {
                    format!("recv ← {}", e.5)
                };
                json!({"ph": "X", "name": name, "cat": "message", "ts": ts, "dur": 0.0,
                    "pid": pid, "tid": tid,
                    "args": {"peer": e.5, "tag": tag, "bytes": e.7, "n": e.8}})
            }
            CALL => json!({"ph": "X", "name": e.3, "cat": "call", "ts": ts, "dur": dur,
                "pid": pid, "tid": tid, "args": {"bytes": e.7}}),
            PHASE => json!({"ph": "X", "name": e.3, "cat": "phase", "ts": ts, "dur": dur,
                "pid": pid, "tid": tid}),
            COLL => json!({"ph": "i", "s": "t", "name": e.3, "cat": "collective", "ts": ts,
                "pid": pid, "tid": tid,
                "args": {"algorithm": e.4, "members": e.5, "bytes": e.7}}),
            LOG => json!({"ph": "i", "s": "t", "name": e.3, "cat": "log", "ts": ts,
                "pid": pid, "tid": tid, "args": {"fields": e.4, "value": e.5}}),
            // A kind this launcher does not know (a newer rank): an instant of its own.
            _ => json!({"ph": "i", "s": "t", "name": e.3, "cat": "other", "ts": ts,
                "pid": pid, "tid": tid, "args": {"fields": e.4}}),
        }
    }
}

/// The id of the flow of message `n` from `src` to `dst`: 16 + 16 + 21 bits, below 2^53
/// so that JavaScript viewers read it exactly (ranks past 65535 or more than 2^21
/// messages of one pair in one trace may share ids).
fn flow_id(src: u64, dst: u64, n: u64) -> u64 {
    ((src & 0xFFFF) << 37) | ((dst & 0xFFFF) << 21) | (n & 0x1F_FFFF)
}

/// What an entry of a track is.
#[derive(Clone, Copy)]
enum Ref {
    /// Event `i` of rank `r`.
    Rank(u32, u32),
    /// The flow end of event `i` of rank `r` (a send or an arrival).
    Flow(u32, u32),
    /// Launcher event `i`.
    Launcher(u32),
}

/// An entry of a track: timestamp (µs), order among equal timestamps, what it is.
struct Placed(f64, f64, Ref);

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
