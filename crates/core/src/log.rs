//! Diagnostics through `tracing`.
//!
//! Contract: every diagnostic the library emits is a `tracing` event — warnings
//! (`warn!`: multicast or the packet filter unavailable, a failed send, Finalize giving
//! up on peers) and, at finer levels, the instrumentation points: a `debug` event per
//! collective call with the algorithm it runs, and `debug` events for retransmissions
//! and for every dropped datagram with its reason. (A span per core call measurably
//! cost the small-message path even when off — about 35 instructions a message — so the
//! timeline work will record calls through its own hook.) Fatal errors that end the
//! process are written to stderr directly, so they show whatever the level. The
//! statistics table (`PHALANX_STATS=1`) is output, not a diagnostic, and stays on stderr
//! as it was.
//!
//! If the program installed no global subscriber, initialization installs one that
//! prints events at or above `PHALANX_LOG` (`off`, `error`, `warn` — the default —,
//! `info`, `debug`, `trace`) to stderr, one line each, the message first. A program with
//! its own subscriber (a timeline recorder, say) gets every event there instead. With
//! the level below an event's, the event costs one load and one branch: nothing
//! measurable on the hot path.

use crate::error::{Error, Result};
use tracing::level_filters::LevelFilter;

/// Parses the value of `PHALANX_LOG` (empty: `warn`; [`crate::config`] reads it); a bad
/// value is an error naming the variable.
pub(crate) fn parse_level(v: &str) -> Result<LevelFilter> {
    match v {
        v if v.trim().is_empty() => Ok(LevelFilter::WARN),
        v => v.trim().parse::<LevelFilter>().map_err(|_| {
            Error::Init(format!(
                "PHALANX_LOG={v:?}: not a level (off, error, warn, info, debug, trace)"
            ))
        }),
    }
}

/// Installs the stderr subscriber at `level` unless a global one is already set; with
/// `trace`, also the timeline's layer ([`crate::trace::Layer`]), which takes events up to
/// `debug` while the stderr printer keeps to `level`.
pub(crate) fn install_default(level: LevelFilter, trace: bool) {
    if tracing::dispatcher::has_been_set() {
        return;
    }
    if trace {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::Layer;
        let printer = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .with_level(false)
            .with_filter(level);
        let subscriber = tracing_subscriber::registry()
            .with(printer)
            .with(crate::trace::Layer.with_filter(LevelFilter::DEBUG));
        let _ = tracing::subscriber::set_global_default(subscriber);
        return;
    }
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .with_level(false)
        .with_max_level(level)
        .finish();
    // Another thread may have won the race: theirs stays.
    let _ = tracing::subscriber::set_global_default(subscriber);
}
