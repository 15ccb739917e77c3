//! phalanx: an MPI-style message-passing runtime in pure Rust.
//!
//! The API follows the shape of the `mpi` crate (rsmpi), so porting is mostly a change
//! of dependency and `use` lines:
//!
//! ```no_run
//! use phalanx::traits::*;
//!
//! let universe = phalanx::initialize().unwrap();
//! let world = universe.world();
//! let (rank, size) = (world.rank(), world.size());
//! if rank == 0 {
//!     world.process_at_rank(1 % size).send(&42u64);
//! }
//! if rank == 1 % size {
//!     let (x, _status) = world.process_at_rank(0).receive::<u64>();
//!     assert_eq!(x, 42);
//! }
//! ```
//!
//! Programs are started by the launcher, `phalanx run -n 4 ./app`; started alone they run
//! as a singleton of size 1.
//!
//! Layers: the rsmpi-shaped facade ([`topology`], [`point_to_point`], [`request`]) sends
//! errors to the communicator's error handler (fatal: the rank prints the error naming the
//! call and exits non-zero, which ends the job); the core ([`engine`]) returns `Result`.
//!
//! Thread levels: [`initialize`] gives `Funneled` (only the thread that initialized makes
//! phalanx calls; another thread's call ends the job with an error naming the rule);
//! [`initialize_with_threading`] gives the level asked for, `Threading::Multiple`
//! included, where any thread calls at any time. Communicators are `Send` (give each
//! thread its own `duplicate`); the universe and requests stay with their thread.
//! [`Universe::threading_support`] reports the level granted.
//!
//! The C functions of the MPI-5 standard ABI that phalanx's C interface implements
//! (`libmpi_abi`) are [`ffi`], rsmpi's `mpi::ffi`, usable beside the Rust API: after
//! [`initialize`], `ffi::MPI_Comm_rank(ffi::RSMPI_COMM_WORLD, &mut r)` works, and
//! [`raw::AsRaw`] gives the C handle of a communicator, a predefined datatype, a
//! predefined operation or a matched message ([`raw::AsRawMut`]: the place a C matched
//! receive writes `MPI_MESSAGE_NULL` back into).

pub use phalanx_core::*;

/// The usual imports: `use phalanx::traits::*;` (with [`raw::AsRaw`], [`raw::AsRawMut`],
/// [`raw::FromRaw`]).
pub mod traits {
    pub use crate::raw::{AsRaw, AsRawMut, FromRaw, RawRequest};
    pub use phalanx_core::traits::*;
}

/// The C functions and constants of the MPI-5 standard ABI (rsmpi's `mpi::ffi`), from
/// phalanx's C interface (`phalanx-capi`): the functions under their C names, the handle
/// types, and every predefined handle and integer constant of its `mpi.h` under its MPI
/// name and rsmpi's `RSMPI_` name. Called beside the Rust API, they use its universe
/// (`MPI_Init` is not needed, and `MPI_Finalize` leaves finalizing to it).
#[allow(non_camel_case_types)]
pub mod ffi {
    pub use mpi_abi::consts::MPI_Status;
    pub use std::ffi::c_int;
    /// A handle (every kind is a pointer-sized value).
    pub type Handle = mpi_abi::consts::Handle;
    pub type MPI_Comm = Handle;
    pub type MPI_Datatype = Handle;
    pub type MPI_Op = Handle;
    pub type MPI_Group = Handle;
    pub type MPI_Request = Handle;
    pub type MPI_Errhandler = Handle;
    pub type MPI_Info = Handle;
    pub type MPI_Message = Handle;
    pub type MPI_Win = Handle;
    pub type MPI_File = Handle;
    pub type MPI_Session = Handle;
    pub type MPI_Aint = isize;
    pub type MPI_Offset = i64;
    pub type MPI_Count = i64;
    pub type MPI_Fint = c_int;

    /// `MPI_BOTTOM`.
    pub const MPI_BOTTOM: *mut std::ffi::c_void = std::ptr::null_mut();
    /// `MPI_IN_PLACE` (the ABI's sentinel value 1, not a pointer to anything).
    #[allow(clippy::manual_dangling_ptr)]
    pub const MPI_IN_PLACE: *mut std::ffi::c_void = 1 as *mut std::ffi::c_void;
    /// `MPI_STATUS_IGNORE`.
    pub const MPI_STATUS_IGNORE: *mut MPI_Status = std::ptr::null_mut();
    /// `MPI_STATUSES_IGNORE`.
    pub const MPI_STATUSES_IGNORE: *mut MPI_Status = std::ptr::null_mut();
    /// `MPI_ERRCODES_IGNORE`.
    pub const MPI_ERRCODES_IGNORE: *mut c_int = std::ptr::null_mut();
    /// `MPI_ARGV_NULL`.
    pub const MPI_ARGV_NULL: *mut *mut std::ffi::c_char = std::ptr::null_mut();
    /// `MPI_UNWEIGHTED`.
    pub const MPI_UNWEIGHTED: *mut c_int = 10 as *mut c_int;
    /// `MPI_WEIGHTS_EMPTY`.
    pub const MPI_WEIGHTS_EMPTY: *mut c_int = 11 as *mut c_int;
    pub use MPI_BOTTOM as RSMPI_BOTTOM;
    pub use MPI_C_FLOAT_COMPLEX as RSMPI_FLOAT_COMPLEX;
    pub use MPI_IN_PLACE as RSMPI_IN_PLACE;
    pub use MPI_STATUSES_IGNORE as RSMPI_STATUSES_IGNORE;
    pub use MPI_STATUS_IGNORE as RSMPI_STATUS_IGNORE;
    /// rsmpi's accessor of `MPI_UNWEIGHTED`.
    #[allow(non_snake_case)]
    pub fn RSMPI_UNWEIGHTED() -> *mut c_int {
        MPI_UNWEIGHTED
    }

    #[rustfmt::skip]
    mod gen;
    pub use gen::*;
}

/// C handles of the Rust API's objects (rsmpi's `mpi::raw`).
///
/// Contract: a handle names the same object for as long as the Rust object lives.
/// [`AsRawMut`](crate::raw::AsRawMut) is implemented, as in rsmpi, for
/// [`Message`](crate::point_to_point::Message) only: its handle lives in the message, and
/// `MPI_Mrecv`/`MPI_Imrecv` given `as_raw_mut()` receive it and write `MPI_MESSAGE_NULL`
/// there (the message is then received; a Rust receive of it is an error). A message
/// whose handle was asked for and is received in Rust, or dropped, is taken back from the
/// C interface first (`phalanx_core::point_to_point` module docs).
pub mod raw {
    use crate::ffi;
    use phalanx_core::collective::SystemOperation;
    use phalanx_core::datatype::{
        DatatypeRef, Primitive, TypeMap, UncommittedDatatype, UserDatatype,
    };
    use phalanx_core::engine::RawStatus;
    use phalanx_core::point_to_point::Message;
    use phalanx_core::request::{Request, Scope};
    use phalanx_core::topology::{InterCommunicator, SimpleCommunicator, UserGroup};

    /// Something with a C handle.
    ///
    /// # Safety
    /// The handle names the same object for as long as `self` lives.
    pub unsafe trait AsRaw {
        /// The handle type.
        type Raw;
        /// The handle.
        fn as_raw(&self) -> Self::Raw;
    }

    // SAFETY: the handle stays registered for the process's life.
    unsafe impl AsRaw for SimpleCommunicator {
        type Raw = ffi::MPI_Comm;
        /// `MPI_COMM_WORLD` for the world; the same handle every time for the same
        /// communicator.
        fn as_raw(&self) -> ffi::MPI_Comm {
            mpi_abi::state::handle_of(self)
        }
    }

    /// Something with a C handle kept in it, which C functions may write (rsmpi's
    /// `AsRawMut`).
    ///
    /// # Safety
    /// The pointer is valid for reads and writes of the handle while `self` is mutably
    /// borrowed.
    pub unsafe trait AsRawMut: AsRaw {
        /// Where the handle is kept.
        fn as_raw_mut(&mut self) -> *mut <Self as AsRaw>::Raw;
    }

    // SAFETY: the table of the C interface keeps the message's copy under its handle
    // until a receive (C or Rust) or the message's drop.
    unsafe impl AsRaw for Message {
        type Raw = ffi::MPI_Message;
        /// The message's handle (the same each time), `MPI_MESSAGE_NULL` once a C
        /// matched receive took it.
        fn as_raw(&self) -> ffi::MPI_Message {
            mpi_abi::mprobe::handle_of(self)
        }
    }

    // SAFETY: the handle cell lives in the message.
    unsafe impl AsRawMut for Message {
        fn as_raw_mut(&mut self) -> *mut ffi::MPI_Message {
            mpi_abi::mprobe::handle_of(self);
            self.c_handle_slot()
        }
    }

    // SAFETY: the handle names the engine request for as long as it runs.
    unsafe impl<'a, D: ?Sized, S: Scope<'a>> AsRaw for Request<'a, D, S> {
        type Raw = ffi::MPI_Request;
        /// The request's C handle while it runs (`MPI_REQUEST_NULL` for one that
        /// completed as it started). It names the request; completing it from C is for
        /// [`RawRequest::into_raw`] (the Rust request still owns it).
        fn as_raw(&self) -> ffi::MPI_Request {
            match self.c_engine_id() {
                Some(id) => mpi_abi::fastpath::raw_handle(id, false),
                None => ffi::MPI_REQUEST_NULL,
            }
        }
    }

    /// rsmpi's `Request::into_raw` and `Request::from_raw`: a request handed between the
    /// Rust API and the C functions (`mpi::ffi`).
    pub trait RawRequest<'a, D: ?Sized + 'a, S: Scope<'a>>: Sized {
        /// The request's C handle, its buffer and its scope; the request leaves its
        /// scope, and a C completion (`MPI_Wait`, `MPI_Test`…) finishes it.
        ///
        /// # Safety
        /// The handle must be completed within the scope's lifetime (the buffer is
        /// borrowed until then).
        unsafe fn into_raw(self) -> (ffi::MPI_Request, &'a D, S);

        /// The request behind a C handle of a point-to-point transfer (`MPI_Isend`,
        /// `MPI_Irecv` of predefined datatypes, a handle from [`RawRequest::into_raw`]),
        /// registered with `scope`; its status's source is a rank of the communicator the
        /// transfer was started on. Other handles
        /// (collectives, persistent requests, derived datatypes) end the rank with an
        /// error.
        ///
        /// # Safety
        /// `request` is live and not used afterwards; the buffer it works on is `data`
        /// and lives longer than `scope`.
        unsafe fn from_raw(request: ffi::MPI_Request, data: &'a D, scope: S) -> Self;
    }

    impl<'a, D: ?Sized + 'a, S: Scope<'a>> RawRequest<'a, D, S> for Request<'a, D, S> {
        unsafe fn into_raw(self) -> (ffi::MPI_Request, &'a D, S) {
            let (r, members, data, scope) = self.c_into_raw();
            let h = match r {
                Ok(id) => {
                    let h = mpi_abi::fastpath::raw_handle(id, false);
                    if let Some(m) = members {
                        // A communicator whose ranks are not world ranks: C translates
                        // the status's source at completion.
                        mpi_abi::fastpath::set_members(h, m);
                    }
                    h
                }
                Err(st) => {
                    mpi_abi::state::attach();
                    let st = mpi_abi::p2p::c_status(st);
                    mpi_abi::state::add_req(mpi_abi::state::ReqEntry::Done(st))
                }
            };
            (h, data, scope)
        }

        unsafe fn from_raw(request: ffi::MPI_Request, data: &'a D, scope: S) -> Self {
            let completed = |st: ffi::MPI_Status, scope: S| {
                let raw = RawStatus {
                    source: st.MPI_SOURCE.max(0) as u32,
                    tag: st.MPI_TAG,
                    bytes: (st.MPI_internal[0] as u32 as u64)
                        | ((st.MPI_internal[1] as u32 as u64) << 32),
                    cancelled: st.MPI_internal[2] != 0,
                };
                Request::c_completed(raw, data, scope)
            };
            if let Some(st) = mpi_abi::fastpath::unpark(request) {
                return completed(st, scope);
            }
            if let Some((id, _)) = mpi_abi::fastpath::raw_id(request) {
                let members = mpi_abi::fastpath::take_members(request);
                // SAFETY: a running engine request on `data` (the caller's contract).
                return unsafe { Request::c_from_raw(id, members, data, scope) };
            }
            let h = request as usize;
            if h == mpi_abi::p2p::DONE_SEND || h == mpi_abi::p2p::DONE_PROC_NULL {
                let empty = ffi::MPI_Status::empty(ffi::MPI_ANY_SOURCE);
                return completed(empty, scope);
            }
            use mpi_abi::state::{LiveReq, ReqEntry};
            match mpi_abi::state::with(|s| s.reqs.remove(&h)) {
                Some(ReqEntry::Done(st)) => completed(st, scope),
                Some(ReqEntry::Live {
                    req: LiveReq::Bytes(r),
                    staged: None,
                    ..
                }) => match r.c_into_raw() {
                    // SAFETY: as above.
                    (Ok(id), members, ..) => unsafe {
                        Request::c_from_raw(id, members, data, scope)
                    },
                    (Err(st), ..) => completed(mpi_abi::p2p::c_status(st), scope),
                },
                other => {
                    if let Some(e) = other {
                        // Not ours to convert: give it back.
                        mpi_abi::state::with(|s| s.reqs.insert(h, e));
                    }
                    fatal_c(
                        "Request::from_raw",
                        mpi_abi::err(
                            ffi::MPI_ERR_REQUEST,
                            "not a running point-to-point request of predefined datatypes",
                        ),
                    )
                }
            }
        }
    }

    /// Conversion from a C handle (rsmpi's `FromRaw`).
    pub trait FromRaw: AsRaw {
        /// The object behind `handle`.
        ///
        /// # Safety
        /// `handle` names a live object of this kind (an error of the C interface, through
        /// its error handler, otherwise).
        unsafe fn from_raw(handle: <Self as AsRaw>::Raw) -> Self;
    }

    impl FromRaw for SimpleCommunicator {
        /// The communicator behind a handle (`MPI_Comm_dup` and the other C constructors
        /// make them; `MPI_COMM_WORLD` is the world).
        unsafe fn from_raw(handle: ffi::MPI_Comm) -> Self {
            match mpi_abi::state::comm(handle) {
                Ok(c) => (*c).clone(),
                Err(e) => fatal_c("FromRaw::from_raw", e),
            }
        }
    }

    // SAFETY: the group stays registered for the process's life.
    unsafe impl AsRaw for UserGroup {
        type Raw = ffi::MPI_Group;
        /// A new group handle each time (`MPI_Group_free` it when done).
        fn as_raw(&self) -> ffi::MPI_Group {
            mpi_abi::comm::add_group(self.clone())
        }
    }

    impl FromRaw for UserGroup {
        unsafe fn from_raw(handle: ffi::MPI_Group) -> Self {
            match mpi_abi::comm::group(handle) {
                Ok(g) => g,
                Err(e) => fatal_c("FromRaw::from_raw", e),
            }
        }
    }

    /// A C interface error at a Rust call: the fatal handler, naming the call.
    fn fatal_c(call: &str, e: mpi_abi::CErr) -> ! {
        eprintln!("phalanx: {call}: {e:?}");
        phalanx_core::environment::end_job(1, &format!("{call}: invalid handle"))
    }

    // SAFETY: the handle stays registered for the process's life.
    unsafe impl AsRaw for InterCommunicator {
        type Raw = ffi::MPI_Comm;
        fn as_raw(&self) -> ffi::MPI_Comm {
            mpi_abi::inter::handle_of(self)
        }
    }

    /// The predefined handle of a primitive type map (`MPI_INT32_T`, `MPI_DOUBLE`, …);
    /// `MPI_DATATYPE_NULL` for others (build those with the C type constructors).
    fn primitive_handle(t: &TypeMap) -> ffi::MPI_Datatype {
        match t.signature() {
            [(p, 1)] if t.is_contiguous() => match p {
                Primitive::U8 => ffi::MPI_UINT8_T,
                Primitive::I8 => ffi::MPI_INT8_T,
                Primitive::U16 => ffi::MPI_UINT16_T,
                Primitive::I16 => ffi::MPI_INT16_T,
                Primitive::U32 => ffi::MPI_UINT32_T,
                Primitive::I32 => ffi::MPI_INT32_T,
                Primitive::U64 => ffi::MPI_UINT64_T,
                Primitive::I64 => ffi::MPI_INT64_T,
                Primitive::F32 => ffi::MPI_FLOAT,
                Primitive::F64 => ffi::MPI_DOUBLE,
                Primitive::Bool => ffi::MPI_C_BOOL,
                Primitive::C32 => ffi::MPI_C_FLOAT_COMPLEX,
                Primitive::C64 => ffi::MPI_C_DOUBLE_COMPLEX,
                _ => ffi::MPI_DATATYPE_NULL,
            },
            _ => ffi::MPI_DATATYPE_NULL,
        }
    }

    macro_rules! datatype_as_raw {
        ($($t:ty),*) => {$(
            // SAFETY: predefined handles never change.
            unsafe impl AsRaw for $t {
                type Raw = ffi::MPI_Datatype;
                /// The predefined handle of a primitive type; `MPI_DATATYPE_NULL` for
                /// others.
                fn as_raw(&self) -> ffi::MPI_Datatype {
                    primitive_handle(self.as_type_map())
                }
            }
        )*};
    }
    datatype_as_raw!(TypeMap, UserDatatype, DatatypeRef<'_>);

    // SAFETY: predefined handles never change.
    unsafe impl AsRaw for SystemOperation {
        type Raw = ffi::MPI_Op;
        fn as_raw(&self) -> ffi::MPI_Op {
            use phalanx_core::coll::ops::OpKind;
            use phalanx_core::collective::Operation;
            match self.kind() {
                OpKind::Sum => ffi::MPI_SUM,
                OpKind::Product => ffi::MPI_PROD,
                OpKind::Max => ffi::MPI_MAX,
                OpKind::Min => ffi::MPI_MIN,
                OpKind::LogicalAnd => ffi::MPI_LAND,
                OpKind::LogicalOr => ffi::MPI_LOR,
                OpKind::LogicalXor => ffi::MPI_LXOR,
                OpKind::BitwiseAnd => ffi::MPI_BAND,
                OpKind::BitwiseOr => ffi::MPI_BOR,
                OpKind::BitwiseXor => ffi::MPI_BXOR,
                _ => ffi::MPI_OP_NULL,
            }
        }
    }
}
