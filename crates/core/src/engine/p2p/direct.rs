//! The blocking receive: a receive that the caller waits on at once is armed in the
//! engine instead of entering the request table and the posted queue, and a whole eager
//! message that matches it is copied straight into its buffer.
//!
//! Contract: a blocking receive is received exactly as `irecv` + `wait` would receive it
//! (same matching, same order, same status and errors). It takes the armed form only
//! when no posted receive is older than it and no unexpected message matches it (then it
//! is the oldest receive, so the first matching message is its own); any message that is
//! not a whole eager one — a fragment, a rendezvous, anything the other matching paths
//! hand to [`Engine::match_posted`] — turns it into an ordinary request right there, and
//! the wait goes on on that request. At most one receive is armed (the engine is not
//! reentrant); a nested or concurrent one takes the ordinary path. However the wait ends
//! — its message, an error (reported even when the message came in the same round), a
//! panic — the slot is disarmed and no request is left pointing at the caller's buffer.
//!
//! Before arming, a receive from one rank on shared memory looks at that rank's ring
//! alone for a short spin (`Engine::recv_from_ring`): when the next frame there is the
//! whole message (a compact frame) and matches, it is copied out and the receive is done
//! without a progress round. Order is kept: only the *next* frame from that rank is
//! taken, nothing older can match (the conditions above), and any other frame ends the
//! spin, untouched.

use super::super::requests::{RawStatus, RecvBuf, RecvReq, Req, ReqId};
use super::super::{Engine, Waiting};
use crate::error::{Error, Result};

/// The blocking receive slot (one per engine; idle unless a receive is armed). Kept in
/// place and written field by field: no large value moves in or out per receive.
#[derive(Default)]
pub(in crate::engine) struct Direct {
    state: State,
    src: Option<u32>,
    tag: Option<i32>,
    ctx: u32,
    /// The destination, until a message completes the receive or it becomes a request.
    buf: Option<RecvBuf>,
    /// The result once `state` is `Done` (`Ok`) or `Failed` (`error`).
    status: RawStatus,
    error: Option<Error>,
}

#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    Idle,
    Armed,
    Done,
    Failed,
    /// Now the ordinary request `id`.
    Converted(ReqId),
}

impl Direct {
    #[inline]
    fn wants(&self, src: u32, tag: i32, ctx: u32) -> bool {
        self.state == State::Armed
            && self.ctx == ctx
            && self.src.is_none_or(|s| s == src)
            && self.tag.is_none_or(|t| t == tag)
    }

    /// Ends the receive with `result`.
    #[inline]
    fn finish(&mut self, result: Result<RawStatus>) {
        match result {
            Ok(st) => {
                self.status = st;
                self.state = State::Done;
            }
            Err(e) => {
                self.error = Some(e);
                self.state = State::Failed;
            }
        }
    }
}

/// Disarms the blocking receive slot when dropped (a wait that ends by unwinding too).
struct Disarm<'a>(&'a mut Engine);

impl Drop for Disarm<'_> {
    fn drop(&mut self) {
        let d = &mut self.0.p2p.direct;
        if d.state == State::Armed {
            d.state = State::Idle;
            d.buf = None;
        }
    }
}

/// How a receive into `buf` of a `total`-byte message from `source` with `tag` ends, all
/// its bytes in: its status (unpacked where the buffer needs it), or a truncation error
/// when they exceed the buffer.
pub(in crate::engine) fn finish_buf(
    buf: &mut RecvBuf,
    source: u32,
    tag: i32,
    total: u64,
) -> Result<RawStatus> {
    let cap = buf.cap() as u64;
    if total > cap {
        return Err(Error::Truncated {
            len: total,
            cap,
            source_rank: source as i32,
        });
    }
    buf.finish(total);
    Ok(RawStatus {
        source,
        tag,
        bytes: total,
        cancelled: false,
    })
}

impl Engine {
    /// Receives into `buf` from `src` (`None`: any) with `tag` (`None`: any) on context
    /// `ctx`, waiting until the message is in: `irecv` and `wait` in one, without a
    /// request when it can (module docs).
    pub fn recv(
        &mut self,
        buf: RecvBuf,
        src: Option<u32>,
        tag: Option<i32>,
        ctx: u32,
    ) -> Result<RawStatus> {
        if self.p2p.direct.state != State::Idle
            || !self.p2p.posted.is_empty()
            || self.p2p.unexpected.iter().any(|u| u.matches(src, tag, ctx))
        {
            let id = self.irecv(buf, src, tag, ctx)?;
            return self.wait_owned(id);
        }
        if let Some(s) = src {
            self.check_peer(s)?;
        }
        if let Some(t) = tag {
            if t < 0 {
                return Err(Error::InvalidTag(t));
            }
        }
        let mut buf = buf;
        if let Some(s) = src {
            if let Some(r) = self.recv_from_ring(&mut buf, s, tag, ctx) {
                return r;
            }
        }
        let d = &mut self.p2p.direct;
        d.state = State::Armed;
        d.src = src;
        d.tag = tag;
        d.ctx = ctx;
        d.buf = Some(buf);
        // Disarmed however the wait ends, a panic included: no message may land in the
        // caller's buffer after this call.
        let armed = Disarm(self);
        let e = &mut *armed.0;
        let waiting = Waiting::Recv { src, tag, ctx };
        let stall = e.stall_begin(&waiting);
        let r = e.wait_until(waiting, |e| e.p2p.direct.state != State::Armed);
        e.stall_end(stall);
        let d = &mut e.p2p.direct;
        let state = d.state;
        d.state = State::Idle;
        d.buf = None;
        let status = d.status;
        let error = d.error.take();
        drop(armed);
        // An error raised in the round that also brought the message is reported, as
        // `irecv` and `wait` would report it.
        match (state, r) {
            (State::Converted(id), r) => {
                if let Err(err) = r {
                    self.end_request(id);
                    return Err(err);
                }
                self.wait_owned(id)
            }
            (_, Err(err)) => Err(err),
            (State::Done, Ok(())) => Ok(status),
            (State::Failed, Ok(())) => Err(error.unwrap_or(Error::InvalidRequest)),
            (_, Ok(())) => Err(Error::InvalidRequest),
        }
    }

    /// Waits for request `id`, which refers to the caller's buffer: if the wait ends in
    /// an error the request is ended too, so nothing lands in that buffer afterwards.
    fn wait_owned(&mut self, id: ReqId) -> Result<RawStatus> {
        let r = self.wait(id);
        if r.is_err() {
            self.end_request(id);
        }
        r
    }

    /// Ends request `id` if it is still running (its result is dropped).
    fn end_request(&mut self, id: ReqId) {
        if !self.reqs.is_done(id) {
            self.reqs.complete(id, Err(Error::InvalidRequest));
        }
        let _ = self.reqs.take_done(id);
    }

    /// Completes the armed receive with the whole message `data` from `src` with `tag`
    /// on `ctx` if it wants it; false if not (the message goes the ordinary way).
    #[inline]
    pub(in crate::engine) fn direct_deliver(
        &mut self,
        src: u32,
        tag: i32,
        ctx: u32,
        data: &[u8],
    ) -> bool {
        let d = &mut self.p2p.direct;
        if !d.wants(src, tag, ctx) {
            return false;
        }
        let Some(mut buf) = d.buf.take() else {
            return false;
        };
        let total = data.len() as u64;
        buf.write(0, data);
        d.finish(finish_buf(&mut buf, src, tag, total));
        true
    }

    /// The armed receive as an ordinary request if it wants a message from `src` with
    /// `tag` on `ctx` (it is older than every posted receive).
    pub(in crate::engine) fn direct_convert(
        &mut self,
        src: u32,
        tag: i32,
        ctx: u32,
    ) -> Option<ReqId> {
        let d = &mut self.p2p.direct;
        if !d.wants(src, tag, ctx) {
            return None;
        }
        let buf = d.buf.take()?;
        let req = Req::Recv(RecvReq {
            src: d.src,
            tag: d.tag,
            ctx: d.ctx,
            buf,
            matched: None,
            received: 0,
        });
        match self.reqs.insert(req) {
            Ok(id) => {
                self.p2p.direct.state = State::Converted(id);
                Some(id)
            }
            Err(e) => {
                self.p2p.direct.finish(Err(e));
                None
            }
        }
    }

    /// Whether the armed receive wants a message from `src` with `tag` on `ctx`.
    pub(in crate::engine) fn direct_wants(&self, src: u32, tag: i32, ctx: u32) -> bool {
        self.p2p.direct.wants(src, tag, ctx)
    }
}
