//! Initialization and the universe (the thread-local engine and the error handler are
//! `runtime`'s).
//!
//! Contract: [`initialize`] starts the engine once per process on the calling thread;
//! dropping the [`Universe`] runs Finalize (drain, report to the launcher, wait for
//! release). Every facade call reaches the engine through `with_engine`; a call from
//! another thread, before initialize or after finalize is an error, never undefined
//! behaviour.

use crate::engine::Engine;
use crate::error::{Error, Result};
pub use crate::runtime::launched_rank;
pub(crate) use crate::runtime::{call, fatal, with_engine};
use crate::topology::SimpleCommunicator;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

static INITIALIZED: AtomicBool = AtomicBool::new(false);

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
    crate::runtime::install(engine);
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
        crate::runtime::take();
    }
}

pub use crate::runtime::end_job;

/// Seconds since an arbitrary point, as `MPI_Wtime`.
pub fn time() -> f64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}
