//! Point-to-point: `MPI_Send`, `MPI_Recv`, `MPI_Isend`, `MPI_Irecv`, `MPI_Sendrecv`,
//! `MPI_Wait`, `MPI_Waitall`, `MPI_Test`, `MPI_Get_count`.
//!
//! Buffers are `count × type size` bytes of C memory, moved as byte slices (hosts are
//! homogeneous); derived datatypes are packed to / unpacked from a temporary
//! ([`crate::types`]; for nonblocking calls a [`Staged`] heap buffer kept with the request). Blocking calls borrow them for the call
//! (`phalanx::request::scope`). Nonblocking calls need a `'static` request: the C buffer
//! is turned into a `&'static` slice and the request kept in the request table under
//! `StaticScope`. Safety argument: MPI requires the buffer to stay valid and untouched
//! by the program until the request completes; the request leaves the table (and stops
//! touching the buffer) only when `MPI_Wait*`/`MPI_Test` completes it or `MPI_Finalize`
//! drops it (which waits for it). So the slice is never used after the C program may
//! legitimately reuse or free the memory, and nothing else aliases it meanwhile.
//!
//! Completion (`complete`) serves every request kind: a completed request leaves the
//! table and its handle becomes `MPI_REQUEST_NULL`, except a persistent one
//! ([`crate::persist`]), which stays, inactive, under the same handle (`release`), and a
//! generalized one ([`crate::grequest`]), which leaves at `release`.

use crate::consts::*;
use crate::env::datatype_of;
use crate::fastpath;
use crate::state::{self, LiveReq, ReqEntry, Staged};
use crate::types::{layout_of, pack, unpack, Layout};
use crate::{bytes, bytes_mut, count, err, export, guard, out, span, CResult, Count};
use phalanx::point_to_point::Status;
use phalanx::request::{Request, Scope, StaticScope};
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::{Communicator, Destination, Source};
use std::ffi::{c_int, c_void};
use std::rc::Rc;

const WORLD: Handle = COMM_WORLD as Handle;
/// The handle of every nonblocking send that completed when it started (an eager
/// message already handed to the transport): it has no table entry, completes at once
/// with an empty status, and becomes `MPI_REQUEST_NULL` like any completed request.
/// Outside the range of table handles ([`state::add_req`] counts up from 0x100000).
pub const DONE_SEND: usize = 0xfff0_0001;
/// The handle of every nonblocking transfer with `MPI_PROC_NULL`: like [`DONE_SEND`],
/// completing at once, with the status MPI gives such a transfer (source
/// `MPI_PROC_NULL`, tag `MPI_ANY_TAG`, count 0).
pub const DONE_PROC_NULL: usize = 0xfff0_0002;

/// Whether `h` is one of the shared handles that complete at once.
#[inline]
pub(crate) fn done_at_start(h: Handle) -> bool {
    h as usize == DONE_SEND || h as usize == DONE_PROC_NULL
}

/// Checks a destination/source rank; `None` for `MPI_PROC_NULL`.
pub(crate) fn peer(c: &SimpleCommunicator, r: c_int, any_ok: bool) -> CResult<Option<c_int>> {
    if r == MPI_PROC_NULL {
        return Ok(None);
    }
    if (0..c.size()).contains(&r) || (any_ok && r == MPI_ANY_SOURCE) {
        return Ok(Some(r));
    }
    Err(err(
        MPI_ERR_RANK,
        format!("invalid rank {r} (communicator size {})", c.size()),
    ))
}

#[inline]
pub(crate) fn tag_ok(tag: c_int, any_ok: bool) -> CResult<c_int> {
    if tag >= 0 || (any_ok && tag == MPI_ANY_TAG) {
        Ok(tag)
    } else {
        Err(bad_tag(tag))
    }
}

#[cold]
fn bad_tag(tag: c_int) -> crate::CErr {
    err(MPI_ERR_TAG, format!("invalid tag {tag}"))
}

/// The C status of a phalanx status.
pub fn c_status(st: Status) -> MPI_Status {
    let mut c = MPI_Status::new(st.source_rank(), st.tag(), st.byte_count());
    if st.is_cancelled() {
        // Where `MPI_Status_set_cancelled` keeps the flag `MPI_Test_cancelled` reads.
        c.MPI_internal[2] = 1;
    }
    c
}

/// Writes `st` unless `p` is `MPI_STATUS_IGNORE`. The caller's `MPI_ERROR` field is
/// left as it is unless `st` carries an error: MPI's completion calls do not touch it
/// on success (programs and test suites check that).
///
/// # Safety
/// `p` must be null or a writable `MPI_Status`.
pub unsafe fn put_status(p: *mut MPI_Status, st: MPI_Status) {
    if !p.is_null() {
        // SAFETY: non-null and writable (caller); fields written one by one, none read.
        unsafe {
            (&raw mut (*p).MPI_SOURCE).write(st.MPI_SOURCE);
            (&raw mut (*p).MPI_TAG).write(st.MPI_TAG);
            (&raw mut (*p).MPI_internal).write(st.MPI_internal);
            if st.MPI_ERROR != MPI_SUCCESS {
                (&raw mut (*p).MPI_ERROR).write(st.MPI_ERROR);
            }
        }
    }
}

/// Starts a receive from `src` (or any) with `tag` (or any) into `buf`.
pub(crate) fn start_recv<'a, Sc: Scope<'a>>(
    c: &SimpleCommunicator,
    sc: Sc,
    buf: &'a mut [u8],
    src: c_int,
    tag: c_int,
) -> Request<'a, [u8], Sc> {
    match (src, tag) {
        (MPI_ANY_SOURCE, MPI_ANY_TAG) => c.any_process().immediate_receive_into(sc, buf),
        (MPI_ANY_SOURCE, t) => c.any_process().immediate_receive_into_with_tag(sc, buf, t),
        (s, MPI_ANY_TAG) => c.process_at_rank(s).immediate_receive_into(sc, buf),
        (s, t) => c
            .process_at_rank(s)
            .immediate_receive_into_with_tag(sc, buf, t),
    }
}

/// Validated arguments of one side of a transfer.
pub(crate) struct Side {
    pub(crate) comm: std::rc::Rc<SimpleCommunicator>,
    pub(crate) len: usize,
    pub(crate) peer: Option<c_int>,
    pub(crate) tag: c_int,
    /// A derived, non-contiguous datatype and the element count (`len` is then the
    /// packed length).
    pub(crate) derived: Option<(Rc<Layout>, usize)>,
}

impl Side {
    /// The bytes to send from `buf`: the buffer itself, or packed (derived datatypes).
    ///
    /// # Safety
    /// `buf` holds the side's count of elements, readable for `'a`.
    unsafe fn send_data<'a>(&self, buf: *const c_void) -> CResult<std::borrow::Cow<'a, [u8]>> {
        Ok(match &self.derived {
            // SAFETY: the caller's contract.
            None => std::borrow::Cow::Borrowed(unsafe { bytes(buf, self.len)? }),
            // SAFETY: the caller's contract.
            Some((l, n)) => std::borrow::Cow::Owned(unsafe { pack(l, buf, *n)? }),
        })
    }
}

/// Validated arguments of a transfer with a predefined datatype.
pub(crate) fn side(
    comm: Handle,
    cnt: Count,
    datatype: Handle,
    peer_rank: c_int,
    tag: c_int,
    recv: bool,
) -> CResult<Side> {
    let c = state::comm(comm)?;
    let dt = datatype_of(datatype)?;
    let n = count(cnt)?;
    let tag = tag_ok(tag, recv)?;
    let p = peer(&c, peer_rank, recv)?;
    Ok(Side {
        comm: c,
        len: span(n, dt.size)?,
        peer: p,
        tag,
        derived: None,
    })
}

/// As [`side`], accepting committed derived datatypes.
pub(crate) fn dside(
    comm: Handle,
    cnt: Count,
    datatype: Handle,
    peer_rank: c_int,
    tag: c_int,
    recv: bool,
) -> CResult<Side> {
    // Predefined types first: a constant match, where the derived-type check is a table
    // lookup.
    if crate::consts::datatype(datatype as usize).is_some() || !crate::types::is_derived(datatype) {
        return side(comm, cnt, datatype, peer_rank, tag, recv);
    }
    let c = state::comm(comm)?;
    let l = layout_of(datatype)?;
    let n = count(cnt)?;
    let tag = tag_ok(tag, recv)?;
    let p = peer(&c, peer_rank, recv)?;
    let len = span(n, l.size)?;
    Ok(Side {
        comm: c,
        len,
        peer: p,
        tag,
        derived: (!l.is_contiguous()).then_some((l, n)),
    })
}

/// Under `MPI_ERRORS_RETURN`, a blocking receive first probes for the message so that a
/// message longer than the buffer returns `MPI_ERR_TRUNCATE` (the message stays queued)
/// instead of reaching the core's fatal truncation error; it then receives exactly that
/// message (its source and tag: queues keep arrival order). Under the fatal handlers the
/// receive goes straight to the core, which ends the job on truncation.
pub(crate) fn check_truncation(s: &Side, src: c_int, comm: Handle) -> CResult<(c_int, c_int)> {
    if state::errhandler(comm) != ERRORS_RETURN {
        return Ok((src, s.tag));
    }
    let st = match (src, s.tag) {
        (MPI_ANY_SOURCE, MPI_ANY_TAG) => s.comm.any_process().probe(),
        (MPI_ANY_SOURCE, t) => s.comm.any_process().probe_with_tag(t),
        (r, MPI_ANY_TAG) => s.comm.process_at_rank(r).probe(),
        (r, t) => s.comm.process_at_rank(r).probe_with_tag(t),
    };
    if st.byte_count() > s.len as u64 {
        return Err(err(
            MPI_ERR_TRUNCATE,
            format!(
                "message of {} bytes from rank {} truncated to a {}-byte buffer",
                st.byte_count(),
                st.source_rank(),
                s.len
            ),
        ));
    }
    Ok((st.source_rank(), st.tag()))
}

/// `MPI_Send` (or `MPI_Ssend` when `sync`: returns once the receive matched).
#[inline(always)]
pub(crate) fn send_impl(
    name: &str,
    buf: *const c_void,
    cnt: Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    sync: bool,
) -> c_int {
    guard(name, comm, || {
        // SAFETY: the caller passes count elements, readable (MPI contract).
        if unsafe { fastpath::send(buf, cnt, datatype, dest, tag, comm, sync)? } {
            return Ok(());
        }
        let s = dside(comm, cnt, datatype, dest, tag, false)?;
        let Some(d) = s.peer else { return Ok(()) };
        // SAFETY: the caller passes count elements, readable (MPI contract).
        let b = unsafe { s.send_data(buf)? };
        let p = s.comm.process_at_rank(d);
        if sync {
            p.synchronous_send_with_tag(&b[..], s.tag);
        } else {
            p.send_with_tag(&b[..], s.tag);
        }
        Ok(())
    })
}

export!(MPI_Send, PMPI_Send,
        (buf: *const c_void, cnt: c_int, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle) -> c_int {
    send_impl("MPI_Send", buf, cnt.into(), datatype, dest, tag, comm, false)
});

export!(MPI_Recv, PMPI_Recv,
        (buf: *mut c_void, cnt: c_int, datatype: Handle, source: c_int, tag: c_int,
         comm: Handle, status: *mut MPI_Status) -> c_int {
    recv_impl("MPI_Recv", buf, cnt.into(), datatype, source, tag, comm, status)
});

/// `MPI_Recv` (and `MPI_Recv_c`).
#[inline(always)]
pub(crate) fn recv_impl(
    name: &str,
    buf: *mut c_void,
    cnt: Count,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    guard(name, comm, || {
        // SAFETY: the caller passes count × size writable bytes for the call.
        if let Some(st) = unsafe { fastpath::recv(buf, cnt, datatype, source, tag, comm)? } {
            // SAFETY: status is MPI_STATUS_IGNORE or writable.
            unsafe { put_status(status, st) };
            return Ok(());
        }
        let s = dside(comm, cnt, datatype, source, tag, true)?;
        let st = match s.peer {
            None => MPI_Status::empty(MPI_PROC_NULL),
            Some(src) => {
                let (src, tag) = check_truncation(&s, src, comm)?;
                let mut tmp = Vec::new();
                let b = match &s.derived {
                    // SAFETY: the caller passes count × size writable bytes for the call.
                    None => unsafe { bytes_mut(buf, s.len)? },
                    Some((l, n)) => {
                        crate::types::check_base(l, buf, *n)?;
                        tmp.resize(s.len, 0);
                        &mut tmp[..]
                    }
                };
                // Blocking, without a request scope (no allocation per receive).
                let st = c_status(match (src, tag) {
                    (MPI_ANY_SOURCE, MPI_ANY_TAG) => s.comm.any_process().receive_into(b),
                    (MPI_ANY_SOURCE, t) => s.comm.any_process().receive_into_with_tag(b, t),
                    (r, MPI_ANY_TAG) => s.comm.process_at_rank(r).receive_into(b),
                    (r, t) => s.comm.process_at_rank(r).receive_into_with_tag(b, t),
                });
                if let Some((l, n)) = &s.derived {
                    let k = (st.bytes() as usize).min(tmp.len());
                    // SAFETY: the caller passes count elements, writable for the call.
                    unsafe { unpack(l, &tmp[..k], buf, *n)? };
                }
                st
            }
        };
        // SAFETY: status is MPI_STATUS_IGNORE or writable.
        unsafe { put_status(status, st) };
        Ok(())
    })
}

/// The request of a nonblocking send (synchronous when `sync`: completes once the
/// receive matched), started now.
///
/// # Safety
/// `buf` holds `cnt` elements of `datatype`, valid and unmodified until completion.
pub(crate) unsafe fn isend_entry(
    buf: *const c_void,
    cnt: Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    sync: bool,
) -> CResult<ReqEntry> {
    let s = dside(comm, cnt, datatype, dest, tag, false)?;
    let Some(d) = s.peer else {
        return Ok(ReqEntry::Done(MPI_Status::empty(MPI_PROC_NULL)));
    };
    let (staged, b): (_, &'static [u8]) = match &s.derived {
        // SAFETY: 'static by the MPI contract on nonblocking buffers (module docs).
        None => (None, unsafe { bytes(buf, s.len)? }),
        Some((l, n)) => {
            // SAFETY: the caller passes count readable elements.
            let (st, v) = Staged::new(unsafe { pack(l, buf, *n)? }, None);
            (Some(st), v)
        }
    };
    let p = s.comm.process_at_rank(d);
    let req = if sync {
        p.immediate_synchronous_send_with_tag(StaticScope, b, s.tag)
    } else {
        p.immediate_send_with_tag(StaticScope, b, s.tag)
    };
    Ok(ReqEntry::Live {
        req: LiveReq::Bytes(req),
        comm: comm as usize,
        staged,
    })
}

/// `MPI_Isend` (or `MPI_Issend` when `sync`: completes once the receive matched).
#[inline(always)]
pub(crate) fn isend_impl(
    name: &str,
    buf: *const c_void,
    cnt: Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
    sync: bool,
) -> c_int {
    guard(name, comm, || {
        if request.is_null() {
            dside(comm, cnt, datatype, dest, tag, false)?;
            return Err(err(MPI_ERR_ARG, "null request pointer"));
        }
        // SAFETY: the caller's buffer (MPI nonblocking contract).
        if let Some(h) = unsafe { fastpath::isend(buf, cnt, datatype, dest, tag, comm, sync)? } {
            // SAFETY: non-null, writable (MPI contract).
            return unsafe { out(request, h) };
        }
        // SAFETY: the caller's buffer (MPI nonblocking contract).
        let e = unsafe { isend_entry(buf, cnt, datatype, dest, tag, comm, sync)? };
        // An eager send already complete needs no table entry (most small sends).
        let e = match e {
            ReqEntry::Live {
                req: LiveReq::Bytes(r),
                comm: c,
                staged: None,
            } if !sync => match r.test() {
                // SAFETY: non-null, writable (MPI contract).
                Ok(_) => return unsafe { out(request, DONE_SEND as Handle) },
                Err(r) => ReqEntry::Live {
                    req: LiveReq::Bytes(r),
                    comm: c,
                    staged: None,
                },
            },
            e => e,
        };
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(request, state::add_req(e)) }
    })
}

export!(MPI_Isend, PMPI_Isend,
        (buf: *const c_void, cnt: c_int, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    isend_impl("MPI_Isend", buf, cnt.into(), datatype, dest, tag, comm, request, false)
});

/// The request of a nonblocking receive, started now.
///
/// # Safety
/// `buf` has room for `cnt` elements of `datatype`, valid and untouched until completion.
pub(crate) unsafe fn irecv_entry(
    buf: *mut c_void,
    cnt: Count,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
) -> CResult<ReqEntry> {
    let s = dside(comm, cnt, datatype, source, tag, true)?;
    let Some(src) = s.peer else {
        return Ok(ReqEntry::Done(MPI_Status::empty(MPI_PROC_NULL)));
    };
    let (staged, b): (_, &'static mut [u8]) = match &s.derived {
        // SAFETY: 'static by the MPI contract on nonblocking buffers (module docs).
        None => (None, unsafe { bytes_mut(buf, s.len)? }),
        Some((l, n)) => {
            crate::types::check_base(l, buf, *n)?;
            let (st, v) = Staged::new(vec![0; s.len], Some((buf, l.clone(), *n)));
            (Some(st), v)
        }
    };
    let req = start_recv(&s.comm, StaticScope, b, src, s.tag);
    Ok(ReqEntry::Live {
        req: LiveReq::Bytes(req),
        comm: comm as usize,
        staged,
    })
}

export!(MPI_Irecv, PMPI_Irecv,
        (buf: *mut c_void, cnt: c_int, datatype: Handle, source: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    irecv_impl("MPI_Irecv", buf, cnt.into(), datatype, source, tag, comm, request)
});

/// `MPI_Irecv` (and `MPI_Irecv_c`).
#[inline(always)]
pub(crate) fn irecv_impl(
    name: &str,
    buf: *mut c_void,
    cnt: Count,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        if request.is_null() {
            dside(comm, cnt, datatype, source, tag, true)?;
            return Err(err(MPI_ERR_ARG, "null request pointer"));
        }
        // SAFETY: the caller's buffer (MPI nonblocking contract).
        if let Some(h) = unsafe { fastpath::irecv(buf, cnt, datatype, source, tag, comm)? } {
            // SAFETY: non-null, writable (MPI contract).
            return unsafe { out(request, h) };
        }
        // SAFETY: the caller's buffer (MPI nonblocking contract).
        let e = unsafe { irecv_entry(buf, cnt, datatype, source, tag, comm)? };
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(request, state::add_req(e)) }
    })
}

/// Completes entry `e` (blocking if `wait`): its status, or the entry back (still
/// running). Persistent entries are handled by [`complete`].
pub(crate) fn complete_entry(e: ReqEntry, wait: bool) -> CResult<Result<MPI_Status, ReqEntry>> {
    match e {
        ReqEntry::Done(st) => Ok(Ok(st)),
        ReqEntry::Live { req, comm, staged } => {
            let r = if wait {
                Ok(req.try_wait()?)
            } else {
                req.try_test()?
            };
            match r {
                Ok(st) => {
                    if let Some(sg) = staged {
                        sg.finish(&st)?;
                    }
                    Ok(Ok(st))
                }
                Err(req) => Ok(Err(ReqEntry::Live { req, comm, staged })),
            }
        }
        ReqEntry::Persistent(_) | ReqEntry::Grequest(_) => Err(err(
            MPI_ERR_INTERN,
            "nested persistent or generalized request",
        )),
    }
}

/// Completes request `h` (blocking if `wait`); `None` if still running (test only).
///
/// A completed request leaves the table, except a persistent one, which stays (inactive;
/// an inactive persistent request completes at once with an empty status). Callers
/// write `MPI_REQUEST_NULL` back through [`release`].
pub(crate) fn complete(h: Handle, wait: bool) -> CResult<Option<MPI_Status>> {
    if h as usize == REQUEST_NULL || h as usize == DONE_SEND {
        return Ok(Some(MPI_Status::empty(MPI_ANY_SOURCE)));
    }
    if h as usize == DONE_PROC_NULL {
        return Ok(Some(MPI_Status::empty(MPI_PROC_NULL)));
    }
    if let Some((id, send)) = fastpath::raw_id(h) {
        return fastpath::complete(h, id, send, wait);
    }
    let e = state::with(|s| s.reqs.remove(&(h as usize)))
        .ok_or_else(|| err(MPI_ERR_REQUEST, format!("invalid request {h:p}")))?;
    let e = match e {
        ReqEntry::Grequest(g) => return crate::grequest::complete(h, g, wait),
        e => e,
    };
    if let ReqEntry::Persistent(mut p) = e {
        let r = match p.active.take() {
            None => Ok(Some(MPI_Status::empty(MPI_ANY_SOURCE))),
            Some(inner) => match complete_entry(*inner, wait) {
                Ok(Ok(st)) => Ok(Some(st)),
                Ok(Err(inner)) => {
                    p.active = Some(Box::new(inner));
                    Ok(None)
                }
                Err(e) => Err(e),
            },
        };
        state::with(|s| s.reqs.insert(h as usize, ReqEntry::Persistent(p)));
        return r;
    }
    match complete_entry(e, wait)? {
        Ok(st) => Ok(Some(st)),
        Err(e) => {
            state::with(|s| s.reqs.insert(h as usize, e));
            Ok(None)
        }
    }
}

/// Whether `h` is a persistent request (it survives completion).
pub(crate) fn is_persistent(h: Handle) -> bool {
    if fastpath::raw_id(h).is_some() || done_at_start(h) {
        return false;
    }
    state::with(|s| matches!(s.reqs.get(&(h as usize)), Some(ReqEntry::Persistent(_))))
}

/// Whether `h` is an inactive persistent request (treated like `MPI_REQUEST_NULL` by
/// `Waitany`/`Waitsome`/`Testany`/`Testsome`).
pub(crate) fn is_inactive(h: Handle) -> bool {
    if fastpath::raw_id(h).is_some() || done_at_start(h) {
        return false;
    }
    state::with(|s| match s.reqs.get(&(h as usize)) {
        Some(ReqEntry::Persistent(p)) => p.active.is_none(),
        _ => false,
    })
}

/// Puts the status of request `h`, completed by a non-consuming test, back so the next
/// [`complete`] returns it.
pub(crate) fn park(h: Handle, st: MPI_Status) {
    if done_at_start(h) {
        return; // completes again at once: nothing to keep
    }
    if fastpath::raw_id(h).is_some() {
        return fastpath::park(h, st);
    }
    state::with(|s| match s.reqs.get_mut(&(h as usize)) {
        Some(ReqEntry::Persistent(p)) => p.active = Some(Box::new(ReqEntry::Done(st))),
        Some(ReqEntry::Grequest(_)) => {} // query_fn gives the status again
        _ => {
            s.reqs.insert(h as usize, ReqEntry::Done(st));
        }
    })
}

/// After completing the request whose handle is at `p`: writes `MPI_REQUEST_NULL` there,
/// unless it is persistent (MPI keeps the handle of an inactive persistent request); a
/// generalized request is freed then (`free_fn`, whose error this returns).
///
/// # Safety
/// `p` is a writable handle.
pub(crate) unsafe fn release(p: *mut Handle, h: Handle) -> CResult {
    if is_persistent(h) {
        return Ok(());
    }
    // SAFETY: writable (caller).
    unsafe { out(p, REQUEST_NULL as Handle)? };
    crate::grequest::release(h)
}

/// Reads the request handle at `p`.
///
/// # Safety
/// `p` must be null (an error) or a readable handle.
pub(crate) unsafe fn read_req(p: *const Handle) -> CResult<Handle> {
    if p.is_null() {
        return Err(err(MPI_ERR_ARG, "null request pointer"));
    }
    // SAFETY: non-null, readable (caller).
    Ok(unsafe { p.read() })
}

export!(MPI_Wait, PMPI_Wait, (request: *mut Handle, status: *mut MPI_Status) -> c_int {
    guard("MPI_Wait", WORLD, || {
        // SAFETY: the caller passes a readable and writable request handle and a
        // writable status (or MPI_STATUS_IGNORE).
        unsafe {
            let h = read_req(request)?;
            let st = complete(h, true)?.unwrap_or_default();
            put_status(status, st);
            release(request, h)
        }
    })
});

export!(MPI_Test, PMPI_Test,
        (request: *mut Handle, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    guard("MPI_Test", WORLD, || {
        // SAFETY: as MPI_Wait, plus a writable flag.
        unsafe {
            let h = read_req(request)?;
            match complete(h, false)? {
                Some(st) => {
                    put_status(status, st);
                    release(request, h)?;
                    out(flag, 1)
                }
                None => out(flag, 0),
            }
        }
    })
});

export!(MPI_Waitall, PMPI_Waitall,
        (cnt: c_int, requests: *mut Handle, statuses: *mut MPI_Status) -> c_int {
    guard("MPI_Waitall", WORLD, || {
        let n = count(cnt)?;
        // SAFETY: the caller passes cnt handles and cnt statuses (or MPI_STATUSES_IGNORE).
        if unsafe { fastpath::wait_all(n, requests, statuses)? } {
            return Ok(());
        }
        for i in 0..n {
            // SAFETY: the caller passes cnt handles and cnt statuses (or
            // MPI_STATUSES_IGNORE); i < cnt.
            unsafe {
                let p = requests.add(i);
                let h = read_req(p)?;
                let st = complete(h, true)?.unwrap_or_default();
                if !statuses.is_null() {
                    put_status(statuses.add(i), st);
                }
                release(p, h)?;
            }
        }
        Ok(())
    })
});

export!(MPI_Get_count, PMPI_Get_count,
        (status: *const MPI_Status, datatype: Handle, cnt: *mut c_int) -> c_int {
    guard("MPI_Get_count", WORLD, || {
        // SAFETY: the caller passes a readable status.
        let n = unsafe { get_count(status, datatype)? };
        // SAFETY: the caller passes a writable int.
        unsafe { out(cnt, c_int::try_from(n).unwrap_or(MPI_UNDEFINED)) }
    })
});

/// The count of `MPI_Get_count(_c)`: whole elements of `datatype` in the status's
/// bytes (64 bits), `MPI_UNDEFINED` when they are not a whole number.
///
/// # Safety
/// `status` is null (an error) or readable.
pub(crate) unsafe fn get_count(status: *const MPI_Status, datatype: Handle) -> CResult<Count> {
    let dt = crate::types::any_layout(datatype)?;
    if status.is_null() {
        return Err(err(MPI_ERR_ARG, "null status"));
    }
    // SAFETY: non-null, and the caller passes a readable status.
    let bytes = unsafe { status.read() }.bytes();
    Ok(if dt.size == 0 {
        0
    } else if bytes % dt.size as u64 != 0 {
        MPI_UNDEFINED.into()
    } else {
        (bytes / dt.size as u64) as Count
    })
}

export!(MPI_Sendrecv, PMPI_Sendrecv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, dest: c_int,
         sendtag: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle,
         source: c_int, recvtag: c_int, comm: Handle, status: *mut MPI_Status) -> c_int {
    sendrecv_impl(
        "MPI_Sendrecv",
        (sendbuf, sendcount.into(), sendtype, dest, sendtag),
        (recvbuf, recvcount.into(), recvtype, source, recvtag),
        comm,
        status,
    )
});

/// One side of `MPI_Sendrecv`: `(buffer, count, datatype, peer, tag)`.
pub(crate) type SrSide<B> = (B, Count, Handle, c_int, c_int);

/// `MPI_Sendrecv` (and `MPI_Sendrecv_c`).
pub(crate) fn sendrecv_impl(
    name: &str,
    (sendbuf, sendcount, sendtype, dest, sendtag): SrSide<*const c_void>,
    (recvbuf, recvcount, recvtype, source, recvtag): SrSide<*mut c_void>,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    guard(name, comm, || {
        let s = dside(comm, sendcount, sendtype, dest, sendtag, false)?;
        let r = dside(comm, recvcount, recvtype, source, recvtag, true)?;
        if s.derived.is_none() && r.derived.is_none() {
            crate::disjoint(sendbuf, s.len, recvbuf, r.len)?;
        }
        let sb = if s.peer.is_some() {
            // SAFETY: the caller passes sendcount readable elements for the call.
            unsafe { s.send_data(sendbuf)? }
        } else {
            std::borrow::Cow::Borrowed(&[][..])
        };
        let mut tmp = Vec::new();
        let rb = match &r.derived {
            // SAFETY: the caller passes recvcount writable bytes (checked disjoint).
            None => unsafe { bytes_mut(recvbuf, r.len)? },
            Some(_) => {
                tmp.resize(r.len, 0);
                &mut tmp[..]
            }
        };
        let st = phalanx::request::scope(|sc| {
            let rq = r.peer.map(|src| start_recv(&r.comm, sc, rb, src, r.tag));
            if let Some(d) = s.peer {
                s.comm.process_at_rank(d).send_with_tag(&sb[..], s.tag);
            }
            rq.map_or(MPI_Status::empty(MPI_PROC_NULL), |q| c_status(q.wait()))
        });
        if let Some((l, n)) = &r.derived {
            let k = (st.bytes() as usize).min(tmp.len());
            // SAFETY: the caller passes recvcount writable elements for the call.
            unsafe { unpack(l, &tmp[..k], recvbuf, *n)? };
        }
        // SAFETY: status is MPI_STATUS_IGNORE or writable.
        unsafe { put_status(status, st) };
        Ok(())
    })
}
