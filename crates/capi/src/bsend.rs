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
//! buffered before the call has been sent (later ones do not hold it up). MPI-4.1's
//! per-communicator buffers (`MPI_Comm_attach_buffer`, `_detach_buffer`, `_flush_buffer`,
//! `_iflush_buffer`) are pools of their own with the same rules: a buffered send on a
//! communicator with a buffer attached uses that one, any other the process's. Ready
//! mode is run as standard mode (allowed: a correct ready-mode program is a correct
//! standard-mode one).

use crate::consts::*;
use crate::p2p::{dside, isend_impl, send_impl};
use crate::state::{self, LiveReq, ReqEntry, Staged};
use crate::types::pack;
use crate::{bytes, err, export, guard, out, CResult};
use phalanx::request::StaticScope;
use phalanx::traits::{Communicator, Destination};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;
/// `MPI_BSEND_OVERHEAD` of the header.
pub const BSEND_OVERHEAD: usize = 512;
/// `MPI_BUFFER_AUTOMATIC` of the header.
const BUFFER_AUTOMATIC: usize = 2;

/// A buffered message in flight: its send, the copy it runs on, the bytes accounted, its
/// number (in order of buffering).
type Pending = (LiveReq, Staged, usize, u64);

/// An attached buffer and the buffered messages in flight on it.
#[derive(Default)]
pub struct Pool {
    /// Attached buffer: address and size (`usize::MAX` for `MPI_BUFFER_AUTOMATIC`).
    attached: Option<(usize, usize)>,
    /// Messages in flight.
    pending: Vec<Pending>,
    /// Messages buffered so far (the next one's number).
    buffered: u64,
}

/// The process's pool and the communicators' (by handle).
#[derive(Default)]
pub struct Bsend {
    process: Pool,
    comms: HashMap<usize, Pool>,
}

/// Which pool: the process's, or a communicator's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Process,
    Comm(usize),
}

impl Bsend {
    /// Takes the messages in flight out of every pool (to wait for them, or forget them at
    /// exit).
    pub fn take_pending(&mut self) -> Vec<impl Sized> {
        let mut all = std::mem::take(&mut self.process.pending);
        for p in self.comms.values_mut() {
            all.append(&mut p.pending);
        }
        all
    }

    fn pool(&mut self, k: Key) -> Option<&mut Pool> {
        match k {
            Key::Process => Some(&mut self.process),
            Key::Comm(c) => self.comms.get_mut(&c),
        }
    }
}

/// The pool a buffered send on `comm` uses.
fn key_of(comm: Handle) -> Key {
    let c = comm as usize;
    if state::with(|s| s.bsend.comms.contains_key(&c)) {
        Key::Comm(c)
    } else {
        Key::Process
    }
}

/// Drops pool `k`'s buffered messages that completed; returns the bytes still accounted.
fn reap(k: Key) -> usize {
    let pend = state::with(|s| s.bsend.pool(k).map(|p| std::mem::take(&mut p.pending)))
        .unwrap_or_default();
    let mut left = Vec::new();
    for (req, staged, n, i) in pend {
        match req.test() {
            Ok(_) => drop(staged),
            Err(req) => left.push((req, staged, n, i)),
        }
    }
    let used = left.iter().map(|p| p.2).sum();
    state::with(|s| {
        if let Some(p) = s.bsend.pool(k) {
            let mut newer = std::mem::take(&mut p.pending);
            p.pending = left;
            p.pending.append(&mut newer);
        }
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
    let key = key_of(comm);
    let used = reap(key);
    let cap = state::with(|s| s.bsend.pool(key).and_then(|p| p.attached.map(|a| a.1)))
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
        if let Some(p) = st.bsend.pool(key) {
            let k = p.buffered;
            p.buffered += 1;
            p.pending.push((LiveReq::Bytes(req), staged, need, k));
        }
    });
    Ok(ReqEntry::Done(MPI_Status::empty(MPI_ANY_SOURCE)))
}

export!(MPI_Buffer_attach, PMPI_Buffer_attach, (buffer: *mut c_void, size: c_int) -> c_int {
    guard("MPI_Buffer_attach", WORLD, || attach(buffer, size.into()))
});

/// `MPI_Buffer_attach` (and `MPI_Buffer_attach_c`).
pub(crate) fn attach(buffer: *mut c_void, size: crate::Count) -> CResult {
    attach_to(Key::Process, buffer, size)
}

/// Attaches `buffer` of `size` bytes to pool `k` (made for a communicator).
fn attach_to(k: Key, buffer: *mut c_void, size: crate::Count) -> CResult {
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
        let pool = match k {
            Key::Process => &mut s.bsend.process,
            Key::Comm(c) => s.bsend.comms.entry(c).or_default(),
        };
        if pool.attached.is_some() {
            return Err(err(MPI_ERR_BUFFER, "a buffer is already attached"));
        }
        pool.attached = Some((buffer as usize, n));
        Ok(())
    })
}

/// Waits for every buffered message in flight (every pool's).
pub(crate) fn drain() {
    drain_pool(Key::Process);
    let comms: Vec<usize> = state::with(|s| s.bsend.comms.keys().copied().collect());
    for c in comms {
        drain_pool(Key::Comm(c));
    }
}

/// Waits for pool `k`'s buffered messages in flight.
fn drain_pool(k: Key) {
    let pend = state::with(|s| s.bsend.pool(k).map(|p| std::mem::take(&mut p.pending)))
        .unwrap_or_default();
    for (req, staged, ..) in pend {
        req.wait();
        drop(staged);
    }
}

/// The request of `MPI_Buffer_iflush`: complete when no message of pool `key` numbered
/// below `upto` is in flight.
struct Flush {
    key: Key,
    upto: u64,
}

impl Flush {
    fn done(&self) -> bool {
        reap(self.key);
        state::with(|s| {
            s.bsend
                .pool(self.key)
                .is_none_or(|p| p.pending.iter().all(|q| q.3 >= self.upto))
        })
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

/// A request completing when pool `key`'s messages buffered so far have been sent.
fn iflush(key: Key, comm: Handle, request: *mut Handle) -> CResult {
    crate::nbc::req_ok(request)?;
    let upto = state::with(|s| s.bsend.pool(key).map_or(0, |p| p.buffered));
    let e = ReqEntry::Live {
        req: LiveReq::Coll(Box::new(Flush { key, upto })),
        comm: comm as usize,
        staged: None,
    };
    // SAFETY: non-null (checked), writable (MPI contract).
    unsafe { out(request, state::add_req(e)) }
}

export!(MPI_Buffer_flush, PMPI_Buffer_flush, () -> c_int {
    guard("MPI_Buffer_flush", WORLD, || {
        drain_pool(Key::Process);
        Ok(())
    })
});

export!(MPI_Buffer_iflush, PMPI_Buffer_iflush, (request: *mut Handle) -> c_int {
    guard("MPI_Buffer_iflush", WORLD, || iflush(Key::Process, WORLD, request))
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
    detach_from(Key::Process)
}

/// Detaches pool `k`'s buffer (a communicator's pool goes with it).
fn detach_from(k: Key) -> (usize, usize) {
    drain_pool(k);
    let (a, n) = state::with(|s| match k {
        Key::Process => s.bsend.process.attached.take(),
        Key::Comm(c) => s.bsend.comms.remove(&c).and_then(|p| p.attached),
    })
    .unwrap_or((0, 0));
    (a, if a == BUFFER_AUTOMATIC { 0 } else { n })
}

/// `MPI_Comm_attach_buffer(_c)`.
fn comm_attach(comm: Handle, buffer: *mut c_void, size: crate::Count) -> CResult {
    state::comm(comm)?;
    attach_to(Key::Comm(comm as usize), buffer, size)
}

/// `MPI_Comm_detach_buffer(_c)`: the detached buffer and its size through the outputs.
///
/// # Safety
/// `buffer_addr` points to a writable pointer (MPI contract; null checked).
unsafe fn comm_detach(comm: Handle, buffer_addr: *mut c_void) -> CResult<usize> {
    state::comm(comm)?;
    if buffer_addr.is_null() {
        return Err(err(MPI_ERR_ARG, "null output argument"));
    }
    if !state::with(|s| s.bsend.comms.contains_key(&(comm as usize))) {
        return Err(err(
            MPI_ERR_BUFFER,
            "no buffer is attached to the communicator",
        ));
    }
    let (a, n) = detach_from(Key::Comm(comm as usize));
    // SAFETY: caller.
    unsafe { out(buffer_addr.cast::<*mut c_void>(), a as *mut c_void)? };
    Ok(n)
}

export!(MPI_Comm_attach_buffer, PMPI_Comm_attach_buffer,
        (comm: Handle, buffer: *mut c_void, size: c_int) -> c_int {
    guard("MPI_Comm_attach_buffer", comm, || comm_attach(comm, buffer, size.into()))
});

export!(MPI_Comm_attach_buffer_c, PMPI_Comm_attach_buffer_c,
        (comm: Handle, buffer: *mut c_void, size: crate::Count) -> c_int {
    guard("MPI_Comm_attach_buffer_c", comm, || comm_attach(comm, buffer, size))
});

export!(MPI_Comm_detach_buffer, PMPI_Comm_detach_buffer,
        (comm: Handle, buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    guard("MPI_Comm_detach_buffer", comm, || {
        // SAFETY: writable outputs (MPI contract; null checked).
        let n = unsafe { comm_detach(comm, buffer_addr)? };
        // SAFETY: as above.
        unsafe { out(size, c_int::try_from(n).unwrap_or(c_int::MAX)) }
    })
});

export!(MPI_Comm_detach_buffer_c, PMPI_Comm_detach_buffer_c,
        (comm: Handle, buffer_addr: *mut c_void, size: *mut crate::Count) -> c_int {
    guard("MPI_Comm_detach_buffer_c", comm, || {
        // SAFETY: writable outputs (MPI contract; null checked).
        let n = unsafe { comm_detach(comm, buffer_addr)? };
        // SAFETY: as above.
        unsafe { out(size, n as crate::Count) }
    })
});

export!(MPI_Comm_flush_buffer, PMPI_Comm_flush_buffer, (comm: Handle) -> c_int {
    guard("MPI_Comm_flush_buffer", comm, || {
        state::comm(comm)?;
        drain_pool(Key::Comm(comm as usize));
        Ok(())
    })
});

export!(MPI_Comm_iflush_buffer, PMPI_Comm_iflush_buffer,
        (comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Comm_iflush_buffer", comm, || {
        state::comm(comm)?;
        iflush(Key::Comm(comm as usize), comm, request)
    })
});

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
