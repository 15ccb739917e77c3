//! Point-to-point messaging on top of the reliable per-peer streams: the send side and the
//! protocol messages here, the receive side (matching, unexpected messages) in [`recv`].
//!
//! Contract: MPI matching on (source, tag, context) with wildcards and non-overtaking
//! order between a pair (posted and unexpected queues, both in arrival order). Messages
//! up to the eager limit go as `Eager` fragments right away; longer ones send an `Rts`,
//! and the data (`RndvData`, addressed to the receiver's request) follows the receiver's
//! `Cts`. Each peer has one FIFO of send jobs whose fragments are cut from the user's
//! buffer only when the go-back-n window has room, so a job's fragments are contiguous in
//! the stream and a message's buffer is read once (rendezvous data over go-back-n is not
//! copied at all: the datagrams refer to the buffer and the send completes on their
//! acknowledgement or after a bounded wait, [`zero_copy`]). Unexpected eager data is
//! held up to
//! the configured limit; beyond it packets are refused (not acknowledged) and the sender
//! retransmits later — flow control without extra messages.

use super::requests::{RawStatus, Req, ReqId, Requests, SendBuf, SendReq};
use super::{Engine, Waiting};
use crate::error::{Error, Result};
use crate::link::Medium;
use phalanx_wire::{flags, Header, Kind, MsgKind, Packet, HEADER_LEN};
use std::collections::VecDeque;

mod bsend;
pub(super) mod direct;
mod matched;
mod recv;
pub(super) mod zero_copy;

/// `aux32` of an RTS whose payload is the sender's buffer address (single copy).
const RTS_SINGLE_COPY: u32 = 1;

/// A unit of work in a peer's send FIFO.
#[derive(Debug)]
enum Job {
    /// Fragments of request `req`'s buffer: eager (`rreq` = None) or rendezvous data.
    Frags {
        req: ReqId,
        ctx: u32,
        total: u64,
        next: u64,
        rreq: Option<u64>,
        /// Whether the data leaves from the buffer where it lies ([`zero_copy`]).
        shared: zero_copy::Share,
    },
    /// A ready datagram (RTS, CTS).
    Control(Vec<u8>),
}

/// Where the rest of a multi-fragment eager message from a peer goes.
#[derive(Debug, Clone, Copy)]
enum Incoming {
    Req(ReqId),
    Unexpected(u64),
}

#[derive(Debug)]
enum UnexpKind {
    Eager {
        data: Vec<u8>,
        matched: Option<ReqId>,
    },
    Rts {
        sreq: u64,
        /// Single-copy descriptor: the sender's buffer address (shared memory only).
        addr: Option<u64>,
    },
}

#[derive(Debug)]
struct Unexpected {
    id: u64,
    src: u32,
    tag: i32,
    ctx: u32,
    total: u64,
    kind: UnexpKind,
    /// Taken by a matched probe ([`matched`]): no receive or probe matches it any more;
    /// only the matched receive naming its id receives it.
    claimed: bool,
}

impl Unexpected {
    /// Whether a receive for (src, tag, ctx) matches this message (one a receive already
    /// owns, or a matched probe took, does not).
    fn matches(&self, src: Option<u32>, tag: Option<i32>, ctx: u32) -> bool {
        !self.claimed
            && ctx == self.ctx
            && src.is_none_or(|s| s == self.src)
            && tag.is_none_or(|t| t == self.tag)
            && !matches!(
                self.kind,
                UnexpKind::Eager {
                    matched: Some(_),
                    ..
                }
            )
    }

    fn complete(&self) -> bool {
        match &self.kind {
            UnexpKind::Eager { data, .. } => data.len() as u64 == self.total,
            UnexpKind::Rts { .. } => true,
        }
    }
}

/// Matching and send-queue state.
pub(super) struct P2p {
    jobs: Vec<VecDeque<Job>>,
    queued_jobs: usize,
    posted: VecDeque<Posted>,
    unexpected: VecDeque<Unexpected>,
    /// Emptied buffers of small unexpected messages, reused for the next ones (at most
    /// [`SPARE_BUFFERS`] of at most [`SPARE_BYTES`] each).
    spare: Vec<Vec<u8>>,
    unexpected_bytes: usize,
    next_unexpected: u64,
    incoming: Vec<Option<Incoming>>,
    /// Receives still waiting for rendezvous data: receiver request ids.
    rndv_recvs: usize,
    /// The blocking receive being waited on, armed without a request ([`direct`]).
    direct: direct::Direct,
    /// Selectors of the matched probes being waited on: messages they match are wanted
    /// like those of posted receives (careful links hand them over).
    probe_wants: Vec<(Option<u32>, Option<i32>, u32)>,
    /// Buffered-mode sends: the attached capacity and what is in flight ([`bsend`]).
    bsend: bsend::Bsend,
    /// Zero-copy sends whose every datagram is cut, waiting for acknowledgement (at most
    /// [`zero_copy`]'s 2 ms).
    acked_sends: Vec<zero_copy::Pending>,
}

/// A posted receive with its selectors (kept here so matching reads no request).
struct Posted {
    id: ReqId,
    src: Option<u32>,
    tag: Option<i32>,
    ctx: u32,
}

impl Posted {
    fn matches(&self, src: u32, tag: i32, ctx: u32) -> bool {
        self.ctx == ctx && self.src.is_none_or(|s| s == src) && self.tag.is_none_or(|t| t == tag)
    }
}

/// Messages to itself up to this size are delivered at once, through the stack.
const SELF_DIRECT: usize = 256;

/// Buffers kept for unexpected messages, and the largest kept.
const SPARE_BUFFERS: usize = 64;
const SPARE_BYTES: usize = 4096;

impl P2p {
    /// Keeps `buf` for a later unexpected message if it is small and the pool has room.
    fn recycle(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() <= SPARE_BYTES && self.spare.len() < SPARE_BUFFERS {
            buf.clear();
            self.spare.push(buf);
        }
    }

    pub(super) fn new(size: u32) -> P2p {
        P2p {
            jobs: (0..size).map(|_| VecDeque::new()).collect(),
            queued_jobs: 0,
            posted: VecDeque::new(),
            spare: Vec::new(),
            unexpected: VecDeque::new(),
            unexpected_bytes: 0,
            next_unexpected: 1,
            incoming: vec![None; size as usize],
            rndv_recvs: 0,
            direct: Default::default(),
            probe_wants: Vec::new(),
            bsend: Default::default(),
            acked_sends: Vec::new(),
        }
    }

    /// Room for peers up to `size` (ranks that joined after start-up).
    pub(super) fn grow(&mut self, size: u32) {
        let n = size as usize;
        if self.jobs.len() < n {
            self.jobs.resize_with(n, VecDeque::new);
            self.incoming.resize(n, None);
        }
    }

    /// No queued outgoing work (zero-copy sends waiting for acknowledgements may still
    /// run: what they wait for is go-back-n's `all_acked`).
    pub(super) fn idle(&self) -> bool {
        self.queued_jobs == 0
    }

    pub(super) fn describe(&self, reqs: &Requests, id: ReqId) -> Waiting {
        match reqs.get(id) {
            Some(Req::Recv(r)) => Waiting::Recv {
                src: r.src,
                tag: r.tag,
                ctx: r.ctx,
            },
            Some(Req::Send(s)) => Waiting::Send {
                peer: s.peer,
                tag: s.tag,
            },
            Some(Req::Coll) => Waiting::Coll(id),
            _ => Waiting::Nothing,
        }
    }
}

fn data_header(job_key: u64, src: u32, msg: MsgKind, ctx: u32, tag: i32, len: u64) -> Header {
    let mut h = Header::new(Kind::GbnData, job_key, src);
    h.msg = msg;
    h.context = ctx;
    h.tag = tag;
    h.msg_len = len;
    h
}

impl Engine {
    fn check_peer(&self, rank: u32) -> Result<()> {
        if rank >= self.size {
            return Err(Error::InvalidRank {
                rank: rank as i32,
                size: self.size as usize,
            });
        }
        if !self.acquainted[rank as usize] {
            // Spawned by ranks this one is not connected to (see `spawn`): its address is
            // unknown here, and nothing would ever arrive.
            return Err(Error::InvalidArg(format!(
                "job rank {rank} was spawned by other ranks and is not connected to this one"
            )));
        }
        Ok(())
    }

    /// Starts a send of `buf` to world rank `dest`.
    pub fn isend(&mut self, buf: SendBuf, dest: u32, tag: i32, ctx: u32) -> Result<ReqId> {
        self.isend_mode(buf, dest, tag, ctx, false)
    }

    /// Sends and waits until the buffer may be reused (with `synchronous`, until the
    /// receiver matched the message): `isend_mode` and `wait` in one, without a request
    /// when the message went at once.
    pub fn send(
        &mut self,
        buf: SendBuf,
        dest: u32,
        tag: i32,
        ctx: u32,
        synchronous: bool,
    ) -> Result<()> {
        if let Some(id) = self.start_send(buf, dest, tag, ctx, synchronous)? {
            self.wait(id)?;
        }
        Ok(())
    }

    /// Starts a send; `synchronous` forces the rendezvous path whatever the size, so the
    /// request completes only after the receiver matched the message (its CTS, or its
    /// SyncAck after a single-copy pull, is that proof): MPI's synchronous mode.
    pub fn isend_mode(
        &mut self,
        buf: SendBuf,
        dest: u32,
        tag: i32,
        ctx: u32,
        synchronous: bool,
    ) -> Result<ReqId> {
        let len = buf.len() as u64;
        match self.start_send(buf, dest, tag, ctx, synchronous)? {
            Some(id) => Ok(id),
            None => self.reqs.insert(Req::Done(Ok(RawStatus {
                source: self.rank,
                tag,
                bytes: len,
                cancelled: false,
            }))),
        }
    }

    /// Starts a send like [`isend_mode`](Self::isend_mode); `None` when it completed at
    /// once (an eager message already in a shared-memory ring), which takes no request
    /// entry.
    #[inline]
    pub fn start_send(
        &mut self,
        buf: SendBuf,
        dest: u32,
        tag: i32,
        ctx: u32,
        synchronous: bool,
    ) -> Result<Option<ReqId>> {
        // Shared-memory fast path: a message that fits one frame, with nothing queued
        // before it, is written straight into the ring and the send is complete (a peer
        // on shared memory is a valid rank other than this one).
        let len = buf.len();
        if crate::trace::on() && tag >= 0 && dest < self.size {
            self.trace_numbers.sent(dest, tag, len as u64);
        }
        if !synchronous
            && tag >= 0
            && self.via_shm(dest)
            && len <= self.eager_limit_to(dest)
            && self.p2p.jobs[dest as usize].is_empty()
            && self.shm_send_compact(dest, ctx, tag, buf.slice(0, len))
        {
            self.stats.eager_sent += 1;
            self.stats.eager_bytes += len as u64;
            return Ok(None);
        }
        self.start_send_queued(buf, dest, tag, ctx, synchronous)
    }

    /// [`start_send`](Self::start_send) beyond the shared-memory fast path.
    #[inline(never)]
    fn start_send_queued(
        &mut self,
        buf: SendBuf,
        dest: u32,
        tag: i32,
        ctx: u32,
        synchronous: bool,
    ) -> Result<Option<ReqId>> {
        self.check_peer(dest)?;
        if tag < 0 {
            return Err(Error::InvalidTag(tag));
        }
        let len = buf.len() as u64;
        let eager = !synchronous && len as usize <= self.eager_limit_to(dest);
        if eager {
            self.stats.eager_sent += 1;
            self.stats.eager_bytes += len;
        } else {
            self.stats.rndv_sent += 1;
            self.stats.rndv_bytes += len;
        }
        // A small message to itself, with nothing queued before it: matched (or kept as
        // unexpected) now, and the send is complete. Through a copy on the stack: the
        // receive may overlap the send buffer (`MPI_Sendrecv_replace` does that).
        if eager
            && dest == self.rank
            && len as usize <= SELF_DIRECT
            && self.p2p.jobs[dest as usize].is_empty()
            && self.links.local.is_empty()
        {
            let mut tmp = [0u8; SELF_DIRECT];
            let data = &mut tmp[..len as usize];
            data.copy_from_slice(buf.slice(0, len as usize));
            if self.on_eager_parts(dest, tag, ctx, len, 0, data, true) {
                return Ok(None);
            }
        }
        // (The shared-memory fast path was tried by `start_send`.)
        let id = self.reqs.insert(Req::Send(SendReq {
            peer: dest,
            tag,
            buf,
            copy: false,
        }))?;
        let job = if eager {
            Job::Frags {
                req: id,
                ctx,
                total: len,
                next: 0,
                rreq: None,
                shared: zero_copy::Share::No,
            }
        } else {
            let mut h = data_header(self.job_key, self.rank, MsgKind::Rts, ctx, tag, len);
            h.aux = id;
            match self.single_copy_addr(dest, id) {
                // The receiver pulls the data straight from our memory and answers with
                // a SyncAck: one copy, no CTS, no data packets.
                Some(addr) => {
                    h.aux32 = RTS_SINGLE_COPY;
                    Job::Control(h.to_datagram(&addr.to_le_bytes()))
                }
                None => Job::Control(h.to_datagram(&[])),
            }
        };
        self.push_job(dest, job);
        let now = self.now();
        self.pump(now, dest);
        self.flush(now);
        Ok(Some(id))
    }

    /// Queues ready datagrams for `peer` behind its earlier traffic and moves them on.
    pub(crate) fn queue_frames(&mut self, peer: u32, frames: Vec<Vec<u8>>) {
        for d in frames {
            self.push_job(peer, Job::Control(d));
        }
        let now = self.now();
        self.pump(now, peer);
    }

    /// Sends ready datagrams to every one of `to` (distinct peers on one medium, not this
    /// rank), each behind its earlier traffic: a datagram goes to all of them with one
    /// multi-send when none has traffic queued and the link has room for all of them;
    /// otherwise each peer gets its own copy in its queue (and so do the datagrams after
    /// it, which keeps every peer's order).
    pub(crate) fn send_frames_to(&mut self, to: &[u32], frames: Vec<Vec<u8>>) {
        let now = self.now();
        let medium = to.first().map(|&p| self.link(p));
        for mut d in frames {
            if let Some(m) = medium.filter(|_| to.len() > 1) {
                if to.iter().all(|&p| self.p2p.jobs[p as usize].is_empty()) {
                    if let Some((link, net)) = self.links.get(m) {
                        match link.send(net, now, to, d) {
                            Ok(()) => {
                                self.stats.multi_sends += 1;
                                continue;
                            }
                            Err(back) => d = back,
                        }
                    }
                }
            }
            for &p in to {
                self.push_job(p, Job::Control(d.clone()));
            }
        }
        for &p in to {
            self.pump(now, p);
        }
    }

    fn push_job(&mut self, peer: u32, job: Job) {
        self.p2p.jobs[peer as usize].push_back(job);
        self.p2p.queued_jobs += 1;
    }

    /// Moves fragments of every peer's jobs into the windows, and completes the zero-copy
    /// sends whose datagrams are all acknowledged (or that waited long enough).
    pub(super) fn pump_all(&mut self, now: u64) -> bool {
        let mut did = !self.p2p.acked_sends.is_empty() && self.complete_acked_sends(now);
        if self.p2p.queued_jobs == 0 {
            return did;
        }
        for peer in 0..self.size {
            if !self.p2p.jobs[peer as usize].is_empty() {
                did |= self.pump(now, peer);
            }
        }
        did
    }

    /// Cuts datagrams from `peer`'s jobs while its link has room. The link is looked up
    /// once; a full link (window closed, ring full) cuts nothing — no copy of the data,
    /// no request completed early — and the round does not count as progress, so a wait
    /// yields or sleeps instead of spinning on it.
    fn pump(&mut self, now: u64, peer: u32) -> bool {
        let medium = self.link(peer);
        if let Some((link, _)) = self.links.get(medium) {
            link.hold();
        }
        let did = self.pump_held(now, peer, medium);
        if let Some((link, net)) = self.links.get(medium) {
            link.release(net, now);
        }
        did
    }

    /// [`pump`](Self::pump)'s work, with `peer`'s link (`medium`) held.
    fn pump_held(&mut self, now: u64, peer: u32, medium: Medium) -> bool {
        let mut did = false;
        let payload = self.payload_to(medium, &[peer]);
        loop {
            let Some(len) = self.front_len(peer, payload) else {
                return did;
            };
            let Some((link, _)) = self.links.get(medium) else {
                return did;
            };
            if !link.has_room(&[peer], len) {
                if crate::trace::on() {
                    self.trace_numbers.stalled(peer, medium_name(medium), true);
                }
                return did;
            }
            if crate::trace::on() {
                self.trace_numbers.stalled(peer, medium_name(medium), false);
            }
            let Some(job) = self.p2p.jobs[peer as usize].front_mut() else {
                return did;
            };
            let zero_copy = self.cfg.zero_copy && medium == Medium::Gbn;
            let (dgram, tail, finished) = match job {
                Job::Control(d) => (std::mem::take(d), None, None),
                Job::Frags {
                    req,
                    ctx,
                    total,
                    next,
                    rreq,
                    shared,
                } => {
                    let Some(Req::Send(s)) = self.reqs.get(*req) else {
                        // The request vanished (cannot happen: a send completes only once its
                        // job is done).
                        self.p2p.jobs[peer as usize].pop_front();
                        self.p2p.queued_jobs -= 1;
                        continue;
                    };
                    let pre = if rreq.is_some() { 8 } else { 0 };
                    let n = (payload - pre).min((*total - *next) as usize);
                    let msg = if rreq.is_some() {
                        MsgKind::RndvData
                    } else {
                        MsgKind::Eager
                    };
                    let mut h = data_header(self.job_key, self.rank, msg, *ctx, s.tag, *total);
                    h.aux = *next;
                    let last = *next + n as u64 == *total;
                    // Rendezvous data over go-back-n: the payload stays in the send
                    // buffer, and the last datagram asks for an ACK at once (the send
                    // completes on it).
                    // A request already given up copies (its buffer may be reused as soon
                    // as the receiver has the message).
                    let allowed = zero_copy && !s.copy;
                    if shared.decide(&s.buf, allowed) {
                        self.stats.rndv_zero_copy += 1;
                    }
                    let tail = shared.tail(*next as usize, n);
                    if tail.is_some() && last {
                        h.flags |= flags::ACK_REQUEST;
                    }
                    // Built by appending, so the payload is written once (no zeroing).
                    let mut hdr = [0u8; HEADER_LEN];
                    let _ = h.emit(&mut hdr);
                    let body = if tail.is_some() { 0 } else { n };
                    let mut d = Vec::with_capacity(HEADER_LEN + pre + body);
                    d.extend_from_slice(&hdr);
                    if let Some(r) = rreq {
                        d.extend_from_slice(&r.to_le_bytes());
                    }
                    if tail.is_none() {
                        d.extend_from_slice(s.buf.slice(*next as usize, n));
                    }
                    *next += n as u64;
                    // A zero-copy send completes when its datagrams are acknowledged (or
                    // after a bounded wait, [`zero_copy`]).
                    let waits = if last { shared.take() } else { None };
                    (d, tail, last.then_some((*req, *total, waits)))
                }
            };
            let finished_job = match self.p2p.jobs[peer as usize].front() {
                Some(Job::Control(_)) => true,
                Some(Job::Frags { .. }) => finished.is_some(),
                None => true,
            };
            if finished_job {
                self.p2p.jobs[peer as usize].pop_front();
                self.p2p.queued_jobs -= 1;
            }
            match finished {
                Some((req, total, Some(buf))) => self.p2p.acked_sends.push(zero_copy::Pending {
                    req,
                    bytes: total,
                    buf,
                    since: now,
                }),
                Some((req, total, None)) => self.complete_send(req, total),
                None => {}
            }
            let refused = match tail {
                Some(tail) => {
                    debug_assert_eq!(medium, Medium::Gbn, "tails go over go-back-n only");
                    let l = &mut self.links;
                    l.gbn
                        .send_tail(&mut l.net, now, peer, dgram, tail)
                        .err()
                        .map(|(head, tail)| [&head[..], tail.bytes()].concat())
                }
                None => match self.links.get(medium) {
                    Some((link, net)) => link.send(net, now, &[peer], dgram).err(),
                    None => Some(dgram),
                },
            };
            // A datagram the link cannot take now goes back to the front of the queue
            // (`has_room` said it would be taken: never lose it anyway; a refused
            // zero-copy datagram goes back as a copy).
            if let Some(d) = refused {
                self.p2p.jobs[peer as usize].push_front(Job::Control(d));
                self.p2p.queued_jobs += 1;
                return did;
            }
            did = true;
        }
    }

    /// Payload bytes per datagram over `link` to every one of `peers`: the socket's
    /// limit (over go-back-n the largest all of `peers` take: a whole UDP datagram to
    /// ranks of this host), and over shared memory also what one frame of the ring holds
    /// (rings shrink when many ranks share a host).
    #[inline]
    pub(crate) fn payload_to(&self, link: Medium, peers: &[u32]) -> usize {
        match (link, self.links.shm.as_ref()) {
            (Medium::Shm, Some(t)) => self
                .max_payload
                .min(t.max_frame().saturating_sub(HEADER_LEN + 8))
                .max(256),
            (Medium::Gbn, _) => peers
                .iter()
                .map(|&p| self.peer_payload.get(p as usize).copied())
                .min()
                .flatten()
                .unwrap_or(self.max_payload),
            _ => self.max_payload,
        }
    }

    /// The length of the next datagram `peer`'s first job would cut, `payload` bytes of
    /// payload per datagram.
    fn front_len(&self, peer: u32, payload: usize) -> Option<usize> {
        Some(match self.p2p.jobs[peer as usize].front()? {
            Job::Control(d) => d.len(),
            Job::Frags {
                total, next, rreq, ..
            } => {
                let pre = if rreq.is_some() { 8 } else { 0 };
                let n = (payload - pre).min((*total - *next) as usize);
                HEADER_LEN + pre + n
            }
        })
    }

    /// A matched rendezvous request: pull the data directly when the sender published
    /// its buffer (shared memory, `process_vm_readv`), else clear the sender to send.
    fn rts_matched(&mut self, src: u32, ctx: u32, sreq: u64, addr: Option<u64>, rreq: ReqId) {
        if let Some(addr) = addr {
            if self.pull_single_copy(src, addr, rreq) {
                let mut h = data_header(self.job_key, self.rank, MsgKind::SyncAck, ctx, 0, 0);
                h.aux = sreq;
                self.push_job(src, Job::Control(h.to_datagram(&[])));
                return;
            }
        }
        self.send_cts(src, ctx, sreq, rreq);
    }

    fn send_cts(&mut self, peer: u32, ctx: u32, sreq: u64, rreq: ReqId) {
        self.p2p.rndv_recvs += 1;
        let mut h = data_header(self.job_key, self.rank, MsgKind::Cts, ctx, 0, 0);
        h.aux = sreq;
        self.push_job(peer, Job::Control(h.to_datagram(&rreq.to_le_bytes())));
    }

    /// A message from `src` arrived, for the timeline: numbered here unless its link is
    /// careful's (numbered as that link delivered it, see `careful_input`).
    #[cold]
    pub(super) fn trace_arrival(&mut self, src: u32, tag: i32, total: u64) {
        if self.link(src) != crate::link::Medium::Careful {
            self.trace_numbers.arrived(src, tag, total);
        }
    }

    /// Handles one in-order message-layer packet. Returns false to refuse it (no buffer).
    pub(super) fn on_message(&mut self, pkt: &Packet<'_>, local: bool) -> bool {
        let src = pkt.src();
        if src >= self.size {
            self.stats.drop_invalid += 1;
            return true;
        }
        match pkt.msg_kind() {
            MsgKind::Eager => self.on_eager(pkt, local),
            MsgKind::Rts => {
                let (tag, ctx, total) = (pkt.tag(), pkt.context(), pkt.msg_len());
                if crate::trace::on() {
                    self.trace_arrival(src, tag, total);
                }
                let addr = (pkt.aux32() == RTS_SINGLE_COPY)
                    .then(|| pkt.payload().get(..8).and_then(|b| b.try_into().ok()))
                    .flatten()
                    .map(u64::from_le_bytes);
                match self.match_posted(src, tag, ctx) {
                    Some(id) => {
                        self.start_recv(id, src, tag, total);
                        self.rts_matched(src, ctx, pkt.aux(), addr, id);
                    }
                    None => {
                        let kind = UnexpKind::Rts {
                            sreq: pkt.aux(),
                            addr,
                        };
                        self.push_unexpected(src, tag, ctx, total, kind);
                    }
                }
                true
            }
            MsgKind::Cts => {
                let sreq = pkt.aux();
                let rreq = match pkt.payload().get(..8).and_then(|b| b.try_into().ok()) {
                    Some(b) => u64::from_le_bytes(b),
                    None => {
                        self.stats.drop_invalid += 1;
                        return true;
                    }
                };
                let total = match self.reqs.get(sreq) {
                    Some(Req::Send(s)) if s.peer == src => s.buf.len() as u64,
                    _ => {
                        self.stats.drop_invalid += 1;
                        return true;
                    }
                };
                self.push_job(
                    src,
                    Job::Frags {
                        req: sreq,
                        ctx: pkt.context(),
                        total,
                        next: 0,
                        rreq: Some(rreq),
                        shared: zero_copy::Share::Undecided,
                    },
                );
                true
            }
            MsgKind::RndvData => {
                let p = pkt.payload();
                let Some(rreq) = p.get(..8).and_then(|b| b.try_into().ok()) else {
                    self.stats.drop_invalid += 1;
                    return true;
                };
                let rreq = u64::from_le_bytes(rreq);
                match self.reqs.get(rreq) {
                    Some(Req::Recv(r)) if r.matched.is_some_and(|m| m.0 == src) => {}
                    _ => {
                        self.stats.drop_invalid += 1;
                        return true;
                    }
                }
                self.recv_data(rreq, pkt.aux(), &p[8..]);
                if self.reqs.is_done(rreq) {
                    self.p2p.rndv_recvs = self.p2p.rndv_recvs.saturating_sub(1);
                }
                true
            }
            MsgKind::Coll => self.on_coll(pkt, local),
            MsgKind::SyncAck => {
                // The receiver pulled a single-copy rendezvous message: the send is done.
                let sreq = pkt.aux();
                match self.reqs.get(sreq) {
                    Some(Req::Send(s)) if s.peer == src => {
                        let (tag, bytes) = (s.tag, s.buf.len() as u64);
                        self.reqs.complete(
                            sreq,
                            Ok(RawStatus {
                                source: self.rank,
                                tag,
                                bytes,
                                cancelled: false,
                            }),
                        );
                    }
                    _ => self.stats.drop_invalid += 1,
                }
                true
            }
            MsgKind::LinkCounts => {
                self.careful_counts_arrived(src, pkt.aux());
                true
            }
            MsgKind::Cancel => {
                self.on_cancel(src, pkt.context(), pkt.aux());
                true
            }
            MsgKind::CancelAck => {
                self.on_cancel_ack(src, pkt.aux(), pkt.aux32() == 1);
                true
            }
            MsgKind::None => true,
        }
    }
}

/// A medium's name on the timeline (what a stall waits for).
fn medium_name(m: Medium) -> &'static str {
    match m {
        Medium::Gbn => "go-back-n window full",
        Medium::Careful => "careful credits used up",
        Medium::Shm => "shared-memory ring full",
        Medium::Urtp => "URTP window full",
        Medium::Local => "local queue full",
    }
}
