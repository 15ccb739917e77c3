//! Environment odds and ends: `MPI_Pcontrol`, `MPI_Info_create_env`, `MPI_Abi_get_info`,
//! `MPI_Get_hw_resource_info`, `MPI_Type_match_size`, `MPI_Type_get_value_index`, and user
//! error classes, codes and
//! strings (`MPI_Add_error_class`, `_code`, `_string` and MPI-4.1's `MPI_Remove_*`).
//!
//! Contract: `MPI_Pcontrol` does nothing (phalanx has no profiling levels) and succeeds.
//! `MPI_Info_create_env` returns a new info with `command` (`argv[0]`), `argv` (the other
//! arguments, space-separated), `maxprocs` (the world's size once initialized), `wdir` and
//! `thread_level`. `MPI_Abi_get_info` says the sizes of `MPI_Aint`, `MPI_Count` and
//! `MPI_Offset` (`mpi_aint_size`, `mpi_count_size`, `mpi_offset_size`, in bytes).
//! `MPI_Get_hw_resource_info` returns an empty info (no hardware resource is exposed).
//! `MPI_Type_match_size` finds the Fortran sized types phalanx has (`INTEGER1/2/4/8`,
//! `REAL4/8`, `COMPLEX8`); another size is `MPI_ERR_ARG`. `MPI_Type_get_value_index` names
//! the predefined pair type of a value and an index type (`MPI_FLOAT_INT`, …, `MPI_2INT`)
//! and gives `MPI_DATATYPE_NULL` for a pair MPI does not predefine. User error classes and codes
//! are numbered from the last predefined class up (the world's `MPI_LASTUSEDCODE`
//! attribute says the last one used), at most up to `MPI_ERR_LASTCODE`; `MPI_Error_class`
//! and `MPI_Error_string` know them. Removing a class with codes left, or a predefined
//! one, is `MPI_ERR_ARG`.

use crate::consts::*;
use crate::misc::{cstr, info_new};
use crate::{err, export, guard, out, state, CResult};
use phalanx::capi_support::Shared;
use phalanx::traits::Communicator;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int};

const WORLD: Handle = COMM_WORLD as Handle;
/// `MPI_ERR_LASTCODE`.
const LASTCODE: c_int = 0x3fff;
/// `MPI_MAX_ERROR_STRING`.
const MAX_ERROR_STRING: usize = 512;

export!(MPI_Pcontrol, PMPI_Pcontrol, (level: c_int) -> c_int {
    let _ = level;
    MPI_SUCCESS
});

export!(MPI_Info_create_env, PMPI_Info_create_env,
        (argc: c_int, argv: *mut *mut c_char, info: *mut Handle) -> c_int {
    guard("MPI_Info_create_env", WORLD, || {
        let mut args = Vec::new();
        if !argv.is_null() {
            for i in 0..argc.max(0) as usize {
                // SAFETY: argc readable pointers (MPI contract, as main's).
                let p = unsafe { argv.add(i).read() };
                if p.is_null() {
                    break;
                }
                // SAFETY: NUL-terminated (as main's arguments are).
                args.push(unsafe { cstr(p)? });
            }
        }
        let mut kv = Vec::new();
        if let Some((cmd, rest)) = args.split_first() {
            kv.push(("command".to_string(), cmd.clone()));
            kv.push(("argv".to_string(), rest.join(" ")));
        }
        if let Ok(c) = state::comm(WORLD) {
            kv.push(("maxprocs".to_string(), c.size().to_string()));
        }
        if let Ok(d) = std::env::current_dir() {
            kv.push(("wdir".to_string(), d.display().to_string()));
        }
        let level = match phalanx::environment::threading_support() {
            phalanx::Threading::Single => "MPI_THREAD_SINGLE",
            phalanx::Threading::Funneled => "MPI_THREAD_FUNNELED",
            phalanx::Threading::Serialized => "MPI_THREAD_SERIALIZED",
            phalanx::Threading::Multiple => "MPI_THREAD_MULTIPLE",
        };
        kv.push(("thread_level".to_string(), level.to_string()));
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(info, info_new(kv)) }
    })
});

export!(MPI_Abi_get_info, PMPI_Abi_get_info, (info: *mut Handle) -> c_int {
    guard("MPI_Abi_get_info", WORLD, || {
        let kv = ["mpi_aint_size", "mpi_count_size", "mpi_offset_size"]
            .map(|k| (k.to_string(), "8".to_string()))
            .to_vec();
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(info, info_new(kv)) }
    })
});

export!(MPI_Get_hw_resource_info, PMPI_Get_hw_resource_info, (hw_info: *mut Handle) -> c_int {
    guard("MPI_Get_hw_resource_info", WORLD, || {
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(hw_info, info_new(Vec::new())) }
    })
});

export!(MPI_Type_match_size, PMPI_Type_match_size,
        (typeclass: c_int, size: c_int, datatype: *mut Handle) -> c_int {
    guard("MPI_Type_match_size", WORLD, || {
        let t: usize = match (typeclass, size) {
            (192, 1) => 0x2c1,
            (192, 2) => 0x2c9,
            (192, 4) => 0x2d1,
            (192, 8) => 0x2d9,
            (193, 4) => 0x2d2,
            (193, 8) => 0x2da,
            (194, 8) => 0x2db,
            (192..=194, _) => {
                return Err(err(MPI_ERR_ARG, format!("no type of class {typeclass} with {size} bytes")))
            }
            _ => return Err(err(MPI_ERR_ARG, format!("invalid type class {typeclass}"))),
        };
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(datatype, t as Handle) }
    })
});

export!(MPI_Type_get_value_index, PMPI_Type_get_value_index,
        (value_type: Handle, index_type: Handle, pair_type: *mut Handle) -> c_int {
    guard("MPI_Type_get_value_index", WORLD, || {
        let pair: usize = match (value_type as usize, index_type as usize) {
            (0x210, 0x209) => 0x228, // MPI_FLOAT_INT
            (0x214, 0x209) => 0x229, // MPI_DOUBLE_INT
            (0x20a, 0x209) => 0x22a, // MPI_LONG_INT
            (0x209, 0x209) => 0x22b, // MPI_2INT
            (0x208, 0x209) => 0x22c, // MPI_SHORT_INT
            (0x220, 0x209) => 0x22d, // MPI_LONG_DOUBLE_INT
            (0x21a, 0x21a) => 0x230, // MPI_2REAL
            (0x21c, 0x21c) => 0x231, // MPI_2DOUBLE_PRECISION
            (0x219, 0x219) => 0x232, // MPI_2INTEGER
            _ => crate::types::DATATYPE_NULL,
        };
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(pair_type, pair as Handle) }
    })
});

/// User error classes and codes: code → (class, string).
#[derive(Default)]
struct Codes {
    last: Option<c_int>,
    user: BTreeMap<c_int, (c_int, Option<String>)>,
}

static CODES: Shared<RefCell<Codes>> = Shared::new(|| RefCell::new(Codes::default()));

/// The last error code in use (the `MPI_LASTUSEDCODE` attribute).
pub(crate) fn last_used() -> c_int {
    CODES.with(|c| c.borrow().last).unwrap_or(MPI_ERR_ABI)
}

/// The class of user code `code`, if it is one.
pub(crate) fn user_class(code: c_int) -> Option<c_int> {
    CODES.with(|c| c.borrow().user.get(&code).map(|e| e.0))
}

/// The string set for user code `code` (empty when none was set), if it is one.
pub(crate) fn user_string(code: c_int) -> Option<String> {
    CODES.with(|c| {
        c.borrow()
            .user
            .get(&code)
            .map(|e| e.1.clone().unwrap_or_default())
    })
}

/// A new code of class `class` (itself for a new class).
fn add(class: Option<c_int>) -> CResult<c_int> {
    CODES.with(|c| {
        let mut c = c.borrow_mut();
        let next = c.last.unwrap_or(MPI_ERR_ABI) + 1;
        if next > LASTCODE {
            return Err(err(MPI_ERR_INTERN, "no error code left"));
        }
        c.last = Some(next);
        c.user.insert(next, (class.unwrap_or(next), None));
        Ok(next)
    })
}

export!(MPI_Add_error_class, PMPI_Add_error_class, (errorclass: *mut c_int) -> c_int {
    guard("MPI_Add_error_class", WORLD, || {
        let k = add(None)?;
        // SAFETY: writable int (MPI contract; null checked).
        unsafe { out(errorclass, k) }
    })
});

export!(MPI_Add_error_code, PMPI_Add_error_code,
        (errorclass: c_int, errorcode: *mut c_int) -> c_int {
    guard("MPI_Add_error_code", WORLD, || {
        let is_class = (0..=MPI_ERR_ABI).contains(&errorclass) || user_class(errorclass) == Some(errorclass);
        if !is_class {
            return Err(err(MPI_ERR_ARG, format!("invalid error class {errorclass}")));
        }
        let k = add(Some(errorclass))?;
        // SAFETY: writable int (MPI contract; null checked).
        unsafe { out(errorcode, k) }
    })
});

export!(MPI_Add_error_string, PMPI_Add_error_string,
        (errorcode: c_int, string: *const c_char) -> c_int {
    guard("MPI_Add_error_string", WORLD, || {
        // SAFETY: NUL-terminated (MPI contract; null checked).
        let s = unsafe { cstr(string)? };
        if s.len() >= MAX_ERROR_STRING {
            return Err(err(MPI_ERR_ARG, "error string longer than MPI_MAX_ERROR_STRING"));
        }
        CODES.with(|c| match c.borrow_mut().user.get_mut(&errorcode) {
            Some(e) => {
                e.1 = Some(s);
                Ok(())
            }
            None => Err(err(MPI_ERR_ARG, format!("{errorcode} is not a user error code"))),
        })
    })
});

/// Removes user code (or class) `code`; a class must have no codes left.
fn remove(code: c_int, class: bool) -> CResult {
    CODES.with(|c| {
        let mut c = c.borrow_mut();
        let Some(&(k, _)) = c.user.get(&code) else {
            return Err(err(
                MPI_ERR_ARG,
                format!("{code} is not a user error code or class"),
            ));
        };
        if class != (k == code) {
            return Err(err(
                MPI_ERR_ARG,
                format!(
                    "{code} is not a user error {}",
                    if class { "class" } else { "code" }
                ),
            ));
        }
        if class && c.user.iter().any(|(&x, &(kx, _))| x != code && kx == code) {
            return Err(err(
                MPI_ERR_ARG,
                format!("error class {code} still has codes"),
            ));
        }
        c.user.remove(&code);
        Ok(())
    })
}

export!(MPI_Remove_error_class, PMPI_Remove_error_class, (errorclass: c_int) -> c_int {
    guard("MPI_Remove_error_class", WORLD, || remove(errorclass, true))
});

export!(MPI_Remove_error_code, PMPI_Remove_error_code, (errorcode: c_int) -> c_int {
    guard("MPI_Remove_error_code", WORLD, || remove(errorcode, false))
});

export!(MPI_Remove_error_string, PMPI_Remove_error_string, (errorcode: c_int) -> c_int {
    guard("MPI_Remove_error_string", WORLD, || {
        CODES.with(|c| match c.borrow_mut().user.get_mut(&errorcode) {
            Some(e) => {
                e.1 = None;
                Ok(())
            }
            None => Err(err(MPI_ERR_ARG, format!("{errorcode} is not a user error code"))),
        })
    })
});
