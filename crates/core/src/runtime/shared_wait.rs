//! Blocking waits at `MPI_THREAD_MULTIPLE`: rounds of progress that give the process
//! lock up in between, so every thread calls and progresses while others wait.
//!
//! Contract: [`wait`] gives up every hold the calling thread has on the process lock,
//! then runs rounds ([`Engine::shared_round`], each under the lock) until its condition
//! holds or an error ends it, and takes the lock back as it was. Any thread's round
//! progresses every request of the process, so a thread whose request another thread's
//! round completed sees it at its next round. An idle wait spins, yields, then sleeps:
//! one sleeping thread at a time polls the engine's descriptors (sockets, shared-memory
//! wake-ups, the launcher) plus an eventfd, the others wait on a condition variable;
//! both are woken when another thread made progress or finished a call
//! ([`wake_sleepers`]), and every sleep is bounded (the engine's timers, at most 100 ms).
//! Fairness comes from the lock (parking_lot's, fair now and then) and from waiting
//! threads yielding between idle rounds when others wait too.

use super::lock;
use crate::engine::{Engine, Round, Sleep, Waiting};
use crate::error::Result;
use parking_lot::{Condvar, Mutex};
use phalanx_transport::wait_readable;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Threads inside [`wait`].
static WAITERS: AtomicU32 = AtomicU32::new(0);
/// Threads about to sleep or sleeping (wakers write the eventfd and notify only then).
static SLEEPERS: AtomicU32 = AtomicU32::new(0);
/// Whether a thread is polling the engine's descriptors.
static POLLER: AtomicBool = AtomicBool::new(false);
/// The eventfd that wakes the polling thread (-1: not made).
static EVENT: AtomicI32 = AtomicI32::new(-1);
/// Wake-ups so far, for the threads waiting on [`COND`].
static GENERATION: Mutex<u64> = Mutex::new(0);
static COND: Condvar = Condvar::new();
/// The longest a thread waits on [`COND`] before another round.
const COND_MAX: Duration = Duration::from_millis(10);

/// Makes the eventfd (thread level `MULTIPLE` granted).
pub(crate) fn enable() {
    if EVENT.load(Ordering::Relaxed) < 0 {
        // SAFETY: plain system call; the descriptor is this module's for the process's
        // life.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        EVENT.store(fd, Ordering::Relaxed);
    }
}

/// Wakes the threads sleeping in [`wait`], if any: something changed that they may
/// wait for.
pub(crate) fn wake_sleepers() {
    if SLEEPERS.load(Ordering::SeqCst) == 0 {
        return;
    }
    let fd = EVENT.load(Ordering::Relaxed);
    if fd >= 0 {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our eventfd (a full counter
        // fails with EAGAIN, which still leaves it readable).
        let _ = unsafe { libc::write(fd, one.as_ptr().cast(), 8) };
    }
    *GENERATION.lock() += 1;
    COND.notify_all();
}

/// Runs `f` on the engine under the lock, without waking sleepers on release.
fn engine<T>(f: impl FnOnce(&mut Engine) -> Result<T>) -> Result<T> {
    let entered = lock::enter_locked(false)?;
    super::engine_in(&entered, f)
}

/// Waits until `ready` gives a result, giving the process lock up between rounds;
/// `waiting` says what for (the launcher's `--timeout` report shows the latest waiter's).
pub(crate) fn wait<T>(
    waiting: impl FnOnce(&Engine) -> Waiting,
    mut ready: impl FnMut(&mut Engine) -> Option<Result<T>>,
) -> Result<T> {
    let released = lock::release();
    WAITERS.fetch_add(1, Ordering::Relaxed);
    let r = engine(|e| {
        let w = waiting(e);
        e.set_waiting(w);
        Ok(())
    })
    .and_then(|()| rounds(&mut ready));
    // The last waiter out clears the report (under the lock, with the count).
    let _ = engine(|e| {
        if WAITERS.fetch_sub(1, Ordering::Relaxed) == 1 {
            e.set_waiting(Waiting::Nothing);
        }
        Ok(())
    });
    // The last round may have moved other threads' requests too.
    wake_sleepers();
    drop(released);
    r
}

/// The progress thread's loop: rounds until `stop` says so, leaving the errors that end
/// waits (a collective's, a link's) to the program's own calls. It keeps out of the way
/// of the program's threads: while one of them waits (and so progresses) it parks; when
/// idle it sleeps at once, on the engine's descriptors, and is not counted among the
/// sleepers the program's calls wake.
pub(crate) fn progress_until(stop: &AtomicBool) -> Result<()> {
    let mut done = |_: &mut Engine| stop.load(Ordering::Acquire).then_some(Ok(()));
    while !stop.load(Ordering::Acquire) {
        if WAITERS.load(Ordering::Relaxed) > 0 {
            let mut g = GENERATION.lock();
            COND.wait_for(&mut g, COND_MAX);
            continue;
        }
        match engine(|e| e.shared_round(&mut done, false))? {
            Round::Done(()) => break,
            Round::Moved => wake_sleepers(),
            Round::Idle => {
                if sleep(&mut done, false)?.is_some() {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Wakes every sleeping thread, the progress thread included (it stops).
pub(crate) fn wake_all() {
    let fd = EVENT.load(Ordering::Relaxed);
    if fd >= 0 {
        let one = 1u64.to_ne_bytes();
        // SAFETY: as in `wake_sleepers`.
        let _ = unsafe { libc::write(fd, one.as_ptr().cast(), 8) };
    }
    *GENERATION.lock() += 1;
    COND.notify_all();
}

fn rounds<T>(ready: &mut impl FnMut(&mut Engine) -> Option<Result<T>>) -> Result<T> {
    let (spin, yield_time) = engine(|e| Ok(e.wait_budget()))?;
    let mut idle_since: Option<Instant> = None;
    let mut idle_rounds = 0u32;
    loop {
        match engine(|e| e.shared_round(ready, true))? {
            Round::Done(v) => return Ok(v),
            Round::Moved => {
                wake_sleepers();
                idle_since = None;
                idle_rounds = 0;
                continue;
            }
            Round::Idle => {}
        }
        idle_rounds = idle_rounds.wrapping_add(1);
        if WAITERS.load(Ordering::Relaxed) > 1 || spin.is_zero() {
            // Other threads wait too: their rounds get the lock (and the core).
            std::thread::yield_now();
        }
        if idle_rounds < 128 {
            continue;
        }
        let start = *idle_since.get_or_insert_with(Instant::now);
        let idle = start.elapsed();
        if idle < spin {
            continue;
        }
        if idle < spin + yield_time {
            std::thread::yield_now();
            continue;
        }
        if let Some(v) = sleep(ready, true)? {
            return Ok(v);
        }
        idle_since = None;
    }
}

/// One bounded sleep; `Some` when the condition held while the sleep was announced.
/// `counted`: among the sleepers other threads' calls wake (the progress thread is not).
fn sleep<T>(
    ready: &mut impl FnMut(&mut Engine) -> Option<Result<T>>,
    counted: bool,
) -> Result<Option<T>> {
    let generation = *GENERATION.lock();
    // Counted before the last check, so a change made after it wakes this thread.
    let counted = u32::from(counted);
    SLEEPERS.fetch_add(counted, Ordering::SeqCst);
    let mut got = None;
    let plan = engine(|e| {
        Ok(e.sleep_prepare(&mut |e| {
            got = ready(e);
            got.is_some()
        }))
    });
    let plan = match plan {
        Ok(Sleep::On(fds, timeout)) => (fds, timeout),
        other => {
            SLEEPERS.fetch_sub(counted, Ordering::SeqCst);
            return match other? {
                Sleep::Done => got.transpose(),
                _ => Ok(None),
            };
        }
    };
    let (mut fds, timeout) = plan;
    let mut slept = Ok(());
    if !POLLER.swap(true, Ordering::AcqRel) {
        let event = EVENT.load(Ordering::Relaxed);
        if event >= 0 {
            fds.push(event);
        }
        slept = wait_readable(&fds, Some(timeout)).map(|_| ());
        if event >= 0 {
            let mut buf = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live buffer (EAGAIN when empty).
            let _ = unsafe { libc::read(event, buf.as_mut_ptr().cast(), 8) };
        }
        POLLER.store(false, Ordering::Release);
        // What woke the poller (a datagram, a ring) may be what another sleeper waits
        // for: the rounds after this one will tell.
        *GENERATION.lock() += 1;
        COND.notify_all();
    } else {
        let mut g = GENERATION.lock();
        if *g == generation {
            COND.wait_for(&mut g, timeout.min(COND_MAX));
        }
    }
    SLEEPERS.fetch_sub(counted, Ordering::SeqCst);
    slept?;
    engine(|e| e.sleep_finish())?;
    Ok(None)
}
