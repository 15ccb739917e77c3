//! Ranks started by the job manager's node daemons: the launcher's side of the agent
//! protocol ([`phalanx_gang::proto::AgentRequest`], [`AgentEvent`]).
//!
//! Contract:
//! * [`Agents::connect`] opens one authenticated connection (the cluster secret, read
//!   from `--agent-secret`) to every distinct `node:` host of the job, each bounded by
//!   [`CONNECT_TIMEOUT`]; it fails naming the node it could not reach.
//! * A reader thread per connection writes the ranks' output lines to the launcher's
//!   stdout or stderr (tagged `[rank] ` like local ranks', one write per line under the
//!   stream's lock) and hands every other event to the launcher's loop
//!   ([`Agents::try_event`]), in the order the node sent them — a rank's `Exited` comes
//!   after its output. A connection that closes or sends something malformed or longer
//!   than [`MAX_LINE`] is [`Event::Lost`], naming the node.
//! * Requests are written with a bound ([`SEND_TIMEOUT`]); a failed write is reported
//!   by the reader as the connection's loss.
//! * Dropping [`Agents`] closes the connections: each node daemon then kills whatever it
//!   started for this job (its lifeline contract).

use crate::hosts::Host;
use phalanx_gang::proto::{AgentEvent, AgentRequest, Hello, SpawnSpec, MAX_LINE};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

/// Bound on connecting to one node daemon.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on writing one request.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// What the launcher's loop learns from the node daemons.
#[derive(Debug)]
pub enum Event {
    /// Rank `rank` runs as `pid` on the node of agent `agent`.
    Spawned { agent: usize, rank: u32, pid: u32 },
    /// Rank `rank` could not be started on `node`.
    SpawnFailed {
        agent: usize,
        rank: u32,
        node: String,
        message: String,
    },
    /// Rank `rank` (started by agent `agent`) ended with `status`.
    Exited {
        agent: usize,
        rank: u32,
        status: ExitStatus,
    },
    /// The connection to node daemon `agent` (`node`) is gone: its ranks are dead.
    Lost {
        agent: usize,
        node: String,
        why: String,
    },
}

struct Agent {
    label: String,
    stream: TcpStream,
    /// A write failed: the connection was shut down (its reader reports the loss).
    dead: bool,
}

/// The connections of one job to its node daemons.
pub struct Agents {
    agents: Vec<Agent>,
    events: Receiver<Event>,
}

impl Agents {
    /// Connects to every `node:` host among `hosts`; with each rank's agent index
    /// (`None` for ranks the launcher starts itself).
    pub fn connect(
        hosts: &[Host],
        secret_file: Option<&Path>,
        tag: bool,
    ) -> Result<(Agents, Vec<Option<usize>>), String> {
        let mut addrs: Vec<(String, SocketAddrV4)> = Vec::new();
        let mut of_rank = Vec::with_capacity(hosts.len());
        for h in hosts {
            of_rank.push(match h {
                Host::Node { label, agent } => {
                    Some(match addrs.iter().position(|(_, a)| a == agent) {
                        Some(i) => i,
                        None => {
                            addrs.push((label.clone(), *agent));
                            addrs.len() - 1
                        }
                    })
                }
                _ => None,
            });
        }
        let (tx, events) = channel();
        // Built first: on an error below, dropping it shuts down what was opened.
        let mut all = Agents {
            agents: Vec::with_capacity(addrs.len()),
            events,
        };
        if !addrs.is_empty() {
            let path = secret_file.ok_or("node hosts need the cluster secret (--agent-secret)")?;
            let secret = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the cluster secret {}: {e}", path.display()))?;
            for (i, (label, addr)) in addrs.into_iter().enumerate() {
                let stream = open(addr, secret.trim())
                    .map_err(|e| format!("cannot reach node daemon {label} at {addr}: {e}"))?;
                let reader = stream.try_clone().map_err(|e| e.to_string())?;
                let (tx, node) = (tx.clone(), label.clone());
                std::thread::Builder::new()
                    .name(format!("phalanx-agent-{i}"))
                    .spawn(move || read_events(i, node, reader, tag, tx))
                    .map_err(|e| format!("cannot start a reader thread: {e}"))?;
                all.agents.push(Agent {
                    label,
                    stream,
                    dead: false,
                });
            }
        }
        Ok((all, of_rank))
    }

    /// Asks agent `i` to start a rank.
    pub fn spawn(&mut self, i: usize, spec: SpawnSpec) -> Result<(), String> {
        let label = self.agents[i].label.clone();
        self.send(i, &AgentRequest::Spawn(spec))
            .map_err(|e| format!("cannot ask node daemon {label} to start a rank: {e}"))
    }

    /// Sends `sig` to rank `rank`'s process group through agent `i` (best effort: a lost
    /// agent's ranks are already dead).
    pub fn signal(&mut self, i: usize, rank: u32, sig: i32) {
        let _ = self.send(i, &AgentRequest::Signal { rank, sig });
    }

    fn send(&mut self, i: usize, req: &AgentRequest) -> io::Result<()> {
        let line = phalanx_boot::frame::encode(req);
        let a = &mut self.agents[i];
        if a.dead {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the connection to this node daemon failed",
            ));
        }
        let r = a
            .stream
            .set_write_timeout(Some(SEND_TIMEOUT))
            .and_then(|()| a.stream.write_all(&line));
        if r.is_err() {
            // Half a line may be out: nothing more can follow it. The reader sees the
            // shutdown and reports the loss.
            a.dead = true;
            let _ = a.stream.shutdown(Shutdown::Both);
        }
        r
    }

    /// The next event, if one is waiting.
    pub fn try_event(&self) -> Option<Event> {
        self.events.try_recv().ok()
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        for a in &self.agents {
            let _ = a.stream.shutdown(Shutdown::Both);
        }
    }
}

/// Connects and authenticates.
fn open(addr: SocketAddrV4, secret: &str) -> io::Result<TcpStream> {
    let mut s = TcpStream::connect_timeout(&SocketAddr::V4(addr), CONNECT_TIMEOUT)?;
    s.set_nodelay(true)?;
    s.set_write_timeout(Some(SEND_TIMEOUT))?;
    let hello = Hello {
        secret: secret.to_string(),
    };
    s.write_all(&phalanx_boot::frame::encode(&hello))?;
    Ok(s)
}

/// The reader thread of agent `i` (module docs).
fn read_events(i: usize, node: String, stream: TcpStream, tag: bool, tx: Sender<Event>) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::with_capacity(1024);
    let why = loop {
        line.clear();
        match (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) => break "its node daemon closed the connection (daemon down?)".to_string(),
            Ok(_) if line.last() != Some(&b'\n') => {
                break "its node daemon sent an over-long line".to_string()
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => break format!("reading from its node daemon failed: {e}"),
        }
        let ev = match serde_json::from_slice::<AgentEvent>(&line) {
            Ok(ev) => ev,
            Err(e) => break format!("its node daemon sent a malformed event: {e}"),
        };
        let out = match ev {
            AgentEvent::Output {
                rank,
                stderr,
                line: text,
            } => {
                let mut bytes = if tag {
                    format!("[{rank}] ").into_bytes()
                } else {
                    Vec::new()
                };
                bytes.extend_from_slice(text.as_bytes());
                if bytes.last() != Some(&b'\n') {
                    bytes.push(b'\n');
                }
                // Errors ignored: a closed launcher stdout must not stop the events.
                let _ = if stderr {
                    io::stderr().lock().write_all(&bytes)
                } else {
                    io::stdout().lock().write_all(&bytes)
                };
                continue;
            }
            AgentEvent::Spawned { rank, pid } => Event::Spawned {
                agent: i,
                rank,
                pid,
            },
            AgentEvent::SpawnFailed { rank, message } => Event::SpawnFailed {
                agent: i,
                rank,
                node: node.clone(),
                message,
            },
            AgentEvent::Exited { rank, status } => Event::Exited {
                agent: i,
                rank,
                status: ExitStatus::from_raw(status),
            },
        };
        if tx.send(out).is_err() {
            return;
        }
    };
    let _ = tx.send(Event::Lost {
        agent: i,
        node,
        why,
    });
}
