//! The request table: generation-checked ids for in-flight sends and receives.
//!
//! Contract: a [`ReqId`] names at most one live request; once the request is taken out
//! (completed and reported) its id never matches again (the slot's generation moves on).
//! The table holds at most [`MAX_REQUESTS`] live requests.

use crate::datatype::TypeMap;
use crate::error::{Error, Result};

/// Upper bound on simultaneously live requests of one rank.
pub const MAX_REQUESTS: usize = 1 << 20;

/// Identifier of a request: generation in the high half, slot in the low half.
pub type ReqId = u64;

/// Completion information of a receive (or a send).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RawStatus {
    /// Source rank in the world.
    pub source: u32,
    /// Message tag.
    pub tag: i32,
    /// Bytes received (or sent).
    pub bytes: u64,
    /// The operation was cancelled (`MPI_Test_cancelled`): it moved no data.
    pub cancelled: bool,
}

/// Where a send's bytes come from.
#[derive(Debug)]
pub enum SendBuf {
    /// Caller-owned contiguous bytes that outlive the request.
    Raw(*const u8, usize),
    /// Bytes packed by the runtime.
    Owned(Vec<u8>),
}

impl SendBuf {
    pub(crate) fn len(&self) -> usize {
        match self {
            SendBuf::Raw(_, n) => *n,
            SendBuf::Owned(v) => v.len(),
        }
    }
    /// The bytes `[off, off + n)`.
    pub(crate) fn slice(&self, off: usize, n: usize) -> &[u8] {
        match self {
            // SAFETY: the request's creator guarantees the buffer outlives the request
            // (scopes enforce it in the safe API); callers stay within `len`.
            SendBuf::Raw(p, _) => unsafe { std::slice::from_raw_parts(p.add(off), n) },
            SendBuf::Owned(v) => &v[off..off + n],
        }
    }
}

/// Where a receive's bytes go.
#[derive(Debug)]
pub enum RecvBuf {
    /// Caller-owned contiguous bytes that outlive the request.
    Raw(*mut u8, usize),
    /// Received into `tmp`, unpacked through `dt` into `dst` at completion.
    Unpack {
        /// Staging buffer of `cap` bytes.
        tmp: Vec<u8>,
        /// Element datatype.
        dt: TypeMap,
        /// Final destination.
        dst: *mut u8,
    },
}

impl RecvBuf {
    pub(crate) fn cap(&self) -> usize {
        match self {
            RecvBuf::Raw(_, n) => *n,
            RecvBuf::Unpack { tmp, .. } => tmp.len(),
        }
    }
    /// Writes `data` at `off`, clipped to the capacity.
    pub(crate) fn write(&mut self, off: u64, data: &[u8]) {
        let cap = self.cap() as u64;
        if off >= cap {
            return;
        }
        let n = data.len().min((cap - off) as usize);
        match self {
            // SAFETY: the request's creator guarantees `cap` writable bytes that outlive
            // the request; `off + n <= cap`.
            RecvBuf::Raw(p, _) => unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), p.add(off as usize), n)
            },
            RecvBuf::Unpack { tmp, .. } => {
                tmp[off as usize..off as usize + n].copy_from_slice(&data[..n])
            }
        }
    }
    /// The first `n` bytes of the destination (clipped to the capacity), for a transfer
    /// that writes them directly.
    pub(crate) fn as_mut_slice(&mut self, n: usize) -> &mut [u8] {
        let n = n.min(self.cap());
        match self {
            // SAFETY: the request's creator guarantees `cap` writable bytes that outlive
            // the request.
            RecvBuf::Raw(p, _) => unsafe { std::slice::from_raw_parts_mut(*p, n) },
            RecvBuf::Unpack { tmp, .. } => &mut tmp[..n],
        }
    }

    /// Final step of a completed receive of `bytes` bytes.
    pub(crate) fn finish(&mut self, bytes: u64) {
        if let RecvBuf::Unpack { tmp, dt, dst } = self {
            let n = (bytes as usize).min(tmp.len());
            // SAFETY: the creator guarantees `dst` holds enough elements for `cap` bytes.
            unsafe { dt.unpack(&tmp[..n], *dst) };
        }
    }
}

/// A send in flight.
#[derive(Debug)]
pub struct SendReq {
    pub(crate) peer: u32,
    pub(crate) tag: i32,
    pub(crate) buf: SendBuf,
    /// Its data is copied into every datagram, never sent from `buf` where it lies (the
    /// request was given up while running: `engine/p2p/zero_copy.rs`).
    pub(crate) copy: bool,
}

/// A receive in flight.
#[derive(Debug)]
pub struct RecvReq {
    pub(crate) src: Option<u32>,
    pub(crate) tag: Option<i32>,
    pub(crate) ctx: u32,
    pub(crate) buf: RecvBuf,
    /// Set once matched: (source, tag, total length).
    pub(crate) matched: Option<(u32, i32, u64)>,
    pub(crate) received: u64,
}

/// The state of a request.
#[derive(Debug)]
pub enum Req {
    /// Sending.
    Send(SendReq),
    /// Receiving.
    Recv(RecvReq),
    /// A collective schedule (its state lives in the engine's collective table).
    Coll,
    /// Finished, waiting to be reported.
    Done(Result<RawStatus>),
}

struct Slot {
    generation: u32,
    req: Option<Req>,
    /// Nobody will ask for the result: the slot is freed when the request finishes.
    detached: bool,
}

/// The table.
#[derive(Default)]
pub struct Requests {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

impl Requests {
    /// Inserts a request.
    #[inline(always)]
    pub fn insert(&mut self, req: Req) -> Result<ReqId> {
        if self.live >= MAX_REQUESTS {
            return Err(Error::Init(format!(
                "more than {MAX_REQUESTS} requests outstanding"
            )));
        }
        self.live += 1;
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 1,
                    req: None,
                    detached: false,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[idx as usize];
        slot.req = Some(req);
        Ok(((slot.generation as u64) << 32) | idx as u64)
    }

    fn slot(&self, id: ReqId) -> Option<&Slot> {
        let s = self.slots.get((id & 0xffff_ffff) as usize)?;
        (s.generation as u64 == id >> 32).then_some(s)
    }

    /// The live request named by `id`.
    pub fn get(&self, id: ReqId) -> Option<&Req> {
        self.slot(id)?.req.as_ref()
    }

    /// The live request named by `id`, mutably.
    pub fn get_mut(&mut self, id: ReqId) -> Option<&mut Req> {
        let s = self.slots.get_mut((id & 0xffff_ffff) as usize)?;
        if s.generation as u64 != id >> 32 {
            return None;
        }
        s.req.as_mut()
    }

    /// Marks a request finished (and frees it if it was [detached](Self::detach)).
    pub fn complete(&mut self, id: ReqId, result: Result<RawStatus>) {
        let Some(r) = self.get_mut(id) else { return };
        *r = Req::Done(result);
        if self.slots[(id & 0xffff_ffff) as usize].detached {
            let _ = self.take_done(id);
        }
    }

    /// Runs `f` on live request `id` and, if it returns a result, finishes the request
    /// with it (one lookup: the small-message path).
    #[inline]
    pub fn complete_with(
        &mut self,
        id: ReqId,
        f: impl FnOnce(&mut Req) -> Option<Result<RawStatus>>,
    ) {
        let Some(slot) = self.slots.get_mut((id & 0xffff_ffff) as usize) else {
            return;
        };
        if slot.generation as u64 != id >> 32 {
            return;
        }
        let Some(req) = slot.req.as_mut() else {
            return;
        };
        let Some(result) = f(req) else {
            return;
        };
        *req = Req::Done(result);
        if slot.detached {
            let _ = self.take_done(id);
        }
    }

    /// Gives up interest in request `id`'s result (`MPI_Request_free`): freed now if it
    /// is finished, else when it finishes. An unknown id is an error.
    pub fn detach(&mut self, id: ReqId) -> Result<()> {
        match self.get(id) {
            None => Err(Error::InvalidRequest),
            Some(Req::Done(_)) => self.take_done(id).map(|_| ()).ok_or(Error::InvalidRequest),
            Some(_) => {
                self.slots[(id & 0xffff_ffff) as usize].detached = true;
                Ok(())
            }
        }
    }

    /// Whether `id` is finished (true also for unknown ids, which wait cannot help).
    pub fn is_done(&self, id: ReqId) -> bool {
        !matches!(
            self.get(id),
            Some(Req::Send(_)) | Some(Req::Recv(_)) | Some(Req::Coll)
        )
    }

    /// Removes and returns a finished request's result; `None` if it is still running.
    #[inline]
    pub fn take_done(&mut self, id: ReqId) -> Option<Result<RawStatus>> {
        let idx = (id & 0xffff_ffff) as usize;
        let Some(s) = self.slots.get_mut(idx) else {
            return Some(Err(Error::InvalidRequest));
        };
        if s.generation as u64 != id >> 32 || s.req.is_none() {
            return Some(Err(Error::InvalidRequest));
        }
        if !matches!(s.req, Some(Req::Done(_))) {
            return None;
        }
        let Some(Req::Done(r)) = s.req.take() else {
            return None;
        };
        s.generation = s.generation.wrapping_add(1).max(1);
        s.detached = false;
        self.free.push(idx as u32);
        self.live -= 1;
        Some(r)
    }

    /// Ids of the sends and receives still running.
    pub fn running_transfers(&self) -> Vec<ReqId> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s.req, Some(Req::Send(_)) | Some(Req::Recv(_))))
            .map(|(i, s)| ((s.generation as u64) << 32) | i as u64)
            .collect()
    }

    /// Number of live requests.
    pub fn live(&self) -> usize {
        self.live
    }
}
