//! Nonblocking requests and the scopes that keep their buffers borrowed.
//!
//! Contract: the engine's requests are `'static` and hold raw pointers; a [`Request`]
//! borrows its buffer for `'a`, and its [`Scope`] guarantees that no request outlives the
//! borrow: [`scope`] waits at its end for every request registered with it that was not
//! completed (for example one that was leaked with `mem::forget`), also when the closure
//! unwinds. Dropping an incomplete request waits for it; if that happens while a panic
//! unwinds, the rank ends (exit code 101) rather than free buffers the network may still
//! write into or hang a failing job.

use crate::engine::requests::ReqId;
use crate::runtime::call;
use crate::status::Status;
use std::cell::RefCell;
use std::marker::PhantomData;

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
            let _ = crate::runtime::with_engine(|e| e.wait(id));
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
    fn members(&self) -> Option<&std::rc::Rc<Vec<u32>>>;
}

/// A nonblocking operation on a buffer borrowed for `'a`.
#[must_use = "a request must be waited for or tested to completion"]
pub struct Request<'a, Buf: ?Sized, S: Scope<'a> = StaticScope> {
    id: ReqId,
    /// World rank of each member of the communicator (`None`: its ranks are world
    /// ranks), to translate the status's source.
    members: Option<std::rc::Rc<Vec<u32>>>,
    /// The status of a request that completed when it started (no engine entry).
    early: Option<crate::engine::RawStatus>,
    scope: S,
    done: bool,
    _buf: PhantomData<&'a Buf>,
}

impl<'a, Buf: ?Sized, S: Scope<'a>> Request<'a, Buf, S> {
    pub(crate) fn new(id: ReqId, scope: S, comm: &impl Members) -> Self {
        scope.register(id);
        Request {
            id,
            members: comm.members().cloned(),
            early: None,
            scope,
            done: false,
            _buf: PhantomData,
        }
    }

    /// A request that completed when it started, with status `raw`: nothing to wait
    /// for, nothing registered.
    pub(crate) fn complete(raw: crate::engine::RawStatus, scope: S, comm: &impl Members) -> Self {
        Request {
            id: 0,
            members: comm.members().cloned(),
            early: Some(raw),
            scope,
            done: false,
            _buf: PhantomData,
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
        let raw = call("wait", |e| e.wait(self.id));
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
        let r = crate::runtime::with_engine(|e| e.wait(self.id));
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
            let _ = crate::runtime::with_engine(|e| e.wait(self.id));
            self.scope.unregister(self.id);
        }
    }
}

/// Waits for all requests in `reqs`, returning their statuses in order (one engine
/// access for the whole set).
pub fn wait_all<'a, Buf: ?Sized, S: Scope<'a>>(mut reqs: Vec<Request<'a, Buf, S>>) -> Vec<Status> {
    let mut out = Vec::with_capacity(reqs.len());
    call("wait_all", |e| {
        for r in reqs.iter_mut() {
            let raw = match r.early.take() {
                Some(raw) => raw,
                None => {
                    let raw = e.wait(r.id)?;
                    r.scope.unregister(r.id);
                    raw
                }
            };
            r.done = true;
            out.push(r.status(raw));
        }
        Ok(())
    });
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
    let (i, raw) = call("wait_any", |e| e.wait_any(&ids));
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
