//! The origin side of one-sided operations (see the parent module's contract): issuing
//! operations and synchronization messages, and waiting for their answers and counts.

use super::{
    kind, range_err, Ctrl, DT_INLINE_MAX, INLINE_MAX, PRUNE_AT, TAG_CTRL, TAG_DATA, TAG_REPLY0,
};
use crate::datatype::TypeMap;
use crate::engine::requests::{RecvBuf, ReqId, SendBuf};
use crate::engine::{Engine, Waiting};
use crate::error::{Error, Result};

/// An answer a synchronization message is owed ([`Engine::rma_sync_start`]).
pub(crate) struct Owed {
    /// The request that receives it.
    pub(crate) id: ReqId,
    /// The member it comes from.
    pub(crate) target: usize,
    /// Whether it is a flush's or an unlock's (counted in `answering`).
    pub(crate) counted: bool,
    /// Who owes it (world rank).
    pub(crate) peer: u32,
    /// What it is, for the description of a wait.
    pub(crate) what: &'static str,
}

impl Engine {
    fn rma_reply_tag(&mut self, ctx: u32) -> Result<i32> {
        let w = self.win(ctx)?;
        let t = w.next_reply;
        w.next_reply = if t >= i32::MAX - 1 { TAG_REPLY0 } else { t + 1 };
        Ok(t)
    }

    /// The known size and displacement unit of member `t`'s window are checked by the
    /// caller; this sends operation `c` (kind, op, displacement, count set) to member
    /// `t` with the target datatype `tdt` and the packed origin data `data` (for a
    /// compare-and-swap: compare value, then new value), and posts the receive of the
    /// answer into `answer` for the fetching kinds. Returns the request of the answer
    /// or of the data send, which the next synchronization finishes (and which
    /// request-based operations hand to the program).
    pub(crate) fn rma_issue(
        &mut self,
        ctx: u32,
        t: usize,
        mut c: Ctrl,
        tdt: &TypeMap,
        data: SendBuf,
        answer: Option<RecvBuf>,
    ) -> Result<Option<ReqId>> {
        let to = *self.win(ctx)?.members.get(t).ok_or(Error::InvalidRank {
            rank: t as i32,
            size: 0,
        })?;
        let mut req = None;
        if let Some(buf) = answer {
            c.reply = self.rma_reply_tag(ctx)?;
            let expect = buf.cap() as u64;
            let id = self.irecv(buf, Some(to), Some(c.reply), ctx)?;
            self.rma_prune(ctx)?;
            self.win(ctx)?.outstanding.push((id, expect, false));
            req = Some(id);
        }
        let dtb = tdt.to_wire();
        c.data_len = data.len() as u64;
        let mut data = data;
        if dtb.len() > DT_INLINE_MAX {
            // The datatype leads the data in the data message.
            c.far_dt = true;
            c.dt_len = dtb.len() as u32;
            let mut both = dtb.clone();
            both.extend_from_slice(data.slice(0, data.len()));
            data = SendBuf::Owned(both);
        }
        c.inline = !c.far_dt && data.len() <= INLINE_MAX;
        let msg = if c.inline {
            c.encode(&dtb, data.slice(0, data.len()))
        } else {
            c.encode(&dtb, &[])
        };
        self.rma_send_owned(ctx, to, TAG_CTRL, msg)?;
        if !c.inline {
            let id = self.isend_mode(data, to, TAG_DATA, ctx, false)?;
            self.win(ctx)?.outstanding.push((id, u64::MAX, false));
            req = req.or(Some(id));
        }
        let w = self.win(ctx)?;
        w.issued[t] += 1;
        if c.reply == 0 {
            w.unanswered[t] += 1;
        }
        Ok(req)
    }

    /// Sends a synchronization message (`kind::LOCK`, `UNLOCK`, `FLUSH`, `POST`,
    /// `COMPLETE`) to member `t`; for those answered, waits for the answer.
    pub(crate) fn rma_sync_msg(&mut self, ctx: u32, t: usize, k: u8, lock: u8) -> Result<()> {
        if let Some(a) = self.rma_sync_start(ctx, t, k, lock)? {
            let r = self.rma_wait_req(ctx, a.id, a.peer, a.what);
            self.rma_sync_answered(ctx, &a);
            r?;
        }
        Ok(())
    }

    /// The answer `a` was taken (or its wait ended in an error).
    pub(crate) fn rma_sync_answered(&mut self, ctx: u32, a: &Owed) {
        if let Ok(w) = self.win(ctx) {
            if let Some(n) = w.answering.get_mut(a.target) {
                *n = n.saturating_sub(u32::from(a.counted));
            }
        }
    }

    /// [`rma_sync_msg`](Self::rma_sync_msg) without its wait: the answer still owed.
    pub(crate) fn rma_sync_start(
        &mut self,
        ctx: u32,
        t: usize,
        k: u8,
        lock: u8,
    ) -> Result<Option<Owed>> {
        let w = self.win(ctx)?;
        let to = *w.members.get(t).ok_or(Error::InvalidRank {
            rank: t as i32,
            size: w.members.len(),
        })?;
        let n = w.issued[t];
        if k == kind::FLUSH && w.unanswered[t] == 0 && w.answering[t] == 0 {
            // Every operation since the last flush was a fetch whose answer arrived
            // (the caller finished them locally first), and no other thread's flush
            // is still under way: all applied already.
            return Ok(None);
        }
        let counted = matches!(k, kind::FLUSH | kind::UNLOCK);
        if counted {
            w.unanswered[t] = 0;
            w.answering[t] += 1;
        }
        let answered = matches!(k, kind::LOCK | kind::UNLOCK | kind::FLUSH);
        let mut c = Ctrl {
            kind: k,
            lock,
            n,
            ..Ctrl::default()
        };
        let mut id = None;
        if answered {
            c.reply = self.rma_reply_tag(ctx)?;
            // Answers are empty: no room, nothing can point into this frame after it.
            let none = std::ptr::NonNull::<u8>::dangling().as_ptr();
            id = Some(self.irecv(RecvBuf::Raw(none, 0), Some(to), Some(c.reply), ctx)?);
        }
        let msg = c.encode(&[], &[]);
        self.rma_send_owned(ctx, to, TAG_CTRL, msg)?;
        Ok(id.map(|id| Owed {
            id,
            target: t,
            counted,
            peer: to,
            what: match k {
                kind::LOCK => "a lock grant",
                kind::UNLOCK => "an unlock acknowledgement",
                _ => "a flush acknowledgement",
            },
        }))
    }

    /// Whether every operation of window `ctx` still outstanding has finished (its
    /// answer in, its data sent): [`rma_finish_local`](Self::rma_finish_local) then
    /// waits for nothing.
    pub(crate) fn rma_outstanding_done(&mut self, ctx: u32) -> Result<bool> {
        let w = self.rma.get(ctx).ok_or(Error::InvalidArg(format!(
            "no window with context {ctx:#x}"
        )))?;
        Ok(w.outstanding
            .iter()
            .all(|&(id, _, _)| self.reqs.get(id).is_none() || self.reqs.is_done(id)))
    }

    /// Whether every member's operations counted in `expected` were applied here (after
    /// a round of the target side).
    pub(crate) fn rma_applied(&mut self, ctx: u32, expected: &[u64]) -> bool {
        let _ = self.rma_poll();
        self.rma
            .get(ctx)
            .is_none_or(|w| w.done.iter().zip(expected).all(|(d, x)| d >= x))
    }

    /// Whether member `t` posted an exposure epoch not taken yet (after a round of the
    /// target side).
    pub(crate) fn rma_post_ready(&mut self, ctx: u32, t: usize) -> bool {
        let _ = self.rma_poll();
        self.rma
            .get(ctx)
            .is_none_or(|w| w.posts[t] > w.posts_used[t])
    }

    fn rma_wait_req(&mut self, ctx: u32, id: ReqId, peer: u32, what: &'static str) -> Result<()> {
        if !self.reqs.is_done(id) {
            self.wait_until(Waiting::Rma { ctx, peer, what }, |e| e.reqs.is_done(id))?;
        }
        self.reqs
            .take_done(id)
            .unwrap_or(Err(Error::InvalidRequest))
            .map(|_| ())
    }

    /// Finishes the origin's outstanding requests of window `ctx` (answers received,
    /// data sent): local completion. A fetch answered short means the target refused
    /// the operation.
    pub(crate) fn rma_finish_local(&mut self, ctx: u32) -> Result<()> {
        let w = self.win(ctx)?;
        let out = std::mem::take(&mut w.outstanding);
        let mut err = std::mem::take(&mut w.refused).then(|| {
            range_err("a one-sided operation was refused by its target (outside its window)")
        });
        for (id, expect, user) in out {
            if self.reqs.get(id).is_none() {
                continue; // taken by the program already
            }
            if user {
                // The program's request: finished here, reported by its wait.
                if !self.reqs.is_done(id) {
                    let peer = self.rank;
                    let what = "a request-based operation";
                    self.wait_until(Waiting::Rma { ctx, peer, what }, |e| e.reqs.is_done(id))?;
                }
                continue;
            }
            match self.wait(id) {
                Ok(st) if expect != u64::MAX && st.bytes < expect => {
                    err.get_or_insert(range_err(
                        "a one-sided operation was refused by its target (outside its window)",
                    ));
                }
                Ok(_) => {}
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        err.map_or(Ok(()), Err)
    }

    /// Keeps the origin's list of outstanding requests short within a long passive
    /// epoch: finished ones are taken now (a short answer is remembered as the error
    /// the next synchronization reports); the program's own requests it took already
    /// leave the list.
    fn rma_prune(&mut self, ctx: u32) -> Result<()> {
        if self.win(ctx)?.outstanding.len() < PRUNE_AT {
            return Ok(());
        }
        let out = std::mem::take(&mut self.win(ctx)?.outstanding);
        let mut keep = Vec::with_capacity(out.len());
        for e @ (id, expect, user) in out {
            if self.reqs.get(id).is_none() {
                continue;
            }
            if user || !self.reqs.is_done(id) {
                keep.push(e);
                continue;
            }
            let short = match self.reqs.take_done(id) {
                Some(Ok(st)) => expect != u64::MAX && st.bytes < expect,
                _ => true,
            };
            if short {
                self.win(ctx)?.refused = true;
            }
        }
        self.win(ctx)?.outstanding = keep;
        Ok(())
    }

    /// Hands the request of an operation to the program (module docs of `crate::rma`):
    /// `r`, marked as the program's, or a completed request when the operation needed
    /// none.
    pub(crate) fn rma_user_request(&mut self, ctx: u32, r: Option<ReqId>) -> Result<ReqId> {
        match r {
            Some(id) => {
                if let Some(e) = self.win(ctx)?.outstanding.iter_mut().find(|e| e.0 == id) {
                    e.2 = true;
                }
                Ok(id)
            }
            None => self
                .reqs
                .insert(crate::engine::requests::Req::Done(Ok(Default::default()))),
        }
    }

    /// Waits until every member's operations counted in `expected` (by origin) were
    /// applied here.
    pub(crate) fn rma_wait_applied(&mut self, ctx: u32, expected: &[u64]) -> Result<()> {
        let reached = |e: &Engine| {
            e.rma
                .get(ctx)
                .is_none_or(|w| w.done.iter().zip(expected).all(|(d, x)| d >= x))
        };
        if !reached(self) {
            self.wait_until(
                Waiting::Rma {
                    ctx,
                    peer: self.rank,
                    what: "the one-sided operations of this epoch",
                },
                |e| {
                    let _ = e.rma_poll();
                    reached(e)
                },
            )?;
        }
        Ok(())
    }

    /// Waits for an exposure epoch posted by member `t` and takes it (start).
    pub(crate) fn rma_wait_post(&mut self, ctx: u32, t: usize) -> Result<()> {
        let peer = self.win(ctx)?.members[t];
        let ready = |e: &Engine| e.rma.get(ctx).is_none_or(|w| w.posts[t] > w.posts_used[t]);
        if !ready(self) {
            self.wait_until(
                Waiting::Rma {
                    ctx,
                    peer,
                    what: "its post (MPI_Win_start)",
                },
                |e| {
                    let _ = e.rma_poll();
                    ready(e)
                },
            )?;
        }
        self.win(ctx)?.posts_used[t] += 1;
        Ok(())
    }

    /// Whether member `o`'s access epoch towards this rank is complete (its complete
    /// arrived and its operations were applied); with `take`, consumes it.
    pub(crate) fn rma_epoch_done(&mut self, ctx: u32, o: usize, take: bool) -> Result<bool> {
        self.rma_poll_win(ctx)?;
        let w = self.win(ctx)?;
        let ok = w.completes[o] > w.completes_used[o] && w.done[o] >= w.complete_n[o];
        if ok && take {
            w.completes_used[o] += 1;
        }
        Ok(ok)
    }

    /// Waits for member `o`'s access epoch (MPI_Win_wait).
    pub(crate) fn rma_wait_epoch(&mut self, ctx: u32, o: usize) -> Result<()> {
        if !self.rma_epoch_done(ctx, o, false)? {
            let peer = self.win(ctx)?.members[o];
            self.wait_until(
                Waiting::Rma {
                    ctx,
                    peer,
                    what: "its complete (MPI_Win_wait)",
                },
                |e| e.rma_epoch_done(ctx, o, false).unwrap_or(true),
            )?;
        }
        self.rma_epoch_done(ctx, o, true).map(|_| ())
    }

    /// Operations this rank issued, by target (cumulative).
    pub(crate) fn rma_issued(&mut self, ctx: u32) -> Result<Vec<u64>> {
        Ok(self.win(ctx)?.issued.clone())
    }
}
