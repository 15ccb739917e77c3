//! Handle conversion to and from integers: the MPI-5 ABI's `MPI_<Kind>_toint` and
//! `MPI_<Kind>_fromint` for every handle kind (communicator, datatype, request, …), and
//! the classic `MPI_<Kind>_c2f`/`_f2c` names as macros over them in `mpi.h`.
//!
//! Contract: a handle whose value fits a non-negative `int` (every predefined handle and
//! every communicator, datatype, operation, group, info and window handle phalanx makes)
//! converts to that value, so predefined handles have their ABI values as integers.
//! Other handles (requests of the small-message path carry an engine id in their upper
//! bits) get a negative integer from a per-process table, the same one each time, and
//! convert back through it; at most [`MAX_WIDE`] such handles are numbered (more is
//! `MPI_ERR_INTERN`, raised on `MPI_COMM_WORLD`). An integer no handle was converted to
//! comes back as the handle of that value (negative: the null handle of the kind).

use crate::consts::*;
use crate::{err, export, guard};
use phalanx::capi_support::Shared;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_int;

/// Most handles too wide for an `int` that get a table number.
const MAX_WIDE: usize = 1 << 20;

/// Wide handles by number (−1 − index) and numbers by handle.
#[derive(Default)]
struct Wide {
    handles: Vec<usize>,
    numbers: HashMap<usize, c_int>,
}

static WIDE: Shared<RefCell<Wide>> = Shared::new(|| RefCell::new(Wide::default()));

/// The integer of handle `h` (module docs); `None` when the table is full.
fn toint(h: Handle) -> Option<c_int> {
    let v = h as usize;
    if let Ok(i) = c_int::try_from(v) {
        return Some(i);
    }
    WIDE.with(|w| {
        let mut w = w.borrow_mut();
        if let Some(&i) = w.numbers.get(&v) {
            return Some(i);
        }
        if w.handles.len() >= MAX_WIDE {
            return None;
        }
        let i = -1 - w.handles.len() as c_int;
        w.handles.push(v);
        w.numbers.insert(v, i);
        Some(i)
    })
}

/// The handle of integer `i` (module docs); `null` for an unknown negative one.
fn fromint(i: c_int, null: usize) -> Handle {
    if i >= 0 {
        return i as usize as Handle;
    }
    let k = (-1 - i as i64) as usize;
    WIDE.with(|w| w.borrow().handles.get(k).copied())
        .unwrap_or(null) as Handle
}

/// `MPI_<Kind>_toint` and `MPI_<Kind>_fromint` with the kind's null handle.
macro_rules! kind {
    ($to:ident, $pto:ident, $from:ident, $pfrom:ident, $null:expr) => {
        export!($to, $pto, (h: Handle) -> c_int {
            match toint(h) {
                Some(i) => i,
                None => {
                    guard(stringify!($to), COMM_WORLD as Handle, || {
                        Err(err(MPI_ERR_INTERN, "too many wide handles converted to integers"))
                    });
                    -1
                }
            }
        });
        export!($from, $pfrom, (i: c_int) -> Handle { fromint(i, $null) });
    };
}

kind!(
    MPI_Comm_toint,
    PMPI_Comm_toint,
    MPI_Comm_fromint,
    PMPI_Comm_fromint,
    0x100
);
kind!(
    MPI_Group_toint,
    PMPI_Group_toint,
    MPI_Group_fromint,
    PMPI_Group_fromint,
    0x108
);
kind!(
    MPI_Win_toint,
    PMPI_Win_toint,
    MPI_Win_fromint,
    PMPI_Win_fromint,
    0x110
);
kind!(
    MPI_File_toint,
    PMPI_File_toint,
    MPI_File_fromint,
    PMPI_File_fromint,
    0x118
);
kind!(
    MPI_Session_toint,
    PMPI_Session_toint,
    MPI_Session_fromint,
    PMPI_Session_fromint,
    0x120
);
kind!(
    MPI_Message_toint,
    PMPI_Message_toint,
    MPI_Message_fromint,
    PMPI_Message_fromint,
    0x128
);
kind!(
    MPI_Info_toint,
    PMPI_Info_toint,
    MPI_Info_fromint,
    PMPI_Info_fromint,
    0x130
);
kind!(
    MPI_Errhandler_toint,
    PMPI_Errhandler_toint,
    MPI_Errhandler_fromint,
    PMPI_Errhandler_fromint,
    0x140
);
kind!(
    MPI_Request_toint,
    PMPI_Request_toint,
    MPI_Request_fromint,
    PMPI_Request_fromint,
    0x180
);
kind!(
    MPI_Type_toint,
    PMPI_Type_toint,
    MPI_Type_fromint,
    PMPI_Type_fromint,
    0x200
);
kind!(
    MPI_Op_toint,
    PMPI_Op_toint,
    MPI_Op_fromint,
    PMPI_Op_fromint,
    0x20
);
