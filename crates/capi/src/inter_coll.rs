//! The collectives on intercommunicators from C (MPI 4.1 §6.2.2), called from the
//! collectives' exports when the handle is an intercommunicator: `MPI_Gather(v)`,
//! `MPI_Scatter(v)` and `MPI_Reduce` with `MPI_ROOT` (the root), `MPI_PROC_NULL` (its
//! group's other members) or the root's rank in the remote group (the other group), and
//! `MPI_Allgather`/`MPI_Alltoall`, whose send and receive blocks may differ in length
//! (the two groups' counts pair up, not a member's own).
//!
//! Contract: every call runs on the core's intercommunicator collectives
//! (`phalanx::collective`, `intercoll`: gathers and reductions to a leader, the leaders
//! across, a broadcast or scatter behind); the buffers are the caller's bytes, in the
//! predefined datatypes (a derived datatype in a rooted intercommunicator collective is
//! `MPI_ERR_TYPE`, said plainly). `MPI_Allreduce`, `MPI_Allgatherv`, `MPI_Alltoallv`,
//! `MPI_Reduce_scatter_block` and `MPI_Barrier` need nothing here: the handle's
//! communicator is the intercommunicator's point-to-point side, whose collectives are the
//! intercommunicator's. A reduction with an operation or datatype the core does not
//! reduce (user functions, `MAXLOC`…), and `MPI_Reduce_scatter`, run on the nonblocking
//! schedules of [`crate::inter_nbc`] and wait. `MPI_IN_PLACE` is `MPI_ERR_ARG` there (as MPI defines it).

use crate::coll::{system_op, with_kind};
use crate::consts::*;
use crate::env::datatype_of;
use crate::vlayout::VLayout;
use crate::{bytes, bytes_mut, count, err, typed, CResult};
use phalanx::collective::{CommunicatorCollectives, Root};
use phalanx::datatype::Equivalence;
use phalanx::topology::{Communicator, InterCommunicator};
use std::ffi::{c_int, c_void};

/// What a member does in a rooted collective.
pub(crate) enum Role {
    /// The root (`MPI_ROOT`).
    Root,
    /// Another member of the root's group (`MPI_PROC_NULL`).
    Idle,
    /// A member of the other group; the root's rank there.
    Member(c_int),
}

pub(crate) fn role(ic: &InterCommunicator, root: c_int) -> CResult<Role> {
    match root {
        MPI_ROOT => Ok(Role::Root),
        MPI_PROC_NULL => Ok(Role::Idle),
        r if (0..ic.remote_size()).contains(&r) => Ok(Role::Member(r)),
        r => Err(err(
            MPI_ERR_ROOT,
            format!(
                "invalid root {r} on an intercommunicator (MPI_ROOT, MPI_PROC_NULL or a rank \
                 of the remote group of {})",
                ic.remote_size()
            ),
        )),
    }
}

fn basic(ts: &[Handle]) -> CResult {
    if crate::coll_dt::any_derived(ts) {
        return Err(err(
            MPI_ERR_TYPE,
            "derived datatypes in rooted collectives on an intercommunicator are not \
             supported yet",
        ));
    }
    Ok(())
}

/// A reduction on an intercommunicator must take an operation the core runs.
pub fn predefined(op: Handle, t: Handle) -> CResult {
    if crate::localop::core_supported(op, t) {
        return Ok(());
    }
    Err(err(
        MPI_ERR_OP,
        "on an intercommunicator, reductions take the predefined operations on predefined \
         types only (not yet user functions, MAXLOC/MINLOC or MPI_REPLACE)",
    ))
}

fn len(cnt: c_int, t: Handle) -> CResult<usize> {
    Ok(count(cnt)? * datatype_of(t)?.size)
}

fn remote(ic: &InterCommunicator) -> usize {
    ic.remote_size() as usize
}

/// `MPI_Gather` on an intercommunicator.
///
/// # Safety
/// Buffers as MPI requires for the call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gather(
    ic: &InterCommunicator,
    s: *const c_void,
    sc: c_int,
    st: Handle,
    r: *mut c_void,
    rc: c_int,
    rt: Handle,
    root: c_int,
) -> CResult {
    match role(ic, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            basic(&[rt])?;
            // SAFETY: the root passes remote size × rc elements.
            let r = unsafe { bytes_mut(r, len(rc, rt)? * remote(ic))? };
            ic.gather_root(r);
            Ok(())
        }
        Role::Member(root) => {
            basic(&[st])?;
            // SAFETY: sc readable elements.
            let s = unsafe { bytes(s, len(sc, st)?)? };
            ic.process_at_rank(root).gather_into(s);
            Ok(())
        }
    }
}

/// `MPI_Gatherv` on an intercommunicator.
///
/// # Safety
/// Buffers as MPI requires for the call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gatherv(
    ic: &InterCommunicator,
    s: *const c_void,
    sc: c_int,
    st: Handle,
    r: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rt: Handle,
    root: c_int,
) -> CResult {
    match role(ic, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            basic(&[rt])?;
            let sz = datatype_of(rt)?.size;
            // SAFETY: remote size counts and displacements (MPI contract).
            let l = unsafe { VLayout::new(r, rcounts, displs, remote(ic), sz)? };
            // SAFETY: the blocks lie in the receive buffer.
            unsafe { l.write(None, |_, part| ic.gather_varcount_root(part)) }
        }
        Role::Member(root) => {
            basic(&[st])?;
            // SAFETY: sc readable elements.
            let s = unsafe { bytes(s, len(sc, st)?)? };
            ic.process_at_rank(root).gather_varcount_into(s);
            Ok(())
        }
    }
}

/// `MPI_Scatter` on an intercommunicator.
///
/// # Safety
/// Buffers as MPI requires for the call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn scatter(
    ic: &InterCommunicator,
    s: *const c_void,
    sc: c_int,
    st: Handle,
    r: *mut c_void,
    rc: c_int,
    rt: Handle,
    root: c_int,
) -> CResult {
    match role(ic, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            basic(&[st])?;
            // SAFETY: the root passes remote size × sc elements.
            let s = unsafe { bytes(s, len(sc, st)? * remote(ic))? };
            ic.scatter_root(s);
            Ok(())
        }
        Role::Member(root) => {
            basic(&[rt])?;
            // SAFETY: rc writable elements.
            let r = unsafe { bytes_mut(r, len(rc, rt)?)? };
            ic.process_at_rank(root).scatter_into(r);
            Ok(())
        }
    }
}

/// `MPI_Scatterv` on an intercommunicator.
///
/// # Safety
/// Buffers as MPI requires for the call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn scatterv(
    ic: &InterCommunicator,
    s: *const c_void,
    scounts: *const c_int,
    displs: *const c_int,
    st: Handle,
    r: *mut c_void,
    rc: c_int,
    rt: Handle,
    root: c_int,
) -> CResult {
    match role(ic, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            basic(&[st])?;
            let sz = datatype_of(st)?.size;
            // SAFETY: remote size counts and displacements (MPI contract).
            let l = unsafe { VLayout::new(s, scounts, displs, remote(ic), sz)? };
            // SAFETY: the blocks lie in the send buffer.
            unsafe { l.read(|part| ic.scatter_varcount_root(part)) }
        }
        Role::Member(root) => {
            basic(&[rt])?;
            // SAFETY: rc writable elements.
            let r = unsafe { bytes_mut(r, len(rc, rt)?)? };
            ic.process_at_rank(root).scatter_varcount_into(r);
            Ok(())
        }
    }
}

fn reduce_member<T: Equivalence + Copy>(
    ic: &InterCommunicator,
    s: *const c_void,
    n: usize,
    op: phalanx::collective::SystemOperation,
    root: c_int,
) -> CResult {
    // SAFETY: n readable elements (MPI contract).
    let s: &[T] = unsafe { typed(s, n)? };
    ic.process_at_rank(root).reduce_into(s, op);
    Ok(())
}

/// `MPI_Reduce` on an intercommunicator (predefined operations).
///
/// # Safety
/// Buffers as MPI requires for the call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce(
    ic: &InterCommunicator,
    s: *const c_void,
    r: *mut c_void,
    cnt: c_int,
    t: Handle,
    op: Handle,
    root: c_int,
) -> CResult {
    basic(&[t])?;
    predefined(op, t)?;
    match role(ic, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            // SAFETY: cnt writable elements at the root.
            let r = unsafe { bytes_mut(r, len(cnt, t)?)? };
            ic.reduce_root(r);
            Ok(())
        }
        Role::Member(root) => {
            let dt = datatype_of(t)?;
            let n = count(cnt)?;
            let o = system_op(op)?;
            with_kind!(dt.kind, T, reduce_member::<T>(ic, s, n, o, root))
        }
    }
}

/// `MPI_Allgather` (`to_all` false) or `MPI_Alltoall` on an intercommunicator: the
/// receive buffer holds one block per remote member; an all-to-all's send buffer too.
///
/// # Safety
/// Buffers as MPI requires for the call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn all(
    ic: &InterCommunicator,
    s: *const c_void,
    sc: c_int,
    st: Handle,
    r: *mut c_void,
    rc: c_int,
    rt: Handle,
    to_all: bool,
) -> CResult {
    basic(&[st, rt])?;
    let q = remote(ic);
    let sl = len(sc, st)? * if to_all { q } else { 1 };
    let rl = len(rc, rt)? * q;
    crate::disjoint(s, sl, r, rl)?;
    // SAFETY: both buffers as MPI requires, disjoint (checked).
    let (s, r) = unsafe { (bytes(s, sl)?, bytes_mut(r, rl)?) };
    if to_all {
        ic.all_to_all_into(s, r);
    } else {
        ic.all_gather_into(s, r);
    }
    Ok(())
}
