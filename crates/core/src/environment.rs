//! Initialization and the universe (the process-wide engine, the thread rule and the
//! error handler are `runtime`'s).
//!
//! Contract: [`initialize`] starts the engine once per process on the calling thread,
//! at the thread level asked for ([`initialize_with_threading`]); dropping the
//! [`Universe`] runs Finalize (drain, report to the launcher, wait for release). Every
//! facade call reaches the engine through `with_engine`; a call from a thread the level
//! does not admit, before initialize or after finalize is an error, never undefined
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
static FINALIZED: AtomicBool = AtomicBool::new(false);

pub use crate::runtime::lock::Threading;

/// The initialized runtime. Dropping it finalizes.
pub struct Universe {
    buffer: usize,
    /// A second handle on a universe another part of the program owns (the C functions
    /// used beside the Rust API): dropping it does not finalize.
    attached: bool,
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

/// Initializes phalanx asking for a thread level (rsmpi's form): the universe and the
/// level provided, the one asked for (every level is provided; see `runtime::lock` for
/// what each admits). `None` if phalanx was already initialized in this process.
pub fn initialize_with_threading(threading: Threading) -> Option<(Universe, Threading)> {
    match try_initialize_with_threading(threading) {
        Ok(u) => Some((u, threading)),
        Err(Error::Init(m)) if m == "already initialized" => None,
        Err(e) => fatal("initialize", e),
    }
}

/// Whether phalanx has been initialized in this process (`MPI_Initialized`).
pub fn is_initialized() -> bool {
    INITIALIZED.load(Ordering::SeqCst)
}

/// Whether phalanx has been finalized in this process (`MPI_Finalized`).
pub fn is_finalized() -> bool {
    FINALIZED.load(Ordering::SeqCst)
}

/// The thread level granted at initialization (`MPI_Query_thread`).
pub fn threading_support() -> Threading {
    crate::runtime::lock::level()
}

/// Whether the calling thread is the one that initialized phalanx (`MPI_Is_thread_main`).
pub fn is_main_thread() -> bool {
    crate::runtime::lock::is_main_thread()
}

/// The version of the MPI standard phalanx implements, (major, minor)
/// (`MPI_Get_version`): its C ABI is MPI 5.0's.
pub fn version() -> (i32, i32) {
    (5, 0)
}

/// What phalanx is (`MPI_Get_library_version`). Never fails; the `Result` is rsmpi's
/// signature.
pub fn library_version() -> std::result::Result<String, std::string::FromUtf8Error> {
    Ok(format!(
        "phalanx {} (MPI 5.0, standard ABI 1.0, up to MPI_THREAD_MULTIPLE)",
        env!("CARGO_PKG_VERSION")
    ))
}

/// The name of this processor: the host's name (`MPI_Get_processor_name`), or
/// `localhost` if the system gives none.
pub fn processor_name() -> std::result::Result<String, std::string::FromUtf8Error> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname writes at most that much.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len() - 1) };
    if rc != 0 {
        return Ok("localhost".into());
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8(buf[..n].to_vec())
}

/// Resolution of [`time`] in seconds (`MPI_Wtick`): the monotonic clock's nanosecond.
pub fn time_resolution() -> f64 {
    1e-9
}

/// Initializes phalanx at thread level `FUNNELED`, returning start-up errors.
pub fn try_initialize() -> Result<Universe> {
    try_initialize_with_threading(Threading::Funneled)
}

/// Initializes phalanx at thread level `threading`, returning start-up errors.
pub fn try_initialize_with_threading(threading: Threading) -> Result<Universe> {
    if INITIALIZED.swap(true, Ordering::SeqCst) {
        return Err(Error::Init("already initialized".into()));
    }
    let engine = Engine::init()?;
    crate::runtime::install(engine, threading);
    Ok(Universe {
        buffer: 0,
        attached: false,
        _not_send: PhantomData,
    })
}

impl Universe {
    /// The communicator of all ranks.
    pub fn world(&self) -> SimpleCommunicator {
        call("world", |e| {
            let (first, count) = e.era();
            Ok(SimpleCommunicator::world_of(e.rank, first, count))
        })
    }
    /// The thread level granted at initialization.
    pub fn threading_support(&self) -> Threading {
        threading_support()
    }
    /// Size of the job (`MPI_UNIVERSE_SIZE`, rsmpi's `Option`; always known here): the
    /// ranks the job had when this process's world started (its world and, for a spawned
    /// world, every rank before it).
    pub fn size(&self) -> Option<usize> {
        // The job as this process's world started it (the same on every rank of it).
        Some(call("size", |e| {
            let (first, count) = e.era();
            Ok((first + count) as usize)
        }))
    }
    /// The size of the buffer attached for buffered sends (`MPI_Buffer_attach`; 0: none).
    /// Buffered sends copy their message and account it against this size (its length
    /// plus `MPI_BSEND_OVERHEAD`, 512 bytes, while it is in flight); one that does not fit
    /// is an `MPI_ERR_BUFFER` error.
    pub fn buffer_size(&self) -> usize {
        self.buffer
    }
    /// Attaches a buffer of `size` bytes for buffered sends (detaching the one attached
    /// before, as rsmpi does; 0 leaves none attached).
    pub fn set_buffer_size(&mut self, size: usize) {
        self.detach_buffer();
        if size > 0 {
            call("set_buffer_size", |e| e.bsend_attach(size));
            self.buffer = size;
        }
    }
    /// Detaches the buffered-send buffer (`MPI_Buffer_detach`): waits until every
    /// buffered message in flight has been sent.
    pub fn detach_buffer(&mut self) {
        if self.buffer > 0 {
            // At MULTIPLE the wait for messages in flight lets other threads call.
            let (_, waiting) = call("detach_buffer", |e| Ok(e.bsend_drained()));
            let drained =
                crate::runtime::wait_for(waiting, |e| e.bsend_drained().0.then_some(Ok(())));
            crate::runtime::or_fatal("detach_buffer", drained);
            call("detach_buffer", |e| e.bsend_detach().map(|_| ()));
            self.buffer = 0;
        }
    }
    /// The application number of this process (`MPI_APPNUM`): `None`, as phalanx runs
    /// one program per job.
    pub fn appnum(&self) -> Option<i32> {
        None
    }
}

impl Universe {
    /// A handle on the universe this thread initialized through the Rust API, for the C
    /// functions called beside it (`mpi::ffi`); `None` when phalanx is not initialized on
    /// this thread or already finalized. Dropping it does not finalize.
    #[doc(hidden)]
    pub fn attach() -> Option<Universe> {
        let live = crate::runtime::with_engine(|_| Ok(())).is_ok();
        (live && !is_finalized()).then_some(Universe {
            buffer: 0,
            attached: true,
            _not_send: PhantomData,
        })
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        if self.attached {
            return;
        }
        if std::thread::panicking() {
            // The rank is dying: finalizing would wait for a release that the launcher
            // never sends to a failed job. The non-zero exit ends the job.
            return;
        }
        crate::runtime::stop_progress();
        let r = with_engine(|e| {
            // Buffered messages still in flight are sent first (rsmpi detaches too).
            e.bsend_detach()?;
            // The board first: its last call may still be read by other ranks.
            e.board_finalize()?;
            e.finalize()
        });
        if let Err(e) = r {
            fatal("finalize", e);
        }
        crate::runtime::take();
        FINALIZED.store(true, Ordering::SeqCst);
    }
}

pub use crate::runtime::end_job;

/// Seconds since an arbitrary point, as `MPI_Wtime`.
pub fn time() -> f64 {
    use std::sync::OnceLock;
    // The monotonic clock read directly, in integer nanoseconds since the first call
    // (exact in an f64 for 104 days): programs time short calls with it, so it is kept
    // to the clock read and a subtraction.
    static START: OnceLock<i64> = OnceLock::new();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let now = ts.tv_sec * 1_000_000_000 + ts.tv_nsec;
    // Two threads' first calls may read the clock in one order and set START in the other.
    (now - *START.get_or_init(|| now)).max(0) as f64 * 1e-9
}
