//! Communicator info and the MPI-3/4 creation calls that take one:
//! `MPI_Comm_set_info`, `MPI_Comm_get_info`, `MPI_Comm_dup_with_info`,
//! `MPI_Comm_idup_with_info`, `MPI_Comm_create_group`, `MPI_Comm_create_from_group`; and
//! `MPI_Info_get_valuelen`.
//!
//! Contract: phalanx acts on no communicator hint, so it keeps the hints a program sets
//! (`MPI_Comm_set_info` replaces the values of the keys it names) and `MPI_Comm_get_info`
//! returns a new info object with them (an empty one when none were set), which the
//! caller frees. `MPI_Comm_dup` copies its parent's hints, `MPI_Comm_dup_with_info`
//! takes the given ones instead. `MPI_Comm_idup_with_info`, like `MPI_Comm_idup`,
//! duplicates at once and returns a completed request. `MPI_Comm_create_group` is
//! collective over the group only: its members build the communicator without messages
//! (the core's `split_by_subgroup_with_tag`, told apart by the tag and by call order);
//! a caller outside the group gets `MPI_COMM_NULL`, and a group with a process outside
//! the communicator is `MPI_ERR_GROUP`. `MPI_Comm_create_from_group` does the same over
//! the world with its string tag hashed to the tag ([`string_tag`]); the group's members
//! call it, with the error handler given (`MPI_ERRHANDLER_NULL`: the world's).

use crate::consts::*;
use crate::misc::{cstr, info_get, info_new, info_ok};
use crate::{err, export, guard, out, state, CResult};
use phalanx::capi_support::Shared;
use phalanx::traits::{Communicator, Group};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int};

/// An info object's key/value list.
type Hints = Vec<(String, String)>;

/// Hints set on communicators, by handle.
static HINTS: Shared<RefCell<HashMap<usize, Hints>>> = Shared::new(|| RefCell::new(HashMap::new()));

/// Sets the hints of info `info` on `comm` (each key's value replaced).
fn set(comm: Handle, info: Handle) -> CResult {
    info_ok(info)?;
    if info as usize == INFO_NULL {
        return Ok(());
    }
    let kv = info_get(info, |l| l.clone())?;
    HINTS.with(|t| {
        let mut t = t.borrow_mut();
        let e = t.entry(comm as usize).or_default();
        for (k, v) in kv {
            match e.iter_mut().find(|x| x.0 == k) {
                Some(x) => x.1 = v,
                None => e.push((k, v)),
            }
        }
    });
    Ok(())
}

/// Gives `to` the hints of `from` (`MPI_Comm_dup`).
pub(crate) fn copy(from: Handle, to: Handle) {
    HINTS.with(|t| {
        let mut t = t.borrow_mut();
        if let Some(v) = t.get(&(from as usize)).cloned() {
            t.insert(to as usize, v);
        }
    });
}

export!(MPI_Comm_set_info, PMPI_Comm_set_info, (comm: Handle, info: Handle) -> c_int {
    guard("MPI_Comm_set_info", comm, || {
        state::comm(comm)?;
        set(comm, info)
    })
});

export!(MPI_Comm_get_info, PMPI_Comm_get_info, (comm: Handle, info_used: *mut Handle) -> c_int {
    guard("MPI_Comm_get_info", comm, || {
        state::comm(comm)?;
        let v = HINTS.with(|t| t.borrow().get(&(comm as usize)).cloned()).unwrap_or_default();
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(info_used, info_new(v)) }
    })
});

/// `MPI_Comm_dup` with hints `info` instead of the parent's.
fn dup_with_info(comm: Handle, info: Handle, newcomm: *mut Handle) -> CResult {
    info_ok(info)?;
    // SAFETY: the caller's output handle (MPI contract).
    let rc = unsafe { crate::env::PMPI_Comm_dup(comm, newcomm) };
    if rc != MPI_SUCCESS {
        return Err(err(rc, "MPI_Comm_dup failed"));
    }
    // SAFETY: written by MPI_Comm_dup just above.
    let h = unsafe { newcomm.read() };
    HINTS.with(|t| t.borrow_mut().remove(&(h as usize)));
    set(h, info)
}

export!(MPI_Comm_dup_with_info, PMPI_Comm_dup_with_info,
        (comm: Handle, info: Handle, newcomm: *mut Handle) -> c_int {
    guard("MPI_Comm_dup_with_info", comm, || dup_with_info(comm, info, newcomm))
});

export!(MPI_Comm_idup_with_info, PMPI_Comm_idup_with_info,
        (comm: Handle, info: Handle, newcomm: *mut Handle, request: *mut Handle) -> c_int {
    guard("MPI_Comm_idup_with_info", comm, || {
        crate::nbc::req_ok(request)?;
        dup_with_info(comm, info, newcomm)?;
        let h = state::add_req(state::ReqEntry::Done(MPI_Status::empty(MPI_ANY_SOURCE)));
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(request, h) }
    })
});

export!(MPI_Comm_create_group, PMPI_Comm_create_group,
        (comm: Handle, grp: Handle, tag: c_int, newcomm: *mut Handle) -> c_int {
    guard("MPI_Comm_create_group", comm, || {
        let c = state::comm(comm)?;
        if crate::inter::inter_of(comm).is_some() {
            return Err(err(MPI_ERR_COMM, "MPI_Comm_create_group needs an intracommunicator"));
        }
        let g = crate::comm::group(grp)?;
        if tag < 0 {
            return Err(err(MPI_ERR_TAG, format!("invalid tag {tag}")));
        }
        let parent = c.group();
        let ranks: Vec<c_int> = (0..g.size()).collect();
        if g.translate_ranks(&ranks, &parent).iter().any(Option::is_none) {
            return Err(err(MPI_ERR_GROUP, "group is not a subgroup of the communicator's"));
        }
        if newcomm.is_null() {
            return Err(err(MPI_ERR_ARG, "null newcomm"));
        }
        let h = match c.split_by_subgroup_with_tag(&g, tag) {
            Some(n) => state::add_comm(n, state::errhandler(comm)),
            None => COMM_NULL as Handle,
        };
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(newcomm, h) }
    })
});

export!(MPI_Comm_create_from_group, PMPI_Comm_create_from_group,
        (grp: Handle, stringtag: *const c_char, info: Handle, errhandler: Handle,
         newcomm: *mut Handle) -> c_int {
    guard("MPI_Comm_create_from_group", WORLD, || {
        info_ok(info)?;
        // SAFETY: a NUL-terminated string (MPI contract; null checked).
        let name = unsafe { cstr(stringtag)? };
        let g = crate::comm::group(grp)?;
        if newcomm.is_null() {
            return Err(err(MPI_ERR_ARG, "null newcomm"));
        }
        let world = state::comm(WORLD)?;
        let tag = string_tag(&name);
        let eh = if errhandler as usize == ERRHANDLER_NULL {
            state::errhandler(WORLD)
        } else {
            errhandler as usize
        };
        let h = match world.split_by_subgroup_with_tag(&g, tag) {
            Some(n) => state::add_comm(n, eh),
            None => COMM_NULL as Handle,
        };
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(newcomm, h) }
    })
});

/// The tag a string tag of the group-based constructors becomes (FNV-1a, non-negative).
pub(crate) fn string_tag(name: &str) -> c_int {
    name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    }) as c_int
        & 0x3fff_ffff
}

export!(MPI_Info_get_valuelen, PMPI_Info_get_valuelen,
        (info: Handle, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int) -> c_int {
    guard("MPI_Info_get_valuelen", WORLD, || {
        // SAFETY: NUL-terminated key (MPI contract; null checked).
        let k = unsafe { cstr(key)? };
        let v = info_get(info, |l| l.iter().find(|e| e.0 == k).map(|e| e.1.len()))?;
        // SAFETY: writable outputs (MPI contract; null checked).
        unsafe {
            if let Some(n) = v {
                out(valuelen, c_int::try_from(n).unwrap_or(c_int::MAX))?;
            }
            out(flag, v.is_some() as c_int)
        }
    })
});

const WORLD: Handle = COMM_WORLD as Handle;
/// `MPI_INFO_NULL`.
const INFO_NULL: usize = 0x130;
/// `MPI_ERRHANDLER_NULL`.
const ERRHANDLER_NULL: usize = 0x140;
