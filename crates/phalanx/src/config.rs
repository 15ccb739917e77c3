//! Runtime configuration read once from the environment at initialization.
//!
//! Contract: every knob has a documented default; a malformed value is an
//! initialization error naming the variable, never silently ignored.

use crate::error::{Error, Result};
use std::time::Duration;

/// Tunables of one rank.
#[derive(Debug, Clone)]
pub struct Config {
    /// Largest message sent eagerly (bytes); longer ones use rendezvous. `PHALANX_EAGER_LIMIT`.
    pub eager_limit: Option<usize>,
    /// How long a blocking wait spins before sleeping in the kernel. `PHALANX_SPIN_US`
    /// (default 50 µs, or 0 when more local ranks than cores).
    pub spin: Option<Duration>,
    /// After spinning, how long a wait keeps polling while yielding the CPU to other
    /// processes before it sleeps. `PHALANX_YIELD_US` (default 2000).
    pub yield_time: Duration,
    /// Bound on Finalize's drain and release waits. `PHALANX_FINALIZE_TIMEOUT` (s, default 30).
    pub finalize_timeout: Duration,
    /// Print per-rank counters at exit. `PHALANX_STATS=1`.
    pub stats: bool,
    /// Bound on bytes held for unexpected (not yet received) messages.
    /// `PHALANX_UNEXPECTED_LIMIT` (bytes, default 256 MiB).
    pub unexpected_limit: usize,
    /// go-back-n send window in packets. `PHALANX_WINDOW` (default 128).
    pub window: u32,
    /// Acknowledge every packet at once. `PHALANX_EAGER_ACK=1`.
    pub eager_ack: bool,
    /// Retransmission back-off clamp. `PHALANX_RTO_MAX_MS` (default 100).
    pub rto_max: Duration,
    /// Time without acknowledgement progress after which a peer is declared
    /// unresponsive (an error naming it). `PHALANX_PEER_TIMEOUT` (s, default 300).
    pub peer_timeout: Duration,
    /// Address the rank's UDP socket binds to. `PHALANX_IP` (default 127.0.0.1; `auto` =
    /// the first non-loopback interface that is up, as inside a test-host namespace).
    pub ip: std::net::Ipv4Addr,
    /// Collective algorithms forced by `PHALANX_COLL_<NAME>` (and the all-gather's k).
    pub coll: crate::coll::algorithm::Choices,
    /// Level of the diagnostics printed to stderr when the program installed no
    /// `tracing` subscriber. `PHALANX_LOG` (default `warn`).
    pub log: tracing::level_filters::LevelFilter,
}

fn var<T: std::str::FromStr>(name: &str) -> Result<Option<T>> {
    match std::env::var(name) {
        Ok(s) if !s.trim().is_empty() => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::Init(format!("{name}={s:?} is not a valid value"))),
        _ => Ok(None),
    }
}

fn secs(name: &str, default: f64) -> Result<Duration> {
    let v: f64 = var(name)?.unwrap_or(default);
    Duration::try_from_secs_f64(v)
        .map_err(|_| Error::Init(format!("{name}={v} is not a valid number of seconds")))
}

fn flag(name: &str) -> bool {
    matches!(
        std::env::var(name).as_deref(),
        Ok("1") | Ok("true") | Ok("yes")
    )
}

impl Config {
    /// Reads the configuration from the environment.
    pub fn from_env() -> Result<Config> {
        Ok(Config {
            eager_limit: var("PHALANX_EAGER_LIMIT")?,
            spin: var::<u64>("PHALANX_SPIN_US")?.map(Duration::from_micros),
            yield_time: Duration::from_micros(var("PHALANX_YIELD_US")?.unwrap_or(2000)),
            finalize_timeout: secs("PHALANX_FINALIZE_TIMEOUT", 30.0)?,
            stats: flag("PHALANX_STATS"),
            unexpected_limit: var("PHALANX_UNEXPECTED_LIMIT")?.unwrap_or(256 << 20),
            window: var("PHALANX_WINDOW")?.unwrap_or(128).max(1),
            eager_ack: flag("PHALANX_EAGER_ACK"),
            rto_max: Duration::from_millis(var("PHALANX_RTO_MAX_MS")?.unwrap_or(100)),
            peer_timeout: secs("PHALANX_PEER_TIMEOUT", 300.0)?,
            ip: phalanx_transport::resolve_bind_ip(std::env::var("PHALANX_IP").ok().as_deref())
                .map_err(|e| Error::Init(format!("PHALANX_IP: {e}")))?,
            coll: crate::coll::algorithm::Choices::from_env().map_err(Error::Init)?,
            log: crate::log::level_from_env()?,
        })
    }
}
