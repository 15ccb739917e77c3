//! The progress thread (`PHALANX_PROGRESS_THREAD=1` at `MPI_THREAD_MULTIPLE`): one
//! thread of phalanx's own that runs rounds of progress while the program's threads
//! compute, so a rank that makes no call for a while still applies the one-sided
//! operations aimed at its windows, answers its peers and keeps its protocols going.
//!
//! Contract: [`start`] spawns it (once), [`stop`] ends and joins it before Finalize
//! drains. It runs rounds while something happens and sleeps at once when nothing does
//! (on the sockets, the rings' wake-up and the launcher, not woken by the program's own
//! calls); while a program thread waits, and so progresses, it parks
//! ([`shared_wait::progress_until`]). It leaves the errors that end waits to the
//! program's calls; an error of its own (the launcher gone, a broken transport) ends the
//! job through the fatal handler, naming it.

use super::shared_wait;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

static STOP: AtomicBool = AtomicBool::new(false);
static THREAD: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);

/// Starts the progress thread (if it is not running).
pub(crate) fn start() {
    let mut t = THREAD.lock();
    if t.is_some() {
        return;
    }
    STOP.store(false, Ordering::Release);
    let spawned = std::thread::Builder::new()
        .name("phalanx-progress".into())
        .spawn(|| {
            if let Err(e) = shared_wait::progress_until(&STOP) {
                super::fatal("progress thread", e);
            }
        });
    match spawned {
        Ok(h) => *t = Some(h),
        Err(e) => tracing::warn!("phalanx: no progress thread: {e}"),
    }
}

/// Stops and joins the progress thread (if one runs). The caller holds no hold on the
/// process lock (the thread's last round needs it).
pub(crate) fn stop() {
    let Some(h) = THREAD.lock().take() else {
        return;
    };
    STOP.store(true, Ordering::Release);
    shared_wait::wake_all();
    let _released = super::lock::release();
    let _ = h.join();
}
