//! Matched probes: `MPI_Mprobe`, `MPI_Improbe`, `MPI_Mrecv`, `MPI_Imrecv` (and the
//! `_c` forms with large counts).
//!
//! A matched probe takes the message out of matching in the core (phalanx's
//! `Source::matched_probe`): no other receive or probe of the program sees it again; the
//! `MPI_Message` handle names the core's `Message` in a per-thread table until
//! `MPI_Mrecv`/`MPI_Imrecv` receives it and writes `MPI_MESSAGE_NULL` back. A probe of
//! `MPI_PROC_NULL` returns `MPI_MESSAGE_NO_PROC`, whose receive completes at once with
//! the `MPI_PROC_NULL` status. Derived datatypes receive into a temporary unpacked at
//! completion, as `MPI_Recv`/`MPI_Irecv` do. A message longer than the receive buffer is
//! received whole into a temporary, its first bytes copied (contiguous types) and
//! `MPI_ERR_TRUNCATE` raised — at once, also by `MPI_Imrecv`, which then returns no
//! request.

use crate::consts::*;
use crate::p2p::{c_status, dside, put_status, side, DONE_PROC_NULL};
use crate::state::{self, LiveReq, ReqEntry, Staged};
use crate::{bytes_mut, err, export, guard, guard_on, out, CResult};
use phalanx::capi_support::Shared;
use phalanx::point_to_point::{Message, Source};
use phalanx::request::StaticScope;
use phalanx::traits::Communicator;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};

/// `MPI_MESSAGE_NULL`.
const MESSAGE_NULL: usize = 0x128;
/// `MPI_MESSAGE_NO_PROC`.
const MESSAGE_NO_PROC: usize = 0x129;
/// `MPI_BYTE`: probes validate their arguments as zero-byte receives.
const BYTE: Handle = 0x247 as Handle;
/// First message handle (far from the predefined constants); handles count up by 8.
const FIRST_HANDLE: usize = 0x4d00_0000;

/// A probed message: the core's `Message`, its communicator handle, its length.
type Probed = (Message, usize, u64);

/// Messages taken by matched probes and not yet received, and the next handle.
static MESSAGES: Shared<RefCell<(HashMap<usize, Probed>, usize)>> =
    Shared::new(|| RefCell::new((HashMap::new(), FIRST_HANDLE)));

/// Keeps `m` and returns its handle.
fn store(m: Message, comm: Handle, bytes: u64) -> Handle {
    MESSAGES.with(|t| {
        let mut t = t.borrow_mut();
        let h = t.1;
        t.1 += 8;
        t.0.insert(h, (m, comm as usize, bytes));
        h as Handle
    })
}

/// The handle of a Rust `Message` (`phalanx::raw::AsRaw`): the first time, a copy of it
/// goes into the table under a new handle, which the message keeps (and a C matched
/// receive overwrites with `MPI_MESSAGE_NULL` through `AsRawMut`); a receive in Rust or a
/// drop takes the copy back (`reclaim`).
pub fn handle_of(m: &Message) -> Handle {
    if let Some(copy) = m.c_copy() {
        let comm = state::handle_of(m.c_comm());
        let h = store(copy, comm, m.c_bytes());
        m.c_issue(h);
        phalanx::point_to_point::set_c_reclaim(reclaim);
    }
    // SAFETY: the message's own handle cell.
    unsafe { m.c_handle_slot().read() }
}

/// Takes the copy kept under handle `h` back (`None`: a C receive took it).
fn reclaim(h: usize) -> Option<Message> {
    MESSAGES.with(|t| t.borrow_mut().0.remove(&h)).map(|p| p.0)
}

/// Takes the message named by `h` out of the table.
fn take(h: Handle) -> CResult<Probed> {
    MESSAGES
        .with(|t| t.borrow_mut().0.remove(&(h as usize)))
        .ok_or_else(|| err(MPI_ERR_ARG, format!("invalid message handle {h:p}")))
}

/// Matched probe of `s` for `tag` (or any); `immediate`: one check, `None` if nothing.
fn probe_on<S: Source>(
    s: &S,
    tag: c_int,
    immediate: bool,
) -> Option<(Message, phalanx::point_to_point::Status)> {
    match (tag, immediate) {
        (MPI_ANY_TAG, false) => Some(s.matched_probe()),
        (t, false) => Some(s.matched_probe_with_tag(t)),
        (MPI_ANY_TAG, true) => s.immediate_matched_probe(),
        (t, true) => s.immediate_matched_probe_with_tag(t),
    }
}

/// The matched probe of `MPI_Mprobe`/`MPI_Improbe`: `Some((message, status))` when a
/// message was taken (or for `MPI_PROC_NULL`), `None` when an immediate probe found none.
fn mprobe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    immediate: bool,
) -> CResult<Option<(Handle, MPI_Status)>> {
    let s = side(comm, 0, BYTE, source, tag, true)?;
    let Some(src) = s.peer else {
        return Ok(Some((
            MESSAGE_NO_PROC as Handle,
            MPI_Status::empty(MPI_PROC_NULL),
        )));
    };
    let got = if src == MPI_ANY_SOURCE {
        probe_on(&s.comm.any_process(), s.tag, immediate)
    } else {
        probe_on(&s.comm.process_at_rank(src), s.tag, immediate)
    };
    Ok(got.map(|(m, st)| (store(m, comm, st.byte_count()), c_status(st))))
}

export!(MPI_Mprobe, PMPI_Mprobe,
        (source: c_int, tag: c_int, comm: Handle, message: *mut Handle,
         status: *mut MPI_Status) -> c_int {
    guard("MPI_Mprobe", comm, || {
        if message.is_null() {
            return Err(err(MPI_ERR_ARG, "null message pointer"));
        }
        let Some((h, st)) = mprobe(source, tag, comm, false)? else {
            return Err(err(MPI_ERR_INTERN, "blocking matched probe returned nothing"));
        };
        // SAFETY: non-null writable message (MPI contract); status ignore or writable.
        unsafe {
            put_status(status, st);
            out(message, h)
        }
    })
});

export!(MPI_Improbe, PMPI_Improbe,
        (source: c_int, tag: c_int, comm: Handle, flag: *mut c_int, message: *mut Handle,
         status: *mut MPI_Status) -> c_int {
    guard("MPI_Improbe", comm, || {
        if message.is_null() || flag.is_null() {
            return Err(err(MPI_ERR_ARG, "null flag or message pointer"));
        }
        let got = mprobe(source, tag, comm, true)?;
        // SAFETY: non-null writable flag and message (MPI contract); status ignore or
        // writable.
        unsafe {
            match got {
                Some((h, st)) => {
                    put_status(status, st);
                    out(message, h)?;
                    out(flag, 1)
                }
                None => out(flag, 0),
            }
        }
    })
});

/// What a matched receive starts with: the message (`None`: `MPI_MESSAGE_NO_PROC`), its
/// communicator and length; `MPI_MESSAGE_NULL` written back through `message`.
///
/// # Safety
/// `message` is null (an error) or a readable and writable handle.
unsafe fn take_message(message: *mut Handle, comm: &mut Handle) -> CResult<Option<Probed>> {
    if message.is_null() {
        return Err(err(MPI_ERR_ARG, "null message pointer"));
    }
    // SAFETY: non-null, readable (caller).
    let h = unsafe { message.read() };
    if h as usize == MESSAGE_NO_PROC {
        // SAFETY: writable (caller).
        unsafe { out(message, MESSAGE_NULL as Handle)? };
        return Ok(None);
    }
    let p = take(h)?;
    *comm = p.1 as Handle;
    // SAFETY: writable (caller).
    unsafe { out(message, MESSAGE_NULL as Handle)? };
    Ok(Some(p))
}

/// Receives message `m` of `bytes` bytes whole into a temporary, copies what fits into
/// `buf` (`len` bytes, a contiguous type), and reports the truncation.
///
/// # Safety
/// `buf` is writable for `len` bytes.
unsafe fn truncated(m: Message, bytes: u64, buf: *mut c_void, len: usize) -> CResult {
    let mut tmp = vec![0u8; bytes as usize];
    m.matched_receive_into(&mut tmp[..]);
    if len > 0 {
        // SAFETY: writable for len bytes (caller).
        let b = unsafe { bytes_mut(buf, len)? };
        b.copy_from_slice(&tmp[..len]);
    }
    Err(err(
        MPI_ERR_TRUNCATE,
        format!("message of {bytes} bytes truncated to a {len}-byte buffer"),
    ))
}

/// `MPI_Mrecv` and `MPI_Mrecv_c`.
///
/// # Safety
/// The MPI contract of `MPI_Mrecv`.
unsafe fn mrecv(
    name: &str,
    buf: *mut c_void,
    cnt: crate::Count,
    datatype: Handle,
    message: *mut Handle,
    status: *mut MPI_Status,
) -> c_int {
    guard_on(name, |comm| {
        // SAFETY: readable, writable message handle (MPI contract).
        let Some((m, c, bytes)) = (unsafe { take_message(message, comm)? }) else {
            // SAFETY: status ignore or writable.
            unsafe { put_status(status, MPI_Status::empty(MPI_PROC_NULL)) };
            return Ok(());
        };
        let s = dside(
            c as Handle,
            cnt,
            datatype,
            MPI_ANY_SOURCE,
            MPI_ANY_TAG,
            true,
        )?;
        if bytes > s.len as u64 {
            // SAFETY: the caller's buffer holds s.len bytes.
            return unsafe {
                truncated(m, bytes, buf, if s.derived.is_some() { 0 } else { s.len })
            };
        }
        let st = match &s.derived {
            None => {
                // SAFETY: the caller's buffer holds s.len writable bytes.
                let b = unsafe { bytes_mut(buf, s.len)? };
                m.matched_receive_into(b)
            }
            Some((l, n)) => {
                let mut tmp = vec![0u8; s.len];
                let st = m.matched_receive_into(&mut tmp[..]);
                let k = (st.byte_count() as usize).min(tmp.len());
                // SAFETY: the caller's buffer holds n elements of the layout.
                unsafe { crate::types::unpack(l, &tmp[..k], buf, *n)? };
                st
            }
        };
        // SAFETY: status ignore or writable.
        unsafe { put_status(status, c_status(st)) };
        Ok(())
    })
}

/// `MPI_Imrecv` and `MPI_Imrecv_c`.
///
/// # Safety
/// The MPI contract of `MPI_Imrecv`.
unsafe fn imrecv(
    name: &str,
    buf: *mut c_void,
    cnt: crate::Count,
    datatype: Handle,
    message: *mut Handle,
    request: *mut Handle,
) -> c_int {
    guard_on(name, |comm| {
        if request.is_null() {
            return Err(err(MPI_ERR_ARG, "null request pointer"));
        }
        // SAFETY: readable, writable message handle (MPI contract).
        let Some((m, c, bytes)) = (unsafe { take_message(message, comm)? }) else {
            // SAFETY: non-null, writable (MPI contract).
            return unsafe { out(request, DONE_PROC_NULL as Handle) };
        };
        let s = dside(
            c as Handle,
            cnt,
            datatype,
            MPI_ANY_SOURCE,
            MPI_ANY_TAG,
            true,
        )?;
        if bytes > s.len as u64 {
            // SAFETY: non-null, writable request; the caller's buffer holds s.len bytes.
            unsafe {
                out(request, REQUEST_NULL as Handle)?;
                return truncated(m, bytes, buf, if s.derived.is_some() { 0 } else { s.len });
            }
        }
        let (staged, b): (_, &'static mut [u8]) = match &s.derived {
            // SAFETY: 'static by the MPI contract on nonblocking buffers (see crate::p2p).
            None => (None, unsafe { bytes_mut(buf, s.len)? }),
            Some((l, n)) => {
                let (st, v) = Staged::new(vec![0; s.len], Some((buf, l.clone(), *n)));
                (Some(st), v)
            }
        };
        let req = m.immediate_matched_receive_into(StaticScope, b);
        let h = state::add_req(ReqEntry::Live {
            req: LiveReq::Bytes(req),
            comm: c,
            staged,
        });
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(request, h) }
    })
}

export!(MPI_Mrecv, PMPI_Mrecv,
        (buf: *mut c_void, count: c_int, datatype: Handle, message: *mut Handle,
         status: *mut MPI_Status) -> c_int {
    // SAFETY: the caller's MPI contract.
    unsafe { mrecv("MPI_Mrecv", buf, count.into(), datatype, message, status) }
});

export!(MPI_Imrecv, PMPI_Imrecv,
        (buf: *mut c_void, count: c_int, datatype: Handle, message: *mut Handle,
         request: *mut Handle) -> c_int {
    // SAFETY: the caller's MPI contract.
    unsafe { imrecv("MPI_Imrecv", buf, count.into(), datatype, message, request) }
});

export!(MPI_Mrecv_c, PMPI_Mrecv_c,
        (buf: *mut c_void, count: i64, datatype: Handle, message: *mut Handle,
         status: *mut MPI_Status) -> c_int {
    // SAFETY: the caller's MPI contract.
    unsafe { mrecv("MPI_Mrecv_c", buf, count, datatype, message, status) }
});

export!(MPI_Imrecv_c, PMPI_Imrecv_c,
        (buf: *mut c_void, count: i64, datatype: Handle, message: *mut Handle,
         request: *mut Handle) -> c_int {
    // SAFETY: the caller's MPI contract.
    unsafe { imrecv("MPI_Imrecv_c", buf, count, datatype, message, request) }
});
