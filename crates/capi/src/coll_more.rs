//! More collectives: `MPI_Scan`, `MPI_Exscan`, `MPI_Reduce_scatter_block`,
//! `MPI_Reduce_scatter` (always through [`crate::ops`]), and the varying-count
//! `MPI_Gatherv`, `MPI_Scatterv`, `MPI_Allgatherv`, `MPI_Alltoallv`.
//!
//! `Exscan` is an inclusive scan shifted one rank up; the block reduce-scatter and the
//! varying-count collectives run on the core's (`gather_varcount_into` and the others:
//! the shared-memory board on one host, schedules elsewhere) with the blocks in bytes;
//! a block more than 2^31 bytes into its buffer is `MPI_ERR_COUNT`. Receive blocks must
//! not overlap (as MPI requires), nor the send and receive buffers.

use crate::coll::{in_place, root_ok, system_op, with_kind};
use crate::consts::*;
use crate::env::datatype_of;
use crate::state;
use crate::{bytes, bytes_mut, count, disjoint, err, export, guard, typed, typed_mut, CResult};
use phalanx::collective::SystemOperation;
use phalanx::datatype::{Equivalence, Partition, PartitionMut};
use phalanx::topology::SimpleCommunicator;
use phalanx::traits::{Communicator, CommunicatorCollectives, Destination, Root, Source};
use phalanx::Count;
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
    members: usize,
) -> CResult {
    let total = n * members;
    let input: Vec<T> = if in_place(send) {
        // SAFETY: in place: recv holds size × n readable elements.
        unsafe { typed::<T>(recv, total)? }.to_vec()
    } else {
        disjoint(send, total * size_of::<T>(), recv, n * size_of::<T>())?;
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
        // The local group's size (an intercommunicator's handle has the remote group's).
        let members = crate::inter::local_size(comm).unwrap_or(c.size()) as usize;
        with_kind!(dt.kind, T, reduce_scatter_t::<T>(&c, sendbuf, recvbuf, n, o, members))
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

/// A `(counts, displs)` layout in bytes, as the core's partitions take it: rebased so
/// that its lowest non-empty block starts the buffer (MPI allows negative
/// displacements).
pub(crate) struct ByteLayout {
    pub(crate) base: *mut u8,
    pub(crate) counts: Vec<Count>,
    pub(crate) displs: Vec<Count>,
    /// Bytes from `base` to the end of the last block.
    pub(crate) span: usize,
}

impl ByteLayout {
    /// Bytes of member `r`'s block, relative to `base`.
    fn block(&self, r: c_int) -> std::ops::Range<usize> {
        let r = r as usize;
        let d = self.displs[r] as usize;
        d..d + self.counts[r] as usize
    }
}

/// The byte layout of `n` blocks of `sz`-byte elements at `base`.
///
/// # Safety
/// `counts` and `displs` point to `n` readable ints.
pub(crate) unsafe fn byte_layout(
    base: *const c_void,
    counts: *const c_int,
    displs: *const c_int,
    n: usize,
    sz: usize,
) -> CResult<ByteLayout> {
    // SAFETY: n readable ints each (caller).
    let (cs, ds): (&[c_int], &[c_int]) =
        unsafe { (typed(counts.cast(), n)?, typed(displs.cast(), n)?) };
    let lo = (0..n)
        .filter(|&r| cs[r] > 0)
        .map(|r| ds[r] as isize)
        .min()
        .unwrap_or(0);
    let big = |what: usize| {
        Count::try_from(what).map_err(|_| {
            err(
                MPI_ERR_COUNT,
                "a block lies beyond 2^31 bytes of its buffer",
            )
        })
    };
    let (mut bc, mut bd, mut span) = (Vec::with_capacity(n), Vec::with_capacity(n), 0);
    for r in 0..n {
        let len = count(cs[r])? * sz;
        let off = if len > 0 {
            (ds[r] as isize - lo) as usize * sz
        } else {
            0
        };
        bc.push(big(len)?);
        bd.push(big(off)?);
        span = span.max(off + len);
    }
    Ok(ByteLayout {
        base: (base as *mut u8).wrapping_offset(lo * sz as isize),
        counts: bc,
        displs: bd,
        span,
    })
}

export!(MPI_Gatherv, PMPI_Gatherv,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int,
         comm: Handle) -> c_int {
    guard("MPI_Gatherv", comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_of(comm) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe { crate::inter_coll::gatherv(&ic, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root) };
        }
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe { crate::coll_dt::gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, Some(root), comm) };
        }
        let root = root_ok(&c, root)?;
        let p = c.process_at_rank(root);
        if c.rank() != root {
            // SAFETY: the caller passes sendcount elements.
            let s = unsafe { bytes(sendbuf, count(sendcount)? * datatype_of(sendtype)?.size)? };
            p.gather_varcount_into(s);
            return Ok(());
        }
        let sz = datatype_of(recvtype)?.size;
        // SAFETY: the root passes size counts and displacements.
        let l = unsafe { byte_layout(recvbuf, recvcounts, displs, c.size() as usize, sz)? };
        // SAFETY: the blocks lie in the receive buffer (MPI contract).
        let r = unsafe { bytes_mut(l.base.cast(), l.span)? };
        if in_place(sendbuf) {
            let mine = r[l.block(root)].to_vec();
            p.gather_varcount_into_root(&mine[..], &mut PartitionMut::new(r, l.counts, l.displs));
        } else {
            let sl = count(sendcount)? * datatype_of(sendtype)?.size;
            disjoint(sendbuf, sl, l.base.cast(), l.span)?;
            // SAFETY: sl readable bytes, disjoint from the receive buffer (checked).
            let s = unsafe { bytes(sendbuf, sl)? };
            p.gather_varcount_into_root(s, &mut PartitionMut::new(r, l.counts, l.displs));
        }
        Ok(())
    })
});

export!(MPI_Scatterv, PMPI_Scatterv,
        (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int,
         sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle,
         root: c_int, comm: Handle) -> c_int {
    guard("MPI_Scatterv", comm, || {
        let c = state::comm(comm)?;
        if let Some(ic) = crate::inter::inter_of(comm) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe { crate::inter_coll::scatterv(&ic, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root) };
        }
        if crate::coll_dt::any_derived(&[sendtype, recvtype]) {
            // SAFETY: the caller's buffers, as MPI requires.
            return unsafe { crate::coll_dt::scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm) };
        }
        let root = root_ok(&c, root)?;
        let p = c.process_at_rank(root);
        if c.rank() != root {
            // SAFETY: the caller passes recvcount writable elements.
            let r = unsafe { bytes_mut(recvbuf, count(recvcount)? * datatype_of(recvtype)?.size)? };
            p.scatter_varcount_into(r);
            return Ok(());
        }
        let sz = datatype_of(sendtype)?.size;
        // SAFETY: the root passes size counts and displacements.
        let l = unsafe { byte_layout(sendbuf, sendcounts, displs, c.size() as usize, sz)? };
        // SAFETY: the blocks lie in the send buffer (MPI contract).
        let s = unsafe { bytes(l.base.cast(), l.span)? };
        let own = l.block(root).len();
        let part = Partition::new(s, l.counts, l.displs);
        if in_place(recvbuf) {
            let mut mine = vec![0u8; own];
            p.scatter_varcount_into_root(&part, &mut mine[..]);
        } else {
            let rl = count(recvcount)? * datatype_of(recvtype)?.size;
            disjoint(recvbuf, rl, l.base.cast(), l.span)?;
            // SAFETY: rl writable bytes, disjoint from the send buffer (checked).
            let r = unsafe { bytes_mut(recvbuf, rl)? };
            p.scatter_varcount_into_root(&part, r);
        }
        Ok(())
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
        let sz = datatype_of(recvtype)?.size;
        // SAFETY: the caller passes size counts and displacements.
        let l = unsafe { byte_layout(recvbuf, recvcounts, displs, c.size() as usize, sz)? };
        // SAFETY: the blocks lie in the receive buffer (MPI contract).
        let r = unsafe { bytes_mut(l.base.cast(), l.span)? };
        if in_place(sendbuf) {
            let mine = r[l.block(c.rank())].to_vec();
            c.all_gather_varcount_into(&mine[..], &mut PartitionMut::new(r, l.counts, l.displs));
        } else {
            let sl = count(sendcount)? * datatype_of(sendtype)?.size;
            disjoint(sendbuf, sl, l.base.cast(), l.span)?;
            // SAFETY: sl readable bytes, disjoint from the receive buffer (checked).
            let s = unsafe { bytes(sendbuf, sl)? };
            c.all_gather_varcount_into(s, &mut PartitionMut::new(r, l.counts, l.displs));
        }
        Ok(())
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
        let rl = unsafe { byte_layout(recvbuf, recvcounts, rdispls, n, rsz)? };
        // SAFETY: the blocks lie in the receive buffer (MPI contract).
        let r = unsafe { bytes_mut(rl.base.cast(), rl.span)? };
        if in_place(sendbuf) {
            // The receive layout is the send layout: send from a copy.
            let copy = r.to_vec();
            let sp = Partition::new(&copy[..], rl.counts.clone(), rl.displs.clone());
            c.all_to_all_varcount_into(&sp, &mut PartitionMut::new(r, rl.counts, rl.displs));
            return Ok(());
        }
        let ssz = datatype_of(sendtype)?.size;
        // SAFETY: the caller passes size counts and displacements.
        let sl = unsafe { byte_layout(sendbuf, sendcounts, sdispls, n, ssz)? };
        disjoint(sl.base.cast(), sl.span, rl.base.cast(), rl.span)?;
        // SAFETY: the blocks lie in the send buffer (MPI contract), disjoint from the
        // receive buffer (checked).
        let s = unsafe { bytes(sl.base.cast(), sl.span)? };
        let sp = Partition::new(s, sl.counts, sl.displs);
        c.all_to_all_varcount_into(&sp, &mut PartitionMut::new(r, rl.counts, rl.displs));
        Ok(())
    })
});
