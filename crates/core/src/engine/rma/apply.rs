//! The target side of one-sided operations (see the parent module's contract): checking
//! an operation against the window, applying it, and staging it while its data (or its
//! datatype) is still being received.
//!
//! Ordering: operations wait in one queue in arrival order. An accumulate-type
//! operation (accumulate, get-accumulate, compare-and-swap) whose origin still has an
//! operation waiting there is queued behind it even when its data came inline, so one
//! origin's accumulates are applied in the order it issued them (MPI's default).

use super::{kind, AccOp, Ctrl, Win, TAG_DATA};
use crate::coll::ops;
use crate::datatype::TypeMap;
use crate::engine::requests::{RawStatus, RecvBuf, Req, ReqId};
use crate::engine::Engine;
use crate::error::Result;

/// Largest datatype-and-data message of an operation whose datatype leads its data.
const FAR_MAX: u64 = 1 << 30;

/// What the data of a waiting operation turns into.
enum Dest {
    /// Received straight into the window (a put to contiguous memory).
    Window,
    /// Received into `tmp`, applied once complete (or already there: an inline
    /// operation queued behind its origin's earlier ones).
    Staged,
    /// Taken and dropped (the operation was refused).
    Discard,
}

/// An operation waiting for its data, or for its origin's earlier operations.
pub(super) struct Pending {
    pub(super) req: ReqId,
    pub(super) origin: usize,
    src: u32,
    ctrl: Ctrl,
    /// Target datatype and address; `None` while the datatype is still coming.
    target: Option<(TypeMap, usize)>,
    tmp: Vec<u8>,
    dest: Dest,
}

impl Engine {
    /// The datatype and target address of operation `c`, checked against the window
    /// and the data's length; `None` for anything malformed or out of range.
    fn rma_check(w: &Win, c: &Ctrl, dtb: &[u8]) -> Option<(TypeMap, usize)> {
        let dt = TypeMap::from_wire(dtb)?;
        let count = usize::try_from(c.count).ok()?;
        let need = dt.size().checked_mul(count)?;
        let data_ok = match c.kind {
            kind::GET => true,
            kind::CAS => c.inline && count == 1 && c.data_len == 2 * need as u64,
            kind::PUT => c.data_len == need as u64,
            _ => c.data_len == need as u64 && AccOp::from_code(c.op).is_some(),
        };
        if !data_ok {
            return None;
        }
        let span = dt.checked_span(count)?;
        let addr = if w.dynamic {
            let a = usize::try_from(c.disp).ok()?;
            let end = a.checked_add(span)?;
            w.regions
                .iter()
                .any(|&(r, l)| a >= r && end <= r + l)
                .then_some(a)?
        } else {
            let off = usize::try_from(c.disp).ok()?.checked_mul(w.disp_unit)?;
            (off.checked_add(span)? <= w.size).then_some(w.base + off)?
        };
        Some((dt, addr))
    }

    /// A control message carrying operation `c` from member `o` (world rank `src`),
    /// with the target datatype's wire form `dtb` and its inline data.
    pub(super) fn rma_op(
        &mut self,
        ctx: u32,
        o: usize,
        src: u32,
        c: Ctrl,
        dtb: &[u8],
        data: &[u8],
    ) -> Result<()> {
        let data = &data[..data.len().min(c.data_len as usize)];
        if c.far_dt {
            // Datatype and data come together in the data message.
            let n = u64::from(c.dt_len).saturating_add(c.data_len);
            if c.inline || n > FAR_MAX {
                return self.rma_refuse(ctx, o, src, c);
            }
            let tmp = vec![0u8; n as usize];
            return self.rma_stage(ctx, o, src, c, None, tmp, Dest::Staged);
        }
        let w = self.win(ctx)?;
        let Some((dt, addr)) = Self::rma_check(w, &c, dtb) else {
            return self.rma_refuse(ctx, o, src, c);
        };
        let behind = w.pending.iter().any(|p| p.origin == o);
        if c.inline || c.kind == kind::GET {
            if behind && matches!(c.kind, kind::ACC | kind::GET_ACC | kind::CAS) {
                // Behind this origin's earlier accumulates: queued, already complete.
                let st = RawStatus {
                    source: src,
                    bytes: data.len() as u64,
                    ..RawStatus::default()
                };
                let req = self.reqs.insert(Req::Done(Ok(st)))?;
                self.win(ctx)?.pending.push_back(Pending {
                    req,
                    origin: o,
                    src,
                    ctrl: c,
                    target: Some((dt, addr)),
                    tmp: data.to_vec(),
                    dest: Dest::Staged,
                });
                return Ok(());
            }
            self.rma_apply(ctx, src, &c, &dt, addr, data)?;
            self.win(ctx)?.done[o] += 1;
            return Ok(());
        }
        // Data follows: straight into a contiguous window for a put, else staged.
        if c.kind == kind::PUT && dt.is_contiguous() {
            self.rma_stage(ctx, o, src, c, Some((dt, addr)), Vec::new(), Dest::Window)
        } else {
            let tmp = vec![0u8; c.data_len as usize];
            self.rma_stage(ctx, o, src, c, Some((dt, addr)), tmp, Dest::Staged)
        }
    }

    /// Refuses operation `c` (malformed, or outside the window): counted, answered
    /// with zero bytes if it owes an answer (the origin reports it), its data taken and
    /// dropped; it still counts as applied, so no synchronization waits for it.
    fn rma_refuse(&mut self, ctx: u32, o: usize, src: u32, c: Ctrl) -> Result<()> {
        tracing::warn!(
            rank = self.rank,
            origin = src,
            "one-sided operation outside the target window or malformed: dropped"
        );
        self.rma_dropped(ctx, src, &c)?;
        let follows = !c.inline && (c.far_dt || (c.kind != kind::GET && c.data_len > 0));
        if follows {
            return self.rma_stage(
                ctx,
                o,
                src,
                Ctrl { reply: 0, ..c },
                None,
                Vec::new(),
                Dest::Discard,
            );
        }
        self.win(ctx)?.done[o] += 1;
        Ok(())
    }

    /// Counts a dropped operation and answers it with zero bytes if it owes an answer.
    fn rma_dropped(&mut self, ctx: u32, src: u32, c: &Ctrl) -> Result<()> {
        self.stats.drop_invalid += 1;
        if owes(c) {
            self.rma_send_owned(ctx, src, c.reply, Vec::new())?;
        }
        Ok(())
    }

    /// Posts the receive of an operation's data message and queues the operation.
    #[allow(clippy::too_many_arguments)]
    fn rma_stage(
        &mut self,
        ctx: u32,
        origin: usize,
        src: u32,
        ctrl: Ctrl,
        target: Option<(TypeMap, usize)>,
        mut tmp: Vec<u8>,
        dest: Dest,
    ) -> Result<()> {
        let buf = match (&dest, &target) {
            // A put to contiguous window memory, checked by `rma_check`.
            (Dest::Window, Some((_, addr))) => {
                RecvBuf::Raw(*addr as *mut u8, ctrl.data_len as usize)
            }
            // Zero bytes of room: the message is taken and the receive ends truncated.
            (Dest::Discard, _) | (Dest::Window, None) => {
                RecvBuf::Raw(std::ptr::NonNull::<u8>::dangling().as_ptr(), 0)
            }
            (Dest::Staged, _) => RecvBuf::Raw(tmp.as_mut_ptr(), tmp.len()),
        };
        let req = self.irecv(buf, Some(src), Some(TAG_DATA), ctx)?;
        self.win(ctx)?.pending.push_back(Pending {
            req,
            origin,
            src,
            ctrl,
            target,
            tmp,
            dest,
        });
        Ok(())
    }

    /// Applies operation `c` with its packed data at `addr` (checked by `rma_check`).
    fn rma_apply(
        &mut self,
        ctx: u32,
        src: u32,
        c: &Ctrl,
        dt: &TypeMap,
        addr: usize,
        data: &[u8],
    ) -> Result<()> {
        let count = c.count as usize;
        match c.kind {
            kind::PUT => {
                // SAFETY: `addr` and the elements' span lie inside the window's memory
                // (`rma_check`), which its owner keeps valid until the window is freed.
                unsafe { dt.unpack(data, addr as *mut u8) };
                Ok(())
            }
            kind::GET => {
                let mut out = Vec::with_capacity(dt.size() * count);
                // SAFETY: as above, for reads.
                unsafe { dt.pack(addr as *const u8, count, &mut out) };
                self.rma_send_owned(ctx, src, c.reply, out)
            }
            kind::CAS => {
                let mut cur = Vec::with_capacity(dt.size());
                // SAFETY: as above (one element).
                unsafe { dt.pack(addr as *const u8, 1, &mut cur) };
                let (cmp, new) = data.split_at(cur.len().min(data.len()));
                if cur == cmp {
                    // SAFETY: as above; `new` holds one element (`rma_check`).
                    unsafe { dt.unpack(new, addr as *mut u8) };
                }
                self.rma_send_owned(ctx, src, c.reply, cur)
            }
            _ => self.rma_accumulate(ctx, src, c, dt, addr, data),
        }
    }

    /// Accumulate and get-accumulate: the result is computed first; an operation the
    /// datatype does not take is refused (a get-accumulate answered with zero bytes),
    /// else the old values are answered and the result written.
    fn rma_accumulate(
        &mut self,
        ctx: u32,
        src: u32,
        c: &Ctrl,
        dt: &TypeMap,
        addr: usize,
        data: &[u8],
    ) -> Result<()> {
        let count = c.count as usize;
        let mut cur = Vec::with_capacity(dt.size() * count);
        // SAFETY: `addr` and the span of `count` elements lie in the window
        // (`rma_check`).
        unsafe { dt.pack(addr as *const u8, count, &mut cur) };
        let result = match AccOp::from_code(c.op) {
            Some(AccOp::NoOp) | None => None,
            Some(AccOp::Replace) => Some(data.to_vec()),
            Some(AccOp::Op(op)) => {
                let mut acc = cur.clone();
                match ops::apply(op, dt, &mut acc, data) {
                    Ok(()) => Some(acc),
                    Err(e) => {
                        self.stats.drop_invalid += 1;
                        tracing::warn!(rank = self.rank, origin = src, "accumulate refused: {e}");
                        if c.kind == kind::GET_ACC {
                            self.rma_send_owned(ctx, src, c.reply, Vec::new())?;
                        }
                        return Ok(());
                    }
                }
            }
        };
        if c.kind == kind::GET_ACC {
            self.rma_send_owned(ctx, src, c.reply, cur)?;
        }
        if let Some(r) = result {
            // SAFETY: as above, for writes.
            unsafe { dt.unpack(&r, addr as *mut u8) };
        }
        Ok(())
    }

    /// Applies the waiting operations at the front of the queue whose data arrived.
    pub(super) fn rma_finish_pending(&mut self, ctx: u32) -> Result<bool> {
        let mut did = false;
        loop {
            let Some(w) = self.rma.get_mut(ctx) else {
                return Ok(did);
            };
            match w.pending.front() {
                Some(f) if self.reqs.is_done(f.req) => {}
                _ => return Ok(did),
            }
            let p = w.pending.pop_front().expect("front exists");
            did = true;
            let ok = self.reqs.take_done(p.req).is_some_and(|r| r.is_ok());
            match (&p.dest, p.target, ok) {
                (Dest::Discard, _, _) => {}
                (_, _, false) => {
                    self.rma_dropped(ctx, p.src, &p.ctrl)?;
                }
                (Dest::Window, _, true) => {}
                (Dest::Staged, Some((dt, addr)), true) => {
                    self.rma_apply(ctx, p.src, &p.ctrl, &dt, addr, &p.tmp)?;
                }
                (Dest::Staged, None, true) => {
                    // The datatype led the data: check it now.
                    let dl = (p.ctrl.dt_len as usize).min(p.tmp.len());
                    let (dtb, data) = p.tmp.split_at(dl);
                    let c = Ctrl {
                        far_dt: false,
                        inline: true,
                        ..p.ctrl
                    };
                    let w = self.win(ctx)?;
                    match Self::rma_check(w, &c, dtb) {
                        Some((dt, addr)) => self.rma_apply(ctx, p.src, &c, &dt, addr, data)?,
                        None => {
                            self.rma_dropped(ctx, p.src, &c)?;
                        }
                    }
                }
            }
            self.win(ctx)?.done[p.origin] += 1;
        }
    }
}

/// Whether operation `c` owes its origin an answer.
fn owes(c: &Ctrl) -> bool {
    matches!(c.kind, kind::GET | kind::GET_ACC | kind::CAS) && c.reply != 0
}
