//! Ranks started by agents on other hosts: the launcher's side of the agent protocol
//! ([`phalanx_gang::proto::AgentRequest`], [`AgentEvent`]). An agent is a job manager's
//! node daemon (`node:` hosts, over TCP) or a `phalanx proxy` that ssh starts on an ssh
//! host (over ssh's stdin and stdout).
//!
//! Contract:
//! * [`Agents::connect`] opens one connection per distinct agent host of the job. To a
//!   node daemon: TCP, authenticated with the cluster secret (read from
//!   `--agent-secret`), bounded by [`CONNECT_TIMEOUT`]; it fails naming the node it
//!   could not reach. After the handshake every line on it, both ways, is sealed
//!   ([`phalanx_gang::seal`]: AES-256-GCM under a key of this connection, in order), so
//!   the ranks' environment — the job's secret among it — never crosses the network in
//!   clear. To an ssh host: `CMD… HOST exec PHALANX proxy` (the
//!   [`SshSettings`]), in its own session (no terminal: it cannot stop to ask for a
//!   password) and killed if the launcher dies (PDEATHSIG); whether the host is
//!   reachable shows in its events ([`Event::Lost`] with `started: false`, naming ssh's
//!   exit and the last lines of its stderr).
//! * A reader thread per connection writes the ranks' output lines to the launcher's
//!   stdout or stderr (tagged `[rank] ` like local ranks', one write per line under the
//!   stream's lock) and hands every other event to the launcher's loop
//!   ([`Agents::try_event`]), in the order the agent sent them — a rank's `Exited` comes
//!   after its output. A connection that closes or sends something malformed or longer
//!   than [`MAX_LINE`] (sealed: [`MAX_SEALED_LINE`]), or a sealed line that does not open
//!   (altered, replayed, reordered, dropped), is [`Event::Lost`], naming the host and
//!   the reason — except that up to
//!   [`MAX_CHATTER`] lines an ssh login prints before its proxy's first event (a chatty
//!   shell start-up file) are shown on stderr and skipped.
//! * Requests are written with a bound ([`SEND_TIMEOUT`] to a node; to ssh through a
//!   queue of at most [`MAX_QUEUED`] requests and a writer thread); a failed write is
//!   reported by the reader as the connection's loss. A request too long to seal is
//!   refused before anything is written (the connection goes on).
//! * Dropping [`Agents`] closes the connections: each agent then kills whatever it
//!   started for this job (its lifeline contract). For ssh hosts the drop waits, up to
//!   [`SSH_LINGER`] in all, for every ssh to end — after its proxy killed and reaped its
//!   ranks and its output reached the launcher — and kills the ssh sessions still there.

use crate::hosts::Host;
use phalanx_gang::proto::{AgentEvent, AgentRequest, SpawnSpec, MAX_LINE};
use phalanx_gang::seal::{Opener, Sealer, MAX_SEALED_LINE};
use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bound on connecting to one node daemon.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on writing one request to a node daemon.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Requests waiting to be written to one ssh host.
pub const MAX_QUEUED: usize = 4096;
/// How long a lost ssh's stderr may take to end after ssh did (a helper it started may
/// hold it open).
const STDERR_GRACE: Duration = Duration::from_millis(500);
/// How long closing waits for the ssh hosts to end (module docs).
pub const SSH_LINGER: Duration = Duration::from_secs(10);
/// Lines of an ssh's stderr kept to explain its loss, and their longest length.
const STDERR_TAIL: usize = 6;
/// Lines of login output tolerated before an ssh host's proxy speaks.
const MAX_CHATTER: usize = 100;
const STDERR_LINE: usize = 300;

/// How ssh hosts are reached.
#[derive(Debug, Clone)]
pub struct SshSettings {
    /// The remote shell and its options (`--launcher-cmd`); host and command follow.
    pub cmd: Vec<String>,
    /// `phalanx` on the remote hosts.
    pub exe: PathBuf,
}

/// What the launcher's loop learns from the agents.
#[derive(Debug)]
pub enum Event {
    /// Rank `rank` runs as `pid` on the host of agent `agent`.
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
    /// The connection to agent `agent` (`node`) is gone: its ranks are dead. `started`:
    /// it had said anything before (else the host was never reached).
    Lost {
        agent: usize,
        node: String,
        why: String,
        started: bool,
    },
}

/// An ssh connection to a host's `phalanx proxy`.
struct SshLink {
    queue: Option<SyncSender<Vec<u8>>>,
    child: Arc<Mutex<Child>>,
    reader: Option<JoinHandle<()>>,
}

enum Link {
    /// A node daemon's connection, and the sealer of its requests (boxed: AES-256's
    /// key schedule is large).
    Tcp(TcpStream, Box<Sealer>),
    Ssh(SshLink),
}

struct Agent {
    /// `node LABEL` or `host HOST`.
    label: String,
    link: Link,
    /// A write failed: the connection was shut down (its reader reports the loss).
    dead: bool,
}

/// The connections of one job to its agents.
pub struct Agents {
    agents: Vec<Agent>,
    events: Receiver<Event>,
}

#[derive(PartialEq)]
enum Key<'a> {
    Node(&'a str, SocketAddrV4),
    Ssh(&'a str),
}

impl Agents {
    /// Connects to every agent host among `hosts`; with each rank's agent index (`None`
    /// for ranks the launcher starts itself).
    pub fn connect(
        hosts: &[Host],
        secret_file: Option<&Path>,
        ssh: Option<&SshSettings>,
        tag: bool,
    ) -> Result<(Agents, Vec<Option<usize>>), String> {
        let mut keys: Vec<Key> = Vec::new();
        let mut of_rank = Vec::with_capacity(hosts.len());
        for h in hosts {
            let key = match h {
                Host::Node { label, agent } => Key::Node(label, *agent),
                Host::Ssh(target) => Key::Ssh(target),
                Host::Local | Host::Netns(_) => {
                    of_rank.push(None);
                    continue;
                }
            };
            of_rank.push(Some(match keys.iter().position(|k| *k == key) {
                Some(i) => i,
                None => {
                    keys.push(key);
                    keys.len() - 1
                }
            }));
        }
        let (tx, events) = channel();
        // Built first: on an error below, dropping it shuts down what was opened.
        let mut all = Agents {
            agents: Vec::with_capacity(keys.len()),
            events,
        };
        let mut secret = None;
        for (i, key) in keys.into_iter().enumerate() {
            let agent = match key {
                Key::Node(label, addr) => {
                    if secret.is_none() {
                        let path = secret_file
                            .ok_or("node hosts need the cluster secret (--agent-secret)")?;
                        secret = Some(std::fs::read_to_string(path).map_err(|e| {
                            format!("cannot read the cluster secret {}: {e}", path.display())
                        })?);
                    }
                    let s = secret.as_deref().unwrap_or_default().trim();
                    open_node(i, label, addr, s, tag, tx.clone())?
                }
                Key::Ssh(target) => {
                    let settings = ssh.ok_or("ssh hosts need the ssh settings")?;
                    open_ssh(i, target, settings, tag, tx.clone())?
                }
            };
            all.agents.push(agent);
        }
        Ok((all, of_rank))
    }

    /// Asks agent `i` to start a rank.
    pub fn spawn(&mut self, i: usize, spec: SpawnSpec) -> Result<(), String> {
        let label = self.agents[i].label.clone();
        self.send(i, &AgentRequest::Spawn(spec))
            .map_err(|e| format!("cannot ask {label} to start a rank: {e}"))
    }

    /// Sends `sig` to rank `rank`'s process group through agent `i` (best effort: a lost
    /// agent's ranks are already dead).
    pub fn signal(&mut self, i: usize, rank: u32, sig: i32) {
        let _ = self.send(i, &AgentRequest::Signal { rank, sig });
    }

    /// Whether agent `i` is an ssh host (else a node daemon).
    pub fn is_ssh(&self, i: usize) -> bool {
        matches!(self.agents[i].link, Link::Ssh(_))
    }

    fn send(&mut self, i: usize, req: &AgentRequest) -> io::Result<()> {
        let a = &mut self.agents[i];
        if a.dead {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the connection to this agent failed",
            ));
        }
        let r = match &mut a.link {
            Link::Tcp(stream, sealer) => {
                // Refused before anything is written: the connection is still whole.
                let line = sealer.seal_line(req).map_err(io::Error::other)?;
                stream
                    .set_write_timeout(Some(SEND_TIMEOUT))
                    .and_then(|()| stream.write_all(&line))
            }
            Link::Ssh(ssh) => match ssh
                .queue
                .as_ref()
                .map(|q| q.try_send(phalanx_boot::frame::encode(req)))
            {
                Some(Ok(())) => Ok(()),
                Some(Err(TrySendError::Full(_))) => Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!("more than {MAX_QUEUED} requests wait for ssh"),
                )),
                Some(Err(TrySendError::Disconnected(_))) | None => {
                    Err(io::Error::new(io::ErrorKind::BrokenPipe, "ssh is gone"))
                }
            },
        };
        if r.is_err() {
            // Half a line may be out: nothing more can follow it. The reader sees the
            // end and reports the loss.
            a.dead = true;
            match &mut a.link {
                Link::Tcp(stream, _) => {
                    let _ = stream.shutdown(Shutdown::Both);
                }
                Link::Ssh(ssh) => {
                    ssh.queue = None;
                    let _ = lock(&ssh.child).kill();
                }
            }
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
        for a in &mut self.agents {
            match &mut a.link {
                Link::Tcp(stream, _) => {
                    let _ = stream.shutdown(Shutdown::Both);
                }
                // The writer thread ends and closes ssh's stdin: the proxy's lifeline.
                Link::Ssh(ssh) => ssh.queue = None,
            }
        }
        let deadline = Instant::now() + SSH_LINGER;
        for a in &mut self.agents {
            let Link::Ssh(ssh) = &mut a.link else {
                continue;
            };
            while ssh.reader.as_ref().is_some_and(|r| !r.is_finished()) && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            let mut child = lock(&ssh.child);
            let _ = child.kill(); // a no-op once it was reaped
            let _ = child.wait();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Connects to a node daemon, authenticates and keys the sealed channel.
fn open_node(
    i: usize,
    label: &str,
    addr: SocketAddrV4,
    secret: &str,
    tag: bool,
    tx: Sender<Event>,
) -> Result<Agent, String> {
    let open = || -> io::Result<(TcpStream, Sealer, Opener)> {
        let mut s = TcpStream::connect_timeout(&SocketAddr::V4(addr), CONNECT_TIMEOUT)?;
        s.set_nodelay(true)?;
        s.set_write_timeout(Some(SEND_TIMEOUT))?;
        // The daemon's challenge, answered with the proof of the cluster secret and a
        // nonce of ours: both key the channel.
        s.set_read_timeout(Some(CONNECT_TIMEOUT))?;
        let ch = phalanx_gang::proto::read_challenge(&mut s)?;
        s.set_read_timeout(None)?;
        let (hello, sealer, opener) = phalanx_gang::seal::client_hello(secret, &ch)?;
        s.write_all(&phalanx_boot::frame::encode(&hello))?;
        Ok((s, sealer, opener))
    };
    let (stream, sealer, opener) =
        open().map_err(|e| format!("cannot reach node daemon {label} at {addr}: {e}"))?;
    let reader = stream.try_clone().map_err(|e| e.to_string())?;
    let node = format!("node {label}");
    let thread_node = node.clone();
    std::thread::Builder::new()
        .name(format!("phalanx-agent-{i}"))
        .spawn(move || read_events(i, thread_node, reader, Some(opener), tag, tx, None))
        .map_err(|e| format!("cannot start a reader thread: {e}"))?;
    Ok(Agent {
        label: node,
        link: Link::Tcp(stream, Box::new(sealer)),
        dead: false,
    })
}

/// Starts `CMD… TARGET exec PHALANX proxy` with its writer, reader and stderr threads.
fn open_ssh(
    i: usize,
    target: &str,
    s: &SshSettings,
    tag: bool,
    tx: Sender<Event>,
) -> Result<Agent, String> {
    let exe = s
        .exe
        .to_str()
        .and_then(|e| shlex::try_quote(e).ok())
        .ok_or_else(|| format!("cannot quote {} for a remote shell", s.exe.display()))?;
    let launcher = std::process::id() as libc::pid_t;
    let mut cmd = Command::new(&s.cmd[0]);
    cmd.args(&s.cmd[1..])
        .arg(target)
        .arg(format!("exec {exe} proxy"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (setsid, prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            // No controlling terminal: no password prompt, no Ctrl-C of its own.
            libc::setsid();
            crate::spawn::die_with_launcher(launcher)
        });
    }
    let node = format!("host {target}");
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {} to reach {node}: {e}", s.cmd[0]))?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("cannot connect to {} for {node}", s.cmd[0]));
    };
    let child = Arc::new(Mutex::new(child));
    let (queue, requests) = sync_channel::<Vec<u8>>(MAX_QUEUED);
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let threads = (|| -> io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name(format!("phalanx-ssh-in-{i}"))
            .spawn(move || {
                for line in requests {
                    if stdin.write_all(&line).is_err() {
                        break; // the reader reports the loss
                    }
                }
            })?;
        let t = tail.clone();
        let (err_tx, stderr_done) = channel::<()>();
        std::thread::Builder::new()
            .name(format!("phalanx-ssh-err-{i}"))
            .spawn(move || {
                keep_tail(stderr, &t);
                let _ = err_tx.send(());
            })?;
        let (c, n) = (child.clone(), node.clone());
        let why = Box::new(move || {
            // ssh's exit and last words explain the loss; both waits are bounded.
            let status = wait_bounded(&c, Duration::from_secs(2));
            let _ = stderr_done.recv_timeout(STDERR_GRACE);
            let mut why = match status {
                Some(st) => format!("ssh {}", crate::status::describe(st).0),
                None => "ssh did not end".to_string(),
            };
            let t = lock(&tail);
            if !t.is_empty() {
                why.push_str(": ");
                why.push_str(&Vec::from(t.clone()).join(" | "));
            }
            why
        }) as Box<dyn FnOnce() -> String + Send>;
        std::thread::Builder::new()
            .name(format!("phalanx-ssh-out-{i}"))
            .spawn(move || read_events(i, n, stdout, None, tag, tx, Some(why)))
    })();
    let reader = match threads {
        Ok(r) => r,
        Err(e) => {
            let _ = lock(&child).kill();
            return Err(format!("cannot start the threads for {node}: {e}"));
        }
    };
    Ok(Agent {
        label: node,
        link: Link::Ssh(SshLink {
            queue: Some(queue),
            child,
            reader: Some(reader),
        }),
        dead: false,
    })
}

/// Keeps the last [`STDERR_TAIL`] lines of `src` (each cut to [`STDERR_LINE`] bytes).
fn keep_tail(src: impl Read, tail: &Mutex<VecDeque<String>>) {
    crate::output::copy_lines(src, &[], STDERR_LINE as u64, |line| {
        let text = String::from_utf8_lossy(line).trim_end().to_string();
        if text.is_empty() {
            return;
        }
        let mut t = lock(tail);
        if t.len() == STDERR_TAIL {
            t.pop_front();
        }
        t.push_back(text);
    });
}

/// The exit status of `child` if it ends within `bound`.
fn wait_bounded(child: &Mutex<Child>, bound: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + bound;
    loop {
        if let Ok(Some(st)) = lock(child).try_wait() {
            return Some(st);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The reader thread of agent `i` (module docs). `opener`: a node daemon's sealed
/// lines; `why`: explains a closed connection (an ssh's exit and stderr).
fn read_events(
    i: usize,
    node: String,
    src: impl Read,
    mut opener: Option<Opener>,
    tag: bool,
    tx: Sender<Event>,
    why: Option<Box<dyn FnOnce() -> String + Send>>,
) {
    let mut reader = BufReader::new(src);
    let mut line = Vec::with_capacity(1024);
    let mut started = false;
    // Lines a login shell may print before the proxy speaks (a chatty .bashrc): shown,
    // not taken for the protocol; at most this many.
    let mut chatter = if why.is_some() { MAX_CHATTER } else { 0 };
    // A line and its newline.
    let limit = if opener.is_some() {
        MAX_SEALED_LINE
    } else {
        MAX_LINE
    } as u64
        + 1;
    let cause = loop {
        line.clear();
        match (&mut reader).take(limit).read_until(b'\n', &mut line) {
            Ok(0) => break "the connection closed".to_string(),
            Ok(_) if line.last() != Some(&b'\n') => break "it sent an over-long line".to_string(),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => break format!("reading from it failed: {e}"),
        }
        let parsed = match opener.as_mut() {
            Some(o) => match o.open_line_msg::<AgentEvent>(&line) {
                Ok(ev) => Ok(ev),
                Err(e) => break format!("its sealed connection broke: {e}"),
            },
            None => serde_json::from_slice::<AgentEvent>(&line),
        };
        let ev = match parsed {
            Ok(ev) => ev,
            Err(_) if !started && chatter > 0 => {
                chatter -= 1;
                let text = String::from_utf8_lossy(&line);
                eprintln!("phalanx: {node} (login output): {}", text.trim_end());
                continue;
            }
            Err(e) => break format!("it sent a malformed event: {e}"),
        };
        started = true;
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
            break "the launcher stopped listening".to_string();
        }
    };
    let why = match why {
        Some(f) if cause == "the connection closed" => f(),
        Some(f) => format!("{cause}; {}", f()),
        None if cause == "the connection closed" => {
            "its node daemon closed the connection (daemon down?)".to_string()
        }
        None => cause,
    };
    let _ = tx.send(Event::Lost {
        agent: i,
        node,
        why,
        started,
    });
}

#[cfg(test)]
mod tests {
    //! The launcher's end of a node daemon's connection against a fake agent on a real
    //! socket: the agent's side of the handshake and channel, and every byte the
    //! launcher writes recorded.
    use super::*;
    use phalanx_boot::frame::encode;
    use phalanx_gang::proto::{challenge, Hello};
    use std::net::TcpListener;

    const SECRET: &str = "the cluster secret of this test";

    /// The launcher's side of the socket, every byte read from it recorded.
    struct Tap(TcpStream, Vec<u8>);

    impl Read for Tap {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.extend_from_slice(&buf[..n]);
            Ok(n)
        }
    }

    /// Runs `script` as a node daemon's agent for one launcher (after the real
    /// handshake, with the agent's end of the channel); with every byte the launcher
    /// wrote, hello included, once it closed the connection.
    fn fake_agent<T: Send + 'static>(
        script: impl FnOnce(&mut TcpStream, &mut BufReader<Tap>, Sealer, Opener) -> T + Send + 'static,
    ) -> (SocketAddrV4, std::thread::JoinHandle<(Vec<u8>, T)>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let SocketAddr::V4(addr) = listener.local_addr().unwrap() else {
            unreachable!("bound to an IPv4 address")
        };
        let agent = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let ch = challenge().unwrap();
            s.write_all(&encode(&ch)).unwrap();
            let mut reader = BufReader::new(Tap(s.try_clone().unwrap(), Vec::new()));
            let h: Hello = serde_json::from_slice(&raw_line(&mut reader)).unwrap();
            let (sealer, opener) =
                phalanx_gang::seal::accept(SECRET, &ch, &h).expect("the launcher's hello");
            let out = script(&mut s, &mut reader, sealer, opener);
            let _ = reader.read_to_end(&mut Vec::new());
            (reader.into_inner().1, out)
        });
        (addr, agent)
    }

    fn connect(addr: SocketAddrV4, name: &str) -> Agents {
        let path = std::env::temp_dir().join(format!("phx-seal-{name}-{}", std::process::id()));
        std::fs::write(&path, SECRET).unwrap();
        let hosts = [Host::Node {
            label: "n0".into(),
            agent: addr,
        }];
        let (agents, of_rank) = Agents::connect(&hosts, Some(&path), None, false).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(of_rank, vec![Some(0)]);
        agents
    }

    fn next_event(agents: &Agents) -> Event {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(ev) = agents.try_event() {
                return ev;
            }
            assert!(Instant::now() < deadline, "no event from the fake agent");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Reads the launcher's next line, as written.
    fn raw_line(reader: &mut BufReader<Tap>) -> Vec<u8> {
        let mut line = Vec::new();
        reader.read_until(b'\n', &mut line).unwrap();
        line
    }

    #[test]
    fn the_job_secret_and_the_environment_never_cross_the_wire_in_clear() {
        let job_secret = phalanx_boot::auth::Secret::new().unwrap().to_hex();
        let value = "a value nobody on the path may read";
        let (addr, agent) = fake_agent(|s, reader, mut sealer, mut opener| {
            let spawn = opener
                .open_line_msg::<AgentRequest>(&raw_line(reader))
                .unwrap();
            let ev = AgentEvent::Spawned { rank: 0, pid: 4242 };
            s.write_all(&sealer.seal_line(&ev).unwrap()).unwrap();
            let ev = AgentEvent::Output {
                rank: 0,
                stderr: true,
                line: "echoed back: PHALANX_TEST_VALUE\n".into(),
            };
            s.write_all(&sealer.seal_line(&ev).unwrap()).unwrap();
            let signal = opener
                .open_line_msg::<AgentRequest>(&raw_line(reader))
                .unwrap();
            (spawn, signal)
        });
        let mut agents = connect(addr, "clear");
        let spec = SpawnSpec {
            rank: 0,
            size: 1,
            boot: "127.0.0.1:1".into(),
            prog: "/bin/true".into(),
            args: vec![],
            env: vec![
                (phalanx_boot::ENV_SECRET.into(), job_secret.clone()),
                ("PHALANX_TEST_VALUE".into(), value.into()),
            ],
            cwd: "/".into(),
            bind: false,
        };
        agents.spawn(0, spec.clone()).unwrap();
        match next_event(&agents) {
            Event::Spawned { agent, rank, pid } => assert_eq!((agent, rank, pid), (0, 0, 4242)),
            ev => panic!("{ev:?}"),
        }
        agents.signal(0, 0, libc::SIGTERM);
        drop(agents);
        let (wire, (spawn, signal)) = agent.join().unwrap();
        // The agent read exactly what was asked…
        assert_eq!(spawn, AgentRequest::Spawn(spec));
        assert_eq!(
            signal,
            AgentRequest::Signal {
                rank: 0,
                sig: libc::SIGTERM
            }
        );
        // …and nothing of it was readable on the way.
        let wire = String::from_utf8_lossy(&wire).to_lowercase();
        assert!(wire.len() > 200, "{wire}");
        for clear in [
            job_secret.as_str(),
            &job_secret[..16],
            value,
            "phalanx_job_secret",
            "phalanx_test_value",
            "spawn",
            "signal",
            "/bin/true",
        ] {
            assert!(!wire.contains(clear), "{clear:?} on the wire: {wire}");
        }
        // Past the hello, only sealed lines.
        let lines: Vec<&str> = wire.lines().collect();
        assert_eq!(lines.len(), 3, "{wire}");
        assert!(lines[0].contains("\"proof\"") && lines[0].contains("\"nonce\""));
        for l in &lines[1..] {
            let hex = l.trim_matches('"');
            assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{l}");
        }
    }

    /// The launcher's loss of the fake agent after `script` sent its lines.
    fn lost_after(name: &str, started: bool, script: fn(&mut Sealer) -> Vec<Vec<u8>>) -> String {
        let (addr, agent) = fake_agent(move |s, _, mut sealer, _| {
            for line in script(&mut sealer) {
                s.write_all(&line).unwrap();
            }
        });
        let agents = connect(addr, name);
        let why = loop {
            match next_event(&agents) {
                Event::Lost {
                    agent,
                    node,
                    why,
                    started: s,
                } => {
                    assert_eq!((agent, node.as_str(), s), (0, "node n0", started), "{why}");
                    break why;
                }
                Event::Spawned { .. } => {}
                ev => panic!("{ev:?}"),
            }
        };
        drop(agents);
        agent.join().unwrap();
        why
    }

    #[test]
    fn altered_replayed_or_dropped_events_end_the_connection_naming_why() {
        fn ev(pid: u32) -> AgentEvent {
            AgentEvent::Spawned { rank: 0, pid }
        }
        let replayed = lost_after("replay", true, |s| {
            let l = s.seal_line(&ev(1)).unwrap();
            vec![l.clone(), l]
        });
        assert!(
            replayed.contains("line 0 arrived where line 1 was due"),
            "{replayed}"
        );
        let dropped = lost_after("drop", true, |s| {
            let l = s.seal_line(&ev(1)).unwrap();
            let _ = s.seal_line(&ev(2)).unwrap();
            vec![l, s.seal_line(&ev(3)).unwrap()]
        });
        assert!(
            dropped.contains("line 2 arrived where line 1 was due"),
            "{dropped}"
        );
        let altered = lost_after("alter", false, |s| {
            let mut l = s.seal_line(&ev(1)).unwrap();
            l[30] = if l[30] == b'0' { b'1' } else { b'0' };
            vec![l]
        });
        assert!(
            altered.contains("line 0 does not authenticate"),
            "{altered}"
        );
        let plain = lost_after("plain", false, |_| vec![encode(&ev(1))]);
        assert!(plain.contains("malformed sealed line"), "{plain}");
        let long = lost_after("long", false, |_| vec![vec![b'0'; MAX_SEALED_LINE + 2]]);
        assert!(long.contains("over-long"), "{long}");
    }
}
