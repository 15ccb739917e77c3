//! The rank side of the rendezvous: [`BootClient`].
//!
//! Contract: [`BootClient::connect`] returns only after the launcher's [`Table`] arrived (the
//! start-up barrier) and takes at most about `timeout`. Afterwards the socket is nonblocking:
//! [`BootClient::poll`] never blocks, and the `send_*`/`reply_*` calls block at most
//! [`SEND_TIMEOUT`] for socket buffer space. EOF or a reset from the launcher is always
//! [`BootError::LauncherGone`].
//!
//! Under a PMI server instead of a launcher ([`BootClient::connect_pmi`], `srun
//! --mpi=pmi2`): the table comes from the job's key-value space (every rank puts its
//! endpoint, rank 0 the job key; a fence; every rank gets all), the host's
//! shared-memory decision from every rank's outcome after a second fence (decided as
//! the launcher decides), Finalize's release from a fence that completes while the rank
//! keeps serving its peers; queries, halts and statistics lines have no launcher to go
//! to (statistics are printed by the rank itself).

use crate::frame::{send_blocking, table_line_limit, LineReader, Next};
use crate::msg::{Control, Endpoint, Hello, LauncherMsg, RankMsg, ShmOutcome, SpawnRequest, Table};
use crate::pmi::{Pmi, PmiEnv};
use crate::{BootEnv, BootError, MAX_LINE};
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Longest time a send to the launcher may wait for socket buffer space.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest time [`BootClient::connect`] keeps retrying a refused connection.
const CONNECT_RETRY: Duration = Duration::from_secs(5);

/// Status text a rank reports when queried during start-up.
const STARTUP_STATUS: &str = "in start-up: waiting for all ranks to connect to the launcher";

/// A rank's connection to its launcher (or its PMI server).
#[derive(Debug)]
pub struct BootClient {
    /// The launcher connection (`None` under PMI).
    stream: Option<TcpStream>,
    reader: LineReader,
    /// Bootstrapped through PMI.
    pmi: Option<Box<PmiBoot>>,
    /// The job's secret (from the environment, or under PMI from the key-value space).
    secret: crate::Secret,
}

/// The PMI side of a [`BootClient`].
#[derive(Debug)]
struct PmiBoot {
    pmi: Pmi,
    rank: u32,
    /// The ranks of this rank's host.
    local: Vec<u32>,
    released: bool,
}

impl BootClient {
    /// Connects to the launcher (retrying briefly), sends `Hello{rank, pid, endpoint}` and
    /// waits, bounded by `timeout`, for the [`Table`]. An `Abort` from the launcher gives
    /// [`BootError::Aborted`]. On success the stream is nonblocking.
    pub fn connect(
        env: &BootEnv,
        endpoint: Endpoint,
        timeout: Duration,
    ) -> Result<(BootClient, Table), BootError> {
        let deadline = Instant::now() + timeout;
        let mut stream = connect_retrying(env, deadline)?;
        stream.set_nodelay(true)?;
        let mut reader = LineReader::new(table_line_limit(env.size));
        // The launcher's challenge first, answered by the proof of the secret.
        stream.set_read_timeout(Some(remaining(deadline)?))?;
        let nonce = match reader.next_msg::<LauncherMsg, _>(&mut stream)? {
            Next::Msg(LauncherMsg::Challenge { nonce }) => nonce,
            Next::Msg(LauncherMsg::Abort { reason }) => return Err(BootError::Aborted(reason)),
            Next::Msg(other) => {
                return Err(BootError::Protocol(format!(
                    "the launcher began with {other:?}, not a challenge"
                )))
            }
            Next::Eof => return Err(BootError::LauncherGone),
            Next::Pending => return Err(BootError::Timeout),
        };
        let hello = RankMsg::Hello(Hello {
            rank: env.rank,
            pid: std::process::id(),
            endpoint: endpoint.clone(),
            proof: crate::auth::proof(&env.secret, &nonce, env.rank),
            clock_ns: crate::monotonic_ns(),
        });
        send_blocking(&mut stream, &hello, remaining(deadline)?, false)?;
        let table = loop {
            stream.set_read_timeout(Some(remaining(deadline)?))?;
            match reader.next_msg::<LauncherMsg, _>(&mut stream)? {
                Next::Msg(LauncherMsg::Table(t)) => break t,
                Next::Msg(LauncherMsg::Abort { reason }) => return Err(BootError::Aborted(reason)),
                Next::Msg(LauncherMsg::Query) => {
                    let status = RankMsg::Status {
                        text: STARTUP_STATUS.into(),
                        waits_for: Vec::new(),
                    };
                    send_blocking(&mut stream, &status, remaining(deadline)?, false)?;
                }
                Next::Msg(LauncherMsg::Release) => {
                    return Err(BootError::Protocol("release before the table".into()))
                }
                Next::Msg(LauncherMsg::Spawned { .. } | LauncherMsg::SpawnFailed { .. }) => {
                    return Err(BootError::Protocol(
                        "a spawn answer before the table".into(),
                    ))
                }
                Next::Msg(LauncherMsg::Shm { .. }) => {
                    return Err(BootError::Protocol(
                        "shared-memory decision before the table".into(),
                    ))
                }
                Next::Msg(LauncherMsg::Halt { .. } | LauncherMsg::Continue) => {
                    return Err(BootError::Protocol("halt before the table".into()))
                }
                Next::Msg(LauncherMsg::Challenge { .. }) => {
                    return Err(BootError::Protocol("a second challenge".into()))
                }
                Next::Eof => return Err(BootError::LauncherGone),
                Next::Pending => return Err(BootError::Timeout),
            }
        };
        check_table(env, &endpoint, &table)?;
        reader.set_limit(MAX_LINE);
        stream.set_read_timeout(None)?;
        stream.set_nonblocking(true)?;
        Ok((
            BootClient {
                stream: Some(stream),
                reader,
                pmi: None,
                secret: env.secret.clone(),
            },
            table,
        ))
    }

    /// Bootstraps through the PMI server of `env` (module docs), bounded by `timeout`
    /// per exchange: the table of every rank's endpoint and the job key.
    pub fn connect_pmi(
        env: &PmiEnv,
        endpoint: Endpoint,
        timeout: Duration,
    ) -> Result<(BootClient, Table), BootError> {
        let mut pmi = Pmi::init(env, timeout)?;
        if env.rank == 0 {
            let mut key = [0u8; 8];
            std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut key))?;
            pmi.put("phx-key", &key)?;
            // The job's secret: the key-value space is the job's own (the PMI server
            // serves only its processes).
            pmi.put("phx-secret", &crate::Secret::new()?.0)?;
        }
        let mine = serde_json::to_vec(&endpoint)
            .map_err(|e| BootError::Protocol(format!("endpoint: {e}")))?;
        pmi.put(&format!("phx-ep-{}", env.rank), &mine)?;
        pmi.fence()?;
        let key = pmi.get("phx-key")?;
        let secret = crate::Secret(
            pmi.get("phx-secret")?
                .try_into()
                .map_err(|_| BootError::Protocol("PMI job secret is not 32 bytes".into()))?,
        );
        let job_key = u64::from_le_bytes(
            key.try_into()
                .map_err(|_| BootError::Protocol("PMI job key is not 8 bytes".into()))?,
        );
        let mut endpoints = Vec::with_capacity(env.size as usize);
        for r in 0..env.size {
            let v = pmi.get(&format!("phx-ep-{r}"))?;
            let e: Endpoint = serde_json::from_slice(&v)
                .map_err(|e| BootError::Protocol(format!("rank {r}'s endpoint: {e}")))?;
            endpoints.push(e);
        }
        let hosts: Vec<(u32, &crate::HostInfo)> = (endpoints.iter().enumerate())
            .map(|(r, e)| (r as u32, &e.host))
            .collect();
        crate::check_hosts(&hosts).map_err(BootError::Protocol)?;
        let table = Table { job_key, endpoints };
        let local = (table.endpoints.iter().enumerate())
            .filter(|(_, e)| {
                e.host.boot_id == endpoint.host.boot_id
                    && e.host.netns_ino == endpoint.host.netns_ino
            })
            .map(|(r, _)| r as u32)
            .collect();
        if table.endpoints[env.rank as usize] != endpoint {
            return Err(BootError::Protocol(format!(
                "PMI table entry for rank {} is not this rank's endpoint",
                env.rank
            )));
        }
        Ok((
            BootClient {
                stream: None,
                secret,
                reader: LineReader::new(MAX_LINE),
                pmi: Some(Box::new(PmiBoot {
                    pmi,
                    rank: env.rank,
                    local,
                    released: false,
                })),
            },
            table,
        ))
    }

    /// The job's secret: the key of its datagram MAC derives from it.
    pub fn secret(&self) -> &crate::Secret {
        &self.secret
    }

    /// The socket, for the engine to poll for readability together with its own sockets.
    pub fn fd(&self) -> RawFd {
        match &self.pmi {
            Some(p) => p.pmi.fd(),
            None => self.stream.as_ref().map_or(-1, |s| s.as_raw_fd()),
        }
    }

    /// Nonblocking: the next control message if one is complete, `Ok(None)` otherwise.
    /// EOF or reset → [`BootError::LauncherGone`].
    pub fn poll(&mut self) -> Result<Option<Control>, BootError> {
        if let Some(p) = self.pmi.as_mut() {
            // Only Finalize's fence ever answers: it is the release.
            if !p.released && p.pmi.fence_done()? {
                p.released = true;
                p.pmi.finalize()?;
                return Ok(Some(Control::Release));
            }
            return Ok(None);
        }
        let Some(stream) = self.stream.as_mut() else {
            return Ok(None);
        };
        match self.reader.next_msg::<LauncherMsg, _>(stream)? {
            Next::Msg(LauncherMsg::Query) => Ok(Some(Control::Query)),
            Next::Msg(LauncherMsg::Release) => Ok(Some(Control::Release)),
            Next::Msg(LauncherMsg::Abort { reason }) => Ok(Some(Control::Abort(reason))),
            Next::Msg(LauncherMsg::Shm { use_shm }) => Ok(Some(Control::Shm(use_shm))),
            Next::Msg(LauncherMsg::Halt { limit_ms }) => {
                Ok(Some(Control::Halt(Duration::from_millis(limit_ms))))
            }
            Next::Msg(LauncherMsg::Continue) => Ok(Some(Control::Continue)),
            Next::Msg(LauncherMsg::Spawned { first, endpoints }) => {
                Ok(Some(Control::Spawned(Ok((first, endpoints)))))
            }
            Next::Msg(LauncherMsg::SpawnFailed { reason }) => {
                Ok(Some(Control::Spawned(Err(reason))))
            }
            Next::Msg(LauncherMsg::Table(_)) => {
                Err(BootError::Protocol("second table from the launcher".into()))
            }
            Next::Msg(LauncherMsg::Challenge { .. }) => {
                Err(BootError::Protocol("a challenge after start-up".into()))
            }
            Next::Pending => Ok(None),
            Next::Eof => Err(BootError::LauncherGone),
        }
    }

    /// Answers [`Control::Query`]: what this rank is waiting on.
    pub fn reply_status(&mut self, text: &str) -> Result<(), BootError> {
        self.reply_status_waiting(text, Vec::new())
    }

    /// Answers [`Control::Query`] from inside a collective: what this rank is waiting
    /// on, and the ranks whose part it waits for.
    pub fn reply_status_waiting(
        &mut self,
        text: &str,
        waits_for: Vec<u32>,
    ) -> Result<(), BootError> {
        if self.pmi.is_some() {
            return Ok(());
        }
        self.send(&RankMsg::Status {
            text: text.into(),
            waits_for,
        })
    }

    /// Asks the launcher for new processes; the answer arrives as
    /// [`Control::Spawned`]. Not available under a PMI server.
    pub fn send_spawn(&mut self, req: SpawnRequest) -> Result<(), BootError> {
        if self.pmi.is_some() {
            return Err(BootError::Protocol(
                "spawning processes needs `phalanx run` (not a PMI server such as srun)".into(),
            ));
        }
        self.send(&RankMsg::Spawn(req))
    }

    /// Finalize: this rank has drained (with a warning if the drain gave up on peers).
    /// The rank must then keep serving its peers until [`Control::Release`].
    pub fn send_drained(&mut self, warning: Option<String>) -> Result<(), BootError> {
        if let Some(p) = self.pmi.as_mut() {
            if let Some(w) = warning {
                eprintln!("phalanx: rank {}: finalize warning: {w}", p.rank);
            }
            // Released when every rank has drained: the fence completes (see `poll`).
            return p.pmi.fence_start();
        }
        self.send(&RankMsg::Drained { warning })
    }

    /// Answers [`Control::Halt`]: halted, with what was saved (or why the drain failed).
    pub fn send_halted(
        &mut self,
        datagrams: u64,
        bytes: u64,
        ms: u64,
        save_us: u64,
        error: Option<String>,
    ) -> Result<(), BootError> {
        self.send(&RankMsg::Halted {
            datagrams,
            bytes,
            ms,
            save_us,
            error,
        })
    }

    /// Reports how joining the host's shared memory went (once, right after the table).
    pub fn send_shm(&mut self, outcome: ShmOutcome) -> Result<(), BootError> {
        if let Some(p) = self.pmi.as_mut() {
            // A value has a bound: a long reason (it lists the host's ranks) is cut.
            let outcome = match outcome {
                ShmOutcome::Failed { reason, required } => ShmOutcome::Failed {
                    reason: reason.chars().take(200).collect(),
                    required,
                },
                o => o,
            };
            let v = serde_json::to_vec(&outcome)
                .map_err(|e| BootError::Protocol(format!("shared-memory outcome: {e}")))?;
            return p.pmi.put(&format!("phx-shm-{}", p.rank), &v);
        }
        self.send(&RankMsg::Shm(outcome))
    }

    /// Waits, bounded by `timeout`, for the launcher's shared-memory decision for this
    /// host, answering `Query` with `status` meanwhile. `Abort` gives
    /// [`BootError::Aborted`]; no decision in time gives [`BootError::Timeout`].
    pub fn wait_shm_decision(
        &mut self,
        timeout: Duration,
        status: &str,
    ) -> Result<bool, BootError> {
        if let Some(p) = self.pmi.as_mut() {
            return p.shm_decision();
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.poll()? {
                Some(Control::Shm(b)) => return Ok(b),
                Some(Control::Query) => self.reply_status(status)?,
                Some(Control::Abort(reason)) => return Err(BootError::Aborted(reason)),
                Some(
                    Control::Release | Control::Halt(_) | Control::Continue | Control::Spawned(_),
                ) => {
                    return Err(BootError::Protocol(
                        "release, halt or spawn answer before the shared-memory decision".into(),
                    ))
                }
                None => {
                    let left = remaining(deadline)?;
                    let mut pfd = libc::pollfd {
                        fd: self.fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    let ms = left.as_millis().clamp(1, 100) as i32;
                    // SAFETY: one valid pollfd on a socket we own.
                    unsafe { libc::poll(&mut pfd, 1, ms) };
                }
            }
        }
    }

    /// Sends part of the rank's timeline.
    pub fn send_trace(&mut self, chunk: crate::TraceChunk) -> Result<(), BootError> {
        self.send(&RankMsg::Trace(chunk))
    }

    /// Sends the rank's counters for the launcher's per-job summary.
    pub fn send_stats(&mut self, stats: crate::RankStats) -> Result<(), BootError> {
        self.send(&RankMsg::Stats(stats))
    }

    fn send(&mut self, msg: &RankMsg) -> Result<(), BootError> {
        match self.stream.as_mut() {
            Some(s) => send_blocking(s, msg, SEND_TIMEOUT, true),
            // Under PMI there is no launcher to tell.
            None => Ok(()),
        }
    }
}

impl PmiBoot {
    /// After every rank put its outcome: this host's decision, as the launcher takes it
    /// (`phalanx run`): a rank that had to join and could not ends the job; one that
    /// failed otherwise means UDP for the whole host (said by its lowest rank); shared
    /// memory only when every rank of the host joined.
    fn shm_decision(&mut self) -> Result<bool, BootError> {
        self.pmi.fence()?;
        let mut joined = 0;
        for &r in &self.local {
            let v = self.pmi.get(&format!("phx-shm-{r}"))?;
            let o: ShmOutcome = serde_json::from_slice(&v)
                .map_err(|e| BootError::Protocol(format!("rank {r}'s outcome: {e}")))?;
            match o {
                ShmOutcome::Joined => joined += 1,
                ShmOutcome::NotUsed => {}
                ShmOutcome::Failed { reason, required } => {
                    if required {
                        return Err(BootError::Aborted(format!(
                            "rank {r}: PHALANX_TRANSPORT=shm, but it could not join shared \
                             memory: {reason}"
                        )));
                    }
                    if self.local.first() == Some(&self.rank) {
                        eprintln!(
                            "phalanx: shared memory unavailable on the host of rank {} \
                             ({reason}); its ranks use UDP",
                            self.rank
                        );
                    }
                    return Ok(false);
                }
            }
        }
        Ok(joined == self.local.len())
    }
}

fn remaining(deadline: Instant) -> Result<Duration, BootError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(BootError::Timeout)
    } else {
        Ok(left)
    }
}

fn connect_retrying(env: &BootEnv, deadline: Instant) -> Result<TcpStream, BootError> {
    let retry_until = deadline.min(Instant::now() + CONNECT_RETRY);
    let mut pause = Duration::from_millis(10);
    loop {
        let left = remaining(deadline)?;
        match TcpStream::connect_timeout(&env.addr, left) {
            Ok(s) => return Ok(s),
            Err(e) if retryable(&e) && Instant::now() + pause < retry_until => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            Err(e) if retryable(&e) => return Err(BootError::LauncherGone),
            Err(e) => return Err(BootError::from_io(e)),
        }
    }
}

fn retryable(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionReset | Interrupted | TimedOut | WouldBlock
    )
}

fn check_table(env: &BootEnv, mine: &Endpoint, table: &Table) -> Result<(), BootError> {
    if table.endpoints.len() != env.size as usize {
        return Err(BootError::Protocol(format!(
            "table has {} endpoints for a job of {} ranks",
            table.endpoints.len(),
            env.size
        )));
    }
    if &table.endpoints[env.rank as usize] != mine {
        return Err(BootError::Protocol(format!(
            "table entry for rank {} is not this rank's endpoint",
            env.rank
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::encode;
    use crate::HostInfo;
    use std::io::Write;
    use std::net::TcpListener;

    fn endpoint(port: u16) -> Endpoint {
        Endpoint {
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
            host: HostInfo::current(),
            recv_frames: 0,
        }
    }

    /// A one-rank launcher in a thread: reads Hello, runs `script` on the connection.
    fn launcher(
        script: impl FnOnce(TcpStream, Hello) + Send + 'static,
    ) -> (BootEnv, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let env = BootEnv {
            rank: 0,
            size: 1,
            addr: l.local_addr().unwrap(),
            secret: crate::Secret::new().unwrap(),
        };
        let secret = env.secret.clone();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let nonce = crate::auth::new_nonce().unwrap();
            s.write_all(&encode(&LauncherMsg::Challenge {
                nonce: nonce.clone(),
            }))
            .unwrap();
            let mut r = LineReader::new(MAX_LINE);
            let Next::Msg(RankMsg::Hello(hello)) = r.next_msg(&mut s).unwrap() else {
                panic!("no hello")
            };
            assert!(crate::auth::check(&secret, &nonce, 0, &hello.proof));
            script(s, hello);
        });
        (env, h)
    }

    #[test]
    fn handshake_control_and_gone() {
        let (env, h) = launcher(|mut s, hello| {
            assert_eq!(hello.pid, std::process::id());
            s.write_all(&encode(&LauncherMsg::Query)).unwrap();
            let table = LauncherMsg::Table(Table {
                job_key: 42,
                endpoints: vec![hello.endpoint],
            });
            s.write_all(&encode(&table)).unwrap();
            let mut r = LineReader::new(MAX_LINE);
            let Next::Msg(RankMsg::Status { .. }) = r.next_msg(&mut s).unwrap() else {
                panic!("no startup status")
            };
            s.write_all(&encode(&LauncherMsg::Query)).unwrap();
            let m: Next<RankMsg> = r.next_msg(&mut s).unwrap();
            assert_eq!(
                m,
                Next::Msg(RankMsg::Status {
                    text: "busy".into(),
                    waits_for: Vec::new(),
                })
            );
            s.write_all(&encode(&LauncherMsg::Release)).unwrap();
            let m: Next<RankMsg> = r.next_msg(&mut s).unwrap();
            assert_eq!(m, Next::Msg(RankMsg::Drained { warning: None }));
        });
        let (mut c, table) =
            BootClient::connect(&env, endpoint(9), Duration::from_secs(10)).unwrap();
        assert_eq!(table.job_key, 42);
        let wait = |c: &mut BootClient| loop {
            if let Some(m) = c.poll().unwrap() {
                return m;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        assert_eq!(wait(&mut c), Control::Query);
        c.reply_status("busy").unwrap();
        assert_eq!(wait(&mut c), Control::Release);
        c.send_drained(None).unwrap();
        h.join().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match c.poll() {
                Err(BootError::LauncherGone) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn abort_and_timeout() {
        let (env, h) = launcher(|mut s, _| {
            let abort = LauncherMsg::Abort {
                reason: "hosts differ".into(),
            };
            s.write_all(&encode(&abort)).unwrap();
        });
        let r = BootClient::connect(&env, endpoint(9), Duration::from_secs(10));
        assert!(matches!(r, Err(BootError::Aborted(m)) if m == "hosts differ"));
        h.join().unwrap();

        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (env, h) = launcher(move |_s, _| {
            let _ = rx.recv();
        });
        let r = BootClient::connect(&env, endpoint(9), Duration::from_millis(200));
        assert!(matches!(r, Err(BootError::Timeout)), "{r:?}");
        tx.send(()).unwrap();
        h.join().unwrap();
    }

    #[test]
    fn wrong_table_is_protocol_error() {
        let (env, h) = launcher(|mut s, _| {
            let table = LauncherMsg::Table(Table {
                job_key: 1,
                endpoints: vec![endpoint(1), endpoint(2)],
            });
            s.write_all(&encode(&table)).unwrap();
        });
        let r = BootClient::connect(&env, endpoint(9), Duration::from_secs(10));
        assert!(matches!(r, Err(BootError::Protocol(_))), "{r:?}");
        h.join().unwrap();
    }
}
