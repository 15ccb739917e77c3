//! Zero-copy rendezvous sends over go-back-n: datagrams that take their payload from the
//! send buffer where it lies.
//!
//! Contract:
//! * Rendezvous data to a peer on go-back-n (UDP) is cut as a header datagram and a
//!   [`Tail`] into the send buffer, [`SharedBuf`]: the window keeps the reference, the
//!   socket sends header and payload as two iovec pieces, and the MAC is computed over the
//!   pieces. A retransmission reads the buffer again. (`PHALANX_ZERO_COPY=0` copies every
//!   datagram instead, as eager data always is.)
//! * Such a send is complete when every one of its datagrams is acknowledged, not when
//!   the last one is cut: its last datagram asks for an ACK at once
//!   ([`phalanx_wire::flags::ACK_REQUEST`]), and [`Pending`] sends are completed in
//!   `pump_all` once the windows hold no reference to their buffer any more — or after
//!   [`ACK_WAIT_NS`] without all the ACKs, when the windows take copies of what is
//!   still unacknowledged (counted in `rndv_ack_waits_expired`). Until then
//!   the buffer is read, never written: MPI's rule that a send buffer is not modified
//!   before the send completes is what makes this sound.
//! * A request given up (`MPI_Request_free`: [`Engine::detach_request`], or
//!   [`Engine::unshare_send`] for the C layer's requests it keeps waiting for) is not
//!   zero-copy from then on (`SendReq::copy`): given up before its first cut (before the
//!   receiver's CTS, usually), it copies every datagram; given up later, what the windows
//!   hold of its buffer is copied into them and later fragments are copied as they are
//!   cut — the caller may reuse the buffer as soon as the receiver has the message,
//!   before its ACKs arrive.
//! * After an error is reported to the caller (a failed progress round or wait), every
//!   send in flight stops sharing ([`Engine::unshare_all`]): the caller may give up any
//!   buffer then. (A send whose receiver clears it to send after that shares again, as
//!   it would have read the buffer at its cut without zero-copy.)
//! * Only contiguous buffers the request points at ([`SendBuf::Raw`]: the caller's, or a
//!   staged copy the C layer keeps until completion) are shared; packed ones
//!   ([`SendBuf::Owned`]) are copied as before.

use std::sync::Arc;

use phalanx_proto::gbn::{Shared, Tail};

use super::super::requests::{RawStatus, Req, ReqId, SendBuf};
use super::super::Engine;
use super::Job;
use crate::error::Result;

/// A caller's contiguous send buffer as go-back-n's windows share it.
struct UserBytes {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the bytes are only read, and the request they belong to does not complete (so
// the caller may not free or change them) while a window holds them (module docs).
unsafe impl Send for UserBytes {}
// SAFETY: as above; concurrent reads of unchanging bytes are sound.
unsafe impl Sync for UserBytes {}

impl Shared for UserBytes {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` is the caller's send buffer, valid and unchanged until
        // the request completes, which waits for every reference to be dropped (module
        // docs); `ptr` is not null and `len` > 0 ([`SharedBuf::of`]).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// A send buffer shared with the windows.
#[derive(Clone)]
pub(in crate::engine) struct SharedBuf(Arc<dyn Shared>);

impl std::fmt::Debug for SharedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SharedBuf")
            .field(&self.0.bytes().len())
            .finish()
    }
}

impl SharedBuf {
    /// `buf` shared, if it is a caller's contiguous buffer.
    pub(super) fn of(buf: &SendBuf) -> Option<SharedBuf> {
        match *buf {
            SendBuf::Raw(ptr, len) if len > 0 && !ptr.is_null() => {
                Some(SharedBuf(Arc::new(UserBytes { ptr, len })))
            }
            _ => None,
        }
    }

    /// `len` bytes at `off`, by reference.
    pub(super) fn tail(&self, off: usize, len: usize) -> Option<Tail> {
        Tail::new(self.0.clone(), off, len)
    }

    /// Whether no window holds a piece of the buffer any more.
    fn released(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }
}

/// Whether a rendezvous job shares its buffer with the windows.
#[derive(Debug, Default)]
pub(in crate::engine) enum Share {
    /// Not decided yet: decided at the first cut (by the medium and the buffer).
    #[default]
    Undecided,
    /// Sharing.
    Yes(SharedBuf),
    /// Copying every datagram (eager data, packed buffers, other media, given up).
    No,
}

impl Share {
    /// Decides, at `buf`'s first cut, whether a job sends it by reference: true when it
    /// now does.
    pub(super) fn decide(&mut self, buf: &SendBuf, allowed: bool) -> bool {
        if !matches!(self, Share::Undecided) {
            return false;
        }
        *self = match SharedBuf::of(buf).filter(|_| allowed) {
            Some(b) => Share::Yes(b),
            None => Share::No,
        };
        matches!(self, Share::Yes(_))
    }

    /// `len` bytes at `off` by reference, when sharing.
    pub(super) fn tail(&self, off: usize, len: usize) -> Option<Tail> {
        match self {
            Share::Yes(b) => b.tail(off, len),
            _ => None,
        }
    }

    /// The shared buffer, if any; the job copies from now on.
    pub(super) fn take(&mut self) -> Option<SharedBuf> {
        match std::mem::replace(self, Share::No) {
            Share::Yes(b) => Some(b),
            _ => None,
        }
    }
}

/// A zero-copy send whose datagrams are all cut, until they are all acknowledged.
#[derive(Debug)]
pub(in crate::engine) struct Pending {
    pub(super) req: ReqId,
    pub(super) bytes: u64,
    pub(super) buf: SharedBuf,
    /// When its last datagram was cut (ns, the engine's clock).
    pub(super) since: u64,
}

/// Longest a send waits for the acknowledgement of its cut datagrams before the windows
/// take copies of what is still unacknowledged and it completes (ns): several
/// retransmission timeouts (0.3–1 ms), so a lost ACK, a descheduled receiver or one
/// that has finished and left costs a send at most this, as a copy at the cut used to.
const ACK_WAIT_NS: u64 = 2_000_000;

impl Engine {
    /// Completes send `req` of `bytes` bytes.
    pub(super) fn complete_send(&mut self, req: ReqId, bytes: u64) {
        let tag = match self.reqs.get(req) {
            Some(Req::Send(s)) => s.tag,
            _ => 0,
        };
        self.reqs.complete(
            req,
            Ok(RawStatus {
                source: self.rank,
                tag,
                bytes,
                cancelled: false,
            }),
        );
    }

    /// Completes the pending zero-copy sends that the windows have let go of, and those
    /// that waited [`ACK_WAIT_NS`] (their unacknowledged datagrams become copies).
    pub(super) fn complete_acked_sends(&mut self, now: u64) -> bool {
        let mut did = false;
        let mut i = 0;
        while i < self.p2p.acked_sends.len() {
            let p = &self.p2p.acked_sends[i];
            if !p.buf.released() && now.saturating_sub(p.since) >= ACK_WAIT_NS {
                self.stats.rndv_ack_waits_expired += 1;
                self.links.gbn.proto.own_tails(&*p.buf.0);
            }
            if self.p2p.acked_sends[i].buf.released() {
                let p = self.p2p.acked_sends.swap_remove(i);
                self.complete_send(p.req, p.bytes);
                did = true;
            } else {
                i += 1;
            }
        }
        did
    }

    /// Gives up request `id`'s result (`MPI_Request_free`); it runs on to completion. A
    /// zero-copy send stops sharing its buffer first ([`unshare_send`](Self::unshare_send)).
    pub fn detach_request(&mut self, id: ReqId) -> Result<()> {
        self.unshare_send(id);
        self.reqs.detach(id)
    }

    /// Send `id` stops sharing its buffer with the windows (module docs): what they hold
    /// of it becomes copies, later fragments are copied as they are cut, and a send
    /// waiting only for acknowledgements completes. For a request the caller gives up
    /// while it runs; anything else is left alone.
    pub fn unshare_send(&mut self, id: ReqId) {
        // Never shares from now on, even if its first cut is still to come.
        if let Some(Req::Send(s)) = self.reqs.get_mut(id) {
            s.copy = true;
        }
        let mut bufs = Vec::new();
        if let Some(i) = self.p2p.acked_sends.iter().position(|p| p.req == id) {
            let p = self.p2p.acked_sends.swap_remove(i);
            bufs.push(p.buf);
            self.complete_send(p.req, p.bytes);
        }
        for q in &mut self.p2p.jobs {
            for job in q.iter_mut() {
                if let Job::Frags { req, shared, .. } = job {
                    if *req == id {
                        // Later fragments are copies: the job never shares again.
                        if let Some(b) = shared.take() {
                            bufs.push(b);
                        }
                    }
                }
            }
        }
        for b in &bufs {
            self.links.gbn.proto.own_tails(&*b.0);
        }
    }

    /// Every send stops sharing its buffer (after an error is reported: the caller may
    /// then give up any buffer). The sends waiting only for acknowledgements complete
    /// at the next round, as they did before zero-copy once their data was cut.
    #[cold]
    pub(in crate::engine) fn unshare_all(&mut self) {
        if self.p2p.queued_jobs == 0
            && self.p2p.acked_sends.is_empty()
            && self.links.gbn.proto.all_acked()
        {
            return;
        }
        for q in &mut self.p2p.jobs {
            for job in q.iter_mut() {
                if let Job::Frags { shared, .. } = job {
                    shared.take();
                }
            }
        }
        self.links.gbn.proto.own_all_tails();
    }

    /// Whether send `id` has every datagram cut and waits only for acknowledgements
    /// (too late to cancel).
    pub(in crate::engine) fn awaiting_acks(&self, id: ReqId) -> bool {
        self.p2p.acked_sends.iter().any(|p| p.req == id)
    }
}
