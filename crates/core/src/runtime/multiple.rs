//! The blocking calls at `MPI_THREAD_MULTIPLE`: each starts its operation on the engine,
//! then waits in rounds that give the process lock up ([`shared_wait::wait`]).
//!
//! Contract: the same results and errors as the engine's blocking calls; out of line
//! (`#[inline(never)]`), so the single-threaded paths in `runtime` stay small.

use super::{shared_wait, with_engine};
use crate::engine::{Engine, RawStatus, RecvBuf, SendBuf, Waiting};
use crate::error::{Error, Result};
use crate::requests::ReqId;

#[inline(never)]
pub(super) fn wait_request(id: ReqId) -> Result<RawStatus> {
    shared_wait::wait(|e| e.describe_request(id), |e| e.reqs.take_done(id))
}

#[inline(never)]
pub(super) fn wait_any(ids: &[ReqId]) -> Result<(usize, RawStatus)> {
    shared_wait::wait(
        |e| e.describe_request(ids[0]),
        |e| {
            let i = ids.iter().position(|&id| e.reqs.is_done(id))?;
            Some(
                e.reqs
                    .take_done(ids[i])
                    .unwrap_or(Err(Error::InvalidRequest))
                    .map(|st| (i, st)),
            )
        },
    )
}

#[inline(never)]
pub(super) fn wait_some(ids: &[ReqId]) -> Result<Vec<(usize, RawStatus)>> {
    shared_wait::wait(
        |e| e.describe_request(ids[0]),
        |e| {
            ids.iter()
                .any(|&id| e.reqs.is_done(id))
                .then(|| e.take_finished(ids))
        },
    )
}

#[inline(never)]
pub(super) fn send(sb: SendBuf, dest: u32, tag: i32, ctx: u32, synchronous: bool) -> Result<()> {
    if let Some(id) = with_engine(|e| e.start_send(sb, dest, tag, ctx, synchronous))? {
        wait_request(id)?;
    }
    Ok(())
}

#[inline(never)]
pub(super) fn recv(rb: RecvBuf, src: Option<u32>, tag: Option<i32>, ctx: u32) -> Result<RawStatus> {
    let id = with_engine(|e| e.irecv(rb, src, tag, ctx))?;
    wait_request(id)
}

#[inline(never)]
pub(super) fn mprobe(src: Option<u32>, tag: Option<i32>, ctx: u32) -> Result<(u64, RawStatus)> {
    let waiting = |_: &Engine| Waiting::Recv { src, tag, ctx };
    shared_wait::wait(waiting, |e| e.improbe(src, tag, ctx).transpose())
}

#[inline(never)]
pub(super) fn mrecv(msg: u64, rb: RecvBuf) -> Result<RawStatus> {
    let id = with_engine(|e| e.imrecv(msg, rb))?;
    wait_request(id)
}
