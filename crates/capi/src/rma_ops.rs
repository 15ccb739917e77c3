//! One-sided operations: `MPI_Put`, `MPI_Get`, `MPI_Accumulate`, `MPI_Get_accumulate`,
//! `MPI_Fetch_and_op`, `MPI_Compare_and_swap`, the request-based `MPI_Rput`, `MPI_Rget`,
//! `MPI_Raccumulate`, `MPI_Rget_accumulate`, and the `_c` forms. Windows and their
//! synchronization are in [`crate::rma`].
//!
//! Contract: each call checks its arguments (counts, displacement, rank, datatypes,
//! operation) and hands the operation to the core's window (`phalanx::rma::Window`),
//! which checks the epoch (`MPI_ERR_RMA_SYNC`) and the target range where the target's
//! size is known (`MPI_ERR_RMA_RANGE`); errors go to the window's error handler. Buffers
//! follow MPI's rules: an origin buffer stays untouched, a result buffer unread, until
//! the epoch's synchronization (or the request) completes the operation. A datatype
//! (predefined, or derived and committed) becomes a core type map: a predefined one the
//! core's static map of its basic type (or bytes), from a table indexed by the handle —
//! no layout, no allocation; a derived one its blocks as a list of its basic type (bytes
//! when it mixes basic types) with its extent; an origin type whose data lies below its
//! start is addressed from a moved base, a target type with such data, or a negative
//! extent, is `MPI_ERR_TYPE`. Accumulates take the predefined
//! operations (`MPI_REPLACE`; `MPI_NO_OP` in the fetching ones) on one predefined basic
//! type, the same at origin and target; `MPI_MINLOC`/`MPI_MAXLOC`, user operations and
//! an operation not defined on the type (`MPI_BAND` on `MPI_DOUBLE`) are `MPI_ERR_OP`.
//! `MPI_Fetch_and_op` and `MPI_Compare_and_swap` take predefined datatypes. A target of
//! `MPI_PROC_NULL` does nothing (its request completes at once). A request-based
//! operation's request is an engine request in the handle (as `crate::fastpath`'s): it
//! completes locally (origin buffer reusable, fetched data arrived).

use crate::consts::{self, *};
use crate::fastpath::{cerr, raw_handle};
use crate::p2p::DONE_PROC_NULL;
use crate::rma::{guard_win, rank_arg, with_win_shared};
use crate::types::{layout_of, Layout};
use crate::{count, err, export, out, CErr, CResult};
use phalanx::capi_support::ReqId;
use phalanx::coll::ops::{self, OpKind};
use phalanx::datatype::{Primitive, TypeMap};
use phalanx::rma::{AccOp, Window};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

/// A datatype argument as the core takes it: `count` elements of `tm` from the buffer
/// moved by `shift` bytes.
struct Typed {
    tm: TypeMap,
    count: usize,
    shift: isize,
}

impl Typed {
    fn bytes(&self) -> usize {
        self.tm.size() * self.count
    }

    /// The buffer address the core reads from (null only when nothing is read).
    #[inline(always)]
    fn at(&self, p: *const c_void) -> CResult<*const u8> {
        if p.is_null() && self.bytes() > 0 {
            return Err(err(MPI_ERR_BUFFER, "null buffer"));
        }
        Ok((p as *const u8).wrapping_offset(self.shift))
    }

    /// The buffer address the core writes to.
    #[inline(always)]
    fn at_mut(&self, p: *mut c_void) -> CResult<*mut u8> {
        self.at(p).map(|p| p as *mut u8)
    }
}

/// The core's basic type of predefined datatype `h`, if it is a numeric one.
const fn primitive_of(h: usize) -> Option<Primitive> {
    use Primitive as P;
    match h {
        // float and double complex (C, C++, Fortran COMPLEX and DOUBLE COMPLEX).
        0x212 | 0x213 | 0x21b => return Some(P::C32),
        0x216 | 0x217 | 0x21d => return Some(P::C64),
        // MPI_C_BOOL, MPI_CXX_BOOL.
        0x238 | 0x239 => return Some(P::Bool),
        _ => {}
    }
    let Some(d) = consts::datatype_def(h) else {
        return None;
    };
    Some(match d.kind {
        Kind::I8 => P::I8,
        Kind::U8 => P::U8,
        Kind::I16 => P::I16,
        Kind::U16 => P::U16,
        Kind::I32 => P::I32,
        Kind::U32 => P::U32,
        Kind::I64 => P::I64,
        Kind::U64 => P::U64,
        Kind::F32 => P::F32,
        Kind::F64 => P::F64,
        Kind::Opaque => return None,
    })
}

/// A predefined datatype as the core takes it: one element of its numeric basic type
/// (every such type is as large as its basic type), or `size` bytes.
#[derive(Clone, Copy)]
struct Predef {
    /// Bytes of one element; 0: not a predefined datatype.
    size: u8,
    elem: Option<Primitive>,
}

/// Handle values [`PREDEF`] covers (every predefined datatype's; others take the
/// general path).
const PREDEF_FIRST: usize = 0x200;
const PREDEF_SPAN: usize = 0xe0;

/// The predefined datatypes by `handle - PREDEF_FIRST`: one load on every call's path.
static PREDEF: [Predef; PREDEF_SPAN] = {
    let mut t = [Predef {
        size: 0,
        elem: None,
    }; PREDEF_SPAN];
    let mut i = 0;
    while i < PREDEF_SPAN {
        if let Some(d) = consts::datatype_def(PREDEF_FIRST + i) {
            t[i] = Predef {
                size: d.size as u8,
                elem: primitive_of(PREDEF_FIRST + i),
            };
        }
        i += 1;
    }
    t
};

/// The entry of predefined datatype `h`.
#[inline]
fn predef(h: Handle) -> Option<Predef> {
    match PREDEF.get((h as usize).wrapping_sub(PREDEF_FIRST)) {
        Some(&p) if p.size != 0 => Some(p),
        _ => None,
    }
}

/// `n` elements of datatype `h` as the core takes them (module docs).
///
/// Inlined, as [`target_typed`] and [`Typed::at`], so that a predefined type's `Typed`
/// stays in registers: merged in memory with the derived path's result, its words were
/// stored one by one and copied on as wider loads (a store-forwarding stall at every
/// call). So the derived path's result is unwrapped in its own arm, and the basic type an
/// accumulate computes on is not kept here but found by [`elem_of`] when needed.
#[inline(always)]
fn typed(h: Handle, n: usize) -> CResult<Typed> {
    let t = match predef(h) {
        Some(p) => predef_typed(p, n)?,
        None => typed_derived(h, n, false)?,
    };
    Ok(t)
}

/// As [`typed`], for the target: its data must start at or after the displacement
/// (a predefined type's does).
#[inline(always)]
fn target_typed(h: Handle, n: usize) -> CResult<Typed> {
    let t = match predef(h) {
        Some(p) => predef_typed(p, n)?,
        None => typed_derived(h, n, true)?,
    };
    Ok(t)
}

/// [`typed`] of a predefined type: a static type map, no layout.
#[inline(always)]
fn predef_typed(p: Predef, n: usize) -> CResult<Typed> {
    let count = match p.elem {
        Some(_) => n,
        None => n
            .checked_mul(p.size as usize)
            .ok_or_else(|| count_too_large(n))?,
    };
    Ok(Typed {
        tm: TypeMap::primitive(p.elem.unwrap_or(Primitive::U8)),
        count,
        shift: 0,
    })
}

#[cold]
fn count_too_large(n: usize) -> CErr {
    err(MPI_ERR_COUNT, format!("count {n} too large"))
}

/// [`typed`] from the datatype's layout (derived datatypes, and any handle [`PREDEF`]
/// does not cover); `target`: [`target_typed`].
#[inline(never)]
fn typed_derived(h: Handle, n: usize, target: bool) -> CResult<Typed> {
    let l = layout_of(h)?;
    let elem = layout_elem(&l);
    let unit = elem.map_or(1, Primitive::size);
    let prim = TypeMap::primitive(elem.unwrap_or(Primitive::U8));
    if l.is_contiguous() {
        let count = n
            .checked_mul(l.size / unit)
            .ok_or_else(|| count_too_large(n))?;
        return Ok(Typed {
            tm: prim,
            count,
            shift: 0,
        });
    }
    let extent = usize::try_from(l.extent).map_err(|_| {
        err(
            MPI_ERR_TYPE,
            "a datatype of negative extent in a one-sided operation",
        )
    })?;
    let shift = l.blocks.iter().map(|b| b.0).min().unwrap_or(0).min(0);
    if target && shift != 0 {
        return Err(err(
            MPI_ERR_TYPE,
            "a target datatype with data below its start (negative displacements)",
        ));
    }
    let lens: Vec<i64> = l.blocks.iter().map(|b| (b.1 / unit) as i64).collect();
    let displs: Vec<i64> = l.blocks.iter().map(|b| (b.0 - shift) as i64).collect();
    let one = TypeMap::try_hindexed(&lens, &displs, &prim).map_err(|e| err(MPI_ERR_TYPE, e))?;
    Ok(Typed {
        tm: TypeMap::structure(extent, &[(0, one)]),
        count: n,
        shift,
    })
}

/// The predefined numeric type every element of a datatype of layout `l` is made of,
/// if any (what an accumulate computes on, and the unit of its type map).
fn layout_elem(l: &Layout) -> Option<Primitive> {
    let p = l.prim.and_then(primitive_of)?;
    l.blocks.iter().all(|b| b.1 % p.size() == 0).then_some(p)
}

/// [`layout_elem`] of datatype `h` (one [`typed`] accepted).
fn elem_of(h: Handle) -> CResult<Option<Primitive>> {
    match predef(h) {
        Some(p) => Ok(p.elem),
        None => Ok(layout_elem(&*layout_of(h)?)),
    }
}

/// Checks that `h` is a predefined datatype (`MPI_Fetch_and_op`,
/// `MPI_Compare_and_swap`).
fn predefined(h: Handle) -> CResult {
    if predef(h).is_none() && consts::datatype(h as usize).is_none() {
        return Err(err(
            MPI_ERR_TYPE,
            format!("datatype {h:p} is not a predefined datatype"),
        ));
    }
    Ok(())
}

fn disp_arg(d: isize) -> CResult<u64> {
    u64::try_from(d).map_err(|_| err(MPI_ERR_DISP, format!("invalid target displacement {d}")))
}

fn count_c(c: i64) -> CResult<usize> {
    usize::try_from(c).map_err(|_| err(MPI_ERR_COUNT, format!("invalid count {c}")))
}

/// The accumulate operation of handle `op` (`fetch`: a fetching call, where `MPI_NO_OP`
/// is allowed).
fn acc_op(op: Handle, fetch: bool) -> CResult<AccOp> {
    use crate::consts::Op as O;
    let k = match consts::op(op as usize) {
        Some(O::Sum) => OpKind::Sum,
        Some(O::Prod) => OpKind::Product,
        Some(O::Min) => OpKind::Min,
        Some(O::Max) => OpKind::Max,
        Some(O::Land) => OpKind::LogicalAnd,
        Some(O::Lor) => OpKind::LogicalOr,
        Some(O::Lxor) => OpKind::LogicalXor,
        Some(O::Band) => OpKind::BitwiseAnd,
        Some(O::Bor) => OpKind::BitwiseOr,
        Some(O::Bxor) => OpKind::BitwiseXor,
        Some(O::Replace) => return Ok(AccOp::Replace),
        Some(O::NoOp) if fetch => return Ok(AccOp::NoOp),
        Some(O::NoOp) => {
            return Err(err(
                MPI_ERR_OP,
                "MPI_NO_OP is for the fetching accumulates only",
            ))
        }
        Some(O::MinLoc | O::MaxLoc) => {
            return Err(err(
                MPI_ERR_OP,
                "MPI_MINLOC and MPI_MAXLOC are not supported in one-sided accumulates",
            ))
        }
        None if crate::state::with(|s| s.ops.contains_key(&(op as usize))) => return Err(err(
            MPI_ERR_OP,
            "a user-defined operation in a one-sided accumulate (MPI allows predefined ones only)",
        )),
        None => return Err(err(MPI_ERR_OP, format!("invalid operation {op:p}"))),
    };
    Ok(AccOp::Op(k))
}

/// Checks that accumulate `op` applies to the elements of target datatype `target`, and
/// that those of origin datatype `origin` (`None`: not read) are of the same basic type.
fn check_acc(op: AccOp, origin: Option<Handle>, target: Handle) -> CResult {
    let AccOp::Op(k) = op else { return Ok(()) };
    let Some(p) = elem_of(target)? else {
        return Err(err(
            MPI_ERR_OP,
            "one-sided accumulates compute on datatypes of one predefined numeric type",
        ));
    };
    if origin
        .map(elem_of)
        .transpose()?
        .is_some_and(|o| o != Some(p))
    {
        return Err(err(
            MPI_ERR_TYPE,
            "origin and target datatypes of an accumulate have different basic types",
        ));
    }
    // Whether the core defines `k` on `p`: asked once (an empty application), then
    // remembered.
    let memo = ACC_OK.get(k as usize).zip(1u32.checked_shl(p as u32));
    if memo.is_some_and(|(row, bit)| row.load(Ordering::Relaxed) & bit != 0) {
        return Ok(());
    }
    ops::apply(k, &TypeMap::primitive(p), &mut [], &[])
        .map_err(|e| err(MPI_ERR_OP, e.to_string()))?;
    if let Some((row, bit)) = memo {
        row.fetch_or(bit, Ordering::Relaxed);
    }
    Ok(())
}

/// The (operation, basic type) pairs [`check_acc`] found defined: bit `p` of row `k`.
static ACC_OK: [AtomicU32; 16] = [const { AtomicU32::new(0) }; 16];

/// The target side of an operation.
struct Target {
    rank: c_int,
    disp: isize,
    count: usize,
    dt: Handle,
}

/// A request-based operation's output handle (`None`: not request-based).
type ReqOut = Option<*mut Handle>;

/// Nulls a request-based operation's output handle first (so a failed call leaves
/// `MPI_REQUEST_NULL`).
///
/// # Safety
/// `req`'s pointer is null (an error) or writable.
unsafe fn req_start(req: ReqOut) -> CResult {
    match req {
        // SAFETY: writable (caller; null checked).
        Some(p) => unsafe { out(p, REQUEST_NULL as Handle) },
        None => Ok(()),
    }
}

/// Hands the program the request of an operation that returned `r`.
///
/// # Safety
/// `req`'s pointer is writable (checked by [`req_start`]).
unsafe fn req_give(w: &Window, r: Option<ReqId>, req: ReqOut) -> CResult {
    let Some(p) = req else { return Ok(()) };
    let id = w.request_of(r).map_err(cerr)?;
    // SAFETY: the caller's contract.
    unsafe { out(p, raw_handle(id, true)) }
}

/// Runs `f` with the window of `win`, the target's rank, displacement and type; a
/// target of `MPI_PROC_NULL` gets a completed request and nothing else.
///
/// # Safety
/// `req` as for [`req_start`].
unsafe fn on_target(
    win: Handle,
    t: &Target,
    req: ReqOut,
    f: impl FnOnce(&Window, usize, u64, &Typed) -> CResult<Option<ReqId>>,
) -> CResult {
    // SAFETY: the caller's contract.
    unsafe { req_start(req)? };
    with_win_shared(win, |e| {
        let disp = disp_arg(t.disp)?;
        let tt = target_typed(t.dt, t.count)?;
        let Some(rank) = rank_arg(e, t.rank)? else {
            // SAFETY: the caller's contract.
            return match req {
                Some(p) => unsafe { out(p, DONE_PROC_NULL as Handle) },
                None => Ok(()),
            };
        };
        let r = f(&e.win, rank, disp, &tt)?;
        // SAFETY: the caller's contract.
        unsafe { req_give(&e.win, r, req) }
    })
}

/// `MPI_Put` (`req`: `MPI_Rput`).
///
/// # Safety
/// MPI's contract for the buffers; `req` as for [`req_start`].
unsafe fn put(
    origin: *const c_void,
    ocount: usize,
    odt: Handle,
    t: Target,
    win: Handle,
    req: ReqOut,
) -> CResult {
    let o = typed(odt, ocount)?;
    let ob = o.at(origin)?;
    // SAFETY: the caller's contract.
    unsafe {
        on_target(win, &t, req, |w, rank, disp, tt| {
            // SAFETY: the origin holds its elements and stays untouched until the
            // operation completes (the caller's contract).
            w.put(ob, o.count, &o.tm, rank, disp, tt.count, &tt.tm)
                .map_err(cerr)
        })
    }
}

/// `MPI_Get` (`req`: `MPI_Rget`).
///
/// # Safety
/// As [`put`].
unsafe fn get(
    origin: *mut c_void,
    ocount: usize,
    odt: Handle,
    t: Target,
    win: Handle,
    req: ReqOut,
) -> CResult {
    let o = typed(odt, ocount)?;
    let ob = o.at_mut(origin)?;
    // SAFETY: the caller's contract.
    unsafe {
        on_target(win, &t, req, |w, rank, disp, tt| {
            // SAFETY: the origin has room for its elements, unread until completion.
            w.get(ob, o.count, &o.tm, rank, disp, tt.count, &tt.tm)
                .map_err(cerr)
        })
    }
}

/// `MPI_Accumulate` (`req`: `MPI_Raccumulate`).
///
/// # Safety
/// As [`put`].
#[allow(clippy::too_many_arguments)]
unsafe fn accumulate(
    origin: *const c_void,
    ocount: usize,
    odt: Handle,
    t: Target,
    op: Handle,
    win: Handle,
    req: ReqOut,
) -> CResult {
    let aop = acc_op(op, false)?;
    let o = typed(odt, ocount)?;
    let ob = o.at(origin)?;
    // SAFETY: the caller's contract.
    unsafe {
        on_target(win, &t, req, |w, rank, disp, tt| {
            check_acc(aop, Some(odt), t.dt)?;
            // SAFETY: as for a put.
            w.accumulate(ob, o.count, &o.tm, rank, disp, tt.count, &tt.tm, aop)
                .map_err(cerr)
        })
    }
}

/// `MPI_Get_accumulate` (`req`: `MPI_Rget_accumulate`); `MPI_Fetch_and_op` is one
/// element.
///
/// # Safety
/// As [`put`] (origin) and [`get`] (result).
#[allow(clippy::too_many_arguments)]
unsafe fn get_accumulate(
    origin: *const c_void,
    ocount: usize,
    odt: Handle,
    result: *mut c_void,
    rcount: usize,
    rdt: Handle,
    t: Target,
    op: Handle,
    win: Handle,
    req: ReqOut,
) -> CResult {
    let aop = acc_op(op, true)?;
    // With MPI_NO_OP the origin arguments are ignored.
    let o = match aop {
        AccOp::NoOp => None,
        _ => Some(typed(odt, ocount)?),
    };
    let ob = o.as_ref().map_or(Ok(std::ptr::null()), |o| o.at(origin))?;
    let res = typed(rdt, rcount)?;
    let rb = res.at_mut(result)?;
    // SAFETY: the caller's contract.
    unsafe {
        on_target(win, &t, req, |w, rank, disp, tt| {
            check_acc(aop, o.as_ref().map(|_| odt), t.dt)?;
            let none = TypeMap::primitive(Primitive::U8);
            let (oc, otm) = o.as_ref().map_or((0, &none), |o| (o.count, &o.tm));
            // SAFETY: as for a put (origin) and a get (result).
            w.get_accumulate(
                ob, oc, otm, rb, res.count, &res.tm, rank, disp, tt.count, &tt.tm, aop,
            )
            .map_err(cerr)
        })
    }
}

// ---- exports ----

/// Exports each one-sided call in its two C forms: `MPI_X` with `int` counts (module
/// `int_counts`) and `MPI_X_c` with large counts (`large_counts`). A body names the
/// count type `Count`, reads a count with `cnt` and names its call `NAME`.
macro_rules! both_counts {
    ($(($name:ident, $pname:ident, $name_c:ident, $pname_c:ident)
       ($($a:ident : $t:ty),* $(,)?) $body:block)*) => {
        mod int_counts {
            use super::*;
            type Count = c_int;
            fn cnt(c: Count) -> CResult<usize> {
                count(c)
            }
            $(export!($name, $pname, ($($a: $t),*) -> c_int {
                const NAME: &str = stringify!($name);
                $body
            });)*
        }
        mod large_counts {
            use super::*;
            type Count = i64;
            fn cnt(c: Count) -> CResult<usize> {
                count_c(c)
            }
            $(export!($name_c, $pname_c, ($($a: $t),*) -> c_int {
                const NAME: &str = stringify!($name_c);
                $body
            });)*
        }
        pub use int_counts::*;
        pub use large_counts::*;
    };
}

both_counts! {
    (MPI_Put, PMPI_Put, MPI_Put_c, PMPI_Put_c)
    (origin_addr: *const c_void, origin_count: Count, origin_datatype: Handle,
     target_rank: c_int, target_disp: isize, target_count: Count,
     target_datatype: Handle, win: Handle) {
        guard_win(NAME, win, || {
            let t = Target { rank: target_rank, disp: target_disp, count: cnt(target_count)?,
                             dt: target_datatype };
            // SAFETY: MPI's contract for the arguments.
            unsafe { put(origin_addr, cnt(origin_count)?, origin_datatype, t, win, None) }
        })
    }

    (MPI_Rput, PMPI_Rput, MPI_Rput_c, PMPI_Rput_c)
    (origin_addr: *const c_void, origin_count: Count, origin_datatype: Handle,
     target_rank: c_int, target_disp: isize, target_count: Count,
     target_datatype: Handle, win: Handle, request: *mut Handle) {
        guard_win(NAME, win, || {
            let t = Target { rank: target_rank, disp: target_disp, count: cnt(target_count)?,
                             dt: target_datatype };
            // SAFETY: MPI's contract for the arguments.
            unsafe {
                put(origin_addr, cnt(origin_count)?, origin_datatype, t, win, Some(request))
            }
        })
    }

    (MPI_Get, PMPI_Get, MPI_Get_c, PMPI_Get_c)
    (origin_addr: *mut c_void, origin_count: Count, origin_datatype: Handle,
     target_rank: c_int, target_disp: isize, target_count: Count,
     target_datatype: Handle, win: Handle) {
        guard_win(NAME, win, || {
            let t = Target { rank: target_rank, disp: target_disp, count: cnt(target_count)?,
                             dt: target_datatype };
            // SAFETY: MPI's contract for the arguments.
            unsafe { get(origin_addr, cnt(origin_count)?, origin_datatype, t, win, None) }
        })
    }

    (MPI_Rget, PMPI_Rget, MPI_Rget_c, PMPI_Rget_c)
    (origin_addr: *mut c_void, origin_count: Count, origin_datatype: Handle,
     target_rank: c_int, target_disp: isize, target_count: Count,
     target_datatype: Handle, win: Handle, request: *mut Handle) {
        guard_win(NAME, win, || {
            let t = Target { rank: target_rank, disp: target_disp, count: cnt(target_count)?,
                             dt: target_datatype };
            // SAFETY: MPI's contract for the arguments.
            unsafe {
                get(origin_addr, cnt(origin_count)?, origin_datatype, t, win, Some(request))
            }
        })
    }

    (MPI_Accumulate, PMPI_Accumulate, MPI_Accumulate_c, PMPI_Accumulate_c)
    (origin_addr: *const c_void, origin_count: Count, origin_datatype: Handle,
     target_rank: c_int, target_disp: isize, target_count: Count,
     target_datatype: Handle, op: Handle, win: Handle) {
        guard_win(NAME, win, || {
            let t = Target { rank: target_rank, disp: target_disp, count: cnt(target_count)?,
                             dt: target_datatype };
            let n = cnt(origin_count)?;
            // SAFETY: MPI's contract for the arguments.
            unsafe { accumulate(origin_addr, n, origin_datatype, t, op, win, None) }
        })
    }

    (MPI_Raccumulate, PMPI_Raccumulate, MPI_Raccumulate_c, PMPI_Raccumulate_c)
    (origin_addr: *const c_void, origin_count: Count, origin_datatype: Handle,
     target_rank: c_int, target_disp: isize, target_count: Count,
     target_datatype: Handle, op: Handle, win: Handle, request: *mut Handle) {
        guard_win(NAME, win, || {
            let t = Target { rank: target_rank, disp: target_disp, count: cnt(target_count)?,
                             dt: target_datatype };
            let n = cnt(origin_count)?;
            // SAFETY: MPI's contract for the arguments.
            unsafe { accumulate(origin_addr, n, origin_datatype, t, op, win, Some(request)) }
        })
    }

    (MPI_Get_accumulate, PMPI_Get_accumulate, MPI_Get_accumulate_c, PMPI_Get_accumulate_c)
    (origin_addr: *const c_void, origin_count: Count, origin_datatype: Handle,
     result_addr: *mut c_void, result_count: Count, result_datatype: Handle,
     target_rank: c_int, target_disp: isize, target_count: Count,
     target_datatype: Handle, op: Handle, win: Handle) {
        guard_win(NAME, win, || {
            let t = Target { rank: target_rank, disp: target_disp, count: cnt(target_count)?,
                             dt: target_datatype };
            let (n, rn) = (cnt(origin_count)?, cnt(result_count)?);
            // SAFETY: MPI's contract for the arguments.
            unsafe {
                get_accumulate(origin_addr, n, origin_datatype, result_addr, rn,
                               result_datatype, t, op, win, None)
            }
        })
    }

    (MPI_Rget_accumulate, PMPI_Rget_accumulate, MPI_Rget_accumulate_c, PMPI_Rget_accumulate_c)
    (origin_addr: *const c_void, origin_count: Count, origin_datatype: Handle,
     result_addr: *mut c_void, result_count: Count, result_datatype: Handle,
     target_rank: c_int, target_disp: isize, target_count: Count,
     target_datatype: Handle, op: Handle, win: Handle, request: *mut Handle) {
        guard_win(NAME, win, || {
            let t = Target { rank: target_rank, disp: target_disp, count: cnt(target_count)?,
                             dt: target_datatype };
            let (n, rn) = (cnt(origin_count)?, cnt(result_count)?);
            // SAFETY: MPI's contract for the arguments.
            unsafe {
                get_accumulate(origin_addr, n, origin_datatype, result_addr, rn,
                               result_datatype, t, op, win, Some(request))
            }
        })
    }
}

export!(MPI_Fetch_and_op, PMPI_Fetch_and_op,
        (origin_addr: *const c_void, result_addr: *mut c_void, datatype: Handle,
         target_rank: c_int, target_disp: isize, op: Handle, win: Handle) -> c_int {
    guard_win("MPI_Fetch_and_op", win, || {
        predefined(datatype)?;
        let t = Target { rank: target_rank, disp: target_disp, count: 1, dt: datatype };
        // SAFETY: MPI's contract for the arguments (one element each).
        unsafe {
            get_accumulate(origin_addr, 1, datatype, result_addr, 1, datatype, t, op, win, None)
        }
    })
});

export!(MPI_Compare_and_swap, PMPI_Compare_and_swap,
        (origin_addr: *const c_void, compare_addr: *const c_void, result_addr: *mut c_void,
         datatype: Handle, target_rank: c_int, target_disp: isize, win: Handle) -> c_int {
    guard_win("MPI_Compare_and_swap", win, || {
        predefined(datatype)?;
        let d = typed(datatype, 1)?;
        // One element of the datatype (its basic elements, for a pair type).
        let one = match d.count {
            1 => d.tm.clone(),
            n => TypeMap::contiguous(n, &d.tm),
        };
        let ob = d.at(origin_addr)?;
        let cb = d.at(compare_addr)?;
        let rb = d.at_mut(result_addr)?;
        let t = Target { rank: target_rank, disp: target_disp, count: 1, dt: datatype };
        // SAFETY: no request (not request-based).
        unsafe {
            on_target(win, &t, None, |w, rank, disp, _| {
                // SAFETY: one readable element at origin and compare, one writable at
                // result, until the operation completes (MPI's contract).
                w.compare_and_swap(ob, cb, rb, &one, rank, disp).map_err(cerr)
            })
        }
    })
});

#[cfg(test)]
mod tests {
    use super::*;

    /// The static table of predefined datatypes gives what their layouts give.
    #[test]
    fn rma_predefined_table_matches_the_layouts() {
        let mut seen = 0;
        for h in 0..0x1000usize {
            let hd = h as Handle;
            let Some(d) = consts::datatype(h) else {
                assert!(predef(hd).is_none(), "{h:#x}");
                continue;
            };
            seen += 1;
            let p = predef(hd).unwrap_or_else(|| panic!("{h:#x} not in the table"));
            assert_eq!(p.size as usize, d.size, "{h:#x}");
            let l = layout_of(hd).expect("a predefined layout");
            assert_eq!(p.elem, layout_elem(&l), "{h:#x}");
            for n in [0, 1, 3] {
                let (a, b) = (typed(hd, n), typed_derived(hd, n, true));
                let (Ok(a), Ok(b)) = (a, b) else {
                    panic!("{h:#x}: no type map")
                };
                assert_eq!(
                    (&a.tm, a.count, a.shift),
                    (&b.tm, b.count, b.shift),
                    "{h:#x}"
                );
            }
        }
        assert!(seen > 60, "{seen} predefined datatypes");
    }
}
