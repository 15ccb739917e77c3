//! Entry points for the C interface (`phalanx-capi`); not a stable API.
//!
//! Contract: these functions reach the engine directly, without the Rust API's request
//! objects and scopes, so that a C `MPI_Isend`/`MPI_Irecv`/`MPI_Wait` costs one engine
//! call each. Buffers are raw pointers whose validity until completion is the caller's
//! (the MPI nonblocking contract, which the C layer states); requests are the engine's
//! generation-checked [`ReqId`](crate::capi_support::ReqId)s (below 2^20 slots, so an id
//! fits 52 bits), each taken out exactly once by [`test`](crate::capi_support::test)/
//! [`wait`](crate::capi_support::wait) or given up by
//! [`detach`](crate::capi_support::detach). Errors are returned, not
//! sent to the fatal handler: the C layer applies the communicator's error handler.

use crate::engine::{RawStatus, RecvBuf, SendBuf};
use crate::error::Result;
use crate::point_to_point::{Source, Status};
use crate::runtime::with_engine;
use crate::topology::{Communicator, SimpleCommunicator};
use std::sync::Arc;

pub use crate::coll::CollKind;
pub use crate::collective::{board_call, LeanCall};
pub use crate::engine::requests::ReqId;
pub use crate::runtime::lock::{enter, yield_now, Entered, Shared};

/// Prints `err` naming the rank and `call`, then ends the job (the fatal handler).
pub fn fatal(call: &str, err: crate::Error) -> ! {
    crate::runtime::fatal(call, err)
}

/// Waits for the first finished of `ids` (`MPI_Waitany`): its position and status.
pub fn wait_any(ids: &[ReqId]) -> Result<(usize, RawStatus)> {
    crate::runtime::wait_any(ids)
}

/// Waits until at least one of `ids` is finished, then completes every finished one
/// (`MPI_Waitsome`): positions and statuses.
pub fn wait_some(ids: &[ReqId]) -> Result<Vec<(usize, RawStatus)>> {
    crate::runtime::wait_some(ids)
}

/// A blocking probe (`MPI_Probe`): waits until a message from world rank `src`
/// (`None`: any) with `tag` (`None`: any) on context `ctx` can be received.
pub fn probe(src: Option<u32>, tag: Option<i32>, ctx: u32) -> Result<RawStatus> {
    crate::runtime::probe(src, tag, ctx)
}

/// Checks once whether a message from `src` with `tag` (`None`: any tag) can be
/// received, without receiving it (`MPI_Iprobe`).
pub fn immediate_probe_tag<S: Source>(src: &S, tag: Option<crate::Tag>) -> Option<Status> {
    let found = iprobe(src.source_world(), tag, src.comm().context());
    let raw = found.unwrap_or_else(|e| crate::runtime::fatal("iprobe", e));
    raw.map(|raw| src.comm().status(raw))
}

/// What a transfer needs of a communicator: its context, its size and the world rank of
/// each member (`None`: the identity, as in the world).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawComm {
    ctx: u32,
    size: i32,
    members: Option<Arc<Vec<u32>>>,
}

impl RawComm {
    /// The parts of `c`.
    pub fn of(c: &SimpleCommunicator) -> RawComm {
        RawComm {
            ctx: c.context(),
            size: c.size(),
            members: c.members().cloned(),
        }
    }
    /// A communicator of `size` members whose ranks are world ranks, on context `ctx`.
    #[inline]
    pub fn identity(ctx: u32, size: i32) -> RawComm {
        RawComm {
            ctx,
            size,
            members: None,
        }
    }
    /// Context id.
    #[inline]
    pub fn ctx(&self) -> u32 {
        self.ctx
    }
    /// Number of members.
    #[inline]
    pub fn size(&self) -> i32 {
        self.size
    }
    /// Whether communicator ranks are world ranks.
    #[inline]
    pub fn is_identity(&self) -> bool {
        self.members.is_none()
    }
    /// World rank of member `r` (in range: checked by the caller).
    #[inline]
    pub fn world_rank(&self, r: i32) -> u32 {
        match &self.members {
            Some(m) => m.get(r as usize).copied().unwrap_or(u32::MAX),
            None => r as u32,
        }
    }
    /// Communicator rank of world rank `w` (-1 if not a member).
    #[inline]
    pub fn comm_rank(&self, w: u32) -> i32 {
        match &self.members {
            Some(m) => m.iter().position(|&x| x == w).map_or(-1, |p| p as i32),
            None => w as i32,
        }
    }
}

/// Starts a send of `len` bytes at `buf` to world rank `dest`; `None` when it completed
/// at once (no request to complete).
///
/// # Safety
/// `buf` is readable for `len` bytes until the returned request completes.
#[inline]
pub unsafe fn isend(
    buf: *const u8,
    len: usize,
    dest: u32,
    tag: i32,
    ctx: u32,
    synchronous: bool,
) -> Result<Option<ReqId>> {
    with_engine(|e| {
        let Some(id) = e.start_send(SendBuf::Raw(buf, len), dest, tag, ctx, synchronous)? else {
            return Ok(None);
        };
        // Completed while starting (an eager message the transport took): no request.
        if !synchronous && e.reqs.is_done(id) {
            if let Some(r) = e.reqs.take_done(id) {
                r?;
                return Ok(None);
            }
        }
        Ok(Some(id))
    })
}

/// Starts a receive into `len` bytes at `buf` from world rank `src` (`None`: any) with
/// `tag` (`None`: any) on context `ctx`.
///
/// # Safety
/// `buf` is writable for `len` bytes, untouched by anyone else, until the request
/// completes.
#[inline]
pub unsafe fn irecv(
    buf: *mut u8,
    len: usize,
    src: Option<u32>,
    tag: Option<i32>,
    ctx: u32,
) -> Result<ReqId> {
    with_engine(|e| e.irecv(RecvBuf::Raw(buf, len), src, tag, ctx))
}

/// Sends `len` bytes at `buf` to world rank `dest` and waits until the buffer may be
/// reused (`MPI_Send`; with `synchronous`, until the receive matched: `MPI_Ssend`).
///
/// # Safety
/// `buf` is readable for `len` bytes for the call.
#[inline]
pub unsafe fn send(
    buf: *const u8,
    len: usize,
    dest: u32,
    tag: i32,
    ctx: u32,
    synchronous: bool,
) -> Result<()> {
    crate::runtime::send(SendBuf::Raw(buf, len), dest, tag, ctx, synchronous)
}

/// Receives into `len` bytes at `buf` from world rank `src` (`None`: any) with `tag`
/// (`None`: any) on context `ctx`, waiting for the message (`MPI_Recv`).
///
/// # Safety
/// `buf` is writable for `len` bytes, untouched by anyone else, for the call.
#[inline]
pub unsafe fn recv(
    buf: *mut u8,
    len: usize,
    src: Option<u32>,
    tag: Option<i32>,
    ctx: u32,
) -> Result<RawStatus> {
    crate::runtime::recv(RecvBuf::Raw(buf, len), src, tag, ctx)
}

/// One round of progress, then whether a message from world rank `src` (`None`: any)
/// with `tag` (`None`: any) on context `ctx` can be received (`MPI_Iprobe`).
#[inline]
pub fn iprobe(src: Option<u32>, tag: Option<i32>, ctx: u32) -> Result<Option<RawStatus>> {
    with_engine(|e| {
        e.progress()?;
        Ok(e.iprobe(src, tag, ctx))
    })
}

/// Completes request `id` if it is finished (one round of progress when it is not yet):
/// its status, `None` if it is still running.
#[inline]
pub fn test(id: ReqId) -> Result<Option<RawStatus>> {
    with_engine(|e| e.test(id))
}

/// Waits for request `id` and completes it.
#[inline]
pub fn wait(id: ReqId) -> Result<RawStatus> {
    crate::runtime::wait_request(id)
}

/// Waits for each of `ids` in order (0: skipped) and completes it, calling `done` with
/// its index and status; stops at the first error. One engine access for the whole set
/// (`MPI_Waitall`).
#[inline]
pub fn wait_each(ids: &[ReqId], done: &mut dyn FnMut(usize, RawStatus)) -> Result<()> {
    if crate::runtime::multiple() {
        for (i, &id) in ids.iter().enumerate() {
            if id != 0 {
                done(i, crate::runtime::wait_request(id)?);
            }
        }
        return Ok(());
    }
    with_engine(|e| {
        for (i, &id) in ids.iter().enumerate() {
            if id != 0 {
                done(i, e.wait(id)?);
            }
        }
        Ok(())
    })
}

/// Cancels request `id` (`MPI_Cancel`): true when it was a receive that had not matched
/// a message (it completes as cancelled); false when it goes on to complete normally.
pub fn cancel(id: ReqId) -> Result<bool> {
    with_engine(|e| e.cancel(id))
}

/// Request `id`, which the C layer gives up while it runs (a freed persistent or
/// staged send), stops reading its buffer after the receiver has it (a zero-copy send
/// copies what is in flight; nothing changes for other requests).
pub fn unshare(id: ReqId) {
    with_engine(|e| {
        e.unshare_send(id);
        Ok(())
    })
    .ok();
}

/// Gives up request `id`'s result (`MPI_Request_free`); it runs on to completion.
pub fn detach(id: ReqId) -> Result<()> {
    with_engine(|e| e.detach_request(id))
}

/// Waits for every send and receive still running (those never completed or given up by
/// [`detach`]), as `MPI_Finalize` does before the universe ends; the first error is
/// returned after all were waited for.
pub fn wait_running() -> Result<()> {
    let ids = with_engine(|e| Ok(e.reqs.running_transfers()))?;
    let mut first = Ok(());
    for id in ids {
        if let Err(err) = crate::runtime::wait_request(id) {
            if first.is_ok() {
                first = Err(err);
            }
        }
    }
    first
}
