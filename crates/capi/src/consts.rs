//! The MPI-5.0 ABI constants the library needs: handle values, error classes, wildcards,
//! thread levels, and the table of predefined datatypes (size and element kind).

use std::ffi::{c_int, c_void};

/// Every handle type is a pointer to an incomplete struct in C.
pub type Handle = *mut c_void;

/// `MPI_Status`: three public fields and five internal ones (bytes received, low/high).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MPI_Status {
    /// Source rank.
    pub MPI_SOURCE: c_int,
    /// Tag.
    pub MPI_TAG: c_int,
    /// Error class.
    pub MPI_ERROR: c_int,
    /// `[0]`, `[1]`: received byte count (low, high 32 bits).
    pub MPI_internal: [c_int; 5],
}

impl MPI_Status {
    /// A status of `bytes` from `source` with `tag`.
    pub fn new(source: c_int, tag: c_int, bytes: u64) -> Self {
        MPI_Status {
            MPI_SOURCE: source,
            MPI_TAG: tag,
            MPI_ERROR: MPI_SUCCESS,
            MPI_internal: [
                bytes as u32 as c_int,
                (bytes >> 32) as u32 as c_int,
                0,
                0,
                0,
            ],
        }
    }
    /// The status of an empty message (`MPI_PROC_NULL`, `MPI_REQUEST_NULL`).
    pub fn empty(source: c_int) -> Self {
        Self::new(source, MPI_ANY_TAG, 0)
    }
    /// Bytes received.
    pub fn bytes(&self) -> u64 {
        self.MPI_internal[0] as u32 as u64 | (self.MPI_internal[1] as u32 as u64) << 32
    }
}

/// Success.
pub const MPI_SUCCESS: c_int = 0;
/// Invalid buffer.
pub const MPI_ERR_BUFFER: c_int = 1;
/// Invalid count.
pub const MPI_ERR_COUNT: c_int = 2;
/// Invalid datatype.
pub const MPI_ERR_TYPE: c_int = 3;
/// Invalid tag.
pub const MPI_ERR_TAG: c_int = 4;
/// Invalid communicator.
pub const MPI_ERR_COMM: c_int = 5;
/// Invalid rank.
pub const MPI_ERR_RANK: c_int = 6;
/// Invalid request.
pub const MPI_ERR_REQUEST: c_int = 7;
/// Invalid root.
pub const MPI_ERR_ROOT: c_int = 8;
/// Invalid operation.
pub const MPI_ERR_OP: c_int = 10;
/// Invalid group.
pub const MPI_ERR_GROUP: c_int = 9;
/// Invalid info.
pub const MPI_ERR_INFO: c_int = 34;
/// Info key not found.
pub const MPI_ERR_INFO_NOKEY: c_int = 32;
/// Invalid info key.
pub const MPI_ERR_INFO_KEY: c_int = 31;
/// Invalid keyval.
pub const MPI_ERR_KEYVAL: c_int = 36;
/// Invalid argument.
pub const MPI_ERR_ARG: c_int = 13;
/// Invalid dimension argument.
pub const MPI_ERR_DIMS: c_int = 12;
/// `MPI_ERR_TOPOLOGY`.
pub const MPI_ERR_TOPOLOGY: c_int = 11;
/// `MPI_CART` (`MPI_Topo_test`).
pub const MPI_CART: c_int = 211;
/// `MPI_GRAPH` (`MPI_Topo_test`).
pub const MPI_GRAPH: c_int = 212;
/// `MPI_DIST_GRAPH` (`MPI_Topo_test`).
pub const MPI_DIST_GRAPH: c_int = 213;
/// Row-major array order (last dimension varies fastest).
pub const MPI_ORDER_C: c_int = 0xC;
/// Column-major array order (first dimension varies fastest).
pub const MPI_ORDER_FORTRAN: c_int = 0xF;
/// `MPI_Type_create_darray`: a dimension not distributed.
pub const MPI_DISTRIBUTE_NONE: c_int = 16;
/// `MPI_Type_create_darray`: block distribution.
pub const MPI_DISTRIBUTE_BLOCK: c_int = 17;
/// `MPI_Type_create_darray`: cyclic distribution.
pub const MPI_DISTRIBUTE_CYCLIC: c_int = 18;
/// `MPI_Type_create_darray`: the default distribution argument.
pub const MPI_DISTRIBUTE_DFLT_DARG: c_int = 19;
/// Truncated message.
pub const MPI_ERR_TRUNCATE: c_int = 15;
/// Known error not in this list (also: not implemented).
pub const MPI_ERR_OTHER: c_int = 16;
/// Internal error.
pub const MPI_ERR_INTERN: c_int = 17;
/// Error spawning processes.
pub const MPI_ERR_SPAWN: c_int = 53;
/// Invalid assertion argument (one-sided synchronization).
pub const MPI_ERR_ASSERT: c_int = 22;
/// Invalid displacement argument (or displacement unit).
pub const MPI_ERR_DISP: c_int = 26;
/// Invalid lock type.
pub const MPI_ERR_LOCKTYPE: c_int = 37;
/// Memory cannot be attached (a dynamic window).
pub const MPI_ERR_RMA_ATTACH: c_int = 46;
/// Target memory outside the window.
pub const MPI_ERR_RMA_RANGE: c_int = 48;
/// Wrong one-sided synchronization.
pub const MPI_ERR_RMA_SYNC: c_int = 50;
/// Invalid size argument.
pub const MPI_ERR_SIZE: c_int = 52;
/// Invalid window.
pub const MPI_ERR_WIN: c_int = 56;
/// The window's flavor does not allow the call.
pub const MPI_ERR_RMA_FLAVOR: c_int = 57;
/// Highest predefined class.
pub const MPI_ERR_ABI: c_int = 62;

/// Wildcard source.
pub const MPI_ANY_SOURCE: c_int = -1;
/// Wildcard tag.
pub const MPI_ANY_TAG: c_int = -2;
/// Null process.
pub const MPI_PROC_NULL: c_int = -3;
/// The root of an intercommunicator collective, in its own group.
pub const MPI_ROOT: c_int = -4;
/// Undefined value.
pub const MPI_UNDEFINED: c_int = -32766;
/// Thread level: one thread.
pub const MPI_THREAD_SINGLE: c_int = 0;
/// Thread level: only the thread that initialized MPI calls it (what `MPI_Init` gives).
pub const MPI_THREAD_FUNNELED: c_int = 1024;
/// Thread level: any thread, one at a time.
pub const MPI_THREAD_SERIALIZED: c_int = 2048;
/// Thread level: any thread at any time.
pub const MPI_THREAD_MULTIPLE: c_int = 4096;

/// `MPI_IN_PLACE`.
pub const IN_PLACE: Handle = 1 as Handle;

/// `MPI_COMM_NULL`.
pub const COMM_NULL: usize = 0x100;
/// `MPI_COMM_WORLD`.
pub const COMM_WORLD: usize = 0x101;
/// `MPI_COMM_SELF`.
pub const COMM_SELF: usize = 0x102;
/// `MPI_ERRORS_ARE_FATAL`.
pub const ERRORS_ARE_FATAL: usize = 0x141;
/// `MPI_ERRORS_RETURN`.
pub const ERRORS_RETURN: usize = 0x142;
/// `MPI_ERRORS_ABORT`.
pub const ERRORS_ABORT: usize = 0x143;
/// `MPI_REQUEST_NULL`.
pub const REQUEST_NULL: usize = 0x180;

/// Element kind of a predefined datatype (what a reduction computes on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Signed 8-bit.
    I8,
    /// Unsigned 8-bit.
    U8,
    /// Signed 16-bit.
    I16,
    /// Unsigned 16-bit.
    U16,
    /// Signed 32-bit.
    I32,
    /// Unsigned 32-bit.
    U32,
    /// Signed 64-bit.
    I64,
    /// Unsigned 64-bit.
    U64,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// Moved as bytes only (no reductions yet).
    Opaque,
}

/// A predefined datatype: size in bytes and element kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dt {
    /// Size (= extent: all are contiguous).
    pub size: usize,
    /// Element kind.
    pub kind: Kind,
}

/// First handle value of the predefined datatypes, and how many values from there
/// [`DT_SIZE`] and [`DT_TABLE`] cover.
const DT_FIRST: usize = 0x200;
const DT_SPAN: usize = 0xe0;

/// Size of each predefined datatype by `handle - DT_FIRST` (0: no such datatype).
static DT_SIZE: [u8; DT_SPAN] = {
    let mut t = [0u8; DT_SPAN];
    let mut i = 0;
    while i < DT_SPAN {
        if let Some(d) = datatype_def(DT_FIRST + i) {
            t[i] = d.size as u8;
        }
        i += 1;
    }
    t
};

/// The size of the predefined datatype with handle value `h` (one table load: the
/// small-message path's check).
#[inline]
pub fn datatype_size(h: usize) -> Option<usize> {
    match DT_SIZE.get(h.wrapping_sub(DT_FIRST)) {
        Some(&s) if s != 0 => Some(s as usize),
        _ => None,
    }
}

/// The predefined datatype with ABI handle value `h` (one table load: every call with a
/// datatype asks, most of them more than once).
#[inline]
pub fn datatype(h: usize) -> Option<Dt> {
    match DT_TABLE.get(h.wrapping_sub(DT_FIRST)) {
        Some(d) => *d,
        None => None,
    }
}

/// [`datatype`] of every handle value from `DT_FIRST` on, built from [`datatype_def`].
static DT_TABLE: [Option<Dt>; DT_SPAN] = {
    let mut t = [None; DT_SPAN];
    let mut i = 0;
    while i < DT_SPAN {
        t[i] = datatype_def(DT_FIRST + i);
        i += 1;
    }
    t
};

/// The definition of the predefined datatypes: [`datatype`] of ABI handle value `h`.
pub(crate) const fn datatype_def(h: usize) -> Option<Dt> {
    use Kind::*;
    let long = if std::mem::size_of::<std::ffi::c_long>() == 8 {
        (8, I64, U64)
    } else {
        (4, I32, U32)
    };
    let (size, kind) = match h {
        0x201 => (std::mem::size_of::<isize>(), I64),
        0x202 | 0x203 => (8, I64),
        0x207 => (1, Opaque),
        0x208 => (2, I16),
        0x209 => (4, I32),
        0x20a => (long.0, long.1),
        0x20b => (8, I64),
        0x20c => (2, U16),
        0x20d => (4, U32),
        0x20e => (long.0, long.2),
        0x20f => (8, U64),
        0x210 => (4, F32),
        0x212 | 0x213 => (8, Opaque),
        0x214 => (8, F64),
        0x216 | 0x217 => (16, Opaque),
        0x218 | 0x219 => (4, I32),
        0x21a => (4, F32),
        0x21b => (8, Opaque),
        0x21c => (8, F64),
        0x21d => (16, Opaque),
        0x21e => (1, U8),
        0x220 => (16, Opaque),
        0x224 | 0x225 => (32, Opaque),
        0x228 => (8, Opaque),
        0x229 => (16, Opaque),
        0x22a => (16, Opaque),
        0x22b => (8, Opaque),
        0x22c => (8, Opaque),
        0x22d => (32, Opaque),
        0x230 | 0x232 => (8, Opaque),
        0x231 => (16, Opaque),
        0x238 | 0x239 => (1, U8),
        0x23c => (4, I32),
        0x2c0 | 0x2c1 => (1, I8),
        0x2c8 | 0x2c9 => (2, I16),
        0x2d0 | 0x2d1 => (4, I32),
        0x2d2 => (4, F32),
        0x2d8 | 0x2d9 => (8, I64),
        0x2da => (8, F64),
        // MPI_COMPLEX4 and MPI_COMPLEX8: Fortran COMPLEX*4 and COMPLEX*8, two 2-byte and
        // two 4-byte reals (the handle's size class says 4 and 8 bytes).
        0x2d3 => (4, Opaque),
        0x2db => (8, Opaque),
        0x240 | 0x243 | 0x244 => (1, I8),
        0x241 | 0x245 | 0x247 => (1, U8),
        0x248 => (2, I16),
        0x249 => (2, U16),
        0x250 => (4, I32),
        0x251 => (4, U32),
        0x258 => (8, I64),
        0x259 => (8, U64),
        _ => return None,
    };
    Some(Dt { size, kind })
}

/// The predefined reduction operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `MPI_SUM`.
    Sum,
    /// `MPI_MIN`.
    Min,
    /// `MPI_MAX`.
    Max,
    /// `MPI_PROD`.
    Prod,
    /// `MPI_LAND`.
    Land,
    /// `MPI_LOR`.
    Lor,
    /// `MPI_LXOR`.
    Lxor,
    /// `MPI_BAND`.
    Band,
    /// `MPI_BOR`.
    Bor,
    /// `MPI_BXOR`.
    Bxor,
    /// `MPI_MINLOC`.
    MinLoc,
    /// `MPI_MAXLOC`.
    MaxLoc,
    /// `MPI_REPLACE`.
    Replace,
    /// `MPI_NO_OP`.
    NoOp,
}

/// The operation with ABI handle value `h`.
pub fn op(h: usize) -> Option<Op> {
    Some(match h {
        0x21 => Op::Sum,
        0x22 => Op::Min,
        0x23 => Op::Max,
        0x24 => Op::Prod,
        0x28 => Op::Band,
        0x29 => Op::Bor,
        0x2a => Op::Bxor,
        0x30 => Op::Land,
        0x31 => Op::Lor,
        0x32 => Op::Lxor,
        0x38 => Op::MinLoc,
        0x39 => Op::MaxLoc,
        0x3c => Op::Replace,
        0x3d => Op::NoOp,
        _ => return None,
    })
}

const ERROR_NAMES: [&str; 63] = [
    "MPI_SUCCESS: no error",
    "MPI_ERR_BUFFER: invalid buffer pointer",
    "MPI_ERR_COUNT: invalid count argument",
    "MPI_ERR_TYPE: invalid datatype",
    "MPI_ERR_TAG: invalid tag",
    "MPI_ERR_COMM: invalid communicator",
    "MPI_ERR_RANK: invalid rank",
    "MPI_ERR_REQUEST: invalid request",
    "MPI_ERR_ROOT: invalid root",
    "MPI_ERR_GROUP: invalid group",
    "MPI_ERR_OP: invalid operation",
    "MPI_ERR_TOPOLOGY: invalid topology",
    "MPI_ERR_DIMS: invalid dimension argument",
    "MPI_ERR_ARG: invalid argument",
    "MPI_ERR_UNKNOWN: unknown error",
    "MPI_ERR_TRUNCATE: message truncated on receive",
    "MPI_ERR_OTHER: known error not in this list",
    "MPI_ERR_INTERN: internal error",
    "MPI_ERR_PENDING: pending request",
    "MPI_ERR_IN_STATUS: error code is in status",
    "MPI_ERR_ACCESS: permission denied",
    "MPI_ERR_AMODE: invalid file access mode",
    "MPI_ERR_ASSERT: invalid assertion",
    "MPI_ERR_BAD_FILE: invalid file name",
    "MPI_ERR_BASE: invalid base",
    "MPI_ERR_CONVERSION: data conversion error",
    "MPI_ERR_DISP: invalid displacement",
    "MPI_ERR_DUP_DATAREP: data representation already defined",
    "MPI_ERR_FILE_EXISTS: file exists",
    "MPI_ERR_FILE_IN_USE: file in use",
    "MPI_ERR_FILE: invalid file handle",
    "MPI_ERR_INFO_KEY: invalid info key",
    "MPI_ERR_INFO_NOKEY: info key not defined",
    "MPI_ERR_INFO_VALUE: invalid info value",
    "MPI_ERR_INFO: invalid info object",
    "MPI_ERR_IO: I/O error",
    "MPI_ERR_KEYVAL: invalid attribute key",
    "MPI_ERR_LOCKTYPE: invalid lock type",
    "MPI_ERR_NAME: service name not published",
    "MPI_ERR_NO_MEM: out of memory",
    "MPI_ERR_NOT_SAME: collective arguments not identical",
    "MPI_ERR_NO_SPACE: not enough space",
    "MPI_ERR_NO_SUCH_FILE: file does not exist",
    "MPI_ERR_PORT: invalid port name",
    "MPI_ERR_QUOTA: quota exceeded",
    "MPI_ERR_READ_ONLY: read-only file or file system",
    "MPI_ERR_RMA_ATTACH: memory cannot be attached",
    "MPI_ERR_RMA_CONFLICT: conflicting accesses to a window",
    "MPI_ERR_RMA_RANGE: target memory out of window range",
    "MPI_ERR_RMA_SHARED: memory cannot be shared",
    "MPI_ERR_RMA_SYNC: wrong RMA synchronization",
    "MPI_ERR_SERVICE: invalid service name",
    "MPI_ERR_SIZE: invalid size argument",
    "MPI_ERR_SPAWN: error spawning processes",
    "MPI_ERR_UNSUPPORTED_DATAREP: unsupported data representation",
    "MPI_ERR_UNSUPPORTED_OPERATION: unsupported operation",
    "MPI_ERR_WIN: invalid window",
    "MPI_ERR_RMA_FLAVOR: wrong window flavor",
    "MPI_ERR_PROC_ABORTED: operation on an aborted process",
    "MPI_ERR_VALUE_TOO_LARGE: value too large to store",
    "MPI_ERR_SESSION: invalid session",
    "MPI_ERR_ERRHANDLER: invalid error handler",
    "MPI_ERR_ABI: ABI error",
];

/// Name and description of an error class (or code: phalanx's codes are its classes).
pub fn error_name(class: c_int) -> &'static str {
    usize::try_from(class)
        .ok()
        .and_then(|i| ERROR_NAMES.get(i).copied())
        .unwrap_or("unknown error code")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_datatype_table_holds_every_predefined_datatype() {
        for h in 0..0x1000 {
            assert_eq!(datatype(h), datatype_def(h), "handle {h:#x}");
            // The one-byte size table says "predefined" exactly where the full one does.
            assert_eq!(
                datatype_size(h),
                datatype(h).map(|d| d.size),
                "handle {h:#x}"
            );
        }
        assert!(datatype(usize::MAX).is_none());
    }
}
