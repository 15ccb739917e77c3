//! Errors of the core: every fallible call returns `Result<T, Error>`, and every error
//! carries the MPI error class it maps to (what the C ABI returns and the error handler
//! sees).

use thiserror::Error;

/// MPI error classes used by phalanx (numbered as in the MPI-5 ABI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorClass {
    /// Invalid buffer.
    Buffer = 1,
    /// Invalid count.
    Count = 2,
    /// Invalid datatype.
    Type = 3,
    /// Invalid tag.
    Tag = 4,
    /// Invalid communicator.
    Comm = 5,
    /// Invalid rank.
    Rank = 6,
    /// Invalid request.
    Request = 7,
    /// Invalid root.
    Root = 8,
    /// Invalid operation.
    Op = 10,
    /// Message truncated on receive.
    Truncate = 15,
    /// Known error not in this list.
    Other = 16,
    /// Internal error.
    Intern = 17,
    /// Error in status.
    InStatus = 19,
    /// Invalid argument.
    Arg = 13,
    /// Invalid lock type (one-sided).
    LockType = 37,
    /// Target memory out of the window's range.
    RmaRange = 48,
    /// Memory cannot be shared (a shared window across hosts).
    RmaShared = 49,
    /// Wrong one-sided synchronization (an operation outside an access epoch).
    RmaSync = 50,
    /// Invalid window.
    Win = 56,
    /// The window's flavor does not allow the call.
    RmaFlavor = 57,
    /// Memory cannot be attached (a dynamic window).
    RmaAttach = 46,
    /// Processes could not be spawned.
    Spawn = 53,
    /// Peer process failed or stopped answering (`MPI_ERR_PROC_ABORTED`: the ABI has
    /// no class for a failed process).
    ProcFailed = 58,
}

/// A phalanx error.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The runtime could not start.
    #[error("initialization failed: {0}")]
    Init(String),
    /// Called before initialize or after finalize.
    #[error("phalanx is not initialized (or already finalized)")]
    NotInitialized,
    /// Called from a thread the thread level does not admit (another thread than the
    /// one that initialized phalanx, at `SINGLE` or `FUNNELED`).
    #[error(
        "called from a thread other than the one that initialized phalanx, at thread level \
         {0} (initialize asking for MPI_THREAD_MULTIPLE to call from any thread)"
    )]
    WrongThread(&'static str),
    /// A rank outside the communicator.
    #[error("invalid rank {rank} (communicator size {size})")]
    InvalidRank {
        /// The rank given.
        rank: i32,
        /// The communicator size.
        size: usize,
    },
    /// A negative tag other than the wildcard.
    #[error("invalid tag {0}")]
    InvalidTag(i32),
    /// The message is longer than the receive buffer.
    #[error("message of {len} bytes from rank {source_rank} truncated to a {cap}-byte buffer")]
    Truncated {
        /// Message length.
        len: u64,
        /// Receive buffer capacity.
        cap: u64,
        /// Source rank of the message.
        source_rank: i32,
    },
    /// The received byte count is not a whole number of elements of the wanted type.
    #[error("received {bytes} bytes, not a whole number of {elem}-byte elements")]
    PartialElement {
        /// Bytes received.
        bytes: u64,
        /// Element size.
        elem: usize,
    },
    /// A request id that does not name a live request.
    #[error("invalid or already completed request")]
    InvalidRequest,
    /// A peer stopped answering.
    #[error("rank {peer} stopped answering (no acknowledgement after repeated retransmission)")]
    PeerUnresponsive {
        /// The silent peer.
        peer: u32,
    },
    /// The launcher vanished or aborted the job.
    #[error("launcher: {0}")]
    Launcher(String),
    /// A reduction operation that does not apply to the datatype.
    #[error("invalid reduction operation: {0}")]
    InvalidOp(String),
    /// Collective calls that do not match across ranks.
    #[error("collective mismatch on communicator {context:#x}, call #{seq}: rank {local} called {local_call}, rank {remote} called {remote_call}")]
    CollectiveMismatch {
        /// Communicator context.
        context: u32,
        /// Collective sequence number on that communicator.
        seq: u32,
        /// This rank.
        local: u32,
        /// What this rank called.
        local_call: String,
        /// The other rank.
        remote: u32,
        /// What the other rank called.
        remote_call: String,
    },
    /// A link declared reliable broke its promise (careful protocol).
    #[error("{0}")]
    LinkFailure(String),
    /// The links could not be halted, saved or restored (job manager hooks).
    #[error("{0}")]
    Quiesce(String),
    /// An argument the call cannot accept (buffer sizes, datatypes).
    #[error("invalid argument: {0}")]
    InvalidArg(String),
    /// A communicator the call cannot use (a collective on an intercommunicator, an
    /// intercommunicator call on an ordinary one).
    #[error("invalid communicator: {0}")]
    InvalidComm(String),
    /// New processes could not be started (`MPI_Comm_spawn`).
    #[error("spawn failed: {0}")]
    Spawn(String),
    /// A buffered send that does not fit in the attached buffer (`MPI_ERR_BUFFER`).
    #[error("buffered send: {0}")]
    BufferFull(String),
    /// An operating-system error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A one-sided (RMA) call that cannot be carried out; the class says which kind.
    #[error("{1}")]
    Rma(ErrorClass, String),
}

impl Error {
    /// The MPI error class of this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::InvalidRank { .. } => ErrorClass::Rank,
            Error::InvalidTag(_) => ErrorClass::Tag,
            Error::Truncated { .. } => ErrorClass::Truncate,
            Error::PartialElement { .. } => ErrorClass::Count,
            Error::InvalidRequest => ErrorClass::Request,
            Error::PeerUnresponsive { .. } => ErrorClass::ProcFailed,
            Error::InvalidOp(_) => ErrorClass::Op,
            Error::CollectiveMismatch { .. } => ErrorClass::Other,
            Error::InvalidArg(_) => ErrorClass::Arg,
            Error::InvalidComm(_) => ErrorClass::Comm,
            Error::Spawn(_) => ErrorClass::Spawn,
            Error::BufferFull(_) => ErrorClass::Buffer,
            Error::LinkFailure(_) => ErrorClass::ProcFailed,
            Error::Quiesce(_) => ErrorClass::Other,
            Error::Init(_) | Error::NotInitialized | Error::WrongThread(_) => ErrorClass::Other,
            Error::Launcher(_) | Error::Io(_) => ErrorClass::Other,
            Error::Rma(c, _) => *c,
        }
    }
}

/// Result alias of the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of the rsmpi-shaped calls that return one (rsmpi's `MpiError`); everything else
/// goes through the error handler.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MpiError {
    /// Processes could not be spawned: (requested, started).
    #[error("spawned {1} of {0} requested processes")]
    Spawn(crate::Rank, crate::Rank),
    /// A string with an interior NUL byte where a C string is needed.
    #[error("{0}")]
    StringNul(#[from] std::ffi::NulError),
}
