//! The agent side of the agent protocol: starting and watching one job launcher's ranks
//! on this host. Shared by the job manager's node daemons (`phalanx gang node`, over an
//! authenticated TCP connection) and by `phalanx proxy` (started over ssh by a hostfile
//! launch, over its stdin and stdout).
//!
//! Contract of [`serve_launcher`]:
//! * It reads [`AgentRequest`]s from the launcher ([`Requests`]) and writes
//!   [`AgentEvent`]s back ([`EventSink`]: one JSON line each, under the writer's lock,
//!   flushed), until the input closes, a write fails, a read fails or `stop` is set. On
//!   a node daemon's connection both directions are sealed ([`phalanx_gang::seal`]: every
//!   line encrypted and authenticated, in order); over ssh (`phalanx proxy`) they are
//!   plain JSON, ssh encrypting them. A line that breaks the protocol — malformed, too
//!   long, or a sealed line that does not open (altered, replayed, reordered, dropped) —
//!   ends the service like a closed input, and is its returned error.
//! * A rank is started exactly as `phalanx run` starts a local one ([`spawn_rank`]: own
//!   process group, PDEATHSIG, CPU binding, stdin from /dev/null) plus its working
//!   directory and, with `ip_auto`, `PHALANX_IP` set (unless the launcher set it) to the
//!   address this host reaches the launcher's rendezvous from (`auto` if unknown); its
//!   output lines go back as events (cut so that an event, JSON-escaped, stays within
//!   [`MAX_LINE`]), and `Exited` follows the last of them (bounded by [`OUTPUT_DRAIN`],
//!   without holding up other requests). At most [`MAX_RANKS`] ranks per launcher.
//! * The input is the job's lifeline on this host: when it ends (the launcher ended or
//!   died), the process group of every rank started for it — ended ones too — gets
//!   SIGKILL and every rank is reaped before it returns. Ended ranks are not reaped
//!   before then ([`exit_of`](crate::spawn::exit_of)): their group ids cannot be taken
//!   by another process meanwhile, so that SIGKILL reaches only this job's processes. Every group is also listed
//!   in `groups` while it may be alive, for a daemon that must kill them all on its way
//!   out.

use crate::output::copy_lines;
use crate::signals::{pollfd, wait_readable};
use crate::spawn::{signal_group, spawn_rank, Program, ENV_IP};
use phalanx_boot::frame::{encode, LineReader, Next};
use phalanx_boot::BootError;
use phalanx_gang::proto::{AgentEvent, AgentRequest, SpawnSpec, MAX_LINE};
use phalanx_gang::seal::{Opener, Sealer};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Ranks one launcher may start on this host.
pub const MAX_RANKS: usize = 4096;
/// How long an ended rank's output may take to reach EOF before `Exited` is sent.
pub const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// Where events go: shared by the serving loop and the output threads.
pub type EventWriter = Arc<Mutex<EventSink>>;

/// The launcher's end of the events: a stream, and the sealer of a sealed connection
/// (under the same lock: lines are sealed in the order they are written).
pub struct EventSink {
    out: Box<dyn Write + Send>,
    sealer: Option<Sealer>,
}

impl EventSink {
    /// Events as plain JSON lines to `out` (ssh's stdout).
    pub fn plain(out: Box<dyn Write + Send>) -> EventWriter {
        Arc::new(Mutex::new(EventSink { out, sealer: None }))
    }

    /// Events sealed with `sealer` to `out` (a node daemon's connection).
    pub fn sealed(out: Box<dyn Write + Send>, sealer: Sealer) -> EventWriter {
        Arc::new(Mutex::new(EventSink {
            out,
            sealer: Some(sealer),
        }))
    }
}

/// The launcher's requests: lines from a [`LineReader`], opened by the opener of a
/// sealed connection (whose reader must take [`phalanx_gang::seal::MAX_SEALED_LINE`]).
pub struct Requests {
    reader: LineReader,
    opener: Option<Opener>,
}

impl Requests {
    /// Plain JSON lines (ssh's stdin).
    pub fn plain(reader: LineReader) -> Requests {
        Requests {
            reader,
            opener: None,
        }
    }

    /// Sealed lines (a node daemon's connection).
    pub fn sealed(reader: LineReader, opener: Opener) -> Requests {
        Requests {
            reader,
            opener: Some(opener),
        }
    }

    /// The next request ([`Next::Eof`] also for a reset); `Err` names how the input
    /// broke the protocol, or the read error.
    fn next(&mut self, input: &mut impl Read) -> Result<Next<AgentRequest>, String> {
        let line = match self.opener.as_mut() {
            None => self.reader.next_msg(input),
            Some(opener) => match self.reader.next_msg::<String, _>(input) {
                Ok(Next::Msg(hex)) => {
                    return opener
                        .open_msg(&hex)
                        .map(Next::Msg)
                        .map_err(|e| e.to_string())
                }
                Ok(Next::Pending) => Ok(Next::Pending),
                Ok(Next::Eof) => Ok(Next::Eof),
                Err(e) => Err(e),
            },
        };
        match line {
            Err(BootError::LauncherGone) => Ok(Next::Eof),
            Err(BootError::Protocol(m)) => Err(m),
            r => r.map_err(|e| e.to_string()),
        }
    }
}

/// How a host starts its ranks.
pub struct ServeOptions<'a> {
    /// The CPUs ranks are bound to (round robin by rank) when the launcher asks.
    pub cpus: Vec<usize>,
    /// Ranks get `PHALANX_IP`: the address this host reaches the launcher from (they
    /// are not on the launcher's loopback).
    pub ip_auto: bool,
    /// Set from outside (a signal): end the service as if the input had closed.
    pub stop: &'a AtomicBool,
    /// Every live group of this host's ranks, for the daemon's own exit.
    pub groups: &'a Mutex<Vec<u32>>,
}

/// A rank this host started for one launcher.
struct Local {
    rank: u32,
    child: Child,
    /// Output pipes that have not reached EOF yet, and their end notices.
    outputs: usize,
    done: Receiver<()>,
    /// Its exit status and until when its output may still drain, once it ended.
    ended: Option<(i32, Instant)>,
}

/// Serves one launcher until its input closes (module docs); `Err`: how its input broke
/// the protocol. `input` must not block when nothing is there (non-blocking, or a short
/// read timeout): a poll waits for it.
pub fn serve_launcher<R: Read + AsRawFd>(
    input: &mut R,
    mut requests: Requests,
    writer: EventWriter,
    opts: &ServeOptions,
) -> Result<(), String> {
    let mut broken = None;
    let mut ranks: Vec<Local> = Vec::new();
    // Every group started for this launcher, also of ranks that ended: what they left
    // behind goes when the lifeline is cut.
    let mut groups: Vec<u32> = Vec::new();
    // Ended ranks, not reaped until the end (their group ids stay ours).
    let mut zombies: Vec<Child> = Vec::new();
    let lock_groups = || opts.groups.lock().unwrap_or_else(|p| p.into_inner());
    'serve: while !opts.stop.load(Ordering::SeqCst) {
        let mut fds = [pollfd(input.as_raw_fd())];
        let _ = wait_readable(&mut fds, Duration::from_millis(20));
        loop {
            match requests.next(input) {
                Ok(Next::Msg(AgentRequest::Spawn(spec))) => {
                    let ev = if groups.len() >= MAX_RANKS {
                        AgentEvent::SpawnFailed {
                            rank: spec.rank,
                            message: format!("more than {MAX_RANKS} ranks on one host"),
                        }
                    } else {
                        match start(&spec, opts, &writer) {
                            Ok(l) => {
                                let pid = l.child.id();
                                groups.push(pid);
                                lock_groups().push(pid);
                                ranks.push(l);
                                AgentEvent::Spawned {
                                    rank: spec.rank,
                                    pid,
                                }
                            }
                            Err(e) => AgentEvent::SpawnFailed {
                                rank: spec.rank,
                                message: e.to_string(),
                            },
                        }
                    };
                    if send(&writer, &ev).is_err() {
                        break 'serve;
                    }
                }
                Ok(Next::Msg(AgentRequest::Signal { rank, sig })) => {
                    if let Some(l) = ranks.iter().find(|l| l.rank == rank) {
                        signal_group(l.child.id(), sig);
                    }
                }
                Ok(Next::Pending) => break,
                Ok(Next::Eof) => break 'serve,
                Err(e) => {
                    broken = Some(e);
                    break 'serve;
                }
            }
        }
        // Ended ranks: `Exited` once their output is all out (or its bound passed),
        // without holding up the requests of the others.
        let now = Instant::now();
        let mut i = 0;
        while i < ranks.len() {
            let l = &mut ranks[i];
            if l.ended.is_none() {
                // Not reaped: the zombie keeps its group's id ours (module docs).
                if let Ok(Some(st)) = crate::spawn::exit_of(&l.child) {
                    l.ended = Some((st.into_raw(), now + OUTPUT_DRAIN));
                }
            }
            while l.outputs > 0 && l.done.try_recv().is_ok() {
                l.outputs -= 1;
            }
            match l.ended {
                Some((status, until)) if l.outputs == 0 || now >= until => {
                    let ev = AgentEvent::Exited {
                        rank: l.rank,
                        status,
                    };
                    zombies.push(ranks.swap_remove(i).child);
                    if send(&writer, &ev).is_err() {
                        break 'serve;
                    }
                }
                _ => i += 1,
            }
        }
    }
    // The lifeline is cut: nothing this launcher started survives it.
    for &g in &groups {
        signal_group(g, libc::SIGKILL);
    }
    for l in &mut ranks {
        let _ = l.child.kill();
        let _ = l.child.wait();
    }
    for z in &mut zombies {
        let _ = z.wait();
    }
    lock_groups().retain(|g| !groups.contains(g));
    broken.map_or(Ok(()), Err)
}

/// Starts one rank with its output forwarded as events.
fn start(spec: &SpawnSpec, opts: &ServeOptions, writer: &EventWriter) -> std::io::Result<Local> {
    let boot: SocketAddr = spec.boot.parse().map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad rendezvous address")
    })?;
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> =
        spec.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    if opts.ip_auto && !spec.env.iter().any(|(k, _)| k == ENV_IP) {
        // The address this host reaches the launcher from: the one its peers can reach
        // it at, also on a host with several interfaces.
        let ip = match crate::hosts::source_ip_toward(boot.ip()) {
            Ok(ip) => ip.to_string(),
            Err(_) => "auto".into(),
        };
        env.push((ENV_IP.into(), ip.into()));
    }
    if !std::path::Path::new(&spec.cwd).is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("working directory {} does not exist on this host", spec.cwd),
        ));
    }
    let program = Program {
        prog: spec.prog.clone().into(),
        args: spec.args.iter().map(Into::into).collect(),
        env,
        cpus: if spec.bind {
            opts.cpus.clone()
        } else {
            Vec::new()
        },
        cwd: Some(spec.cwd.clone().into()),
    };
    let mut child = spawn_rank(
        &program,
        spec.rank,
        spec.size,
        boot,
        &crate::hosts::Host::Local,
    )?;
    let (tx, done) = channel();
    let mut outputs = 0;
    let pipes: [(Option<Box<dyn Read + Send>>, bool); 2] = [
        (child.stdout.take().map(|p| Box::new(p) as _), false),
        (child.stderr.take().map(|p| Box::new(p) as _), true),
    ];
    for (pipe, stderr) in pipes {
        let Some(pipe) = pipe else { continue };
        let (writer, tx, rank) = (writer.clone(), tx.clone(), spec.rank);
        let ok = std::thread::Builder::new()
            .name(format!("out-{rank}"))
            .spawn(move || {
                // Lines cut so that, escaped as JSON (a control byte takes six), the
                // event still fits in a line.
                copy_lines(pipe, &[], (MAX_LINE as u64 - 1024) / 6, |line| {
                    let ev = AgentEvent::Output {
                        rank,
                        stderr,
                        line: String::from_utf8_lossy(line).into_owned(),
                    };
                    // A lost launcher ends the job: the pipe is still drained.
                    let _ = send(&writer, &ev);
                });
                let _ = tx.send(());
            })
            .is_ok();
        if ok {
            outputs += 1;
        }
    }
    Ok(Local {
        rank: spec.rank,
        child,
        outputs,
        done,
        ended: None,
    })
}

/// Writes one event under the writer's lock (sealed if the connection is).
fn send(writer: &EventWriter, ev: &AgentEvent) -> std::io::Result<()> {
    let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
    let line = match w.sealer.as_mut() {
        Some(s) => s.seal_line(ev).map_err(std::io::Error::other)?,
        None => encode(ev),
    };
    w.out.write_all(&line)?;
    w.out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use phalanx_gang::seal::{channel, Side, MAX_SEALED_LINE};
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixStream;

    /// Serves sealed requests `lines` (then the end of the input) on a socket pair;
    /// what `serve_launcher` returned and the events it sent, opened.
    fn serve_sealed(
        lines: impl FnOnce(&mut phalanx_gang::seal::Sealer) -> Vec<Vec<u8>>,
    ) -> (Result<(), String>, Vec<AgentEvent>) {
        let (mut launcher, mut agent) = UnixStream::pair().unwrap();
        let (mut ls, mut lo) = channel("cluster", "challenge", "nonce", Side::Launcher);
        let (a_s, a_o) = channel("cluster", "challenge", "nonce", Side::Agent);
        for l in lines(&mut ls) {
            launcher.write_all(&l).unwrap();
        }
        launcher.shutdown(std::net::Shutdown::Write).unwrap();
        agent.set_nonblocking(true).unwrap();
        let writer = EventSink::sealed(Box::new(agent.try_clone().unwrap()), a_s);
        let stop = AtomicBool::new(false);
        let groups = Mutex::new(Vec::new());
        let opts = ServeOptions {
            cpus: Vec::new(),
            ip_auto: false,
            stop: &stop,
            groups: &groups,
        };
        let requests = Requests::sealed(LineReader::new(MAX_SEALED_LINE), a_o);
        let r = serve_launcher(&mut agent, requests, writer, &opts);
        drop(agent);
        let events = BufReader::new(launcher)
            .split(b'\n')
            .map(|l| lo.open_line_msg(&l.unwrap()).unwrap())
            .collect();
        (r, events)
    }

    #[test]
    fn sealed_requests_are_served_and_a_broken_one_ends_the_service() {
        let signal = |s: &mut phalanx_gang::seal::Sealer| {
            s.seal_line(&AgentRequest::Signal { rank: 7, sig: 0 })
                .unwrap()
        };
        let spawn = |s: &mut phalanx_gang::seal::Sealer| {
            let spec = SpawnSpec {
                rank: 3,
                size: 4,
                boot: "not an address".into(),
                prog: "/bin/true".into(),
                args: vec![],
                env: vec![],
                cwd: "/".into(),
                bind: false,
            };
            s.seal_line(&AgentRequest::Spawn(spec)).unwrap()
        };
        // In order: served, the events sealed back.
        let (r, events) = serve_sealed(|s| vec![signal(s), spawn(s)]);
        assert_eq!(r, Ok(()));
        assert!(
            matches!(&events[..], [AgentEvent::SpawnFailed { rank: 3, message }] if message.contains("rendezvous")),
            "{events:?}"
        );
        // Replayed: the service ends before the spawn behind it.
        let (r, events) = serve_sealed(|s| {
            let l = signal(s);
            vec![l.clone(), l, spawn(s)]
        });
        let e = r.unwrap_err();
        assert!(e.contains("line 0 arrived where line 1 was due"), "{e}");
        assert!(events.is_empty(), "{events:?}");
        // Altered, or plain JSON.
        let (r, _) = serve_sealed(|s| {
            let mut l = spawn(s);
            let n = l.len();
            l[n - 3] = if l[n - 3] == b'0' { b'1' } else { b'0' };
            vec![l]
        });
        assert!(r.unwrap_err().contains("line 0 does not authenticate"));
        let (r, _) = serve_sealed(|_| vec![encode(&AgentRequest::Signal { rank: 1, sig: 0 })]);
        assert!(r.is_err());
    }
}
