//! Nonblocking requests and the scopes that keep their buffers borrowed.
//!
//! Contract: the engine's requests are `'static` and hold raw pointers; a [`Request`]
//! borrows its buffer for `'a`, and its [`Scope`] guarantees that no request outlives the
//! borrow: [`scope`] waits at its end for every request registered with it that was not
//! completed (for example one that was leaked with `mem::forget`), also when the closure
//! unwinds. Dropping an incomplete request waits for it; if that happens while a panic
//! unwinds, the rank ends (exit code 101) rather than free buffers the network may still
//! write into or hang a failing job.
//!
//! A request keeps a pointer to its buffer (`&'a D` once it completed: rsmpi's
//! [`Request::wait_for_data`], and what a [`RequestCollection`] hands back). Cancelling
//! ([`Request::cancel`], [`CancelGuard`]) really cancels a receive that has not matched a
//! message: the engine takes it out of its posted queue, and its status says
//! [`Status::is_cancelled`]; a send or a matched receive completes normally (MPI allows
//! a cancel to fail). Multiple completion ([`multiple_scope`], [`RequestCollection`])
//! sleeps in the engine's wait like every other wait.

use crate::engine::requests::ReqId;
use crate::runtime::call;
use crate::status::Status;
use std::cell::RefCell;
use std::marker::PhantomData;

mod collection;
pub use collection::{multiple_scope, RequestCollection};

/// Something that keeps request buffers alive.
///
/// # Safety
/// Implementors must make sure every registered request completes before the borrowed
/// buffers of lifetime `'a` are released.
pub unsafe trait Scope<'a> {
    /// Registers a request.
    fn register(&self, id: ReqId);
    /// Unregisters a completed request.
    fn unregister(&self, id: ReqId);
}

/// The scope of requests on `'static` buffers.
#[derive(Debug, Clone, Copy)]
pub struct StaticScope;

// SAFETY: buffers of a static scope are 'static, so they outlive every request.
unsafe impl Scope<'static> for StaticScope {
    fn register(&self, _: ReqId) {}
    fn unregister(&self, _: ReqId) {}
}

/// A scope of local lifetime `'a`; see [`scope`].
pub struct LocalScope<'a> {
    /// Requests in flight, in the order they started.
    ids: RefCell<std::collections::VecDeque<ReqId>>,
    _invariant: PhantomData<std::cell::Cell<&'a ()>>,
}

// SAFETY: `scope` waits for every request still registered before returning, and the
// buffers are borrowed for 'a which spans the whole closure.
unsafe impl<'a> Scope<'a> for &LocalScope<'a> {
    fn register(&self, id: ReqId) {
        self.ids.borrow_mut().push_back(id);
    }
    fn unregister(&self, id: ReqId) {
        // Requests usually complete in the order they started: the oldest is at the
        // front, so completing a window in order is O(1) per request (the order is kept,
        // which a swap-remove would scramble).
        let mut ids = self.ids.borrow_mut();
        if ids.front() == Some(&id) {
            ids.pop_front();
        } else if let Some(i) = ids.iter().position(|&x| x == id) {
            ids.remove(i);
        }
    }
}

/// Runs `f` with a local scope; every request started in it has completed when this
/// returns.
pub fn scope<'a, F, R>(f: F) -> R
where
    F: FnOnce(&LocalScope<'a>) -> R,
{
    let s = LocalScope {
        ids: RefCell::new(std::collections::VecDeque::new()),
        _invariant: PhantomData,
    };
    // Runs also when `f` unwinds, so no request outlives the buffers it points into.
    let guard = ScopeGuard(&s);
    let r = f(guard.0);
    drop(guard);
    r
}

struct ScopeGuard<'s, 'a>(&'s LocalScope<'a>);

impl Drop for ScopeGuard<'_, '_> {
    fn drop(&mut self) {
        let left: Vec<ReqId> = self.0.ids.borrow_mut().drain(..).collect();
        if left.is_empty() {
            return;
        }
        if std::thread::panicking() {
            // The buffers are about to be released while the network may still write
            // into them, and waiting could hang a failing rank: end the process (the
            // launcher ends the job and names the rank).
            dying();
        }
        for id in left {
            let _ = crate::runtime::wait_request(id);
        }
    }
}

/// Ends a rank that unwinds with requests in flight (exit code of a Rust panic).
fn dying() -> ! {
    eprintln!("phalanx: a panic unwound through requests in flight; ending the rank");
    crate::runtime::end_job(101, "a panic unwound through requests in flight")
}

/// What a request needs of its communicator: the world rank of each member (`None`:
/// its ranks are world ranks), to translate the status's source.
pub(crate) trait Members {
    fn members(&self) -> Option<&std::sync::Arc<Vec<u32>>>;
}

/// A nonblocking operation on a buffer borrowed for `'a`.
#[must_use = "a request must be waited for or tested to completion"]
pub struct Request<'a, Buf: ?Sized, S: Scope<'a> = StaticScope> {
    id: ReqId,
    /// World rank of each member of the communicator (`None`: its ranks are world
    /// ranks), to translate the status's source.
    members: Option<std::sync::Arc<Vec<u32>>>,
    /// The status of a request that completed when it started (no engine entry).
    early: Option<crate::engine::RawStatus>,
    scope: S,
    done: bool,
    /// The buffer, borrowed for `'a` (for a receive, the engine writes into it until the
    /// request completes; it is read through this pointer only after that).
    data: *const Buf,
    _buf: PhantomData<&'a Buf>,
}

impl<'a, Buf: ?Sized, S: Scope<'a>> Request<'a, Buf, S> {
    /// Request `id` of the engine on buffer `data` (borrowed for `'a` by the caller).
    pub(crate) fn new(id: ReqId, scope: S, comm: &impl Members, data: *const Buf) -> Self {
        scope.register(id);
        Request {
            id,
            members: comm.members().cloned(),
            early: None,
            scope,
            done: false,
            data,
            _buf: PhantomData,
        }
    }

    /// A request that completed when it started, with status `raw`: nothing to wait
    /// for, nothing registered.
    pub(crate) fn complete(
        raw: crate::engine::RawStatus,
        scope: S,
        comm: &impl Members,
        data: *const Buf,
    ) -> Self {
        Request {
            id: 0,
            members: comm.members().cloned(),
            early: Some(raw),
            scope,
            done: false,
            data,
            _buf: PhantomData,
        }
    }

    /// The engine request behind this request; `None` when it completed as it started.
    /// For the C interface (`phalanx::raw`); not a stable API.
    #[doc(hidden)]
    pub fn c_engine_id(&self) -> Option<ReqId> {
        (!self.done && self.early.is_none()).then_some(self.id)
    }

    /// Gives the request up to the C interface (`phalanx::raw`'s `into_raw`),
    /// unregistered from its scope (which no longer waits for it): `Ok` the engine
    /// request, `Err` the status of a request that completed as it started; and the
    /// world rank of each member of its communicator (`None`: world ranks), which its
    /// status's source needs. Not a stable API.
    #[doc(hidden)]
    #[allow(clippy::type_complexity)]
    pub fn c_into_raw(
        mut self,
    ) -> (
        Result<ReqId, Status>,
        Option<std::sync::Arc<Vec<u32>>>,
        &'a Buf,
        S,
    ) {
        self.done = true;
        let r = match self.early.take() {
            Some(raw) => Err(self.status(raw)),
            None => {
                self.scope.unregister(self.id);
                Ok(self.id)
            }
        };
        let members = self.members.take();
        // SAFETY: borrowed for 'a (the caller of `into_raw` answers for completion).
        let data = unsafe { &*self.data };
        // SAFETY: `self` is forgotten right after: the scope is moved out exactly once,
        // and nothing else of it needs dropping (members taken above).
        let scope = unsafe { std::ptr::read(&self.scope) };
        std::mem::forget(self);
        (r, members, data, scope)
    }

    /// An engine request handed over by the C interface (`phalanx::raw`'s `from_raw`),
    /// registered with `scope`; its status's source is translated through `members` (the
    /// world rank of each member of its communicator; `None`: world ranks). Not a stable
    /// API.
    ///
    /// # Safety
    /// `id` is a running engine request on `data`, which lives for `'a`, and nothing else
    /// completes it.
    #[doc(hidden)]
    pub unsafe fn c_from_raw(
        id: ReqId,
        members: Option<std::sync::Arc<Vec<u32>>>,
        data: &'a Buf,
        scope: S,
    ) -> Self {
        scope.register(id);
        Request {
            id,
            members,
            early: None,
            scope,
            done: false,
            data,
            _buf: PhantomData,
        }
    }

    /// A request the C interface completed already, with status `raw` (its source a
    /// world rank). Not a stable API.
    #[doc(hidden)]
    pub fn c_completed(raw: crate::engine::RawStatus, data: &'a Buf, scope: S) -> Self {
        Request {
            id: 0,
            members: None,
            early: Some(raw),
            scope,
            done: false,
            data,
            _buf: PhantomData,
        }
    }

    /// Takes the request apart for a [`RequestCollection`]: unregistered from its scope
    /// (the collection completes it), nothing left for its drop to do.
    fn into_parts(mut self) -> collection::Entry<'a, Buf> {
        self.done = true;
        if self.early.is_none() {
            self.scope.unregister(self.id);
        }
        collection::Entry {
            id: self.id,
            early: self.early.take(),
            members: self.members.take(),
            data: self.data,
            _buf: PhantomData,
        }
    }

    /// Waits for completion and returns the buffer (rsmpi's `wait_for_data`: for a
    /// receive, the data received).
    pub fn wait_for_data(self) -> &'a Buf {
        let data = self.data;
        self.wait();
        // SAFETY: as in `data`: borrowed for 'a, and the operation completed.
        unsafe { &*data }
    }

    /// Waits for completion without the status.
    pub fn wait_without_status(self) {
        self.wait();
    }

    /// Tests for completion once: the status and the buffer, or the request back.
    pub fn test_with_data(self) -> Result<(Status, &'a Buf), Self> {
        let data = self.data;
        // SAFETY: as in `data`: borrowed for 'a, and the operation completed.
        self.test().map(|st| (st, unsafe { &*data }))
    }

    /// Asks for the operation to be cancelled (`MPI_Cancel`); it must still be
    /// completed (waited for or tested). A receive that has not matched a message is
    /// cancelled: it receives nothing and its status says
    /// [`is_cancelled`](Status::is_cancelled). A send, a receive that already matched and
    /// a collective complete normally, which MPI allows.
    pub fn cancel(&self) {
        if self.early.is_none() && !self.done {
            call("cancel", |e| e.cancel(self.id).map(|_| ()));
        }
    }

    /// Moves the request to a scope of shorter lifetime.
    pub fn shrink_scope_to<'b, S2>(mut self, scope: S2) -> Request<'b, Buf, S2>
    where
        'a: 'b,
        S2: Scope<'b>,
    {
        self.done = true;
        let data = self.data;
        let members = self.members.take();
        match self.early.take() {
            Some(raw) => Request {
                id: 0,
                members,
                early: Some(raw),
                scope,
                done: false,
                data,
                _buf: PhantomData,
            },
            None => {
                self.scope.unregister(self.id);
                scope.register(self.id);
                Request {
                    id: self.id,
                    members,
                    early: None,
                    scope,
                    done: false,
                    data,
                    _buf: PhantomData,
                }
            }
        }
    }

    fn status(&self, raw: crate::engine::RawStatus) -> Status {
        match &self.members {
            Some(m) => Status::from_raw_members(raw, m),
            None => Status::from_raw_world(raw),
        }
    }

    /// Takes the status of a request that completed when it started.
    fn take_early(&mut self) -> Option<Status> {
        let raw = self.early.take()?;
        self.done = true;
        Some(self.status(raw))
    }

    /// Waits for completion.
    pub fn wait(mut self) -> Status {
        if let Some(st) = self.take_early() {
            return st;
        }
        let raw = crate::runtime::or_fatal("wait", crate::runtime::wait_request(self.id));
        self.done = true;
        self.scope.unregister(self.id);
        self.status(raw)
    }

    /// Waits for completion, returning the operation's error (a truncated receive, a
    /// failed peer, a collective mismatch) instead of ending the rank. The request is
    /// finished either way.
    pub fn try_wait(mut self) -> Result<Status, crate::error::Error> {
        if let Some(st) = self.take_early() {
            return Ok(st);
        }
        let r = crate::runtime::wait_request(self.id);
        self.done = true;
        self.scope.unregister(self.id);
        r.map(|raw| self.status(raw))
    }

    /// Tests for completion once, returning the operation's error instead of ending the
    /// rank; gives the request back if it is still running.
    pub fn try_test(mut self) -> Result<Result<Status, Self>, crate::error::Error> {
        if let Some(st) = self.take_early() {
            return Ok(Ok(st));
        }
        match crate::runtime::with_engine(|e| e.test(self.id)) {
            Ok(Some(raw)) => {
                self.done = true;
                self.scope.unregister(self.id);
                Ok(Ok(self.status(raw)))
            }
            Ok(None) => Ok(Err(self)),
            Err(e) => {
                self.done = true;
                self.scope.unregister(self.id);
                Err(e)
            }
        }
    }

    /// Tests for completion once; gives the request back if it is still running.
    pub fn test(mut self) -> Result<Status, Self> {
        if let Some(st) = self.take_early() {
            return Ok(st);
        }
        match call("test", |e| e.test(self.id)) {
            Some(raw) => {
                self.done = true;
                self.scope.unregister(self.id);
                Ok(self.status(raw))
            }
            None => Err(self),
        }
    }
}

impl<'a, Buf: ?Sized, S: Scope<'a>> Drop for Request<'a, Buf, S> {
    fn drop(&mut self) {
        if !self.done && self.early.is_none() {
            if std::thread::panicking() {
                dying();
            }
            let _ = crate::runtime::wait_request(self.id);
            self.scope.unregister(self.id);
        }
    }
}

/// Waits for all requests in `reqs`, returning their statuses in order (one engine
/// access for the whole set).
pub fn wait_all<'a, Buf: ?Sized, S: Scope<'a>>(mut reqs: Vec<Request<'a, Buf, S>>) -> Vec<Status> {
    let mut out = Vec::with_capacity(reqs.len());
    for r in reqs.iter_mut() {
        let raw = match r.early.take() {
            Some(raw) => raw,
            None => {
                let raw = crate::runtime::or_fatal("wait_all", crate::runtime::wait_request(r.id));
                r.scope.unregister(r.id);
                raw
            }
        };
        r.done = true;
        out.push(r.status(raw));
    }
    out
}

/// Waits until one of `requests` completes, takes it out of the vector and returns its
/// index (before removal) and status (rsmpi's `wait_any`); `None` for an empty vector.
/// The others keep running. The wait sleeps like any other (no busy loop).
pub fn wait_any<'a, Buf: ?Sized, S: Scope<'a>>(
    requests: &mut Vec<Request<'a, Buf, S>>,
) -> Option<(usize, Status)> {
    if requests.is_empty() {
        return None;
    }
    if let Some(i) = requests.iter().position(|r| r.early.is_some()) {
        let st = requests.remove(i).wait();
        return Some((i, st));
    }
    let ids: Vec<_> = requests.iter().map(|r| r.id).collect();
    let (i, raw) = crate::runtime::or_fatal("wait_any", crate::runtime::wait_any(&ids));
    let mut r = requests.remove(i);
    r.done = true;
    r.scope.unregister(r.id);
    Some((i, r.status(raw)))
}

/// A request that is waited for when the guard is dropped (rsmpi's `WaitGuard`): the
/// usual way to keep a nonblocking send going until the end of a scope.
pub struct WaitGuard<'a, Buf: ?Sized, S: Scope<'a> = StaticScope>(Option<Request<'a, Buf, S>>);

impl<'a, Buf: ?Sized, S: Scope<'a>> From<Request<'a, Buf, S>> for WaitGuard<'a, Buf, S> {
    fn from(r: Request<'a, Buf, S>) -> Self {
        WaitGuard(Some(r))
    }
}

impl<'a, Buf: ?Sized, S: Scope<'a>> From<WaitGuard<'a, Buf, S>> for Request<'a, Buf, S> {
    fn from(mut g: WaitGuard<'a, Buf, S>) -> Self {
        match g.0.take() {
            Some(r) => r,
            // A guard always holds its request until it is dropped or converted.
            None => unreachable!("a WaitGuard without its request"),
        }
    }
}

impl<'a, Buf: ?Sized, S: Scope<'a>> WaitGuard<'a, Buf, S> {
    fn cancel(&self) {
        if let Some(r) = &self.0 {
            r.cancel();
        }
    }
}

/// A request that is cancelled, then waited for, when the guard is dropped (rsmpi's
/// `CancelGuard`): a receive that has not matched a message is taken back.
pub struct CancelGuard<'a, Buf: ?Sized, S: Scope<'a> = StaticScope>(WaitGuard<'a, Buf, S>);

impl<'a, Buf: ?Sized, S: Scope<'a>> Drop for CancelGuard<'a, Buf, S> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.0.cancel();
        }
        // Then the inner guard waits.
    }
}

impl<'a, Buf: ?Sized, S: Scope<'a>> From<Request<'a, Buf, S>> for CancelGuard<'a, Buf, S> {
    fn from(r: Request<'a, Buf, S>) -> Self {
        CancelGuard(WaitGuard::from(r))
    }
}

impl<'a, Buf: ?Sized, S: Scope<'a>> From<WaitGuard<'a, Buf, S>> for CancelGuard<'a, Buf, S> {
    fn from(g: WaitGuard<'a, Buf, S>) -> Self {
        CancelGuard(g)
    }
}

impl<'a, Buf: ?Sized, S: Scope<'a>> From<CancelGuard<'a, Buf, S>> for WaitGuard<'a, Buf, S> {
    fn from(g: CancelGuard<'a, Buf, S>) -> Self {
        let mut g = std::mem::ManuallyDrop::new(g);
        // Moved out of a guard that is never dropped (no cancel).
        WaitGuard(g.0 .0.take())
    }
}

impl<'a, Buf: ?Sized, S: Scope<'a>> Drop for WaitGuard<'a, Buf, S> {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            if std::thread::panicking() {
                // The request's own drop handles a dying rank.
                drop(r);
            } else {
                r.wait();
            }
        }
    }
}
