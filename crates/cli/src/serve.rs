//! The agent side of the agent protocol: starting and watching one job launcher's ranks
//! on this host. Shared by the job manager's node daemons (`phalanx gang node`, over an
//! authenticated TCP connection) and by `phalanx proxy` (started over ssh by a hostfile
//! launch, over its stdin and stdout).
//!
//! Contract of [`serve_launcher`]:
//! * It reads [`AgentRequest`]s from the launcher and writes [`AgentEvent`]s back (one
//!   JSON line each, under the writer's lock, flushed), until the input closes, a write
//!   fails, a read fails or `stop` is set.
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
use phalanx_gang::proto::{AgentEvent, AgentRequest, SpawnSpec, MAX_LINE};
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
pub type EventWriter = Arc<Mutex<Box<dyn Write + Send>>>;

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

/// Serves one launcher until its input closes (module docs). `input` must not block
/// when nothing is there (non-blocking, or a short read timeout): a poll waits for it.
pub fn serve_launcher<R: Read + AsRawFd>(
    input: &mut R,
    mut reader: LineReader,
    writer: EventWriter,
    opts: &ServeOptions,
) {
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
            match reader.next_msg::<AgentRequest, _>(input) {
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
                Ok(Next::Eof) | Err(_) => break 'serve,
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

/// Writes one event under the writer's lock.
fn send(writer: &EventWriter, ev: &AgentEvent) -> std::io::Result<()> {
    let line = encode(ev);
    let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
    w.write_all(&line)?;
    w.flush()
}
