//! The large-count (`_c`, `_x`) forms of point-to-point and status calls: `MPI_Send_c`,
//! `Recv_c`, `Isend_c`, `Irecv_c`, `Ssend_c`, `Issend_c`, `Rsend_c`, `Irsend_c`,
//! `Bsend_c`, `Ibsend_c`, `Sendrecv_c`, `Sendrecv_replace_c`, the persistent
//! `Send_init_c`, `Ssend_init_c`, `Rsend_init_c`, `Bsend_init_c`, `Recv_init_c`,
//! `Get_count_c`, `Get_elements_c`/`_x`, `Status_set_elements_c`/`_x`,
//! `Buffer_attach_c`, `Buffer_detach_c`.
//!
//! Contract: each is its `int` form's implementation called with the 64-bit
//! [`Count`] (the `int` forms widen theirs and call the same functions: [`crate::p2p`],
//! [`crate::fastpath`], [`crate::bsend`], [`crate::persist`]). A negative count is
//! `MPI_ERR_COUNT`, and so is a count whose byte length (count × type size) passes
//! `isize::MAX` ([`crate::span`]); nothing narrows a count to `int`. The status keeps
//! the received byte count in 64 bits (`MPI_internal[0..2]`): `MPI_Get_count_c` and
//! `MPI_Get_elements_c`/`_x` return it whole, their `int` forms `MPI_UNDEFINED` when it
//! does not fit an `int`.

use crate::consts::*;
use crate::p2p::{irecv_impl, isend_impl, recv_impl, send_impl, sendrecv_impl};
use crate::persist::{init, Mode, Op};
use crate::{err, export, guard, out, state, Count};
use std::ffi::{c_int, c_void};

const WORLD: Handle = COMM_WORLD as Handle;

export!(MPI_Send_c, PMPI_Send_c,
        (buf: *const c_void, cnt: Count, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle) -> c_int {
    send_impl("MPI_Send_c", buf, cnt, datatype, dest, tag, comm, false)
});

export!(MPI_Ssend_c, PMPI_Ssend_c,
        (buf: *const c_void, cnt: Count, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle) -> c_int {
    send_impl("MPI_Ssend_c", buf, cnt, datatype, dest, tag, comm, true)
});

export!(MPI_Rsend_c, PMPI_Rsend_c,
        (buf: *const c_void, cnt: Count, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle) -> c_int {
    send_impl("MPI_Rsend_c", buf, cnt, datatype, dest, tag, comm, false)
});

export!(MPI_Recv_c, PMPI_Recv_c,
        (buf: *mut c_void, cnt: Count, datatype: Handle, source: c_int, tag: c_int,
         comm: Handle, status: *mut MPI_Status) -> c_int {
    recv_impl("MPI_Recv_c", buf, cnt, datatype, source, tag, comm, status)
});

export!(MPI_Isend_c, PMPI_Isend_c,
        (buf: *const c_void, cnt: Count, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    isend_impl("MPI_Isend_c", buf, cnt, datatype, dest, tag, comm, request, false)
});

export!(MPI_Issend_c, PMPI_Issend_c,
        (buf: *const c_void, cnt: Count, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    isend_impl("MPI_Issend_c", buf, cnt, datatype, dest, tag, comm, request, true)
});

export!(MPI_Irsend_c, PMPI_Irsend_c,
        (buf: *const c_void, cnt: Count, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    isend_impl("MPI_Irsend_c", buf, cnt, datatype, dest, tag, comm, request, false)
});

export!(MPI_Irecv_c, PMPI_Irecv_c,
        (buf: *mut c_void, cnt: Count, datatype: Handle, source: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    irecv_impl("MPI_Irecv_c", buf, cnt, datatype, source, tag, comm, request)
});

export!(MPI_Bsend_c, PMPI_Bsend_c,
        (buf: *const c_void, cnt: Count, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle) -> c_int {
    guard("MPI_Bsend_c", comm, || {
        // SAFETY: the caller's buffer, readable for the call (it is copied).
        unsafe { crate::bsend::ibsend_entry(buf, cnt, datatype, dest, tag, comm) }.map(drop)
    })
});

export!(MPI_Ibsend_c, PMPI_Ibsend_c,
        (buf: *const c_void, cnt: Count, datatype: Handle, dest: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Ibsend_c", comm, || {
        if request.is_null() {
            return Err(err(MPI_ERR_ARG, "null request pointer"));
        }
        // SAFETY: the caller's buffer, readable for the call (it is copied).
        let e = unsafe { crate::bsend::ibsend_entry(buf, cnt, datatype, dest, tag, comm)? };
        // SAFETY: non-null, writable.
        unsafe { out(request, state::add_req(e)) }
    })
});

export!(MPI_Sendrecv_c, PMPI_Sendrecv_c,
        (sendbuf: *const c_void, sendcount: Count, sendtype: Handle, dest: c_int,
         sendtag: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: Handle,
         source: c_int, recvtag: c_int, comm: Handle, status: *mut MPI_Status) -> c_int {
    sendrecv_impl(
        "MPI_Sendrecv_c",
        (sendbuf, sendcount, sendtype, dest, sendtag),
        (recvbuf, recvcount, recvtype, source, recvtag),
        comm,
        status,
    )
});

export!(MPI_Sendrecv_replace_c, PMPI_Sendrecv_replace_c,
        (buf: *mut c_void, cnt: Count, datatype: Handle, dest: c_int, sendtag: c_int,
         source: c_int, recvtag: c_int, comm: Handle, status: *mut MPI_Status) -> c_int {
    crate::p2p_more::sendrecv_replace_impl(
        "MPI_Sendrecv_replace_c",
        buf,
        cnt,
        datatype,
        (dest, sendtag),
        (source, recvtag),
        comm,
        status,
    )
});

macro_rules! send_init_c {
    ($name:ident, $pname:ident, $mode:expr) => {
        export!($name, $pname,
                (buf: *const c_void, cnt: Count, datatype: Handle, dest: c_int, tag: c_int,
                 comm: Handle, request: *mut Handle) -> c_int {
            guard(stringify!($name), comm, || {
                init(Op::Send { buf, mode: $mode }, cnt, datatype, dest, tag, comm, request)
            })
        });
    };
}

send_init_c!(MPI_Send_init_c, PMPI_Send_init_c, Mode::Standard);
send_init_c!(MPI_Ssend_init_c, PMPI_Ssend_init_c, Mode::Synchronous);
send_init_c!(MPI_Rsend_init_c, PMPI_Rsend_init_c, Mode::Standard);
send_init_c!(MPI_Bsend_init_c, PMPI_Bsend_init_c, Mode::Buffered);

export!(MPI_Recv_init_c, PMPI_Recv_init_c,
        (buf: *mut c_void, cnt: Count, datatype: Handle, source: c_int, tag: c_int,
         comm: Handle, request: *mut Handle) -> c_int {
    guard("MPI_Recv_init_c", comm, || {
        init(Op::Recv { buf }, cnt, datatype, source, tag, comm, request)
    })
});

export!(MPI_Get_count_c, PMPI_Get_count_c,
        (status: *const MPI_Status, datatype: Handle, cnt: *mut Count) -> c_int {
    guard("MPI_Get_count_c", WORLD, || {
        // SAFETY: readable status, writable count (MPI contract; null checked).
        unsafe { out(cnt, crate::p2p::get_count(status, datatype)?) }
    })
});

macro_rules! get_elements {
    ($name:ident, $pname:ident) => {
        export!($name, $pname,
                (status: *const MPI_Status, datatype: Handle, cnt: *mut Count) -> c_int {
            guard(stringify!($name), WORLD, || {
                // SAFETY: readable status, writable count (MPI contract; null checked).
                unsafe { out(cnt, crate::types_more::get_elements(status, datatype)?) }
            })
        });
    };
}

get_elements!(MPI_Get_elements_c, PMPI_Get_elements_c);
get_elements!(MPI_Get_elements_x, PMPI_Get_elements_x);

macro_rules! set_elements {
    ($name:ident, $pname:ident) => {
        export!($name, $pname,
                (status: *mut MPI_Status, datatype: Handle, cnt: Count) -> c_int {
            guard(stringify!($name), WORLD, || {
                // SAFETY: writable status (MPI contract; null checked).
                unsafe { crate::misc::set_elements(status, datatype, cnt) }
            })
        });
    };
}

set_elements!(MPI_Status_set_elements_c, PMPI_Status_set_elements_c);
set_elements!(MPI_Status_set_elements_x, PMPI_Status_set_elements_x);

export!(MPI_Buffer_attach_c, PMPI_Buffer_attach_c, (buffer: *mut c_void, size: Count) -> c_int {
    guard("MPI_Buffer_attach_c", WORLD, || crate::bsend::attach(buffer, size))
});

export!(MPI_Buffer_detach_c, PMPI_Buffer_detach_c,
        (buffer_addr: *mut c_void, size: *mut Count) -> c_int {
    guard("MPI_Buffer_detach_c", WORLD, || {
        if buffer_addr.is_null() || size.is_null() {
            return Err(err(MPI_ERR_ARG, "null output argument"));
        }
        let (a, n) = crate::bsend::detach();
        // SAFETY: buffer_addr points to a writable pointer, size to a count (MPI contract).
        unsafe {
            out(buffer_addr.cast::<*mut c_void>(), a as *mut c_void)?;
            out(size, n as Count)
        }
    })
});
