//! Nonblocking collectives: `MPI_Ibcast`, `MPI_Igather`, `MPI_Iscatter`,
//! `MPI_Iallgather`, `MPI_Ialltoall`, `MPI_Ireduce`, `MPI_Iallreduce`, `MPI_Iscan`,
//! `MPI_Iexscan` (and `MPI_Comm_idup`; the varying-count ones and the reduce-scatters are
//! in [`crate::nbc_v`]).
//!
//! Contract: each call checks its arguments, starts the core's immediate collective
//! (`immediate_broadcast_into`, `immediate_gather_into(_root)`, ...) and returns a live
//! request; the collective progresses while the program does anything else that drives
//! the engine (point-to-point, other collectives, `MPI_Test*`) and completes in
//! `MPI_Wait*`/`MPI_Test*` (status empty). Buffers follow the nonblocking rule (valid and
//! untouched until completion), so they are handed to the core as `'static` slices kept
//! with the request (see [`crate::p2p`]). Contiguous buffers are used in place; derived
//! datatypes are packed into request-owned temporaries at the start and received blocks
//! are unpacked into the user's layout at completion ([`Staged`]). `MPI_IN_PLACE` is served
//! by a request-owned copy of this rank's contribution taken at the start.
//!
//! Reductions: the core reduces predefined operations on predefined numeric types
//! itself (`immediate_reduce_into(_root)`, `immediate_all_reduce_into`,
//! `immediate_scan_into`). Every other case — user operations, `MINLOC`/`MAXLOC`,
//! complex types, derived datatypes, and `MPI_Iexscan` always — is still asynchronous:
//! the packed contributions are gathered (`Ireduce`) or all-gathered (the others) with
//! the immediate collective, and at completion each receiving rank folds them in rank
//! order `(((a0 op a1) op a2) …)` as the blocking generic path does ([`crate::ops`]),
//! using `count × size × members` bytes of temporary space. As with the blocking calls,
//! all members must pass the same datatype kind (all predefined or all derived).
//!
//! `MPI_Comm_idup` runs `MPI_Comm_dup` and returns a completed request (limit).

use crate::coll::{in_place, root_ok, same_block, system_op, with_kind};
use crate::consts::*;
use crate::inter_nbc::{self, uniform};
use crate::localop::{core_supported, reducer, validate, Reducer};
use crate::state::{self, AnyRequest, LiveReq, ReqEntry, Staged};
use crate::types::{layout_of, pack, unpack, Layout};
use crate::{
    bytes, bytes_mut, count, disjoint, err, export, guard, out, span, typed, typed_mut, CResult,
    Count,
};
use phalanx::collective::SystemOperation;
use phalanx::datatype::Equivalence;
use phalanx::request::StaticScope;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::{Communicator, CommunicatorCollectives, Root};
use std::ffi::{c_int, c_void};
use std::rc::Rc;

pub(crate) fn req_ok(request: *mut Handle) -> CResult {
    if request.is_null() {
        return Err(err(MPI_ERR_ARG, "null request pointer"));
    }
    Ok(())
}

/// Registers the running collective `req` with its temporaries; writes the handle.
pub(crate) fn register(
    comm: Handle,
    req: Box<dyn AnyRequest>,
    staged: Staged,
    request: *mut Handle,
) -> CResult {
    let e = ReqEntry::Live {
        req: LiveReq::Coll(req),
        comm: comm as usize,
        staged: Some(staged),
    };
    // SAFETY: non-null (checked by the caller), writable (MPI contract).
    unsafe { out(request, state::add_req(e)) }
}

/// `n` elements of `l` at `buf` as bytes for a request: the user memory itself when `l`
/// is contiguous, else a packed copy held by `sg`.
///
/// # Safety
/// `buf` holds `n` elements of `l`, unmodified until the request completes.
pub(crate) unsafe fn src(
    sg: &mut Staged,
    buf: *const c_void,
    n: usize,
    l: &Layout,
) -> CResult<&'static [u8]> {
    if l.is_contiguous() {
        // SAFETY: caller ('static by the nonblocking contract, see crate::p2p).
        unsafe { bytes(buf, span(n, l.size)?) }
    } else {
        // SAFETY: caller.
        Ok(sg.hold(unsafe { pack(l, buf, n)? }))
    }
}

/// A packed copy, held by `sg`, of `n` elements of `l` at `buf` (for `MPI_IN_PLACE`).
///
/// # Safety
/// `buf` holds `n` readable elements of `l`.
pub(crate) unsafe fn copy(
    sg: &mut Staged,
    buf: *const c_void,
    n: usize,
    l: &Layout,
) -> CResult<&'static [u8]> {
    span(n, l.size)?;
    // SAFETY: caller.
    Ok(sg.hold(unsafe { pack(l, buf, n)? }))
}

/// The landing area of `n` received elements of `l` at `buf`: the user memory itself
/// when `l` is contiguous, else a temporary held by `sg` and unpacked at completion.
///
/// # Safety
/// `buf` has room for `n` elements of `l`, valid and untouched until completion.
pub(crate) unsafe fn dst(
    sg: &mut Staged,
    buf: *mut c_void,
    n: usize,
    l: Rc<Layout>,
) -> CResult<&'static mut [u8]> {
    let len = span(n, l.size)?;
    if l.is_contiguous() {
        // SAFETY: caller ('static by the nonblocking contract).
        return unsafe { bytes_mut(buf, len) };
    }
    crate::types::check_base(&l, buf, n)?;
    let i = sg.len();
    let v = sg.hold(vec![0; len]);
    // SAFETY: the user buffer is valid at completion (nonblocking contract).
    sg.then(Box::new(move |b, _| unsafe { unpack(&l, b[i], buf, n) }));
    Ok(v)
}

/// `buf` advanced by `i` elements of `l`.
pub(crate) fn at(buf: *const c_void, i: isize, l: &Layout) -> *const c_void {
    (buf as *const u8).wrapping_offset(i * l.extent).cast()
}

export!(MPI_Ibcast, PMPI_Ibcast,
        (buffer: *mut c_void, cnt: c_int, datatype: Handle, root: c_int, comm: Handle,
         request: *mut Handle) -> c_int {
    ibcast_impl("MPI_Ibcast", buffer, cnt.into(), datatype, root, comm, request)
});

/// `MPI_Ibcast` (and `MPI_Ibcast_c`).
pub(crate) fn ibcast_impl(
    name: &str,
    buffer: *mut c_void,
    cnt: Count,
    datatype: Handle,
    root: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            // SAFETY: the caller's buffer (nonblocking contract).
            return unsafe {
                crate::inter_nbc::ibcast(&ic, (buffer, cnt, datatype, root), comm, request)
            };
        }
        let root = root_ok(&c, root)?;
        let l = layout_of(datatype)?;
        let n = count(cnt)?;
        req_ok(request)?;
        let mut sg = Staged::default();
        // SAFETY: the caller's buffer (nonblocking contract).
        let b = unsafe {
            if l.is_contiguous() {
                bytes_mut(buffer, span(n, l.size)?)?
            } else if c.rank() == root {
                sg.hold(pack(&l, buffer, n)?)
            } else {
                dst(&mut sg, buffer, n, l)?
            }
        };
        let r = c
            .process_at_rank(root)
            .immediate_broadcast_into(StaticScope, b);
        register(comm, Box::new(r), sg, request)
    })
}

export!(MPI_Igather, PMPI_Igather,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle,
         request: *mut Handle) -> c_int {
    igather_impl("MPI_Igather", (sendbuf, sendcount.into(), sendtype),
                 (recvbuf, recvcount.into(), recvtype), root, comm, request)
});

/// `MPI_Igather` (and `MPI_Igather_c`).
pub(crate) fn igather_impl(
    name: &str,
    (sendbuf, sendcount, sendtype): (*const c_void, Count, Handle),
    (recvbuf, recvcount, recvtype): (*mut c_void, Count, Handle),
    root: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let recv = || Ok((recvbuf, uniform(recvcount, ic.remote_size())?, recvtype));
            // SAFETY: the caller's buffers (nonblocking contract).
            return unsafe {
                inter_nbc::igather(
                    &ic,
                    (sendbuf, sendcount, sendtype),
                    recv,
                    root,
                    comm,
                    request,
                )
            };
        }
        let root = root_ok(&c, root)?;
        req_ok(request)?;
        let mut sg = Staged::default();
        let p = c.process_at_rank(root);
        if c.rank() != root {
            // SAFETY: the caller's buffer (nonblocking contract).
            let s = unsafe { src(&mut sg, sendbuf, count(sendcount)?, &*layout_of(sendtype)?)? };
            return register(
                comm,
                Box::new(p.immediate_gather_into(StaticScope, s)),
                sg,
                request,
            );
        }
        let rl = layout_of(recvtype)?;
        let rc = count(recvcount)?;
        let size = c.size() as usize;
        // SAFETY: the caller's buffers (nonblocking contract).
        let s = unsafe {
            if in_place(sendbuf) {
                copy(
                    &mut sg,
                    at(recvbuf, root as isize * rc as isize, &rl),
                    rc,
                    &rl,
                )?
            } else {
                let sl = layout_of(sendtype)?;
                let sc = count(sendcount)?;
                same_block(span(sc, sl.size)?, span(rc, rl.size)?)?;
                if sl.is_contiguous() && rl.is_contiguous() {
                    disjoint(sendbuf, sc * sl.size, recvbuf, span(rc * rl.size, size)?)?;
                }
                src(&mut sg, sendbuf, sc, &sl)?
            }
        };
        // SAFETY: as above.
        let r = unsafe { dst(&mut sg, recvbuf, span(rc, size)?, rl)? };
        register(
            comm,
            Box::new(p.immediate_gather_into_root(StaticScope, s, r)),
            sg,
            request,
        )
    })
}

export!(MPI_Iscatter, PMPI_Iscatter,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle,
         request: *mut Handle) -> c_int {
    iscatter_impl("MPI_Iscatter", (sendbuf, sendcount.into(), sendtype),
                  (recvbuf, recvcount.into(), recvtype), root, comm, request)
});

/// `MPI_Iscatter` (and `MPI_Iscatter_c`).
pub(crate) fn iscatter_impl(
    name: &str,
    (sendbuf, sendcount, sendtype): (*const c_void, Count, Handle),
    (recvbuf, recvcount, recvtype): (*mut c_void, Count, Handle),
    root: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let send = || Ok((sendbuf, uniform(sendcount, ic.remote_size())?, sendtype));
            // SAFETY: the caller's buffers (nonblocking contract).
            return unsafe {
                inter_nbc::iscatter(
                    &ic,
                    send,
                    (recvbuf, recvcount, recvtype),
                    root,
                    comm,
                    request,
                )
            };
        }
        let root = root_ok(&c, root)?;
        req_ok(request)?;
        let mut sg = Staged::default();
        let p = c.process_at_rank(root);
        if c.rank() != root {
            // SAFETY: the caller's buffer (nonblocking contract).
            let r = unsafe { dst(&mut sg, recvbuf, count(recvcount)?, layout_of(recvtype)?)? };
            return register(
                comm,
                Box::new(p.immediate_scatter_into(StaticScope, r)),
                sg,
                request,
            );
        }
        let sl = layout_of(sendtype)?;
        let sc = count(sendcount)?;
        let size = c.size() as usize;
        // SAFETY: the caller's buffers (nonblocking contract).
        let (s, r) = unsafe {
            let s = src(&mut sg, sendbuf, span(sc, size)?, &sl)?;
            let r = if in_place(recvbuf) {
                sg.hold(vec![0; sc * sl.size])
            } else {
                let rl = layout_of(recvtype)?;
                let rc = count(recvcount)?;
                same_block(sc * sl.size, span(rc, rl.size)?)?;
                if sl.is_contiguous() && rl.is_contiguous() {
                    disjoint(sendbuf, s.len(), recvbuf, rc * rl.size)?;
                }
                dst(&mut sg, recvbuf, rc, rl)?
            };
            (s, r)
        };
        register(
            comm,
            Box::new(p.immediate_scatter_into_root(StaticScope, s, r)),
            sg,
            request,
        )
    })
}

/// `MPI_Iallgather` (`all_to_all` false) or `MPI_Ialltoall` (and their `_c` forms).
pub(crate) fn iall(
    name: &str,
    (sendbuf, sendcount, sendtype): (*const c_void, Count, Handle),
    (recvbuf, recvcount, recvtype): (*mut c_void, Count, Handle),
    comm: Handle,
    request: *mut Handle,
    all_to_all: bool,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        req_ok(request)?;
        let rl = layout_of(recvtype)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let m = ic.remote_size();
            let send = if all_to_all {
                uniform(sendcount, m)?
            } else {
                vec![(count(sendcount)?, 0); m.max(0) as usize]
            };
            let recv = uniform(recvcount, m)?;
            // SAFETY: the caller's buffers (nonblocking contract).
            return unsafe {
                inter_nbc::iall(
                    &ic,
                    (sendbuf, send, sendtype),
                    (recvbuf, recv, recvtype),
                    comm,
                    request,
                )
            };
        }
        let rc = count(recvcount)?;
        let size = c.size() as usize;
        let k = if all_to_all { size } else { 1 };
        let mut sg = Staged::default();
        // SAFETY: the caller's buffers (nonblocking contract).
        let s = unsafe {
            if in_place(sendbuf) {
                let (from, n) = if all_to_all {
                    (recvbuf.cast_const(), span(rc, size)?)
                } else {
                    (at(recvbuf, c.rank() as isize * rc as isize, &rl), rc)
                };
                copy(&mut sg, from, n, &rl)?
            } else {
                let sl = layout_of(sendtype)?;
                let sc = count(sendcount)?;
                same_block(span(sc, sl.size)?, span(rc, rl.size)?)?;
                if sl.is_contiguous() && rl.is_contiguous() {
                    disjoint(
                        sendbuf,
                        span(sc * sl.size, k)?,
                        recvbuf,
                        span(rc * rl.size, size)?,
                    )?;
                }
                src(&mut sg, sendbuf, span(sc, k)?, &sl)?
            }
        };
        // SAFETY: as above.
        let r = unsafe { dst(&mut sg, recvbuf, span(rc, size)?, rl)? };
        let q: Box<dyn AnyRequest> = if all_to_all {
            Box::new(c.immediate_all_to_all_into(StaticScope, s, r))
        } else {
            Box::new(c.immediate_all_gather_into(StaticScope, s, r))
        };
        register(comm, q, sg, request)
    })
}

export!(MPI_Iallgather, PMPI_Iallgather,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut Handle) -> c_int {
    iall("MPI_Iallgather", (sendbuf, sendcount.into(), sendtype),
         (recvbuf, recvcount.into(), recvtype), comm, request, false)
});

export!(MPI_Ialltoall, PMPI_Ialltoall,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut Handle) -> c_int {
    iall("MPI_Ialltoall", (sendbuf, sendcount.into(), sendtype),
         (recvbuf, recvcount.into(), recvtype), comm, request, true)
});

/// Which reduction.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Red {
    /// `MPI_Ireduce` to this root.
    Reduce(c_int),
    /// `MPI_Iallreduce`.
    All,
    /// `MPI_Iscan`.
    Scan,
    /// `MPI_Iexscan`.
    Exscan,
}

/// A reduction the core does: predefined operation, predefined numeric type `T`.
fn core_red<T: Equivalence + Copy + 'static>(
    c: &SimpleCommunicator,
    k: Red,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    op: SystemOperation,
    sg: &mut Staged,
) -> CResult<Box<dyn AnyRequest>> {
    if let Red::Reduce(root) = k {
        if c.rank() != root {
            // SAFETY: n readable elements, unmodified until completion (contract).
            let s: &'static [T] = unsafe { typed(send, n)? };
            return Ok(Box::new(c.process_at_rank(root).immediate_reduce_into(
                StaticScope,
                s,
                op,
            )));
        }
    }
    let s: &'static [T] = if in_place(send) {
        // SAFETY: the receive buffer holds n elements (contract); the view ends here.
        let mine: &[T] = unsafe { typed(recv.cast_const(), n)? };
        sg.keep(mine.to_vec())
    } else {
        let len = span(n, size_of::<T>())?;
        disjoint(send, len, recv, len)?;
        // SAFETY: n readable elements, unmodified until completion (contract).
        unsafe { typed(send, n)? }
    };
    // SAFETY: n writable elements, disjoint from `s`, untouched until completion.
    let r: &'static mut [T] = unsafe { typed_mut(recv, n)? };
    Ok(match k {
        Red::Reduce(root) => {
            Box::new(
                c.process_at_rank(root)
                    .immediate_reduce_into_root(StaticScope, s, r, op),
            )
        }
        Red::All => Box::new(c.immediate_all_reduce_into(StaticScope, s, r, op)),
        Red::Scan | Red::Exscan => Box::new(c.immediate_scan_into(StaticScope, s, r, op)),
    })
}

/// Any other reduction: gather (`Reduce`) or all-gather the packed contributions, fold
/// them in rank order at completion.
fn generic_red(
    c: &SimpleCommunicator,
    k: Red,
    red: Reducer,
    (send, recv, n, dt): (*const c_void, *mut c_void, usize, Handle),
    sg: &mut Staged,
) -> CResult<Box<dyn AnyRequest>> {
    let l = layout_of(dt)?;
    validate(&red, &l)?;
    let (rank, size) = (c.rank() as usize, c.size() as usize);
    let receives = match k {
        Red::Reduce(root) => c.rank() == root,
        _ => true,
    };
    let len = span(n, l.size)?;
    // SAFETY: the caller's buffers hold n elements (contract); packed copies are taken now.
    let mine = unsafe {
        if in_place(send) && receives {
            copy(sg, recv, n, &l)?
        } else {
            if receives {
                crate::types::disjoint_data(&l, send, n, recv, n)?;
            }
            copy(sg, send, n, &l)?
        }
    };
    if !receives {
        let Red::Reduce(root) = k else { unreachable!() };
        return Ok(Box::new(
            c.process_at_rank(root)
                .immediate_gather_into(StaticScope, mine),
        ));
    }
    crate::types::check_base(&l, recv, n)?;
    let upto = match k {
        Red::Reduce(_) | Red::All => size,
        Red::Scan => rank + 1,
        Red::Exscan => rank,
    };
    let i = sg.len();
    let all = sg.hold(vec![0; span(len, size)?]);
    if upto > 0 {
        sg.then(Box::new(move |b, _| {
            let parts = b[i];
            let mut acc = parts[..len].to_vec();
            for r in 1..upto {
                let mut next = parts[r * len..][..len].to_vec();
                red.fold(dt, &l, n, &acc, &mut next)?;
                acc = next;
            }
            // SAFETY: the receive buffer holds n elements, valid at completion.
            unsafe { unpack(&l, &acc, recv, n) }
        }));
    }
    Ok(match k {
        Red::Reduce(root) => Box::new(c.process_at_rank(root).immediate_gather_into_root(
            StaticScope,
            mine,
            all,
        )),
        _ => Box::new(c.immediate_all_gather_into(StaticScope, mine, all)),
    })
}

/// Starts reduction `k` (the `int` forms and the `_c` ones).
pub(crate) fn ired(
    name: &str,
    k: Red,
    (send, recv, cnt, dt, op): (*const c_void, *mut c_void, Count, Handle, Handle),
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let fold = match k {
                Red::Reduce(root) => inter_nbc::Fold::Reduce(root),
                Red::All => inter_nbc::Fold::All,
                Red::Scan | Red::Exscan => {
                    return Err(err(
                        MPI_ERR_COMM,
                        "scans are not defined on intercommunicators",
                    ))
                }
            };
            // SAFETY: the caller's buffers (nonblocking contract).
            return unsafe {
                inter_nbc::ireduce(&ic, (send, recv, count(cnt)?, dt, op), fold, comm, request)
            };
        }
        let k = match k {
            Red::Reduce(root) => Red::Reduce(root_ok(&c, root)?),
            k => k,
        };
        let n = count(cnt)?;
        req_ok(request)?;
        let mut sg = Staged::default();
        let q = if core_supported(op, dt) && k != Red::Exscan {
            let kind = crate::env::datatype_of(dt)?.kind;
            let o = system_op(op)?;
            with_kind!(kind, T, core_red::<T>(&c, k, send, recv, n, o, &mut sg))?
        } else {
            generic_red(&c, k, reducer(op)?, (send, recv, n, dt), &mut sg)?
        };
        register(comm, q, sg, request)
    })
}

export!(MPI_Ireduce, PMPI_Ireduce,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, root: c_int, comm: Handle, request: *mut Handle) -> c_int {
    ired("MPI_Ireduce", Red::Reduce(root), (sendbuf, recvbuf, cnt.into(), datatype, op), comm, request)
});

export!(MPI_Iallreduce, PMPI_Iallreduce,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    ired("MPI_Iallreduce", Red::All, (sendbuf, recvbuf, cnt.into(), datatype, op), comm, request)
});

export!(MPI_Iscan, PMPI_Iscan,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    ired("MPI_Iscan", Red::Scan, (sendbuf, recvbuf, cnt.into(), datatype, op), comm, request)
});

export!(MPI_Iexscan, PMPI_Iexscan,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, comm: Handle, request: *mut Handle) -> c_int {
    ired("MPI_Iexscan", Red::Exscan, (sendbuf, recvbuf, cnt.into(), datatype, op), comm, request)
});

export!(MPI_Comm_idup, PMPI_Comm_idup,
        (comm: Handle, newcomm: *mut Handle, request: *mut Handle) -> c_int {
    guard("MPI_Comm_idup", comm, || {
        req_ok(request)?;
        // SAFETY: the caller's output handle (MPI contract).
        let rc = unsafe { crate::env::PMPI_Comm_dup(comm, newcomm) };
        if rc != MPI_SUCCESS {
            return Err(err(rc, "MPI_Comm_dup failed"));
        }
        let h = state::add_req(ReqEntry::Done(MPI_Status::empty(MPI_ANY_SOURCE)));
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(request, h) }
    })
});
