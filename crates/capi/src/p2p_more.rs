//! More point-to-point: `MPI_Probe`, `MPI_Iprobe`, `MPI_Ssend`, `MPI_Issend`,
//! `MPI_Sendrecv_replace`, `MPI_Waitany`, `MPI_Waitsome`, `MPI_Testall`, `MPI_Testany`,
//! `MPI_Request_free`, `MPI_Cancel`, `MPI_Test_cancelled`.
//!
//! `MPI_Ssend`/`MPI_Issend` use the core's synchronous mode (always rendezvous): they
//! complete only after the receiver matched the message. `MPI_Cancel` cancels a receive
//! that has not matched a message (the core takes it out of its posted queue; it
//! completes with a status `MPI_Test_cancelled` reports as cancelled); a send, a receive
//! that already matched, a collective or a completed request is not cancelled and
//! completes normally, as MPI allows. A freed request completes on its own and is
//! finally waited for by `MPI_Finalize`.

use crate::consts::*;
use crate::p2p::{c_status, complete, put_status, read_req, side, start_recv};
use crate::state::{self, LiveReq, ReqEntry};
use crate::{bytes_mut, count, err, export, guard, out, CResult};
use phalanx::capi_support::immediate_probe_tag;
use phalanx::traits::{Communicator, Destination};
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;

export!(MPI_Probe, PMPI_Probe,
        (source: c_int, tag: c_int, comm: Handle, status: *mut MPI_Status) -> c_int {
    guard("MPI_Probe", comm, || {
        let s = side(comm, 0, BYTE, source, tag, true)?;
        let st = match s.peer {
            None => MPI_Status::empty(MPI_PROC_NULL),
            Some(src) => c_status(match (src, s.tag) {
                (MPI_ANY_SOURCE, MPI_ANY_TAG) => s.comm.any_process().probe(),
                (MPI_ANY_SOURCE, t) => s.comm.any_process().probe_with_tag(t),
                (r, MPI_ANY_TAG) => s.comm.process_at_rank(r).probe(),
                (r, t) => s.comm.process_at_rank(r).probe_with_tag(t),
            }),
        };
        // SAFETY: status is MPI_STATUS_IGNORE or writable.
        unsafe { put_status(status, st) };
        Ok(())
    })
});

use phalanx::point_to_point::Source;

export!(MPI_Iprobe, PMPI_Iprobe,
        (source: c_int, tag: c_int, comm: Handle, flag: *mut c_int,
         status: *mut MPI_Status) -> c_int {
    guard("MPI_Iprobe", comm, || {
        let st = match crate::fastpath::iprobe(source, tag, comm)? {
            Some(st) => st,
            None => {
                let s = side(comm, 0, BYTE, source, tag, true)?;
                let t = (s.tag != MPI_ANY_TAG).then_some(s.tag);
                match s.peer {
                    None => Some(MPI_Status::empty(MPI_PROC_NULL)),
                    Some(MPI_ANY_SOURCE) => {
                        immediate_probe_tag(&s.comm.any_process(), t).map(c_status)
                    }
                    Some(r) => immediate_probe_tag(&s.comm.process_at_rank(r), t).map(c_status),
                }
            }
        };
        // SAFETY: flag writable (null checked), status ignore or writable.
        unsafe {
            out(flag, st.is_some() as c_int)?;
            if let Some(st) = st {
                put_status(status, st);
            }
        }
        Ok(())
    })
});

/// `MPI_BYTE`: probes validate their arguments as zero-byte receives.
const BYTE: Handle = 0x247 as Handle;

export!(MPI_Ssend, PMPI_Ssend,
        (buf: *const c_void, cnt: c_int, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle) -> c_int {
    crate::p2p::send_impl("MPI_Ssend", buf, cnt.into(), datatype, dest, tag, comm, true)
});

export!(MPI_Issend, PMPI_Issend,
        (buf: *const c_void, cnt: c_int, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    crate::p2p::isend_impl("MPI_Issend", buf, cnt.into(), datatype, dest, tag, comm, request, true)
});

export!(MPI_Sendrecv_replace, PMPI_Sendrecv_replace,
        (buf: *mut c_void, cnt: c_int, datatype: Handle, dest: c_int, sendtag: c_int,
         source: c_int, recvtag: c_int, comm: Handle, status: *mut MPI_Status) -> c_int {
    sendrecv_replace_impl("MPI_Sendrecv_replace", buf, cnt.into(), datatype, (dest, sendtag), (source, recvtag), comm, status)
});

/// `MPI_Sendrecv_replace` (and `MPI_Sendrecv_replace_c`): `(dest, sendtag)`,
/// `(source, recvtag)`.
pub(crate) fn sendrecv_replace_impl(
    name: &str,
    buf: *mut c_void,
    cnt: crate::Count,
    datatype: Handle,
    (dest, sendtag): (c_int, c_int),
    (source, recvtag): (c_int, c_int),
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    guard(name, comm, || {
        if crate::types::is_derived(datatype) {
            // SAFETY: the caller's buffer, as MPI requires.
            return unsafe {
                crate::coll_dt::sendrecv_replace(
                    buf, cnt, datatype, dest, sendtag, source, recvtag, comm, status,
                )
            };
        }
        let s = side(comm, cnt, datatype, dest, sendtag, false)?;
        let r = side(comm, cnt, datatype, source, recvtag, true)?;
        let (src, rtag) = (r.peer.unwrap_or(MPI_PROC_NULL), r.tag);
        // SAFETY: the caller passes cnt × size readable and writable bytes.
        let b = unsafe { bytes_mut(buf, s.len)? };
        let mut tmp = vec![0u8; r.len];
        let st = phalanx::request::scope(|sc| {
            let rq = r
                .peer
                .map(|_| start_recv(&r.comm, sc, &mut tmp[..], src, rtag));
            if let Some(d) = s.peer {
                s.comm.process_at_rank(d).send_with_tag(&b[..], s.tag);
            }
            rq.map_or(MPI_Status::empty(MPI_PROC_NULL), |q| c_status(q.wait()))
        });
        if r.peer.is_some() {
            let n = (st.bytes() as usize).min(b.len());
            b[..n].copy_from_slice(&tmp[..n]);
        }
        // SAFETY: status is MPI_STATUS_IGNORE or writable.
        unsafe { put_status(status, st) };
        Ok(())
    })
}

/// Reads the `n` request handles at `p`.
///
/// # Safety
/// `p` must point to `n` readable handles (null is an error when `n > 0`).
unsafe fn handles(p: *const Handle, n: usize) -> CResult<Vec<Handle>> {
    // SAFETY: the caller passes n readable handles.
    Ok(unsafe { crate::typed::<Handle>(p.cast(), n)? }.to_vec())
}

/// Tests request `h` once without consuming it: a completed request stays in the table
/// as `Done`. `None` for `MPI_REQUEST_NULL`, `Some(false)` while running.
fn peek(h: Handle) -> CResult<Option<bool>> {
    if h as usize == REQUEST_NULL || crate::p2p::is_inactive(h) {
        return Ok(None);
    }
    match complete(h, false)? {
        Some(st) => {
            crate::p2p::park(h, st);
            Ok(Some(true))
        }
        None => Ok(Some(false)),
    }
}

/// Consumes completed request `i` of `reqs`: its status, and `MPI_REQUEST_NULL` written.
///
/// # Safety
/// `requests` points to at least `i + 1` writable handles.
unsafe fn finish(requests: *mut Handle, reqs: &[Handle], i: usize) -> CResult<MPI_Status> {
    let st = complete(reqs[i], true)?.unwrap_or_default();
    // SAFETY: i < n writable handles (caller).
    unsafe { crate::p2p::release(requests.add(i), reqs[i])? };
    Ok(st)
}

/// Indices of completed requests (`None`: all are null). Never blocks.
fn ready(reqs: &[Handle]) -> CResult<Option<Vec<usize>>> {
    let mut done = Vec::new();
    let mut active = false;
    for (i, &h) in reqs.iter().enumerate() {
        match peek(h)? {
            None => {}
            Some(d) => {
                active = true;
                if d {
                    done.push(i);
                }
            }
        }
    }
    Ok(active.then_some(done))
}

export!(MPI_Waitany, PMPI_Waitany,
        (cnt: c_int, requests: *mut Handle, index: *mut c_int,
         status: *mut MPI_Status) -> c_int {
    guard("MPI_Waitany", WORLD, || {
        let n = count(cnt)?;
        // SAFETY: the caller passes cnt handles.
        let reqs = unsafe { handles(requests, n)? };
        loop {
            match ready(&reqs)? {
                None => {
                    // SAFETY: writable index and status (MPI contract).
                    unsafe {
                        put_status(status, MPI_Status::empty(MPI_ANY_SOURCE));
                        return out(index, MPI_UNDEFINED);
                    }
                }
                Some(d) if !d.is_empty() => {
                    // SAFETY: d[0] < cnt; writable index and status.
                    unsafe {
                        let st = finish(requests, &reqs, d[0])?;
                        put_status(status, st);
                        return out(index, d[0] as c_int);
                    }
                }
                Some(_) => phalanx::capi_support::yield_now(),
            }
        }
    })
});

/// Completes the requests listed in `d`: indices and statuses written, count returned.
///
/// # Safety
/// `requests` has `reqs.len()` writable handles; `indices` room for as many ints;
/// `statuses` null or room for as many statuses.
unsafe fn finish_some(
    requests: *mut Handle,
    reqs: &[Handle],
    d: &[usize],
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> CResult<c_int> {
    if indices.is_null() && !d.is_empty() {
        return Err(err(MPI_ERR_ARG, "null array_of_indices"));
    }
    for (k, &i) in d.iter().enumerate() {
        // SAFETY: i, k < cnt (caller).
        unsafe {
            let st = finish(requests, reqs, i)?;
            indices.add(k).write(i as c_int);
            if !statuses.is_null() {
                crate::p2p::put_status(statuses.add(k), st);
            }
        }
    }
    Ok(d.len() as c_int)
}

export!(MPI_Waitsome, PMPI_Waitsome,
        (incount: c_int, requests: *mut Handle, outcount: *mut c_int, indices: *mut c_int,
         statuses: *mut MPI_Status) -> c_int {
    guard("MPI_Waitsome", WORLD, || {
        let n = count(incount)?;
        // SAFETY: the caller passes incount handles.
        let reqs = unsafe { handles(requests, n)? };
        loop {
            match ready(&reqs)? {
                // SAFETY: writable outcount.
                None => return unsafe { out(outcount, MPI_UNDEFINED) },
                Some(d) if !d.is_empty() => {
                    // SAFETY: arrays of incount entries (MPI contract).
                    let k = unsafe { finish_some(requests, &reqs, &d, indices, statuses)? };
                    // SAFETY: writable outcount.
                    return unsafe { out(outcount, k) };
                }
                Some(_) => phalanx::capi_support::yield_now(),
            }
        }
    })
});

export!(MPI_Testsome, PMPI_Testsome,
        (incount: c_int, requests: *mut Handle, outcount: *mut c_int, indices: *mut c_int,
         statuses: *mut MPI_Status) -> c_int {
    guard("MPI_Testsome", WORLD, || {
        let n = count(incount)?;
        // SAFETY: the caller passes incount handles.
        let reqs = unsafe { handles(requests, n)? };
        let k = match ready(&reqs)? {
            None => MPI_UNDEFINED,
            // SAFETY: arrays of incount entries (MPI contract).
            Some(d) => unsafe { finish_some(requests, &reqs, &d, indices, statuses)? },
        };
        // SAFETY: writable outcount.
        unsafe { out(outcount, k) }
    })
});

export!(MPI_Testany, PMPI_Testany,
        (cnt: c_int, requests: *mut Handle, index: *mut c_int, flag: *mut c_int,
         status: *mut MPI_Status) -> c_int {
    guard("MPI_Testany", WORLD, || {
        let n = count(cnt)?;
        // SAFETY: the caller passes cnt handles.
        let reqs = unsafe { handles(requests, n)? };
        // SAFETY: writable index, flag and status (MPI contract); d[0] < cnt.
        unsafe {
            match ready(&reqs)? {
                None => {
                    put_status(status, MPI_Status::empty(MPI_ANY_SOURCE));
                    out(index, MPI_UNDEFINED)?;
                    out(flag, 1)
                }
                Some(d) if !d.is_empty() => {
                    let st = finish(requests, &reqs, d[0])?;
                    put_status(status, st);
                    out(index, d[0] as c_int)?;
                    out(flag, 1)
                }
                Some(_) => {
                    out(index, MPI_UNDEFINED)?;
                    out(flag, 0)
                }
            }
        }
    })
});

export!(MPI_Testall, PMPI_Testall,
        (cnt: c_int, requests: *mut Handle, flag: *mut c_int,
         statuses: *mut MPI_Status) -> c_int {
    guard("MPI_Testall", WORLD, || {
        let n = count(cnt)?;
        // SAFETY: the caller passes cnt handles.
        let reqs = unsafe { handles(requests, n)? };
        let mut all = true;
        for &h in &reqs {
            all &= peek(h)?.unwrap_or(true);
        }
        if all {
            for i in 0..n {
                // SAFETY: i < cnt handles and statuses (or MPI_STATUSES_IGNORE).
                unsafe {
                    let st = finish(requests, &reqs, i)?;
                    if !statuses.is_null() {
                        crate::p2p::put_status(statuses.add(i), st);
                    }
                }
            }
        }
        // SAFETY: writable flag.
        unsafe { out(flag, all as c_int) }
    })
});

export!(MPI_Request_free, PMPI_Request_free, (request: *mut Handle) -> c_int {
    guard("MPI_Request_free", WORLD, || {
        // SAFETY: readable and writable handle (null checked).
        unsafe {
            let h = read_req(request)? as usize;
            if crate::p2p::done_at_start(h as Handle) {
                return out(request, REQUEST_NULL as Handle);
            }
            if let Some((id, _)) = crate::fastpath::raw_id(h as Handle) {
                crate::fastpath::free(h as Handle, id)?;
                return out(request, REQUEST_NULL as Handle);
            }
            let e = state::with(|s| s.reqs.remove(&h))
                .ok_or_else(|| err(MPI_ERR_REQUEST, format!("invalid request {h:#x}")))?;
            let e = match e {
                ReqEntry::Grequest(g) => {
                    out(request, REQUEST_NULL as Handle)?;
                    return crate::grequest::free(h as Handle, g);
                }
                ReqEntry::Persistent(p) => {
                    crate::persist::release(&p);
                    p.active.map(|b| *b)
                }
                e => Some(e),
            };
            if let Some(e @ ReqEntry::Live { .. }) = e {
                // Completes on its own; MPI_Finalize waits for it. Its buffer may be
                // reused once the receiver has the message: no window reads it after.
                unshare(&e);
                state::with(|s| s.freed.push(e));
            }
            out(request, REQUEST_NULL as Handle)
        }
    })
});

/// A freed request's sends stop sharing their buffers with the go-back-n windows
/// (zero-copy rendezvous, `engine/p2p/zero_copy.rs`).
fn unshare(e: &ReqEntry) {
    if let ReqEntry::Live { req, .. } = e {
        match req {
            LiveReq::Bytes(r) => {
                if let Some(id) = r.c_engine_id() {
                    phalanx::capi_support::unshare(id);
                }
            }
            LiveReq::Pair(pair, _) => {
                unshare(&pair.0);
                unshare(&pair.1);
            }
            LiveReq::Barrier(_) | LiveReq::Coll(_) => {}
        }
    }
}

export!(MPI_Cancel, PMPI_Cancel, (request: *mut Handle) -> c_int {
    guard("MPI_Cancel", WORLD, || {
        // SAFETY: readable handle (null checked).
        let h = unsafe { read_req(request)? };
        if h as usize == REQUEST_NULL {
            return Err(err(MPI_ERR_REQUEST, "cannot cancel MPI_REQUEST_NULL"));
        }
        if crate::p2p::done_at_start(h) {
            return Ok(());
        }
        if let Some((id, _)) = crate::fastpath::raw_id(h) {
            // An id the core no longer knows completed already (its status is parked):
            // nothing to cancel.
            let _ = phalanx::capi_support::cancel(id);
            return Ok(());
        }
        if let Some(r) = crate::grequest::cancel(h) {
            return r; // cancel_fn's result
        }
        state::with(|s| {
            let e = match s.reqs.get(&(h as usize)) {
                Some(ReqEntry::Persistent(p)) => p.active.as_deref(),
                e => e,
            };
            match e {
                Some(ReqEntry::Live { req: LiveReq::Bytes(r), .. }) => {
                    r.cancel();
                    Ok(())
                }
                // Collectives, barriers and completed requests go on (or are done).
                Some(_) => Ok(()),
                None => Err(err(MPI_ERR_REQUEST, format!("invalid request {h:p}"))),
            }
        })
    })
});

export!(MPI_Test_cancelled, PMPI_Test_cancelled,
        (status: *const MPI_Status, flag: *mut c_int) -> c_int {
    guard("MPI_Test_cancelled", WORLD, || {
        if status.is_null() {
            return Err(err(MPI_ERR_ARG, "null status"));
        }
        // SAFETY: readable status (null checked), writable flag (null checked by out).
        unsafe { out(flag, ((*status).MPI_internal[2] != 0) as c_int) }
    })
});
