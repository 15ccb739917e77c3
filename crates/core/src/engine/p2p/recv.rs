//! The receive side of point-to-point: posting receives, matching, unexpected messages
//! and delivery into receive buffers.
//!
//! Contract: posted receives and unexpected messages are each kept in arrival order and a
//! message goes to the first posted receive that matches it (source, tag, context, with
//! wildcards), so two messages one receive could match are received in the order they
//! were sent; unexpected eager data is held up to the configured limit (a message from a
//! remote peer beyond it is refused, and its sender retransmits later); a receive
//! completes once all its bytes are in, with a truncation error when they exceed its
//! buffer.

use super::super::requests::{RawStatus, RecvBuf, RecvReq, Req, ReqId};
use super::super::{Engine, Waiting};
use super::*;
use crate::error::{Error, Result};

impl Engine {
    /// Posts a receive.
    #[inline(always)]
    pub fn irecv(
        &mut self,
        buf: RecvBuf,
        src: Option<u32>,
        tag: Option<i32>,
        ctx: u32,
    ) -> Result<ReqId> {
        if let Some(s) = src {
            self.check_peer(s)?;
        }
        if let Some(t) = tag {
            if t < 0 {
                return Err(Error::InvalidTag(t));
            }
        }
        let id = self.reqs.insert(Req::Recv(RecvReq {
            src,
            tag,
            ctx,
            buf,
            matched: None,
            received: 0,
        }))?;
        if self.p2p.unexpected.is_empty() {
            self.p2p.posted.push_back(Posted { id, src, tag, ctx });
            return Ok(id);
        }
        self.irecv_unexpected(id, src, tag, ctx);
        Ok(id)
    }

    /// The rest of [`irecv`](Self::irecv) when messages are waiting: receive `id` takes
    /// the first that matches, or is posted.
    #[inline(never)]
    fn irecv_unexpected(&mut self, id: ReqId, src: Option<u32>, tag: Option<i32>, ctx: u32) {
        // Look in the unexpected queue first (arrival order), skipping entries that a
        // receive already owns or a matched probe took.
        let pos = self
            .p2p
            .unexpected
            .iter()
            .position(|u| u.matches(src, tag, ctx));
        match pos {
            None => self.p2p.posted.push_back(Posted { id, src, tag, ctx }),
            Some(i) => self.receive_unexpected(id, i),
        }
    }

    /// Receive `id` takes unexpected message `i`: delivered now if it is all here (a
    /// whole eager message, or a rendezvous whose sender is now cleared to send), else
    /// owned by the receive until its last fragment arrives.
    pub(in crate::engine) fn receive_unexpected(&mut self, id: ReqId, i: usize) {
        let (src, tag, total) = {
            let u = &self.p2p.unexpected[i];
            (u.src, u.tag, u.total)
        };
        let whole = matches!(&self.p2p.unexpected[i].kind,
            UnexpKind::Eager { data, .. } if data.len() as u64 == total);
        if whole {
            // A whole eager message: one delivery, and its buffer is kept for the next
            // unexpected one.
            if let Some(Unexpected {
                kind: UnexpKind::Eager { data, .. },
                ..
            }) = self.p2p.unexpected.remove(i)
            {
                self.unexpected_release(data.len());
                self.deliver_whole(id, src, tag, &data);
                self.p2p.recycle(data);
            }
            return;
        }
        self.start_recv(id, src, tag, total);
        if self.p2p.unexpected[i].complete() {
            let Some(u) = self.p2p.unexpected.remove(i) else {
                return;
            };
            match u.kind {
                UnexpKind::Eager { data, .. } => {
                    self.unexpected_release(data.len());
                    self.recv_data(id, 0, &data);
                }
                UnexpKind::Rts { sreq, addr } => self.rts_matched(src, u.ctx, sreq, addr, id),
            }
        } else if let UnexpKind::Eager { matched, .. } = &mut self.p2p.unexpected[i].kind {
            *matched = Some(id);
        }
    }

    pub(in crate::engine) fn unexpected_release(&mut self, n: usize) {
        self.p2p.unexpected_bytes = self.p2p.unexpected_bytes.saturating_sub(n);
    }

    /// Probes for a matching message without receiving it.
    pub fn iprobe(&mut self, src: Option<u32>, tag: Option<i32>, ctx: u32) -> Option<RawStatus> {
        self.p2p
            .unexpected
            .iter()
            .find(|u| u.matches(src, tag, ctx))
            .map(|u| RawStatus {
                source: u.src,
                tag: u.tag,
                bytes: u.total,
                cancelled: false,
            })
            // Then messages still in careful receive buffers (each link's come after
            // those of the same link already copied out).
            .or_else(|| self.careful_probe(src, tag, ctx))
    }

    /// Blocking probe.
    pub fn probe(&mut self, src: Option<u32>, tag: Option<i32>, ctx: u32) -> Result<RawStatus> {
        let mut found = None;
        self.wait_until(Waiting::Recv { src, tag, ctx }, |e| {
            found = e.iprobe(src, tag, ctx);
            found.is_some()
        })?;
        found.ok_or(Error::InvalidRequest)
    }

    /// Records the envelope of the message a receive matched; flags truncation.
    pub(in crate::engine) fn start_recv(&mut self, id: ReqId, src: u32, tag: i32, total: u64) {
        if let Some(Req::Recv(r)) = self.reqs.get_mut(id) {
            r.matched = Some((src, tag, total));
        }
        if total == 0 {
            self.finish_recv(id);
        }
    }

    /// Queues an unexpected message (arrival order); returns its id.
    pub(super) fn push_unexpected(
        &mut self,
        src: u32,
        tag: i32,
        ctx: u32,
        total: u64,
        kind: UnexpKind,
    ) -> u64 {
        let id = self.p2p.next_unexpected;
        self.p2p.next_unexpected += 1;
        self.p2p.unexpected.push_back(Unexpected {
            id,
            src,
            tag,
            ctx,
            total,
            kind,
            claimed: false,
        });
        id
    }

    /// Matches receive `id` with a whole message `data` from `src` with `tag` and
    /// completes it (one request lookup: the small-message path).
    #[inline]
    pub(in crate::engine) fn deliver_whole(&mut self, id: ReqId, src: u32, tag: i32, data: &[u8]) {
        self.reqs.complete_with(id, |req| {
            let Req::Recv(r) = req else {
                return None;
            };
            r.buf.write(0, data);
            Some(outcome(r, src, tag, data.len() as u64))
        });
    }

    /// Writes message bytes at `off` into receive `id`; completes it when all arrived.
    pub(in crate::engine) fn recv_data(&mut self, id: ReqId, off: u64, data: &[u8]) {
        let Some(Req::Recv(r)) = self.reqs.get_mut(id) else {
            return;
        };
        r.buf.write(off, data);
        r.received += data.len() as u64;
        if r.matched.is_some_and(|(_, _, total)| r.received >= total) {
            self.finish_recv(id);
        }
    }

    /// Completes receive `id` once all its bytes are in (for transfers outside this file).
    pub(in crate::engine) fn finish_recv_pub(&mut self, id: ReqId) {
        self.finish_recv(id);
    }

    pub(in crate::engine) fn finish_recv(&mut self, id: ReqId) {
        let Some(Req::Recv(r)) = self.reqs.get_mut(id) else {
            return;
        };
        let Some((source, tag, total)) = r.matched else {
            return;
        };
        let result = outcome(r, source, tag, total);
        self.reqs.complete(id, result);
    }

    /// Whether a message from `src` is being received in fragments (its first one taken).
    pub(in crate::engine) fn receiving_from(&self, src: u32) -> bool {
        self.p2p
            .incoming
            .get(src as usize)
            .is_some_and(|i| i.is_some())
    }

    /// Whether a posted receive (or a waiting matched probe) wants a message from `src`
    /// with `tag` on `ctx`.
    pub(in crate::engine) fn has_posted_for(&self, src: u32, tag: i32, ctx: u32) -> bool {
        self.direct_wants(src, tag, ctx)
            || self.p2p.posted.iter().any(|p| p.matches(src, tag, ctx))
            // A waiting matched probe wants what it matches.
            || self.p2p.probe_wants.iter().any(|&(s, t, c)| {
                c == ctx && s.is_none_or(|s| s == src) && t.is_none_or(|t| t == tag)
            })
    }

    pub(in crate::engine) fn match_posted(
        &mut self,
        src: u32,
        tag: i32,
        ctx: u32,
    ) -> Option<ReqId> {
        // The armed blocking receive is older than every posted one.
        if let Some(id) = self.direct_convert(src, tag, ctx) {
            return Some(id);
        }
        loop {
            let q = &mut self.p2p.posted;
            // Usually the oldest matches.
            let i = if q.front()?.matches(src, tag, ctx) {
                0
            } else {
                q.iter().position(|p| p.matches(src, tag, ctx))?
            };
            // Usually the oldest: a pop, not a shift.
            let p = if i == 0 { q.pop_front() } else { q.remove(i) }?;
            // A receive that ended another way (an error) is skipped.
            if matches!(self.reqs.get(p.id), Some(Req::Recv(_))) {
                return Some(p.id);
            }
        }
    }

    pub(in crate::engine) fn on_eager(&mut self, pkt: &Packet<'_>, local: bool) -> bool {
        let (tag, ctx, total, off) = (pkt.tag(), pkt.context(), pkt.msg_len(), pkt.aux());
        self.on_eager_parts(pkt.src(), tag, ctx, total, off, pkt.payload(), local)
    }

    /// An eager fragment: `data` is bytes `off..` of a `total`-byte message. False:
    /// refused for lack of a buffer (it comes again).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(in crate::engine) fn on_eager_parts(
        &mut self,
        src: u32,
        tag: i32,
        ctx: u32,
        total: u64,
        off: u64,
        data: &[u8],
        local: bool,
    ) -> bool {
        let taken = self.eager_parts(src, tag, ctx, total, off, data, local);
        if crate::trace::on() && taken && off == 0 {
            self.trace_arrival(src, tag, total);
        }
        taken
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn eager_parts(
        &mut self,
        src: u32,
        tag: i32,
        ctx: u32,
        total: u64,
        off: u64,
        data: &[u8],
        local: bool,
    ) -> bool {
        if off > 0 {
            // Continuation of the message this peer is in the middle of.
            match self.p2p.incoming[src as usize] {
                Some(Incoming::Req(id)) => {
                    self.recv_data(id, off, data);
                    if self.reqs.is_done(id) {
                        self.p2p.incoming[src as usize] = None;
                    }
                }
                Some(Incoming::Unexpected(uid)) => self.append_unexpected(src, uid, data),
                None => self.stats.drop_invalid += 1,
            }
            return true;
        }
        if data.len() as u64 == total && self.direct_deliver(src, tag, ctx, data) {
            return true;
        }
        if let Some(id) = self.match_posted(src, tag, ctx) {
            if data.len() as u64 == total {
                self.deliver_whole(id, src, tag, data);
                return true;
            }
            self.start_recv(id, src, tag, total);
            if total > 0 {
                self.recv_data(id, 0, data);
                if !self.reqs.is_done(id) {
                    self.p2p.incoming[src as usize] = Some(Incoming::Req(id));
                }
            }
            return true;
        }
        if total > self.cfg.unexpected_limit as u64 {
            // Larger than any eager message could be: corrupt input, dropped.
            self.stats.drop_invalid += 1;
            return true;
        }
        let need = total as usize;
        if !local
            && !self.p2p.unexpected.is_empty()
            && self.p2p.unexpected_bytes.saturating_add(need) > self.unexpected_limit()
        {
            return false;
        }
        self.p2p.unexpected_bytes = self.p2p.unexpected_bytes.saturating_add(need);
        let mut buf = self.p2p.spare.pop().unwrap_or_default();
        buf.reserve(need.min(1 << 20));
        buf.extend_from_slice(&data[..data.len().min(need)]);
        let complete = buf.len() == need;
        let kind = UnexpKind::Eager {
            data: buf,
            matched: None,
        };
        let id = self.push_unexpected(src, tag, ctx, total, kind);
        if !complete {
            self.p2p.incoming[src as usize] = Some(Incoming::Unexpected(id));
        }
        true
    }

    pub(in crate::engine) fn append_unexpected(&mut self, src: u32, uid: u64, data: &[u8]) {
        let Some(i) = self.p2p.unexpected.iter().position(|u| u.id == uid) else {
            self.stats.drop_invalid += 1;
            return;
        };
        let u = &mut self.p2p.unexpected[i];
        let UnexpKind::Eager { data: buf, matched } = &mut u.kind else {
            return;
        };
        let room = (u.total as usize).saturating_sub(buf.len());
        buf.extend_from_slice(&data[..data.len().min(room)]);
        if buf.len() as u64 != u.total {
            return;
        }
        self.p2p.incoming[src as usize] = None;
        if let Some(id) = *matched {
            let Some(u) = self.p2p.unexpected.remove(i) else {
                return;
            };
            if let UnexpKind::Eager { data, .. } = u.kind {
                self.unexpected_release(data.len());
                self.recv_data(id, 0, &data);
            }
        }
    }
}

/// How receive `r` of a `total`-byte message from `source` with `tag` ends, all its bytes
/// in: its status (the bytes unpacked where its buffer needs it), or a truncation error
/// when they exceed its buffer.
fn outcome(r: &mut RecvReq, source: u32, tag: i32, total: u64) -> Result<RawStatus> {
    super::direct::finish_buf(&mut r.buf, source, tag, total)
}
