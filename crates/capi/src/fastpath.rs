//! The small-message path: `MPI_Isend`, `MPI_Irecv`, `MPI_Send`, `MPI_Recv` and the
//! completion of their requests straight on the engine (`phalanx::capi_support`),
//! without the Rust API's request objects or this crate's request table.
//!
//! Contract: a transfer takes this path when its datatype is predefined; a nonblocking
//! receive also needs a communicator whose ranks are world ranks (its status is
//! translated at completion without the communicator). A nonblocking transfer with
//! `MPI_PROC_NULL` gets the shared `DONE_PROC_NULL` handle (no request at all). Every
//! other case returns `None` and the caller takes the general path. A request on this
//! path is an engine [`ReqId`] carried in the handle itself (`raw_handle`): bit 62 marks
//! it, bit 61 marks a send, the engine's generation and slot (below 2^20) fill the low
//! 52 bits — outside every table handle, `MPI_REQUEST_NULL` and `DONE_SEND`. The engine's
//! generation check makes a stale or forged handle an `MPI_ERR_REQUEST`. A send that
//! completed while starting gets the shared `DONE_SEND` handle and no request at all.

use crate::consts::*;
use crate::p2p::{tag_ok, DONE_PROC_NULL, DONE_SEND};
use crate::state;
use crate::{bytes, bytes_mut, count, err, span, CErr, CResult, Count};
use phalanx::capi_support::Shared;
use phalanx::capi_support::{self as raw, RawComm, ReqId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

const RAW: usize = 1 << 62;
const RAW_SEND: usize = 1 << 61;
const SLOT_BITS: u32 = 20;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// The handle of engine request `id` (a send if `send`).
pub fn raw_handle(id: ReqId, send: bool) -> Handle {
    let generation = (id >> 32) as usize;
    let slot = (id & SLOT_MASK) as usize;
    let h = RAW | if send { RAW_SEND } else { 0 } | generation << SLOT_BITS | slot;
    h as Handle
}

/// The engine request behind handle `h` and whether it is a send; `None` for every
/// other handle.
pub fn raw_id(h: Handle) -> Option<(ReqId, bool)> {
    let h = h as usize;
    if h & (RAW | 1 << 63) != RAW {
        return None;
    }
    let generation = ((h & (RAW_SEND - 1)) >> SLOT_BITS) as u64;
    Some((generation << 32 | (h as u64 & SLOT_MASK), h & RAW_SEND != 0))
}

/// The MPI error of an engine error.
pub(crate) fn cerr(e: phalanx::error::Error) -> CErr {
    err(e.class() as c_int, e.to_string())
}

/// Validated arguments of a contiguous transfer with a predefined datatype.
struct RawSide {
    comm: RawComm,
    errh: usize,
    len: usize,
    peer: c_int,
    tag: c_int,
}

/// `None` when the transfer needs the general path (see the module docs).
#[inline(always)]
fn raw_side(
    comm: Handle,
    cnt: Count,
    datatype: Handle,
    peer: c_int,
    tag: c_int,
    recv: bool,
) -> CResult<Option<RawSide>> {
    let Some(dt_size) = crate::consts::datatype_size(datatype as usize) else {
        return Ok(None);
    };
    if peer == MPI_PROC_NULL {
        return Ok(None);
    }
    // The world's parts as plain values first: through `raw_comm`'s `Result` the
    // compiler stores them narrow and reloads them wide (a store-forwarding stall that
    // showed in the C boundary benchmark).
    let (rc, errh) = match state::world_parts(comm) {
        Some((ctx, size, errh)) => (RawComm::identity(ctx, size), errh),
        None => state::raw_comm(comm)?,
    };
    let n = count(cnt)?;
    let tag = tag_ok(tag, recv)?;
    if !((0..rc.size()).contains(&peer) || (recv && peer == MPI_ANY_SOURCE)) {
        return Err(err(
            MPI_ERR_RANK,
            format!("invalid rank {peer} (communicator size {})", rc.size()),
        ));
    }
    Ok(Some(RawSide {
        comm: rc,
        errh,
        len: span(n, dt_size)?,
        peer,
        tag,
    }))
}

/// `MPI_Isend`/`MPI_Issend`: the request handle, or `None` for the general path.
///
/// # Safety
/// `buf` holds `cnt` elements of `datatype`, valid and unmodified until completion.
pub(crate) unsafe fn isend(
    buf: *const c_void,
    cnt: Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    sync: bool,
) -> CResult<Option<Handle>> {
    if dest == MPI_PROC_NULL {
        return proc_null(comm, cnt, datatype, tag, false);
    }
    let Some(s) = raw_side(comm, cnt, datatype, dest, tag, false)? else {
        return Ok(None);
    };
    // SAFETY: the caller's contract.
    let b = unsafe { bytes(buf, s.len)? };
    let dest = s.comm.world_rank(s.peer);
    // SAFETY: the buffer stays valid until completion (the caller's contract).
    let r = unsafe { raw::isend(b.as_ptr(), b.len(), dest, s.tag, s.comm.ctx(), sync) };
    Ok(Some(match r.map_err(cerr)? {
        None => DONE_SEND as Handle,
        Some(id) => raw_handle(id, true),
    }))
}

/// `MPI_Irecv`: the request handle, or `None` for the general path.
///
/// # Safety
/// `buf` has room for `cnt` elements of `datatype`, untouched until completion.
pub(crate) unsafe fn irecv(
    buf: *mut c_void,
    cnt: Count,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
) -> CResult<Option<Handle>> {
    if source == MPI_PROC_NULL {
        return proc_null(comm, cnt, datatype, tag, true);
    }
    let Some(s) = raw_side(comm, cnt, datatype, source, tag, true)? else {
        return Ok(None);
    };
    if !s.comm.is_identity() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    let b = unsafe { bytes_mut(buf, s.len)? };
    let (src, tag) = selectors(&s);
    // SAFETY: the buffer stays valid and untouched until completion (caller).
    let id = unsafe { raw::irecv(b.as_mut_ptr(), b.len(), src, tag, s.comm.ctx()) };
    Ok(Some(raw_handle(id.map_err(cerr)?, false)))
}

/// A nonblocking transfer with `MPI_PROC_NULL` (validated like any other): the shared
/// handle that completes at once, or `None` for the general path.
fn proc_null(
    comm: Handle,
    cnt: Count,
    datatype: Handle,
    tag: c_int,
    recv: bool,
) -> CResult<Option<Handle>> {
    if crate::consts::datatype_size(datatype as usize).is_none() {
        return Ok(None);
    }
    state::raw_comm(comm)?;
    count(cnt)?;
    tag_ok(tag, recv)?;
    Ok(Some(DONE_PROC_NULL as Handle))
}

/// The engine's source and tag selectors of a receive side.
fn selectors(s: &RawSide) -> (Option<u32>, Option<i32>) {
    let src = (s.peer != MPI_ANY_SOURCE).then(|| s.comm.world_rank(s.peer));
    let tag = (s.tag != MPI_ANY_TAG).then_some(s.tag);
    (src, tag)
}

/// `MPI_Send`/`MPI_Ssend`: `false` when the general path must run it.
///
/// # Safety
/// `buf` holds `cnt` readable elements of `datatype` for the call.
pub(crate) unsafe fn send(
    buf: *const c_void,
    cnt: Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    sync: bool,
) -> CResult<bool> {
    if dest == MPI_PROC_NULL {
        return Ok(proc_null(comm, cnt, datatype, tag, false)?.is_some());
    }
    let Some(s) = raw_side(comm, cnt, datatype, dest, tag, false)? else {
        return Ok(false);
    };
    // SAFETY: the caller's contract.
    let b = unsafe { bytes(buf, s.len)? };
    let dest = s.comm.world_rank(s.peer);
    // SAFETY: the buffer stays valid for the call, which completes the send.
    unsafe { raw::send(b.as_ptr(), b.len(), dest, s.tag, s.comm.ctx(), sync) }.map_err(cerr)?;
    Ok(true)
}

/// `MPI_Recv`: the status, or `None` when the general path must run it (also under
/// `MPI_ERRORS_RETURN`, whose truncation check probes first).
///
/// # Safety
/// `buf` has room for `cnt` elements of `datatype`, writable for the call.
pub(crate) unsafe fn recv(
    buf: *mut c_void,
    cnt: Count,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
) -> CResult<Option<MPI_Status>> {
    let Some(s) = raw_side(comm, cnt, datatype, source, tag, true)? else {
        return Ok(None);
    };
    if s.errh == ERRORS_RETURN {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    let b = unsafe { bytes_mut(buf, s.len)? };
    let (src, tag) = selectors(&s);
    // SAFETY: the buffer is valid for the call, which completes the receive.
    let st = unsafe { raw::recv(b.as_mut_ptr(), b.len(), src, tag, s.comm.ctx()) };
    let st = st.map_err(cerr)?;
    Ok(Some(MPI_Status::new(
        s.comm.comm_rank(st.source),
        st.tag,
        st.bytes,
    )))
}

/// `MPI_Iprobe`: `Some(status if found)`, or `None` when the general path must run it
/// (`MPI_PROC_NULL`, communicators whose ranks are not world ranks).
pub(crate) fn iprobe(
    source: c_int,
    tag: c_int,
    comm: Handle,
) -> CResult<Option<Option<MPI_Status>>> {
    const BYTE: Handle = 0x247 as Handle;
    let Some(s) = raw_side(comm, 0, BYTE, source, tag, true)? else {
        return Ok(None);
    };
    if !s.comm.is_identity() {
        return Ok(None);
    }
    let (src, tag) = selectors(&s);
    let st = raw::iprobe(src, tag, s.comm.ctx()).map_err(cerr)?;
    Ok(Some(st.map(|st| c_status(false, st))))
}

/// Statuses of requests on this path that a non-consuming test completed
/// (`MPI_Testall` that found some not done, `MPI_Request_get_status`): the engine
/// request is gone, the handle is still the program's.
static PARKED: Shared<RefCell<HashMap<usize, MPI_Status>>> =
    Shared::new(|| RefCell::new(HashMap::new()));

/// Whether [`PARKED`] may hold anything (read without reaching the thread-local).
static ANY_PARKED: AtomicBool = AtomicBool::new(false);

/// Members (world ranks) of the communicator of a Rust request handed to C
/// (`phalanx::raw::RawRequest::into_raw`) whose ranks are not world ranks: its
/// status's source is translated at completion.
static MEMBERS: Shared<RefCell<HashMap<usize, std::sync::Arc<Vec<u32>>>>> =
    Shared::new(|| RefCell::new(HashMap::new()));

/// Whether [`MEMBERS`] may hold anything.
static ANY_MEMBERS: AtomicBool = AtomicBool::new(false);

/// Translates the source of handle `h`'s status through `members` at completion.
pub fn set_members(h: Handle, members: std::sync::Arc<Vec<u32>>) {
    ANY_MEMBERS.store(true, Ordering::Relaxed);
    MEMBERS.with(|m| m.borrow_mut().insert(h as usize, members));
}

/// Takes the members recorded for handle `h`, if any.
pub fn take_members(h: Handle) -> Option<std::sync::Arc<Vec<u32>>> {
    if !ANY_MEMBERS.load(Ordering::Relaxed) {
        return None;
    }
    MEMBERS.with(|m| {
        let mut m = m.borrow_mut();
        let r = m.remove(&(h as usize));
        if m.is_empty() {
            ANY_MEMBERS.store(false, Ordering::Relaxed);
        }
        r
    })
}

/// `st` with its world-rank source as a rank of `h`'s communicator when `h` has
/// recorded members.
fn translated(h: Handle, mut st: MPI_Status) -> MPI_Status {
    if let Some(m) = take_members(h) {
        if let Some(r) = m.iter().position(|&w| w as c_int == st.MPI_SOURCE) {
            st.MPI_SOURCE = r as c_int;
        }
    }
    st
}

/// Keeps the status of request handle `h`, completed by a non-consuming test, for its
/// next completion.
pub(crate) fn park(h: Handle, st: MPI_Status) {
    ANY_PARKED.store(true, Ordering::Relaxed);
    PARKED.with(|p| p.borrow_mut().insert(h as usize, st));
}

/// Takes the status a non-consuming test parked for handle `h` (the engine request is
/// gone), if any.
pub fn unpark(h: Handle) -> Option<MPI_Status> {
    if !ANY_PARKED.load(Ordering::Relaxed) {
        return None;
    }
    PARKED.with(|p| {
        let mut p = p.borrow_mut();
        let st = p.remove(&(h as usize));
        if p.is_empty() {
            ANY_PARKED.store(false, Ordering::Relaxed);
        }
        st
    })
}

/// Completes the request of handle `h`, engine request `id` (blocking if `wait`);
/// `None` if still running.
pub(crate) fn complete(
    h: Handle,
    id: ReqId,
    send: bool,
    wait: bool,
) -> CResult<Option<MPI_Status>> {
    if let Some(st) = unpark(h) {
        return Ok(Some(st));
    }
    let st = if wait {
        Some(raw::wait(id).map_err(cerr)?)
    } else {
        raw::test(id).map_err(cerr)?
    };
    Ok(st.map(|st| translated(h, c_status(send, st))))
}

/// The C status of a completed request of this path (a send's is empty but for the
/// cancelled flag).
fn c_status(send: bool, st: phalanx::engine::RawStatus) -> MPI_Status {
    if send {
        let mut c = MPI_Status::empty(MPI_ANY_SOURCE);
        c.MPI_internal[2] = st.cancelled as c_int;
        c
    } else {
        // Receives on this path are on communicators whose ranks are world ranks.
        let mut c = MPI_Status::new(st.source as c_int, st.tag, st.bytes);
        // The cancelled flag, where `MPI_Test_cancelled` reads it.
        c.MPI_internal[2] = st.cancelled as c_int;
        c
    }
}

/// Requests [`wait_all`] handles in one engine call.
const WAIT_ALL_MAX: usize = 64;

/// `MPI_Waitall` when every handle is a request of this path, a shared handle that
/// completes at once or `MPI_REQUEST_NULL` (and at most [`WAIT_ALL_MAX`] of them, none
/// with a parked status): waits for all in one engine call, writes the statuses and
/// nulls the handles. `false` (nothing done) otherwise: the general path runs it.
///
/// # Safety
/// `requests` holds `n` readable and writable handles; `statuses` is null
/// (`MPI_STATUSES_IGNORE`) or holds `n` writable statuses.
pub(crate) unsafe fn wait_all(
    n: usize,
    requests: *mut Handle,
    statuses: *mut MPI_Status,
) -> CResult<bool> {
    if n > WAIT_ALL_MAX
        || requests.is_null()
        || ANY_PARKED.load(Ordering::Relaxed)
        || ANY_MEMBERS.load(Ordering::Relaxed)
    {
        return Ok(false);
    }
    let mut ids = [0 as ReqId; WAIT_ALL_MAX];
    let mut sends = [false; WAIT_ALL_MAX];
    for i in 0..n {
        // SAFETY: i < n readable handles (caller).
        let h = unsafe { requests.add(i).read() };
        match raw_id(h) {
            Some((id, send)) => (ids[i], sends[i]) = (id, send),
            None if h as usize == REQUEST_NULL || crate::p2p::done_at_start(h) => {}
            None => return Ok(false),
        }
    }
    let put = |i: usize, st: MPI_Status| {
        if !statuses.is_null() {
            // SAFETY: i < n writable statuses (caller).
            unsafe { crate::p2p::put_status(statuses.add(i), st) };
        }
        // SAFETY: i < n writable handles (caller).
        unsafe { requests.add(i).write(REQUEST_NULL as Handle) };
    };
    // The shared handles first (they are complete), then the engine's requests in order.
    for (i, _) in ids[..n].iter().enumerate().filter(|(_, &id)| id == 0) {
        // SAFETY: i < n readable handles (caller).
        let h = unsafe { requests.add(i).read() };
        let src = if h as usize == crate::p2p::DONE_PROC_NULL {
            MPI_PROC_NULL
        } else {
            MPI_ANY_SOURCE
        };
        put(i, MPI_Status::empty(src));
    }
    raw::wait_each(&ids[..n], &mut |i, st| put(i, c_status(sends[i], st))).map_err(cerr)?;
    Ok(true)
}

/// `MPI_Request_free` of the request of handle `h`, engine request `id`.
pub(crate) fn free(h: Handle, id: ReqId) -> CResult {
    take_members(h);
    if unpark(h).is_some() {
        return Ok(());
    }
    raw::detach(id).map_err(cerr)
}
