//! Multiple completion: [`multiple_scope`] and [`RequestCollection`] (rsmpi's
//! `MPI_Waitany`/`Waitsome`/`Waitall`/`Testany`/`Testsome`/`Testall` over a set of
//! requests).
//!
//! Contract: a request added to a collection leaves its scope and keeps its index (the
//! order of `add`) for good; each completion call reports every request it completes
//! once, as `(index, status, &buffer)`, and never again. The waits sleep in the engine's
//! wait (no busy loop); the tests run one round of progress. A collection dropped with
//! requests still running waits for them (as [`scope`](super::scope) does), so no buffer
//! is released while the network may write into it.

use super::{dying, LocalScope, Request, Scope};
use crate::engine::requests::ReqId;
use crate::engine::RawStatus;
use crate::runtime::{call, or_fatal};
use crate::status::Status;
use std::marker::PhantomData;

/// A request of a collection, taken out of its [`Request`].
pub(super) struct Entry<'a, D: ?Sized> {
    pub(super) id: ReqId,
    /// The status of a request that completed when it started (no engine entry).
    pub(super) early: Option<RawStatus>,
    pub(super) members: Option<std::sync::Arc<Vec<u32>>>,
    pub(super) data: *const D,
    pub(super) _buf: PhantomData<&'a D>,
}

impl<'a, D: ?Sized> Entry<'a, D> {
    fn status(&self, raw: RawStatus) -> Status {
        match &self.members {
            Some(m) => Status::from_raw_members(raw, m),
            None => Status::from_raw_world(raw),
        }
    }

    /// The completed entry's report.
    fn report(self, i: usize, raw: RawStatus) -> (usize, Status, &'a D) {
        // SAFETY: the buffer is borrowed for 'a (the request's borrow, now the
        // collection's) and the operation that used it has completed.
        (i, self.status(raw), unsafe { &*self.data })
    }
}

/// Runs `f` with a local scope and an empty request collection (rsmpi's
/// `multiple_scope`; `reserve` is the expected number of requests). Every request added
/// to the collection, or started in the scope, has completed when this returns.
pub fn multiple_scope<'a, F, R, D>(reserve: usize, f: F) -> R
where
    D: 'a + ?Sized,
    F: FnOnce(&LocalScope<'a>, &mut RequestCollection<'a, D>) -> R,
{
    super::scope(|scope| {
        let mut coll = RequestCollection {
            entries: Vec::with_capacity(reserve),
        };
        f(scope, &mut coll)
        // `coll` is dropped here, before the scope ends: it waits for what is left.
    })
}

/// A set of requests on buffers of type `D`, completed together (rsmpi's
/// `RequestCollection`); see the module docs.
pub struct RequestCollection<'a, D: ?Sized> {
    /// Each added request, `None` once reported complete.
    entries: Vec<Option<Entry<'a, D>>>,
}

impl<'a, D: ?Sized> RequestCollection<'a, D> {
    /// Number of requests not yet reported complete.
    pub fn incomplete(&self) -> usize {
        self.entries.iter().filter(|e| e.is_some()).count()
    }

    /// Adds `req` and returns its index; the request leaves its scope and the collection
    /// completes it.
    pub fn add<S: Scope<'a>>(&mut self, req: Request<'a, D, S>) -> usize {
        self.entries.push(Some(req.into_parts()));
        self.entries.len() - 1
    }

    /// Indices and engine ids of the requests still running in the engine; or the
    /// index of one that completed when it started.
    fn running(&self) -> Result<(Vec<usize>, Vec<ReqId>), usize> {
        let mut idx = Vec::new();
        let mut ids = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            if let Some(e) = e {
                if e.early.is_some() {
                    return Err(i);
                }
                idx.push(i);
                ids.push(e.id);
            }
        }
        Ok((idx, ids))
    }

    /// Reports entry `i` complete with `raw` (its early status when `raw` is `None`).
    fn take(&mut self, i: usize, raw: Option<RawStatus>) -> Option<(usize, Status, &'a D)> {
        let mut e = self.entries.get_mut(i)?.take()?;
        let raw = raw.or(e.early.take())?;
        Some(e.report(i, raw))
    }

    /// Reports every entry that completed when it started into `result`.
    fn take_early(&mut self, result: &mut Vec<(usize, Status, &'a D)>) {
        for i in 0..self.entries.len() {
            if self.entries[i].as_ref().is_some_and(|e| e.early.is_some()) {
                result.extend(self.take(i, None));
            }
        }
    }

    /// Waits until one request completes and reports it: `(index, status, buffer)`;
    /// `None` when none is left.
    pub fn wait_any(&mut self) -> Option<(usize, Status, &'a D)> {
        match self.running() {
            Err(i) => self.take(i, None),
            Ok((_, ids)) if ids.is_empty() => None,
            Ok((idx, ids)) => {
                let (k, raw) = or_fatal("wait_any", crate::runtime::wait_any(&ids));
                self.take(idx[k], Some(raw))
            }
        }
    }

    /// Waits until at least one request completes, and reports in `result` (cleared
    /// first) every one that has completed; nothing when none is left.
    pub fn wait_some(&mut self, result: &mut Vec<(usize, Status, &'a D)>) {
        result.clear();
        self.take_early(result);
        if !result.is_empty() {
            return;
        }
        let Ok((idx, ids)) = self.running() else {
            return;
        };
        if ids.is_empty() {
            return;
        }
        let done = or_fatal("wait_some", crate::runtime::wait_some(&ids));
        for (k, raw) in done {
            result.extend(self.take(idx[k], Some(raw)));
        }
    }

    /// Waits for every request, and reports in `result` (cleared first) every one not
    /// reported before, in index order.
    pub fn wait_all(&mut self, result: &mut Vec<(usize, Status, &'a D)>) {
        result.clear();
        for i in 0..self.entries.len() {
            let Some(id) = self.entries[i]
                .as_ref()
                .map(|e| (e.early.is_none()).then_some(e.id))
            else {
                continue;
            };
            let raw = id.map(|id| or_fatal("wait_all", crate::runtime::wait_request(id)));
            result.extend(self.take(i, raw));
        }
    }

    /// Tests once (one round of progress) and reports one completed request, if any.
    pub fn test_any(&mut self) -> Option<(usize, Status, &'a D)> {
        match self.running() {
            Err(i) => self.take(i, None),
            Ok((_, ids)) if ids.is_empty() => None,
            Ok((idx, ids)) => {
                let (k, raw) = call("test_any", |e| e.test_any(&ids))?;
                self.take(idx[k], Some(raw))
            }
        }
    }

    /// Tests once (one round of progress) and reports in `result` (cleared first) every
    /// request that has completed.
    pub fn test_some(&mut self, result: &mut Vec<(usize, Status, &'a D)>) {
        result.clear();
        self.take_early(result);
        let mut idx = Vec::new();
        let mut ids = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            if let Some(e) = e {
                // (Those that completed when they started were reported above.)
                idx.push(i);
                ids.push(e.id);
            }
        }
        if ids.is_empty() {
            return;
        }
        for (k, raw) in call("test_some", |e| e.test_some(&ids)) {
            result.extend(self.take(idx[k], Some(raw)));
        }
    }

    /// Tests once (one round of progress) whether every request has completed: if so,
    /// reports in `result` (cleared first) every one not reported before and returns
    /// true; otherwise completes none and returns false.
    pub fn test_all(&mut self, result: &mut Vec<(usize, Status, &'a D)>) -> bool {
        result.clear();
        let mut idx = Vec::new();
        let mut ids = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            if let Some(e) = e.as_ref().filter(|e| e.early.is_none()) {
                idx.push(i);
                ids.push(e.id);
            }
        }
        let Some(raws) = call("test_all", |e| e.test_all(&ids)) else {
            return false;
        };
        let mut raws: Vec<Option<RawStatus>> = raws.into_iter().map(Some).collect();
        for i in 0..self.entries.len() {
            let raw = idx
                .iter()
                .position(|&j| j == i)
                .and_then(|k| raws[k].take());
            result.extend(self.take(i, raw));
        }
        true
    }
}

impl<D: ?Sized> Drop for RequestCollection<'_, D> {
    fn drop(&mut self) {
        let left: Vec<ReqId> = self
            .entries
            .iter()
            .flatten()
            .filter(|e| e.early.is_none())
            .map(|e| e.id)
            .collect();
        if left.is_empty() {
            return;
        }
        if std::thread::panicking() {
            dying();
        }
        for id in left {
            let _ = crate::runtime::wait_request(id);
        }
    }
}
