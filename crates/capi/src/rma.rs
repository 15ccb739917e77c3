//! One-sided communication (MPI RMA), windows and their synchronization:
//! `MPI_Win_create`, `MPI_Win_allocate`, `MPI_Win_allocate_shared` (with
//! `MPI_Win_shared_query`), `MPI_Win_create_dynamic` (with `MPI_Win_attach`/`detach`),
//! `MPI_Win_free`, the `_c` forms; `MPI_Win_fence`, `lock`, `unlock`, `lock_all`,
//! `unlock_all`, `flush`, `flush_all`, `flush_local`, `flush_local_all`, `sync`, `post`,
//! `start`, `complete`, `wait`, `test`; and the inquiry calls (group, attributes and
//! keyvals, name, error handlers, info). The operations are in [`crate::rma_ops`].
//!
//! Contract: a window is the core's [`Window`] (`phalanx::rma`) in a per-thread table
//! under a handle from 0x4000000 up (never reused in a run); `MPI_WIN_NULL` is 0x110.
//! The table is a short list searched from the window found last, so a call on the
//! window a program works with is a compare and two borrow flags, no hashing.
//! Errors of a call on a window go to the window's error handler (`MPI_ERRORS_ARE_FATAL`
//! when created, set with `MPI_Win_set_errhandler`; a user handler made by
//! `MPI_Win_create_errhandler` is called with the window), errors of the creating calls
//! and of calls on an invalid window to the communicator's (world's). The memory model
//! is `MPI_WIN_UNIFIED`: `MPI_Win_sync` is a memory barrier plus one round of progress
//! (so a program polling window memory sees other ranks' operations applied). Groups
//! given to `post`/`start` are translated to ranks of the window's group; an empty group
//! opens an epoch with nobody, which `complete`/`wait`/`test` close at once. Lock calls on
//! `MPI_PROC_NULL` do nothing. `MPI_Win_free` inside a lock, start or post epoch is
//! `MPI_ERR_RMA_SYNC` and leaves the window usable. Windows still open at `MPI_Finalize`
//! stop serving there (not collectively: freeing them is the program's duty). Info
//! arguments are checked and ignored; `MPI_Win_get_info` gives an empty info.

use crate::comm::add_group;
use crate::consts::*;
use crate::fastpath::cerr;
use crate::{err, export, guard, guard_to, out, raise_to, state, CErr, CResult};
use phalanx::capi_support::Shared;
use phalanx::rma::{Flavor, LockKind, Window, MODE_NOCHECK, MODE_NOPRECEDE, MODE_NOPUT};
use phalanx::rma::{MODE_NOSTORE, MODE_NOSUCCEED};
use phalanx::topology::{Communicator, Group, SimpleCommunicator};
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void};
use std::rc::Rc;

const WORLD: Handle = COMM_WORLD as Handle;
/// `MPI_WIN_NULL`.
pub const WIN_NULL: usize = 0x110;
/// First handle of a window.
const WIN_FIRST: usize = 0x400_0000;
/// `MPI_LOCK_EXCLUSIVE`, `MPI_LOCK_SHARED`.
const LOCK_EXCLUSIVE: c_int = 301;
const LOCK_SHARED: c_int = 302;
/// `MPI_WIN_FLAVOR_*`, `MPI_WIN_UNIFIED`.
const FLAVOR_CREATE: c_int = 311;
const FLAVOR_ALLOCATE: c_int = 312;
const FLAVOR_DYNAMIC: c_int = 313;
const FLAVOR_SHARED: c_int = 314;
const WIN_UNIFIED: c_int = 321;
/// Predefined window attribute keys.
const WIN_BASE: c_int = 601;
const WIN_DISP_UNIT: c_int = 602;
const WIN_SIZE: c_int = 603;
const WIN_CREATE_FLAVOR: c_int = 604;
const WIN_MODEL: c_int = 605;
/// Every assertion bit of the synchronization calls.
const MODES: u32 = MODE_NOCHECK | MODE_NOPRECEDE | MODE_NOPUT | MODE_NOSTORE | MODE_NOSUCCEED;

/// The values `MPI_Win_get_attr` hands out pointers to (boxed: they do not move).
struct Attrs {
    size: isize,
    disp_unit: c_int,
    flavor: c_int,
    model: c_int,
}

/// A window and what the C interface keeps with it.
pub(crate) struct WinEntry {
    /// The core's window.
    pub(crate) win: Window,
    errh: usize,
    name: String,
    attrs: Box<Attrs>,
}

/// The live windows: a short list (each is a collective object), searched from the one
/// found last — a program's calls mostly go to one window.
struct Table {
    /// `(handle, entry)` of every live window, in creation order.
    live: Vec<(usize, Rc<RefCell<WinEntry>>)>,
    /// Index in `live` of the window found last.
    last: Cell<usize>,
    /// Windows made so far (the next handle is `WIN_FIRST + next`).
    next: usize,
}

impl Table {
    const fn new() -> Table {
        Table {
            live: Vec::new(),
            last: Cell::new(0),
            next: 0,
        }
    }

    /// The entry of handle `h`, if live.
    #[inline]
    fn find(&self, h: usize) -> Option<&Rc<RefCell<WinEntry>>> {
        match self.live.get(self.last.get()) {
            Some((k, e)) if *k == h => Some(e),
            _ => {
                let i = self.live.iter().position(|(k, _)| *k == h)?;
                self.last.set(i);
                Some(&self.live[i].1)
            }
        }
    }
}

impl Drop for Table {
    /// At thread exit (a fatal error, or no `MPI_Finalize`) the engine may be gone:
    /// windows are forgotten, not unregistered (as [`state::State`] forgets requests).
    fn drop(&mut self) {
        for e in self.live.drain(..) {
            std::mem::forget(e);
        }
    }
}

static WINS: Shared<RefCell<Table>> = Shared::new(|| RefCell::new(Table::new()));

#[cold]
fn bad_win(h: Handle) -> CErr {
    err(MPI_ERR_WIN, format!("invalid window {h:p}"))
}

#[cold]
fn win_in_use(h: Handle) -> CErr {
    err(MPI_ERR_WIN, format!("window {h:p} is in use"))
}

/// Checks that `h` is a live window.
fn live(h: Handle) -> CResult {
    WINS.with(|t| t.borrow().find(h as usize).map(drop))
        .ok_or_else(|| bad_win(h))
}

/// Runs `f` on the window of handle `h`. Only the window's entry stays borrowed: `f`
/// may wait in the engine (at `MPI_THREAD_MULTIPLE` without the process lock), while
/// other threads use, create and free other windows; a call on the same window from
/// another thread meanwhile is refused as "in use" (`MPI_ERR_WIN`).
#[inline]
pub(crate) fn with_win<T>(h: Handle, f: impl FnOnce(&mut WinEntry) -> CResult<T>) -> CResult<T> {
    let e = WINS.with(|t| {
        let t = t.try_borrow().map_err(|_| win_in_use(h))?;
        t.find(h as usize).cloned().ok_or_else(|| bad_win(h))
    })?;
    let mut g = e.try_borrow_mut().map_err(|_| win_in_use(h))?;
    f(&mut g)
}

/// Runs `f` on the window of handle `h`, shared: calls that only issue operations or
/// complete them (put, get, accumulate, flush) run in several threads on one window at
/// once, even while one of them waits.
#[inline]
pub(crate) fn with_win_shared<T>(h: Handle, f: impl FnOnce(&WinEntry) -> CResult<T>) -> CResult<T> {
    let e = WINS.with(|t| {
        let t = t.try_borrow().map_err(|_| win_in_use(h))?;
        t.find(h as usize).cloned().ok_or_else(|| bad_win(h))
    })?;
    let g = e.try_borrow().map_err(|_| win_in_use(h))?;
    f(&g)
}

/// The error handler for an error of a call on window `h`, and the handle a user
/// handler gets: the window's, or world's when `h` is not a live window.
fn handler(h: Handle) -> (usize, Handle) {
    let eh = WINS.with(|t| {
        let t = t.try_borrow().ok()?;
        let e = t.find(h as usize)?.try_borrow().ok()?;
        Some(e.errh)
    });
    match eh {
        Some(eh) => (eh, h),
        None => (state::errhandler(WORLD), WORLD),
    }
}

/// Runs an exported body of a call on window `win` (see [`crate::guard_to`]).
#[inline]
pub(crate) fn guard_win(name: &str, win: Handle, f: impl FnOnce() -> CResult) -> c_int {
    guard_to(name, || handler(win), f)
}

/// Registers `win`; returns its handle.
fn add(win: Window) -> Handle {
    let flavor = match win.flavor() {
        Flavor::Create => FLAVOR_CREATE,
        Flavor::Allocate => FLAVOR_ALLOCATE,
        Flavor::Dynamic => FLAVOR_DYNAMIC,
        Flavor::Shared => FLAVOR_SHARED,
    };
    let attrs = Box::new(Attrs {
        size: win.size() as isize,
        disp_unit: win.disp_unit() as c_int,
        flavor,
        model: WIN_UNIFIED,
    });
    let e = WinEntry {
        win,
        errh: ERRORS_ARE_FATAL,
        name: String::new(),
        attrs,
    };
    WINS.with(|t| {
        let mut t = t.borrow_mut();
        let h = WIN_FIRST + t.next;
        t.next += 1;
        t.live.push((h, Rc::new(RefCell::new(e))));
        h as Handle
    })
}

/// Drops every window still open (`MPI_Finalize`, before the universe ends).
pub(crate) fn drop_all() {
    let all = WINS.with(|t| std::mem::take(&mut t.borrow_mut().live));
    drop(all);
}

/// Writes `MPI_WIN_NULL` through `win` unless it is null (the output of a creating call
/// that fails).
///
/// # Safety
/// `win` is null or writable.
unsafe fn null_win(win: *mut Handle) {
    if !win.is_null() {
        // SAFETY: non-null and writable (caller).
        unsafe { win.write(WIN_NULL as Handle) }
    }
}

/// The communicator of a creating call: an intracommunicator.
fn intra(comm: Handle) -> CResult<Rc<SimpleCommunicator>> {
    let c = state::comm(comm)?;
    if c.c_is_inter() {
        return Err(err(MPI_ERR_COMM, "a window needs an intracommunicator"));
    }
    Ok(c)
}

fn size_arg(size: isize) -> CResult<usize> {
    usize::try_from(size).map_err(|_| err(MPI_ERR_SIZE, format!("invalid window size {size}")))
}

fn disp_unit_arg(d: isize) -> CResult<usize> {
    match usize::try_from(d) {
        Ok(d) if d > 0 && d <= c_int::MAX as usize => Ok(d),
        _ => Err(err(MPI_ERR_DISP, format!("invalid displacement unit {d}"))),
    }
}

/// The creating calls' checks: communicator, info, output handle.
fn creating(comm: Handle, info: Handle, win: *mut Handle) -> CResult<Rc<SimpleCommunicator>> {
    let c = intra(comm)?;
    crate::misc::info_ok(info)?;
    if win.is_null() {
        return Err(err(MPI_ERR_ARG, "null window pointer"));
    }
    Ok(c)
}

/// `MPI_Win_create(_c)`.
///
/// # Safety
/// `base` holds `size` bytes, valid until the window is freed; `win` writable.
unsafe fn create(
    base: *mut c_void,
    size: isize,
    disp_unit: isize,
    info: Handle,
    comm: Handle,
    win: *mut Handle,
) -> CResult {
    // SAFETY: the caller's contract.
    unsafe { null_win(win) };
    let c = creating(comm, info, win)?;
    let size = size_arg(size)?;
    let du = disp_unit_arg(disp_unit)?;
    if base.is_null() && size > 0 {
        return Err(err(MPI_ERR_BUFFER, "null window base with a nonzero size"));
    }
    // SAFETY: the program keeps `size` bytes at `base` until it frees the window (MPI's
    // contract for MPI_Win_create), and accepts that other ranks change them.
    let w = unsafe { Window::create(&*c, base as *mut u8, size, du) }.map_err(cerr)?;
    // SAFETY: writable (caller; null checked).
    unsafe { out(win, add(w)) }
}

/// `MPI_Win_allocate(_c)` (`shared`: `MPI_Win_allocate_shared(_c)`).
///
/// # Safety
/// `baseptr` is a writable `void *`, `win` writable.
unsafe fn allocate(
    size: isize,
    disp_unit: isize,
    info: Handle,
    comm: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
    shared: bool,
) -> CResult {
    // SAFETY: the caller's contract.
    unsafe { null_win(win) };
    let c = creating(comm, info, win)?;
    let size = size_arg(size)?;
    let du = disp_unit_arg(disp_unit)?;
    if baseptr.is_null() {
        return Err(err(MPI_ERR_ARG, "null baseptr"));
    }
    let w = if shared {
        Window::allocate_shared(&*c, size, du)
    } else {
        Window::allocate(&*c, size, du)
    }
    .map_err(cerr)?;
    // SAFETY: baseptr is a writable `void *`, win writable (caller; both checked).
    unsafe {
        out(baseptr as *mut *mut c_void, w.base() as *mut c_void)?;
        out(win, add(w))
    }
}

/// `MPI_Win_shared_query(_c)`: size, displacement unit and base of `rank`'s part (with
/// `MPI_PROC_NULL`: of the lowest rank whose part is not empty).
fn shared_query(win: Handle, rank: c_int) -> CResult<(usize, usize, *mut u8)> {
    with_win(win, |e| {
        let n = e.win.communicator().size();
        let one = |r: c_int| e.win.shared_query(r as usize).map_err(cerr);
        if rank == MPI_PROC_NULL {
            for r in 0..n {
                let (b, s, d) = one(r)?;
                if s > 0 {
                    return Ok((s, d, b));
                }
            }
            return Ok((0, 0, std::ptr::null_mut()));
        }
        if !(0..n).contains(&rank) {
            return Err(err(
                MPI_ERR_RANK,
                format!("invalid rank {rank} (window of {n})"),
            ));
        }
        let (b, s, d) = one(rank)?;
        Ok((s, d, b))
    })
}

export!(MPI_Win_create, PMPI_Win_create,
        (base: *mut c_void, size: isize, disp_unit: c_int, info: Handle, comm: Handle,
         win: *mut Handle) -> c_int {
    // SAFETY: the MPI contract of the arguments.
    guard("MPI_Win_create", comm, || unsafe {
        create(base, size, disp_unit as isize, info, comm, win)
    })
});

export!(MPI_Win_create_c, PMPI_Win_create_c,
        (base: *mut c_void, size: isize, disp_unit: isize, info: Handle, comm: Handle,
         win: *mut Handle) -> c_int {
    // SAFETY: the MPI contract of the arguments.
    guard("MPI_Win_create_c", comm, || unsafe {
        create(base, size, disp_unit, info, comm, win)
    })
});

export!(MPI_Win_allocate, PMPI_Win_allocate,
        (size: isize, disp_unit: c_int, info: Handle, comm: Handle, baseptr: *mut c_void,
         win: *mut Handle) -> c_int {
    // SAFETY: the MPI contract of the arguments.
    guard("MPI_Win_allocate", comm, || unsafe {
        allocate(size, disp_unit as isize, info, comm, baseptr, win, false)
    })
});

export!(MPI_Win_allocate_c, PMPI_Win_allocate_c,
        (size: isize, disp_unit: isize, info: Handle, comm: Handle, baseptr: *mut c_void,
         win: *mut Handle) -> c_int {
    // SAFETY: the MPI contract of the arguments.
    guard("MPI_Win_allocate_c", comm, || unsafe {
        allocate(size, disp_unit, info, comm, baseptr, win, false)
    })
});

export!(MPI_Win_allocate_shared, PMPI_Win_allocate_shared,
        (size: isize, disp_unit: c_int, info: Handle, comm: Handle, baseptr: *mut c_void,
         win: *mut Handle) -> c_int {
    // SAFETY: the MPI contract of the arguments.
    guard("MPI_Win_allocate_shared", comm, || unsafe {
        allocate(size, disp_unit as isize, info, comm, baseptr, win, true)
    })
});

export!(MPI_Win_allocate_shared_c, PMPI_Win_allocate_shared_c,
        (size: isize, disp_unit: isize, info: Handle, comm: Handle, baseptr: *mut c_void,
         win: *mut Handle) -> c_int {
    // SAFETY: the MPI contract of the arguments.
    guard("MPI_Win_allocate_shared_c", comm, || unsafe {
        allocate(size, disp_unit, info, comm, baseptr, win, true)
    })
});

export!(MPI_Win_shared_query, PMPI_Win_shared_query,
        (win: Handle, rank: c_int, size: *mut isize, disp_unit: *mut c_int,
         baseptr: *mut c_void) -> c_int {
    guard_win("MPI_Win_shared_query", win, || {
        let (s, d, b) = shared_query(win, rank)?;
        // SAFETY: writable outputs (MPI contract; null checked).
        unsafe {
            out(size, s as isize)?;
            out(disp_unit, d as c_int)?;
            out(baseptr as *mut *mut c_void, b as *mut c_void)
        }
    })
});

export!(MPI_Win_shared_query_c, PMPI_Win_shared_query_c,
        (win: Handle, rank: c_int, size: *mut isize, disp_unit: *mut isize,
         baseptr: *mut c_void) -> c_int {
    guard_win("MPI_Win_shared_query_c", win, || {
        let (s, d, b) = shared_query(win, rank)?;
        // SAFETY: writable outputs (MPI contract; null checked).
        unsafe {
            out(size, s as isize)?;
            out(disp_unit, d as isize)?;
            out(baseptr as *mut *mut c_void, b as *mut c_void)
        }
    })
});

export!(MPI_Win_create_dynamic, PMPI_Win_create_dynamic,
        (info: Handle, comm: Handle, win: *mut Handle) -> c_int {
    guard("MPI_Win_create_dynamic", comm, || {
        // SAFETY: null or writable (MPI contract).
        unsafe { null_win(win) };
        let c = creating(comm, info, win)?;
        let w = Window::create_dynamic(&*c).map_err(cerr)?;
        // SAFETY: writable (MPI contract; null checked).
        unsafe { out(win, add(w)) }
    })
});

export!(MPI_Win_attach, PMPI_Win_attach, (win: Handle, base: *mut c_void, size: isize) -> c_int {
    guard_win("MPI_Win_attach", win, || {
        let size = size_arg(size)?;
        if base.is_null() && size > 0 {
            return Err(err(MPI_ERR_RMA_ATTACH, "null base with a nonzero size"));
        }
        with_win(win, |e| {
            // SAFETY: the program keeps the memory until it detaches it (MPI's contract
            // for MPI_Win_attach).
            unsafe { e.win.attach(base as *mut u8, size) }.map_err(cerr)
        })
    })
});

export!(MPI_Win_detach, PMPI_Win_detach, (win: Handle, base: *const c_void) -> c_int {
    guard_win("MPI_Win_detach", win, || {
        with_win(win, |e| e.win.detach(base as *const u8).map_err(cerr))
    })
});

export!(MPI_Win_free, PMPI_Win_free, (win: *mut Handle) -> c_int {
    // The handler is the window's, found before the window goes.
    let h = if win.is_null() {
        WIN_NULL as Handle
    } else {
        // SAFETY: non-null, readable (MPI contract).
        unsafe { win.read() }
    };
    let to = handler(h);
    guard_to("MPI_Win_free", move || to, || {
        if win.is_null() {
            return Err(err(MPI_ERR_ARG, "null window pointer"));
        }
        with_win(h, |e| {
            if e.win.epoch_open() {
                return Err(err(
                    MPI_ERR_RMA_SYNC,
                    "window freed inside a lock, start or post epoch",
                ));
            }
            Ok(())
        })?;
        crate::attrs::delete_all(h)?;
        let e = WINS.with(|t| {
            let mut t = t.try_borrow_mut().map_err(|_| win_in_use(h))?;
            let i = t.live.iter().position(|(k, _)| *k == h as usize).ok_or_else(|| bad_win(h))?;
            t.last.set(0);
            // A call on the window still running in another thread holds it too.
            if Rc::strong_count(&t.live[i].1) > 1 {
                return Err(win_in_use(h));
            }
            let (_, e) = t.live.remove(i);
            Rc::try_unwrap(e).map_err(|_| win_in_use(h))
        })?
        .into_inner();
        e.win.free().map_err(cerr)?;
        // SAFETY: writable (MPI contract; null checked).
        unsafe { out(win, WIN_NULL as Handle) }
    })
});

// ---- synchronization ----

fn assert_arg(a: c_int) -> CResult<u32> {
    match u32::try_from(a) {
        Ok(a) if a & !MODES == 0 => Ok(a),
        _ => Err(err(MPI_ERR_ASSERT, format!("invalid assertion {a:#x}"))),
    }
}

/// A target rank of `e`'s window; `None` for `MPI_PROC_NULL`.
pub(crate) fn rank_arg(e: &WinEntry, r: c_int) -> CResult<Option<usize>> {
    let n = e.win.communicator().size();
    match r {
        MPI_PROC_NULL => Ok(None),
        r if (0..n).contains(&r) => Ok(Some(r as usize)),
        r => Err(err(
            MPI_ERR_RANK,
            format!("invalid rank {r} (window group of {n})"),
        )),
    }
}

/// The members of group `g` as ranks of `e`'s window.
fn window_ranks(e: &WinEntry, g: Handle) -> CResult<Vec<usize>> {
    let g = crate::comm::group(g)?;
    let wg = e.win.communicator().group();
    let rs: Vec<c_int> = (0..g.size()).collect();
    g.translate_ranks(&rs, &wg)
        .into_iter()
        .map(|r| {
            r.map(|r| r as usize).ok_or_else(|| {
                err(
                    MPI_ERR_GROUP,
                    "a member of the group is not in the window's group",
                )
            })
        })
        .collect()
}

export!(MPI_Win_fence, PMPI_Win_fence, (assert: c_int, win: Handle) -> c_int {
    guard_win("MPI_Win_fence", win, || {
        let a = assert_arg(assert)?;
        with_win(win, |e| e.win.fence(a).map_err(cerr))
    })
});

export!(MPI_Win_lock, PMPI_Win_lock,
        (lock_type: c_int, rank: c_int, assert: c_int, win: Handle) -> c_int {
    guard_win("MPI_Win_lock", win, || {
        let kind = match lock_type {
            LOCK_EXCLUSIVE => LockKind::Exclusive,
            LOCK_SHARED => LockKind::Shared,
            t => return Err(err(MPI_ERR_LOCKTYPE, format!("invalid lock type {t}"))),
        };
        let a = assert_arg(assert)?;
        with_win(win, |e| {
            let Some(r) = rank_arg(e, rank)? else { return Ok(()) };
            e.win.lock(kind, r, a).map_err(cerr)?;
            Ok(())
        })
    })
});

export!(MPI_Win_unlock, PMPI_Win_unlock, (rank: c_int, win: Handle) -> c_int {
    guard_win("MPI_Win_unlock", win, || {
        with_win(win, |e| {
            let Some(r) = rank_arg(e, rank)? else { return Ok(()) };
            e.win.unlock(r).map_err(cerr)?;
            Ok(())
        })
    })
});

export!(MPI_Win_lock_all, PMPI_Win_lock_all, (assert: c_int, win: Handle) -> c_int {
    guard_win("MPI_Win_lock_all", win, || {
        let a = assert_arg(assert)?;
        with_win(win, |e| {
            e.win.lock_all(a).map_err(cerr)?;
            Ok(())
        })
    })
});

export!(MPI_Win_unlock_all, PMPI_Win_unlock_all, (win: Handle) -> c_int {
    guard_win("MPI_Win_unlock_all", win, || {
        with_win(win, |e| {
            e.win.unlock_all().map_err(cerr)?;
            Ok(())
        })
    })
});

export!(MPI_Win_flush, PMPI_Win_flush, (rank: c_int, win: Handle) -> c_int {
    guard_win("MPI_Win_flush", win, || {
        with_win_shared(win, |e| match rank_arg(e, rank)? {
            Some(r) => e.win.flush(r).map_err(cerr),
            None => Ok(()),
        })
    })
});

export!(MPI_Win_flush_all, PMPI_Win_flush_all, (win: Handle) -> c_int {
    guard_win("MPI_Win_flush_all", win, || with_win_shared(win, |e| e.win.flush_all().map_err(cerr)))
});

export!(MPI_Win_flush_local, PMPI_Win_flush_local, (rank: c_int, win: Handle) -> c_int {
    guard_win("MPI_Win_flush_local", win, || {
        with_win_shared(win, |e| match rank_arg(e, rank)? {
            Some(_) => e.win.flush_local().map_err(cerr),
            None => Ok(()),
        })
    })
});

export!(MPI_Win_flush_local_all, PMPI_Win_flush_local_all, (win: Handle) -> c_int {
    guard_win("MPI_Win_flush_local_all", win, || {
        with_win_shared(win, |e| e.win.flush_local().map_err(cerr))
    })
});

export!(MPI_Win_sync, PMPI_Win_sync, (win: Handle) -> c_int {
    guard_win("MPI_Win_sync", win, || {
        with_win(win, |e| {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            // One round of progress: operations that arrived are applied (a probe on the
            // window's context for a tag its messages never carry takes nothing).
            phalanx::capi_support::iprobe(None, Some(i32::MAX), e.win.context())
                .map_err(cerr)?;
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
    })
});

export!(MPI_Win_post, PMPI_Win_post, (group: Handle, assert: c_int, win: Handle) -> c_int {
    guard_win("MPI_Win_post", win, || {
        let a = assert_arg(assert)?;
        with_win(win, |e| {
            let ranks = window_ranks(e, group)?;
            e.win.post(&ranks, a).map_err(cerr)
        })
    })
});

export!(MPI_Win_start, PMPI_Win_start, (group: Handle, assert: c_int, win: Handle) -> c_int {
    guard_win("MPI_Win_start", win, || {
        let a = assert_arg(assert)?;
        with_win(win, |e| {
            let ranks = window_ranks(e, group)?;
            e.win.start(&ranks, a).map_err(cerr)
        })
    })
});

export!(MPI_Win_complete, PMPI_Win_complete, (win: Handle) -> c_int {
    guard_win("MPI_Win_complete", win, || {
        with_win(win, |e| e.win.complete().map_err(cerr))
    })
});

export!(MPI_Win_wait, PMPI_Win_wait, (win: Handle) -> c_int {
    guard_win("MPI_Win_wait", win, || {
        with_win(win, |e| e.win.wait().map_err(cerr))
    })
});

export!(MPI_Win_test, PMPI_Win_test, (win: Handle, flag: *mut c_int) -> c_int {
    guard_win("MPI_Win_test", win, || {
        if flag.is_null() {
            return Err(err(MPI_ERR_ARG, "null flag"));
        }
        let done = with_win(win, |e| e.win.test().map_err(cerr))?;
        // SAFETY: writable (MPI contract; null checked).
        unsafe { out(flag, done as c_int) }
    })
});

// ---- inquiry: group, attributes, name, error handlers, info ----

export!(MPI_Win_get_group, PMPI_Win_get_group, (win: Handle, group: *mut Handle) -> c_int {
    guard_win("MPI_Win_get_group", win, || {
        let g = with_win(win, |e| Ok(e.win.communicator().group()))?;
        if group.is_null() {
            return Err(err(MPI_ERR_ARG, "null group pointer"));
        }
        // SAFETY: writable (MPI contract; null checked).
        unsafe { out(group, add_group(g)) }
    })
});

export!(MPI_Win_get_attr, PMPI_Win_get_attr,
        (win: Handle, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
    guard_win("MPI_Win_get_attr", win, || {
        let v: Option<*mut c_void> = with_win(win, |e| {
            let a = &mut *e.attrs;
            Ok(match keyval {
                // The base is the value itself; the others are pointers to it.
                WIN_BASE => Some(e.win.base() as *mut c_void),
                WIN_SIZE => Some(&mut a.size as *mut isize as *mut c_void),
                WIN_DISP_UNIT => Some(&mut a.disp_unit as *mut c_int as *mut c_void),
                WIN_CREATE_FLAVOR => Some(&mut a.flavor as *mut c_int as *mut c_void),
                WIN_MODEL => Some(&mut a.model as *mut c_int as *mut c_void),
                k => crate::attrs::obj_get(win, k)?,
            })
        })?;
        // SAFETY: attribute_val is a writable `void *`, flag a writable int (MPI
        // contract; null checked).
        unsafe {
            if let Some(v) = v {
                out(attribute_val as *mut *mut c_void, v)?;
            }
            out(flag, v.is_some() as c_int)
        }
    })
});

export!(MPI_Win_set_attr, PMPI_Win_set_attr,
        (win: Handle, keyval: c_int, attribute_val: *mut c_void) -> c_int {
    guard_win("MPI_Win_set_attr", win, || {
        live(win)?;
        if (WIN_BASE..=WIN_MODEL).contains(&keyval) {
            return Err(err(
                MPI_ERR_KEYVAL,
                format!("predefined attribute {keyval} is read-only"),
            ));
        }
        crate::attrs::obj_set(win, keyval, attribute_val)
    })
});

export!(MPI_Win_delete_attr, PMPI_Win_delete_attr, (win: Handle, keyval: c_int) -> c_int {
    guard_win("MPI_Win_delete_attr", win, || {
        live(win)?;
        crate::attrs::obj_delete(win, keyval)
    })
});

export!(MPI_Win_create_keyval, PMPI_Win_create_keyval,
        (copy_fn: usize, delete_fn: usize, keyval: *mut c_int,
         extra_state: *mut c_void) -> c_int {
    // Windows are never duplicated: the copy function is kept but not called.
    guard("MPI_Win_create_keyval", WORLD, || {
        crate::attrs::create(copy_fn, delete_fn, keyval, extra_state)
    })
});

export!(MPI_Win_free_keyval, PMPI_Win_free_keyval, (keyval: *mut c_int) -> c_int {
    guard("MPI_Win_free_keyval", WORLD, || crate::attrs::free_keyval(keyval))
});

export!(MPI_Win_set_name, PMPI_Win_set_name, (win: Handle, name: *const c_char) -> c_int {
    guard_win("MPI_Win_set_name", win, || {
        // SAFETY: NUL-terminated (MPI contract; null checked).
        let n = unsafe { crate::misc::cstr(name)? };
        let n: String = n.chars().take(crate::types::MAX_OBJECT_NAME - 1).collect();
        with_win(win, |e| {
            e.name = n;
            Ok(())
        })
    })
});

export!(MPI_Win_get_name, PMPI_Win_get_name,
        (win: Handle, name: *mut c_char, resultlen: *mut c_int) -> c_int {
    guard_win("MPI_Win_get_name", win, || {
        let n = with_win(win, |e| Ok(e.name.clone()))?;
        // SAFETY: MPI_MAX_OBJECT_NAME bytes at name, resultlen writable (MPI contract).
        unsafe { crate::env::write_str(name, crate::types::MAX_OBJECT_NAME, &n, resultlen) }
    })
});

export!(MPI_Win_set_errhandler, PMPI_Win_set_errhandler,
        (win: Handle, errhandler: Handle) -> c_int {
    guard_win("MPI_Win_set_errhandler", win, || {
        let eh = errhandler as usize;
        if !crate::errh::valid(eh) {
            return Err(err(MPI_ERR_ARG, format!("invalid error handler {errhandler:p}")));
        }
        with_win(win, |e| {
            e.errh = eh;
            Ok(())
        })
    })
});

export!(MPI_Win_get_errhandler, PMPI_Win_get_errhandler,
        (win: Handle, errhandler: *mut Handle) -> c_int {
    guard_win("MPI_Win_get_errhandler", win, || {
        let eh = with_win(win, |e| Ok(e.errh))?;
        // SAFETY: writable (MPI contract; null checked).
        unsafe { out(errhandler, eh as Handle) }
    })
});

export!(MPI_Win_create_errhandler, PMPI_Win_create_errhandler,
        (win_errhandler_fn: Option<crate::errh::CommErrFn>, errhandler: *mut Handle) -> c_int {
    guard("MPI_Win_create_errhandler", WORLD, || {
        let f = win_errhandler_fn.ok_or_else(|| err(MPI_ERR_ARG, "null error handler function"))?;
        if errhandler.is_null() {
            return Err(err(MPI_ERR_ARG, "null errhandler pointer"));
        }
        // SAFETY: writable (MPI contract; null checked).
        unsafe { out(errhandler, crate::errh::add(f)) }
    })
});

export!(MPI_Win_call_errhandler, PMPI_Win_call_errhandler,
        (win: Handle, errorcode: c_int) -> c_int {
    let r = guard_win("MPI_Win_call_errhandler", win, || live(win));
    if r != MPI_SUCCESS {
        return r;
    }
    let (eh, obj) = handler(win);
    if eh == ERRORS_RETURN {
        return MPI_SUCCESS;
    }
    // A user handler returns here; the predefined fatal ones end the job.
    raise_to("MPI_Win_call_errhandler", eh, obj, err(errorcode, "error raised by the program"));
    MPI_SUCCESS
});

export!(MPI_Win_set_info, PMPI_Win_set_info, (win: Handle, info: Handle) -> c_int {
    guard_win("MPI_Win_set_info", win, || {
        live(win)?;
        crate::misc::info_ok(info)
    })
});

export!(MPI_Win_get_info, PMPI_Win_get_info, (win: Handle, info_used: *mut Handle) -> c_int {
    guard_win("MPI_Win_get_info", win, || {
        live(win)?;
        if info_used.is_null() {
            return Err(err(MPI_ERR_ARG, "null info pointer"));
        }
        // SAFETY: writable (MPI contract; null checked).
        unsafe { out(info_used, crate::misc::info_new(Vec::new())) }
    })
});
