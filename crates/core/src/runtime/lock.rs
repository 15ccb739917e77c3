//! The thread rule: which threads may call phalanx, and the process lock that makes
//! `MPI_THREAD_MULTIPLE` safe.
//!
//! Contract: every piece of process-wide phalanx state (the engine, the C tables, the
//! communicators' shared counters) is a [`Shared`] value, reached only inside
//! [`enter`]. At thread levels `SINGLE` and `FUNNELED` (the owner-only rule) `enter`
//! admits the thread that initialized phalanx and refuses every other one with
//! [`Error::WrongThread`] — one relaxed load and a compare, no lock. Before
//! initialization, after finalization and at `SERIALIZED` and `MULTIPLE` (the locked
//! rule) `enter` takes the process lock, reentrantly per thread (a user callback called
//! from inside phalanx may call phalanx again). So no two threads ever touch shared
//! state at once, which is what makes the `Rc`s and `RefCell`s inside it sound to share.
//!
//! Only a waiting thread gives the lock up in the middle of a call ([`release_all`] and
//! [`reacquire`], used by `runtime::shared_wait`): it then holds no reference into
//! shared state, only the values it owns.

use crate::error::{Error, Result};
use parking_lot::lock_api::RawMutex as _;
use parking_lot::RawMutex;
use std::cell::{Cell, LazyCell};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// Thread levels (MPI's), all of them provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Threading {
    /// One thread.
    Single,
    /// Many threads, only the initializing one calls phalanx.
    Funneled,
    /// Many threads, one at a time.
    Serialized,
    /// Any thread at any time.
    Multiple,
}

/// The process lock (the locked rule).
static LOCK: RawMutex = RawMutex::INIT;
/// Under the owner-only rule (`SINGLE`, `FUNNELED` after initialization) the one thread
/// admitted ([`me`]); 0 under the locked rule.
static ONLY: AtomicUsize = AtomicUsize::new(0);
/// The thread that initialized phalanx ([`me`]; 0: none yet).
static OWNER: AtomicUsize = AtomicUsize::new(0);
/// The thread level granted ([`Threading`] as a number).
static LEVEL: AtomicU8 = AtomicU8::new(Threading::Single as u8);

thread_local! {
    /// How many times this thread has entered under the locked rule (it holds the lock
    /// when above 0).
    static HELD: Cell<u32> = const { Cell::new(0) };
}

/// This thread, as a number unique among the live threads and never 0: its thread
/// control block's address (`pthread_self`), read straight from the thread pointer where
/// the architecture allows — one instruction on the path of every call, where a
/// thread-local in a shared library costs a function call.
#[inline]
fn me() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let tcb: usize;
        // SAFETY: on x86-64 Linux %fs:0 holds the thread control block's own address
        // (the TLS ABI both glibc and musl follow); reading it has no side effect.
        unsafe {
            std::arch::asm!("mov {}, fs:0", out(reg) tcb, options(nostack, readonly, preserves_flags));
        }
        tcb
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        // SAFETY: pthread_self has no preconditions and cannot fail.
        unsafe { libc::pthread_self() as usize }
    }
}

/// Whether the calling thread is the one that initialized phalanx (`MPI_Is_thread_main`).
pub fn is_main_thread() -> bool {
    OWNER.load(Ordering::Relaxed) == me()
}

/// The thread level granted at initialization.
pub fn level() -> Threading {
    match LEVEL.load(Ordering::Relaxed) {
        0 => Threading::Single,
        1 => Threading::Funneled,
        2 => Threading::Serialized,
        _ => Threading::Multiple,
    }
}

/// Sets the rule for the thread level granted; the calling thread becomes the main one.
/// Called by initialization, inside [`enter`].
pub(crate) fn grant(level: Threading) {
    LEVEL.store(level as u8, Ordering::Relaxed);
    OWNER.store(me(), Ordering::Relaxed);
    let only = if level <= Threading::Funneled {
        me()
    } else {
        0
    };
    ONLY.store(only, Ordering::SeqCst);
}

/// Back to the locked rule (finalization): any thread may ask whether phalanx runs.
pub(crate) fn revoke() {
    ONLY.store(0, Ordering::SeqCst);
}

/// Proof that the calling thread may touch shared state until it is dropped.
#[must_use]
pub struct Entered {
    locked: bool,
    /// Wakes threads sleeping in a shared wait on release (the call may have changed
    /// what they wait for).
    wake: bool,
    _not_send: PhantomData<*const ()>,
}

/// Admits the calling thread under the current rule (see the module docs).
#[inline]
pub fn enter() -> Result<Entered> {
    let only = ONLY.load(Ordering::Relaxed);
    if only == me() {
        return Ok(Entered {
            locked: false,
            wake: false,
            _not_send: PhantomData,
        });
    }
    if only != 0 {
        return Err(wrong_thread());
    }
    enter_locked(true)
}

#[cold]
fn wrong_thread() -> Error {
    Error::WrongThread(match level() {
        Threading::Single => "MPI_THREAD_SINGLE",
        Threading::Funneled => "MPI_THREAD_FUNNELED",
        Threading::Serialized => "MPI_THREAD_SERIALIZED",
        Threading::Multiple => "MPI_THREAD_MULTIPLE",
    })
}

/// Takes the lock (reentrantly); `wake`: wake shared-wait sleepers on release.
pub(crate) fn enter_locked(wake: bool) -> Result<Entered> {
    HELD.with(|h| {
        if h.get() == 0 {
            LOCK.lock();
        }
        h.set(h.get() + 1);
    });
    let entered = Entered {
        locked: true,
        wake,
        _not_send: PhantomData,
    };
    // Initialization may have set the owner-only rule while this thread waited.
    let only = ONLY.load(Ordering::SeqCst);
    if only != 0 && only != me() {
        drop(entered);
        return Err(wrong_thread());
    }
    Ok(entered)
}

impl Drop for Entered {
    #[inline]
    fn drop(&mut self) {
        if !self.locked {
            return;
        }
        let last = HELD.with(|h| {
            debug_assert!(h.get() > 0, "an entry released the lock twice");
            let d = h.get().saturating_sub(1);
            h.set(d);
            d == 0
        });
        if last {
            // SAFETY: this thread took the lock when its count went from 0 to 1.
            unsafe { LOCK.unlock() };
            if self.wake {
                super::shared_wait::wake_sleepers();
            }
        }
    }
}

/// The lock given up by [`release`]: taken back as it was when dropped (a panic
/// unwinding through the wait included, so the thread's count stays right).
pub(crate) struct Released {
    depth: u32,
    _not_send: PhantomData<*const ()>,
}

impl Drop for Released {
    fn drop(&mut self) {
        reacquire(self.depth);
    }
}

/// Gives the lock up entirely (a waiting thread between rounds) until the result is
/// dropped. The caller holds no reference into shared state meanwhile.
pub(crate) fn release() -> Released {
    Released {
        depth: release_all(),
        _not_send: PhantomData,
    }
}

/// Gives the lock up entirely: returns how many times this thread had entered, for
/// [`reacquire`] ([`release`] pairs them).
fn release_all() -> u32 {
    let d = HELD.with(|h| h.replace(0));
    if d > 0 {
        // SAFETY: a count above 0 means this thread holds the lock.
        unsafe { LOCK.unlock() };
    }
    d
}

/// Takes the lock back after [`release_all`].
fn reacquire(depth: u32) {
    if depth > 0 {
        LOCK.lock();
        HELD.with(|h| h.set(depth));
    }
}

/// Yields the processor, and the process lock with it (a thread polling in a loop: other
/// threads call meanwhile). The caller holds no reference into shared state.
pub fn yield_now() {
    let _released = release();
    std::thread::yield_now();
}

/// Process-wide state reached only under the thread rule ([`enter`]); initialized on
/// first use.
pub struct Shared<T, F = fn() -> T>(LazyCell<T, F>);

// SAFETY: the value is only reached through `with`/`get`, inside `enter`: by one thread
// at a time under the locked rule, by the main thread alone under the owner-only rule.
// Everything reachable from it (`Rc`s, `RefCell`s) is therefore touched by one thread
// at a time, with the lock's release and acquire ordering the accesses.
unsafe impl<T, F> Sync for Shared<T, F> {}

impl<T, F: FnOnce() -> T> Shared<T, F> {
    /// State made by `init` on first use.
    pub const fn new(init: F) -> Self {
        Shared(LazyCell::new(init))
    }

    /// Runs `f` on the value. A thread that may not call phalanx (another thread than
    /// the main one at `FUNNELED`) ends the job with an error naming the rule.
    #[inline]
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        let _in = enter().unwrap_or_else(|e| super::fatal("phalanx", e));
        f(self.get(&_in))
    }

    /// The value, for a thread that has entered.
    #[inline]
    pub fn get<'a>(&'static self, _in: &'a Entered) -> &'a T {
        LazyCell::force(&self.0)
    }
}
