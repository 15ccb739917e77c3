//! Ranks left waiting in a collective by a rank that went on to Finalize.
//!
//! Contract: while some ranks have sent `Drained` (they are in Finalize and will enter no
//! collective again) and others have not, the launcher asks the others what they wait on
//! (`Query`) every [`WATCH_EVERY`]. A rank whose answer shows it waiting in a collective
//! for the part of a drained rank — in two answers in a row, the same call both times (a
//! drained rank's data, acknowledged before it drained, is consumed within one round
//! of progress) — ends the job with exit code 1 and an error naming both: within about
//! three periods (under a second) of the drain, instead of at `--timeout`. Nothing is
//! watched while `--timeout`'s own queries run, or before every rank has its table.

use super::{Failure, Job, Phase, SEND_TIMEOUT};
use phalanx_boot::frame::encode;
use phalanx_boot::LauncherMsg;
use std::time::{Duration, Instant};

/// How often the ranks that have not drained are asked.
pub const WATCH_EVERY: Duration = Duration::from_millis(300);

/// The watch's state.
#[derive(Default)]
pub struct Watch {
    /// When the next question goes out.
    pub next: Option<Instant>,
    /// Per rank: the drained rank and the wait its last answer showed.
    suspect: Vec<Option<(usize, String)>>,
}

impl Job {
    /// One step of the watch (module docs); `Err` ends the job.
    pub(super) fn watch_stuck(&mut self) -> Result<(), Failure> {
        let watching = self.phase == Phase::Running
            && self.query_until.is_none()
            && self.ranks.iter().any(|r| r.drained)
            && self.ranks.iter().any(|r| !r.drained && r.conn.is_some());
        if !watching {
            self.watch.next = None;
            return Ok(());
        }
        let now = Instant::now();
        let Some(next) = self.watch.next else {
            // The first drain: ask one period later.
            self.watch.next = Some(now + WATCH_EVERY);
            self.watch.suspect = vec![None; self.ranks.len()];
            return Ok(());
        };
        if now < next {
            return Ok(());
        }
        // Ranks spawned since the watch began are watched too.
        self.watch.suspect.resize(self.ranks.len(), None);
        for r in 0..self.ranks.len() {
            let rank = &self.ranks[r];
            let stuck = rank.status.as_ref().and_then(|text| {
                let d = rank
                    .waits_for
                    .iter()
                    .map(|&d| d as usize)
                    .find(|&d| self.ranks.get(d).is_some_and(|x| x.drained))?;
                Some((d, text.clone()))
            });
            match (stuck, &self.watch.suspect[r]) {
                (Some(now_seen), Some(before)) if &now_seen == before => {
                    let (d, text) = now_seen;
                    return Err(Failure::new(
                        format!(
                            "collective mismatch: rank {r} is {text}, but rank {d} has reached \
                             Finalize without entering that call"
                        ),
                        1,
                    ));
                }
                (seen, _) => self.watch.suspect[r] = seen,
            }
        }
        let query = encode(&LauncherMsg::Query);
        for rank in self.ranks.iter_mut().filter(|r| !r.drained) {
            rank.status = None;
            rank.waits_for.clear();
            if let Some(conn) = rank.conn.as_mut() {
                let _ = phalanx_boot::frame::send_line_blocking(
                    &mut conn.stream,
                    &query,
                    SEND_TIMEOUT,
                    true,
                );
            }
        }
        self.watch.next = Some(now + WATCH_EVERY);
        Ok(())
    }
}
