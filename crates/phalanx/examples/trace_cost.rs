//! What the timeline recorder costs per event (`phalanx::trace`), in one process, no
//! launcher: a million instants (a message's send or arrival), then a million call
//! slices (two clock reads each), into a ring of 131072 events. Prints ns per event.
//!
//! Usage: `cargo run --release -p phalanx --example trace_cost`.
use phalanx::trace;

fn main() {
    const N: u64 = 1_000_000;
    trace::start(trace::DEFAULT_CAPACITY);
    let t = std::time::Instant::now();
    for i in 0..N {
        trace::instant(trace::Kind::Send, "send", "", [1, 2, 3], i);
    }
    let instant = t.elapsed().as_nanos() as f64 / N as f64;
    let t = std::time::Instant::now();
    for _ in 0..N {
        drop(trace::call("MPI_Send"));
    }
    let call = t.elapsed().as_nanos() as f64 / N as f64;
    let (kept, lost) = trace::take();
    println!(
        "trace_cost: instant {instant:.1} ns per event, call slice {call:.1} ns \
         ({} kept, {lost} overwritten)",
        kept.len()
    );
}
