//! Initialization, the universe, the thread-local engine and the error handler.
//!
//! Contract: [`initialize`] starts the engine once per process on the calling thread;
//! dropping the [`Universe`] runs Finalize (drain, report to the launcher, wait for
//! release). Every facade call reaches the engine through `with_engine`; a call from
//! another thread, before initialize or after finalize is an error, never undefined
//! behaviour.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::topology::SimpleCommunicator;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// Runs `f` on this thread's engine.
#[inline]
pub(crate) fn with_engine<T>(f: impl FnOnce(&mut Engine) -> Result<T>) -> Result<T> {
    ENGINE.with(|cell| {
        let mut guard = cell.try_borrow_mut().map_err(|_| Error::NotInitialized)?;
        match guard.as_mut() {
            Some(e) => f(e),
            None => Err(Error::NotInitialized),
        }
    })
}

/// The fatal error handler: prints the error naming the rank and the call, then ends
/// the process with a non-zero code (the launcher then ends the job).
pub(crate) fn fatal(call: &str, err: Error) -> ! {
    let rank = ENGINE
        .with(|c| c.try_borrow().ok().and_then(|g| g.as_ref().map(|e| e.rank)))
        .map(|r| r.to_string())
        .unwrap_or_else(launched_rank);
    // One write, so the launcher never forwards half a line.
    let line = format!(
        "phalanx: rank {rank}: {call}: {err} (error class {:?})\n",
        err.class()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    std::process::exit(1)
}

/// The rank the launcher gave this process (before the engine exists), or `?`.
pub fn launched_rank() -> String {
    std::env::var(phalanx_boot::ENV_RANK).unwrap_or_else(|_| "?".into())
}

/// Runs a core call, sending an error to the fatal handler.
#[inline]
pub(crate) fn call<T>(name: &str, f: impl FnOnce(&mut Engine) -> Result<T>) -> T {
    match with_engine(f) {
        Ok(v) => v,
        Err(e) => fatal(name, e),
    }
}

/// Supported thread levels.
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

/// The initialized runtime. Dropping it finalizes.
pub struct Universe {
    _not_send: PhantomData<Rc<()>>,
}

/// Initializes phalanx on this thread. Returns `None` if it was already initialized in
/// this process. A start-up failure is reported and ends the process (fatal handler).
pub fn initialize() -> Option<Universe> {
    match try_initialize() {
        Ok(u) => Some(u),
        Err(Error::Init(m)) if m == "already initialized" => None,
        Err(e) => fatal("initialize", e),
    }
}

/// Initializes phalanx, returning start-up errors.
pub fn try_initialize() -> Result<Universe> {
    if INITIALIZED.swap(true, Ordering::SeqCst) {
        return Err(Error::Init("already initialized".into()));
    }
    let engine = Engine::init()?;
    ENGINE.with(|c| *c.borrow_mut() = Some(engine));
    Ok(Universe {
        _not_send: PhantomData,
    })
}

impl Universe {
    /// The communicator of all ranks.
    pub fn world(&self) -> SimpleCommunicator {
        call("world", |e| Ok(SimpleCommunicator::world(e.rank, e.size)))
    }
    /// The thread level phalanx provides (and enforces through `!Send` handles).
    pub fn threading_support(&self) -> Threading {
        Threading::Funneled
    }
    /// Size of the job.
    pub fn size(&self) -> usize {
        call("size", |e| Ok(e.size as usize))
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The rank is dying: finalizing would wait for a release that the launcher
            // never sends to a failed job. The non-zero exit ends the job.
            return;
        }
        let r = with_engine(|e| {
            // The board first: its last call may still be read by other ranks.
            e.board_finalize()?;
            e.finalize()
        });
        if let Err(e) = r {
            fatal("finalize", e);
        }
        ENGINE.with(|c| c.borrow_mut().take());
    }
}

/// Seconds since an arbitrary point, as `MPI_Wtime`.
pub fn time() -> f64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}
