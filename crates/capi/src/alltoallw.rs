//! `MPI_Alltoallw` and `MPI_Ialltoallw`: all-to-all with a datatype, count and byte
//! displacement per peer.
//!
//! Contract: as `MPI_Ialltoallv` ([`crate::nbc_v`]): the start call checks every
//! argument, then posts immediate point-to-point sends and receives of every block on a
//! fresh private duplicate of the communicator (derived without messages in the same
//! collective call, so the traffic matches nothing else) and returns one request that
//! completes when all of them have. Block r of the send (receive) buffer is
//! `sendcounts[r]` elements of `sendtypes[r]` at `sendbuf + sdispls[r]` bytes; derived
//! types are packed at the start / unpacked at completion, contiguous ones move from /
//! into the user memory; the block to self is copied at the start. With `MPI_IN_PLACE`
//! the send arguments are ignored and block r is a copy of receive block r taken at the
//! start. Type signatures are checked as byte lengths (a block to self whose lengths
//! differ is `MPI_ERR_TRUNCATE`; a peer's mismatch is the core's transfer error).
//! Overlapping contiguous send and receive buffers are `MPI_ERR_BUFFER`. `MPI_Alltoallw`
//! starts the same exchange and waits for it; its errors go to the communicator's
//! handler. Counts and byte displacements are `int` or, in `MPI_(I)alltoallw_c`
//! ([`crate::large_v`]), `MPI_Count` and `MPI_Aint` ([`crate::wide`]): one generic path.

use crate::coll::in_place;
use crate::consts::*;
use crate::nbc::{copy, dst, register, req_ok, src};
use crate::nbc_v::{exchange, exchange_inter};
use crate::state::{self, AnyRequest, Staged};
use crate::types::{layout_of, read_type, Layout};
use crate::wide::{counts, displs, Wide};
use crate::{disjoint, err, export, guard, CResult};
use phalanx::traits::Communicator;
use std::ffi::{c_int, c_void};
use std::rc::Rc;

/// One side's blocks: per peer (address, count, layout).
type Blocks = Vec<(*const c_void, usize, Rc<Layout>)>;

/// The `n` blocks described by counts, byte displacements and types at `base`.
///
/// # Safety
/// `cs`, `ds`, `ts` point to `n` readable entries each.
unsafe fn blocks<C: Wide, D: Wide>(
    base: *const c_void,
    cs: *const C,
    ds: *const D,
    ts: *const Handle,
    n: usize,
) -> CResult<Blocks> {
    // SAFETY: caller.
    let (cs, ds) = unsafe { (counts(cs, n)?, displs(ds, n)?) };
    (0..n)
        .map(|r| {
            // SAFETY: caller (n readable handles; null checked by read_type).
            let t = unsafe { read_type(ts.wrapping_add(r))? };
            let at = (base as *const u8).wrapping_offset(ds[r]).cast();
            Ok((at, cs[r], layout_of(t)?))
        })
        .collect()
}

/// `(lowest address, byte length)` of the non-empty contiguous blocks, or `None` when
/// any non-empty block is derived (then the data is staged and cannot alias).
fn span(bs: &Blocks) -> Option<(*const c_void, usize)> {
    let mut lo = usize::MAX;
    let mut hi = 0usize;
    for (p, n, l) in bs.iter().filter(|b| b.1 > 0 && b.2.size > 0) {
        if !l.is_contiguous() {
            return None;
        }
        lo = lo.min(*p as usize);
        hi = hi.max((*p as usize).saturating_add(n.saturating_mul(l.size)));
    }
    Some(if lo > hi {
        (std::ptr::null(), 0)
    } else {
        (lo as *const c_void, hi - lo)
    })
}

/// Checks the arguments and starts the exchange; returns the request and its staging.
///
/// # Safety
/// The caller's buffers, counts, displacements and types (nonblocking contract).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn start<C: Wide, D: Wide>(
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const D,
    sendtypes: *const Handle,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const D,
    recvtypes: *const Handle,
    comm: Handle,
) -> CResult<(Box<dyn AnyRequest>, Staged)> {
    let c = state::comm(comm)?;
    let inter = crate::inter::inter_if(&c, comm);
    let p = match &inter {
        Some(ic) => ic.remote_size() as usize,
        None => c.size() as usize,
    };
    if inter.is_some() && in_place(sendbuf) {
        return Err(err(MPI_ERR_ARG, "MPI_IN_PLACE on an intercommunicator"));
    }
    let mut sg = Staged::default();
    // SAFETY: caller.
    let rb = unsafe { blocks(recvbuf, recvcounts, rdispls, recvtypes, p)? };
    let mut sends = Vec::with_capacity(p);
    if in_place(sendbuf) {
        for (r, (at, n, l)) in rb.iter().enumerate() {
            // SAFETY: receive block r is readable (MPI contract).
            sends.push((r as c_int, unsafe { copy(&mut sg, *at, *n, l)? }));
        }
    } else {
        // SAFETY: caller.
        let sb = unsafe { blocks(sendbuf, sendcounts, sdispls, sendtypes, p)? };
        if let (Some(s), Some(r)) = (span(&sb), span(&rb)) {
            disjoint(s.0, s.1, r.0, r.1)?;
        }
        for (r, (at, n, l)) in sb.iter().enumerate() {
            // SAFETY: send block r is readable until completion (nonblocking contract).
            sends.push((r as c_int, unsafe { src(&mut sg, *at, *n, l)? }));
        }
    }
    let mut recvs = Vec::with_capacity(p);
    for (r, (at, n, l)) in rb.into_iter().enumerate() {
        // SAFETY: receive block r is writable until completion (nonblocking contract).
        recvs.push((r as c_int, unsafe { dst(&mut sg, at.cast_mut(), n, l)? }));
    }
    match inter {
        Some(ic) => Ok((exchange_inter(&ic, sends, recvs)?, sg)),
        None => Ok((exchange(&c, sends, recvs)?, sg)),
    }
}

export!(MPI_Ialltoallw, PMPI_Ialltoallw,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtypes: *const Handle, comm: Handle,
         request: *mut Handle) -> c_int {
    guard("MPI_Ialltoallw", comm, || {
        req_ok(request)?;
        // SAFETY: the caller's arguments (nonblocking contract).
        let (req, sg) = unsafe {
            start(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                  recvtypes, comm)?
        };
        register(comm, req, sg, request)
    })
});

export!(MPI_Alltoallw, PMPI_Alltoallw,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtypes: *const Handle, comm: Handle) -> c_int {
    guard("MPI_Alltoallw", comm, || {
        // SAFETY: the caller's arguments, valid for the whole (blocking) call.
        unsafe {
            blocking((sendbuf, sendcounts, sdispls, sendtypes),
                     (recvbuf, recvcounts, rdispls, recvtypes), comm)
        }
    })
});

/// One side of an all-to-all-w: buffer, counts, byte displacements, datatypes.
pub(crate) type WSide<P, C, D> = (P, *const C, *const D, *const Handle);

/// `MPI_Alltoallw` (and `MPI_Alltoallw_c`): starts the exchange and waits for it.
///
/// # Safety
/// The caller's arguments, valid for the whole call.
pub(crate) unsafe fn blocking<C: Wide, D: Wide>(
    (sendbuf, sendcounts, sdispls, sendtypes): WSide<*const c_void, C, D>,
    (recvbuf, recvcounts, rdispls, recvtypes): WSide<*mut c_void, C, D>,
    comm: Handle,
) -> CResult {
    // SAFETY: caller.
    let (req, sg) = unsafe {
        start(
            sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
        )?
    };
    let mut h = std::ptr::null_mut();
    register(comm, req, sg, &mut h)?;
    crate::p2p::complete(h, true).map(drop)
}
