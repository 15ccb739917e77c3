//! Derived datatypes in the data-movement collectives: `MPI_Gather(v)`, `MPI_Scatter(v)`,
//! `MPI_Allgather(v)`, `MPI_Alltoall(v)` and `MPI_Sendrecv_replace`.
//!
//! Contract: when a send or receive datatype is derived, the call packs each send block
//! into a contiguous temporary, runs the same collective on the packed bytes
//! (`MPI_BYTE`, counts in bytes), and unpacks every received block into the user's
//! layout afterwards (block r of a v-collective at `displs[r] × extent`). `MPI_IN_PLACE`
//! keeps its meaning: the in-place block is packed from (and unpacked back to) the
//! receive buffer. Type signatures are checked as byte lengths (send count × type size
//! must equal receive count × type size), which is what MPI's rule amounts to on a
//! homogeneous machine. The packed blocks move through the `int` collectives, so a
//! packed block, count or displacement past `INT_MAX` bytes is `MPI_ERR_COUNT` (limit).

use crate::coll::in_place;
use crate::consts::*;
use crate::state;
use crate::types::{pack, unpack, Layout};
use crate::wide::{self, Wide};
use crate::{count, err, CResult};
use phalanx::traits::Communicator;
use std::ffi::{c_int, c_void};
use std::rc::Rc;

const BYTE: Handle = 0x247 as Handle;

/// Whether any of `ts` is a derived datatype.
pub fn any_derived(ts: &[Handle]) -> bool {
    ts.iter().any(|&t| crate::types::is_derived(t))
}

fn rc(r: c_int) -> CResult {
    if r == MPI_SUCCESS {
        Ok(())
    } else {
        Err(err(r, "the packed collective failed"))
    }
}

fn ci(n: usize) -> CResult<c_int> {
    c_int::try_from(n).map_err(|_| {
        err(
            MPI_ERR_COUNT,
            format!(
                "{n} packed bytes: derived datatypes in the collectives move as int byte \
                 counts (at most INT_MAX)"
            ),
        )
    })
}

fn lay(t: Handle) -> CResult<Rc<Layout>> {
    crate::types::layout_of(t)
}

fn ptr(v: &[u8]) -> *const c_void {
    v.as_ptr().cast()
}

fn mptr(v: &mut [u8]) -> *mut c_void {
    v.as_mut_ptr().cast()
}

/// `MPI_Gather` with derived datatypes.
///
/// # Safety
/// Buffers as MPI requires for `MPI_Gather`.
pub unsafe fn gather(
    s: *const c_void,
    sc: crate::Count,
    st: Handle,
    r: *mut c_void,
    rcnt: crate::Count,
    rt: Handle,
    root: c_int,
    comm: Handle,
) -> CResult {
    let c = state::comm(comm)?;
    let me_root = c.rank() == root;
    let sp = if in_place(s) {
        Vec::new()
    } else {
        // SAFETY: sc elements of st (caller).
        unsafe { pack(&*lay(st)?, s, count(sc)?)? }
    };
    if !me_root {
        // SAFETY: packed temporaries valid for the call.
        return rc(unsafe {
            crate::coll::PMPI_Gather(
                ptr(&sp),
                ci(sp.len())?,
                BYTE,
                std::ptr::null_mut(),
                0,
                BYTE,
                root,
                comm,
            )
        });
    }
    let rl = lay(rt)?;
    let n = count(rcnt)? * c.size() as usize;
    let mut tmp = if in_place(s) {
        // SAFETY: the root's receive buffer holds size × rcnt elements.
        unsafe { pack(&rl, r, n)? }
    } else {
        vec![0u8; n * rl.size]
    };
    let sarg = if in_place(s) {
        IN_PLACE as *const c_void
    } else {
        ptr(&sp)
    };
    // SAFETY: packed temporaries valid for the call.
    rc(unsafe {
        crate::coll::PMPI_Gather(
            sarg,
            ci(sp.len())?,
            BYTE,
            mptr(&mut tmp),
            ci(count(rcnt)? * rl.size)?,
            BYTE,
            root,
            comm,
        )
    })?;
    // SAFETY: size × rcnt writable elements at the root.
    unsafe { unpack(&rl, &tmp, r, n) }
}

/// `MPI_Scatter` with derived datatypes.
///
/// # Safety
/// Buffers as MPI requires for `MPI_Scatter`.
pub unsafe fn scatter(
    s: *const c_void,
    sc: crate::Count,
    st: Handle,
    r: *mut c_void,
    rcnt: crate::Count,
    rt: Handle,
    root: c_int,
    comm: Handle,
) -> CResult {
    let c = state::comm(comm)?;
    let me_root = c.rank() == root;
    let sp = if me_root {
        let sl = lay(st)?;
        // SAFETY: size × sc elements at the root (caller).
        let v = unsafe { pack(&sl, s, count(sc)? * c.size() as usize)? };
        (v, count(sc)? * sl.size)
    } else {
        (Vec::new(), 0)
    };
    if me_root && in_place(r) {
        // SAFETY: packed temporary valid for the call.
        return rc(unsafe {
            crate::coll::PMPI_Scatter(ptr(&sp.0), ci(sp.1)?, BYTE, IN_PLACE, 0, BYTE, root, comm)
        });
    }
    let rl = lay(rt)?;
    let n = count(rcnt)?;
    let mut tmp = vec![0u8; n * rl.size];
    // SAFETY: packed temporaries valid for the call.
    rc(unsafe {
        crate::coll::PMPI_Scatter(
            ptr(&sp.0),
            ci(sp.1)?,
            BYTE,
            mptr(&mut tmp),
            ci(tmp.len())?,
            BYTE,
            root,
            comm,
        )
    })?;
    // SAFETY: rcnt writable elements.
    unsafe { unpack(&rl, &tmp, r, n) }
}

/// `MPI_Allgather` (`all_to_all` false) or `MPI_Alltoall` with derived datatypes.
///
/// # Safety
/// Buffers as MPI requires for the call.
pub unsafe fn allgather(
    s: *const c_void,
    sc: crate::Count,
    st: Handle,
    r: *mut c_void,
    rcnt: crate::Count,
    rt: Handle,
    comm: Handle,
    all_to_all: bool,
) -> CResult {
    let c = state::comm(comm)?;
    let p = c.size() as usize;
    let rl = lay(rt)?;
    let n = count(rcnt)? * p;
    let block = ci(count(rcnt)? * rl.size)?;
    let mut tmp = vec![0u8; n * rl.size];
    if in_place(s) {
        // SAFETY: size × rcnt elements in the receive buffer.
        let mine = unsafe { pack(&rl, r, n)? };
        if all_to_all {
            // SAFETY: temporaries valid for the call.
            rc(unsafe {
                crate::coll::PMPI_Alltoall(
                    ptr(&mine),
                    block,
                    BYTE,
                    mptr(&mut tmp),
                    block,
                    BYTE,
                    comm,
                )
            })?;
        } else {
            tmp = mine;
            // SAFETY: temporary valid for the call.
            rc(unsafe {
                crate::coll::PMPI_Allgather(IN_PLACE, 0, BYTE, mptr(&mut tmp), block, BYTE, comm)
            })?;
        }
    } else {
        let sl = lay(st)?;
        let k = count(sc)? * if all_to_all { p } else { 1 };
        // SAFETY: the send buffer holds k elements of st.
        let sp = unsafe { pack(&sl, s, k)? };
        let sb = ci(count(sc)? * sl.size)?;
        // SAFETY: temporaries valid for the call.
        rc(unsafe {
            if all_to_all {
                crate::coll::PMPI_Alltoall(ptr(&sp), sb, BYTE, mptr(&mut tmp), block, BYTE, comm)
            } else {
                crate::coll::PMPI_Allgather(ptr(&sp), sb, BYTE, mptr(&mut tmp), block, BYTE, comm)
            }
        })?;
    }
    // SAFETY: size × rcnt writable elements.
    unsafe { unpack(&rl, &tmp, r, n) }
}

/// A packed v-layout: the bytes, byte counts and byte displacements per rank.
struct Packed {
    data: Vec<u8>,
    counts: Vec<c_int>,
    displs: Vec<c_int>,
}

/// Counts and displacements (in elements) of `p` ranks.
///
/// # Safety
/// `counts` and `displs` point to `p` ints.
unsafe fn cd<C: Wide, D: Wide>(
    counts: *const C,
    displs: *const D,
    p: usize,
) -> CResult<(Vec<usize>, Vec<isize>)> {
    // SAFETY: p values each (caller).
    unsafe { Ok((wide::counts(counts, p)?, wide::displs(displs, p)?)) }
}

/// Packs (`fill`) or sizes the blocks `(counts, displs)` of layout `l` at `base`.
///
/// # Safety
/// With `fill`, every block is readable.
unsafe fn pack_v(
    l: &Layout,
    base: *const c_void,
    cs: &[usize],
    ds: &[isize],
    fill: bool,
) -> CResult<Packed> {
    let mut p = Packed {
        data: Vec::new(),
        counts: Vec::new(),
        displs: Vec::new(),
    };
    for (&k, &d) in cs.iter().zip(ds) {
        p.displs.push(ci(p.data.len())?);
        p.counts.push(ci(k * l.size)?);
        if fill {
            let at = (base as *const u8).wrapping_offset(d * l.extent).cast();
            // SAFETY: block readable (caller).
            p.data.extend(unsafe { pack(l, at, k)? });
        } else {
            p.data.resize(p.data.len() + k * l.size, 0);
        }
    }
    Ok(p)
}

/// Unpacks the blocks of `p` listed in `which` to `(counts, displs)` of `l` at `base`.
///
/// # Safety
/// Every listed block is writable.
unsafe fn unpack_v(
    l: &Layout,
    p: &Packed,
    base: *mut c_void,
    cs: &[usize],
    ds: &[isize],
    which: impl Iterator<Item = usize>,
) -> CResult {
    for i in which {
        let off = p.displs[i] as usize;
        let at = (base as *mut u8).wrapping_offset(ds[i] * l.extent).cast();
        // SAFETY: block writable (caller).
        unsafe { unpack(l, &p.data[off..off + p.counts[i] as usize], at, cs[i])? };
    }
    Ok(())
}

/// `MPI_Gatherv` (`root` Some) or `MPI_Allgatherv` with derived datatypes.
///
/// # Safety
/// Buffers as MPI requires for the call.
pub unsafe fn gatherv<C: Wide, D: Wide>(
    s: *const c_void,
    sc: crate::Count,
    st: Handle,
    r: *mut c_void,
    rcounts: *const C,
    displs: *const D,
    rt: Handle,
    root: Option<c_int>,
    comm: Handle,
) -> CResult {
    let c = state::comm(comm)?;
    let (me, p) = (c.rank(), c.size() as usize);
    let receives = root.is_none_or(|x| x == me);
    let sp = if in_place(s) {
        Vec::new()
    } else {
        // SAFETY: sc elements of st.
        unsafe { pack(&*lay(st)?, s, count(sc)?)? }
    };
    if !receives {
        let root = root.unwrap_or(0);
        // SAFETY: temporaries valid for the call.
        return rc(unsafe {
            crate::coll_more::PMPI_Gatherv(
                ptr(&sp),
                ci(sp.len())?,
                BYTE,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
                BYTE,
                root,
                comm,
            )
        });
    }
    let rl = lay(rt)?;
    // SAFETY: p counts and displacements.
    let (cs, ds) = unsafe { cd(rcounts, displs, p)? };
    let mut pk = unsafe { pack_v(&rl, r, &cs, &ds, false)? };
    let sarg = if in_place(s) {
        let at = (r as *const u8)
            .wrapping_offset(ds[me as usize] * rl.extent)
            .cast();
        // SAFETY: the in-place block is readable.
        let mine = unsafe { pack(&rl, at, cs[me as usize])? };
        let off = pk.displs[me as usize] as usize;
        pk.data[off..off + mine.len()].copy_from_slice(&mine);
        IN_PLACE as *const c_void
    } else {
        ptr(&sp)
    };
    let (pc, pd) = (pk.counts.as_ptr(), pk.displs.as_ptr());
    // SAFETY: temporaries valid for the call.
    rc(unsafe {
        match root {
            Some(root) => crate::coll_more::PMPI_Gatherv(
                sarg,
                ci(sp.len())?,
                BYTE,
                mptr(&mut pk.data),
                pc,
                pd,
                BYTE,
                root,
                comm,
            ),
            None => crate::coll_more::PMPI_Allgatherv(
                sarg,
                ci(sp.len())?,
                BYTE,
                mptr(&mut pk.data),
                pc,
                pd,
                BYTE,
                comm,
            ),
        }
    })?;
    // SAFETY: every block is writable.
    unsafe { unpack_v(&rl, &pk, r, &cs, &ds, 0..p) }
}

/// `MPI_Scatterv` with derived datatypes.
///
/// # Safety
/// Buffers as MPI requires for the call.
pub unsafe fn scatterv<C: Wide, D: Wide>(
    s: *const c_void,
    scounts: *const C,
    displs: *const D,
    st: Handle,
    r: *mut c_void,
    rcnt: crate::Count,
    rt: Handle,
    root: c_int,
    comm: Handle,
) -> CResult {
    let c = state::comm(comm)?;
    let (me, p) = (c.rank(), c.size() as usize);
    let pk = if me == root {
        let sl = lay(st)?;
        // SAFETY: p counts and displacements; blocks readable at the root.
        unsafe {
            let (cs, ds) = cd(scounts, displs, p)?;
            pack_v(&sl, s, &cs, &ds, true)?
        }
    } else {
        Packed {
            data: Vec::new(),
            counts: vec![0; p],
            displs: vec![0; p],
        }
    };
    let (pc, pd) = (pk.counts.as_ptr(), pk.displs.as_ptr());
    if me == root && in_place(r) {
        // SAFETY: temporaries valid for the call.
        return rc(unsafe {
            crate::coll_more::PMPI_Scatterv(
                ptr(&pk.data),
                pc,
                pd,
                BYTE,
                IN_PLACE,
                0,
                BYTE,
                root,
                comm,
            )
        });
    }
    let rl = lay(rt)?;
    let n = count(rcnt)?;
    let mut tmp = vec![0u8; n * rl.size];
    // SAFETY: temporaries valid for the call.
    rc(unsafe {
        crate::coll_more::PMPI_Scatterv(
            ptr(&pk.data),
            pc,
            pd,
            BYTE,
            mptr(&mut tmp),
            ci(tmp.len())?,
            BYTE,
            root,
            comm,
        )
    })?;
    // SAFETY: rcnt writable elements.
    unsafe { unpack(&rl, &tmp, r, n) }
}

/// `MPI_Alltoallv` with derived datatypes.
///
/// # Safety
/// Buffers as MPI requires for the call.
pub unsafe fn alltoallv<C: Wide, D: Wide>(
    s: *const c_void,
    scounts: *const C,
    sdispls: *const D,
    st: Handle,
    r: *mut c_void,
    rcounts: *const C,
    rdispls: *const D,
    rt: Handle,
    comm: Handle,
) -> CResult {
    let p = state::comm(comm)?.size() as usize;
    let rl = lay(rt)?;
    // SAFETY: p counts and displacements each; blocks as MPI requires.
    unsafe {
        let (rcs, rds) = cd(rcounts, rdispls, p)?;
        let sp = if in_place(s) {
            pack_v(&rl, r, &rcs, &rds, true)?
        } else {
            let (scs, sds) = cd(scounts, sdispls, p)?;
            pack_v(&*lay(st)?, s, &scs, &sds, true)?
        };
        let mut rp = pack_v(&rl, r, &rcs, &rds, false)?;
        rc(crate::coll_more::PMPI_Alltoallv(
            ptr(&sp.data),
            sp.counts.as_ptr(),
            sp.displs.as_ptr(),
            BYTE,
            mptr(&mut rp.data),
            rp.counts.as_ptr(),
            rp.displs.as_ptr(),
            BYTE,
            comm,
        ))?;
        unpack_v(&rl, &rp, r, &rcs, &rds, 0..p)
    }
}

/// `MPI_Sendrecv_replace` with a derived datatype.
///
/// # Safety
/// `buf` holds `cnt` elements of `dt`, readable and writable.
pub unsafe fn sendrecv_replace(
    buf: *mut c_void,
    cnt: crate::Count,
    dt: Handle,
    dest: c_int,
    stag: c_int,
    src: c_int,
    rtag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> CResult {
    let l = lay(dt)?;
    let n = count(cnt)?;
    // SAFETY: n readable elements.
    let sp = unsafe { pack(&l, buf, n)? };
    let mut tmp = vec![0u8; sp.len()];
    let mut st = MPI_Status::default();
    let (sl, rl) = (sp.len() as crate::Count, tmp.len() as crate::Count);
    rc(crate::p2p::sendrecv_impl(
        "MPI_Sendrecv",
        (ptr(&sp), sl, BYTE, dest, stag),
        (mptr(&mut tmp), rl, BYTE, src, rtag),
        comm,
        &mut st,
    ))?;
    let k = (st.bytes() as usize).min(tmp.len());
    // SAFETY: n writable elements; status ignore or writable.
    unsafe {
        unpack(&l, &tmp[..k], buf, n)?;
        crate::p2p::put_status(status, st);
    }
    Ok(())
}
