//! The control protocol between `phalanx gang` commands and the master.
//!
//! Contract: one TCP connection per command, on the master's loopback port. Every
//! connection (to the master, or to a node daemon's agent) is challenge–response: the
//! server's first line is a [`Challenge`] (a fresh random nonce); the client answers
//! with one [`Hello`] line carrying [`proof`] of the cluster secret (read from a file
//! only its owner can read) for that nonce — the secret itself never travels — then one
//! [`Request`] line; the master answers one [`Reply`] line and closes. Every line is one
//! JSON object, at most [`MAX_LINE`] bytes; a longer line, a wrong proof ([`check`],
//! constant time) or an unparsable request is answered with [`Reply::Error`] and
//! nothing else happens.
//!
//! Node daemons use the same port: after the [`Hello`] a node sends
//! [`Request::RegisterNode`] (its index, the address of its agent, its pid), gets
//! [`Reply::Ok`], and keeps the connection open, sending [`Request::Beat`] every
//! [`BEAT`]; the master marks a node down when its connection closes or stays silent for
//! [`NODE_SILENCE`], and tells it to exit with [`Reply::Stop`].
//!
//! A job's launcher talks to the agent of each node daemon it has ranks on (one TCP
//! connection per node, also opened with a [`Hello`], which there also carries a fresh
//! nonce of the launcher's): [`AgentRequest`]s go in, [`AgentEvent`]s come back, one
//! JSON object of at most [`MAX_LINE`] bytes per line, each line sealed (encrypted and
//! authenticated, [`crate::seal`]) under a key of this connection — they carry the ranks'
//! environment, with the job's secret. The connection is the job's lifeline on that
//! node: when it closes, the node daemon kills every rank it started for it. (Over ssh,
//! `phalanx proxy` speaks the same messages unsealed: ssh encrypts them.)

use crate::matrix::JobId;
use crate::store::JobRecord;
use serde::{Deserialize, Serialize};

/// Longest line either side sends.
pub const MAX_LINE: usize = 256 << 10;

/// The server's first line on every connection.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Challenge {
    /// 32 random bytes, hex.
    pub nonce: String,
}

/// The client's first line: its answer to the [`Challenge`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hello {
    /// [`proof`] of the cluster secret for the challenge's nonce (hex).
    pub proof: String,
    /// To a node daemon's agent: the launcher's own fresh nonce (32 bytes, hex), which
    /// keys the sealed connection with the challenge's ([`crate::seal`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
}

/// A fresh challenge (32 bytes from the OS, hex).
pub fn challenge() -> std::io::Result<Challenge> {
    use std::io::Read;
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(Challenge {
        nonce: hex::encode(b),
    })
}

fn proof_hash(secret: &str, nonce: &str) -> blake3::Hash {
    let key = blake3::derive_key(
        "phalanx 2026-11 gang control proof",
        secret.trim().as_bytes(),
    );
    blake3::keyed_hash(&key, nonce.as_bytes())
}

/// The [`Hello`] that answers `nonce` with the cluster `secret`.
pub fn proof(secret: &str, nonce: &str) -> Hello {
    Hello {
        proof: proof_hash(secret, nonce).to_hex().to_string(),
        nonce: None,
    }
}

/// Reads the server's [`Challenge`] line, byte by byte (nothing after it is consumed),
/// at most 1 KiB; the caller bounds the wait with the stream's read timeout.
pub fn read_challenge(r: &mut impl std::io::Read) -> std::io::Result<Challenge> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while line.len() < 1024 {
        match r.read(&mut b) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if b[0] == b'\n' {
            return serde_json::from_slice(&line)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e));
        }
        line.push(b[0]);
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "the challenge line is too long",
    ))
}

/// Whether `hello` proves the cluster `secret` for `nonce` (constant time in content).
pub fn check(secret: &str, nonce: &str, hello: &Hello) -> bool {
    blake3::Hash::from_hex(hello.proof.trim()).is_ok_and(|h| h == proof_hash(secret, nonce))
}

/// What a command asks the master.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// A new job: `ranks` ranks over `nodes` nodes, running `argv` in `cwd`.
    Submit {
        name: String,
        ranks: u32,
        nodes: u32,
        argv: Vec<String>,
        cwd: String,
    },
    /// Every job.
    Queue,
    /// The gang matrix.
    Matrix,
    /// The nodes.
    Nodes,
    /// Ends a job.
    Cancel { id: JobId },
    /// A job's output from byte `from` on (at most [`MAX_LINE`] / 8 bytes: JSON-escaped
    /// control bytes take six, and the reply must fit in a line).
    Logs { id: JobId, from: u64 },
    /// The last context switches, with the time of each stage.
    Switches { last: u32 },
    /// Stops the master and every job.
    Shutdown,
    /// A node daemon joins: node `node`, its agent listening on `agent` (ip:port).
    RegisterNode { node: u32, agent: String, pid: u32 },
    /// A registered node daemon is alive.
    Beat,
}

/// How often a node daemon says it is alive.
pub const BEAT: std::time::Duration = std::time::Duration::from_millis(500);
/// Silence after which the master marks a node down.
pub const NODE_SILENCE: std::time::Duration = std::time::Duration::from_secs(3);

/// What a launcher asks a node daemon's agent.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentRequest {
    /// Start one rank.
    Spawn(SpawnSpec),
    /// Send `sig` to rank `rank`'s process group.
    Signal { rank: u32, sig: i32 },
}

/// One rank to start: everything `phalanx run` would give it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SpawnSpec {
    pub rank: u32,
    pub size: u32,
    /// The launcher's rendezvous address as seen from this node (PHALANX_BOOT).
    pub boot: String,
    pub prog: String,
    pub args: Vec<String>,
    /// Extra environment, before the PHALANX_* variables.
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub cwd: String,
    /// Bind the rank to a CPU of the node (round robin by rank).
    pub bind: bool,
}

/// What a node daemon's agent tells the launcher.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// Rank `rank` runs as process `pid` (its own process group).
    Spawned { rank: u32, pid: u32 },
    /// Rank `rank` could not be started.
    SpawnFailed { rank: u32, message: String },
    /// A line of the rank's stdout (or stderr), newline included.
    Output {
        rank: u32,
        stderr: bool,
        line: String,
    },
    /// Rank `rank` ended; its wait(2) status. Sent after its output.
    Exited { rank: u32, status: i32 },
}

/// The master's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// The request failed; why.
    Error { message: String },
    /// Done.
    Ok,
    /// The id of a submitted job.
    Submitted { id: JobId },
    /// Every job, by id.
    Jobs { jobs: Vec<JobRecord> },
    /// The matrix: per slot, per node, the job in that cell; the current slot.
    Matrix {
        cells: Vec<Vec<Option<JobId>>>,
        current: u32,
    },
    /// Per node: up, and the jobs with a cell on it.
    Nodes { nodes: Vec<NodeInfo> },
    /// The last context switches, oldest first.
    Switches {
        switches: Vec<crate::store::SwitchRecord>,
    },
    /// To a node daemon: exit (the cluster is going down).
    Stop,
    /// Output bytes (lossy UTF-8) and the offset after them; whether the job finished.
    Log {
        text: String,
        next: u64,
        finished: bool,
    },
}

/// One node as `nodes` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeInfo {
    pub node: u32,
    /// Registered and alive.
    pub up: bool,
    pub jobs: Vec<JobId>,
    /// `up`, `down` or `starting` (not registered yet).
    #[serde(default)]
    pub state: String,
    /// The node daemon's pid and agent address, once registered.
    #[serde(default)]
    pub pid: Option<u32>,
    #[serde(default)]
    pub agent: Option<String>,
    /// Why it is down.
    #[serde(default)]
    pub message: Option<String>,
    /// Its communication budget (bytes), if the cluster has one.
    #[serde(default)]
    pub budget: Option<u64>,
    /// How much of it the jobs hold now.
    #[serde(default)]
    pub budget_in_use: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_secrets_compare() {
        let r = Request::Submit {
            name: "j".into(),
            ranks: 4,
            nodes: 2,
            argv: vec!["./a".into()],
            cwd: "/tmp".into(),
        };
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), r);
        assert!(serde_json::from_str::<Request>(r#"{"type":"launch"}"#).is_err());
        let c = challenge().unwrap();
        assert_ne!(c, challenge().unwrap());
        // A secret with characters hex never has: it cannot appear in a proof by chance.
        let h = proof("not-a-hex-secret", &c.nonce);
        assert!(check("not-a-hex-secret", &c.nonce, &h));
        assert!(!check("not-a-hex-secreT", &c.nonce, &h));
        assert!(!check("not-a-hex-secret", &challenge().unwrap().nonce, &h));
        assert!(!check(
            "not-a-hex-secret",
            &c.nonce,
            &Hello {
                proof: "not-a-hex-secret".into(),
                nonce: None,
            }
        ));
        assert!(!h.proof.contains("not-a-hex-secret"));
        let e = AgentEvent::Exited { rank: 3, status: 9 };
        let line = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<AgentEvent>(&line).unwrap(), e);
    }
}
