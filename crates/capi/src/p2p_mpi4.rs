//! MPI-4 point-to-point additions: `MPI_Isendrecv`, `MPI_Isendrecv_replace` (and their
//! `_c` forms),
//! `MPI_Request_get_status_all`, `MPI_Request_get_status_any`,
//! `MPI_Request_get_status_some`.
//!
//! Contract: `MPI_Isendrecv` starts the receive, then the send (each as `MPI_Irecv` /
//! `MPI_Isend` would, derived datatypes included) and returns one request that completes
//! when both have, with the receive's status ([`LiveReq::Pair`]). `MPI_Isendrecv_replace`
//! sends from a packed copy of the buffer taken at the start, so the receive may land in
//! the buffer itself while the send is still running. The `get_status` calls test their
//! requests without freeing or deactivating any (a completed one stays valid for
//! `MPI_Wait*`/`MPI_Test*`), treat `MPI_REQUEST_NULL` and inactive persistent requests as
//! MPI does (no active request: `flag` true, `MPI_UNDEFINED` index or count), and write
//! statuses only for what they report complete.

use crate::consts::*;
use crate::misc::peek_status;
use crate::nbc::req_ok;
use crate::p2p::{irecv_entry, is_inactive, isend_entry, put_status};
use crate::state::{self, LiveReq, ReqEntry};
use crate::types::{layout_of, pack};
use crate::{count, export, guard, out, typed, CResult, Count};
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;
/// `MPI_BYTE`.
const BYTE: Handle = 0x247 as Handle;

/// Registers the pair of entries (`keep`: the data the send reads) as one request.
fn register(recv: ReqEntry, send: ReqEntry, keep: Vec<u8>, comm: Handle) -> Handle {
    state::add_req(ReqEntry::Live {
        req: LiveReq::Pair(Box::new((recv, send)), keep),
        comm: comm as usize,
        staged: None,
    })
}

/// `MPI_Isendrecv(_c)`.
///
/// # Safety
/// The caller's buffers, valid until the request completes (MPI contract).
#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv(
    (sendbuf, sendcount, sendtype, dest, sendtag): (*const c_void, Count, Handle, c_int, c_int),
    (recvbuf, recvcount, recvtype, source, recvtag): (*mut c_void, Count, Handle, c_int, c_int),
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    req_ok(request)?;
    // SAFETY: caller.
    let (recv, send) = unsafe {
        let recv = irecv_entry(recvbuf, recvcount, recvtype, source, recvtag, comm)?;
        (
            recv,
            isend_entry(sendbuf, sendcount, sendtype, dest, sendtag, comm, false)?,
        )
    };
    // SAFETY: non-null (checked), writable (MPI contract).
    unsafe { out(request, register(recv, send, Vec::new(), comm)) }
}

/// `MPI_Isendrecv_replace(_c)`.
///
/// # Safety
/// The caller's buffer, valid until the request completes (MPI contract).
unsafe fn isendrecv_replace(
    (buf, cnt, datatype): (*mut c_void, Count, Handle),
    (dest, sendtag, source, recvtag): (c_int, c_int, c_int, c_int),
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    req_ok(request)?;
    let n = count(cnt)?;
    let l = layout_of(datatype)?;
    let copy = if dest == MPI_PROC_NULL {
        Vec::new()
    } else {
        // SAFETY: the caller passes cnt readable elements.
        unsafe { pack(&l, buf, n)? }
    };
    let len = copy.len() as Count;
    // SAFETY: `copy` moves into the request with its heap data in place, and is dropped
    // after the send; buf is the caller's until completion (MPI contract).
    let (recv, send) = unsafe {
        let recv = irecv_entry(buf, cnt, datatype, source, recvtag, comm)?;
        let send = isend_entry(copy.as_ptr().cast(), len, BYTE, dest, sendtag, comm, false)?;
        (recv, send)
    };
    // SAFETY: non-null (checked), writable (MPI contract).
    unsafe { out(request, register(recv, send, copy, comm)) }
}

export!(MPI_Isendrecv, PMPI_Isendrecv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, dest: c_int,
         sendtag: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle,
         source: c_int, recvtag: c_int, comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Isendrecv", comm, || {
        // SAFETY: the caller's buffers (nonblocking contract).
        unsafe {
            isendrecv((sendbuf, sendcount.into(), sendtype, dest, sendtag),
                      (recvbuf, recvcount.into(), recvtype, source, recvtag), comm, request)
        }
    })
});

export!(MPI_Isendrecv_c, PMPI_Isendrecv_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, dest: c_int,
         sendtag: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: Handle,
         source: c_int, recvtag: c_int, comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Isendrecv_c", comm, || {
        // SAFETY: the caller's buffers (nonblocking contract).
        unsafe {
            isendrecv((sendbuf, sendcount, sendtype, dest, sendtag),
                      (recvbuf, recvcount, recvtype, source, recvtag), comm, request)
        }
    })
});

export!(MPI_Isendrecv_replace, PMPI_Isendrecv_replace,
        (buf: *mut c_void, cnt: c_int, datatype: Handle, dest: c_int, sendtag: c_int,
         source: c_int, recvtag: c_int, comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Isendrecv_replace", comm, || {
        // SAFETY: the caller's buffer (nonblocking contract).
        unsafe {
            isendrecv_replace((buf, cnt.into(), datatype), (dest, sendtag, source, recvtag),
                              comm, request)
        }
    })
});

export!(MPI_Isendrecv_replace_c, PMPI_Isendrecv_replace_c,
        (buf: *mut c_void, cnt: Count, datatype: Handle, dest: c_int, sendtag: c_int,
         source: c_int, recvtag: c_int, comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Isendrecv_replace_c", comm, || {
        // SAFETY: the caller's buffer (nonblocking contract).
        unsafe {
            isendrecv_replace((buf, cnt, datatype), (dest, sendtag, source, recvtag), comm,
                              request)
        }
    })
});

/// Reads `n` request handles.
///
/// # Safety
/// `p` holds `n` handles.
unsafe fn handles<'a>(p: *const Handle, n: usize) -> CResult<&'a [Handle]> {
    // SAFETY: caller.
    unsafe { typed::<Handle>(p.cast(), n) }
}

/// Whether `h` counts as active for the `get_status` calls.
fn active(h: Handle) -> bool {
    h as usize != REQUEST_NULL && !is_inactive(h)
}

export!(MPI_Request_get_status_all, PMPI_Request_get_status_all,
        (cnt: c_int, requests: *mut Handle, flag: *mut c_int,
         statuses: *mut MPI_Status) -> c_int {
    guard("MPI_Request_get_status_all", WORLD, || {
        // SAFETY: cnt handles (MPI contract).
        let reqs = unsafe { handles(requests, count(cnt)?)? };
        let mut sts = Vec::with_capacity(reqs.len());
        for &h in reqs {
            match peek_status(h)? {
                Some(st) => sts.push(st),
                // SAFETY: writable flag.
                None => return unsafe { out(flag, 0) },
            }
        }
        if !statuses.is_null() {
            for (i, st) in sts.into_iter().enumerate() {
                // SAFETY: room for cnt statuses (MPI contract).
                unsafe { crate::p2p::put_status(statuses.add(i), st) };
            }
        }
        // SAFETY: writable flag.
        unsafe { out(flag, 1) }
    })
});

export!(MPI_Request_get_status_any, PMPI_Request_get_status_any,
        (cnt: c_int, requests: *mut Handle, index: *mut c_int, flag: *mut c_int,
         status: *mut MPI_Status) -> c_int {
    guard("MPI_Request_get_status_any", WORLD, || {
        // SAFETY: cnt handles (MPI contract).
        let reqs = unsafe { handles(requests, count(cnt)?)? };
        let mut any_active = false;
        for (i, &h) in reqs.iter().enumerate() {
            if !active(h) {
                continue;
            }
            any_active = true;
            if let Some(st) = peek_status(h)? {
                // SAFETY: writable outputs (MPI contract).
                unsafe {
                    put_status(status, st);
                    out(index, i as c_int)?;
                    return out(flag, 1);
                }
            }
        }
        // SAFETY: writable outputs (MPI contract).
        unsafe {
            if !any_active {
                put_status(status, MPI_Status::empty(MPI_ANY_SOURCE));
            }
            out(index, MPI_UNDEFINED)?;
            out(flag, (!any_active) as c_int)
        }
    })
});

export!(MPI_Request_get_status_some, PMPI_Request_get_status_some,
        (incount: c_int, requests: *mut Handle, outcount: *mut c_int, indices: *mut c_int,
         statuses: *mut MPI_Status) -> c_int {
    guard("MPI_Request_get_status_some", WORLD, || {
        // SAFETY: incount handles (MPI contract).
        let reqs = unsafe { handles(requests, count(incount)?)? };
        let mut done = Vec::new();
        let mut any_active = false;
        for (i, &h) in reqs.iter().enumerate() {
            if !active(h) {
                continue;
            }
            any_active = true;
            if let Some(st) = peek_status(h)? {
                done.push((i, st));
            }
        }
        if !any_active {
            // SAFETY: writable outcount.
            return unsafe { out(outcount, MPI_UNDEFINED) };
        }
        if indices.is_null() && !done.is_empty() {
            return Err(crate::err(MPI_ERR_ARG, "null array_of_indices"));
        }
        for (k, (i, st)) in done.iter().enumerate() {
            // SAFETY: room for incount indices and statuses (MPI contract).
            unsafe {
                indices.add(k).write(*i as c_int);
                if !statuses.is_null() {
                    crate::p2p::put_status(statuses.add(k), *st);
                }
            }
        }
        // SAFETY: writable outcount.
        unsafe { out(outcount, done.len() as c_int) }
    })
});
