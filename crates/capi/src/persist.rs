//! Persistent point-to-point requests: `MPI_Send_init`, `MPI_Ssend_init`,
//! `MPI_Rsend_init`, `MPI_Bsend_init`, `MPI_Recv_init`, `MPI_Start`, `MPI_Startall`.
//!
//! Contract: an `_init` call checks its arguments (as the matching nonblocking call
//! would) and returns an inactive persistent request ([`Persist`]) that remembers them.
//! `MPI_Start` on an inactive request starts the matching nonblocking operation
//! (`Isend`, `Issend`, `Irsend` = standard mode, `Ibsend`, `Irecv`) and makes it active;
//! starting an active request is `MPI_ERR_REQUEST`. `MPI_Wait*`/`MPI_Test*` complete
//! an active persistent request and leave it inactive, keeping its handle (the
//! completion functions never write `MPI_REQUEST_NULL` over it); on an inactive one
//! `MPI_Wait`/`MPI_Test`/`MPI_Waitall`/`MPI_Testall` return at once with an empty status
//! and `MPI_Waitany`/`MPI_Waitsome`/`MPI_Testany`/`MPI_Testsome` ignore it, as they
//! ignore `MPI_REQUEST_NULL`. `MPI_Request_free` releases it (an active operation then
//! completes on its own; `MPI_Finalize` waits for it). The request holds a private
//! duplicate of a derived datatype ([`crate::types::pin`]), so the program may free its
//! own handle after the `_init` call; the communicator must stay valid while the request
//! exists. The persistent collectives (`MPI_Bcast_init`, …, [`crate::persist_coll`]) are
//! requests of the same kind whose start runs the collective's nonblocking form.

use crate::consts::*;
use crate::p2p::{dside, irecv_entry, isend_entry, read_req};
use crate::state::{self, ReqEntry};
use crate::{count, err, export, guard, out, CResult};
use std::ffi::{c_int, c_void};
use std::rc::Rc;

const WORLD: Handle = COMM_WORLD as Handle;

/// Send modes of a persistent send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `MPI_Send_init` (and `MPI_Rsend_init`: ready mode is run as standard mode).
    Standard,
    /// `MPI_Ssend_init`.
    Synchronous,
    /// `MPI_Bsend_init`.
    Buffered,
}

/// The operation a persistent request starts.
#[derive(Clone)]
pub enum Op {
    /// A send of `buf` in `mode`.
    Send {
        /// User buffer.
        buf: *const c_void,
        /// Send mode.
        mode: Mode,
    },
    /// A receive into `buf`.
    Recv {
        /// User buffer.
        buf: *mut c_void,
    },
    /// A persistent collective: starts its nonblocking form.
    Coll(Rc<Starter>),
}

/// How a persistent collective starts: calls the nonblocking form (`MPI_Ibcast`, …) with
/// the arguments of the `_init` call, writing the new request's handle; returns its
/// error code (already raised on the communicator's error handler).
pub type Starter = dyn Fn(*mut Handle) -> c_int;

/// A persistent request: its arguments and, while active, the running operation.
pub struct Persist {
    /// What `MPI_Start` starts.
    pub op: Op,
    /// Element count.
    pub cnt: crate::Count,
    /// Datatype handle.
    pub datatype: Handle,
    /// Destination or source rank.
    pub peer: c_int,
    /// Tag.
    pub tag: c_int,
    /// Communicator handle.
    pub comm: Handle,
    /// Private datatype duplicates the request holds ([`crate::types::pin`]), released
    /// with it ([`release`]).
    pub pins: Vec<Handle>,
    /// The private communicator a persistent collective runs on (released with it).
    pub own_comm: Option<Handle>,
    /// The running operation (`None`: inactive).
    pub active: Option<Box<ReqEntry>>,
}

/// Releases what a freed persistent request held (its datatype duplicates and private
/// communicator).
pub(crate) fn release(p: &Persist) {
    for &t in &p.pins {
        crate::types::unpin(t);
    }
    if let Some(mut c) = p.own_comm {
        // SAFETY: a handle this module made; freed once, with its request.
        unsafe { crate::env::PMPI_Comm_free(&mut c) };
    }
}

/// Registers persistent collective `start` on `comm` (running on private communicator
/// `own`) holding datatype duplicates `pins`; writes its handle through `request`.
pub(crate) fn add_coll(
    start: Box<Starter>,
    (comm, own): (Handle, Handle),
    pins: Vec<Handle>,
    request: *mut Handle,
) -> CResult {
    let p = Persist {
        op: Op::Coll(Rc::from(start)),
        cnt: 0,
        datatype: crate::types::DATATYPE_NULL as Handle,
        peer: MPI_PROC_NULL,
        tag: 0,
        comm,
        pins,
        own_comm: Some(own),
        active: None,
    };
    let h = state::add_req(ReqEntry::Persistent(Box::new(p)));
    // SAFETY: non-null (checked by the caller), writable (MPI contract).
    unsafe { out(request, h) }
}

/// Creates an inactive persistent request after checking the arguments.
pub(crate) fn init(
    op: Op,
    cnt: crate::Count,
    datatype: Handle,
    peer: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> CResult {
    dside(
        comm,
        cnt,
        datatype,
        peer,
        tag,
        matches!(op, Op::Recv { .. }),
    )?;
    if request.is_null() {
        return Err(err(MPI_ERR_ARG, "null request pointer"));
    }
    let datatype = crate::types::pin(datatype)?;
    let p = Persist {
        op,
        cnt,
        datatype,
        peer,
        tag,
        comm,
        pins: vec![datatype],
        own_comm: None,
        active: None,
    };
    let h = state::add_req(ReqEntry::Persistent(Box::new(p)));
    // SAFETY: non-null, writable (MPI contract).
    unsafe { out(request, h) }
}

macro_rules! send_init {
    ($name:ident, $pname:ident, $mode:expr) => {
        export!($name, $pname,
                (buf: *const c_void, cnt: c_int, datatype: Handle, dest: c_int, tag: c_int,
                 comm: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                init(Op::Send { buf, mode: $mode }, cnt.into(), datatype, dest, tag, comm, request)
            })
        });
    };
}

send_init!(MPI_Send_init, PMPI_Send_init, Mode::Standard);
send_init!(MPI_Ssend_init, PMPI_Ssend_init, Mode::Synchronous);
send_init!(MPI_Rsend_init, PMPI_Rsend_init, Mode::Standard);
send_init!(MPI_Bsend_init, PMPI_Bsend_init, Mode::Buffered);

export!(MPI_Recv_init, PMPI_Recv_init,
        (buf: *mut c_void, cnt: c_int, datatype: Handle, source: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Recv_init", comm, || {
        init(Op::Recv { buf }, cnt.into(), datatype, source, tag, comm, request)
    })
});

/// The communicator of request `h` (world's when it has none).
pub(crate) fn comm_of(h: Handle) -> Handle {
    state::with(|s| match s.reqs.get(&(h as usize)) {
        Some(ReqEntry::Persistent(p)) => p.comm,
        Some(ReqEntry::Live { comm, .. }) => *comm as Handle,
        _ => WORLD,
    })
}

/// Starts persistent request `h`; returns the error code of a collective's start, which
/// has raised it already (`MPI_SUCCESS` otherwise).
fn start(h: Handle) -> CResult<c_int> {
    let args = state::with(|s| match s.reqs.get(&(h as usize)) {
        Some(ReqEntry::Persistent(p)) if p.active.is_some() => Err(err(
            MPI_ERR_REQUEST,
            "the persistent request is already active",
        )),
        Some(ReqEntry::Persistent(p)) => {
            Ok((p.op.clone(), p.cnt, p.datatype, p.peer, p.tag, p.comm))
        }
        Some(_) => Err(err(
            MPI_ERR_REQUEST,
            format!("request {h:p} is not persistent"),
        )),
        None => Err(err(MPI_ERR_REQUEST, format!("invalid request {h:p}"))),
    })?;
    let (op, cnt, dt, peer, tag, comm) = args;
    // SAFETY: the buffers given to the _init call stay valid while the request is
    // active (MPI contract on persistent requests).
    let e = unsafe {
        match op {
            Op::Send {
                buf,
                mode: Mode::Standard,
            } => isend_entry(buf, cnt, dt, peer, tag, comm, false)?,
            Op::Send {
                buf,
                mode: Mode::Synchronous,
            } => isend_entry(buf, cnt, dt, peer, tag, comm, true)?,
            Op::Send {
                buf,
                mode: Mode::Buffered,
            } => crate::bsend::ibsend_entry(buf, cnt, dt, peer, tag, comm)?,
            Op::Recv { buf } => irecv_entry(buf, cnt, dt, peer, tag, comm)?,
            Op::Coll(run) => {
                let mut inner = REQUEST_NULL as Handle;
                let code = run(&mut inner);
                if code != MPI_SUCCESS {
                    return Ok(code);
                }
                take(inner)?
            }
        }
    };
    state::with(|s| {
        if let Some(ReqEntry::Persistent(p)) = s.reqs.get_mut(&(h as usize)) {
            p.active = Some(Box::new(e));
        }
    });
    Ok(MPI_SUCCESS)
}

/// The entry of request `h` a collective's start just made, out of the table (a request
/// complete at its start becomes a completed entry).
fn take(h: Handle) -> CResult<ReqEntry> {
    if crate::p2p::done_at_start(h) {
        let source = if h as usize == crate::p2p::DONE_PROC_NULL {
            MPI_PROC_NULL
        } else {
            MPI_ANY_SOURCE
        };
        return Ok(ReqEntry::Done(MPI_Status::empty(source)));
    }
    state::with(|s| s.reqs.remove(&(h as usize))).ok_or_else(|| {
        err(
            MPI_ERR_INTERN,
            format!("a collective started no request ({h:p})"),
        )
    })
}

export!(MPI_Start, PMPI_Start, (request: *mut Handle) -> c_int {
    let mut code = MPI_SUCCESS;
    let rc = crate::guard_on("MPI_Start", |c| {
        // SAFETY: readable handle (null checked).
        let h = unsafe { read_req(request)? };
        *c = comm_of(h);
        code = start(h)?;
        Ok(())
    });
    if rc != MPI_SUCCESS { rc } else { code }
});

export!(MPI_Startall, PMPI_Startall, (cnt: c_int, requests: *mut Handle) -> c_int {
    let mut code = MPI_SUCCESS;
    let rc = crate::guard_on("MPI_Startall", |c| {
        // SAFETY: the caller passes cnt readable handles.
        let hs = unsafe { crate::typed::<Handle>(requests.cast_const().cast(), count(cnt)?)? }.to_vec();
        for h in hs {
            *c = comm_of(h);
            code = start(h)?;
            if code != MPI_SUCCESS {
                break;
            }
        }
        Ok(())
    });
    if rc != MPI_SUCCESS { rc } else { code }
});
