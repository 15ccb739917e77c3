//! Per-process MPI state: the universe, the communicator table and the request table.
//!
//! Contract: the tables are process-wide (`phalanx::capi_support::Shared`), reached under
//! the thread rule every C function enters first (`crate::entry`: only the thread that
//! called `MPI_Init` at `MPI_THREAD_FUNNELED`, one thread at a time under the process lock
//! at `SERIALIZED`/`MULTIPLE`). Communicator handles are `MPI_COMM_WORLD`, `MPI_COMM_SELF`, or numbers
//! from 0x10000 up; request handles are numbers from 0x100000 up; both are never reused
//! within a run. Borrows of the tables are never held across a blocking phalanx call.

use crate::consts::*;
use crate::types::Layout;
use crate::{err, CResult};
use phalanx::capi_support::RawComm;
use phalanx::capi_support::Shared;
use phalanx::request::Request;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::Communicator;
use phalanx::Universe;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_int;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};

/// `MPI_Init` has completed.
pub static INITIALIZED: AtomicBool = AtomicBool::new(false);
/// `MPI_Finalize` has completed.
pub static FINALIZED: AtomicBool = AtomicBool::new(false);

/// A communicator and its error handler.
pub struct CommEntry {
    /// The phalanx communicator (shared: every call takes it, one count up).
    pub comm: Rc<SimpleCommunicator>,
    /// Error handler handle value.
    pub errh: usize,
    /// What the engine's direct entry points need of `comm`.
    pub raw: RawComm,
    /// Its grid, if `MPI_Cart_create` or `MPI_Cart_sub` made it (`topo.rs`).
    pub cart: Option<phalanx::topology::CartesianCommunicator>,
    /// The intercommunicator, when it is one (`inter.rs`); `comm` is then its
    /// point-to-point side (ranks name the remote group).
    pub inter: Option<phalanx::topology::InterCommunicator>,
}

impl CommEntry {
    /// The entry of `comm` with error handler `errh`.
    pub fn new(comm: SimpleCommunicator, errh: usize) -> CommEntry {
        let raw = RawComm::of(&comm);
        CommEntry {
            comm: Rc::new(comm),
            errh,
            raw,
            cart: None,
            inter: None,
        }
    }
}

/// A running phalanx request.
pub enum LiveReq {
    /// A transfer.
    Bytes(Request<'static, [u8]>),
    /// A barrier (`MPI_Ibarrier`).
    Barrier(Request<'static, ()>),
    /// A nonblocking collective (or several requests completing together); its status
    /// is empty.
    Coll(Box<dyn AnyRequest>),
    /// `MPI_Isendrecv(_replace)`: the receive's and the send's entries (each replaced by
    /// a completed one when it completes), then the copy a replacing send sends from
    /// (dropped after both); the status is the receive's.
    Pair(Box<(ReqEntry, ReqEntry)>, Vec<u8>),
}

/// A request of any buffer type whose status does not matter (collectives).
pub trait AnyRequest {
    /// Waits for completion.
    fn wait_box(self: Box<Self>);
    /// Tests once: `Ok` when complete, else the request back.
    fn test_box(self: Box<Self>) -> Result<(), Box<dyn AnyRequest>>;
}

impl<B: ?Sized + 'static> AnyRequest for Request<'static, B> {
    fn wait_box(self: Box<Self>) {
        (*self).wait();
    }
    fn test_box(self: Box<Self>) -> Result<(), Box<dyn AnyRequest>> {
        match (*self).test() {
            Ok(_) => Ok(()),
            Err(r) => Err(Box::new(r)),
        }
    }
}

/// Several requests completing together (the v-collectives' point-to-point pieces).
impl AnyRequest for Vec<Box<dyn AnyRequest>> {
    fn wait_box(self: Box<Self>) {
        for r in *self {
            r.wait_box();
        }
    }
    fn test_box(self: Box<Self>) -> Result<(), Box<dyn AnyRequest>> {
        let left: Vec<Box<dyn AnyRequest>> = self
            .into_iter()
            .filter_map(|r| r.test_box().err())
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(Box::new(left))
        }
    }
}

impl LiveReq {
    /// Waits for completion.
    pub fn wait(self) -> MPI_Status {
        match self {
            LiveReq::Bytes(r) => crate::p2p::c_status(r.wait()),
            LiveReq::Barrier(r) => {
                r.wait();
                MPI_Status::empty(MPI_ANY_SOURCE)
            }
            LiveReq::Coll(r) => {
                r.wait_box();
                MPI_Status::empty(MPI_ANY_SOURCE)
            }
            pair @ LiveReq::Pair(..) => pair.try_wait().unwrap_or_else(|e| failed(&e)),
        }
    }

    /// Waits for completion; a point-to-point error the core finds in the transfer (a
    /// truncated receive) is returned as its MPI class instead of ending the job, so
    /// `MPI_ERRORS_RETURN` applies to it.
    pub fn try_wait(self) -> CResult<MPI_Status> {
        match self {
            LiveReq::Bytes(r) => r
                .try_wait()
                .map(crate::p2p::c_status)
                .map_err(|e| err(e.class() as c_int, e.to_string())),
            LiveReq::Pair(p, keep) => {
                let (recv, send) = *p;
                let st = crate::p2p::complete_entry(recv, true)?.unwrap_or_default();
                let _sent = crate::p2p::complete_entry(send, true)?;
                drop(keep);
                Ok(st)
            }
            other => Ok(other.wait()),
        }
    }

    /// Tests once, like [`try_wait`](Self::try_wait) for errors.
    pub fn try_test(self) -> CResult<Result<MPI_Status, Self>> {
        match self {
            LiveReq::Bytes(r) => match r.try_test() {
                Ok(Ok(st)) => Ok(Ok(crate::p2p::c_status(st))),
                Ok(Err(r)) => Ok(Err(LiveReq::Bytes(r))),
                Err(e) => Err(err(e.class() as c_int, e.to_string())),
            },
            LiveReq::Pair(p, keep) => {
                let step = |e| -> CResult<ReqEntry> {
                    Ok(crate::p2p::complete_entry(e, false)?.map_or_else(|e| e, ReqEntry::Done))
                };
                let (recv, send) = *p;
                let (recv, send) = (step(recv)?, step(send)?);
                match (&recv, &send) {
                    (ReqEntry::Done(st), ReqEntry::Done(_)) => Ok(Ok(*st)),
                    _ => Ok(Err(LiveReq::Pair(Box::new((recv, send)), keep))),
                }
            }
            other => Ok(other.test()),
        }
    }

    /// Tests once: the status, or the request back.
    pub fn test(self) -> Result<MPI_Status, Self> {
        match self {
            LiveReq::Bytes(r) => r.test().map(crate::p2p::c_status).map_err(LiveReq::Bytes),
            LiveReq::Barrier(r) => r
                .test()
                .map(|_| MPI_Status::empty(MPI_ANY_SOURCE))
                .map_err(LiveReq::Barrier),
            LiveReq::Coll(r) => r
                .test_box()
                .map(|_| MPI_Status::empty(MPI_ANY_SOURCE))
                .map_err(LiveReq::Coll),
            pair @ LiveReq::Pair(..) => match pair.try_test() {
                Ok(r) => r,
                Err(e) => Ok(failed(&e)),
            },
        }
    }
}

/// The status of a request that failed with `e` where no error can be returned.
fn failed(e: &crate::CErr) -> MPI_Status {
    let mut st = MPI_Status::empty(MPI_ANY_SOURCE);
    st.MPI_ERROR = e.class;
    st
}

/// Work done at completion with the staged temporaries (in the order they were held).
pub type Finish = Box<dyn FnOnce(&[&[u8]], &MPI_Status) -> CResult>;

/// Heap temporaries a nonblocking transfer runs on (packed send data, receive landing
/// areas, copies for `MPI_IN_PLACE`) and the work to do with them at completion
/// (unpacking, folding). Freed when dropped; it is declared after the request in
/// [`ReqEntry::Live`], so the request (which waits when dropped) is gone before the
/// memory is.
#[derive(Default)]
pub struct Staged {
    bufs: Vec<*mut [u8]>,
    then: Vec<Finish>,
    /// Frees typed temporaries ([`Staged::keep`]).
    frees: Vec<Box<dyn FnOnce()>>,
}

impl Staged {
    /// Moves `data` to the heap; returns the staging and a `'static` view of it.
    ///
    /// The view must not be used after the `Staged` is dropped (the request holding it
    /// is dropped first, see above). `unpack`: user buffer, layout and element count to
    /// unpack the received bytes to at completion (receives).
    pub fn new(
        data: Vec<u8>,
        unpack: Option<(*mut std::ffi::c_void, Rc<Layout>, usize)>,
    ) -> (Staged, &'static mut [u8]) {
        let mut s = Staged::default();
        let view = s.hold(data);
        if let Some((dst, l, n)) = unpack {
            s.then(Box::new(move |b, st| {
                let k = (st.bytes() as usize).min(b[0].len());
                // SAFETY: the user buffer stays valid until completion (MPI nonblocking
                // contract), which is now; it holds n elements of l.
                unsafe { crate::types::unpack(&l, &b[0][..k], dst, n) }
            }));
        }
        (s, view)
    }

    /// Moves `data` to the heap as temporary number `self.len()`; returns a `'static`
    /// view for the request (same rule as [`Staged::new`]).
    pub fn hold(&mut self, data: Vec<u8>) -> &'static mut [u8] {
        let buf = Box::into_raw(data.into_boxed_slice());
        self.bufs.push(buf);
        // SAFETY: freshly leaked box: valid and unaliased until `Drop` frees it; the
        // caller gives the view only to the request dropped before this `Staged`.
        unsafe { &mut *buf }
    }

    /// Moves typed `data` to the heap (not counted by [`Staged::len`], not seen by the
    /// completion work); returns a `'static` view for the request (same rule as
    /// [`Staged::new`]).
    pub fn keep<T: 'static>(&mut self, data: Vec<T>) -> &'static mut [T] {
        let buf = Box::into_raw(data.into_boxed_slice());
        // SAFETY: `buf` came from Box::into_raw just above and is freed once, here, when
        // the `Staged` drops (after the request using the view).
        self.frees
            .push(Box::new(move || drop(unsafe { Box::from_raw(buf) })));
        // SAFETY: freshly leaked box, valid and unaliased until freed.
        unsafe { &mut *buf }
    }

    /// Temporaries held so far.
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    /// Whether nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty() && self.then.is_empty() && self.frees.is_empty()
    }

    /// Adds work to run at completion (in order of addition).
    pub fn then(&mut self, f: Finish) {
        self.then.push(f);
    }

    /// After the request completed with `st` (and was dropped): runs the completion work.
    pub fn finish(mut self, st: &MPI_Status) -> CResult {
        // SAFETY: the request is complete and dropped, so no box is borrowed mutably.
        let views: Vec<&[u8]> = self.bufs.iter().map(|&b| unsafe { &*b }).collect();
        for f in std::mem::take(&mut self.then) {
            f(&views, st)?;
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        for &b in &self.bufs {
            // SAFETY: `b` came from Box::into_raw in `hold` and is freed only here; the
            // request using the view has been dropped (field order / completion).
            drop(unsafe { Box::from_raw(b) });
        }
        for f in std::mem::take(&mut self.frees) {
            f();
        }
    }
}

/// A request: running, already complete (e.g. to `MPI_PROC_NULL`), or persistent.
pub enum ReqEntry {
    /// In flight; the buffer is `'static` by the MPI contract (see [`crate::p2p`]).
    Live {
        /// The phalanx request (dropped before `staged`: field order).
        req: LiveReq,
        /// Communicator handle whose error handler applies.
        comm: usize,
        /// Temporary of a derived-datatype transfer.
        staged: Option<Staged>,
    },
    /// Completed at start.
    Done(MPI_Status),
    /// A persistent request (`MPI_Send_init`, `MPI_Recv_init`, ...), active or not.
    Persistent(Box<crate::persist::Persist>),
    /// A generalized request (`MPI_Grequest_start`, [`crate::grequest`]).
    Grequest(Box<crate::grequest::Greq>),
}

/// Hasher of handle keys: one multiply (Fibonacci hashing) instead of SipHash, which
/// cost about 600 instructions per message across the table lookups of a small send or
/// receive. Handles are chosen by phalanx, not by an adversary, so no DoS resistance is
/// needed.
#[derive(Default, Clone, Copy)]
pub struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A table keyed by handle.
pub type HandleMap<V> = HashMap<usize, V, BuildHasherDefault<HandleHasher>>;

/// A user reduction function (`MPI_User_function`).
pub type UserFn =
    unsafe extern "C" fn(*mut std::ffi::c_void, *mut std::ffi::c_void, *mut c_int, *mut Handle);

/// A large-count user reduction function (`MPI_User_function_c`: an `MPI_Count` length).
pub type UserFnC = unsafe extern "C" fn(
    *mut std::ffi::c_void,
    *mut std::ffi::c_void,
    *mut crate::Count,
    *mut Handle,
);

/// The function of a user operation: from `MPI_Op_create` or `MPI_Op_create_c`.
#[derive(Clone, Copy)]
pub enum UserOp {
    /// `MPI_User_function` (`int` length).
    Int(UserFn),
    /// `MPI_User_function_c` (`MPI_Count` length).
    Big(UserFnC),
}

/// Everything `MPI_Init` creates.
#[derive(Default)]
pub struct State {
    /// The universe; dropping it finalizes.
    pub universe: Option<Universe>,
    /// Live communicators.
    pub comms: HandleMap<CommEntry>,
    /// `MPI_COMM_WORLD`'s communicator, as in `comms` (kept by [`refresh_world`]): the
    /// collectives' path takes it without a table lookup.
    world: Option<Rc<SimpleCommunicator>>,
    /// Live requests.
    pub reqs: HandleMap<ReqEntry>,
    /// Requests freed by `MPI_Request_free` while in flight (`MPI_Finalize` waits).
    pub freed: Vec<ReqEntry>,
    /// Derived datatypes.
    pub types: HandleMap<crate::types::TypeEntry>,
    /// User operations (function, commutative).
    pub ops: HandleMap<(UserOp, bool)>,
    /// Buffered-mode sends.
    pub bsend: crate::bsend::Bsend,
    next_comm: usize,
    next_req: usize,
    next_type: usize,
    next_op: usize,
}

impl State {
    /// Registers an uncommitted derived datatype; returns its handle.
    pub fn add_type(&mut self, l: Layout) -> Handle {
        let h = 0x1000000 + self.next_type;
        self.next_type += 1;
        let e = crate::types::TypeEntry {
            layout: Rc::new(l),
            committed: false,
            name: String::new(),
            pinned: false,
        };
        self.types.insert(h, e);
        h as Handle
    }

    /// Registers a user operation; returns its handle.
    pub fn add_op(&mut self, f: UserOp, commute: bool) -> Handle {
        let h = 0x2000000 + self.next_op;
        self.next_op += 1;
        self.ops.insert(h, (f, commute));
        h as Handle
    }
}

impl Drop for State {
    /// Runs when the thread's locals are destroyed, which glibc's `exit()` does for the
    /// exiting thread: at a fatal error, `MPI_Abort`, or a program returning without
    /// `MPI_Finalize`. Finalizing or waiting for requests there could hang the exit, so
    /// the universe and requests are forgotten (the process is ending anyway) and the
    /// launcher sees a rank that exited without completing Finalize.
    fn drop(&mut self) {
        std::mem::forget(self.universe.take());
        std::mem::forget(std::mem::take(&mut self.reqs));
        std::mem::forget(std::mem::take(&mut self.freed));
        std::mem::forget(self.bsend.take_pending());
    }
}

static STATE: Shared<RefCell<State>> = Shared::new(|| RefCell::new(State::default()));

/// Runs `f` on the state.
pub fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

fn not_initialized() -> crate::CErr {
    err(
        MPI_ERR_OTHER,
        "MPI is not initialized (or already finalized)",
    )
}

/// Joins a universe the Rust API initialized on this thread (a Rust program calling
/// the C functions through `phalanx::ffi`): `MPI_COMM_WORLD` and `MPI_COMM_SELF` are
/// made then, without messages; finalizing stays with the Rust side. Nothing when
/// `MPI_Init` ran or nothing is initialized.
#[inline]
pub fn attach() {
    // Two atomic loads on the way of every table lookup; the state only when neither
    // `MPI_Init` nor an earlier attach ran.
    if INITIALIZED.load(Ordering::Relaxed) || FINALIZED.load(Ordering::SeqCst) {
        return;
    }
    attach_now();
}

/// [`attach`] past its check (out of line: the calls' paths keep only the check).
#[inline(never)]
fn attach_now() {
    if with(|s| s.universe.is_some()) {
        return;
    }
    let Some(u) = phalanx::Universe::attach() else {
        return;
    };
    let world = u.world();
    let me = SimpleCommunicator::self_comm();
    with(|s| {
        s.universe = Some(u);
        s.comms
            .insert(COMM_WORLD, CommEntry::new(world, ERRORS_ARE_FATAL));
        s.comms
            .insert(COMM_SELF, CommEntry::new(me, ERRORS_ARE_FATAL));
    });
    refresh_world();
    set_initialized();
}

/// The handle of communicator `c` (the Rust API's, for `AsRaw`): `MPI_COMM_WORLD` for
/// the world, the handle already given for the same communicator, or a new one.
pub fn handle_of(c: &SimpleCommunicator) -> Handle {
    attach();
    match known_handle(&RawComm::of(c), false) {
        Some(h) => h,
        None => add_comm(c.clone(), ERRORS_ARE_FATAL),
    }
}

/// The lowest handle already given for the communicator with parts `raw` (an
/// intercommunicator's point-to-point side when `inter`), if any.
pub fn known_handle(raw: &RawComm, inter: bool) -> Option<Handle> {
    with(|s| {
        s.comms
            .iter()
            .filter(|(_, e)| e.raw == *raw && e.inter.is_some() == inter)
            .map(|(&h, _)| h)
            .min()
            .map(|h| h as Handle)
    })
}

/// The communicator behind handle `h`.
#[inline]
pub fn comm(h: Handle) -> CResult<Rc<SimpleCommunicator>> {
    attach();
    with(|s| {
        if h as usize == COMM_WORLD && s.universe.is_some() {
            if let Some(w) = &s.world {
                return Ok(w.clone());
            }
        }
        comm_in_table(s, h)
    })
}

/// [`comm`] of a handle other than the world's (out of line).
#[inline(never)]
fn comm_in_table(s: &State, h: Handle) -> CResult<Rc<SimpleCommunicator>> {
    if s.universe.is_none() {
        return Err(not_initialized());
    }
    s.comms
        .get(&(h as usize))
        .map(|e| e.comm.clone())
        .ok_or_else(|| err(MPI_ERR_COMM, format!("invalid communicator {h:p}")))
}

/// `MPI_COMM_WORLD`'s size (0: not initialized), context and error handler, for the
/// small-message path without a table lookup. Written by the thread that initialized
/// (at `MPI_Init`, `MPI_Comm_set_errhandler` on the world, `MPI_Finalize`); a call from
/// another thread still fails in the engine, which is per thread.
static WORLD_SIZE: AtomicI32 = AtomicI32::new(0);
static WORLD_CTX: AtomicU32 = AtomicU32::new(0);
static WORLD_ERRH: AtomicUsize = AtomicUsize::new(ERRORS_ARE_FATAL);
static WORLD_RANK: AtomicI32 = AtomicI32::new(0);

/// This rank and the size of `MPI_COMM_WORLD` without a table lookup (`None` before
/// `MPI_Init` and after `MPI_Finalize`).
#[inline]
pub fn world_rank_size() -> Option<(c_int, c_int)> {
    let size = WORLD_SIZE.load(Ordering::Relaxed);
    (size > 0).then(|| (WORLD_RANK.load(Ordering::Relaxed), size))
}

/// Refreshes the copy of `MPI_COMM_WORLD`'s entry (after it changed or went away).
pub fn refresh_world() {
    let w = with(|s| {
        let e = s.comms.get(&COMM_WORLD);
        let parts = e.map(|e| {
            (
                e.raw.size(),
                e.raw.ctx(),
                e.errh,
                e.raw.is_identity(),
                e.comm.rank(),
            )
        });
        s.world = e.map(|e| e.comm.clone());
        parts
    });
    match w {
        Some((size, ctx, errh, true, rank)) => {
            WORLD_RANK.store(rank, Ordering::Relaxed);
            WORLD_CTX.store(ctx, Ordering::Relaxed);
            WORLD_ERRH.store(errh, Ordering::Relaxed);
            WORLD_SIZE.store(size, Ordering::Relaxed);
        }
        _ => WORLD_SIZE.store(0, Ordering::Relaxed),
    }
}

/// The world's (context, size, error handler) when `h` is `MPI_COMM_WORLD` and the
/// world is cached (three relaxed loads, no table).
#[inline(always)]
pub fn world_parts(h: Handle) -> Option<(u32, i32, usize)> {
    if h as usize != COMM_WORLD {
        return None;
    }
    let size = WORLD_SIZE.load(Ordering::Relaxed);
    (size > 0).then(|| {
        (
            WORLD_CTX.load(Ordering::Relaxed),
            size,
            WORLD_ERRH.load(Ordering::Relaxed),
        )
    })
}

/// The engine's view of communicator `h` and its error handler (one table lookup, no
/// communicator clone: the small-message path).
#[inline]
pub fn raw_comm(h: Handle) -> CResult<(RawComm, usize)> {
    match world_parts(h) {
        Some((ctx, size, errh)) => Ok((RawComm::identity(ctx, size), errh)),
        None => raw_comm_table(h),
    }
}

/// [`raw_comm`] of a communicator other than the world (out of line).
#[inline(never)]
fn raw_comm_table(h: Handle) -> CResult<(RawComm, usize)> {
    attach();
    with(|s| match s.comms.get(&(h as usize)) {
        Some(e) => Ok((e.raw.clone(), e.errh)),
        None if s.universe.is_none() => Err(not_initialized()),
        None => Err(err(MPI_ERR_COMM, format!("invalid communicator {h:p}"))),
    })
}

/// Registers a new communicator with error handler `errh`; returns its handle.
pub fn add_comm(comm: SimpleCommunicator, errh: usize) -> Handle {
    with(|s| {
        let h = 0x10000 + s.next_comm;
        s.next_comm += 1;
        s.comms.insert(h, CommEntry::new(comm, errh));
        h as Handle
    })
}

/// Registers a request on communicator `comm`; returns its handle.
pub fn add_req(e: ReqEntry) -> Handle {
    with(|s| {
        let h = 0x100000 + s.next_req;
        s.next_req += 1;
        s.reqs.insert(h, e);
        h as Handle
    })
}

/// The error handler of `h` (world's if `h` is not a live communicator; fatal before
/// `MPI_Init`).
pub fn errhandler(h: Handle) -> usize {
    STATE.with(|s| {
        let Ok(s) = s.try_borrow() else {
            return ERRORS_ARE_FATAL;
        };
        s.comms
            .get(&(h as usize))
            .or_else(|| s.comms.get(&COMM_WORLD))
            .map_or(ERRORS_ARE_FATAL, |e| e.errh)
    })
}

/// Whether `h` is a live communicator (false while the state is in use).
pub fn is_live_comm(h: Handle) -> bool {
    STATE.with(|s| {
        s.try_borrow()
            .is_ok_and(|s| s.comms.contains_key(&(h as usize)))
    })
}

/// This process's rank in the world, if initialized.
pub fn world_rank() -> Option<c_int> {
    STATE.with(|s| {
        let s = s.try_borrow().ok()?;
        s.comms.get(&COMM_WORLD).map(|e| e.comm.rank())
    })
}

/// Marks initialization done.
pub fn set_initialized() {
    INITIALIZED.store(true, Ordering::SeqCst);
}

/// Whether `MPI_Init` completed / `MPI_Finalize` completed.
pub fn flags() -> (bool, bool) {
    (
        INITIALIZED.load(Ordering::SeqCst),
        FINALIZED.load(Ordering::SeqCst),
    )
}
