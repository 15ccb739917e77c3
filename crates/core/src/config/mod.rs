//! Runtime configuration read once from the environment at initialization.
//!
//! Contract: this is the one place the library reads its `PHALANX_*` variables (the
//! launcher's own `PHALANX_RANK`/`PHALANX_SIZE`/`PHALANX_BOOT` belong to the start-up
//! protocol, `phalanx_boot`); the crates below it (transport, shared memory, protocols)
//! read none and take the parsed values from here (the shared-memory and multicast
//! variables are bounded by their crates' `from_lookup`). Every knob has a documented
//! default and range (in its field's doc); a malformed or out-of-range value, or any
//! value longer than [`MAX_TEXT_LEN`] bytes, is an initialization error naming
//! the variable, quoting (at most 64 bytes of) its value and stating the range, never
//! silently ignored and never a panic (`config/parse.rs`).

use crate::error::{Error, Result};
use std::time::Duration;

pub(crate) mod parse;
pub use parse::MAX_TEXT_LEN;
use parse::{shown, Env};

/// Largest size knob (`PHALANX_EAGER_LIMIT`, `_UNEXPECTED_LIMIT`, `_COMM_BUDGET`): 1 TiB.
pub const MAX_BYTES: usize = 1 << 40;
/// Longest wait knob (`PHALANX_FINALIZE_TIMEOUT`, `_PEER_TIMEOUT`, `_CAREFUL_STALL`):
/// one week, in seconds.
pub const MAX_WAIT_SECS: f64 = 604_800.0;
/// Longest spin or yield phase (`PHALANX_SPIN_US`, `PHALANX_YIELD_US`): 10 s, in µs.
pub const MAX_SPIN_US: u64 = 10_000_000;
/// The go-back-n window's default (`PHALANX_WINDOW`), packets. Larger ones measured no
/// better across a 1500-byte MTU and worse under loss (2 test hosts, p = 2, 2026-11-28,
/// medians of 6 alternating runs, ratios to 128 at 128 KiB – 1 MiB): 1024 ping-pong
/// 0.76–1.05, streaming 0.92–1.04 of the rate; 192 and 256 in another set ping-pong
/// 1.05–1.33; at 1 % injected loss 1 MiB ping-pong took 59 ms with 1024 against 46 with
/// 128 (go-back-n re-sends what follows a loss). The window's bytes are bounded too
/// (`engine/mod.rs`), so a larger `PHALANX_WINDOW` keeps loopback's 64 KiB datagrams
/// within 8 MiB.
pub const DEFAULT_WINDOW: u32 = 128;
/// Largest go-back-n window (`PHALANX_WINDOW`), packets.
pub const MAX_WINDOW: u32 = 65536;
/// Largest retransmission clamp (`PHALANX_RTO_MAX_MS`): one minute, in ms.
pub const MAX_RTO_MAX_MS: u64 = 60_000;
/// Largest retransmission floor (`PHALANX_RTO_MIN_US`): one minute, in µs.
pub const MAX_RTO_MIN_US: u64 = 60_000_000;
/// Largest `PHALANX_CPUS`.
pub const MAX_CPUS: usize = 65536;
/// Longest delay of the `PHALANX_TEST_SHM_FAIL` hook (`R@MS`): one minute, in ms.
pub const MAX_TEST_FAIL_MS: u64 = 60_000;

/// Tunables of one rank.
#[derive(Debug, Clone)]
pub struct Config {
    /// Largest message sent eagerly (bytes); longer ones use rendezvous.
    /// `PHALANX_EAGER_LIMIT` (default: the transport's; 0 to [`MAX_BYTES`]).
    pub eager_limit: Option<usize>,
    /// How long a blocking wait spins before sleeping in the kernel. `PHALANX_SPIN_US`
    /// (default 50 µs, or 0 when more local ranks than cores; 0 to [`MAX_SPIN_US`]).
    pub spin: Option<Duration>,
    /// After spinning, how long a wait keeps polling while yielding the CPU to other
    /// processes before it sleeps. `PHALANX_YIELD_US` (default 2000; 0 to
    /// [`MAX_SPIN_US`]).
    pub yield_time: Duration,
    /// Bound on Finalize's drain and release waits. `PHALANX_FINALIZE_TIMEOUT` (s,
    /// default 30; 0 to [`MAX_WAIT_SECS`], a week).
    pub finalize_timeout: Duration,
    /// Print per-rank counters at exit. `PHALANX_STATS=1`.
    pub stats: bool,
    /// Send them to the launcher for its per-job summary at exit (`PHALANX_JOB_STATS=1`,
    /// set by `phalanx run --stats`).
    pub job_stats: bool,
    /// Bound on bytes held for unexpected (not yet received) messages.
    /// `PHALANX_UNEXPECTED_LIMIT` (bytes, default 256 MiB; 0 to [`MAX_BYTES`]).
    pub unexpected_limit: usize,
    /// go-back-n send window in packets. `PHALANX_WINDOW` (default [`DEFAULT_WINDOW`]; 1 to
    /// [`MAX_WINDOW`]).
    pub window: u32,
    /// Communication memory of this job on each node (bytes), as the job manager hands
    /// it out: per peer a rank gets the credit C0 = budget / (local ranks × ranks)
    /// (seed 001) — its go-back-n window shrinks to C0 (at least one packet) and its
    /// host's shared-memory rings to the budget (at least 16 KiB each).
    /// `PHALANX_COMM_BUDGET` (bytes, `k`/`m`/`g` suffix; default: no limit; 1 to
    /// [`MAX_BYTES`]).
    pub comm_budget: Option<usize>,
    /// Lock the shared-memory segment in memory while the job runs (unlocked while it
    /// is switched out by the job manager). `PHALANX_COMM_LOCK=1`; where locking is not
    /// permitted a warning says so once and the job runs unlocked.
    pub comm_lock: bool,
    /// Acknowledge every packet at once. `PHALANX_EAGER_ACK=1`.
    pub eager_ack: bool,
    /// Rendezvous data over go-back-n leaves from the sender's buffer (no copy; the send
    /// completes when its datagrams are acknowledged). `PHALANX_ZERO_COPY=0`: each
    /// datagram is a copy, and the send completes once the last one is cut.
    pub zero_copy: bool,
    /// Retransmission back-off clamp. `PHALANX_RTO_MAX_MS` (1 to [`MAX_RTO_MAX_MS`];
    /// default 1: recovery at 30 % loss waits out clamped timers — an 8-rank Jacobi
    /// iteration was 250 times slower than without loss with a clamp of 100 ms, 40
    /// times with 4 ms; go-back-n's probes make a timeout on a slow but lossless path
    /// cost a header-sized datagram, not data).
    pub rto_max: Duration,
    /// Floor of the adaptive retransmission timeout (and its value before the first
    /// round-trip sample). `PHALANX_RTO_MIN_US` (default 300; 1 to [`MAX_RTO_MIN_US`]).
    pub rto_min: Duration,
    /// Time without acknowledgement progress after which a peer is declared
    /// unresponsive (an error naming it). `PHALANX_PEER_TIMEOUT` (s, default 300; 0 to
    /// [`MAX_WAIT_SECS`], a week).
    pub peer_timeout: Duration,
    /// Address the rank's UDP socket binds to. `PHALANX_IP` (default 127.0.0.1; `auto` =
    /// the first non-loopback interface that is up, as inside a test-host namespace).
    pub ip: std::net::Ipv4Addr,
    /// Collective algorithms forced by `PHALANX_COLL_<NAME>` (and the all-gather's k).
    pub coll: crate::coll::algorithm::Choices,
    /// The send/transmit/receive cost lines behind the broadcast trees' λ
    /// (`PHALANX_COST`, the host's cached figures, or the defaults).
    pub cost: crate::coll::cost::CostModel,
    /// Ranks per CPU, the same for every rank (the launcher counts those it starts on its
    /// own machine; [`crate::coll::cost::lambda`] scales the trees' λ by it).
    /// `PHALANX_RANKS_PER_CPU` (1 to [`MAX_CPUS`]; default 1).
    pub ranks_per_cpu: f64,
    /// Medium between ranks of one host. `PHALANX_TRANSPORT` (`auto`, `udp`, `shm`).
    pub transport: phalanx_transport::TransportKind,
    /// Injected faults, under the protocols: `auto` then takes UDP, `shm` runs the
    /// protocols over the rings. `PHALANX_FAULTS`.
    pub faults: Option<phalanx_transport::FaultConfig>,
    /// Multicast on or off and its group. `PHALANX_MCAST`, `PHALANX_MCAST_GROUP`.
    pub mcast: phalanx_transport::McastSetting,
    /// The per-rank kernel packet filter. `PHALANX_BPF` (default on).
    pub bpf: bool,
    /// UDP segmentation offload: runs of datagrams to one peer in one send, coalesced
    /// receives (`PHALANX_GSO`, default on; the kernel falls back where it cannot).
    pub gso: bool,
    /// Seal and check every UDP datagram with the job's MAC (`PHALANX_MAC`, default on;
    /// `0` only where every host and link of the job is trusted).
    pub mac: bool,
    /// Shared memory between the ranks of a host. `PHALANX_SHM_*`.
    pub shm: phalanx_shm::ShmConfig,
    /// The network is declared reliable: careful protocol on UDP. `PHALANX_RELIABLE_NET`.
    pub reliable_net: bool,
    /// Careful protocol: silence before "suspected loss". `PHALANX_CAREFUL_STALL`
    /// (`10`, `2.5s`, `500ms`; default the protocol's; at most [`MAX_WAIT_SECS`]).
    pub careful_stall_ns: Option<u64>,
    /// CPUs the launcher spreads this host's ranks over (it binds each to one).
    /// `PHALANX_CPUS`; default (and 0): what this process may use; at most
    /// [`MAX_CPUS`].
    pub cpus: Option<usize>,
    /// Ranks of the job on this machine's CPUs, test hosts (network namespaces)
    /// included: what the launcher counted (`PHALANX_MACHINE_RANKS`, set when it starts
    /// ranks in namespaces); unset, the ranks of this host.
    pub machine_ranks: Option<usize>,
    /// Test hook: make this rank's shared-memory join fail (`R` or `R@MS`, MS at most
    /// [`MAX_TEST_FAIL_MS`]). `PHALANX_TEST_SHM_FAIL`.
    pub test_shm_fail: Option<String>,
    /// Level of the diagnostics printed to stderr when the program installed no
    /// `tracing` subscriber. `PHALANX_LOG` (default `warn`).
    pub log: tracing::level_filters::LevelFilter,
    /// Record a timeline for the launcher's trace file (`PHALANX_TRACE`: set and not `0`;
    /// `phalanx run --trace FILE` sets it), in a ring of `trace_events` events
    /// (`PHALANX_TRACE_EVENTS`).
    pub trace: bool,
    /// See `trace`.
    pub trace_events: usize,
    /// At `MPI_THREAD_MULTIPLE`, a thread of phalanx's own progresses the engine while
    /// the program computes (one-sided operations on this rank's windows are applied
    /// without its calls); ignored at lower levels. `PHALANX_PROGRESS_THREAD=1`.
    pub progress_thread: bool,
}

impl Config {
    /// Reads the configuration from the environment.
    pub fn from_env() -> Result<Config> {
        Config::from_vars(&Env::from_process())
    }

    /// Reads the configuration from `env` (module docs).
    pub(crate) fn from_vars(env: &Env) -> Result<Config> {
        let us = |name: &str, max: u64| env.int::<u64>(name, 0..=max, "µs");
        let careful = phalanx_proto::careful::STALL_ENV;
        Ok(Config {
            eager_limit: env.int("PHALANX_EAGER_LIMIT", 0..=MAX_BYTES, "bytes")?,
            spin: us("PHALANX_SPIN_US", MAX_SPIN_US)?.map(Duration::from_micros),
            yield_time: Duration::from_micros(us("PHALANX_YIELD_US", MAX_SPIN_US)?.unwrap_or(2000)),
            finalize_timeout: env.secs("PHALANX_FINALIZE_TIMEOUT", 30.0, MAX_WAIT_SECS)?,
            stats: env.switch("PHALANX_STATS", false)?,
            job_stats: env.switch("PHALANX_JOB_STATS", false)?,
            unexpected_limit: env
                .int("PHALANX_UNEXPECTED_LIMIT", 0..=MAX_BYTES, "bytes")?
                .unwrap_or(256 << 20),
            window: env
                .int("PHALANX_WINDOW", 1..=MAX_WINDOW, "packets")?
                .unwrap_or(DEFAULT_WINDOW),
            comm_budget: env.bytes("PHALANX_COMM_BUDGET", MAX_BYTES)?,
            comm_lock: env.switch("PHALANX_COMM_LOCK", false)?,
            eager_ack: env.switch("PHALANX_EAGER_ACK", false)?,
            zero_copy: env.switch("PHALANX_ZERO_COPY", true)?,
            rto_max: Duration::from_millis(
                env.int("PHALANX_RTO_MAX_MS", 1..=MAX_RTO_MAX_MS, "ms")?
                    .unwrap_or(1),
            ),
            rto_min: Duration::from_micros(
                env.int("PHALANX_RTO_MIN_US", 1..=MAX_RTO_MIN_US, "µs")?
                    .unwrap_or(300),
            ),
            peer_timeout: env.secs("PHALANX_PEER_TIMEOUT", 300.0, MAX_WAIT_SECS)?,
            ip: phalanx_transport::resolve_bind_ip(env.text("PHALANX_IP")?)
                .map_err(|e| Error::Init(format!("PHALANX_IP: {e}")))?,
            coll: crate::coll::algorithm::Choices::parse(env.with_prefix("PHALANX_COLL_")?)
                .map_err(Error::Init)?,
            cost: {
                let v = env.text("PHALANX_COST")?;
                crate::coll::cost::from_value(v).map_err(|e| match v {
                    Some(v) if !e.starts_with("PHALANX_COST") => {
                        Error::Init(format!("PHALANX_COST={}: {e}", shown(v)))
                    }
                    _ => Error::Init(e),
                })?
            },
            ranks_per_cpu: env
                .number("PHALANX_RANKS_PER_CPU", 1.0..=MAX_CPUS as f64, "ranks")?
                .unwrap_or(1.0),
            log: crate::log::parse_level(env.text("PHALANX_LOG")?.unwrap_or(""))?,
            trace: env
                .text("PHALANX_TRACE")?
                .is_some_and(|v| !v.trim().is_empty() && v.trim() != "0"),
            trace_events: env
                .int(
                    "PHALANX_TRACE_EVENTS",
                    1..=crate::trace::MAX_CAPACITY,
                    "events",
                )?
                .unwrap_or(crate::trace::DEFAULT_CAPACITY),
            progress_thread: env.switch("PHALANX_PROGRESS_THREAD", false)?,
            transport: phalanx_transport::parse_transport_kind(
                env.text("PHALANX_TRANSPORT")?.unwrap_or(""),
            )
            .map_err(Error::Init)?,
            faults: match env.set("PHALANX_FAULTS")? {
                None => None,
                Some(f) => Some(
                    phalanx_transport::FaultConfig::parse(f)
                        .map_err(|e| Error::Init(format!("PHALANX_FAULTS: {e}")))?,
                ),
            },
            mcast: phalanx_transport::McastSetting::from_lookup(|k| env.lookup(k))
                .map_err(|e| Error::Init(e.to_string()))?,
            bpf: env.switch(phalanx_transport::ENV_BPF, true)?,
            mac: env.switch("PHALANX_MAC", true)?,
            gso: env.switch("PHALANX_GSO", true)?,
            shm: phalanx_shm::ShmConfig::from_lookup(|k| env.lookup(k)).map_err(Error::Init)?,
            reliable_net: env.switch("PHALANX_RELIABLE_NET", false)?,
            careful_stall_ns: match env.set(careful)? {
                None => None,
                Some(v) => Some(
                    phalanx_proto::careful::parse_stall(v)
                        .filter(|&ns| ns as f64 <= MAX_WAIT_SECS * 1e9)
                        .ok_or_else(|| {
                            Error::Init(format!(
                                "{careful}={} is not a duration (10, 2.5s, 500ms) from 0 to \
                                 {MAX_WAIT_SECS} s",
                                shown(v)
                            ))
                        })?,
                ),
            },
            cpus: env
                .int::<usize>("PHALANX_CPUS", 0..=MAX_CPUS, "CPUs")?
                .filter(|&n| n > 0),
            machine_ranks: env.int::<usize>("PHALANX_MACHINE_RANKS", 1..=1 << 24, "ranks")?,
            test_shm_fail: match env.set("PHALANX_TEST_SHM_FAIL")? {
                None => None,
                Some(v) => Some(test_shm_fail(v)?),
            },
        })
    }
}

/// Checks the `PHALANX_TEST_SHM_FAIL` hook: `R` or `R@MS` (`engine::shm` reads it).
fn test_shm_fail(v: &str) -> Result<String> {
    let (r, ms) = v.split_once('@').unwrap_or((v, "0"));
    let ok = r.trim().parse::<u32>().is_ok()
        && ms
            .trim()
            .parse::<u64>()
            .is_ok_and(|ms| ms <= MAX_TEST_FAIL_MS);
    if ok {
        Ok(v.to_string())
    } else {
        Err(Error::Init(format!(
            "PHALANX_TEST_SHM_FAIL={} is not RANK or RANK@MS with MS from 0 to \
             {MAX_TEST_FAIL_MS}",
            shown(v)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Config> {
        Config::from_vars(&Env::from_pairs(pairs.iter().map(|&(k, v)| (k, v))))
    }

    fn err(pairs: &[(&str, &str)]) -> String {
        match config(pairs) {
            Err(Error::Init(m)) => m,
            other => panic!("{pairs:.60?}: {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let c = config(&[]).unwrap();
        assert_eq!(c.window, DEFAULT_WINDOW);
        assert_eq!(c.finalize_timeout, Duration::from_secs(30));
        assert_eq!(c.peer_timeout, Duration::from_secs(300));
        assert_eq!(c.rto_max, Duration::from_millis(1));
        assert_eq!(c.rto_min, Duration::from_micros(300));
        assert_eq!(c.unexpected_limit, 256 << 20);
        assert_eq!((c.eager_limit, c.comm_budget, c.cpus), (None, None, None));
    }

    #[test]
    fn edges_are_accepted() {
        let c = config(&[
            ("PHALANX_WINDOW", "65536"),
            ("PHALANX_SPIN_US", "10000000"),
            ("PHALANX_YIELD_US", "0"),
            ("PHALANX_FINALIZE_TIMEOUT", "604800"),
            ("PHALANX_PEER_TIMEOUT", "604800"),
            ("PHALANX_RTO_MAX_MS", "60000"),
            ("PHALANX_RTO_MIN_US", "1"),
            ("PHALANX_EAGER_LIMIT", "1099511627776"),
            ("PHALANX_UNEXPECTED_LIMIT", "0"),
            ("PHALANX_COMM_BUDGET", "1024g"),
            ("PHALANX_CAREFUL_STALL", "604800s"),
            ("PHALANX_CPUS", "65536"),
            ("PHALANX_RANKS_PER_CPU", "65536"),
            ("PHALANX_TEST_SHM_FAIL", "3@60000"),
            ("PHALANX_COLL_ALLGATHER_K", "65534"),
        ])
        .unwrap();
        assert_eq!(c.window, MAX_WINDOW);
        assert_eq!(c.spin, Some(Duration::from_secs(10)));
        assert_eq!(c.peer_timeout, Duration::from_secs(604_800));
        assert_eq!(c.comm_budget, Some(MAX_BYTES));
        assert_eq!(c.careful_stall_ns, Some(604_800_000_000_000));
        assert_eq!(c.test_shm_fail.as_deref(), Some("3@60000"));
        assert_eq!(c.coll.allgather_k, 65534);
        assert_eq!(c.ranks_per_cpu, 65536.0);
    }

    #[test]
    fn past_the_edges_is_an_error_naming_the_variable() {
        let huge = "18446744073709551615";
        for (name, v) in [
            ("PHALANX_WINDOW", "65537"),
            ("PHALANX_WINDOW", "0"),
            ("PHALANX_WINDOW", huge),
            ("PHALANX_SPIN_US", "10000001"),
            ("PHALANX_SPIN_US", huge),
            ("PHALANX_YIELD_US", huge),
            ("PHALANX_FINALIZE_TIMEOUT", "604800.5"),
            ("PHALANX_FINALIZE_TIMEOUT", "1e308"),
            ("PHALANX_FINALIZE_TIMEOUT", "inf"),
            ("PHALANX_FINALIZE_TIMEOUT", "NaN"),
            ("PHALANX_FINALIZE_TIMEOUT", "-1"),
            ("PHALANX_PEER_TIMEOUT", "17179869.184"),
            ("PHALANX_RTO_MAX_MS", "60001"),
            ("PHALANX_RTO_MAX_MS", huge),
            ("PHALANX_RTO_MIN_US", "0"),
            ("PHALANX_EAGER_LIMIT", "1099511627777"),
            ("PHALANX_UNEXPECTED_LIMIT", huge),
            ("PHALANX_COMM_BUDGET", "1025g"),
            ("PHALANX_COMM_BUDGET", "18446744073709551615g"),
            ("PHALANX_CAREFUL_STALL", "604801"),
            ("PHALANX_CAREFUL_STALL", "1e308"),
            ("PHALANX_CPUS", "65537"),
            ("PHALANX_RANKS_PER_CPU", "0.5"),
            ("PHALANX_RANKS_PER_CPU", "inf"),
            ("PHALANX_TEST_SHM_FAIL", "1@60001"),
            ("PHALANX_TEST_SHM_FAIL", "x"),
            ("PHALANX_COST", "send=1e308+0,xmit=1+1,recv=1+1"),
            ("PHALANX_FAULTS", "delay_us=18446744073709551615"),
            ("PHALANX_SHM_RING", huge),
            ("PHALANX_SHM_TIMEOUT", "inf"),
        ] {
            let m = err(&[(name, v)]);
            assert!(m.contains(name) && m.len() < 300, "{name}={v}: {m}");
        }
    }

    #[test]
    fn a_megabyte_is_an_error_for_every_variable() {
        let mb = "7".repeat(1 << 20);
        for name in [
            "PHALANX_WINDOW",
            "PHALANX_IP",
            "PHALANX_LOG",
            "PHALANX_TRANSPORT",
            "PHALANX_FAULTS",
            "PHALANX_COST",
            "PHALANX_COLL_BCAST",
            "PHALANX_MCAST_GROUP",
            "PHALANX_SHM_DIR",
            "PHALANX_CAREFUL_STALL",
            "PHALANX_TEST_SHM_FAIL",
            "PHALANX_STATS",
        ] {
            let m = err(&[(name, &mb)]);
            assert!(m.contains(name) && m.len() < 300, "{name}: {m}");
        }
    }

    #[test]
    fn not_utf8_is_an_error_not_a_panic() {
        use std::os::unix::ffi::OsStringExt;
        let bad = || std::ffi::OsString::from_vec(vec![b'1', 0xff]);
        // Unrelated variables that are not UTF-8 are no concern of the library's
        // (`std::env::vars` panicked on them).
        assert!(Config::from_vars(&Env::from_pairs([("OTHER", bad())])).is_ok());
        for name in ["PHALANX_WINDOW", "PHALANX_COLL_BCAST", "PHALANX_IP"] {
            match Config::from_vars(&Env::from_pairs([(name, bad())])) {
                Err(Error::Init(m)) => assert!(m.contains(name), "{m}"),
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}
