//! Waiting: every blocking call of the engine ends here, in a loop that makes progress,
//! spins, yields and finally sleeps in the kernel until its condition holds.
//!
//! Contract: a wait ends when its condition holds, or with an error that names the rank
//! and what it waited for — a broken link, a peer that stopped answering, the launcher
//! ending the job, Finalize's drain bound — never silently; while it waits every protocol
//! keeps running (acknowledgements, retransmissions, collectives of other requests).

use super::requests::{RawStatus, ReqId};
use super::*;
use std::os::fd::RawFd;

/// What an idle wait does next ([`Engine::sleep_prepare`]).
pub(crate) enum Sleep {
    /// The condition held while the sleep was announced: the wait is over.
    Done,
    /// Something is pending or a timer is due: another round instead.
    Skip,
    /// Sleep in `poll()` on these descriptors for at most this long.
    On(Vec<RawFd>, Duration),
}

/// How a round of a shared wait ended ([`Engine::shared_round`]).
pub(crate) enum Round<T> {
    /// The wait is over.
    Done(T),
    /// Progress was made (other waiting threads may be done too).
    Moved,
    /// Nothing happened.
    Idle,
}

impl Engine {
    pub(super) fn describe_wait(&self) -> String {
        let any = |o: Option<u32>| o.map_or("any source".to_string(), |r| format!("rank {r}"));
        let anyt = |o: Option<i32>| o.map_or("any tag".to_string(), |t| format!("tag {t}"));
        match &self.waiting {
            Waiting::Nothing => "not waiting (computing between phalanx calls)".into(),
            Waiting::Recv { src, tag, ctx } => format!(
                "waiting in receive from {} with {} on communicator {ctx}",
                any(*src),
                anyt(*tag)
            ),
            Waiting::Send { peer, tag } => {
                format!("waiting in send to rank {peer} with tag {tag}")
            }
            Waiting::Coll(id) => self.describe_collective(*id),
            Waiting::Board {
                ctx,
                seq,
                kind,
                peer,
            } if *peer == self.rank => format!(
                "in {kind} on shared memory (communicator {ctx:#x}, call #{seq}), waiting for \
                 its readers to finish with its buffer"
            ),
            Waiting::Board {
                ctx,
                seq,
                kind,
                peer,
            } => format!(
                "in {kind} on shared memory (communicator {ctx:#x}, call #{seq}), waiting for rank {peer}"
            ),
            Waiting::Spawn => "waiting for the launcher to start spawned processes".into(),
            Waiting::Rma { ctx, peer, what } => {
                format!("in a one-sided synchronization (window {ctx:#x}), waiting for rank {peer}: {what}")
            }
            Waiting::Halt => format!(
                "halted, draining what is in flight on its links: {:?}",
                self.unacked_peers()
            ),
            Waiting::Resume(silent) => format!(
                "continued after a halt, waiting to hear ranks {silent:?} run again"
            ),
            Waiting::Finalize => format!(
                "in finalize, waiting for acknowledgements from ranks {:?} (or for the release)",
                self.unacked_peers()
            ),
        }
    }

    /// When this rank waits in a collective: the ranks whose part it waits for (the
    /// launcher ends the job when one of them has reached Finalize instead).
    pub(super) fn collective_waits_for(&self) -> Vec<u32> {
        match &self.waiting {
            Waiting::Coll(id) => self.coll.sources_of(*id),
            Waiting::Board { peer, .. } if *peer != self.rank => vec![*peer],
            _ => Vec::new(),
        }
    }

    /// Peers that owe this rank acknowledgements (go-back-n, then URTP).
    fn unacked_peers(&self) -> Vec<u32> {
        let mut v = self.links.gbn.proto.unacked_peers();
        v.extend(self.links.urtp.proto.unacked_peers());
        v
    }

    /// Sleeps until something may have happened: a socket or the launcher connection is
    /// readable, or a protocol timer is due (at most 100 ms).
    ///
    /// `recheck` is evaluated once more after announcing the sleep to shared-memory
    /// producers, so a condition set by a peer on shared memory (which wakes sleepers
    /// after setting it) is never missed.
    ///
    /// Returns true when `recheck` held: the wait is over (a caller must not evaluate its
    /// condition again — board reads, for one, take their data when it holds).
    pub(super) fn block(&mut self, recheck: &mut dyn FnMut(&mut Engine) -> bool) -> Result<bool> {
        match self.sleep_prepare(recheck) {
            Sleep::Done => Ok(true),
            Sleep::Skip => Ok(false),
            Sleep::On(fds, timeout) => {
                wait_readable(&fds, Some(timeout))?;
                self.sleep_finish()?;
                Ok(false)
            }
        }
    }

    /// The first half of [`block`](Self::block): announces the sleep and says what to
    /// sleep on; a thread that sleeps calls [`sleep_finish`](Self::sleep_finish) after
    /// (a waiting thread of `MPI_THREAD_MULTIPLE` sleeps without the process lock).
    pub(crate) fn sleep_prepare(&mut self, recheck: &mut dyn FnMut(&mut Engine) -> bool) -> Sleep {
        let now = self.now();
        let mut deadline = now + 100_000_000;
        if let Some(t) = self.links.poll_timeout() {
            deadline = deadline.min(t);
        }
        let mut fds = Vec::with_capacity(4);
        if let Some(t) = self.links.net.transport.as_ref() {
            if let Some(d) = t.next_deadline() {
                deadline = deadline.min(d);
            }
            fds.extend(t.fds());
        }
        if !self.links.local.is_empty() || self.links.shm.as_ref().is_some_and(|l| l.has_replay()) {
            return Sleep::Skip;
        }
        if let Some(b) = self.boot.as_ref() {
            fds.push(b.fd());
        }
        if deadline <= now {
            return Sleep::Skip;
        }
        // A medium whose senders wake sleepers only when asked (rings under the
        // protocols) is told now; data that came meanwhile means no sleep.
        if let Some(t) = self.links.net.transport.as_mut() {
            if !t.prepare_sleep() {
                return Sleep::Skip;
            }
        }
        if let Some(mut t) = self.links.shm.take() {
            // Shared-memory producers do not fence before checking our sleep flag: a
            // wake-up lost to that costs at most this bound (see phalanx_shm's docs).
            deadline = deadline.min(now + SHM_SLEEP_MAX_NS);
            if !t.prepare_sleep() {
                // A frame (or ring space) arrived meanwhile: no sleep.
                self.links.shm = Some(t);
                return Sleep::Skip;
            }
            fds.push(t.fd());
            self.links.shm = Some(t);
            if recheck(self) {
                if let Some(t) = self.links.shm.as_mut() {
                    t.finish_sleep();
                }
                return Sleep::Done;
            }
        }
        self.stats.sleeps += 1;
        Sleep::On(fds, Duration::from_nanos(deadline - now))
    }

    /// The second half of [`block`](Self::block), after the sleep.
    pub(crate) fn sleep_finish(&mut self) -> Result<()> {
        // Whatever woke us (possibly the multicast socket) is drained next round.
        self.drain_all_next = true;
        self.service_boot()
    }

    /// How long an idle wait spins, then yields, before it sleeps.
    pub(crate) fn wait_budget(&self) -> (Duration, Duration) {
        (self.spin, self.cfg.yield_time)
    }

    /// What a wait for request `id` waits for (the launcher's `--timeout` report).
    pub(crate) fn describe_request(&self, id: ReqId) -> Waiting {
        self.p2p.describe(&self.reqs, id)
    }

    /// Reports `w` as what this rank waits for (a wait outside the process lock).
    pub(crate) fn set_waiting(&mut self, w: Waiting) {
        self.waiting = w;
    }

    /// Whether the program asked for a progress thread (`PHALANX_PROGRESS_THREAD`).
    pub(crate) fn wants_progress_thread(&self) -> bool {
        self.cfg.progress_thread
    }

    /// One round of a wait that runs outside the process lock (`MPI_THREAD_MULTIPLE`,
    /// `runtime::shared_wait`): what ends a wait in [`wait_loop`](Self::wait_loop) (an
    /// error, a halt), then `ready`, a round of progress and `ready` again.
    pub(crate) fn shared_round<T>(
        &mut self,
        ready: &mut impl FnMut(&mut Engine) -> Option<Result<T>>,
        own_errors: bool,
    ) -> Result<Round<T>> {
        // The progress thread leaves the errors that end waits to the program's calls.
        if own_errors {
            if let Some(e) = self.take_wait_error() {
                return Err(e);
            }
        }
        if self.halt_asked.is_some() && !self.halted {
            self.job_halt()?;
        }
        if let Some(r) = ready(self) {
            return r.map(Round::Done);
        }
        let moved = self.progress()?;
        if let Some(r) = ready(self) {
            return r.map(Round::Done);
        }
        Ok(if moved { Round::Moved } else { Round::Idle })
    }

    /// Waits, making progress, until `done(self)` holds.
    #[inline]
    pub(crate) fn wait_until(
        &mut self,
        waiting: Waiting,
        mut done: impl FnMut(&mut Engine) -> bool,
    ) -> Result<()> {
        self.waiting = waiting;
        let r = self.wait_loop(&mut done);
        self.waiting = Waiting::Nothing;
        // Back to the program, which may compute for long: the cells consumed meanwhile
        // go back to their producers now (shared-memory flow control).
        if let Some(t) = self.links.shm.as_mut() {
            t.publish_consumed();
        }
        r
    }

    /// An error that ends any wait: a collective's (mismatch) or a link's.
    pub(crate) fn take_wait_error(&mut self) -> Option<Error> {
        let e = self.coll.take_error().or_else(|| self.link_error.take());
        if e.is_some() {
            // The caller may give up its buffers once it sees the error.
            self.unshare_all();
        }
        e
    }

    // Inlined into the receive paths (a call and a dynamic `done` there cost a small
    // message's latency several percent).
    #[inline]
    pub(super) fn wait_loop(&mut self, done: &mut dyn FnMut(&mut Engine) -> bool) -> Result<()> {
        // The wait's length in the statistics, off the clock its progress rounds read
        // anyway: from its first round (a wait satisfied at once counts nothing; the
        // clock before the wait may be stale by the program's computation) to its last.
        let mut start = 0;
        let r = self.wait_rounds(done, &mut start);
        if r.is_err() {
            // The caller may give up its buffers once it sees the error.
            self.unshare_all();
        }
        if start != 0 {
            self.stats.wait_ns += self.last_now.saturating_sub(start);
        }
        self.stats.waits += 1;
        r
    }

    fn wait_rounds(
        &mut self,
        done: &mut dyn FnMut(&mut Engine) -> bool,
        start: &mut u64,
    ) -> Result<()> {
        let mut idle_since: Option<Instant> = None;
        let mut idle_rounds = 0u32;
        let mut first = true;
        loop {
            if let Some(e) = self.take_wait_error() {
                return Err(e);
            }
            if self.halt_asked.is_some() && !self.halted {
                self.job_halt()?;
            }
            if done(self) {
                return Ok(());
            }
            // Spin after an idle round, and in the wait's very first round when nothing
            // is queued to this rank itself: a wait for a board publication or a frame
            // (what shared-memory waits are) then sees it as soon as it lands instead of
            // after a full progress round. A round that moved something is followed by a
            // full progress round, as before (a wait satisfied in its first spin counts
            // no wait time, like one satisfied at once).
            let spin = idle_rounds > 0 || (first && self.links.local.is_empty());
            first = false;
            if spin && self.all_peers_shm && !self.spin.is_zero() {
                // Spinning with nothing to do (yet): watch the rings with plain loads and
                // run a full progress round only when a frame is there (or now and then).
                // What the wait needs may come from elsewhere (a board publication, a
                // flag): it is checked every few polls, not only after all of them.
                let mut ready = false;
                let mut k = 0;
                while k < 64 {
                    if self.links.shm.as_ref().is_some_and(|t| t.poll_readable()) {
                        ready = true;
                        break;
                    }
                    k += 1;
                    if k % 4 == 0 && done(self) {
                        // As at the top: an error recorded meanwhile still wins (and
                        // `done`, which may have taken a step, is not asked twice).
                        return self.take_wait_error().map_or(Ok(()), Err);
                    }
                }
                // The frame is what this idle wait needs and nothing else can be pending
                // (every peer is on shared memory, no collective runs, nothing to self):
                // take it straight from the rings, then move what it queued.
                if ready && self.coll.idle() && self.links.local.is_empty() {
                    let got = self.shm_recv()?;
                    self.pump_all(self.last_now);
                    if got > 0 {
                        idle_since = None;
                        idle_rounds = 0;
                        continue;
                    }
                }
            }
            let moved = self.progress()?;
            if *start == 0 {
                *start = self.last_now;
            }
            if moved {
                idle_since = None;
                idle_rounds = 0;
                continue;
            }
            // Idle: spin, then poll while yielding the CPU (so oversubscribed ranks
            // still answer quickly), then sleep in the kernel. The clock is read every
            // few rounds only: it is a measurable share of a spinning round.
            idle_rounds = idle_rounds.wrapping_add(1);
            // The first rounds of a wait (where a ping-pong's answer arrives) and most
            // later ones do not read the clock at all.
            if idle_rounds < 128 || (idle_since.is_some() && !idle_rounds.is_multiple_of(16)) {
                // No `pause` hint while spinning: on this kind of VM it doubles a cache
                // line's trip between cores, which is the shared-memory latency.
                if self.spin.is_zero() {
                    std::thread::yield_now();
                }
                continue;
            }
            let start = *idle_since.get_or_insert_with(Instant::now);
            let idle = start.elapsed();
            if idle < self.spin {
                // Spin (see above about `pause`).
            } else if idle < self.spin + self.cfg.yield_time {
                std::thread::yield_now();
            } else {
                if self.block(done)? {
                    return Ok(());
                }
                idle_since = None;
            }
        }
    }

    /// Waits for request `id` and returns its result.
    #[inline]
    pub fn wait(&mut self, id: ReqId) -> Result<RawStatus> {
        if let Some(r) = self.reqs.take_done(id) {
            return r;
        }
        self.wait_running(id)
    }

    /// Waits until one of `ids` is finished and returns its position in `ids` with its
    /// result (`MPI_Waitany`); described as the wait for the first of them. `ids` must
    /// not be empty.
    pub fn wait_any(&mut self, ids: &[ReqId]) -> Result<(usize, RawStatus)> {
        let first = *ids.first().ok_or(Error::InvalidRequest)?;
        let done = |e: &Engine| ids.iter().position(|&id| e.reqs.is_done(id));
        if done(self).is_none() {
            let waiting = self.p2p.describe(&self.reqs, first);
            self.wait_until(waiting, |e| done(e).is_some())?;
        }
        let i = done(self).ok_or(Error::InvalidRequest)?;
        let r = self
            .reqs
            .take_done(ids[i])
            .unwrap_or(Err(Error::InvalidRequest))?;
        Ok((i, r))
    }

    /// Takes every finished request of `ids`: positions in `ids` and results; the first
    /// error after all of them are taken.
    pub(crate) fn take_finished(&mut self, ids: &[ReqId]) -> Result<Vec<(usize, RawStatus)>> {
        let mut out = Vec::new();
        let mut err = None;
        for (i, &id) in ids.iter().enumerate() {
            if self.reqs.is_done(id) {
                match self
                    .reqs
                    .take_done(id)
                    .unwrap_or(Err(Error::InvalidRequest))
                {
                    Ok(st) => out.push((i, st)),
                    Err(e) => {
                        err.get_or_insert(e);
                    }
                }
            }
        }
        err.map_or(Ok(out), Err)
    }

    /// One round of progress unless one of `ids` is finished already.
    fn progress_unless_done(&mut self, ids: &[ReqId]) -> Result<()> {
        if !ids.iter().any(|&id| self.reqs.is_done(id)) {
            self.progress()?;
            if self.halt_asked.is_some() {
                self.job_halt()?;
            }
        }
        Ok(())
    }

    /// Waits until at least one of `ids` is finished, then takes every finished one
    /// (`MPI_Waitsome`): positions in `ids` and statuses. Empty `ids`: nothing.
    pub fn wait_some(&mut self, ids: &[ReqId]) -> Result<Vec<(usize, RawStatus)>> {
        let Some(&first) = ids.first() else {
            return Ok(Vec::new());
        };
        let any = |e: &Engine| ids.iter().any(|&id| e.reqs.is_done(id));
        if !any(self) {
            let waiting = self.p2p.describe(&self.reqs, first);
            self.wait_until(waiting, |e| any(e))?;
        }
        self.take_finished(ids)
    }

    /// Tests `ids` once (`MPI_Testany`): one round of progress, then the first finished
    /// one, taken.
    pub fn test_any(&mut self, ids: &[ReqId]) -> Result<Option<(usize, RawStatus)>> {
        self.progress_unless_done(ids)?;
        match ids.iter().position(|&id| self.reqs.is_done(id)) {
            None => Ok(None),
            Some(i) => {
                let r = self
                    .reqs
                    .take_done(ids[i])
                    .unwrap_or(Err(Error::InvalidRequest))?;
                Ok(Some((i, r)))
            }
        }
    }

    /// Tests `ids` once (`MPI_Testsome`): one round of progress, then every finished one,
    /// taken.
    pub fn test_some(&mut self, ids: &[ReqId]) -> Result<Vec<(usize, RawStatus)>> {
        self.progress_unless_done(ids)?;
        self.take_finished(ids)
    }

    /// Tests `ids` once (`MPI_Testall`): one round of progress, then, if every one is
    /// finished, all of them taken (statuses in order); otherwise none is taken.
    pub fn test_all(&mut self, ids: &[ReqId]) -> Result<Option<Vec<RawStatus>>> {
        if !ids.iter().all(|&id| self.reqs.is_done(id)) {
            self.progress()?;
            if self.halt_asked.is_some() {
                self.job_halt()?;
            }
            if !ids.iter().all(|&id| self.reqs.is_done(id)) {
                return Ok(None);
            }
        }
        Ok(Some(
            self.take_finished(ids)?
                .into_iter()
                .map(|(_, st)| st)
                .collect(),
        ))
    }

    /// [`wait`](Self::wait) for a request that is not finished yet.
    #[inline(never)]
    fn wait_running(&mut self, id: ReqId) -> Result<RawStatus> {
        let waiting = self.p2p.describe(&self.reqs, id);
        let stall = self.stall_begin(&waiting);
        let r = self.wait_until(waiting, |e| e.reqs.is_done(id));
        self.stall_end(stall);
        r?;
        self.reqs
            .take_done(id)
            .unwrap_or(Err(Error::InvalidRequest))
    }

    /// On a careful link, silence from the peer a receive or send waits on is suspicious:
    /// tells the protocol that this rank now waits on it (the peer, to [`stall_end`](Self::stall_end)).
    pub(super) fn stall_begin(&mut self, waiting: &Waiting) -> Option<u32> {
        self.links.careful.as_ref()?;
        let p = match waiting {
            Waiting::Recv { src: Some(p), .. } | Waiting::Send { peer: p, .. } => *p,
            _ => return None,
        };
        if p == self.rank || self.link(p) == Medium::Shm {
            return None;
        }
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.links.careful.as_mut()?.proto.waiting_on(now, p);
        Some(p)
    }

    /// Ends what [`stall_begin`](Self::stall_begin) started.
    pub(super) fn stall_end(&mut self, peer: Option<u32>) {
        if let (Some(p), Some(c)) = (peer, self.links.careful.as_mut()) {
            c.proto.stop_waiting(p);
        }
    }

    /// Tests request `id` once (with one round of progress).
    pub fn test(&mut self, id: ReqId) -> Result<Option<RawStatus>> {
        if !self.reqs.is_done(id) {
            self.progress()?;
            if self.halt_asked.is_some() {
                self.job_halt()?;
            }
        }
        self.reqs.take_done(id).transpose()
    }

    /// Drains and leaves: every send window acknowledged (bounded by the finalize
    /// timeout), `drained` reported, protocol traffic answered until the launcher
    /// releases the job.
    pub fn finalize(&mut self) -> Result<()> {
        let start = Instant::now();
        let limit = self.cfg.finalize_timeout;
        let now = self.now();
        self.links.gbn.proto.flush_acks(now);
        self.links.urtp.proto.flush_acks(now);
        self.waiting = Waiting::Finalize;
        let mut warning = None;
        let mut counts_sent = false;
        let r = self.wait_loop(&mut |e| {
            if !counts_sent && e.p2p.idle() {
                // Every earlier frame is in the careful window: the counts are final.
                counts_sent = true;
                e.careful_counts_expected = e.careful_send_counts();
                return false;
            }
            if counts_sent
                && e.p2p.idle()
                && e.links.gbn.proto.all_acked()
                && e.coll_out.is_empty()
                && e.links.urtp.proto.all_acked()
                && e.links.careful.as_ref().is_none_or(|c| c.proto.is_idle())
                && e.careful_counts_seen >= e.careful_counts_expected
            {
                return true;
            }
            if start.elapsed() >= limit {
                warning = Some(format!(
                    "rank {}: finalize gave up after {:?}: packets to ranks {:?} were never \
                     acknowledged, messages may be lost",
                    e.rank,
                    limit,
                    e.unacked_peers()
                ));
                return true;
            }
            false
        });
        let now = self.now();
        self.links.gbn.proto.flush_acks(now);
        self.links.urtp.proto.flush_acks(now);
        self.flush(now);
        self.urtp_flush(now);
        if let Some(e) = self
            .coll
            .take_error()
            .or_else(|| self.leftover_collectives())
        {
            return Err(e);
        }
        if self.links.urtp.proto.buffered() > 0 {
            return Err(Error::InvalidArg(format!(
                "rank {}: {} collective packets arrived that no collective call of this rank \
                 consumed (mismatched collectives)",
                self.rank,
                self.links.urtp.proto.buffered()
            )));
        }
        if self.cfg.stats {
            eprintln!("{}", self.stats_line());
        }
        if self.cfg.trace {
            self.send_trace()?;
        }
        if self.cfg.job_stats {
            let report = self.stats_report();
            if let Some(b) = self.boot.as_mut() {
                b.send_stats(report)
                    .map_err(|e| Error::Launcher(e.to_string()))?;
            }
        }
        r?;
        if let Some(w) = &warning {
            tracing::warn!("phalanx: warning: {w}");
        }
        if let Some(b) = self.boot.as_mut() {
            b.send_drained(warning)
                .map_err(|e| Error::Launcher(e.to_string()))?;
            // Keep answering until the launcher releases the job (it always does, or
            // ends it; if it vanishes the wait ends with an error).
            self.wait_until(Waiting::Finalize, |e| e.finalized)?;
        }
        self.finalized = true;
        Ok(())
    }
}
