//! The process-wide engine and the fatal error handler: how every facade call reaches the
//! engine.
//!
//! Contract: the engine lives in one [`Shared`] slot of the process ([`install`],
//! [`take`]), reached under the thread rule of [`lock`]: at `SINGLE` and `FUNNELED` only
//! the thread that initialized phalanx may call, at `SERIALIZED` and `MULTIPLE` any
//! thread, one at a time under the process lock. [`with_engine`] runs a core call on it;
//! a call from a thread the rule refuses, before initialize or after finalize is an
//! error, never undefined behaviour. At `MULTIPLE` the blocking waits
//! ([`wait_request`], [`shared_wait`]) give the lock up between rounds of progress, so
//! other threads call and progress meanwhile. [`call`] sends an error to the fatal
//! handler ([`fatal`]), which prints it naming the rank and the call and ends the
//! process non-zero (the launcher then ends the job).

pub mod lock;
mod multiple;
mod progress;
pub(crate) mod shared_wait;

use crate::engine::{Engine, RawStatus, RecvBuf, SendBuf, Waiting};
use crate::error::{Error, Result};
use crate::requests::ReqId;
use lock::Threading;
pub use lock::{enter, Entered, Shared};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

static ENGINE: Shared<RefCell<Option<Engine>>> = Shared::new(|| RefCell::new(None));
/// This process's rank once the engine is installed (-1: none), for error messages.
static RANK: AtomicI64 = AtomicI64::new(-1);
/// Whether blocking waits give the lock up between rounds (`MPI_THREAD_MULTIPLE`).
static MULTIPLE: AtomicBool = AtomicBool::new(false);

/// Runs `f` on the engine, under the thread rule.
#[inline]
pub(crate) fn with_engine<T>(f: impl FnOnce(&mut Engine) -> Result<T>) -> Result<T> {
    let entered = enter()?;
    engine_in(&entered, f)
}

/// Runs `f` on the engine for a thread that has entered.
#[inline]
pub(crate) fn engine_in<T>(
    entered: &Entered,
    f: impl FnOnce(&mut Engine) -> Result<T>,
) -> Result<T> {
    let mut guard = ENGINE
        .get(entered)
        .try_borrow_mut()
        .map_err(|_| Error::NotInitialized)?;
    match guard.as_mut() {
        Some(e) => f(e),
        None => Err(Error::NotInitialized),
    }
}

/// Whether the thread level granted is `MPI_THREAD_MULTIPLE` (blocking waits give the
/// process lock up between rounds).
#[inline]
pub(crate) fn multiple() -> bool {
    MULTIPLE.load(Ordering::Relaxed)
}

// The blocking calls: the engine's own wait, or at `MULTIPLE` rounds that give the lock
// up (`multiple.rs`, kept out of line so these stay small enough to inline into the C
// functions' paths).

/// Waits for request `id` and returns its result.
#[inline]
pub(crate) fn wait_request(id: ReqId) -> Result<RawStatus> {
    let _traced = crate::trace::call("wait");
    if multiple() {
        return multiple::wait_request(id);
    }
    with_engine(|e| e.wait(id))
}

/// [`wait_request`] for the first finished of `ids` (`MPI_Waitany`): its position
/// and result.
pub(crate) fn wait_any(ids: &[ReqId]) -> Result<(usize, RawStatus)> {
    let _traced = crate::trace::call("wait_any");
    if multiple() && !ids.is_empty() {
        return multiple::wait_any(ids);
    }
    with_engine(|e| e.wait_any(ids))
}

/// [`wait_request`] until at least one of `ids` is finished, then every finished one
/// (`MPI_Waitsome`): positions and results.
pub(crate) fn wait_some(ids: &[ReqId]) -> Result<Vec<(usize, RawStatus)>> {
    let _traced = crate::trace::call("wait_some");
    if multiple() && !ids.is_empty() {
        return multiple::wait_some(ids);
    }
    with_engine(|e| e.wait_some(ids))
}

/// A blocking send (`MPI_Send`, with `synchronous` `MPI_Ssend`).
#[inline]
pub(crate) fn send(sb: SendBuf, dest: u32, tag: i32, ctx: u32, synchronous: bool) -> Result<()> {
    let _traced = crate::trace::call("send");
    if multiple() {
        return multiple::send(sb, dest, tag, ctx, synchronous);
    }
    with_engine(|e| e.send(sb, dest, tag, ctx, synchronous))
}

/// A blocking receive (`MPI_Recv`).
#[inline]
pub(crate) fn recv(rb: RecvBuf, src: Option<u32>, tag: Option<i32>, ctx: u32) -> Result<RawStatus> {
    let _traced = crate::trace::call("receive");
    if multiple() {
        return multiple::recv(rb, src, tag, ctx);
    }
    with_engine(|e| e.recv(rb, src, tag, ctx))
}

/// A blocking probe (`MPI_Probe`).
pub(crate) fn probe(src: Option<u32>, tag: Option<i32>, ctx: u32) -> Result<RawStatus> {
    let _traced = crate::trace::call("probe");
    wait_for(Waiting::Recv { src, tag, ctx }, |e| {
        e.iprobe(src, tag, ctx).map(Ok)
    })
}

/// A blocking matched probe (`MPI_Mprobe`): the message's id and envelope.
pub(crate) fn mprobe(src: Option<u32>, tag: Option<i32>, ctx: u32) -> Result<(u64, RawStatus)> {
    let _traced = crate::trace::call("matched_probe");
    if multiple() {
        return multiple::mprobe(src, tag, ctx);
    }
    with_engine(|e| e.mprobe(src, tag, ctx))
}

/// Receives the message a matched probe took (`MPI_Mrecv`).
pub(crate) fn mrecv(msg: u64, rb: RecvBuf) -> Result<RawStatus> {
    let _traced = crate::trace::call("matched_receive");
    if multiple() {
        return multiple::mrecv(msg, rb);
    }
    with_engine(|e| e.mrecv(msg, rb))
}

/// The value of `r`, or its error sent to the fatal handler naming `call`.
#[inline]
pub(crate) fn or_fatal<T>(call: &str, r: Result<T>) -> T {
    r.unwrap_or_else(|e| fatal(call, e))
}

/// Waits until `ready` gives a result: at `MULTIPLE` in rounds that give the lock up,
/// otherwise on the engine's wait (described as `waiting`).
pub(crate) fn wait_for<T>(
    waiting: Waiting,
    mut ready: impl FnMut(&mut Engine) -> Option<Result<T>>,
) -> Result<T> {
    if multiple() {
        return shared_wait::wait(|_| waiting, ready);
    }
    with_engine(|e| {
        let mut got = None;
        e.wait_until(waiting, |e| {
            got = ready(e);
            got.is_some()
        })?;
        got.unwrap_or(Err(Error::InvalidRequest))
    })
}

/// The fatal error handler: prints the error naming the rank and the call, then ends
/// the process with a non-zero code (the launcher then ends the job).
pub(crate) fn fatal(call: &str, err: Error) -> ! {
    let rank = match RANK.load(Ordering::Relaxed) {
        r if r >= 0 => r.to_string(),
        _ => launched_rank(),
    };
    // One write, so the launcher never forwards half a line.
    let line = format!(
        "phalanx: rank {rank}: {call}: {err} (error class {:?})\n",
        err.class()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    end_job(1, &line)
}

/// The rank the launcher gave this process (before the engine exists), or `?` (also
/// when `PHALANX_RANK` is not a rank number: it is only shown in messages).
pub fn launched_rank() -> String {
    std::env::var(phalanx_boot::ENV_RANK)
        .ok()
        .filter(|r| r.trim().parse::<u32>().is_ok())
        .unwrap_or_else(|| "?".into())
}

/// Runs a core call, sending an error to the fatal handler.
#[inline]
pub(crate) fn call<T>(name: &str, f: impl FnOnce(&mut Engine) -> Result<T>) -> T {
    match with_engine(f) {
        Ok(v) => v,
        Err(e) => fatal(name, e),
    }
}

/// Puts the engine in place (initialize) and sets the thread rule for `level`.
pub(crate) fn install(engine: Engine, level: Threading) {
    crate::datatype::set_misuse_handler(|call, msg| fatal(call, Error::InvalidArg(msg.into())));
    RANK.store(engine.rank as i64, Ordering::Relaxed);
    let progress_thread = level == Threading::Multiple && engine.wants_progress_thread();
    let entered = enter().unwrap_or_else(|e| fatal("initialize", e));
    *ENGINE.get(&entered).borrow_mut() = Some(engine);
    if level == Threading::Multiple {
        shared_wait::enable();
    }
    MULTIPLE.store(level == Threading::Multiple, Ordering::Relaxed);
    lock::grant(level);
    if progress_thread {
        progress::start();
    }
}

/// Stops the progress thread, if one runs (Finalize, before the engine drains).
pub(crate) fn stop_progress() {
    progress::stop();
}

/// Takes the engine out (after finalize); any thread may then ask whether phalanx runs.
pub(crate) fn take() -> Option<Engine> {
    let entered = enter().ok()?;
    let e = ENGINE.get(&entered).borrow_mut().take();
    MULTIPLE.store(false, Ordering::Relaxed);
    lock::revoke();
    e
}

/// Ends the whole job from this rank with exit `code`: under a PMI server (`srun
/// --mpi=pmi2`) the server is asked to end the step (`why` goes with it); under `phalanx
/// run` the launcher ends the other ranks when this one exits non-zero.
pub fn end_job(code: i32, why: &str) -> ! {
    phalanx_boot::pmi::abort_step(why);
    std::process::exit(code)
}
