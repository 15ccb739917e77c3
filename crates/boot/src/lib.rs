//! phalanx start-up rendezvous: the protocol between `phalanx run` and its ranks.
//!
//! Contract:
//! - The launcher listens on TCP and starts every rank with [`ENV_RANK`], [`ENV_SIZE`],
//!   [`ENV_BOOT`] and the job's secret [`ENV_SECRET`] set ([`BootEnv::from_env`] reads
//!   them; no [`ENV_BOOT`] means a singleton).
//! - Each rank binds its data endpoint *before* it connects. The launcher's first line
//!   on every connection is a challenge ([`LauncherMsg::Challenge`]); the rank answers
//!   with one [`RankMsg::Hello`] carrying the proof that it knows the secret
//!   ([`auth`]); a connection without the right proof is refused, and nothing else is
//!   sent to it. When every rank has said hello and all hosts are alike
//!   ([`check_hosts`]), the launcher sends every rank the same [`Table`] (job key plus one
//!   endpoint per rank, in rank order). Receiving the table therefore is the start-up
//!   barrier: every peer can already receive.
//! - Right after the table each rank reports whether it joined its host's shared memory
//!   ([`RankMsg::Shm`]); the launcher answers each host's ranks with one decision
//!   ([`LauncherMsg::Shm`]), so all pairs of a host use the same medium.
//! - While the job runs the launcher may send [`Control`] messages (`Query`, `Release`,
//!   `Abort`); the rank answers `Query` with a status line, reports `Drained` once during
//!   Finalize and exits only after `Release`.
//! - Framing is one JSON object per `\n`-terminated line ([`frame`]); every line is bounded
//!   in length ([`MAX_LINE`]) and every blocking wait is bounded in time.
//!
//! - Without a launcher, a rank started by a PMI server (`srun --mpi=pmi2`, [`pmi`])
//!   gets the same table, shared-memory decision and release through PMI's key-value
//!   space and fences ([`BootClient::connect_pmi`]).
//!
//! Both sides share the message types in [`msg`]; the rank side is [`BootClient`], the
//! launcher side uses [`frame::LineReader`] and [`frame::send_blocking`] directly.

pub mod auth;
mod client;
mod env;
mod error;
pub mod frame;
pub mod msg;
pub mod pmi;

pub use auth::Secret;
pub use client::BootClient;
pub use env::{
    check_hosts, BootEnv, HostInfo, SpawnedEnv, ENV_BOOT, ENV_RANK, ENV_SECRET, ENV_SIZE,
    ENV_SPAWNED, MAX_ADDR_LEN, MAX_RANKS,
};
pub use error::BootError;
pub use msg::{
    Control, Endpoint, Hello, LauncherMsg, RankMsg, RankStats, ShmOutcome, SpawnCommand,
    SpawnRequest, Table, TraceChunk, TraceEvent, MAX_SPAWN, PROTOCOL_VERSION,
};

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of timelines, on ranks and launcher alike
/// (one clock per kernel, so ranks of one machine need no alignment).
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// Longest line (in bytes, without the newline) either side accepts for an ordinary
/// message. A [`Table`] may be longer: its bound grows with the job size
/// ([`frame::table_line_limit`]).
pub const MAX_LINE: usize = 1 << 20;
