//! Matched probes (`MPI_Mprobe`, `MPI_Improbe`, `MPI_Mrecv`, `MPI_Imrecv`) and the
//! cancellation of posted receives (`MPI_Cancel`).
//!
//! Contract: a matched probe takes the first message that a receive with its selectors
//! would match out of matching altogether — the unexpected entry is marked claimed, so no
//! other receive, probe or matched probe (of any thread) sees it again — and names it by
//! its unexpected-queue id. The message may still be arriving: an eager message whose
//! later fragments are on their way (they keep being appended to it), or a rendezvous
//! whose data has not moved (its sender waits for the clear-to-send that the matched
//! receive sends). Messages held in careful receive buffers are wanted by a waiting
//! matched probe as by a posted receive, so the careful link hands them over. The matched
//! receive naming the id receives exactly that message into its buffer, with the same
//! truncation rule as any receive. A message that is never received keeps its bytes
//! accounted (MPI: it must be received).
//!
//! Cancelling a receive that has not matched a message removes it from the posted queue
//! and completes it as cancelled (no data, status flagged); a receive that has matched,
//! a send and a collective are not cancelled (MPI allows a cancel to fail: the operation
//! then completes normally).

use super::super::requests::{RawStatus, RecvBuf, RecvReq, Req, ReqId};
use super::super::{Engine, Waiting};
use super::{data_header, Job, UnexpKind};
use crate::error::{Error, Result};
use phalanx_wire::MsgKind;

impl Engine {
    /// Takes the first message matching (`src`, `tag`, `ctx`) already in the unexpected
    /// queue: its id and envelope.
    fn claim(&mut self, src: Option<u32>, tag: Option<i32>, ctx: u32) -> Option<(u64, RawStatus)> {
        let u = self
            .p2p
            .unexpected
            .iter_mut()
            .find(|u| u.matches(src, tag, ctx))?;
        u.claimed = true;
        Some((
            u.id,
            RawStatus {
                source: u.src,
                tag: u.tag,
                bytes: u.total,
                cancelled: false,
            },
        ))
    }

    /// Checks for selectors: `src` a valid rank, `tag` not negative.
    fn check_selectors(&self, src: Option<u32>, tag: Option<i32>) -> Result<()> {
        if let Some(s) = src {
            self.check_peer(s)?;
        }
        match tag {
            Some(t) if t < 0 => Err(Error::InvalidTag(t)),
            _ => Ok(()),
        }
    }

    /// Nonblocking matched probe (`MPI_Improbe`): one round of progress, then the first
    /// matching message, taken out of matching (module docs), or `None`.
    pub fn improbe(
        &mut self,
        src: Option<u32>,
        tag: Option<i32>,
        ctx: u32,
    ) -> Result<Option<(u64, RawStatus)>> {
        self.check_selectors(src, tag)?;
        if let Some(m) = self.claim(src, tag, ctx) {
            return Ok(Some(m));
        }
        self.p2p.probe_wants.push((src, tag, ctx));
        let r = self.progress();
        self.p2p.probe_wants.pop();
        r?;
        Ok(self.claim(src, tag, ctx))
    }

    /// Blocking matched probe (`MPI_Mprobe`): waits for a matching message and takes it
    /// out of matching (module docs).
    pub fn mprobe(
        &mut self,
        src: Option<u32>,
        tag: Option<i32>,
        ctx: u32,
    ) -> Result<(u64, RawStatus)> {
        self.check_selectors(src, tag)?;
        if let Some(m) = self.claim(src, tag, ctx) {
            return Ok(m);
        }
        self.p2p.probe_wants.push((src, tag, ctx));
        let mut found = None;
        let r = self.wait_until(Waiting::Recv { src, tag, ctx }, |e| {
            found = e.claim(src, tag, ctx);
            found.is_some()
        });
        self.p2p.probe_wants.pop();
        r?;
        found.ok_or(Error::InvalidRequest)
    }

    /// Starts receiving the message a matched probe took (`MPI_Imrecv`) into `buf`; an
    /// id that names no such message is an error.
    pub fn imrecv(&mut self, msg: u64, buf: RecvBuf) -> Result<ReqId> {
        let i = self
            .p2p
            .unexpected
            .iter()
            .position(|u| u.id == msg && u.claimed)
            .ok_or_else(|| {
                Error::InvalidArg(format!("no message {msg} taken by a matched probe"))
            })?;
        let u = &self.p2p.unexpected[i];
        let id = self.reqs.insert(Req::Recv(RecvReq {
            src: Some(u.src),
            tag: Some(u.tag),
            ctx: u.ctx,
            buf,
            matched: None,
            received: 0,
        }))?;
        self.receive_unexpected(id, i);
        Ok(id)
    }

    /// Receives the message a matched probe took into `buf` (`MPI_Mrecv`).
    pub fn mrecv(&mut self, msg: u64, buf: RecvBuf) -> Result<RawStatus> {
        let id = self.imrecv(msg, buf)?;
        self.wait(id)
    }

    /// Cancels request `id` (`MPI_Cancel`). A receive that has not matched a message is
    /// taken out of the posted queue and completes as cancelled (true). A send whose
    /// eager message has not started to leave is taken out of its queue and completes as
    /// cancelled (true). A rendezvous send still waiting for its receiver asks it to
    /// drop the request-to-send ([`MsgKind::Cancel`]): when the receiver had not matched
    /// it, the send completes as cancelled, else normally (false here either way: the
    /// answer comes later). Anything else goes on and completes normally (false). An
    /// unknown id is an error.
    pub fn cancel(&mut self, id: ReqId) -> Result<bool> {
        let (src, tag) = match self.reqs.get(id) {
            None => return Err(Error::InvalidRequest),
            Some(Req::Recv(r)) if r.matched.is_none() => (r.src, r.tag),
            Some(Req::Send(s)) if !self.reqs.is_done(id) => {
                let (peer, tag) = (s.peer, s.tag);
                return Ok(self.cancel_send(id, peer, tag));
            }
            Some(_) => return Ok(false),
        };
        let Some(i) = self.p2p.posted.iter().position(|p| p.id == id) else {
            // Not posted (an armed blocking receive converted to a request): leave it.
            return Ok(false);
        };
        self.p2p.posted.remove(i);
        self.reqs.complete(
            id,
            Ok(RawStatus {
                source: src.unwrap_or(u32::MAX),
                tag: tag.unwrap_or(-1),
                bytes: 0,
                cancelled: true,
            }),
        );
        Ok(true)
    }

    /// [`Engine::cancel`] of send `id` to `peer` (see there).
    fn cancel_send(&mut self, id: ReqId, peer: u32, tag: i32) -> bool {
        let jobs = &mut self.p2p.jobs[peer as usize];
        let mine = |j: &Job| matches!(j, Job::Frags { req, .. } if *req == id);
        if let Some(i) = jobs
            .iter()
            .position(|j| matches!(j, Job::Frags { req, next: 0, rreq: None, .. } if *req == id))
        {
            jobs.remove(i);
            self.p2p.queued_jobs -= 1;
            self.complete_cancelled_send(id, tag);
            return true;
        }
        if jobs.iter().any(mine) || self.awaiting_acks(id) {
            return false; // its data is on its way
        }
        // A request-to-send out (or queued: the cancel follows it), nothing matched yet
        // here: ask the receiver.
        let mut h = data_header(self.job_key, self.rank, MsgKind::Cancel, 0, 0, 0);
        h.aux = id;
        self.push_job(peer, Job::Control(h.to_datagram(&[])));
        let now = self.now();
        self.pump(now, peer);
        self.flush(now);
        false
    }

    fn complete_cancelled_send(&mut self, id: ReqId, tag: i32) {
        self.reqs.complete(
            id,
            Ok(RawStatus {
                source: self.rank,
                tag,
                bytes: 0,
                cancelled: true,
            }),
        );
    }

    /// `src` asks to cancel its rendezvous send `sreq`: its request-to-send is dropped if
    /// no receive has matched it (from the unexpected queue, or from a careful link's
    /// held frames); the answer says which.
    pub(in crate::engine) fn on_cancel(&mut self, src: u32, ctx: u32, sreq: u64) {
        let i = self.p2p.unexpected.iter().position(|u| {
            u.src == src
                && !u.claimed
                && matches!(u.kind, UnexpKind::Rts { sreq: s, .. } if s == sreq)
        });
        if let Some(i) = i {
            self.p2p.unexpected.remove(i);
        }
        // On a careful link an unmatched request-to-send may still be held there.
        let dropped = i.is_some() || self.careful_drop_rts(src, sreq);
        let mut h = data_header(self.job_key, self.rank, MsgKind::CancelAck, ctx, 0, 0);
        h.aux = sreq;
        h.aux32 = dropped as u32;
        self.push_job(src, Job::Control(h.to_datagram(&[])));
    }

    /// The answer of `src` to the cancel of send `sreq`.
    pub(in crate::engine) fn on_cancel_ack(&mut self, src: u32, sreq: u64, cancelled: bool) {
        if !cancelled {
            return; // matched first: the send completes normally
        }
        match self.reqs.get(sreq) {
            Some(Req::Send(s)) if s.peer == src && !self.reqs.is_done(sreq) => {
                let tag = s.tag;
                self.complete_cancelled_send(sreq, tag);
            }
            _ => self.stats.drop_invalid += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::requests::RecvBuf;
    use crate::engine::Engine;

    /// A single-rank engine (no launcher: a job of one; messages go to itself).
    fn engine() -> Engine {
        Engine::init().unwrap()
    }

    fn send(e: &mut Engine, data: &[u8], tag: i32) {
        let buf = super::super::super::requests::SendBuf::Owned(data.to_vec());
        e.send(buf, 0, tag, 0, false).unwrap();
    }

    fn recv(e: &mut Engine, tag: Option<i32>, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        let st = e
            .recv(RecvBuf::Raw(v.as_mut_ptr(), n), Some(0), tag, 0)
            .unwrap();
        v.truncate(st.bytes as usize);
        v
    }

    #[test]
    fn a_matched_probe_takes_the_message_out_of_matching() {
        let mut e = engine();
        send(&mut e, b"first", 5);
        send(&mut e, b"second", 5);
        let (m, st) = e.mprobe(None, Some(5), 0).unwrap();
        assert_eq!((st.bytes, st.tag), (5, 5));
        // Probes and receives now see the second message only.
        assert_eq!(e.iprobe(None, Some(5), 0).unwrap().bytes, 6);
        assert_eq!(recv(&mut e, Some(5), 16), b"second");
        assert!(e.improbe(None, None, 0).unwrap().is_none());
        // The matched receive gets the first.
        let mut v = vec![0u8; 8];
        let st = e.mrecv(m, RecvBuf::Raw(v.as_mut_ptr(), 8)).unwrap();
        assert_eq!(&v[..st.bytes as usize], b"first");
        // Its id names nothing now.
        assert!(e.imrecv(m, RecvBuf::Raw(v.as_mut_ptr(), 8)).is_err());
    }

    #[test]
    fn a_matched_probe_takes_a_rendezvous_message_before_its_data_moved() {
        let mut e = engine();
        let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let sid = e
            .isend_mode(
                super::super::super::requests::SendBuf::Owned(big.clone()),
                0,
                1,
                0,
                true,
            )
            .unwrap();
        let (m, st) = e.mprobe(Some(0), None, 0).unwrap();
        assert_eq!(st.bytes, big.len() as u64);
        assert!(e.improbe(Some(0), Some(1), 0).unwrap().is_none());
        let mut v = vec![0u8; big.len()];
        let rid = e.imrecv(m, RecvBuf::Raw(v.as_mut_ptr(), v.len())).unwrap();
        e.wait(rid).unwrap();
        e.wait(sid).unwrap();
        assert_eq!(v, big);
    }

    #[test]
    fn a_cancelled_receive_leaves_the_posted_queue() {
        let mut e = engine();
        let mut a = [0u8; 4];
        let mut b = [0u8; 4];
        let ra = e
            .irecv(RecvBuf::Raw(a.as_mut_ptr(), 4), Some(0), Some(3), 0)
            .unwrap();
        let rb = e
            .irecv(RecvBuf::Raw(b.as_mut_ptr(), 4), Some(0), Some(3), 0)
            .unwrap();
        assert!(e.cancel(ra).unwrap());
        let st = e.wait(ra).unwrap();
        assert!(st.cancelled);
        assert_eq!(st.bytes, 0);
        // The message goes to the receive posted after it.
        send(&mut e, b"abcd", 3);
        let st = e.wait(rb).unwrap();
        assert!(!st.cancelled);
        assert_eq!((&b, a), (b"abcd", [0; 4]));
        // A finished request cannot be cancelled any more.
        assert!(e.cancel(ra).is_err());
    }
}
