//! Buffered mode: `MPI_Buffer_attach`, `MPI_Buffer_detach`, `MPI_Bsend`, `MPI_Ibsend`
//! (and the start of `MPI_Bsend_init` requests), plus ready mode `MPI_Rsend`/`MPI_Irsend`.
//!
//! Contract: a buffered send copies (packs) the message and starts a standard-mode
//! nonblocking send of the copy, so it returns at once (`MPI_Ibsend`'s request is already
//! complete). The copy lives on this library's heap, not in the attached buffer, but
//! the attached buffer's space is accounted as MPI defines it: every buffered message in
//! flight uses its packed size plus `MPI_BSEND_OVERHEAD` (512) bytes until its send
//! completes; a message that does not fit in what is left (or a buffered send with no
//! buffer attached) is `MPI_ERR_BUFFER`. Attaching `MPI_BUFFER_AUTOMATIC` gives
//! unlimited space. `MPI_Buffer_detach` waits for every buffered message in flight, then
//! returns the attached address and size; `MPI_Finalize` also waits for them. Only one
//! buffer is attached at a time (attaching a second is `MPI_ERR_BUFFER`).
//! `MPI_Buffer_flush` waits for the buffered messages in flight and keeps the buffer
//! attached; `MPI_Buffer_iflush` returns a request that completes once every message
//! buffered before the call has been sent (later ones do not hold it up). Ready mode is
//! run as standard mode (allowed: a correct ready-mode program is a correct
//! standard-mode one).

use crate::consts::*;
use crate::p2p::{dside, isend_impl, send_impl};
use crate::state::{self, LiveReq, ReqEntry, Staged};
use crate::types::pack;
use crate::{bytes, err, export, guard, out, CResult};
use phalanx::request::StaticScope;
use phalanx::traits::{Communicator, Destination};
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;
/// `MPI_BSEND_OVERHEAD` of the header.
pub const BSEND_OVERHEAD: usize = 512;
/// `MPI_BUFFER_AUTOMATIC` of the header.
const BUFFER_AUTOMATIC: usize = 2;

/// A buffered message in flight: its send, the copy it runs on, the bytes accounted, its
/// number (in order of buffering).
type Pending = (LiveReq, Staged, usize, u64);

/// The attached buffer and the buffered messages in flight.
#[derive(Default)]
pub struct Bsend {
    /// Attached buffer: address and size (`usize::MAX` for `MPI_BUFFER_AUTOMATIC`).
    attached: Option<(usize, usize)>,
    /// Messages in flight.
    pending: Vec<Pending>,
    /// Messages buffered so far (the next one's number).
    buffered: u64,
}

impl Bsend {
    /// Takes the messages in flight out (to wait for them, or forget them at exit).
    pub fn take_pending(&mut self) -> Vec<impl Sized> {
        std::mem::take(&mut self.pending)
    }
}

/// Drops the buffered messages that completed; returns the bytes still accounted.
fn reap() -> usize {
    let pend = state::with(|s| std::mem::take(&mut s.bsend.pending));
    let mut left = Vec::new();
    for (req, staged, n, k) in pend {
        match req.test() {
            Ok(_) => drop(staged),
            Err(req) => left.push((req, staged, n, k)),
        }
    }
    let used = left.iter().map(|p| p.2).sum();
    state::with(|s| {
        let mut newer = std::mem::take(&mut s.bsend.pending);
        s.bsend.pending = left;
        s.bsend.pending.append(&mut newer);
    });
    used
}

/// Starts a buffered send: the returned request is already complete.
///
/// # Safety
/// `buf` holds `cnt` elements of `datatype`, readable for the call.
pub(crate) unsafe fn ibsend_entry(
    buf: *const c_void,
    cnt: crate::Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> CResult<ReqEntry> {
    let s = dside(comm, cnt, datatype, dest, tag, false)?;
    let Some(d) = s.peer else {
        return Ok(ReqEntry::Done(MPI_Status::empty(MPI_PROC_NULL)));
    };
    let need = s.len + BSEND_OVERHEAD;
    let used = reap();
    let cap = state::with(|s| s.bsend.attached.map(|a| a.1))
        .ok_or_else(|| err(MPI_ERR_BUFFER, "buffered send with no buffer attached"))?;
    if cap.saturating_sub(used) < need {
        return Err(err(
            MPI_ERR_BUFFER,
            format!(
                "buffered send of {} bytes (+{BSEND_OVERHEAD} overhead) does not fit: \
                 {used} of {cap} attached bytes in use",
                s.len
            ),
        ));
    }
    let data = match &s.derived {
        // SAFETY: count readable elements (caller).
        None => unsafe { bytes(buf, s.len)? }.to_vec(),
        // SAFETY: as above.
        Some((l, n)) => unsafe { pack(l, buf, *n)? },
    };
    let (staged, view) = Staged::new(data, None);
    let view: &'static [u8] = view;
    let req = s
        .comm
        .process_at_rank(d)
        .immediate_send_with_tag(StaticScope, view, s.tag);
    state::with(|st| {
        let k = st.bsend.buffered;
        st.bsend.buffered += 1;
        st.bsend
            .pending
            .push((LiveReq::Bytes(req), staged, need, k));
    });
    Ok(ReqEntry::Done(MPI_Status::empty(MPI_ANY_SOURCE)))
}

export!(MPI_Buffer_attach, PMPI_Buffer_attach, (buffer: *mut c_void, size: c_int) -> c_int {
    guard("MPI_Buffer_attach", WORLD, || attach(buffer, size.into()))
});

/// `MPI_Buffer_attach` (and `MPI_Buffer_attach_c`).
pub(crate) fn attach(buffer: *mut c_void, size: crate::Count) -> CResult {
    let automatic = buffer as usize == BUFFER_AUTOMATIC;
    let n = if automatic {
        usize::MAX
    } else {
        crate::count(size)?
    };
    if buffer.is_null() && n > 0 {
        return Err(err(MPI_ERR_BUFFER, "null buffer"));
    }
    state::with(|s| {
        if s.bsend.attached.is_some() {
            return Err(err(MPI_ERR_BUFFER, "a buffer is already attached"));
        }
        s.bsend.attached = Some((buffer as usize, n));
        Ok(())
    })
}

/// Waits for every buffered message in flight.
pub(crate) fn drain() {
    let pend = state::with(|s| std::mem::take(&mut s.bsend.pending));
    for (req, staged, ..) in pend {
        req.wait();
        drop(staged);
    }
}

/// The request of `MPI_Buffer_iflush`: complete when no message numbered below `upto`
/// is in flight.
struct Flush {
    upto: u64,
}

impl Flush {
    fn done(&self) -> bool {
        reap();
        state::with(|s| s.bsend.pending.iter().all(|p| p.3 >= self.upto))
    }
}

impl state::AnyRequest for Flush {
    fn wait_box(self: Box<Self>) {
        while !self.done() {
            phalanx::capi_support::yield_now();
        }
    }
    fn test_box(self: Box<Self>) -> Result<(), Box<dyn state::AnyRequest>> {
        if self.done() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

export!(MPI_Buffer_flush, PMPI_Buffer_flush, () -> c_int {
    guard("MPI_Buffer_flush", WORLD, || {
        drain();
        Ok(())
    })
});

export!(MPI_Buffer_iflush, PMPI_Buffer_iflush, (request: *mut Handle) -> c_int {
    guard("MPI_Buffer_iflush", WORLD, || {
        crate::nbc::req_ok(request)?;
        let upto = state::with(|s| s.bsend.buffered);
        let e = ReqEntry::Live {
            req: LiveReq::Coll(Box::new(Flush { upto })),
            comm: WORLD as usize,
            staged: None,
        };
        // SAFETY: non-null (checked), writable (MPI contract).
        unsafe { out(request, state::add_req(e)) }
    })
});

export!(MPI_Buffer_detach, PMPI_Buffer_detach, (buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    guard("MPI_Buffer_detach", WORLD, || {
        if buffer_addr.is_null() || size.is_null() {
            return Err(err(MPI_ERR_ARG, "null output argument"));
        }
        let (a, n) = detach();
        let n = c_int::try_from(n).unwrap_or(c_int::MAX);
        // SAFETY: buffer_addr points to a writable pointer, size to an int (MPI contract).
        unsafe {
            out(buffer_addr.cast::<*mut c_void>(), a as *mut c_void)?;
            out(size, n)
        }
    })
});

/// `MPI_Buffer_detach` (and `MPI_Buffer_detach_c`): waits for the buffered messages
/// in flight; the buffer that was attached and its size (0 for `MPI_BUFFER_AUTOMATIC`).
pub(crate) fn detach() -> (usize, usize) {
    drain();
    let (a, n) = state::with(|s| s.bsend.attached.take()).unwrap_or((0, 0));
    (a, if a == BUFFER_AUTOMATIC { 0 } else { n })
}

export!(MPI_Bsend, PMPI_Bsend,
        (buf: *const c_void, cnt: c_int, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle) -> c_int {
    guard("MPI_Bsend", comm, || {
        // SAFETY: the caller's buffer, readable for the call.
        unsafe { ibsend_entry(buf, cnt.into(), datatype, dest, tag, comm) }.map(drop)
    })
});

export!(MPI_Ibsend, PMPI_Ibsend,
        (buf: *const c_void, cnt: c_int, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Ibsend", comm, || {
        if request.is_null() {
            return Err(err(MPI_ERR_ARG, "null request pointer"));
        }
        // SAFETY: the caller's buffer, readable for the call (it is copied).
        let e = unsafe { ibsend_entry(buf, cnt.into(), datatype, dest, tag, comm)? };
        // SAFETY: non-null, writable.
        unsafe { out(request, state::add_req(e)) }
    })
});

export!(MPI_Rsend, PMPI_Rsend,
        (buf: *const c_void, cnt: c_int, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle) -> c_int {
    send_impl("MPI_Rsend", buf, cnt.into(), datatype, dest, tag, comm, false)
});

export!(MPI_Irsend, PMPI_Irsend,
        (buf: *const c_void, cnt: c_int, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    isend_impl("MPI_Irsend", buf, cnt.into(), datatype, dest, tag, comm, request, false)
});
