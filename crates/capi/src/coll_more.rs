//! More collectives: `MPI_Scan`, `MPI_Exscan`, `MPI_Reduce_scatter_block`,
//! `MPI_Reduce_scatter` (always through [`crate::ops`]), and the varying-count
//! `MPI_Gatherv`, `MPI_Scatterv`, `MPI_Allgatherv`, `MPI_Alltoallv`.
//!
//! `Exscan` is an inclusive scan shifted one rank up; the block reduce-scatter and the
//! varying-count collectives run on the core's (`gather_varcount_into` and the others:
//! the shared-memory board on one host, schedules elsewhere) over the caller's layouts
//! (`vlayout`: counts in elements, send data interleaved with receive blocks copied
//! first). Receive blocks must not overlap, nor a send block a receive block (as MPI
//! requires).
//!
//! Each is one generic implementation (`*_impl`) serving the `int` entry point and its
//! large-count form in [`crate::large_v`]: counts widened to [`Count`], count and
//! displacement arrays of either width ([`crate::wide`]). The core's partitions count in
//! `i32` ([`crate::vlayout`]) and the intercommunicator `Gatherv`/`Scatterv` take `int`
//! arrays ([`crate::inter_coll`]): there a value past `INT_MAX` is `MPI_ERR_COUNT`.

use crate::coll::{in_place, root_ok, system_op, with_kind};
use crate::consts::*;
use crate::env::datatype_of;
use crate::state;
use crate::vlayout::{self, Separation, VLayout};
use crate::wide::{self, Wide};
use crate::{
    bytes, bytes_mut, count, disjoint, err, export, guard, span, typed, typed_mut, CResult, Count,
};
use phalanx::collective::SystemOperation;
use phalanx::datatype::Equivalence;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::{Communicator, CommunicatorCollectives, Destination, Root, Source};
use std::ffi::{c_int, c_void};

/// Inclusive scan of `n` elements into `recv` (from `send`, or `recv` in place).
fn scan_t<T: Equivalence + Copy>(
    c: &SimpleCommunicator,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    op: SystemOperation,
    exclusive: bool,
) -> CResult {
    let mine: Vec<T> = if in_place(send) {
        // SAFETY: in place: the caller passes n readable elements in recv.
        unsafe { typed::<T>(recv, n)? }.to_vec()
    } else {
        let l = span(n, size_of::<T>())?;
        disjoint(send, l, recv, l)?;
        // SAFETY: the caller passes n readable elements.
        unsafe { typed::<T>(send, n)? }.to_vec()
    };
    // SAFETY: the caller passes n writable elements (disjoint from send, checked).
    let r: &mut [T] = unsafe { typed_mut(recv, n)? };
    if !exclusive {
        c.scan_into(&mine[..], r, op);
        return Ok(());
    }
    let mut incl = mine.clone();
    c.scan_into(&mine[..], &mut incl[..], op);
    let d = c.duplicate();
    let (me, size) = (d.rank(), d.size());
    if me + 1 < size {
        d.process_at_rank(me + 1).send(&incl[..]);
    }
    if me > 0 {
        d.process_at_rank(me - 1).receive_into(r);
    }
    Ok(())
}

/// `MPI_Scan`, `MPI_Exscan` (`exclusive`) and their `_c` forms.
pub(crate) fn scan_impl(
    name: &str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    cnt: Count,
    datatype: Handle,
    op: Handle,
    comm: Handle,
    exclusive: bool,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if !crate::localop::core_supported(op, datatype) {
            let r = crate::localop::reducer(op)?;
            // SAFETY: the caller passes cnt elements in each buffer (MPI contract).
            return unsafe {
                crate::ops::generic_scan(&c, r, sendbuf, recvbuf, cnt, datatype, exclusive)
            };
        }
        let dt = datatype_of(datatype)?;
        let n = count(cnt)?;
        let o = system_op(op)?;
        with_kind!(
            dt.kind,
            T,
            scan_t::<T>(&c, sendbuf, recvbuf, n, o, exclusive)
        )
    })
}

export!(MPI_Scan, PMPI_Scan,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, comm: Handle) -> c_int {
    scan_impl("MPI_Scan", sendbuf, recvbuf, cnt.into(), datatype, op, comm, false)
});

export!(MPI_Exscan, PMPI_Exscan,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, comm: Handle) -> c_int {
    scan_impl("MPI_Exscan", sendbuf, recvbuf, cnt.into(), datatype, op, comm, true)
});

fn reduce_scatter_t<T: Equivalence + Copy>(
    c: &SimpleCommunicator,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    op: SystemOperation,
    members: usize,
) -> CResult {
    let total = span(n, members)?;
    let input: Vec<T> = if in_place(send) {
        // SAFETY: in place: recv holds size × n readable elements.
        unsafe { typed::<T>(recv, total)? }.to_vec()
    } else {
        disjoint(send, span(total, size_of::<T>())?, recv, n * size_of::<T>())?;
        // SAFETY: the caller passes size × n readable elements.
        unsafe { typed::<T>(send, total)? }.to_vec()
    };
    // SAFETY: the caller passes n writable elements (disjoint from send, checked).
    let r: &mut [T] = unsafe { typed_mut(recv, n)? };
    c.reduce_scatter_block_into(&input[..], r, op);
    Ok(())
}

export!(MPI_Reduce_scatter_block, PMPI_Reduce_scatter_block,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle,
         op: Handle, comm: Handle) -> c_int {
    reduce_scatter_block_impl("MPI_Reduce_scatter_block", sendbuf, recvbuf, recvcount.into(),
                              datatype, op, comm)
});

/// `MPI_Reduce_scatter_block` (and `MPI_Reduce_scatter_block_c`).
pub(crate) fn reduce_scatter_block_impl(
    name: &str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: Count,
    datatype: Handle,
    op: Handle,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            if !crate::localop::core_supported(op, datatype) {
                let total = span(count(recvcount)?, ic.size().max(0) as usize)?;
                let args = (sendbuf, recvbuf, total, datatype, op);
                let fold = crate::inter_nbc::Fold::ScatterBlock;
                // SAFETY: the caller's buffers, valid for the whole (blocking) call.
                return crate::inter_nbc::blocking(|r| unsafe {
                    crate::inter_nbc::ireduce(&ic, args, fold, comm, r)
                });
            }
            if in_place(sendbuf) {
                return Err(err(MPI_ERR_ARG, "MPI_IN_PLACE on an intercommunicator"));
            }
        }
        if !crate::localop::core_supported(op, datatype) {
            let r = crate::localop::reducer(op)?;
            let counts = vec![count(recvcount)?; c.size() as usize];
            // SAFETY: the buffers hold size × recvcount and recvcount elements.
            return unsafe {
                crate::ops::generic_reduce_scatter(&c, r, sendbuf, recvbuf, &counts, datatype)
            };
        }
        let dt = datatype_of(datatype)?;
        let n = count(recvcount)?;
        let o = system_op(op)?;
        // The local group's size (an intercommunicator's handle has the remote group's).
        let members = crate::inter::local_size(comm).unwrap_or(c.size()) as usize;
        with_kind!(
            dt.kind,
            T,
            reduce_scatter_t::<T>(&c, sendbuf, recvbuf, n, o, members)
        )
    })
}

export!(MPI_Reduce_scatter, PMPI_Reduce_scatter,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
         datatype: Handle, op: Handle, comm: Handle) -> c_int {
    reduce_scatter_impl("MPI_Reduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm)
});

/// `MPI_Reduce_scatter` (and `MPI_Reduce_scatter_c`).
pub(crate) fn reduce_scatter_impl<C: Wide>(
    name: &str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    datatype: Handle,
    op: Handle,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            // SAFETY: the caller passes local-size counts.
            let cs = unsafe { wide::counts(recvcounts, ic.size().max(0) as usize)? };
            let me = ic.rank() as usize;
            let fold = crate::inter_nbc::Fold::Scatter(cs[me], cs[..me].iter().sum());
            let args = (sendbuf, recvbuf, cs.iter().sum(), datatype, op);
            // SAFETY: the caller's buffers, valid for the whole (blocking) call.
            return crate::inter_nbc::blocking(|r| unsafe {
                crate::inter_nbc::ireduce(&ic, args, fold, comm, r)
            });
        }
        let r = crate::localop::reducer(op)?;
        // SAFETY: the caller passes size counts.
        let counts = unsafe { wide::counts(recvcounts, c.size() as usize)? };
        // SAFETY: the buffers hold sum(counts) and counts[rank] elements (MPI contract).
        unsafe { crate::ops::generic_reduce_scatter(&c, r, sendbuf, recvbuf, &counts, datatype) }
    })
}

export!(MPI_Gatherv, PMPI_Gatherv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int,
         comm: Handle) -> c_int {
    gatherv_impl("MPI_Gatherv", (sendbuf, sendcount.into(), sendtype),
                 (recvbuf, recvcounts, displs, recvtype), root, comm)
});

/// One varying side of a v-collective: buffer, counts, displacements, datatype.
pub(crate) type VSide<P, C, D> = (P, *const C, *const D, Handle);

/// One uniform side: buffer, count, datatype.
pub(crate) type USide<P> = (P, Count, Handle);

/// `MPI_Gatherv` (and `MPI_Gatherv_c`): counts `C` and displacements `D` of either width.
pub(crate) fn gatherv_impl<C: Wide, D: Wide>(
    name: &str,
    (sendbuf, sendcount, sendtype): USide<*const c_void>,
    (recvbuf, recvcounts, displs, recvtype): VSide<*mut c_void, C, D>,
    root: c_int,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let what = "the intercommunicator MPI_Gatherv";
            let m = ic.remote_size().max(0) as usize;
            let root_side = root == MPI_ROOT;
            // SAFETY: remote-size values at the root (MPI contract).
            let (rc, rd) = unsafe {
                if root_side {
                    (
                        wide::narrow(recvcounts, m, what)?,
                        wide::narrow(displs, m, what)?,
                    )
                } else {
                    (Vec::new(), Vec::new())
                }
            };
            let sc = wide::int_of(sendcount, what)?;
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::inter_coll::gatherv(
                    &ic,
                    sendbuf,
                    sc,
                    sendtype,
                    recvbuf,
                    wide::ptr(&rc),
                    wide::ptr(&rd),
                    recvtype,
                    root,
                )
            };
        }
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::coll_dt::gatherv(
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    recvcounts,
                    displs,
                    recvtype,
                    Some(root),
                    comm,
                )
            };
        }
        let root = root_ok(&c, root)?;
        let p = c.process_at_rank(root);
        if c.rank() != root {
            // SAFETY: the caller passes sendcount elements.
            let s = unsafe { bytes(sendbuf, len(sendcount, sendtype)?)? };
            p.gather_varcount_into(s);
            return Ok(());
        }
        let sz = datatype_of(recvtype)?.size;
        // SAFETY: the root passes size counts and displacements.
        let l = unsafe { VLayout::new(recvbuf, recvcounts, displs, c.size() as usize, sz)? };
        if in_place(sendbuf) {
            // SAFETY: the blocks lie in the receive buffer (MPI contract).
            return unsafe {
                l.write(Some(root), |mine, part| {
                    p.gather_varcount_into_root(mine, part)
                })
            };
        }
        let sl = len(sendcount, sendtype)?;
        let mut keep = Vec::new();
        // SAFETY: sl readable bytes (MPI contract).
        let s = unsafe { vlayout::send_beside(sendbuf, sl, &l, &mut keep)? };
        // SAFETY: the blocks lie in the receive buffer (MPI contract).
        unsafe { l.write(None, |_, part| p.gather_varcount_into_root(s, part)) }
    })
}

/// Byte length of `cnt` elements of predefined `datatype` (checked).
fn len(cnt: Count, datatype: Handle) -> CResult<usize> {
    crate::span(count(cnt)?, datatype_of(datatype)?.size)
}

export!(MPI_Scatterv, PMPI_Scatterv,
        (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle,
         root: c_int, comm: Handle) -> c_int {
    scatterv_impl("MPI_Scatterv", (sendbuf, sendcounts, displs, sendtype),
                  (recvbuf, recvcount.into(), recvtype), root, comm)
});

/// `MPI_Scatterv` (and `MPI_Scatterv_c`).
pub(crate) fn scatterv_impl<C: Wide, D: Wide>(
    name: &str,
    (sendbuf, sendcounts, displs, sendtype): VSide<*const c_void, C, D>,
    (recvbuf, recvcount, recvtype): USide<*mut c_void>,
    root: c_int,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_if(&c, comm) {
            let what = "the intercommunicator MPI_Scatterv";
            let m = ic.remote_size().max(0) as usize;
            // SAFETY: remote-size values at the root (MPI contract).
            let (sc, sd) = unsafe {
                if root == MPI_ROOT {
                    (
                        wide::narrow(sendcounts, m, what)?,
                        wide::narrow(displs, m, what)?,
                    )
                } else {
                    (Vec::new(), Vec::new())
                }
            };
            let rc = wide::int_of(recvcount, what)?;
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::inter_coll::scatterv(
                    &ic,
                    sendbuf,
                    wide::ptr(&sc),
                    wide::ptr(&sd),
                    sendtype,
                    recvbuf,
                    rc,
                    recvtype,
                    root,
                )
            };
        }
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::coll_dt::scatterv(
                    sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                )
            };
        }
        let root = root_ok(&c, root)?;
        let p = c.process_at_rank(root);
        if c.rank() != root {
            // SAFETY: the caller passes recvcount writable elements.
            let r = unsafe { bytes_mut(recvbuf, len(recvcount, recvtype)?)? };
            p.scatter_varcount_into(r);
            return Ok(());
        }
        let sz = datatype_of(sendtype)?.size;
        // SAFETY: the root passes size counts and displacements.
        let l = unsafe { VLayout::new(sendbuf, sendcounts, displs, c.size() as usize, sz)? };
        if in_place(recvbuf) {
            let mut mine = vec![0u8; l.block(root).len()];
            // SAFETY: the blocks lie in the send buffer (MPI contract).
            return unsafe { l.read(|part| p.scatter_varcount_into_root(part, &mut mine[..])) };
        }
        let rl = len(recvcount, recvtype)?;
        let mut keep = Vec::new();
        let l = match vlayout::against_one(&l, recvbuf, rl)? {
            Separation::Apart => l,
            // SAFETY: the blocks lie in the send buffer (MPI contract).
            Separation::Interleaved => unsafe { l.copied(&mut keep)? },
        };
        // SAFETY: rl writable bytes, apart from the send blocks (checked or copied).
        let r = unsafe { bytes_mut(recvbuf, rl)? };
        // SAFETY: the blocks lie in the send buffer (MPI contract).
        unsafe { l.read(|part| p.scatter_varcount_into_root(part, r)) }
    })
}

export!(MPI_Allgatherv, PMPI_Allgatherv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: Handle,
         comm: Handle) -> c_int {
    allgatherv_impl("MPI_Allgatherv", (sendbuf, sendcount.into(), sendtype),
                    (recvbuf, recvcounts, displs, recvtype), comm)
});

/// `MPI_Allgatherv` (and `MPI_Allgatherv_c`).
pub(crate) fn allgatherv_impl<C: Wide, D: Wide>(
    name: &str,
    (sendbuf, sendcount, sendtype): USide<*const c_void>,
    (recvbuf, recvcounts, displs, recvtype): VSide<*mut c_void, C, D>,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::coll_dt::gatherv(
                    sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, None, comm,
                )
            };
        }
        if in_place(sendbuf) && crate::inter::inter_if(&c, comm).is_some() {
            return Err(err(MPI_ERR_ARG, "MPI_IN_PLACE on an intercommunicator"));
        }
        let sz = datatype_of(recvtype)?.size;
        // SAFETY: the caller passes size counts and displacements.
        let l = unsafe { VLayout::new(recvbuf, recvcounts, displs, c.size() as usize, sz)? };
        if in_place(sendbuf) {
            let me = c.rank();
            // SAFETY: the blocks lie in the receive buffer (MPI contract).
            return unsafe {
                l.write(Some(me), |mine, part| {
                    c.all_gather_varcount_into(mine, part)
                })
            };
        }
        let sl = len(sendcount, sendtype)?;
        let mut keep = Vec::new();
        // SAFETY: sl readable bytes (MPI contract).
        let s = unsafe { vlayout::send_beside(sendbuf, sl, &l, &mut keep)? };
        // SAFETY: the blocks lie in the receive buffer (MPI contract).
        unsafe { l.write(None, |_, part| c.all_gather_varcount_into(s, part)) }
    })
}

export!(MPI_Alltoallv, PMPI_Alltoallv,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtype: Handle, comm: Handle) -> c_int {
    alltoallv_impl("MPI_Alltoallv", (sendbuf, sendcounts, sdispls, sendtype),
                   (recvbuf, recvcounts, rdispls, recvtype), comm)
});

/// `MPI_Alltoallv` (and `MPI_Alltoallv_c`).
pub(crate) fn alltoallv_impl<C: Wide, D: Wide>(
    name: &str,
    (sendbuf, sendcounts, sdispls, sendtype): VSide<*const c_void, C, D>,
    (recvbuf, recvcounts, rdispls, recvtype): VSide<*mut c_void, C, D>,
    comm: Handle,
) -> c_int {
    guard(name, comm, || {
        let c = state::comm(comm)?;
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe {
                crate::coll_dt::alltoallv(
                    sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                    comm,
                )
            };
        }
        if in_place(sendbuf) && crate::inter::inter_if(&c, comm).is_some() {
            return Err(err(MPI_ERR_ARG, "MPI_IN_PLACE on an intercommunicator"));
        }
        let n = c.size() as usize;
        let rsz = datatype_of(recvtype)?.size;
        // SAFETY: the caller passes size counts and displacements.
        let rl = unsafe { VLayout::new(recvbuf, recvcounts, rdispls, n, rsz)? };
        let mut keep = Vec::new();
        let sl = if in_place(sendbuf) {
            // The receive layout is the send layout: send from a copy.
            // SAFETY: the blocks lie in the receive buffer (MPI contract).
            unsafe { rl.copied(&mut keep)? }
        } else {
            let ssz = datatype_of(sendtype)?.size;
            // SAFETY: the caller passes size counts and displacements.
            let sl = unsafe { VLayout::new(sendbuf, sendcounts, sdispls, n, ssz)? };
            match vlayout::layouts(&sl, &rl)? {
                Separation::Apart => sl,
                // SAFETY: the blocks lie in the send buffer (MPI contract).
                Separation::Interleaved => unsafe { sl.copied(&mut keep)? },
            }
        };
        // SAFETY: both layouts' blocks lie in their buffers (MPI contract), the send
        // blocks apart from the receive blocks (checked or copied).
        unsafe { sl.read(|sp| rl.write(None, |_, rp| c.all_to_all_varcount_into(sp, rp)))?? };
        Ok(())
    })
}
