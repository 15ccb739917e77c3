//! Point-to-point operations in the shape of rsmpi's `Source` and `Destination`.
//!
//! Contract: ranks are communicator ranks; `receive*` without a tag match any tag
//! (`MPI_ANY_TAG`), `send*` without a tag use tag 0. Every buffer is described by its
//! element [`TypeMap`]: contiguous types go straight from/to user memory, others are
//! packed and unpacked through the datatype's block list. Errors go to the fatal handler.
//! Matched probes, [`Message`] and [`ReceiveFuture`] are in [`matched`]; buffered sends
//! honour the capacity attached with `Universe::set_buffer_size` (the engine's `bsend`).

use crate::datatype::{Buffer, BufferMut, Equivalence, TypeMap};
use crate::datatype::{Described, ReadPtr, WritePtr};
use crate::engine::{RawStatus, RecvBuf, SendBuf, Waiting};
use crate::error::Error;
use crate::request::{Request, Scope};
use crate::runtime::{call, or_fatal};
pub use crate::status::Status;
use crate::topology::{AnyProcess, Process, SimpleCommunicator};
use crate::Tag;
use std::mem::MaybeUninit;

mod matched;
#[doc(hidden)]
pub use matched::set_c_reclaim;
pub use matched::{MatchedReceiveVec, Message, ReceiveFuture};

/// The point-to-point traits (rsmpi's `point_to_point::traits`).
pub mod traits {
    pub use super::{Destination, MatchedReceiveVec, Source};
}

fn send_buf<B: ?Sized + Buffer>(buf: &B) -> SendBuf {
    // SAFETY: Buffer guarantees its elements at its pointer.
    unsafe { send_raw(buf.buffer_ptr(), buf.elements(), buf.datatype()) }
}

/// `count` elements of `dt` at `ptr` as a send buffer.
///
/// # Safety
/// `ptr` holds `count` elements of `dt`, readable while the result is used.
unsafe fn send_raw(ptr: *const u8, count: usize, dt: TypeMap) -> SendBuf {
    if dt.is_contiguous() {
        SendBuf::Raw(ptr, count * dt.size())
    } else {
        let mut v = Vec::new();
        // SAFETY: the caller's promise: count * extent readable bytes.
        unsafe { dt.pack(ptr, count, &mut v) };
        SendBuf::Owned(v)
    }
}

fn recv_buf(ptr: *mut u8, count: usize, dt: TypeMap) -> RecvBuf {
    if dt.is_contiguous() {
        RecvBuf::Raw(ptr, count * dt.size())
    } else {
        RecvBuf::Unpack {
            tmp: vec![0; count * dt.size()],
            dt,
            dst: ptr,
        }
    }
}

/// Something messages can be received from: a [`Process`] or [`AnyProcess`].
pub trait Source {
    /// The communicator.
    fn comm(&self) -> &SimpleCommunicator;
    /// World rank of the source, `None` for any source.
    fn source_world(&self) -> Option<u32>;
    /// The source's rank in its communicator (`MPI_ANY_SOURCE`, -1, for any process).
    fn source_rank(&self) -> crate::Rank {
        self.source_world().map_or(-1, |w| self.comm().comm_rank(w))
    }

    /// Receives into `buf` a message with `tag`.
    fn receive_into_with_tag<Buf: ?Sized + BufferMut>(&self, buf: &mut Buf, tag: Tag) -> Status {
        receive_into_impl(self, buf, Some(tag))
    }
    /// Receives into `buf` a message with any tag.
    fn receive_into<Buf: ?Sized + BufferMut>(&self, buf: &mut Buf) -> Status {
        receive_into_impl(self, buf, None)
    }
    /// Receives one value with `tag`.
    fn receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Msg, Status) {
        receive_one(self, Some(tag))
    }
    /// Receives one value with any tag.
    fn receive<Msg: Equivalence>(&self) -> (Msg, Status) {
        receive_one(self, None)
    }
    /// Receives a message of any length with `tag` into a new vector.
    fn receive_vec_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Vec<Msg>, Status) {
        receive_vec_impl(self, Some(tag))
    }
    /// Receives a message of any length with any tag into a new vector.
    fn receive_vec<Msg: Equivalence>(&self) -> (Vec<Msg>, Status) {
        receive_vec_impl(self, None)
    }
    /// Waits until a message with `tag` can be received, without receiving it.
    fn probe_with_tag(&self, tag: Tag) -> Status {
        let (src, ctx) = (self.source_world(), self.comm().context());
        let raw = or_fatal("probe", crate::runtime::probe(src, Some(tag), ctx));
        self.comm().status(raw)
    }
    /// Waits until a message with any tag can be received, without receiving it.
    fn probe(&self) -> Status {
        let (src, ctx) = (self.source_world(), self.comm().context());
        let raw = or_fatal("probe", crate::runtime::probe(src, None, ctx));
        self.comm().status(raw)
    }
    /// Checks once whether a message with any tag can be received.
    fn immediate_probe(&self) -> Option<Status> {
        immediate_probe_impl(self, None)
    }
    /// Checks once whether a message with `tag` can be received.
    fn immediate_probe_with_tag(&self, tag: Tag) -> Option<Status> {
        immediate_probe_impl(self, Some(tag))
    }
    /// Waits for a message with `tag` and takes it out of matching (`MPI_Mprobe`): no
    /// other receive or probe can get it; the [`Message`] receives it.
    fn matched_probe_with_tag(&self, tag: Tag) -> (Message, Status) {
        matched::matched_probe(self, Some(tag))
    }
    /// Waits for a message with any tag and takes it out of matching (`MPI_Mprobe`).
    fn matched_probe(&self) -> (Message, Status) {
        matched::matched_probe(self, None)
    }
    /// Checks once for a message with `tag` and takes it out of matching if there is one
    /// (`MPI_Improbe`).
    fn immediate_matched_probe_with_tag(&self, tag: Tag) -> Option<(Message, Status)> {
        matched::immediate_matched_probe(self, Some(tag))
    }
    /// Checks once for a message with any tag and takes it out of matching if there is
    /// one (`MPI_Improbe`).
    fn immediate_matched_probe(&self) -> Option<(Message, Status)> {
        matched::immediate_matched_probe(self, None)
    }
    /// Starts receiving one `Msg` with `tag` into storage of its own (rsmpi's
    /// `immediate_receive_with_tag`).
    fn immediate_receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> ReceiveFuture<Msg> {
        matched::immediate_receive(self, Some(tag))
    }
    /// Starts receiving one `Msg` with any tag into storage of its own.
    fn immediate_receive<Msg: Equivalence>(&self) -> ReceiveFuture<Msg> {
        matched::immediate_receive(self, None)
    }
    /// Starts receiving into `buf` a message with `tag`.
    fn immediate_receive_into_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + BufferMut,
    {
        immediate_receive_impl(self, scope, buf, Some(tag))
    }
    /// Starts receiving into `buf` a message with any tag.
    fn immediate_receive_into<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + BufferMut,
    {
        immediate_receive_impl(self, scope, buf, None)
    }
}

fn immediate_probe_impl<S: Source + ?Sized>(s: &S, tag: Option<Tag>) -> Option<Status> {
    let (src, ctx) = (s.source_world(), s.comm().context());
    call("iprobe", |e| {
        e.progress()?;
        Ok(e.iprobe(src, tag, ctx))
    })
    .map(|raw| s.comm().status(raw))
}

fn receive_into_impl<S: Source + ?Sized, B: ?Sized + BufferMut>(
    s: &S,
    buf: &mut B,
    tag: Option<Tag>,
) -> Status {
    let rb = recv_buf(buf.buffer_mut_ptr(), buf.elements(), buf.datatype());
    let (src, ctx) = (s.source_world(), s.comm().context());
    let raw = or_fatal("receive", crate::runtime::recv(rb, src, tag, ctx));
    s.comm().status(raw)
}

fn immediate_receive_impl<'a, S, Sc, B>(
    s: &S,
    scope: Sc,
    buf: &'a mut B,
    tag: Option<Tag>,
) -> Request<'a, B, Sc>
where
    S: Source + ?Sized,
    Sc: Scope<'a>,
    B: ?Sized + BufferMut,
{
    // One raw pointer for the engine's writes and the request's later reads.
    let data: *mut B = buf;
    // SAFETY: `data` is the caller's buffer, borrowed for 'a by the request.
    let rb = unsafe {
        recv_buf(
            (*data).buffer_mut_ptr(),
            (*data).elements(),
            (*data).datatype(),
        )
    };
    let (src, ctx) = (s.source_world(), s.comm().context());
    let id = call("immediate_receive", |e| e.irecv(rb, src, tag, ctx));
    Request::new(id, scope, s.comm(), data)
}

fn receive_one<S: Source + ?Sized, M: Equivalence>(s: &S, tag: Option<Tag>) -> (M, Status) {
    let mut v = MaybeUninit::<M>::uninit();
    let dt = crate::datatype::type_map_of::<M>();
    let rb = recv_buf(v.as_mut_ptr() as *mut u8, 1, dt.clone());
    let (src, ctx) = (s.source_world(), s.comm().context());
    let raw = or_fatal(
        "receive",
        crate::runtime::recv(rb, src, tag, ctx).and_then(|st| {
            if st.bytes != dt.size() as u64 {
                return Err(Error::PartialElement {
                    bytes: st.bytes,
                    elem: dt.size(),
                });
            }
            Ok(st)
        }),
    );
    // SAFETY: exactly size() bytes were written and Equivalence makes any bytes valid.
    (unsafe { v.assume_init() }, s.comm().status(raw))
}

fn receive_vec_impl<S: Source + ?Sized, M: Equivalence>(
    s: &S,
    tag: Option<Tag>,
) -> (Vec<M>, Status) {
    let dt = crate::datatype::type_map_of::<M>();
    let (src, ctx) = (s.source_world(), s.comm().context());
    let elem = dt.size().max(1);
    // The message probed is received in the same engine access, so no other thread
    // takes it in between; the first message matching (src, tag) is the one a receive
    // for its exact source and tag matches: queues keep arrival order.
    let posted = crate::runtime::wait_for(Waiting::Recv { src, tag, ctx }, |e| {
        let st = e.iprobe(src, tag, ctx)?;
        if st.bytes % elem as u64 != 0 {
            return Some(Err(Error::PartialElement {
                bytes: st.bytes,
                elem,
            }));
        }
        let n = (st.bytes / elem as u64) as usize;
        let mut v: Vec<M> = Vec::with_capacity(n);
        let rb = recv_buf(v.as_mut_ptr() as *mut u8, n, dt.clone());
        Some(
            e.irecv(rb, Some(st.source), Some(st.tag), ctx)
                .map(|id| (v, id)),
        )
    });
    let (mut v, id) = or_fatal("receive_vec", posted);
    // Moving the vector moved no element: the receive writes into its allocation.
    let raw = or_fatal("receive_vec", crate::runtime::wait_request(id));
    // SAFETY: the receive wrote whole elements (the probe checked the length and the
    // truncation check the rest), and Equivalence makes any bytes valid.
    unsafe { v.set_len((raw.bytes / elem as u64) as usize) };
    (v, s.comm().status(raw))
}

/// Something messages can be sent to: a [`Process`].
pub trait Destination {
    /// The communicator.
    fn comm(&self) -> &SimpleCommunicator;
    /// World rank of the destination.
    fn destination_world(&self) -> u32;
    /// The destination's rank in its communicator.
    fn destination_rank(&self) -> crate::Rank {
        self.comm().comm_rank(self.destination_world())
    }

    /// Sends `buf` with `tag` (returns when the buffer may be reused).
    fn send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        let sb = send_buf(buf);
        let (dst, ctx) = (self.destination_world(), self.comm().context());
        or_fatal("send", crate::runtime::send(sb, dst, tag, ctx, false));
    }
    /// Sends `buf` with `tag` in synchronous mode: returns once the receiver has matched
    /// the message (MPI's `MPI_Ssend`).
    fn synchronous_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        let sb = send_buf(buf);
        let (dst, ctx) = (self.destination_world(), self.comm().context());
        or_fatal(
            "synchronous_send",
            crate::runtime::send(sb, dst, tag, ctx, true),
        );
    }
    /// Sends `buf` with tag 0 in synchronous mode.
    fn synchronous_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.synchronous_send_with_tag(buf, 0)
    }
    /// Starts a synchronous-mode send of `buf` with `tag`: the request completes once the
    /// receiver has matched the message (MPI's `MPI_Issend`).
    fn immediate_synchronous_send_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        let sb = send_buf(buf);
        let (dst, ctx) = (self.destination_world(), self.comm().context());
        let id = call("immediate_synchronous_send", |e| {
            e.isend_mode(sb, dst, tag, ctx, true)
        });
        Request::new(id, scope, self.comm(), buf)
    }
    /// Starts a synchronous-mode send of `buf` with tag 0.
    fn immediate_synchronous_send<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        self.immediate_synchronous_send_with_tag(scope, buf, 0)
    }
    /// Sends `buf` with tag 0.
    fn send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.send_with_tag(buf, 0)
    }
    /// Buffered-mode send (`MPI_Bsend`) of `buf` with `tag`: the message is copied and
    /// the call returns at once. It must fit in what is left of the buffer attached with
    /// `Universe::set_buffer_size` (its size plus `MPI_BSEND_OVERHEAD`, 512 bytes, per
    /// message in flight); otherwise the error handler reports `MPI_ERR_BUFFER`.
    fn buffered_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        let sb = send_buf(buf);
        let (dst, ctx) = (self.destination_world(), self.comm().context());
        call("buffered_send", |e| e.bsend(sb, dst, tag, ctx).map(|_| ()));
    }
    /// Buffered-mode send of `buf` with tag 0.
    fn buffered_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.buffered_send_with_tag(buf, 0)
    }
    /// Starts a buffered-mode send (`MPI_Ibsend`): the message is copied, so the request
    /// is complete at once (see [`Destination::buffered_send_with_tag`]).
    fn immediate_buffered_send_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        let sb = send_buf(buf);
        let (dst, ctx) = (self.destination_world(), self.comm().context());
        let raw = call("immediate_buffered_send", |e| e.bsend(sb, dst, tag, ctx));
        Request::complete(raw, scope, self.comm(), buf)
    }
    /// Starts a buffered-mode send with tag 0.
    fn immediate_buffered_send<'a, Sc, Buf>(&self, scope: Sc, buf: &'a Buf) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        self.immediate_buffered_send_with_tag(scope, buf, 0)
    }
    /// Ready-mode send (`MPI_Rsend`: the program promises the receive is posted). A
    /// standard send is a correct ready send, and phalanx's eager and rendezvous paths
    /// gain nothing from the promise.
    ///
    /// # Safety
    /// As in rsmpi: the matching receive must already be posted (MPI leaves a ready send
    /// without one undefined; phalanx delivers it anyway).
    unsafe fn ready_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        self.send_with_tag(buf, tag)
    }
    /// Ready-mode send with tag 0.
    ///
    /// # Safety
    /// See [`Destination::ready_send_with_tag`].
    unsafe fn ready_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.send_with_tag(buf, 0)
    }
    /// Starts a ready-mode send (`MPI_Irsend`; see [`Destination::ready_send_with_tag`]).
    ///
    /// # Safety
    /// See [`Destination::ready_send_with_tag`].
    unsafe fn immediate_ready_send_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        self.immediate_send_with_tag(scope, buf, tag)
    }
    /// Starts a ready-mode send with tag 0.
    ///
    /// # Safety
    /// See [`Destination::ready_send_with_tag`].
    unsafe fn immediate_ready_send<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        self.immediate_send_with_tag(scope, buf, 0)
    }
    /// Starts sending `buf` with `tag`.
    fn immediate_send_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        let sb = send_buf(buf);
        let len = sb.len() as u64;
        let (dst, ctx) = (self.destination_world(), self.comm().context());
        match call("immediate_send", |e| {
            Ok((e.start_send(sb, dst, tag, ctx, false)?, e.rank))
        }) {
            (Some(id), _) => Request::new(id, scope, self.comm(), buf),
            // Already in the peer's ring: complete, with no engine entry.
            (None, me) => Request::complete(
                RawStatus {
                    source: me,
                    tag,
                    bytes: len,
                    cancelled: false,
                },
                scope,
                self.comm(),
                buf,
            ),
        }
    }
    /// Starts sending `buf` with tag 0.
    fn immediate_send<'a, Sc, Buf>(&self, scope: Sc, buf: &'a Buf) -> Request<'a, Buf, Sc>
    where
        Sc: Scope<'a>,
        Buf: ?Sized + Buffer,
    {
        self.immediate_send_with_tag(scope, buf, 0)
    }
}

impl Source for Process<'_> {
    fn comm(&self) -> &SimpleCommunicator {
        self.comm
    }
    fn source_world(&self) -> Option<u32> {
        Some(self.comm.world_rank(self.rank))
    }
}

impl Source for AnyProcess<'_> {
    fn comm(&self) -> &SimpleCommunicator {
        self.comm
    }
    fn source_world(&self) -> Option<u32> {
        None
    }
}

impl Destination for Process<'_> {
    fn comm(&self) -> &SimpleCommunicator {
        self.comm
    }
    fn destination_world(&self) -> u32 {
        self.comm.world_rank(self.rank)
    }
}

/// Sends `msg` to `destination` with `sendtag` while receiving from `source` with
/// `receivetag` into `buf` (`MPI_Sendrecv`): the send is started, the receive completes,
/// then the send, so two ranks exchanging with each other never deadlock.
pub fn send_receive_into_with_tags<M, D, B, S>(
    msg: &M,
    destination: &D,
    sendtag: Tag,
    buf: &mut B,
    source: &S,
    receivetag: Tag,
) -> Status
where
    M: ?Sized + Buffer,
    D: Destination + ?Sized,
    B: ?Sized + BufferMut,
    S: Source + ?Sized,
{
    exchange(send_buf(msg), destination, sendtag, source, |s| {
        receive_into_impl(s, buf, Some(receivetag))
    })
}

/// [`send_receive_into_with_tags`] with send tag 0, receiving any tag.
pub fn send_receive_into<M, D, B, S>(msg: &M, destination: &D, buf: &mut B, source: &S) -> Status
where
    M: ?Sized + Buffer,
    D: Destination + ?Sized,
    B: ?Sized + BufferMut,
    S: Source + ?Sized,
{
    exchange(send_buf(msg), destination, 0, source, |s| {
        receive_into_impl(s, buf, None)
    })
}

/// Sends `msg` with `sendtag` and receives one `R` tagged `receivetag`.
pub fn send_receive_with_tags<M, D, R, S>(
    msg: &M,
    destination: &D,
    sendtag: Tag,
    source: &S,
    receivetag: Tag,
) -> (R, Status)
where
    M: Equivalence,
    D: Destination + ?Sized,
    R: Equivalence,
    S: Source + ?Sized,
{
    exchange(send_buf(msg), destination, sendtag, source, |s| {
        receive_one(s, Some(receivetag))
    })
}

/// Sends `msg` with tag 0 and receives one `R` with any tag.
pub fn send_receive<R, M, D, S>(msg: &M, destination: &D, source: &S) -> (R, Status)
where
    M: Equivalence,
    D: Destination + ?Sized,
    R: Equivalence,
    S: Source + ?Sized,
{
    exchange(send_buf(msg), destination, 0, source, |s| {
        receive_one(s, None)
    })
}

/// Sends the contents of `buf` with `sendtag` and replaces them with the message received
/// tagged `receivetag` (`MPI_Sendrecv_replace`): the outgoing contents are copied first.
pub fn send_receive_replace_into_with_tags<B, D, S>(
    buf: &mut B,
    destination: &D,
    sendtag: Tag,
    source: &S,
    receivetag: Tag,
) -> Status
where
    B: ?Sized + BufferMut,
    D: Destination + ?Sized,
    S: Source + ?Sized,
{
    let out = owned_copy(&mut *buf);
    exchange(out, destination, sendtag, source, |s| {
        receive_into_impl(s, buf, Some(receivetag))
    })
}

/// [`send_receive_replace_into_with_tags`] with send tag 0, receiving any tag.
pub fn send_receive_replace_into<B, D, S>(buf: &mut B, destination: &D, source: &S) -> Status
where
    B: ?Sized + BufferMut,
    D: Destination + ?Sized,
    S: Source + ?Sized,
{
    let out = owned_copy(&mut *buf);
    exchange(out, destination, 0, source, |s| {
        receive_into_impl(s, buf, None)
    })
}

/// The contents of `buf` as an owned (packed) send buffer.
fn owned_copy<B: ?Sized + BufferMut>(buf: &mut B) -> SendBuf {
    // SAFETY: BufferMut guarantees its elements at its pointer; they are copied at once.
    match unsafe { send_raw(buf.buffer_mut_ptr(), buf.elements(), buf.datatype()) } {
        SendBuf::Raw(p, n) => {
            // SAFETY: Buffer guarantees `n` readable bytes at `p` for a contiguous type.
            SendBuf::Owned(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
        }
        owned => owned,
    }
}

/// Starts sending `sb`, runs the receive, then completes the send.
fn exchange<D, S, T>(sb: SendBuf, d: &D, tag: Tag, s: &S, receive: impl FnOnce(&S) -> T) -> T
where
    D: Destination + ?Sized,
    S: Source + ?Sized,
{
    let (dst, ctx) = (d.destination_world(), d.comm().context());
    let id = call("send_receive", |e| e.start_send(sb, dst, tag, ctx, false));
    let r = receive(s);
    if let Some(id) = id {
        or_fatal("send_receive", crate::runtime::wait_request(id));
    }
    r
}
