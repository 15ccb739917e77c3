//! The engine's side of the collective executor ([`crate::coll`]): it drives the
//! executor through [`CollIo`] — its clock, its rank, collective fragments onto the
//! links ([`coll_net`](super::coll_net)), request completion — and never reaches into a
//! schedule itself.
//!
//! Contract: the executor runs with its state taken out of the engine for the call, so
//! whatever the engine records in the collective state meanwhile (an error from a send
//! that cannot go) is merged back when the call returns.

use super::Engine;
use crate::coll::schedule::Plan;
use crate::coll::{CollCall, CollIo, CollState};
use crate::error::{Error, Result};
use crate::requests::{RawStatus, Req, ReqId};

impl CollIo for Engine {
    fn now(&self) -> u64 {
        Engine::now(self)
    }

    fn rank(&self) -> u32 {
        self.rank
    }

    fn send(&mut self, to: &[u32], ctx: u32, seq: u32, step: i32, sig: u64, data: &[u8]) {
        self.coll_send(to, ctx, seq, step, sig, data);
    }

    fn complete(&mut self, id: ReqId, r: Result<u64>) {
        // The call's own last step (a user operation's fold, an unpack), on success;
        // dropped (its buffers freed) on failure.
        if let Some(i) = self.finishers.iter().position(|(f, _)| *f == id) {
            let (_, finish) = self.finishers.swap_remove(i);
            if r.is_ok() {
                finish();
            }
        }
        let source = self.rank;
        self.reqs.complete(
            id,
            r.map(|bytes| RawStatus {
                source,
                tag: 0,
                bytes,
                cancelled: false,
            }),
        );
    }
}

impl Engine {
    /// Runs `f` on the collective state with the engine as its I/O.
    fn with_coll<R>(&mut self, f: impl FnOnce(&mut CollState, &mut Engine) -> R) -> R {
        let mut coll = std::mem::take(&mut self.coll);
        let r = f(&mut coll, self);
        let raised = self.coll.take_error();
        self.coll = coll;
        if let Some(e) = raised {
            self.coll.fail(e);
        }
        r
    }

    /// Starts a collective described by `call` with the plan for this rank.
    pub fn start_collective(&mut self, call: CollCall, plan: Plan) -> Result<ReqId> {
        let finish = self.next_finisher.take();
        let s = self.coll.prepare(self.rank, call, plan)?;
        let id = self.reqs.insert(Req::Coll)?;
        if let Some(f) = finish {
            self.finishers.push((id, f));
        }
        self.with_coll(|c, io| c.launch(io, id, s));
        Ok(id)
    }

    /// Gives the next collective started a last step, run when it completes successfully
    /// (see `collective/user.rs`).
    pub(crate) fn finish_next_with(&mut self, f: Box<dyn FnOnce()>) {
        self.next_finisher = Some(f);
    }

    /// Advances every active schedule; returns whether any moved.
    pub(crate) fn progress_collectives(&mut self) -> bool {
        if self.coll.no_schedules() {
            return false;
        }
        self.with_coll(|c, io| c.progress(io))
    }

    /// What collective `id` waits for (for the launcher's timeout report).
    pub(crate) fn describe_collective(&self, id: ReqId) -> String {
        self.coll.describe_wait(id)
    }

    /// Error for collective data nobody consumed (checked at Finalize).
    pub(crate) fn leftover_collectives(&self) -> Option<Error> {
        self.coll.leftover(self.rank)
    }
}
