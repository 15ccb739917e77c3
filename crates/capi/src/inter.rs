//! Intercommunicators and dynamic processes: `MPI_Intercomm_create`,
//! `MPI_Intercomm_merge`, `MPI_Comm_test_inter`, `MPI_Comm_remote_size`,
//! `MPI_Comm_remote_group`, `MPI_Comm_spawn`, `MPI_Comm_spawn_multiple`,
//! `MPI_Comm_get_parent`, `MPI_Comm_disconnect`; and the intercommunicator forms of
//! `MPI_Comm_size`, `MPI_Comm_group`, `MPI_Comm_dup`, `MPI_Barrier` and `MPI_Bcast`
//! (called from their exports).
//!
//! Contract: an intercommunicator's handle maps to a [`CommEntry`](crate::state::CommEntry)
//! whose `comm` is the point-to-point side (so every send, receive and probe addresses
//! the remote group unchanged) and whose `inter` is the phalanx intercommunicator. The
//! other collectives on an intercommunicator are in `inter_coll` (rooted ones, and the
//! all-gather and all-to-all) or reach the core's intercommunicator collectives through
//! that point-to-point side (all-reduce, the varcount all-gather and all-to-all,
//! reduce-scatter block); the nonblocking and scan forms are errors.
//! Spawned processes run where `phalanx run` runs; `info` is not read; the error codes
//! (when not `MPI_ERRCODES_IGNORE`) are written at the root, `MPI_SUCCESS` for every
//! process started. `MPI_Comm_get_parent` returns the same handle every time (until it
//! is freed or disconnected).

use crate::consts::*;
use crate::state;
use crate::{err, export, guard, out, typed, CResult};
use phalanx::capi_support::Shared;
use phalanx::collective::Root;
use phalanx::topology::{Communicator, Group, InterCommunicator, MergeOrder};
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::process::Command;

const WORLD: Handle = COMM_WORLD as Handle;

/// Longest argument vector read from C (bounds the walk to its NULL).
const MAX_ARGS: usize = 4096;

/// The handle `MPI_Comm_get_parent` gave out (0: none yet).
static PARENT: Shared<Cell<usize>> = Shared::new(|| Cell::new(0));

/// The intercommunicator behind `h`, if it is one.
pub fn inter_of(h: Handle) -> Option<InterCommunicator> {
    state::with(|s| s.comms.get(&(h as usize)).and_then(|e| e.inter.clone()))
}

/// The intercommunicator behind `h` when `c`, its communicator, is one's point-to-point
/// side (one field read for every other communicator: the collectives' fast paths).
#[inline]
pub fn inter_if(c: &phalanx::topology::SimpleCommunicator, h: Handle) -> Option<InterCommunicator> {
    if c.c_is_inter() {
        inter_of(h)
    } else {
        None
    }
}

/// A new handle for `ic`, with error handler `errh`.
pub(crate) fn add_inter(ic: InterCommunicator, errh: usize) -> Handle {
    let h = state::add_comm(ic.as_simple().clone(), errh);
    state::with(|s| {
        if let Some(e) = s.comms.get_mut(&(h as usize)) {
            e.inter = Some(ic);
        }
    });
    h
}

/// The handle of intercommunicator `ic` (for `AsRaw`): the one already given for it, or
/// a new one.
pub fn handle_of(ic: &InterCommunicator) -> Handle {
    state::attach();
    let raw = phalanx::capi_support::RawComm::of(ic.as_simple());
    match state::known_handle(&raw, true) {
        Some(h) => h,
        None => add_inter(ic.clone(), ERRORS_ARE_FATAL),
    }
}

/// `MPI_COMM_NULL` into a non-null output handle before anything can fail.
fn null_first(h: *mut Handle) -> CResult {
    if h.is_null() {
        return Err(err(MPI_ERR_ARG, "null output communicator"));
    }
    // SAFETY: a non-null output handle is writable (MPI contract).
    unsafe { h.write(COMM_NULL as Handle) };
    Ok(())
}

fn phalanx_err(e: phalanx::Error) -> crate::CErr {
    let class = match e.class() {
        phalanx::ErrorClass::Comm => MPI_ERR_COMM,
        phalanx::ErrorClass::Rank => MPI_ERR_RANK,
        _ => MPI_ERR_ARG,
    };
    err(class, e.to_string())
}

export!(MPI_Intercomm_create, PMPI_Intercomm_create,
        (local_comm: Handle, local_leader: c_int, peer_comm: Handle, remote_leader: c_int,
         tag: c_int, newintercomm: *mut Handle) -> c_int {
    guard("MPI_Intercomm_create", local_comm, || {
        null_first(newintercomm)?;
        let local = state::comm(local_comm)?;
        if inter_of(local_comm).is_some() {
            return Err(err(MPI_ERR_COMM, "the local communicator is an intercommunicator"));
        }
        if tag < 0 {
            return Err(err(MPI_ERR_TAG, format!("invalid tag {tag}")));
        }
        // The peer communicator matters at the leader only (it may be MPI_COMM_NULL
        // elsewhere): the local one stands in for it there.
        let peer = if local.rank() == local_leader {
            state::comm(peer_comm)?
        } else {
            local.clone()
        };
        let ic = phalanx::collective::create_intercommunicator(
            &local,
            local_leader,
            &peer,
            remote_leader,
            tag,
        )
        .map_err(phalanx_err)?;
        // SAFETY: non-null, writable (checked above).
        unsafe { out(newintercomm, add_inter(ic, state::errhandler(local_comm))) }
    })
});

export!(MPI_Intercomm_create_from_groups, PMPI_Intercomm_create_from_groups,
        (local_group: Handle, local_leader: c_int, remote_group: Handle, remote_leader: c_int,
         stringtag: *const c_char, info: Handle, errhandler: Handle,
         newintercomm: *mut Handle) -> c_int {
    guard("MPI_Intercomm_create_from_groups", WORLD, || {
        null_first(newintercomm)?;
        crate::misc::info_ok(info)?;
        // SAFETY: a NUL-terminated string (MPI contract; null checked).
        let name = unsafe { crate::misc::cstr(stringtag)? };
        let (lg, rg) = (crate::comm::group(local_group)?, crate::comm::group(remote_group)?);
        let world = state::comm(WORLD)?;
        // Built from the world without messages among each group (told apart by the
        // string tag and by call order), then joined by the leaders over a private
        // communicator of both groups, ordered by world rank on both sides.
        let tag = crate::comm_info::string_tag(&name);
        let (lm, _) = lg.members_and_me();
        let (rm, _) = rg.members_and_me();
        let Some(&leader) = usize::try_from(remote_leader).ok().and_then(|r| rm.get(r)) else {
            return Err(err(MPI_ERR_RANK, format!("invalid remote leader {remote_leader}")));
        };
        let mut both: Vec<u32> = lm.iter().chain(rm).copied().collect();
        both.sort_unstable();
        both.dedup();
        if both.len() != lm.len() + rm.len() {
            return Err(err(MPI_ERR_GROUP, "the two groups overlap"));
        }
        let ranks: Vec<c_int> = both.iter().map(|&w| w as c_int).collect();
        let union = world.group().include(&ranks);
        let outside = || err(MPI_ERR_GROUP, "the calling process is not in the local group");
        let local = world.split_by_subgroup_with_tag(&lg, tag).ok_or_else(outside)?;
        let peer = world.split_by_subgroup_with_tag(&union, tag).ok_or_else(outside)?;
        let remote_in_peer = both.iter().position(|&w| w == leader).unwrap_or(0) as c_int;
        let ic = phalanx::collective::create_intercommunicator(
            &local,
            local_leader,
            &peer,
            remote_in_peer,
            tag,
        )
        .map_err(phalanx_err)?;
        let eh = if errhandler as usize == 0x140 {
            state::errhandler(WORLD)
        } else {
            errhandler as usize
        };
        // SAFETY: non-null, writable (checked above).
        unsafe { out(newintercomm, add_inter(ic, eh)) }
    })
});

export!(MPI_Intercomm_merge, PMPI_Intercomm_merge,
        (intercomm: Handle, high: c_int, newintracomm: *mut Handle) -> c_int {
    guard("MPI_Intercomm_merge", intercomm, || {
        null_first(newintracomm)?;
        state::comm(intercomm)?;
        let ic = inter_of(intercomm)
            .ok_or_else(|| err(MPI_ERR_COMM, "not an intercommunicator"))?;
        let order = if high != 0 { MergeOrder::High } else { MergeOrder::Low };
        let merged = ic.merge(order);
        let h = state::add_comm(merged, state::errhandler(intercomm));
        // SAFETY: non-null, writable (checked above).
        unsafe { out(newintracomm, h) }
    })
});

export!(MPI_Comm_test_inter, PMPI_Comm_test_inter, (comm: Handle, flag: *mut c_int) -> c_int {
    guard("MPI_Comm_test_inter", comm, || {
        state::comm(comm)?;
        let f = inter_of(comm).is_some() as c_int;
        // SAFETY: the caller passes a writable int (null is checked).
        unsafe { out(flag, f) }
    })
});

export!(MPI_Comm_remote_size, PMPI_Comm_remote_size, (comm: Handle, size: *mut c_int) -> c_int {
    guard("MPI_Comm_remote_size", comm, || {
        state::comm(comm)?;
        let ic = inter_of(comm).ok_or_else(|| err(MPI_ERR_COMM, "not an intercommunicator"))?;
        // SAFETY: the caller passes a writable int (null is checked).
        unsafe { out(size, ic.remote_size()) }
    })
});

export!(MPI_Comm_remote_group, PMPI_Comm_remote_group,
        (comm: Handle, group: *mut Handle) -> c_int {
    guard("MPI_Comm_remote_group", comm, || {
        state::comm(comm)?;
        let ic = inter_of(comm).ok_or_else(|| err(MPI_ERR_COMM, "not an intercommunicator"))?;
        if group.is_null() {
            return Err(err(MPI_ERR_ARG, "null group"));
        }
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(group, crate::comm::add_group(ic.remote_group())) }
    })
});

/// The C string at `p` as UTF-8.
///
/// # Safety
/// `p` is null (an error) or NUL-terminated.
unsafe fn text(p: *const c_char, what: &str) -> CResult<String> {
    if p.is_null() {
        return Err(err(MPI_ERR_ARG, format!("null {what}")));
    }
    // SAFETY: NUL-terminated (caller).
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(str::to_owned)
        .map_err(|_| err(MPI_ERR_ARG, format!("{what} is not UTF-8")))
}

/// The command `command argv[0] argv[1] …` (`argv` NULL-terminated, or `MPI_ARGV_NULL`).
///
/// # Safety
/// `command` is NUL-terminated; `argv` is null or a NULL-terminated array of
/// NUL-terminated strings (MPI contract).
unsafe fn command(command: *const c_char, argv: *const *const c_char) -> CResult<Command> {
    // SAFETY: as the caller promises.
    let mut c = Command::new(unsafe { text(command, "command") }?);
    if !argv.is_null() {
        for i in 0..=MAX_ARGS {
            if i == MAX_ARGS {
                return Err(err(MPI_ERR_ARG, format!("more than {MAX_ARGS} arguments")));
            }
            // SAFETY: NULL-terminated array (caller): read up to its NULL.
            let a = unsafe { *argv.add(i) };
            if a.is_null() {
                break;
            }
            // SAFETY: NUL-terminated (caller).
            c.arg(unsafe { text(a, "argument") }?);
        }
    }
    Ok(c)
}

/// Spawns at the root of `comm`, writes the intercommunicator and the error codes.
fn spawn(
    comm: Handle,
    root: c_int,
    commands: CResult<(Vec<Command>, Vec<c_int>)>,
    intercomm: *mut Handle,
    errcodes: *mut c_int,
) -> CResult {
    let c = state::comm(comm)?;
    if inter_of(comm).is_some() {
        return Err(err(MPI_ERR_COMM, "spawn needs an intracommunicator"));
    }
    if !(0..c.size()).contains(&root) {
        return Err(err(MPI_ERR_ROOT, format!("invalid root {root}")));
    }
    let at_root = c.rank() == root;
    // The root's arguments must be good before the others join the collective; a bad
    // one gives every member an error (the spawn below fails for all).
    let (cmds, counts) = match commands {
        Ok(x) => x,
        Err(e) if at_root => {
            let _ = c.process_at_rank(root).spawn_multiple(&[], &[]);
            return Err(e);
        }
        Err(_) => (Vec::new(), Vec::new()),
    };
    match c.process_at_rank(root).spawn_multiple(&cmds, &counts) {
        Ok(ic) => {
            if at_root && !errcodes.is_null() {
                let n: c_int = counts.iter().sum();
                for i in 0..n.max(0) as usize {
                    // SAFETY: the root passes room for its maxprocs codes (MPI contract).
                    unsafe { errcodes.add(i).write(MPI_SUCCESS) };
                }
            }
            // SAFETY: non-null, writable (checked by the caller).
            unsafe { out(intercomm, add_inter(ic, state::errhandler(comm))) }
        }
        Err(e) => Err(err(MPI_ERR_SPAWN, e.to_string())),
    }
}

export!(MPI_Comm_spawn, PMPI_Comm_spawn,
        (cmd: *const c_char, argv: *mut *mut c_char, maxprocs: c_int, info: Handle, root: c_int,
         comm: Handle, intercomm: *mut Handle, array_of_errcodes: *mut c_int) -> c_int {
    guard("MPI_Comm_spawn", comm, || {
        let _ = info;
        null_first(intercomm)?;
        let c = state::comm(comm)?;
        let cmds = if c.rank() == root {
            // SAFETY: the root passes a command and a NULL-terminated argv (MPI contract).
            unsafe { command(cmd, argv as *const *const c_char) }.map(|x| (vec![x], vec![maxprocs]))
        } else {
            Ok((Vec::new(), Vec::new()))
        };
        spawn(comm, root, cmds, intercomm, array_of_errcodes)
    })
});

export!(MPI_Comm_spawn_multiple, PMPI_Comm_spawn_multiple,
        (count: c_int, array_of_commands: *mut *mut c_char, array_of_argv: *mut *mut *mut c_char,
         array_of_maxprocs: *const c_int, array_of_info: *const Handle, root: c_int, comm: Handle,
         intercomm: *mut Handle, array_of_errcodes: *mut c_int) -> c_int {
    guard("MPI_Comm_spawn_multiple", comm, || {
        let _ = array_of_info;
        null_first(intercomm)?;
        let c = state::comm(comm)?;
        let cmds = if c.rank() == root {
            (|| {
                let n = crate::count(count)?;
                // SAFETY: the root passes `count` commands, argv vectors and counts
                // (MPI contract; null and alignment are checked).
                let (progs, counts) = unsafe {
                    (
                        typed::<*const c_char>(array_of_commands as *const c_void, n)?,
                        typed::<c_int>(array_of_maxprocs as *const c_void, n)?,
                    )
                };
                let mut cmds = Vec::with_capacity(n);
                for (i, &p) in progs.iter().enumerate() {
                    let argv = if array_of_argv.is_null() {
                        std::ptr::null()
                    } else {
                        // SAFETY: `count` argv entries (MPI contract).
                        unsafe { *array_of_argv.add(i) as *const *const c_char }
                    };
                    // SAFETY: NUL-terminated command, NULL-terminated argv (MPI contract).
                    cmds.push(unsafe { command(p, argv) }?);
                }
                Ok((cmds, counts.to_vec()))
            })()
        } else {
            Ok((Vec::new(), Vec::new()))
        };
        spawn(comm, root, cmds, intercomm, array_of_errcodes)
    })
});

export!(MPI_Comm_get_parent, PMPI_Comm_get_parent, (parent: *mut Handle) -> c_int {
    guard("MPI_Comm_get_parent", WORLD, || {
        null_first(parent)?;
        let kept = PARENT.with(Cell::get);
        if kept != 0 && state::is_live_comm(kept as Handle) {
            // SAFETY: non-null, writable (checked above).
            return unsafe { out(parent, kept as Handle) };
        }
        let world = state::comm(WORLD)?;
        let Some(ic) = world.parent() else {
            return Ok(());
        };
        let h = add_inter(ic, state::errhandler(WORLD));
        PARENT.with(|p| p.set(h as usize));
        // SAFETY: non-null, writable (checked above).
        unsafe { out(parent, h) }
    })
});

export!(MPI_Comm_disconnect, PMPI_Comm_disconnect, (comm: *mut Handle) -> c_int {
    if comm.is_null() {
        return guard("MPI_Comm_disconnect", WORLD, || Err(err(MPI_ERR_ARG, "null communicator pointer")));
    }
    // SAFETY: non-null, and the caller passes a readable handle.
    let h = unsafe { comm.read() };
    guard("MPI_Comm_disconnect", h, || {
        state::comm(h)?;
        // Collective: every message between the groups has arrived once all passed.
        barrier(h)?;
        // SAFETY: non-null, readable and writable (MPI contract).
        let rc = unsafe { crate::env::MPI_Comm_free(comm) };
        if rc != MPI_SUCCESS {
            return Err(err(rc, "MPI_Comm_disconnect: freeing the communicator failed"));
        }
        Ok(())
    })
});

/// `MPI_Barrier` on `h`, intercommunicator or not.
pub fn barrier(h: Handle) -> CResult {
    let c = state::comm(h)?;
    match inter_if(&c, h) {
        Some(ic) => ic.barrier(),
        None => {
            use phalanx::collective::CommunicatorCollectives;
            let kind = phalanx::capi_support::CollKind::Barrier;
            if !crate::coll::lean_bytes(&c, kind, 0, 0, None, None)? {
                c.barrier();
            }
        }
    }
    Ok(())
}

/// `MPI_Bcast` of `buf` on intercommunicator `ic` with `root` as MPI defines it there:
/// `MPI_ROOT` at the root, `MPI_PROC_NULL` at its group's other members, the root's
/// remote rank at the receivers.
pub fn bcast_inter(ic: &InterCommunicator, root: c_int, buf: &mut [u8]) -> CResult {
    match root {
        MPI_ROOT => ic.broadcast_root(&buf[..]),
        MPI_PROC_NULL => {}
        r if (0..ic.remote_size()).contains(&r) => ic.broadcast_from(r, buf),
        r => {
            return Err(err(
                MPI_ERR_ROOT,
                format!("invalid root {r} on an intercommunicator"),
            ))
        }
    }
    Ok(())
}

/// `MPI_Comm_size` of an intercommunicator: its local group's.
pub fn local_size(h: Handle) -> Option<c_int> {
    inter_of(h).map(|ic| ic.size())
}

/// `MPI_Comm_group` of an intercommunicator: its local group.
pub fn local_group(h: Handle) -> Option<phalanx::topology::UserGroup> {
    inter_of(h).map(|ic| ic.group())
}

/// `MPI_Comm_dup` of an intercommunicator.
pub fn dup(h: Handle) -> Option<Handle> {
    inter_of(h).map(|ic| add_inter(ic.duplicate(), state::errhandler(h)))
}
