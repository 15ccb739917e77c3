//! The control protocol between `phalanx gang` commands and the master.
//!
//! Contract: one TCP connection per command, on the master's loopback port: the client
//! sends one [`Hello`] line carrying the cluster secret (read from a file only its
//! owner can read), then one [`Request`] line; the master answers one [`Reply`] line and
//! closes. Every line is one JSON object, at most [`MAX_LINE`] bytes; a longer line, a
//! wrong secret or an unparsable request is answered with [`Reply::Error`] (the secret
//! is compared in constant time) and nothing else happens.

use crate::matrix::JobId;
use crate::store::JobRecord;
use serde::{Deserialize, Serialize};

/// Longest line either side sends.
pub const MAX_LINE: usize = 256 << 10;

/// First line of every connection.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hello {
    /// The cluster secret (hex).
    pub secret: String,
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
    /// A job's output from byte `from` on (at most [`MAX_LINE`] / 2 bytes).
    Logs { id: JobId, from: u64 },
    /// The last context switches, with the time of each stage.
    Switches { last: u32 },
    /// Stops the master and every job.
    Shutdown,
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
    pub up: bool,
    pub jobs: Vec<JobId>,
}

/// Compares two secrets in time independent of where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
    }
}
