//! Suspending a running job (Ctrl-Z, or SIGTSTP from a job manager) without breaking its
//! network: the job manager's halt and release (seed 001) over the launcher's connection
//! to every rank.
//!
//! Contract: on SIGTSTP the launcher asks every rank to halt (`Halt`): each stops
//! injecting at a packet boundary, drains what is in flight (bounded by [`HALT_DRAIN`]),
//! saves what its links hold and answers `Halted`. Then every rank's process group gets
//! SIGSTOP and the launcher stops itself, so the shell shows the job stopped. On SIGCONT
//! (`fg`, `bg`, `kill -CONT`) the ranks get SIGCONT and `Continue`: they restore their
//! links and resume with every protocol timer moved by the stopped time — no
//! retransmission or peer timeout counts the stop. A rank that does not answer in time
//! (computing outside the library, say) is stopped anyway and named. The `--timeout`
//! clock does not run while the job is stopped. Before every rank has its table and its
//! host's shared-memory decision there is no network to halt: the job is stopped and
//! continued as it is.

use super::{Failure, Job, Phase, SEND_TIMEOUT};
use crate::status::signal_text;
use phalanx_boot::frame::encode;
use phalanx_boot::LauncherMsg;
use std::time::{Duration, Instant};

/// Bound on a rank's drain after `Halt`.
pub const HALT_DRAIN: Duration = Duration::from_secs(10);

/// Extra time for the `Halted` answers beyond the drain bound.
const HALT_ANSWER: Duration = Duration::from_secs(2);

/// A rank's answer to a halt.
#[derive(Debug, Clone)]
pub struct Halted {
    pub datagrams: u64,
    pub bytes: u64,
    pub ms: u64,
    pub save_us: u64,
    pub error: Option<String>,
}

impl Job {
    /// Halts, stops, and (once continued) resumes the job (module docs).
    pub(super) fn suspend(&mut self) -> Result<(), Failure> {
        let t0 = Instant::now();
        if let Some(t) = self.timeline.as_mut() {
            t.mark("suspend (SIGTSTP or the gang scheduler's switch): halting the ranks");
        }
        // Only ranks past start-up (the table and their host's shared-memory decision)
        // can halt: before that the job is stopped as it is.
        let halting =
            self.phase == Phase::Running && self.host_groups.iter().all(|(_, sent)| *sent);
        if halting {
            for r in &mut self.ranks {
                r.halted = None;
            }
            let msg = encode(&LauncherMsg::Halt {
                limit_ms: HALT_DRAIN.as_millis() as u64,
            });
            self.broadcast(&msg, SEND_TIMEOUT);
            let deadline = t0 + HALT_DRAIN + HALT_ANSWER;
            while Instant::now() < deadline && !self.unhalted().is_empty() {
                self.wait_events();
                if let Some(sig) = self.signals.take_termination() {
                    // Continue the ranks so that they can be ended, then end the job.
                    self.continue_ranks(halting);
                    return Err(Failure::new(
                        format!("interrupted by {}; terminating all ranks", signal_text(sig)),
                        128 + sig,
                    ));
                }
                for r in 0..self.ranks.len() {
                    self.read_rank(r)?;
                }
                self.reap()?;
            }
        }
        let late = self.unhalted();
        self.signal_live(libc::SIGSTOP);
        if halting {
            let (n, bytes) = self
                .ranks
                .iter()
                .filter_map(|r| r.halted.as_ref())
                .fold((0, 0), |(n, b), h| (n + h.datagrams, b + h.bytes));
            let slowest = self
                .ranks
                .iter()
                .filter_map(|r| r.halted.as_ref())
                .map(|h| h.ms)
                .max();
            let save_us = (self.ranks.iter().filter_map(|r| r.halted.as_ref()))
                .map(|h| h.save_us)
                .max()
                .unwrap_or(0);
            eprintln!(
                "phalanx: job halted in {} ms (slowest rank {} ms; {n} datagrams, {bytes} bytes \
                 saved in {save_us} us) and stopped",
                t0.elapsed().as_millis(),
                slowest.unwrap_or(0)
            );
            if let Some(f) = &self.cfg.halt_report {
                let text = format!(
                    "{{\"us\":{},\"datagrams\":{n},\"bytes\":{bytes},\"save_us\":{save_us}}}",
                    t0.elapsed().as_micros()
                );
                let tmp = f.with_extension("halt.tmp");
                if std::fs::write(&tmp, text).is_ok() {
                    let _ = std::fs::rename(&tmp, f);
                }
            }
            for (i, r) in self.ranks.iter().enumerate() {
                if let Some(e) = r.halted.as_ref().and_then(|h| h.error.as_ref()) {
                    eprintln!("phalanx: rank {i}: {e}");
                }
            }
            if !late.is_empty() {
                eprintln!(
                    "phalanx: warning: ranks {late:?} did not halt within {} s (outside the \
                     library?); stopped as they were",
                    (HALT_DRAIN + HALT_ANSWER).as_secs()
                );
            }
        }
        let stop = Instant::now();
        // SAFETY: raise(3) on this process; execution continues here after SIGCONT.
        unsafe { libc::raise(libc::SIGSTOP) };
        let stopped = stop.elapsed();
        self.started += stopped;
        self.continue_ranks(halting);
        eprintln!(
            "phalanx: job continued after {:.1} s stopped",
            stopped.as_secs_f64()
        );
        Ok(())
    }

    /// Live ranks connected to the launcher that have not answered the halt.
    fn unhalted(&self) -> Vec<usize> {
        (self.ranks.iter().enumerate())
            .filter(|(_, r)| r.exit.is_none() && r.conn.is_some() && r.halted.is_none())
            .map(|(i, _)| i)
            .collect()
    }

    fn signal_live(&mut self, sig: i32) {
        for r in 0..self.ranks.len() {
            if self.ranks[r].exit.is_none() {
                self.signal_rank(r, sig);
            }
        }
    }

    /// SIGCONT to every rank, then `Continue` to the connected ones when they were asked
    /// to halt (`halted`; a rank that had not answered yet takes both in order).
    fn continue_ranks(&mut self, halted: bool) {
        if let Some(t) = self.timeline.as_mut() {
            t.mark("continue: the ranks resume");
        }
        self.signal_live(libc::SIGCONT);
        if halted {
            self.broadcast(&encode(&LauncherMsg::Continue), SEND_TIMEOUT);
        }
        for r in &mut self.ranks {
            r.halted = None;
        }
    }
}
