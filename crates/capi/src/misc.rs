//! Assorted local calls: `MPI_Request_get_status`, `MPI_Status_{get,set}_*`,
//! `MPI_Comm_get_name`, `MPI_Comm_set_name`, `MPI_Comm_split_type`, `MPI_Alloc_mem`,
//! `MPI_Free_mem`, and info objects (`MPI_Info_create`, `set`, `get`, `get_string`,
//! `get_nkeys`, `get_nthkey`, `delete`, `dup`, `free`).
//!
//! Contract: `MPI_Request_get_status` tests without freeing (a completed request stays
//! valid for `MPI_Wait*`/`MPI_Test*`). Communicator names live in a per-thread table
//! (`MPI_COMM_WORLD`/`MPI_COMM_SELF` are named by default; others are empty until set).
//! `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` groups the ranks whose host name matches
//! (phalanx's shared-memory domain is one host); other split types give `MPI_COMM_NULL`
//! (allowed by MPI for `MPI_COMM_TYPE_HW_*`). Info objects are ordered key/value lists
//! in a per-thread table (handles from 0x3000000 up); `MPI_INFO_ENV` is empty.

use crate::consts::*;
use crate::env::write_str;
use crate::p2p::{complete, put_status};
use crate::state;
use crate::{err, export, guard, out, CResult};
use phalanx::capi_support::Shared;
use phalanx::topology::Color;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};

const WORLD: Handle = COMM_WORLD as Handle;
const INFO_NULL: usize = 0x130;
const INFO_ENV: usize = 0x131;

/// The status of request `h` if it is complete, leaving it valid for `MPI_Wait*`/
/// `MPI_Test*` (an empty status for `MPI_REQUEST_NULL` and an inactive persistent
/// request; `None` while it runs).
pub(crate) fn peek_status(h: Handle) -> CResult<Option<MPI_Status>> {
    if h as usize == REQUEST_NULL || crate::p2p::is_inactive(h) {
        return Ok(Some(MPI_Status::empty(MPI_ANY_SOURCE)));
    }
    let st = complete(h, false)?;
    if let Some(st) = st {
        crate::p2p::park(h, st);
    }
    Ok(st)
}

export!(MPI_Request_get_status, PMPI_Request_get_status,
        (request: Handle, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    guard("MPI_Request_get_status", WORLD, || {
        let st = peek_status(request)?;
        // SAFETY: writable flag (null checked) and status (or MPI_STATUS_IGNORE).
        unsafe {
            out(flag, st.is_some() as c_int)?;
            if let Some(st) = st {
                put_status(status, st);
            }
        }
        Ok(())
    })
});

/// Runs `f` on the status at `p`.
///
/// # Safety
/// `p` is null (an error) or a valid status.
unsafe fn with_status<T>(p: *mut MPI_Status, f: impl FnOnce(&mut MPI_Status) -> T) -> CResult<T> {
    if p.is_null() {
        return Err(err(MPI_ERR_ARG, "null status"));
    }
    // SAFETY: non-null, valid (caller).
    Ok(f(unsafe { &mut *p }))
}

macro_rules! status_field {
    ($get:ident, $pget:ident, $set:ident, $pset:ident, $field:ident) => {
        export!($get, $pget, (status: *const MPI_Status, v: *mut c_int) -> c_int {
            guard(stringify!($get), WORLD, || {
                // SAFETY: readable status, writable int (MPI contract; null checked).
                unsafe {
                    let x = with_status(status as *mut MPI_Status, |s| s.$field)?;
                    out(v, x)
                }
            })
        });
        export!($set, $pset, (status: *mut MPI_Status, v: c_int) -> c_int {
            guard(stringify!($set), WORLD, || {
                // SAFETY: writable status (MPI contract; null checked).
                unsafe { with_status(status, |s| s.$field = v) }
            })
        });
    };
}

status_field!(
    MPI_Status_get_source,
    PMPI_Status_get_source,
    MPI_Status_set_source,
    PMPI_Status_set_source,
    MPI_SOURCE
);
status_field!(
    MPI_Status_get_tag,
    PMPI_Status_get_tag,
    MPI_Status_set_tag,
    PMPI_Status_set_tag,
    MPI_TAG
);
status_field!(
    MPI_Status_get_error,
    PMPI_Status_get_error,
    MPI_Status_set_error,
    PMPI_Status_set_error,
    MPI_ERROR
);

export!(MPI_Status_set_elements, PMPI_Status_set_elements,
        (status: *mut MPI_Status, datatype: Handle, cnt: c_int) -> c_int {
    guard("MPI_Status_set_elements", WORLD, || {
        // SAFETY: writable status (MPI contract; null checked).
        unsafe { set_elements(status, datatype, cnt.into()) }
    })
});

/// `MPI_Status_set_elements(_c, _x)`: `cnt` basic elements of `datatype` as the
/// status's 64-bit byte count.
///
/// # Safety
/// `status` is null (an error) or writable.
pub(crate) unsafe fn set_elements(status: *mut MPI_Status, datatype: Handle, cnt: i64) -> CResult {
    let l = crate::types::any_layout(datatype)?;
    let unit = l
        .prim
        .and_then(crate::consts::datatype)
        .map_or(l.size, |d| d.size);
    let bytes = crate::span(crate::count(cnt)?, unit)? as u64;
    // SAFETY: writable status (caller; null checked).
    unsafe {
        with_status(status, |s| {
            s.MPI_internal[0] = bytes as u32 as c_int;
            s.MPI_internal[1] = (bytes >> 32) as u32 as c_int;
        })
    }
}

export!(MPI_Status_set_cancelled, PMPI_Status_set_cancelled,
        (status: *mut MPI_Status, flag: c_int) -> c_int {
    guard("MPI_Status_set_cancelled", WORLD, || {
        // SAFETY: writable status (MPI contract; null checked).
        unsafe { with_status(status, |s| s.MPI_internal[2] = (flag != 0) as c_int) }
    })
});

/// Info objects by handle, and the next handle number.
type InfoTable = (HashMap<usize, Vec<(String, String)>>, usize);

static NAMES: Shared<RefCell<HashMap<usize, String>>> =
    Shared::new(|| RefCell::new(HashMap::new()));
static INFOS: Shared<RefCell<InfoTable>> = Shared::new(|| RefCell::new((HashMap::new(), 0)));

/// Reads the C string at `p`.
///
/// # Safety
/// `p` is null (an error) or NUL-terminated.
pub(crate) unsafe fn cstr(p: *const c_char) -> CResult<String> {
    if p.is_null() {
        return Err(err(MPI_ERR_ARG, "null string"));
    }
    // SAFETY: NUL-terminated (caller).
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

export!(MPI_Comm_set_name, PMPI_Comm_set_name, (comm: Handle, name: *const c_char) -> c_int {
    guard("MPI_Comm_set_name", comm, || {
        state::comm(comm)?;
        // SAFETY: NUL-terminated name (MPI contract; null checked).
        let n: String = unsafe { cstr(name)? }.chars().take(127).collect();
        NAMES.with(|t| t.borrow_mut().insert(comm as usize, n));
        Ok(())
    })
});

export!(MPI_Comm_get_name, PMPI_Comm_get_name,
        (comm: Handle, name: *mut c_char, resultlen: *mut c_int) -> c_int {
    guard("MPI_Comm_get_name", comm, || {
        state::comm(comm)?;
        let n = NAMES.with(|t| t.borrow().get(&(comm as usize)).cloned()).unwrap_or_else(|| {
            match comm as usize {
                COMM_WORLD => "MPI_COMM_WORLD".into(),
                COMM_SELF => "MPI_COMM_SELF".into(),
                _ => String::new(),
            }
        });
        // SAFETY: name has MPI_MAX_OBJECT_NAME bytes, resultlen writable (MPI contract).
        unsafe { write_str(name, crate::types::MAX_OBJECT_NAME, &n, resultlen) }
    })
});

/// `MPI_COMM_TYPE_SHARED`.
const COMM_TYPE_SHARED: c_int = 221;

export!(MPI_Comm_split_type, PMPI_Comm_split_type,
        (comm: Handle, split_type: c_int, key: c_int, info: Handle,
         newcomm: *mut Handle) -> c_int {
    guard("MPI_Comm_split_type", comm, || {
        let _ = info;
        let c = state::comm(comm)?;
        if newcomm.is_null() {
            return Err(err(MPI_ERR_ARG, "null newcomm"));
        }
        let color = match split_type {
            MPI_UNDEFINED => Color::undefined(),
            COMM_TYPE_SHARED => {
                let mut buf = [0u8; 256];
                // SAFETY: the buffer is writable for its length.
                unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
                let h = buf.iter().take_while(|&&b| b != 0).fold(17u32, |a, &b| {
                    a.wrapping_mul(31).wrapping_add(b as u32)
                });
                Color::with_value((h & 0x3fff_ffff) as c_int)
            }
            222..=224 => Color::undefined(),
            t => return Err(err(MPI_ERR_ARG, format!("invalid split type {t}"))),
        };
        let h = match c.split_by_color_with_key(color, key) {
            Some(n) => state::add_comm(n, state::errhandler(comm)),
            None => COMM_NULL as Handle,
        };
        // SAFETY: non-null, writable (MPI contract).
        unsafe { out(newcomm, h) }
    })
});

export!(MPI_Alloc_mem, PMPI_Alloc_mem, (size: isize, info: Handle, baseptr: *mut c_void) -> c_int {
    guard("MPI_Alloc_mem", WORLD, || {
        let _ = info;
        if size < 0 {
            return Err(err(MPI_ERR_ARG, format!("invalid size {size}")));
        }
        // SAFETY: plain allocation; at least one byte so the pointer is unique.
        let p = unsafe { libc::malloc((size as usize).max(1)) };
        if p.is_null() {
            return Err(err(39, "out of memory"));
        }
        // SAFETY: baseptr is a writable `void *` (MPI contract; null checked).
        unsafe { out(baseptr as *mut *mut c_void, p) }
    })
});

export!(MPI_Free_mem, PMPI_Free_mem, (base: *mut c_void) -> c_int {
    // SAFETY: base came from MPI_Alloc_mem (MPI contract) or is null.
    unsafe { libc::free(base) };
    MPI_SUCCESS
});

/// Runs `f` on the key/value list of info `h` (`MPI_INFO_ENV`: an empty list).
pub(crate) fn info_get<T>(
    h: Handle,
    f: impl FnOnce(&mut Vec<(String, String)>) -> T,
) -> CResult<T> {
    if h as usize == INFO_ENV {
        return Ok(f(&mut Vec::new()));
    }
    INFOS
        .with(|t| t.borrow_mut().0.get_mut(&(h as usize)).map(f))
        .ok_or_else(|| err(MPI_ERR_INFO, format!("invalid info {h:p}")))
}

/// Checks an info argument: `MPI_INFO_NULL`, `MPI_INFO_ENV` or a live info object.
pub(crate) fn info_ok(h: Handle) -> CResult {
    if h as usize == INFO_NULL {
        return Ok(());
    }
    info_get(h, |_| ())
}

/// A new info object holding `v`.
pub(crate) fn info_new(v: Vec<(String, String)>) -> Handle {
    INFOS.with(|t| {
        let mut t = t.borrow_mut();
        let h = 0x300_0000 + t.1;
        t.1 += 1;
        t.0.insert(h, v);
        h as Handle
    })
}

fn key_ok(k: &str) -> CResult {
    if k.is_empty() || k.len() >= 256 {
        return Err(err(MPI_ERR_INFO_KEY, format!("invalid info key {k:?}")));
    }
    Ok(())
}

export!(MPI_Info_create, PMPI_Info_create, (info: *mut Handle) -> c_int {
    // SAFETY: writable handle (MPI contract; null checked).
    guard("MPI_Info_create", WORLD, || unsafe { out(info, info_new(Vec::new())) })
});

export!(MPI_Info_set, PMPI_Info_set,
        (info: Handle, key: *const c_char, value: *const c_char) -> c_int {
    guard("MPI_Info_set", WORLD, || {
        // SAFETY: NUL-terminated strings (MPI contract; null checked).
        let (k, v) = unsafe { (cstr(key)?, cstr(value)?) };
        key_ok(&k)?;
        if info as usize == INFO_ENV {
            return Err(err(MPI_ERR_INFO, "MPI_INFO_ENV is read-only"));
        }
        info_get(info, |l| match l.iter_mut().find(|e| e.0 == k) {
            Some(e) => e.1 = v,
            None => l.push((k, v)),
        })
    })
});

export!(MPI_Info_delete, PMPI_Info_delete, (info: Handle, key: *const c_char) -> c_int {
    guard("MPI_Info_delete", WORLD, || {
        // SAFETY: NUL-terminated key (MPI contract; null checked).
        let k = unsafe { cstr(key)? };
        let found = info_get(info, |l| {
            let n = l.len();
            l.retain(|e| e.0 != k);
            n != l.len()
        })?;
        if !found {
            return Err(err(MPI_ERR_INFO_NOKEY, format!("no info key {k:?}")));
        }
        Ok(())
    })
});

/// Copies `v` (at most `room - 1` bytes and a NUL) to `dst`.
///
/// # Safety
/// `dst` has room for `room` bytes.
unsafe fn copy_out(dst: *mut c_char, room: usize, v: &str) -> CResult {
    if room == 0 {
        return Ok(());
    }
    if dst.is_null() {
        return Err(err(MPI_ERR_ARG, "null value buffer"));
    }
    let n = v.len().min(room - 1);
    // SAFETY: room bytes writable (caller).
    unsafe {
        std::ptr::copy_nonoverlapping(v.as_ptr(), dst as *mut u8, n);
        *dst.add(n) = 0;
    }
    Ok(())
}

export!(MPI_Info_get, PMPI_Info_get,
        (info: Handle, key: *const c_char, valuelen: c_int, value: *mut c_char,
         flag: *mut c_int) -> c_int {
    guard("MPI_Info_get", WORLD, || {
        // SAFETY: NUL-terminated key (MPI contract; null checked).
        let k = unsafe { cstr(key)? };
        key_ok(&k)?;
        let v = info_get(info, |l| l.iter().find(|e| e.0 == k).map(|e| e.1.clone()))?;
        // SAFETY: value has valuelen + 1 bytes, flag writable (MPI contract).
        unsafe {
            if let Some(v) = &v {
                copy_out(value, crate::count(valuelen)? + 1, v)?;
            }
            out(flag, v.is_some() as c_int)
        }
    })
});

export!(MPI_Info_get_string, PMPI_Info_get_string,
        (info: Handle, key: *const c_char, buflen: *mut c_int, value: *mut c_char,
         flag: *mut c_int) -> c_int {
    guard("MPI_Info_get_string", WORLD, || {
        // SAFETY: NUL-terminated key (MPI contract; null checked).
        let k = unsafe { cstr(key)? };
        let v = info_get(info, |l| l.iter().find(|e| e.0 == k).map(|e| e.1.clone()))?;
        if buflen.is_null() {
            return Err(err(MPI_ERR_ARG, "null buflen"));
        }
        // SAFETY: buflen readable and writable, value has *buflen bytes (MPI contract).
        unsafe {
            if let Some(v) = &v {
                copy_out(value, crate::count(buflen.read())?, v)?;
                buflen.write(v.len() as c_int + 1);
            }
            out(flag, v.is_some() as c_int)
        }
    })
});

export!(MPI_Info_get_nkeys, PMPI_Info_get_nkeys, (info: Handle, nkeys: *mut c_int) -> c_int {
    guard("MPI_Info_get_nkeys", WORLD, || {
        let n = info_get(info, |l| l.len() as c_int)?;
        // SAFETY: writable int (MPI contract; null checked).
        unsafe { out(nkeys, n) }
    })
});

export!(MPI_Info_get_nthkey, PMPI_Info_get_nthkey,
        (info: Handle, n: c_int, key: *mut c_char) -> c_int {
    guard("MPI_Info_get_nthkey", WORLD, || {
        let k = info_get(info, |l| usize::try_from(n).ok().and_then(|i| l.get(i)).map(|e| e.0.clone()))?
            .ok_or_else(|| err(MPI_ERR_ARG, format!("no key number {n}")))?;
        // SAFETY: key has MPI_MAX_INFO_KEY bytes (MPI contract).
        unsafe { copy_out(key, 256, &k) }
    })
});

export!(MPI_Info_dup, PMPI_Info_dup, (info: Handle, newinfo: *mut Handle) -> c_int {
    guard("MPI_Info_dup", WORLD, || {
        let v = info_get(info, |l| l.clone())?;
        // SAFETY: writable handle (MPI contract; null checked).
        unsafe { out(newinfo, info_new(v)) }
    })
});

export!(MPI_Info_free, PMPI_Info_free, (info: *mut Handle) -> c_int {
    guard("MPI_Info_free", WORLD, || {
        // SAFETY: readable and writable handle (null checked).
        unsafe {
            let h = crate::p2p::read_req(info)? as usize;
            if INFOS.with(|t| t.borrow_mut().0.remove(&h)).is_none() {
                return Err(err(MPI_ERR_INFO, format!("invalid info {h:#x}")));
            }
            out(info, INFO_NULL as Handle)
        }
    })
});
