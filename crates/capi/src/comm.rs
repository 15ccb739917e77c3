//! Communicators and groups: `MPI_Comm_split`, `MPI_Comm_compare`, `MPI_Comm_group`,
//! `MPI_Comm_create`, `MPI_Group_{size,rank,incl,free}`, and the error-handler calls
//! `MPI_Errhandler_free`, `MPI_Comm_call_errhandler`.
//!
//! Groups live in a per-thread table (handles from 0x1000000 up, never reused);
//! `MPI_GROUP_EMPTY` is predefined. New communicators inherit the parent's error handler.

use crate::consts::*;
use crate::state;
use crate::{count, err, export, guard, out, raise, typed, CResult};
use phalanx::capi_support::Shared;
use phalanx::topology::{Color, Communicator, Group, UserGroup};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_int;

const WORLD: Handle = COMM_WORLD as Handle;
/// `MPI_GROUP_NULL`.
pub const GROUP_NULL: usize = 0x108;
/// `MPI_GROUP_EMPTY`.
pub const GROUP_EMPTY: usize = 0x109;
/// `MPI_IDENT` … `MPI_UNEQUAL`.
const IDENT: c_int = 201;
const CONGRUENT: c_int = 202;
const SIMILAR: c_int = 203;
const UNEQUAL: c_int = 204;

static GROUPS: Shared<RefCell<(HashMap<usize, UserGroup>, usize)>> =
    Shared::new(|| RefCell::new((HashMap::new(), 0)));

#[doc(hidden)]
pub fn add_group(g: UserGroup) -> Handle {
    GROUPS.with(|t| {
        let mut t = t.borrow_mut();
        let h = 0x100_0000 + t.1;
        t.1 += 1;
        t.0.insert(h, g);
        h as Handle
    })
}

/// The group behind handle `h` (`MPI_GROUP_EMPTY` included).
#[doc(hidden)]
pub fn group(h: Handle) -> CResult<UserGroup> {
    if h as usize == GROUP_EMPTY {
        return Ok(state::comm(COMM_SELF as Handle)?.group().include(&[]));
    }
    GROUPS
        .with(|t| t.borrow().0.get(&(h as usize)).cloned())
        .ok_or_else(|| err(MPI_ERR_GROUP, format!("invalid group {h:p}")))
}

export!(MPI_Comm_split, PMPI_Comm_split,
        (comm: Handle, color: c_int, key: c_int, newcomm: *mut Handle) -> c_int {
    guard("MPI_Comm_split", comm, || {
        let c = state::comm(comm)?;
        if newcomm.is_null() {
            return Err(err(MPI_ERR_ARG, "null newcomm"));
        }
        let col = match color {
            MPI_UNDEFINED => Color::undefined(),
            c if c >= 0 => Color::with_value(c),
            c => return Err(err(MPI_ERR_ARG, format!("invalid color {c}"))),
        };
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let h = match ic.split(col, key) {
                Some(n) => crate::inter::add_inter(n, state::errhandler(comm)),
                None => COMM_NULL as Handle,
            };
            // SAFETY: non-null, writable (MPI contract).
            return unsafe { out(newcomm, h) };
        }
        let h = match c.split_by_color_with_key(col, key) {
            Some(n) => state::add_comm(n, state::errhandler(comm)),
            None => COMM_NULL as Handle,
        };
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(newcomm, h) }
    })
});

export!(MPI_Comm_compare, PMPI_Comm_compare,
        (comm1: Handle, comm2: Handle, result: *mut c_int) -> c_int {
    guard("MPI_Comm_compare", comm1, || {
        let (a, b) = (state::comm(comm1)?, state::comm(comm2)?);
        let r = if comm1 == comm2 {
            IDENT
        } else {
            let (ga, gb) = (a.group(), b.group());
            let ranks: Vec<c_int> = (0..ga.size()).collect();
            if ga == gb {
                CONGRUENT
            } else if ga.size() == gb.size()
                && ga.translate_ranks(&ranks, &gb).iter().all(Option::is_some)
            {
                SIMILAR
            } else {
                UNEQUAL
            }
        };
        // SAFETY: writable int (MPI contract; null is checked).
        unsafe { out(result, r) }
    })
});

export!(MPI_Comm_group, PMPI_Comm_group, (comm: Handle, grp: *mut Handle) -> c_int {
    guard("MPI_Comm_group", comm, || {
        let g = state::comm(comm)?.group();
        let g = crate::inter::local_group(comm).unwrap_or(g);
        if grp.is_null() {
            return Err(err(MPI_ERR_ARG, "null group"));
        }
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(grp, add_group(g)) }
    })
});

export!(MPI_Group_size, PMPI_Group_size, (grp: Handle, size: *mut c_int) -> c_int {
    guard("MPI_Group_size", WORLD, || {
        let g = group(grp)?;
        // SAFETY: writable int (MPI contract; null is checked).
        unsafe { out(size, g.size()) }
    })
});

export!(MPI_Group_rank, PMPI_Group_rank, (grp: Handle, rank: *mut c_int) -> c_int {
    guard("MPI_Group_rank", WORLD, || {
        let g = group(grp)?;
        // SAFETY: writable int (MPI contract; null is checked).
        unsafe { out(rank, g.rank().unwrap_or(MPI_UNDEFINED)) }
    })
});

export!(MPI_Group_incl, PMPI_Group_incl,
        (grp: Handle, n: c_int, ranks: *const c_int, newgroup: *mut Handle) -> c_int {
    guard("MPI_Group_incl", WORLD, || {
        let g = group(grp)?;
        let n = count(n)?;
        // SAFETY: the caller passes n readable ints.
        let rs: &[c_int] = unsafe { typed(ranks.cast(), n)? };
        for (i, &r) in rs.iter().enumerate() {
            if !(0..g.size()).contains(&r) {
                return Err(err(MPI_ERR_RANK, format!("invalid rank {r} (group size {})", g.size())));
            }
            if rs[..i].contains(&r) {
                return Err(err(MPI_ERR_RANK, format!("rank {r} given twice")));
            }
        }
        if newgroup.is_null() {
            return Err(err(MPI_ERR_ARG, "null newgroup"));
        }
        let h = if n == 0 { GROUP_EMPTY as Handle } else { add_group(g.include(rs)) };
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(newgroup, h) }
    })
});

export!(MPI_Group_free, PMPI_Group_free, (grp: *mut Handle) -> c_int {
    guard("MPI_Group_free", WORLD, || {
        // SAFETY: the caller passes a readable and writable handle (null is checked).
        unsafe {
            let h = crate::p2p::read_req(grp)? as usize;
            if h != GROUP_EMPTY && GROUPS.with(|t| t.borrow_mut().0.remove(&h)).is_none() {
                return Err(err(MPI_ERR_GROUP, format!("invalid group {h:#x}")));
            }
            out(grp, GROUP_NULL as Handle)
        }
    })
});

export!(MPI_Comm_create, PMPI_Comm_create,
        (comm: Handle, grp: Handle, newcomm: *mut Handle) -> c_int {
    guard("MPI_Comm_create", comm, || {
        let c = state::comm(comm)?;
        let g = group(grp)?;
        let inter = crate::inter::inter_if(&c, comm);
        let parent = match &inter {
            Some(ic) => ic.local_communicator().group(),
            None => c.group(),
        };
        let ranks: Vec<c_int> = (0..g.size()).collect();
        if g.translate_ranks(&ranks, &parent).iter().any(Option::is_none) {
            return Err(err(MPI_ERR_GROUP, "group is not a subgroup of the communicator's"));
        }
        if newcomm.is_null() {
            return Err(err(MPI_ERR_ARG, "null newcomm"));
        }
        if let Some(ic) = inter {
            // Each group passes a subgroup of its own: the split with color 0 for its
            // members, ordered as in the group.
            let (color, key) = match g.rank() {
                Some(r) => (Color::with_value(0), r),
                None => (Color::undefined(), 0),
            };
            let h = match ic.split(color, key) {
                Some(n) => crate::inter::add_inter(n, state::errhandler(comm)),
                None => COMM_NULL as Handle,
            };
            // SAFETY: non-null, writable (MPI contract).
            return unsafe { out(newcomm, h) };
        }
        let h = match c.split_by_subgroup_collective(&g) {
            Some(n) => state::add_comm(n, state::errhandler(comm)),
            None => COMM_NULL as Handle,
        };
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(newcomm, h) }
    })
});

export!(MPI_Errhandler_free, PMPI_Errhandler_free, (errhandler: *mut Handle) -> c_int {
    guard("MPI_Errhandler_free", WORLD, || {
        // SAFETY: readable and writable handle (null is checked).
        unsafe {
            let h = crate::p2p::read_req(errhandler)? as usize;
            if !crate::errh::valid(h) {
                return Err(err(MPI_ERR_ARG, format!("invalid error handler {h:#x}")));
            }
            out(errhandler, 0x140 as Handle)
        }
    })
});

export!(MPI_Comm_call_errhandler, PMPI_Comm_call_errhandler,
        (comm: Handle, errorcode: c_int) -> c_int {
    let r = guard("MPI_Comm_call_errhandler", comm, || state::comm(comm).map(drop));
    if r != MPI_SUCCESS {
        return r;
    }
    if state::errhandler(comm) == ERRORS_RETURN {
        return MPI_SUCCESS;
    }
    // A user handler returns here; the predefined fatal ones end the job.
    raise("MPI_Comm_call_errhandler", comm, err(errorcode, "error raised by the program"));
    MPI_SUCCESS
});
