//! More collectives: `MPI_Scan`, `MPI_Exscan`, `MPI_Reduce_scatter_block`,
//! `MPI_Reduce_scatter` (always through [`crate::ops`]), and the varying-count
//! `MPI_Gatherv`, `MPI_Scatterv`, `MPI_Allgatherv`, `MPI_Alltoallv`.
//!
//! `Exscan` is an inclusive scan shifted one rank up; the varying-count collectives are
//! point-to-point exchanges on a private duplicate of the communicator (every member
//! derives the same duplicate in the same collective call, so the traffic never matches
//! the program's messages). Receive blocks must not overlap (as MPI requires).

use crate::coll::{in_place, root_ok, system_op, with_kind};
use crate::consts::*;
use crate::env::datatype_of;
use crate::state;
use crate::{count, disjoint, err, export, guard, typed, typed_mut, CResult};
use phalanx::collective::SystemOperation;
use phalanx::datatype::Equivalence;
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::{Communicator, CommunicatorCollectives, Destination, Source};
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
        disjoint(send, n * size_of::<T>(), recv, n * size_of::<T>())?;
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

fn scan_common(
    name: &str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    cnt: c_int,
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
    scan_common("MPI_Scan", sendbuf, recvbuf, cnt, datatype, op, comm, false)
});

export!(MPI_Exscan, PMPI_Exscan,
        (sendbuf: *const c_void, recvbuf: *mut c_void, cnt: c_int, datatype: Handle,
         op: Handle, comm: Handle) -> c_int {
    scan_common("MPI_Exscan", sendbuf, recvbuf, cnt, datatype, op, comm, true)
});

fn reduce_scatter_t<T: Equivalence + Copy>(
    c: &SimpleCommunicator,
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
    op: SystemOperation,
) -> CResult {
    let total = n * c.size() as usize;
    let me = c.rank() as usize;
    let input: Vec<T> = if in_place(send) {
        // SAFETY: in place: recv holds size × n readable elements.
        unsafe { typed::<T>(recv, total)? }.to_vec()
    } else {
        disjoint(send, total * size_of::<T>(), recv, n * size_of::<T>())?;
        // SAFETY: the caller passes size × n readable elements.
        unsafe { typed::<T>(send, total)? }.to_vec()
    };
    let mut all = input.clone();
    c.all_reduce_into(&input[..], &mut all[..], op);
    // SAFETY: the caller passes n writable elements (disjoint from send, checked).
    let r: &mut [T] = unsafe { typed_mut(recv, n)? };
    r.copy_from_slice(&all[me * n..][..n]);
    Ok(())
}

export!(MPI_Reduce_scatter_block, PMPI_Reduce_scatter_block,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle,
         op: Handle, comm: Handle) -> c_int {
    guard("MPI_Reduce_scatter_block", comm, || {
        let c = state::comm(comm)?;
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
        with_kind!(dt.kind, T, reduce_scatter_t::<T>(&c, sendbuf, recvbuf, n, o))
    })
});

export!(MPI_Reduce_scatter, PMPI_Reduce_scatter,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
         datatype: Handle, op: Handle, comm: Handle) -> c_int {
    guard("MPI_Reduce_scatter", comm, || {
        let c = state::comm(comm)?;
        let r = crate::localop::reducer(op)?;
        // SAFETY: the caller passes size counts.
        let cs: &[c_int] = unsafe { typed(recvcounts.cast(), c.size() as usize)? };
        let counts = cs.iter().map(|&k| count(k)).collect::<CResult<Vec<_>>>()?;
        // SAFETY: the buffers hold sum(counts) and counts[rank] elements (MPI contract).
        unsafe { crate::ops::generic_reduce_scatter(&c, r, sendbuf, recvbuf, &counts, datatype) }
    })
});

/// One block of a varying-count exchange: peer rank, address, byte length.
struct Block {
    peer: c_int,
    ptr: *mut u8,
    len: usize,
}

/// Sends every `sends` block and receives every `recvs` block on a private duplicate of
/// `c`; blocks to/from this rank are copied locally (the send block to self is matched
/// with the receive block from self).
///
/// # Safety
/// Every block is valid for its length (send blocks readable, receive blocks writable)
/// during the call, receive blocks are pairwise disjoint and disjoint from send blocks.
unsafe fn exchange(c: &SimpleCommunicator, sends: &[Block], recvs: &[Block]) -> CResult {
    let d = c.duplicate();
    let me = d.rank();
    let own_send = sends.iter().find(|b| b.peer == me);
    if let Some(r) = recvs.iter().find(|b| b.peer == me) {
        let s = own_send.ok_or_else(|| err(MPI_ERR_INTERN, "no block to self"))?;
        if s.len != r.len {
            return Err(err(
                MPI_ERR_TRUNCATE,
                "block to self does not match its receive block",
            ));
        }
        // SAFETY: both valid for len bytes; disjoint or identical (in place).
        unsafe { std::ptr::copy(s.ptr, r.ptr, r.len) };
    }
    phalanx::request::scope(|sc| {
        let mut reqs = Vec::new();
        for b in recvs.iter().filter(|b| b.peer != me) {
            // SAFETY: a writable block, disjoint from every other (caller).
            let buf: &mut [u8] = unsafe { crate::bytes_mut(b.ptr.cast(), b.len)? };
            reqs.push(d.process_at_rank(b.peer).immediate_receive_into(sc, buf));
        }
        for b in sends.iter().filter(|b| b.peer != me) {
            // SAFETY: a readable block (caller).
            let buf: &[u8] = unsafe { crate::bytes(b.ptr.cast(), b.len)? };
            reqs.push(d.process_at_rank(b.peer).immediate_send(sc, buf));
        }
        for q in reqs {
            let st = q.wait();
            let _ = st;
        }
        Ok(())
    })
}

/// Blocks of a `(counts, displs)` layout of `n` ranks at `base` with element size `sz`.
///
/// # Safety
/// `counts` and `displs` point to `n` readable ints.
unsafe fn layout(
    base: *const c_void,
    counts: *const c_int,
    displs: *const c_int,
    n: usize,
    sz: usize,
) -> CResult<Vec<Block>> {
    // SAFETY: n readable ints each (caller).
    let (cs, ds): (&[c_int], &[c_int]) =
        unsafe { (typed(counts.cast(), n)?, typed(displs.cast(), n)?) };
    let mut v = Vec::with_capacity(n);
    for r in 0..n {
        let len = count(cs[r])? * sz;
        let off = ds[r] as isize * sz as isize;
        v.push(Block {
            peer: r as c_int,
            ptr: (base as *mut u8).wrapping_offset(off),
            len,
        });
    }
    Ok(v)
}

fn one(peer: c_int, base: *const c_void, len: usize) -> Block {
    Block {
        peer,
        ptr: base as *mut u8,
        len,
    }
}

export!(MPI_Gatherv, PMPI_Gatherv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int,
         comm: Handle) -> c_int {
    guard("MPI_Gatherv", comm, || {
        let c = state::comm(comm)?;
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe { crate::coll_dt::gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, Some(root), comm) };
        }
        let root = root_ok(&c, root)?;
        let me = c.rank();
        let mut recvs = Vec::new();
        if me == root {
            let sz = datatype_of(recvtype)?.size;
            // SAFETY: the root passes size counts and displacements.
            recvs = unsafe { layout(recvbuf, recvcounts, displs, c.size() as usize, sz)? };
        }
        let send = if me == root && in_place(sendbuf) {
            let b = &recvs[me as usize];
            one(root, b.ptr.cast(), b.len)
        } else {
            one(root, sendbuf, count(sendcount)? * datatype_of(sendtype)?.size)
        };
        // SAFETY: buffers as the MPI contract says.
        unsafe { exchange(&c, &[send], &recvs) }
    })
});

export!(MPI_Scatterv, PMPI_Scatterv,
        (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle,
         root: c_int, comm: Handle) -> c_int {
    guard("MPI_Scatterv", comm, || {
        let c = state::comm(comm)?;
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe { crate::coll_dt::scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm) };
        }
        let root = root_ok(&c, root)?;
        let me = c.rank();
        let mut sends = Vec::new();
        if me == root {
            let sz = datatype_of(sendtype)?.size;
            // SAFETY: the root passes size counts and displacements.
            sends = unsafe { layout(sendbuf, sendcounts, displs, c.size() as usize, sz)? };
        }
        let recv = if me == root && in_place(recvbuf) {
            let b = &sends[me as usize];
            one(root, b.ptr.cast(), b.len)
        } else {
            one(root, recvbuf, count(recvcount)? * datatype_of(recvtype)?.size)
        };
        // SAFETY: buffers as the MPI contract says.
        unsafe { exchange(&c, &sends, &[recv]) }
    })
});

export!(MPI_Allgatherv, PMPI_Allgatherv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: Handle,
         comm: Handle) -> c_int {
    guard("MPI_Allgatherv", comm, || {
        let c = state::comm(comm)?;
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe { crate::coll_dt::gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, None, comm) };
        }
        let (me, n) = (c.rank(), c.size());
        let sz = datatype_of(recvtype)?.size;
        // SAFETY: the caller passes size counts and displacements.
        let recvs = unsafe { layout(recvbuf, recvcounts, displs, n as usize, sz)? };
        let (ptr, len) = if in_place(sendbuf) {
            let b = &recvs[me as usize];
            (b.ptr as *const c_void, b.len)
        } else {
            (sendbuf, count(sendcount)? * datatype_of(sendtype)?.size)
        };
        let sends: Vec<Block> = (0..n).map(|r| one(r, ptr, len)).collect();
        // SAFETY: buffers as the MPI contract says.
        unsafe { exchange(&c, &sends, &recvs) }
    })
});

export!(MPI_Alltoallv, PMPI_Alltoallv,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtype: Handle, comm: Handle) -> c_int {
    guard("MPI_Alltoallv", comm, || {
        let c = state::comm(comm)?;
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe { crate::coll_dt::alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm) };
        }
        let n = c.size() as usize;
        let rsz = datatype_of(recvtype)?.size;
        // SAFETY: the caller passes size counts and displacements.
        let recvs = unsafe { layout(recvbuf, recvcounts, rdispls, n, rsz)? };
        if in_place(sendbuf) {
            let total = recvs.iter().map(|b| b.ptr as usize + b.len).max().unwrap_or(0)
                .saturating_sub(recvbuf as usize);
            // SAFETY: in place: the receive layout is readable (MPI contract).
            let copy = unsafe { crate::bytes(recvbuf, total)? }.to_vec();
            // SAFETY: as above, on the copy.
            let sends = unsafe { layout(copy.as_ptr().cast(), recvcounts, rdispls, n, rsz)? };
            // SAFETY: buffers as the MPI contract says; the copy lives for the call.
            return unsafe { exchange(&c, &sends, &recvs) };
        }
        let ssz = datatype_of(sendtype)?.size;
        // SAFETY: the caller passes size counts and displacements.
        let sends = unsafe { layout(sendbuf, sendcounts, sdispls, n, ssz)? };
        // SAFETY: buffers as the MPI contract says.
        unsafe { exchange(&c, &sends, &recvs) }
    })
});
