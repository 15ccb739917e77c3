//! Environment, communicator management, error handling and inquiry functions:
//! `MPI_Init*`, `MPI_Finalize*`, `MPI_Abort`, `MPI_Wtime`, `MPI_Comm_{rank,size,dup,free}`,
//! error handlers and strings, versions and names.

use crate::consts::*;
use crate::state::{self, CommEntry};
use crate::{err, export, guard, out, CResult};
use phalanx::environment::Threading;
use phalanx::topology::Color;
use phalanx::traits::Communicator;
use std::ffi::{c_char, c_int};
use std::panic::catch_unwind;
use std::sync::atomic::Ordering;

const WORLD: Handle = COMM_WORLD as Handle;
const MAX_PROCESSOR_NAME: usize = 256;
const MAX_ERROR_STRING: usize = 512;
const MAX_LIBRARY_VERSION_STRING: usize = 8192;

fn init(level: Threading) -> CResult {
    if state::flags().0 {
        return Err(err(MPI_ERR_OTHER, "MPI is already initialized"));
    }
    let u = phalanx::environment::try_initialize_with_threading(level)
        .map_err(|e| err(MPI_ERR_OTHER, e.to_string()))?;
    let world = u.world();
    // MPI_COMM_SELF: one communicator per rank, derived collectively from the world.
    let me = world
        .split_by_color(Color::with_value(world.rank()))
        .ok_or_else(|| err(MPI_ERR_INTERN, "could not create MPI_COMM_SELF"))?;
    state::with(|s| {
        s.universe = Some(u);
        for (h, comm) in [(COMM_WORLD, world), (COMM_SELF, me)] {
            let errh = ERRORS_ARE_FATAL;
            s.comms.insert(h, CommEntry::new(comm, errh));
        }
    });
    state::refresh_world();
    state::set_initialized();
    Ok(())
}

export!(MPI_Init, PMPI_Init, (_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    guard("MPI_Init", WORLD, || init(Threading::Funneled))
});

export!(MPI_Init_thread, PMPI_Init_thread,
        (_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int,
         provided: *mut c_int) -> c_int {
    guard("MPI_Init_thread", WORLD, || {
        let level = match required {
            MPI_THREAD_SINGLE => Threading::Single,
            MPI_THREAD_FUNNELED => Threading::Funneled,
            MPI_THREAD_SERIALIZED => Threading::Serialized,
            MPI_THREAD_MULTIPLE => Threading::Multiple,
            other => {
                return Err(err(MPI_ERR_ARG, format!("invalid thread level {other}")));
            }
        };
        init(level)?;
        // SAFETY: the caller passes a writable int (MPI contract).
        unsafe { out(provided, required) }
    })
});

/// The C constant of thread level `t`.
fn level_of(t: Threading) -> c_int {
    match t {
        Threading::Single => MPI_THREAD_SINGLE,
        Threading::Funneled => MPI_THREAD_FUNNELED,
        Threading::Serialized => MPI_THREAD_SERIALIZED,
        Threading::Multiple => MPI_THREAD_MULTIPLE,
    }
}

export!(MPI_Query_thread, PMPI_Query_thread, (provided: *mut c_int) -> c_int {
    guard("MPI_Query_thread", WORLD, || {
        let level = level_of(phalanx::environment::threading_support());
        // SAFETY: the caller passes a writable int.
        unsafe { out(provided, level) }
    })
});

export!(MPI_Is_thread_main, PMPI_Is_thread_main, (flag: *mut c_int) -> c_int {
    guard("MPI_Is_thread_main", WORLD, || {
        let main = phalanx::environment::is_main_thread();
        // SAFETY: the caller passes a writable int.
        unsafe { out(flag, main as c_int) }
    })
});

export!(MPI_Finalize, PMPI_Finalize, () -> c_int {
    guard("MPI_Finalize", WORLD, || {
        // MPI: the attributes of MPI_COMM_SELF are deleted first.
        if state::comm(COMM_SELF as Handle).is_ok() {
            crate::attrs::delete_all(COMM_SELF as Handle)?;
        }
        // Buffered sends still in flight complete first.
        crate::bsend::drain();
        let (reqs, freed, comms, u) = state::with(|s| {
            (std::mem::take(&mut s.reqs), std::mem::take(&mut s.freed),
             std::mem::take(&mut s.comms), s.universe.take())
        });
        state::refresh_world();
        let Some(u) = u else {
            return Err(err(MPI_ERR_OTHER, "MPI is not initialized (or already finalized)"));
        };
        // Requests never waited for complete here (dropping one waits), before the
        // universe finalizes.
        drop(reqs);
        drop(freed);
        // The same for requests of the small-message path (held by the engine itself).
        let _ = phalanx::capi_support::wait_running();
        // Windows never freed stop serving (not collectively) while the engine runs.
        crate::rma::drop_all();
        drop(comms);
        drop(u);
        state::FINALIZED.store(true, Ordering::SeqCst);
        Ok(())
    })
});

export!(MPI_Initialized, PMPI_Initialized, (flag: *mut c_int) -> c_int {
    guard("MPI_Initialized", WORLD, || {
        let on = state::flags().0 || phalanx::environment::is_initialized();
        // SAFETY: the caller passes a writable int.
        unsafe { out(flag, on as c_int) }
    })
});

export!(MPI_Finalized, PMPI_Finalized, (flag: *mut c_int) -> c_int {
    // SAFETY: the caller passes a writable int.
    guard("MPI_Finalized", WORLD, || unsafe { out(flag, state::flags().1 as c_int) })
});

export!(MPI_Abort, PMPI_Abort, (comm: Handle, errorcode: c_int) -> c_int {
    guard("MPI_Abort", comm, || match state::comm(comm).or_else(|_| state::comm(WORLD)) {
        Ok(c) => c.abort(errorcode),
        Err(_) => {
            eprintln!("phalanx: MPI_Abort({errorcode}) called");
            phalanx::environment::end_job(
                if errorcode == 0 { 1 } else { errorcode },
                "MPI_Abort called",
            )
        }
    })
});

export!(MPI_Wtime, PMPI_Wtime, () -> f64 {
    catch_unwind(phalanx::environment::time).unwrap_or(0.0)
});

export!(MPI_Wtick, PMPI_Wtick, () -> f64 {
    1e-9
});

export!(MPI_Comm_rank, PMPI_Comm_rank, (comm: Handle, rank: *mut c_int) -> c_int {
    guard("MPI_Comm_rank", comm, || {
        if comm as usize == COMM_WORLD {
            if let Some((r, _)) = state::world_rank_size() {
                // SAFETY: the caller passes a writable int.
                return unsafe { out(rank, r) };
            }
        }
        let c = state::comm(comm)?;
        // SAFETY: the caller passes a writable int.
        unsafe { out(rank, c.rank()) }
    })
});

export!(MPI_Comm_size, PMPI_Comm_size, (comm: Handle, size: *mut c_int) -> c_int {
    guard("MPI_Comm_size", comm, || {
        if comm as usize == COMM_WORLD {
            if let Some((_, n)) = state::world_rank_size() {
                // SAFETY: the caller passes a writable int.
                return unsafe { out(size, n) };
            }
        }
        let c = state::comm(comm)?;
        let n = crate::inter::local_size(comm).unwrap_or(c.size());
        // SAFETY: the caller passes a writable int.
        unsafe { out(size, n) }
    })
});

/// A duplicate of `comm` with its topology and error handler, made without messages
/// (collective: every member calls it in the same order), without its attributes and
/// hints: `MPI_Comm_dup`'s core, and the private communicator of a persistent
/// collective.
pub(crate) fn dup_bare(comm: Handle) -> CResult<Handle> {
    let c = state::comm(comm)?;
    // A Cartesian communicator's duplicate keeps its grid (MPI copies topologies).
    let h = match (crate::topo::grid_of(comm), crate::inter::dup(comm)) {
        (_, Some(h)) => h,
        (Some(cart), None) => crate::topo::add_cart(cart.duplicate(), comm),
        (None, None) => state::add_comm(c.duplicate(), state::errhandler(comm)),
    };
    crate::graph::copy(comm, h);
    Ok(h)
}

export!(MPI_Comm_dup, PMPI_Comm_dup, (comm: Handle, newcomm: *mut Handle) -> c_int {
    guard("MPI_Comm_dup", comm, || {
        state::comm(comm)?;
        if newcomm.is_null() {
            return Err(err(MPI_ERR_ARG, "null output argument"));
        }
        let h = dup_bare(comm)?;
        crate::comm_info::copy(comm, h);
        crate::attrs::copy_all(comm, h)?;
        // SAFETY: non-null, and the caller passes a writable handle.
        unsafe { out(newcomm, h) }
    })
});

export!(MPI_Comm_free, PMPI_Comm_free, (comm: *mut Handle) -> c_int {
    if comm.is_null() {
        return guard("MPI_Comm_free", WORLD, || Err(err(MPI_ERR_ARG, "null communicator pointer")));
    }
    // SAFETY: non-null, and the caller passes a readable handle.
    let h = unsafe { comm.read() };
    guard("MPI_Comm_free", h, || {
        state::comm(h)?;
        if h as usize == COMM_WORLD || h as usize == COMM_SELF {
            return Err(err(MPI_ERR_COMM, "cannot free a predefined communicator"));
        }
        crate::attrs::delete_all(h)?;
        crate::graph::forget(h);
        state::with(|s| s.comms.remove(&(h as usize)));
        // SAFETY: non-null and writable (checked above, MPI contract).
        unsafe { out(comm, COMM_NULL as Handle) }
    })
});

export!(MPI_Comm_set_errhandler, PMPI_Comm_set_errhandler,
        (comm: Handle, errhandler: Handle) -> c_int {
    guard("MPI_Comm_set_errhandler", comm, || {
        state::comm(comm)?;
        let e = errhandler as usize;
        if !crate::errh::valid(e) {
            return Err(err(MPI_ERR_ARG, format!("invalid error handler {errhandler:p}")));
        }
        state::with(|s| {
            if let Some(c) = s.comms.get_mut(&(comm as usize)) {
                c.errh = e;
            }
        });
        state::refresh_world();
        Ok(())
    })
});

export!(MPI_Comm_get_errhandler, PMPI_Comm_get_errhandler,
        (comm: Handle, errhandler: *mut Handle) -> c_int {
    guard("MPI_Comm_get_errhandler", comm, || {
        state::comm(comm)?;
        // SAFETY: the caller passes a writable handle.
        unsafe { out(errhandler, state::errhandler(comm) as Handle) }
    })
});

export!(MPI_Type_size, PMPI_Type_size, (datatype: Handle, size: *mut c_int) -> c_int {
    guard("MPI_Type_size", WORLD, || {
        let l = crate::types::any_layout(datatype)?;
        // SAFETY: the caller passes a writable int.
        unsafe { out(size, c_int::try_from(l.size).unwrap_or(MPI_UNDEFINED)) }
    })
});

/// The predefined datatype behind `h`, or `MPI_ERR_TYPE` (derived datatypes included:
/// calls using this do not support them; see [`crate::types`]).
#[inline]
pub fn datatype_of(h: Handle) -> CResult<Dt> {
    match datatype(h as usize) {
        Some(d) => Ok(d),
        None => Err(not_predefined(h)),
    }
}

#[cold]
#[inline(never)]
fn not_predefined(h: Handle) -> crate::CErr {
    if crate::types::is_derived(h) {
        err(
            MPI_ERR_TYPE,
            format!("derived datatype {h:p} is not supported by this call"),
        )
    } else {
        err(MPI_ERR_TYPE, format!("invalid datatype {h:p}"))
    }
}

/// Copies `s` (truncated to `max - 1` bytes) with a NUL to `dst`, its length to `len`.
///
/// # Safety
/// `dst` must have room for `max` bytes; `len` must be a writable int.
pub(crate) unsafe fn write_str(dst: *mut c_char, max: usize, s: &str, len: *mut c_int) -> CResult {
    if dst.is_null() {
        return Err(err(MPI_ERR_ARG, "null string argument"));
    }
    let n = s.len().min(max - 1);
    // SAFETY: dst has room for max bytes (caller), n + 1 <= max, and the source is a
    // distinct Rust string.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), dst as *mut u8, n);
        dst.add(n).write(0);
        out(len, n as c_int)
    }
}

export!(MPI_Get_processor_name, PMPI_Get_processor_name,
        (name: *mut c_char, resultlen: *mut c_int) -> c_int {
    guard("MPI_Get_processor_name", WORLD, || {
        let host = phalanx::environment::processor_name().unwrap_or_else(|_| "localhost".into());
        // SAFETY: the caller passes MPI_MAX_PROCESSOR_NAME bytes and a writable int.
        unsafe { write_str(name, MAX_PROCESSOR_NAME, &host, resultlen) }
    })
});

export!(MPI_Get_version, PMPI_Get_version, (version: *mut c_int, subversion: *mut c_int) -> c_int {
    // SAFETY: the caller passes two writable ints.
    guard("MPI_Get_version", WORLD, || unsafe { out(version, 5)?; out(subversion, 0) })
});

export!(MPI_Abi_get_version, PMPI_Abi_get_version,
        (abi_major: *mut c_int, abi_minor: *mut c_int) -> c_int {
    // SAFETY: the caller passes two writable ints.
    guard("MPI_Abi_get_version", WORLD, || unsafe { out(abi_major, 1)?; out(abi_minor, 0) })
});

export!(MPI_Get_library_version, PMPI_Get_library_version,
        (version: *mut c_char, resultlen: *mut c_int) -> c_int {
    guard("MPI_Get_library_version", WORLD, || {
        let v = phalanx::environment::library_version().unwrap_or_default();
        // SAFETY: the caller passes MPI_MAX_LIBRARY_VERSION_STRING bytes and an int.
        unsafe { write_str(version, MAX_LIBRARY_VERSION_STRING, &v, resultlen) }
    })
});

fn valid_code(code: c_int) -> CResult {
    if !(0..=MPI_ERR_ABI).contains(&code) && crate::env_more::user_class(code).is_none() {
        return Err(err(MPI_ERR_ARG, format!("invalid error code {code}")));
    }
    Ok(())
}

export!(MPI_Error_string, PMPI_Error_string,
        (errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) -> c_int {
    guard("MPI_Error_string", WORLD, || {
        valid_code(errorcode)?;
        let user = crate::env_more::user_string(errorcode);
        let text = user.as_deref().unwrap_or_else(|| error_name(errorcode));
        // SAFETY: the caller passes MPI_MAX_ERROR_STRING bytes and a writable int.
        unsafe { write_str(string, MAX_ERROR_STRING, text, resultlen) }
    })
});

export!(MPI_Error_class, PMPI_Error_class, (errorcode: c_int, errorclass: *mut c_int) -> c_int {
    guard("MPI_Error_class", WORLD, || {
        valid_code(errorcode)?;
        let class = crate::env_more::user_class(errorcode).unwrap_or(errorcode);
        // SAFETY: the caller passes a writable int.
        unsafe { out(errorclass, class) }
    })
});
