//! One-sided communication (MPI RMA) in the engine: the target side of every window of
//! this rank, run from [`Engine::progress`], and the origin side's messages.
//!
//! Contract:
//! * A window is registered under the context of its own private communicator (nothing
//!   else sends on it). Every operation is a *control* message (tag [`TAG_CTRL`]) from
//!   origin to target over the ordinary point-to-point path — shared memory, UDP
//!   (go-back-n) or self — so RMA is as reliable as the links and needs no second
//!   protocol. Data up to [`INLINE_MAX`] bytes rides in the control message; larger data
//!   follows as one message with tag [`TAG_DATA`], which the target receives straight
//!   into the window (put to a contiguous target) or into a staging copy. Answers (get
//!   data, fetched values, lock grants, flush and unlock acknowledgements) go back with a
//!   reply tag the origin chose, at least [`TAG_REPLY0`].
//! * The target processes control messages whenever its engine makes progress — in any
//!   call that waits or polls, collectives and receives included — so passive-target
//!   operations complete while the target is inside any phalanx call.
//! * Counting: each origin counts the operations it issued to each target (cumulative);
//!   each target counts those it applied from each origin. Fence, unlock, flush and
//!   complete carry or exchange the origin's count, and the target acknowledges (or
//!   the fence's waits end) only when its count reached it: remote completion without
//!   an acknowledgement per operation.
//! * Locks: a lock request is granted when compatible (one exclusive holder, or any
//!   number of shared ones), else queued in arrival order; an unlock is answered once
//!   every operation of that origin was applied, then releases and grants what waits.
//! * Bad input never panics: a malformed control message, an operation outside the
//!   window or on a datatype that does not parse is dropped and counted
//!   (`stats.drop_invalid`), still counted as applied (so no wait hangs), and an
//!   operation that owes an answer is answered with zero bytes, which the origin reports
//!   as [`ErrorClass::RmaRange`]. Origins check ranges before sending where the target's
//!   size is known, so a program gets the error at the call.
//! * Bounds: per window one posted control receive of [`CTRL_MAX`] bytes, staging
//!   buffers only for data in flight, a lock queue of at most one entry per origin and
//!   rank.

use super::requests::{RecvBuf, ReqId, SendBuf};
use super::Engine;
use crate::coll::ops::OpKind;
use crate::error::{Error, ErrorClass, Result};
use std::collections::VecDeque;

/// Tag of control messages on a window's context.
pub(crate) const TAG_CTRL: i32 = 1;
/// Tag of data that follows a control message.
pub(crate) const TAG_DATA: i32 = 2;
/// First reply tag.
pub(crate) const TAG_REPLY0: i32 = 16;
/// Largest control message (header, target datatype, inline data).
pub(crate) const CTRL_MAX: usize = 64 << 10;
/// Largest data carried inside a control message.
pub(crate) const INLINE_MAX: usize = 8 << 10;
/// Outstanding origin requests of one window above which finished ones are taken.
const PRUNE_AT: usize = 1024;
/// Control header bytes.
const HDR: usize = 64;
/// Largest target datatype description carried in a control message; a larger one
/// (a strided type of thousands of blocks) leads the data message instead.
const DT_INLINE_MAX: usize = 16 << 10;

/// Kinds of control messages.
pub(crate) mod kind {
    pub const PUT: u8 = 1;
    pub const GET: u8 = 2;
    pub const ACC: u8 = 3;
    pub const GET_ACC: u8 = 4;
    pub const CAS: u8 = 5;
    pub const LOCK: u8 = 10;
    pub const UNLOCK: u8 = 11;
    pub const FLUSH: u8 = 12;
    pub const POST: u8 = 13;
    pub const COMPLETE: u8 = 14;
}

/// Lock types on the wire.
pub(crate) const LOCK_SHARED: u8 = 1;
pub(crate) const LOCK_EXCLUSIVE: u8 = 2;

/// An accumulate operation: a predefined reduction, replace, or no operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccOp {
    /// `target = target op origin`.
    Op(OpKind),
    /// `target = origin` (`MPI_REPLACE`).
    Replace,
    /// Target unchanged (`MPI_NO_OP`, for fetching).
    NoOp,
}

impl AccOp {
    pub(crate) fn code(self) -> u8 {
        match self {
            AccOp::Op(o) => o as u8,
            AccOp::Replace => 32,
            AccOp::NoOp => 33,
        }
    }
    fn from_code(c: u8) -> Option<AccOp> {
        Some(match c {
            32 => AccOp::Replace,
            33 => AccOp::NoOp,
            c => AccOp::Op(OpKind::from_code(c)?),
        })
    }
}

/// One control message's header.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ctrl {
    pub kind: u8,
    pub op: u8,
    pub lock: u8,
    pub inline: bool,
    /// The target datatype leads the data message (too large for the control one).
    pub far_dt: bool,
    pub dt_len: u32,
    pub reply: i32,
    pub disp: u64,
    pub count: u64,
    pub data_len: u64,
    pub n: u64,
}

impl Ctrl {
    /// The message: header, the target datatype's wire form, inline data.
    pub(crate) fn encode(&self, dt: &[u8], data: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; HDR];
        m[0] = self.kind;
        m[1] = self.op;
        m[2] = self.lock;
        m[3] = self.inline as u8 | (self.far_dt as u8) << 1;
        m[4..8].copy_from_slice(&self.reply.to_le_bytes());
        m[8..16].copy_from_slice(&self.disp.to_le_bytes());
        m[16..24].copy_from_slice(&self.count.to_le_bytes());
        m[24..32].copy_from_slice(&self.data_len.to_le_bytes());
        m[32..40].copy_from_slice(&self.n.to_le_bytes());
        let dl = if self.far_dt {
            self.dt_len
        } else {
            dt.len() as u32
        };
        m[40..44].copy_from_slice(&dl.to_le_bytes());
        if !self.far_dt {
            m.extend_from_slice(dt);
        }
        m.extend_from_slice(data);
        m
    }

    /// Header, datatype bytes and inline data of a message; `None` if malformed.
    fn decode(m: &[u8]) -> Option<(Ctrl, &[u8], &[u8])> {
        let h = m.get(..HDR)?;
        let u64at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap_or([0; 8]));
        let c = Ctrl {
            kind: h[0],
            op: h[1],
            lock: h[2],
            inline: h[3] & 1 != 0,
            far_dt: h[3] & 2 != 0,
            dt_len: u32::from_le_bytes(h[40..44].try_into().ok()?),
            reply: i32::from_le_bytes(h[4..8].try_into().ok()?),
            disp: u64at(8),
            count: u64at(16),
            data_len: u64at(24),
            n: u64at(32),
        };
        let dl = if c.far_dt { 0 } else { c.dt_len as usize };
        let dt = m.get(HDR..HDR.checked_add(dl)?)?;
        let data = &m[HDR + dl..];
        Some((c, dt, data))
    }
}

/// A window as its target and origin see it.
pub(crate) struct Win {
    /// Start and length of the window's memory (0, 0 for a dynamic window).
    base: usize,
    size: usize,
    disp_unit: usize,
    dynamic: bool,
    /// Attached regions of a dynamic window: (address, length).
    regions: Vec<(usize, usize)>,
    /// World rank of each member.
    pub(crate) members: Vec<u32>,
    svc: Option<ReqId>,
    buf: Box<[u8]>,
    /// Operations applied, by origin (member index).
    done: Vec<u64>,
    pending: VecDeque<apply::Pending>,
    lock_excl: Option<usize>,
    lock_shared: usize,
    held: Vec<u8>,
    lock_queue: VecDeque<(usize, u8, i32)>,
    /// Unlocks and flushes waiting for their origin's operations: (origin, kind, n,
    /// reply).
    deferred: Vec<(usize, u8, u64, i32)>,
    /// Exposure epochs posted to this rank, by target; and those started.
    posts: Vec<u64>,
    posts_used: Vec<u64>,
    /// Access epochs completed towards this rank, by origin, with the origin's count.
    completes: Vec<u64>,
    completes_used: Vec<u64>,
    complete_n: Vec<u64>,
    /// Origin side: operations issued, by target.
    pub(crate) issued: Vec<u64>,
    /// Origin side: operations to each target since its last flush or unlock that no
    /// answer acknowledges (puts, accumulates). Fetches are answered only once applied,
    /// so a flush after nothing else needs no message.
    unanswered: Vec<u64>,
    /// Origin side: flushes and unlocks sent to each target whose answer has not been
    /// taken yet (another thread's flush still under way covers operations it zeroed
    /// `unanswered` for: a flush after it must not be skipped).
    answering: Vec<u32>,
    next_reply: i32,
    /// Origin side: requests to finish before the next synchronization ends, with the
    /// bytes a fetch's answer must hold (`u64::MAX` for sends), and whether the program
    /// owns the request (request-based operations: waited for, not taken).
    pub(crate) outstanding: Vec<(ReqId, u64, bool)>,
    /// Origin side: an operation was refused (found while pruning `outstanding`),
    /// reported by the next synchronization.
    refused: bool,
}

/// Every window of this rank, with its context (a few: searched in order).
#[derive(Default)]
pub(crate) struct Rma {
    wins: Vec<(u32, Win)>,
}

impl Rma {
    pub(crate) fn active(&self) -> bool {
        !self.wins.is_empty()
    }
    fn get(&self, ctx: u32) -> Option<&Win> {
        self.wins.iter().find(|w| w.0 == ctx).map(|w| &w.1)
    }
    fn get_mut(&mut self, ctx: u32) -> Option<&mut Win> {
        self.wins.iter_mut().find(|w| w.0 == ctx).map(|w| &mut w.1)
    }
    fn remove(&mut self, ctx: u32) -> Option<Win> {
        let i = self.wins.iter().position(|w| w.0 == ctx)?;
        Some(self.wins.remove(i).1)
    }
}

/// What a window's memory is.
#[derive(Clone, Copy, Debug)]
pub enum WinMem {
    /// `size` bytes at `base`, displacements in units of `disp_unit`.
    Fixed {
        /// Start address.
        base: usize,
        /// Bytes.
        size: usize,
        /// Displacement unit.
        disp_unit: usize,
    },
    /// Memory attached later; displacements are addresses.
    Dynamic,
}

fn range_err(what: impl Into<String>) -> Error {
    Error::Rma(ErrorClass::RmaRange, what.into())
}

impl Engine {
    /// Registers a window on context `ctx` (members by world rank, this rank among them).
    pub(crate) fn rma_register(&mut self, ctx: u32, members: Vec<u32>, mem: WinMem) -> Result<()> {
        let p = members.len();
        let (base, size, disp_unit, dynamic) = match mem {
            WinMem::Fixed {
                base,
                size,
                disp_unit,
            } => (base, size, disp_unit.max(1), false),
            WinMem::Dynamic => (0, 0, 1, true),
        };
        let w = Win {
            base,
            size,
            disp_unit,
            dynamic,
            regions: Vec::new(),
            members,
            svc: None,
            buf: vec![0u8; CTRL_MAX].into_boxed_slice(),
            done: vec![0; p],
            pending: VecDeque::new(),
            lock_excl: None,
            lock_shared: 0,
            held: vec![0; p],
            lock_queue: VecDeque::new(),
            deferred: Vec::new(),
            posts: vec![0; p],
            posts_used: vec![0; p],
            completes: vec![0; p],
            completes_used: vec![0; p],
            complete_n: vec![0; p],
            issued: vec![0; p],
            unanswered: vec![0; p],
            answering: vec![0; p],
            next_reply: TAG_REPLY0,
            outstanding: Vec::new(),
            refused: false,
        };
        self.rma.wins.push((ctx, w));
        self.rma_post_service(ctx)
    }

    /// Removes window `ctx` (after the caller's collective free): cancels its control
    /// receive and drops its state.
    pub(crate) fn rma_unregister(&mut self, ctx: u32) -> Result<()> {
        if let Some(w) = self.rma.remove(ctx) {
            // Nothing may write into the window's buffers once they are gone: a receive
            // already matched (a control message arriving in pieces) is waited for.
            if let Some(id) = w.svc {
                if !self.cancel(id).unwrap_or(true) {
                    let _ = self.wait(id);
                }
                let _ = self.reqs.take_done(id);
            }
            for (id, _, user) in w.outstanding {
                if !user && self.reqs.get(id).is_some() {
                    if !self.cancel(id).unwrap_or(true) {
                        let _ = self.wait(id);
                    }
                    let _ = self.reqs.take_done(id);
                }
            }
            // Data still expected (a program that freed the window before completing
            // its epoch): a receive not matched yet is cancelled, one being received is
            // waited for — nothing writes into the window's memory once it is gone.
            for p in w.pending {
                if !self.cancel(p.req).unwrap_or(true) {
                    let _ = self.wait(p.req);
                }
                let _ = self.reqs.take_done(p.req);
            }
        }
        Ok(())
    }

    /// Attaches (`add`) or detaches memory of a dynamic window.
    pub(crate) fn rma_attach(
        &mut self,
        ctx: u32,
        addr: usize,
        len: usize,
        add: bool,
    ) -> Result<()> {
        let w = self.win(ctx)?;
        if !w.dynamic {
            return Err(Error::Rma(
                ErrorClass::RmaFlavor,
                "attach and detach need a dynamic window".into(),
            ));
        }
        if add {
            w.regions.push((addr, len));
        } else {
            let at = w.regions.iter().position(|r| r.0 == addr).ok_or_else(|| {
                Error::Rma(
                    ErrorClass::RmaAttach,
                    format!("no memory attached at {addr:#x}"),
                )
            })?;
            w.regions.remove(at);
        }
        Ok(())
    }

    fn win(&mut self, ctx: u32) -> Result<&mut Win> {
        self.rma
            .get_mut(ctx)
            .ok_or_else(|| Error::Rma(ErrorClass::Win, "invalid or freed window".into()))
    }

    fn rma_post_service(&mut self, ctx: u32) -> Result<()> {
        let w = self.win(ctx)?;
        let buf = RecvBuf::Raw(w.buf.as_mut_ptr(), w.buf.len());
        let id = self.irecv(buf, None, Some(TAG_CTRL), ctx)?;
        self.win(ctx)?.svc = Some(id);
        Ok(())
    }

    /// Runs the target side of every window: control messages, data received, deferred
    /// answers. Called from `progress`; returns whether anything happened.
    pub(crate) fn rma_poll(&mut self) -> Result<bool> {
        let mut did = false;
        // (Windows are few; no allocation per round.)
        let mut i = 0;
        while let Some(ctx) = self.rma.wins.get(i).map(|w| w.0) {
            did |= self.rma_poll_win(ctx)?;
            i += 1;
        }
        Ok(did)
    }

    fn rma_poll_win(&mut self, ctx: u32) -> Result<bool> {
        let mut did = false;
        loop {
            let Some(w) = self.rma.get_mut(ctx) else {
                return Ok(did);
            };
            let Some(id) = w.svc.filter(|&id| self.reqs.is_done(id)) else {
                break;
            };
            w.svc = None;
            did = true;
            let st = self
                .reqs
                .take_done(id)
                .unwrap_or(Err(Error::InvalidRequest));
            match st {
                Ok(st) => {
                    let n = (st.bytes as usize).min(CTRL_MAX);
                    let msg = self.rma.get(ctx).map(|w| w.buf[..n].to_vec());
                    self.rma_post_service(ctx)?;
                    if let Some(msg) = msg {
                        self.rma_handle(ctx, st.source, &msg)?;
                    }
                }
                Err(_) => {
                    self.stats.drop_invalid += 1;
                    self.rma_post_service(ctx)?;
                }
            }
        }
        did |= self.rma_finish_pending(ctx)?;
        did |= self.rma_deferred(ctx)?;
        Ok(did)
    }

    fn member_of(&mut self, ctx: u32, world: u32) -> Option<usize> {
        self.rma.get(ctx)?.members.iter().position(|&m| m == world)
    }

    fn rma_handle(&mut self, ctx: u32, src: u32, msg: &[u8]) -> Result<()> {
        let Some(o) = self.member_of(ctx, src) else {
            self.stats.drop_invalid += 1;
            return Ok(());
        };
        let Some((c, dtb, data)) = Ctrl::decode(msg) else {
            self.stats.drop_invalid += 1;
            return Ok(());
        };
        match c.kind {
            kind::PUT | kind::GET | kind::ACC | kind::GET_ACC | kind::CAS => {
                self.rma_op(ctx, o, src, c, dtb, data)
            }
            kind::LOCK => {
                let w = self.win(ctx)?;
                let known = c.lock == LOCK_SHARED || c.lock == LOCK_EXCLUSIVE;
                // One lock per origin at a time: held or queued.
                let again = w.held[o] != 0 || w.lock_queue.iter().any(|q| q.0 == o);
                if !known || again {
                    self.stats.drop_invalid += 1;
                    return Ok(());
                }
                w.lock_queue.push_back((o, c.lock, c.reply));
                self.rma_grant(ctx)
            }
            kind::UNLOCK | kind::FLUSH => {
                self.win(ctx)?.deferred.push((o, c.kind, c.n, c.reply));
                self.rma_deferred(ctx).map(|_| ())
            }
            kind::POST => {
                self.win(ctx)?.posts[o] += 1;
                Ok(())
            }
            kind::COMPLETE => {
                let w = self.win(ctx)?;
                w.completes[o] += 1;
                w.complete_n[o] = c.n;
                Ok(())
            }
            _ => {
                self.stats.drop_invalid += 1;
                Ok(())
            }
        }
    }

    /// Sends `data` to world rank `to` with `tag` on `ctx`; nobody waits for the send
    /// (the links deliver it; the request frees itself when done).
    fn rma_send_owned(&mut self, ctx: u32, to: u32, tag: i32, data: Vec<u8>) -> Result<()> {
        let id = self.isend_mode(SendBuf::Owned(data), to, tag, ctx, false)?;
        self.reqs.detach(id)
    }

    /// Grants queued locks that are compatible with those held.
    fn rma_grant(&mut self, ctx: u32) -> Result<()> {
        loop {
            let w = self.win(ctx)?;
            let Some(&(o, lock, reply)) = w.lock_queue.front() else {
                return Ok(());
            };
            let ok = match lock {
                LOCK_EXCLUSIVE => w.lock_excl.is_none() && w.lock_shared == 0,
                _ => w.lock_excl.is_none(),
            };
            if !ok {
                return Ok(());
            }
            w.lock_queue.pop_front();
            if lock == LOCK_EXCLUSIVE {
                w.lock_excl = Some(o);
            } else {
                w.lock_shared += 1;
            }
            w.held[o] = lock;
            let to = w.members[o];
            self.rma_send_owned(ctx, to, reply, Vec::new())?;
        }
    }

    /// Answers unlocks and flushes whose origin's operations were all applied.
    fn rma_deferred(&mut self, ctx: u32) -> Result<bool> {
        let w = self.win(ctx)?;
        if w.deferred.is_empty() {
            return Ok(false);
        }
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut w.deferred)
            .into_iter()
            .partition(|&(o, _, n, _)| w.done[o] >= n);
        w.deferred = wait;
        let did = !ready.is_empty();
        for (o, k, _, reply) in ready {
            let w = self.win(ctx)?;
            let to = w.members[o];
            if k == kind::UNLOCK {
                match w.held[o] {
                    LOCK_EXCLUSIVE if w.lock_excl == Some(o) => w.lock_excl = None,
                    LOCK_SHARED if w.lock_shared > 0 => w.lock_shared -= 1,
                    _ => {}
                }
                w.held[o] = 0;
            }
            self.rma_send_owned(ctx, to, reply, Vec::new())?;
            if k == kind::UNLOCK {
                self.rma_grant(ctx)?;
            }
        }
        Ok(did)
    }
}

mod apply;
mod origin;
#[cfg(test)]
mod tests;
