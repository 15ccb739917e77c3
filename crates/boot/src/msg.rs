//! Messages of the start-up protocol, shared by launcher and ranks.
//!
//! Contract: every message is one JSON object with a `"type"` tag, sent as one line
//! ([`crate::frame`]). [`RankMsg`] flows rank → launcher, [`LauncherMsg`] launcher → rank.
//! A rank sends exactly one `Hello`, first; the launcher sends exactly one `Table` (or an
//! `Abort`) in reply, after all ranks said hello; `Status` only answers `Query`; `Drained`
//! is sent at most once; after `Release` the launcher sends nothing more.
//!
//! Shared memory is chosen per host by the launcher, so that a pair of ranks never
//! disagrees about its medium: right after the table every rank reports how joining its
//! host's segment went ([`RankMsg::Shm`], exactly once), and the launcher answers every
//! rank of a host with the same [`LauncherMsg::Shm`] (exactly once) — `use_shm: true`
//! only when every rank of that host joined, `false` as soon as one of them failed (ranks
//! still connecting then give up at once) or did not try.
//!
//! Spawning (`MPI_Comm_spawn`): a running rank sends [`RankMsg::Spawn`]; the launcher
//! starts the new processes as further ranks of the job (numbered after every rank so
//! far), gives each of them a `Table` of every endpoint once all have said hello, and
//! answers the requester with exactly one [`LauncherMsg::Spawned`] (their endpoints) or
//! [`LauncherMsg::SpawnFailed`]. One spawn at a time per job; a second request while one
//! runs waits for it. Spawned ranks report no shared-memory outcome (they use UDP).
//!
//! Suspending a running job (the job manager's halt and release, seed 001): the launcher
//! sends [`LauncherMsg::Halt`]; the rank halts its links at a packet boundary, drains
//! what is in flight, saves what they hold and answers [`RankMsg::Halted`] (once per
//! `Halt`); the launcher then stops it (SIGSTOP) and, after SIGCONT, sends
//! [`LauncherMsg::Continue`], on which the rank restores and resumes its links.

use crate::env::HostInfo;
use serde::{Deserialize, Serialize};
use std::net::SocketAddrV4;

/// Version of this protocol and of the data-plane ABI; ranks of one job must agree.
pub const PROTOCOL_VERSION: u32 = 4;

/// How peers reach a rank: its data socket address and the host it runs on.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The rank's bound data-plane (UDP) address.
    pub addr: SocketAddrV4,
    /// The rank's host.
    pub host: HostInfo,
    /// Datagrams of the largest size the rank's socket can queue unread (from the
    /// receive buffer the kernel granted; 0 = unknown): sizes the careful protocol's
    /// windows, which every rank derives from the smallest in the table.
    #[serde(default)]
    pub recv_frames: u64,
}

/// Everything a rank needs to talk to its peers.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Table {
    /// Random per-job key (from the launcher's OS entropy) that every data packet carries.
    pub job_key: u64,
    /// One endpoint per rank; index = rank.
    pub endpoints: Vec<Endpoint>,
}

/// A rank's introduction.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Hello {
    /// The rank as read from `PHALANX_RANK`.
    pub rank: u32,
    /// The rank's process id (informational: a wrapper such as `strace` may differ from the
    /// pid the launcher spawned).
    pub pid: u32,
    /// The rank's endpoint, already bound.
    pub endpoint: Endpoint,
    /// The proof that the rank knows the job's secret, for the launcher's challenge
    /// ([`crate::auth::proof`]).
    #[serde(default)]
    pub proof: String,
    /// The rank's `CLOCK_MONOTONIC` (ns) when it sent this hello: the launcher aligns a
    /// trace's clocks with it (0 = unknown).
    #[serde(default)]
    pub clock_ns: u64,
}

/// How a rank's attempt to join its host's shared-memory segment went.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ShmOutcome {
    /// Connected to every other rank of the host.
    Joined,
    /// Not attempted: shared memory is off for this rank (`PHALANX_TRANSPORT=udp`, fault
    /// injection) or it is alone on its host.
    NotUsed,
    /// The attempt failed.
    Failed {
        /// Why, for the launcher to print once.
        reason: String,
        /// `PHALANX_TRANSPORT=shm`: shared memory was required, so the job must end.
        required: bool,
    },
}

/// One program of a spawn request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SpawnCommand {
    /// The executable (a path, or a name looked up in PATH).
    pub prog: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// How many processes run it (at least 1).
    pub count: u32,
}

/// A rank asks for new processes (`MPI_Comm_spawn(_multiple)`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SpawnRequest {
    /// The programs, in order: their processes are ranks 0.. of the new world, in order.
    pub commands: Vec<SpawnCommand>,
    /// The intercommunicator's context, which the new processes' parent communicator uses.
    pub context: u32,
    /// The spawning communicator's members (job ranks), in its rank order: the new
    /// processes' remote group.
    pub parents: Vec<u32>,
}

/// Most processes one spawn request may start.
pub const MAX_SPAWN: u32 = 1024;

/// rank → launcher.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RankMsg {
    /// First message on the connection.
    Hello(Hello),
    /// Answer to [`LauncherMsg::Query`]: what the rank is waiting on.
    Status {
        /// Human-readable one-liner.
        text: String,
        /// When it waits in a collective: the ranks (world numbering) whose part it
        /// waits for. The launcher ends the job when one of them has reached Finalize.
        #[serde(default)]
        waits_for: Vec<u32>,
    },
    /// The rank has completed the drain step of Finalize (everything sent was ACKed).
    Drained {
        /// Set when the drain gave up (for example: peers that never ACKed).
        warning: Option<String>,
    },
    /// The rank's counters for the launcher's per-job summary (`phalanx run --stats`),
    /// sent at most once, in Finalize before `Drained`.
    Stats(RankStats),
    /// Part of the rank's timeline (`phalanx run --trace`), in Finalize before `Drained`;
    /// the last part says so.
    Trace(TraceChunk),
    /// Sent once, right after the table: how joining the host's shared memory went.
    Shm(ShmOutcome),
    /// Start new processes (answered by `Spawned` or `SpawnFailed`).
    Spawn(SpawnRequest),
    /// Answer to [`LauncherMsg::Halt`]: the links are halted (and, without `error`,
    /// drained and saved); the rank waits for [`LauncherMsg::Continue`].
    Halted {
        /// Datagrams the links held, moved to ordinary memory.
        datagrams: u64,
        /// Their bytes.
        bytes: u64,
        /// Milliseconds from the halt to this answer.
        ms: u64,
        /// Of which saving what the links held took this long (microseconds): the
        /// buffer switch of seed 001's stage 2.
        #[serde(default)]
        save_us: u64,
        /// Why the drain did not complete (the rank is halted anyway).
        error: Option<String>,
    },
}

/// One timeline event as it travels: start and duration (ns, the rank's
/// `CLOCK_MONOTONIC`), kind (0 call, 1 send, 2 arrival, 3 collective, 4 log, 5 phase of a
/// collective), name,
/// detail, three numbers by kind, the message number within its pair, thread id.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TraceEvent(
    pub u64,
    pub u64,
    pub u8,
    pub String,
    pub String,
    pub u64,
    pub u64,
    pub u64,
    pub u64,
    pub u32,
);

/// Part of a rank's timeline (at most [`TraceChunk::MAX_EVENTS`] events, so a line stays
/// under [`crate::MAX_LINE`]).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct TraceChunk {
    /// The events, oldest first.
    pub events: Vec<TraceEvent>,
    /// Older events the rank's ring overwrote (the same in every part).
    pub lost: u64,
    /// The rank's clock when it sent this part (ns).
    pub clock_ns: u64,
    /// The rank's last part.
    pub last: bool,
}

impl TraceChunk {
    /// Events per part: with names and details of at most a few hundred bytes (the
    /// recorder cuts them), a part stays far below the line limit.
    pub const MAX_EVENTS: usize = 2048;
}

/// A rank's counters at Finalize (the launcher bounds what it keeps: [`RankStats::bounded`]).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct RankStats {
    /// Every counter by name, as `PHALANX_STATS=1` prints them (`sent`, `retransmits`,
    /// `eager_bytes`, `wait_ns`, …).
    pub counters: Vec<(String, u64)>,
    /// Collective calls of the rank's process per (kind, algorithm): `("all_reduce",
    /// "shm", 400)`.
    pub collectives: Vec<(String, String, u64)>,
}

impl RankStats {
    /// Most counters and (kind, algorithm) rows the launcher keeps of one rank.
    pub const MAX_ROWS: usize = 512;

    /// Cut to [`Self::MAX_ROWS`] rows of each kind (a misbehaving rank cannot make the
    /// launcher keep more).
    pub fn bounded(mut self) -> RankStats {
        self.counters.truncate(Self::MAX_ROWS);
        self.collectives.truncate(Self::MAX_ROWS);
        self
    }
}

/// launcher → rank.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LauncherMsg {
    /// The first line on every boot connection: a fresh random challenge, which the
    /// rank's `Hello` answers with its proof ([`crate::auth`]).
    Challenge {
        /// 32 random bytes in hex.
        nonce: String,
    },
    /// The rendezvous result; also the start-up barrier.
    Table(Table),
    /// Asks the rank what it is waiting on (answered by [`RankMsg::Status`]).
    Query,
    /// Every rank has drained: the rank may leave Finalize and exit.
    Release,
    /// The job is over; the rank should exit non-zero.
    Abort {
        /// Why, for the rank to print.
        reason: String,
    },
    /// The launcher's decision for the rank's host: use the shared-memory segment between
    /// its ranks (every one joined), or UDP for all of them.
    Shm {
        /// Every rank of the host joined: keep the segment.
        use_shm: bool,
    },
    /// Halt the links, drain them within `limit_ms`, save, answer [`RankMsg::Halted`].
    Halt {
        /// Bound on the drain, in milliseconds.
        limit_ms: u64,
    },
    /// The job was continued after a halt: restore and resume the links.
    Continue,
    /// Answer to [`RankMsg::Spawn`]: the new processes run and are job ranks
    /// `first..first + endpoints.len()`.
    Spawned {
        /// Job rank of the first new process.
        first: u32,
        /// Their endpoints, in order.
        endpoints: Vec<Endpoint>,
    },
    /// Answer to [`RankMsg::Spawn`]: nothing was started, for this reason.
    SpawnFailed {
        /// Why.
        reason: String,
    },
}

/// A launcher message a rank can receive while the job runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// Reply with [`crate::BootClient::reply_status`].
    Query,
    /// Finalize may complete; exit afterwards.
    Release,
    /// The job is being torn down, with the launcher's reason.
    Abort(String),
    /// The shared-memory decision for this rank's host (see [`LauncherMsg::Shm`]).
    Shm(bool),
    /// Halt the links, draining for at most this long (see [`LauncherMsg::Halt`]).
    Halt(std::time::Duration),
    /// Resume after a halt (see [`LauncherMsg::Continue`]).
    Continue,
    /// The answer to this rank's spawn request: the first new job rank and the new
    /// processes' endpoints, or why none was started.
    Spawned(Result<(u32, Vec<Endpoint>), String>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tags() {
        let ep = Endpoint {
            addr: "127.0.0.1:5000".parse().unwrap(),
            host: HostInfo::current(),
            recv_frames: 512,
        };
        let msgs = [
            RankMsg::Hello(Hello {
                rank: 3,
                pid: 77,
                endpoint: ep.clone(),
                proof: "00ff".into(),
                clock_ns: 5,
            }),
            RankMsg::Status {
                text: "x".into(),
                waits_for: vec![1, 2],
            },
            RankMsg::Drained { warning: None },
            RankMsg::Stats(RankStats {
                counters: vec![("sent".into(), 3)],
                collectives: vec![("all_reduce".into(), "shm".into(), 2)],
            }),
            RankMsg::Shm(ShmOutcome::Joined),
            RankMsg::Shm(ShmOutcome::Failed {
                reason: "r".into(),
                required: true,
            }),
        ];
        for m in msgs {
            let s = serde_json::to_string(&m).unwrap();
            assert!(s.starts_with("{\"type\":"), "{s}");
            assert_eq!(serde_json::from_str::<RankMsg>(&s).unwrap(), m);
        }
        let t = LauncherMsg::Table(Table {
            job_key: u64::MAX,
            endpoints: vec![ep],
        });
        let s = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<LauncherMsg>(&s).unwrap(), t);
        let s = serde_json::to_string(&LauncherMsg::Shm { use_shm: false }).unwrap();
        assert_eq!(s, r#"{"type":"shm","use_shm":false}"#);
        let s = serde_json::to_string(&LauncherMsg::Release).unwrap();
        assert_eq!(s, r#"{"type":"release"}"#);
    }
}
