//! The waits of a window's synchronizations over messages, in the form the thread level
//! needs: one engine call that waits inside the engine, or at `MPI_THREAD_MULTIPLE` the
//! message (or check) under the process lock and the wait in rounds that give it up
//! (`runtime::wait_for`), so other threads call and progress meanwhile.
//!
//! Contract: each has the result of the engine call it stands for (`Engine::rma_*`).

use super::Window;
use crate::engine::Waiting;
use crate::error::Result;
use crate::runtime::{multiple, wait_for, with_engine};
use crate::traits::Communicator;

impl Window {
    /// Sends synchronization message `k` (with `lock`) to member `t`, then waits for its
    /// answer if it has one.
    pub(super) fn sync_msg(&self, t: usize, k: u8, lock: u8) -> Result<()> {
        let ctx = self.ctx;
        if !multiple() {
            return with_engine(|e| e.rma_sync_msg(ctx, t, k, lock));
        }
        let Some(owed) = with_engine(|e| e.rma_sync_start(ctx, t, k, lock))? else {
            return Ok(());
        };
        let waiting = Waiting::Rma {
            ctx,
            peer: owed.peer,
            what: owed.what,
        };
        let r = wait_for(waiting, |e| {
            e.reqs.take_done(owed.id).map(|r| r.map(|_| ()))
        });
        with_engine(|e| {
            e.rma_sync_answered(ctx, &owed);
            Ok(())
        })?;
        r
    }

    /// Finishes this rank's outstanding operations locally
    /// (`Engine::rma_finish_local`).
    pub(super) fn finish_local_msgs(&self) -> Result<()> {
        let ctx = self.ctx;
        if multiple() {
            let waiting = Waiting::Rma {
                ctx,
                peer: self.coll.world_rank(self.coll.rank()),
                what: "this rank's one-sided operations",
            };
            wait_for(waiting, |e| match e.rma_outstanding_done(ctx) {
                Ok(true) => Some(Ok(())),
                Ok(false) => None,
                Err(err) => Some(Err(err)),
            })?;
        }
        with_engine(|e| e.rma_finish_local(ctx))
    }

    /// Waits until every member's operations counted in `expected` were applied here.
    pub(super) fn wait_applied(&self, expected: &[u64]) -> Result<()> {
        let ctx = self.ctx;
        if !multiple() {
            return with_engine(|e| e.rma_wait_applied(ctx, expected));
        }
        let waiting = Waiting::Rma {
            ctx,
            peer: self.coll.world_rank(self.coll.rank()),
            what: "the one-sided operations of this epoch",
        };
        wait_for(waiting, |e| e.rma_applied(ctx, expected).then_some(Ok(())))
    }

    /// Waits for member `t`'s post and takes it (`MPI_Win_start`).
    pub(super) fn wait_post(&self, t: usize) -> Result<()> {
        let ctx = self.ctx;
        if multiple() {
            let waiting = Waiting::Rma {
                ctx,
                peer: self.coll.world_rank(t as i32),
                what: "its post (MPI_Win_start)",
            };
            wait_for(waiting, |e| e.rma_post_ready(ctx, t).then_some(Ok(())))?;
        }
        // Ready now at MULTIPLE: the engine takes it without waiting.
        with_engine(|e| e.rma_wait_post(ctx, t))
    }

    /// Waits for member `o`'s access epoch to end here (`MPI_Win_wait`).
    pub(super) fn wait_epoch(&self, o: usize) -> Result<()> {
        let ctx = self.ctx;
        if multiple() {
            let waiting = Waiting::Rma {
                ctx,
                peer: self.coll.world_rank(o as i32),
                what: "its complete (MPI_Win_wait)",
            };
            wait_for(waiting, |e| match e.rma_epoch_done(ctx, o, false) {
                Ok(true) => Some(Ok(())),
                Ok(false) => None,
                Err(err) => Some(Err(err)),
            })?;
        }
        with_engine(|e| e.rma_wait_epoch(ctx, o))
    }
}
