//! Matched probes and receives into storage of the library's own: rsmpi's [`Message`],
//! [`MatchedReceiveVec`] and [`ReceiveFuture`].
//!
//! Contract: a matched probe takes the message out of matching in the engine (see
//! `engine::p2p::matched`): once `matched_probe` returned it, only its [`Message`] can
//! receive it, whatever other receives or probes the program (or another thread) makes.
//! A `Message` must be received; one dropped without being received (rsmpi panics
//! there) is received into a scratch buffer and thrown away, so its sender is not left
//! waiting. phalanx's [`Source`]s always name a process or any process, never the null
//! process, so [`Message::is_no_proc`] is always false here (the C ABI has
//! `MPI_MESSAGE_NO_PROC`). Once the C handle of a `Message` has been asked for
//! (`phalanx::raw::AsRaw`/`AsRawMut`), the C interface keeps a copy of it under that
//! handle: a C matched receive (`MPI_Mrecv`/`MPI_Imrecv`) takes the copy and writes
//! `MPI_MESSAGE_NULL` back into the message's handle; a receive in Rust takes the copy
//! back first (an error once C received it); dropping it unreceived throws the copy's
//! data away as above. A [`ReceiveFuture`] owns the value it receives into; dropping
//! it waits for the receive (the value's storage is freed only after).

use super::{recv_buf, Source};
use crate::datatype::{BufferMut, Equivalence};
use crate::datatype::{Described, WritePtr};
use crate::engine::RawStatus;
use crate::error::Error;
use crate::request::{Request, Scope, StaticScope};
use crate::runtime::{call, or_fatal};
use crate::status::Status;
use crate::topology::SimpleCommunicator;
use crate::Tag;
use std::cell::Cell;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// A message taken by a matched probe, waiting to be received (rsmpi's `Message`).
#[must_use = "a matched message must be received"]
pub struct Message {
    /// The engine's id of the message.
    id: u64,
    /// Its length in bytes.
    bytes: u64,
    /// The communicator it came on (for the status's source rank).
    comm: SimpleCommunicator,
    received: bool,
    /// Its C handle (null: none asked for), which a C matched receive through
    /// `AsRawMut` overwrites with `MPI_MESSAGE_NULL`.
    c_handle: Cell<*mut c_void>,
    /// The C handle given out (0: none): the C interface's copy is kept under it.
    c_issued: Cell<usize>,
}

/// Takes the C interface's copy of a message back by its handle (`None`: a C receive took
/// it); installed by the C interface when it gives out its first message handle.
static C_RECLAIM: OnceLock<fn(usize) -> Option<Message>> = OnceLock::new();

/// C interface support (`phalanx::raw`): installs the function that takes a message's
/// copy back from the C interface's table.
#[doc(hidden)]
pub fn set_c_reclaim(f: fn(usize) -> Option<Message>) {
    let _ = C_RECLAIM.set(f);
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("id", &self.id)
            .field("bytes", &self.bytes)
            .finish()
    }
}

pub(super) fn matched_probe<S: Source + ?Sized>(s: &S, tag: Option<Tag>) -> (Message, Status) {
    let (src, ctx) = (s.source_world(), s.comm().context());
    let (id, raw) = or_fatal("matched_probe", crate::runtime::mprobe(src, tag, ctx));
    message(s.comm(), id, raw)
}

pub(super) fn immediate_matched_probe<S: Source + ?Sized>(
    s: &S,
    tag: Option<Tag>,
) -> Option<(Message, Status)> {
    let (src, ctx) = (s.source_world(), s.comm().context());
    let (id, raw) = call("immediate_matched_probe", |e| e.improbe(src, tag, ctx))?;
    Some(message(s.comm(), id, raw))
}

fn message(comm: &SimpleCommunicator, id: u64, raw: RawStatus) -> (Message, Status) {
    let m = Message {
        id,
        bytes: raw.bytes,
        comm: comm.clone(),
        received: false,
        c_handle: Cell::new(std::ptr::null_mut()),
        c_issued: Cell::new(0),
    };
    (m, comm.status(raw))
}

/// C interface support (`phalanx::raw`, `MPI_Mrecv` on a Rust message's handle).
#[doc(hidden)]
impl Message {
    /// Where the message's C handle is kept (what `AsRawMut` gives).
    pub fn c_handle_slot(&self) -> *mut *mut c_void {
        self.c_handle.as_ptr()
    }
    /// A copy of the message for the C interface to keep, with the duty to receive it
    /// (`None` once a handle was given out).
    pub fn c_copy(&self) -> Option<Message> {
        (self.c_issued.get() == 0 && !self.received).then(|| Message {
            id: self.id,
            bytes: self.bytes,
            comm: self.comm.clone(),
            received: false,
            c_handle: Cell::new(std::ptr::null_mut()),
            c_issued: Cell::new(0),
        })
    }
    /// Records `h`, under which the C interface keeps the copy.
    pub fn c_issue(&self, h: *mut c_void) {
        self.c_handle.set(h);
        self.c_issued.set(h as usize);
    }
    /// The communicator the message came on.
    pub fn c_comm(&self) -> &SimpleCommunicator {
        &self.comm
    }
    /// Its length in bytes.
    pub fn c_bytes(&self) -> u64 {
        self.bytes
    }
    /// The C interface's copy, to receive instead of this message, when its handle was
    /// given out (module docs); the fatal handler when a C receive took it already.
    fn c_copy_back(&mut self, call: &str) -> Option<Message> {
        let h = self.c_issued.get();
        if h == 0 {
            return None;
        }
        self.received = true;
        match C_RECLAIM.get().and_then(|f| f(h)) {
            Some(m) => Some(m),
            None => crate::runtime::fatal(
                call,
                Error::InvalidArg("the message was received already through its C handle".into()),
            ),
        }
    }
}

impl Message {
    /// Whether the probe named the null process (never, on phalanx's sources: module
    /// docs).
    pub fn is_no_proc(&self) -> bool {
        false
    }

    /// Receives the message, which holds one `Msg`.
    pub fn matched_receive<Msg: Equivalence>(mut self) -> (Msg, Status) {
        if let Some(m) = self.c_copy_back("matched_receive") {
            return m.matched_receive();
        }
        let mut v = MaybeUninit::<Msg>::uninit();
        let dt = crate::datatype::type_map_of::<Msg>();
        let rb = recv_buf(v.as_mut_ptr() as *mut u8, 1, dt.clone());
        let id = self.id;
        self.received = true;
        let got = crate::runtime::mrecv(id, rb).and_then(|st| {
            if st.bytes != dt.size() as u64 {
                return Err(Error::PartialElement {
                    bytes: st.bytes,
                    elem: dt.size(),
                });
            }
            Ok(st)
        });
        let raw = or_fatal("matched_receive", got);
        // SAFETY: exactly size() bytes were written and Equivalence makes any bytes valid.
        (unsafe { v.assume_init() }, self.comm.status(raw))
    }

    /// Receives the message into `buf` (a message longer than `buf` is a truncation
    /// error, as for any receive).
    pub fn matched_receive_into<Buf: ?Sized + BufferMut>(mut self, buf: &mut Buf) -> Status {
        if let Some(m) = self.c_copy_back("matched_receive_into") {
            return m.matched_receive_into(buf);
        }
        let rb = recv_buf(buf.buffer_mut_ptr(), buf.elements(), buf.datatype());
        let id = self.id;
        self.received = true;
        let raw = or_fatal("matched_receive_into", crate::runtime::mrecv(id, rb));
        self.comm.status(raw)
    }

    /// Starts receiving the message into `buf` (`MPI_Imrecv`).
    pub fn immediate_matched_receive_into<'a, Sc, Buf>(
        mut self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + BufferMut + 'a,
    {
        if let Some(m) = self.c_copy_back("immediate_matched_receive_into") {
            return m.immediate_matched_receive_into(scope, buf);
        }
        // One raw pointer for the engine's writes and the request's later reads.
        let data: *mut Buf = buf;
        // SAFETY: `data` is the caller's buffer, borrowed for 'a by the request.
        let rb = unsafe {
            recv_buf(
                (*data).buffer_mut_ptr(),
                (*data).elements(),
                (*data).datatype(),
            )
        };
        let id = self.id;
        self.received = true;
        let rid = call("immediate_matched_receive_into", |e| e.imrecv(id, rb));
        Request::new(rid, scope, &self.comm, data)
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        if self.received || std::thread::panicking() {
            return;
        }
        if self.c_issued.get() != 0 {
            // The C interface's copy, if no C receive took it, is the one thrown away.
            if let Some(f) = C_RECLAIM.get() {
                drop(f(self.c_issued.get()));
            }
            return;
        }
        // Received and thrown away (module docs).
        let mut scratch = vec![0u8; self.bytes as usize];
        let rb = crate::engine::RecvBuf::Raw(scratch.as_mut_ptr(), scratch.len());
        let id = self.id;
        // Not the fatal handler: a message dropped after the universe (the C ABI's
        // table at thread exit) has nothing left to receive from.
        let _ = crate::runtime::mrecv(id, rb);
    }
}

/// Receiving a matched message of any length into a new vector (rsmpi's trait on
/// `(Message, Status)`).
pub trait MatchedReceiveVec {
    /// Receives the message, which holds whole `Msg`s, into a new vector.
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status);
}

impl MatchedReceiveVec for (Message, Status) {
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status) {
        let (mut m, st) = self;
        if let Some(c) = m.c_copy_back("matched_receive_vec") {
            return (c, st).matched_receive_vec();
        }
        let dt = crate::datatype::type_map_of::<Msg>();
        let elem = dt.size().max(1);
        let (id, bytes) = (m.id, m.bytes);
        m.received = true;
        let n = (bytes / elem as u64) as usize;
        let mut v: Vec<Msg> = Vec::with_capacity(n);
        let rb = recv_buf(v.as_mut_ptr() as *mut u8, n, dt);
        let got = if bytes % elem as u64 != 0 {
            // Received whole into a scratch buffer and reported: no partial element.
            let mut scratch = vec![0u8; bytes as usize];
            let rb = crate::engine::RecvBuf::Raw(scratch.as_mut_ptr(), scratch.len());
            crate::runtime::mrecv(id, rb).and(Err(Error::PartialElement { bytes, elem }))
        } else {
            crate::runtime::mrecv(id, rb)
        };
        let raw = or_fatal("matched_receive_vec", got);
        // SAFETY: the receive wrote exactly n whole elements (its length is the probed
        // one), and Equivalence makes any bytes valid.
        unsafe { v.set_len((raw.bytes / elem as u64) as usize) };
        (v, m.comm.status(raw))
    }
}

/// A value of type `T` being received by a nonblocking receive into storage of its own
/// (rsmpi's `ReceiveFuture`).
#[must_use = "a receive future must be completed with get or try"]
pub struct ReceiveFuture<T> {
    // Declared (so dropped) before `val`: a dropped future waits for its receive
    // before the storage goes.
    req: Request<'static, (), StaticScope>,
    val: Box<MaybeUninit<T>>,
}

pub(super) fn immediate_receive<S: Source + ?Sized, T: Equivalence>(
    s: &S,
    tag: Option<Tag>,
) -> ReceiveFuture<T> {
    let mut val = Box::new(MaybeUninit::<T>::uninit());
    let rb = recv_buf(
        val.as_mut_ptr() as *mut u8,
        1,
        crate::datatype::type_map_of::<T>(),
    );
    let (src, ctx) = (s.source_world(), s.comm().context());
    let id = call("immediate_receive", |e| e.irecv(rb, src, tag, ctx));
    // The request's 'static claim holds: the box it writes into lives in the future,
    // which waits for the request before freeing it.
    let req = Request::new(id, StaticScope, s.comm(), &());
    ReceiveFuture { req, val }
}

impl<T: Equivalence> ReceiveFuture<T> {
    fn value(val: &MaybeUninit<T>, st: Status) -> (T, Status) {
        let size = crate::datatype::type_map_of::<T>().size() as u64;
        if st.byte_count() != size {
            crate::runtime::fatal(
                "ReceiveFuture",
                Error::PartialElement {
                    bytes: st.byte_count(),
                    elem: size as usize,
                },
            );
        }
        // SAFETY: exactly size() bytes were written and Equivalence makes any bytes valid.
        (unsafe { val.assume_init_read() }, st)
    }

    /// Waits for the receive and returns the value.
    pub fn get(self) -> (T, Status) {
        let ReceiveFuture { req, val } = self;
        let st = req.wait();
        Self::value(&val, st)
    }

    /// Tests the receive once: the value, or the future back.
    pub fn r#try(self) -> Result<(T, Status), Self> {
        let ReceiveFuture { req, val } = self;
        match req.test() {
            Ok(st) => Ok(Self::value(&val, st)),
            Err(req) => Err(ReceiveFuture { req, val }),
        }
    }
}
