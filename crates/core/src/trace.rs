//! The timeline recorder behind `phalanx run --trace FILE` (`PHALANX_TRACE`): what this
//! rank did, as timestamped events in a bounded ring, shipped to the launcher at Finalize
//! (which aligns every rank's clock and writes one Chrome/Perfetto trace file).
//!
//! Contract:
//! * Off (the default), every instrumentation point costs one relaxed load and a branch
//!   ([`on`]): the C calls' [`call`] guard, a message sent ([`Engine`] send paths), a
//!   message's arrival, a collective's algorithm. The library's `tracing` events
//!   (retransmissions, dropped datagrams, warnings) go to a subscriber only when one is
//!   installed; with the trace on, [`layer`] records them into the same ring. (A
//!   `tracing` span per call was measured to cost the small-message path even when off,
//!   about 35 instructions a message, hence the plain hook for the hot points.)
//! * On, events go into one ring of [`capacity`] events per process (`PHALANX_TRACE_EVENTS`,
//!   default 131072): when full, the oldest are overwritten and counted ([`take`] returns
//!   the count; the launcher says it). Timestamps are `CLOCK_MONOTONIC` nanoseconds.
//! * Messages: the n-th point-to-point message this rank sends to a peer and the n-th
//!   that arrives here from a peer carry `n` (counted per pair, from 0, only while the
//!   trace is on); pairs deliver in order on every medium, so (source, destination, n)
//!   names one message at both ends — the launcher draws it as a flow.
//!
//! [`Engine`]: crate::engine::Engine

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static ON: AtomicBool = AtomicBool::new(false);

/// Whether the trace records (module docs).
#[inline(always)]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// What an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A library call (a C function, a blocking call of the Rust API): `name`, start,
    /// duration, `c` = bytes of the messages sent or arrived and of the collectives it ran
    /// while it lasted.
    Call = 0,
    /// A point-to-point message sent: `a` = destination, `b` = tag, `c` = bytes, `n`.
    Send = 1,
    /// A point-to-point message arrived: `a` = source, `b` = tag, `c` = bytes, `n`.
    Recv = 2,
    /// A collective call: `name` = kind, `detail` = algorithm, `a` = members, `c` = bytes.
    Coll = 3,
    /// A `tracing` event of the library (retransmissions, drops, warnings): `name` =
    /// its message, `detail` = its fields.
    Log = 4,
    /// A phase of a collective (a hierarchical one's host and leader phases): `name`,
    /// start and duration.
    Phase = 5,
}

/// One recorded event.
#[derive(Debug, Clone)]
pub struct Event {
    /// Start, `CLOCK_MONOTONIC` ns.
    pub ts: u64,
    /// Duration in ns (0: an instant).
    pub dur: u64,
    /// What it is.
    pub kind: Kind,
    /// Its name (a C function's, a collective kind's, a log message).
    pub name: Cow<'static, str>,
    /// More text (an algorithm, a log event's fields).
    pub detail: Cow<'static, str>,
    /// Numbers by kind (see [`Kind`]).
    pub a: u64,
    /// Numbers by kind.
    pub b: u64,
    /// Numbers by kind.
    pub c: u64,
    /// The message's number within its pair (sends and arrivals).
    pub n: u64,
    /// The recording thread (kernel thread id).
    pub tid: u32,
}

impl Event {
    fn empty() -> Event {
        Event {
            ts: 0,
            dur: 0,
            kind: Kind::Log,
            name: Cow::Borrowed(""),
            detail: Cow::Borrowed(""),
            a: 0,
            b: 0,
            c: 0,
            n: 0,
            tid: 0,
        }
    }
}

/// Events kept when `PHALANX_TRACE_EVENTS` does not say.
pub const DEFAULT_CAPACITY: usize = 1 << 17;
/// Most events a ring may be asked to keep.
pub const MAX_CAPACITY: usize = 1 << 22;

struct Ring {
    /// `cap` slots, the first `len` recorded.
    buf: Vec<Event>,
    len: usize,
    cap: usize,
    /// Next slot to overwrite once full.
    next: usize,
    lost: u64,
}

static RING: Mutex<Option<Ring>> = Mutex::new(None);

/// Starts recording into a ring of `cap` events (clamped to 1..=[`MAX_CAPACITY`]). The
/// ring is allocated and touched whole now, so recording never allocates or faults a
/// page in.
pub fn start(cap: usize) {
    let cap = cap.clamp(1, MAX_CAPACITY);
    let mut buf = Vec::with_capacity(cap);
    buf.resize_with(cap, Event::empty);
    let mut r = RING.lock().unwrap_or_else(|e| e.into_inner());
    *r = Some(Ring {
        buf,
        len: 0,
        cap,
        next: 0,
        lost: 0,
    });
    ON.store(true, Ordering::Relaxed);
}

/// Stops recording and returns the events in order of recording, with how many older
/// ones the ring overwrote.
pub fn take() -> (Vec<Event>, u64) {
    ON.store(false, Ordering::Relaxed);
    let mut r = RING.lock().unwrap_or_else(|e| e.into_inner());
    match r.take() {
        None => (Vec::new(), 0),
        Some(mut ring) => {
            ring.buf.truncate(ring.len);
            ring.buf.rotate_left(ring.next);
            (ring.buf, ring.lost)
        }
    }
}

/// Records `e` (nothing when the trace is off).
#[cold]
pub fn record(e: Event) {
    let mut r = RING.lock().unwrap_or_else(|e| e.into_inner());
    let Some(ring) = r.as_mut() else {
        return;
    };
    if ring.len < ring.cap {
        ring.buf[ring.len] = e;
        ring.len += 1;
    } else {
        ring.buf[ring.next] = e;
        ring.next = (ring.next + 1) % ring.cap;
        ring.lost += 1;
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (the trace's clock, also the launcher's).
#[inline]
pub fn now_ns() -> u64 {
    phalanx_boot::monotonic_ns()
}

thread_local! {
    /// Calls of this thread in progress on the timeline (only the outermost is a slice:
    /// a C call's inner Rust call is not one of its own).
    static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Bytes of the messages and collectives of the call in progress (its slice's size).
    static BYTES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static TID: u32 = {
        // SAFETY: gettid(2) takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) as u32 }
    };
}

/// The calling thread's kernel id.
pub fn tid() -> u32 {
    TID.with(|t| *t)
}

/// An event of `kind` now, with the numbers given.
#[cold]
pub fn instant(kind: Kind, name: &'static str, detail: &'static str, abc: [u64; 3], n: u64) {
    if matches!(kind, Kind::Send | Kind::Recv | Kind::Coll) {
        note_bytes(abc[2]);
    }
    record(Event {
        ts: now_ns(),
        dur: 0,
        kind,
        name: Cow::Borrowed(name),
        detail: Cow::Borrowed(detail),
        a: abc[0],
        b: abc[1],
        c: abc[2],
        n,
        tid: tid(),
    });
}

/// A library call in progress: recorded with its duration when dropped (module docs).
pub struct CallGuard {
    start: u64,
    name: &'static str,
}

/// Marks the start of the call `name` (its end is the guard's drop); inside another
/// recorded call, nothing.
#[inline(always)]
pub fn call(name: &'static str) -> CallGuard {
    CallGuard {
        start: if on() { begin_call() } else { 0 },
        name,
    }
}

#[cold]
fn begin_call() -> u64 {
    let outer = DEPTH.with(|d| {
        let v = d.get();
        d.set(v + 1);
        v == 0
    });
    if outer {
        BYTES.with(|b| b.set(0));
        now_ns()
    } else {
        // Nested: counted (so the outer call's end is found) but not recorded.
        1
    }
}

impl Drop for CallGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.start != 0 {
            finish_call(self.start, self.name);
        }
    }
}

#[cold]
fn finish_call(start: u64, name: &'static str) {
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    if start != 1 {
        let bytes = BYTES.with(|b| b.replace(0));
        slice(Kind::Call, start, name, bytes);
    }
}

/// Adds `n` to the size of the calling thread's call in progress.
fn note_bytes(n: u64) {
    BYTES.with(|b| b.set(b.get().saturating_add(n)));
}

/// Records a slice of `kind` named `name` from `start` to now (`c`: its bytes).
fn slice(kind: Kind, start: u64, name: &'static str, c: u64) {
    let end = now_ns();
    record(Event {
        ts: start,
        dur: end.saturating_sub(start),
        kind,
        name: Cow::Borrowed(name),
        detail: Cow::Borrowed(""),
        a: 0,
        b: 0,
        c,
        n: 0,
        tid: tid(),
    });
}

/// A phase of a collective in progress: recorded with its duration when dropped.
pub struct PhaseGuard {
    start: u64,
    name: &'static str,
}

/// Marks the start of the phase `name` (inside calls too, unlike [`call`]).
#[inline(always)]
pub fn phase(name: &'static str) -> PhaseGuard {
    PhaseGuard {
        start: if on() { now_ns() } else { 0 },
        name,
    }
}

impl Drop for PhaseGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.start != 0 {
            finish_phase(self.start, self.name);
        }
    }
}

#[cold]
fn finish_phase(start: u64, name: &'static str) {
    slice(Kind::Phase, start, name, 0);
}

/// Per-peer message numbers of this rank (module docs), and which peers' links are
/// stalled (no room for the next datagram), kept by the engine.
#[derive(Default)]
pub(crate) struct Numbers {
    sent: Vec<u64>,
    arrived: Vec<u64>,
    stalled: Vec<bool>,
}

impl Numbers {
    fn bump(v: &mut Vec<u64>, peer: u32) -> u64 {
        let i = peer as usize;
        if v.len() <= i {
            v.resize(i + 1, 0);
        }
        let n = v[i];
        v[i] += 1;
        n
    }

    /// A message to `peer` of `bytes` on `tag` left: recorded with its number.
    #[cold]
    pub(crate) fn sent(&mut self, peer: u32, tag: i32, bytes: u64) {
        let n = Self::bump(&mut self.sent, peer);
        instant(Kind::Send, "send", "", [peer.into(), tag as u64, bytes], n);
    }

    /// Whether the link to `peer` has room now: a stall's start and end are recorded
    /// (instants: a stall may span calls), nothing while it lasts.
    #[cold]
    pub(crate) fn stalled(&mut self, peer: u32, why: &'static str, stalled: bool) {
        let i = peer as usize;
        if self.stalled.len() <= i {
            if !stalled {
                return;
            }
            self.stalled.resize(i + 1, false);
        }
        if self.stalled[i] != stalled {
            self.stalled[i] = stalled;
            let name = if stalled {
                "stall begins"
            } else {
                "stall ends"
            };
            instant(Kind::Log, name, why, [peer.into(), 0, 0], 0);
        }
    }

    /// A message from `peer` arrived: recorded with its number.
    #[cold]
    pub(crate) fn arrived(&mut self, peer: u32, tag: i32, bytes: u64) {
        let n = Self::bump(&mut self.arrived, peer);
        instant(Kind::Recv, "recv", "", [peer.into(), tag as u64, bytes], n);
    }
}

/// Shortens `s` to at most `max` bytes, at a character boundary.
fn cut(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// The `tracing` layer that records the library's events into the ring while the trace
/// is on (module docs).
pub struct Layer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Layer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        // Collectives are recorded by their own hook, without formatting.
        if !on() || event.metadata().fields().field("algorithm").is_some() {
            return;
        }
        struct Fields {
            message: String,
            rest: String,
        }
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                use std::fmt::Write;
                if f.name() == "message" {
                    let _ = write!(self.message, "{v:?}");
                } else if self.rest.len() < 200 {
                    let _ = write!(
                        self.rest,
                        "{}{}={v:?}",
                        if self.rest.is_empty() { "" } else { " " },
                        f.name()
                    );
                }
            }
        }
        let mut f = Fields {
            message: String::new(),
            rest: String::new(),
        };
        event.record(&mut f);
        cut(&mut f.message, 200);
        cut(&mut f.rest, 240);
        record(Event {
            ts: now_ns(),
            dur: 0,
            kind: Kind::Log,
            name: Cow::Owned(f.message),
            detail: Cow::Owned(f.rest),
            a: 0,
            b: 0,
            c: 0,
            n: 0,
            tid: tid(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_boundary() {
        let mut s = "é".repeat(150);
        cut(&mut s, 201);
        assert_eq!(s.len(), 200);
        let mut t = String::from("short");
        cut(&mut t, 200);
        assert_eq!(t, "short");
    }

    #[test]
    fn the_ring_keeps_the_newest_and_counts_the_rest() {
        start(3);
        for i in 0..5u64 {
            instant(Kind::Send, "send", "", [i, 0, 0], i);
        }
        let outer = call("MPI_Test");
        drop(call("test"));
        drop(outer);
        let (events, lost) = take();
        assert!(!on());
        assert_eq!(lost, 3);
        let names: Vec<_> = events.iter().map(|e| (e.kind, e.a)).collect();
        assert_eq!(names, [(Kind::Send, 3), (Kind::Send, 4), (Kind::Call, 0)]);
        assert_eq!((events[0].n, events[2].name.as_ref()), (3, "MPI_Test"));
        // Off: nothing is recorded.
        instant(Kind::Send, "send", "", [0; 3], 0);
        assert_eq!(take().0.len(), 0);
    }
}
