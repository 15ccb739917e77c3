//! The thread-local engine and the fatal error handler: how every facade call reaches the
//! engine.
//!
//! Contract: the engine lives in a thread-local slot of the thread that initialized
//! phalanx ([`install`], [`take`]); [`with_engine`] runs a core call on it, and a call
//! from another thread, before initialize or after finalize is
//! [`Error::NotInitialized`], never undefined behaviour. [`call`] sends an error to the
//! fatal handler ([`fatal`]), which prints it naming the rank and the call and ends the
//! process non-zero (the launcher then ends the job).

use crate::engine::Engine;
use crate::error::{Error, Result};
use std::cell::RefCell;

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

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

/// Puts the engine of this thread in place (initialize).
pub(crate) fn install(engine: Engine) {
    crate::datatype::set_misuse_handler(|call, msg| fatal(call, Error::InvalidArg(msg.into())));
    ENGINE.with(|c| *c.borrow_mut() = Some(engine));
}

/// Takes the engine of this thread out (after finalize).
pub(crate) fn take() -> Option<Engine> {
    ENGINE.with(|c| c.borrow_mut().take())
}

/// Ends the whole job from this rank with exit `code`: under a PMI server (`srun
/// --mpi=pmi2`) the server is asked to end the step (`why` goes with it); under `phalanx
/// run` the launcher ends the other ranks when this one exits non-zero.
pub fn end_job(code: i32, why: &str) -> ! {
    phalanx_boot::pmi::abort_step(why);
    std::process::exit(code)
}
