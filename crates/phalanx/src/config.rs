//! Runtime configuration read once from the environment at initialization.
//!
//! Contract: this is the one place the library reads its `PHALANX_*` variables (the
//! launcher's own `PHALANX_RANK`/`PHALANX_SIZE`/`PHALANX_BOOT` belong to the start-up
//! protocol, `phalanx_boot`); the crates below it (transport, shared memory, protocols)
//! read none and take the parsed values from here. Every knob has a documented default;
//! a malformed value is an initialization error naming the variable, never silently
//! ignored.

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
    /// Communication memory of this job on each node (bytes), as the job manager hands
    /// it out: per peer a rank gets the credit C0 = budget / (local ranks × ranks)
    /// (seed 001) — its go-back-n window shrinks to C0 (at least one packet) and its
    /// host's shared-memory rings to the budget (at least 16 KiB each).
    /// `PHALANX_COMM_BUDGET` (bytes, `k`/`m`/`g` suffix; default: no limit).
    pub comm_budget: Option<usize>,
    /// Lock the shared-memory segment in memory while the job runs (unlocked while it
    /// is switched out by the job manager). `PHALANX_COMM_LOCK=1`; where locking is not
    /// permitted a warning says so once and the job runs unlocked.
    pub comm_lock: bool,
    /// Acknowledge every packet at once. `PHALANX_EAGER_ACK=1`.
    pub eager_ack: bool,
    /// Retransmission back-off clamp. `PHALANX_RTO_MAX_MS` (default 4: recovery at 30 %
    /// loss waits out clamped timers, so a clamp of 100 ms made an 8-rank Jacobi
    /// iteration 250 times slower than without loss).
    pub rto_max: Duration,
    /// Floor of the adaptive retransmission timeout (and its value before the first
    /// round-trip sample). `PHALANX_RTO_MIN_US` (default 2000).
    pub rto_min: Duration,
    /// Time without acknowledgement progress after which a peer is declared
    /// unresponsive (an error naming it). `PHALANX_PEER_TIMEOUT` (s, default 300).
    pub peer_timeout: Duration,
    /// Address the rank's UDP socket binds to. `PHALANX_IP` (default 127.0.0.1; `auto` =
    /// the first non-loopback interface that is up, as inside a test-host namespace).
    pub ip: std::net::Ipv4Addr,
    /// Collective algorithms forced by `PHALANX_COLL_<NAME>` (and the all-gather's k).
    pub coll: crate::coll::algorithm::Choices,
    /// The send/transmit/receive cost lines behind the broadcast trees' λ
    /// (`PHALANX_COST`, the host's cached figures, or the defaults).
    pub cost: crate::coll::cost::CostModel,
    /// Medium between ranks of one host. `PHALANX_TRANSPORT` (`auto`, `udp`, `shm`).
    pub transport: phalanx_transport::TransportKind,
    /// Injected faults, under the protocols: `auto` then takes UDP, `shm` runs the
    /// protocols over the rings. `PHALANX_FAULTS`.
    pub faults: Option<phalanx_transport::FaultConfig>,
    /// Multicast on or off and its group. `PHALANX_MCAST`, `PHALANX_MCAST_GROUP`.
    pub mcast: phalanx_transport::McastSetting,
    /// The per-rank kernel packet filter. `PHALANX_BPF` (default on).
    pub bpf: bool,
    /// Seal and check every UDP datagram with the job's MAC (`PHALANX_MAC`, default on;
    /// `0` only where every host and link of the job is trusted).
    pub mac: bool,
    /// Shared memory between the ranks of a host. `PHALANX_SHM_*`.
    pub shm: phalanx_shm::ShmConfig,
    /// The network is declared reliable: careful protocol on UDP. `PHALANX_RELIABLE_NET`.
    pub reliable_net: bool,
    /// Careful protocol: silence before "suspected loss". `PHALANX_CAREFUL_STALL`.
    pub careful_stall_ns: Option<u64>,
    /// CPUs the launcher spreads this host's ranks over (it binds each to one).
    /// `PHALANX_CPUS`; default: what this process may use.
    pub cpus: Option<usize>,
    /// Test hook: make this rank's shared-memory join fail (`R` or `R@MS`).
    /// `PHALANX_TEST_SHM_FAIL`.
    pub test_shm_fail: Option<String>,
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

/// The variable's text ("" when unset); not UTF-8 is an error naming it.
fn text(name: &str) -> Result<String> {
    match std::env::var(name) {
        Ok(v) => Ok(v),
        Err(std::env::VarError::NotPresent) => Ok(String::new()),
        Err(std::env::VarError::NotUnicode(v)) => {
            Err(Error::Init(format!("{name}={v:?} is not valid UTF-8")))
        }
    }
}

fn switch(name: &str, default: bool) -> Result<bool> {
    let v = text(name)?;
    phalanx_transport::parse_switch(name, Some(&v), default).map_err(Error::Init)
}

/// A size in bytes with an optional `k`, `m` or `g` suffix; unset or empty is `None`.
fn bytes(name: &str) -> Result<Option<usize>> {
    let v = text(name)?.trim().to_ascii_lowercase();
    if v.is_empty() {
        return Ok(None);
    }
    let (num, shift) = match v.as_bytes()[v.len() - 1] {
        b'k' => (&v[..v.len() - 1], 10),
        b'm' => (&v[..v.len() - 1], 20),
        b'g' => (&v[..v.len() - 1], 30),
        _ => (v.as_str(), 0),
    };
    num.trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .map(Some)
        .ok_or_else(|| Error::Init(format!("{name}={v:?} is not a positive size in bytes")))
}

impl Config {
    /// Reads the configuration from the environment.
    pub fn from_env() -> Result<Config> {
        Ok(Config {
            eager_limit: var("PHALANX_EAGER_LIMIT")?,
            spin: var::<u64>("PHALANX_SPIN_US")?.map(Duration::from_micros),
            yield_time: Duration::from_micros(var("PHALANX_YIELD_US")?.unwrap_or(2000)),
            finalize_timeout: secs("PHALANX_FINALIZE_TIMEOUT", 30.0)?,
            stats: switch("PHALANX_STATS", false)?,
            unexpected_limit: var("PHALANX_UNEXPECTED_LIMIT")?.unwrap_or(256 << 20),
            window: var("PHALANX_WINDOW")?.unwrap_or(128).max(1),
            comm_budget: bytes("PHALANX_COMM_BUDGET")?,
            comm_lock: switch("PHALANX_COMM_LOCK", false)?,
            eager_ack: switch("PHALANX_EAGER_ACK", false)?,
            rto_max: Duration::from_millis(var("PHALANX_RTO_MAX_MS")?.unwrap_or(4).max(1)),
            rto_min: Duration::from_micros(var("PHALANX_RTO_MIN_US")?.unwrap_or(2000).max(1)),
            peer_timeout: secs("PHALANX_PEER_TIMEOUT", 300.0)?,
            ip: phalanx_transport::resolve_bind_ip(std::env::var("PHALANX_IP").ok().as_deref())
                .map_err(|e| Error::Init(format!("PHALANX_IP: {e}")))?,
            coll: {
                let vars: Vec<(String, String)> = std::env::vars()
                    .filter(|(k, _)| k.starts_with("PHALANX_COLL_"))
                    .collect();
                crate::coll::algorithm::Choices::parse(
                    vars.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                )
                .map_err(Error::Init)?
            },
            cost: crate::coll::cost::from_env().map_err(Error::Init)?,
            log: crate::log::parse_level(&text("PHALANX_LOG")?)?,
            transport: phalanx_transport::parse_transport_kind(&text("PHALANX_TRANSPORT")?)
                .map_err(Error::Init)?,
            faults: match text("PHALANX_FAULTS")?.trim() {
                "" => None,
                f => Some(
                    phalanx_transport::FaultConfig::parse(f)
                        .map_err(|e| Error::Init(format!("PHALANX_FAULTS: {e}")))?,
                ),
            },
            mcast: phalanx_transport::McastSetting::from_lookup(|k| std::env::var(k).ok())
                .map_err(|e| Error::Init(e.to_string()))?,
            bpf: switch(phalanx_transport::ENV_BPF, true)?,
            mac: switch("PHALANX_MAC", true)?,
            shm: phalanx_shm::ShmConfig::from_lookup(|k| std::env::var(k).ok())
                .map_err(Error::Init)?,
            reliable_net: switch("PHALANX_RELIABLE_NET", false)?,
            careful_stall_ns: match text(phalanx_proto::careful::STALL_ENV)?.trim() {
                "" => None,
                v => Some(phalanx_proto::careful::parse_stall(v).ok_or_else(|| {
                    Error::Init(format!(
                        "{}={v:?} is not a duration",
                        phalanx_proto::careful::STALL_ENV
                    ))
                })?),
            },
            cpus: var::<usize>("PHALANX_CPUS")?.filter(|&n| n > 0),
            test_shm_fail: std::env::var("PHALANX_TEST_SHM_FAIL").ok(),
        })
    }
}
