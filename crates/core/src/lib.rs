//! phalanx's library proper. Programs use it through the `phalanx` crate, which
//! re-exports everything here and adds the C functions as `phalanx::ffi`; see that
//! crate's documentation.

extern crate self as phalanx;

pub mod attribute;
pub mod coll;
pub mod collective;
pub mod config;
pub mod datatype;
pub mod engine;
pub mod environment;
pub mod error;
mod link;
mod log;
pub mod point_to_point;
pub mod request;
pub mod requests;
pub mod rma;
mod runtime;
pub mod status;
pub mod topology;
pub mod trace;

pub use environment::{initialize, initialize_with_threading, try_initialize, Threading, Universe};
pub use environment::{time, time_resolution};
pub use error::{Error, ErrorClass, MpiError};
pub use phalanx_derive::Equivalence;

/// Rank of a process in a communicator.
pub type Rank = i32;
/// Message tag.
pub type Tag = i32;
/// A memory address or displacement (`MPI_Aint`).
pub type Address = isize;
/// Count of elements.
pub type Count = i32;

/// The usual imports: `use phalanx::traits::*;`.
pub mod traits {
    pub use crate::attribute::CommAttribute;
    pub use crate::collective::{CommunicatorCollectives, Operation, Root};
    pub use crate::datatype::traits::*;
    pub use crate::point_to_point::{Destination, MatchedReceiveVec, Source};
    pub use crate::topology::{AnyCommunicator, AsCommunicator, Communicator, Group};
    pub use phalanx_derive::Equivalence;
}

/// Test hooks (not part of the stable API).
#[doc(hidden)]
pub mod testing {
    /// The UDP address of `rank`, for tests that aim foreign traffic at a rank.
    pub fn peer_addr(rank: u32) -> Option<std::net::SocketAddrV4> {
        crate::runtime::with_engine(|e| Ok(e.peer_addr(rank)))
            .ok()
            .flatten()
    }
    /// The job key every datagram of this job carries in clear (what an eavesdropper
    /// reads off the wire).
    pub fn job_key() -> Option<u64> {
        crate::runtime::with_engine(|e| Ok(e.job_key())).ok()
    }
    /// Whether this job's UDP datagrams carry its MAC.
    pub fn sealed() -> Option<bool> {
        crate::runtime::with_engine(|e| Ok(e.sealed())).ok()
    }
    /// Payload bytes of one collective packet.
    pub fn coll_packet() -> Option<usize> {
        crate::runtime::with_engine(|e| Ok(e.coll_packet())).ok()
    }
    /// Whether collectives use real multicast.
    pub fn multicast() -> Option<bool> {
        crate::runtime::with_engine(|e| Ok(e.coll_multicast())).ok()
    }
    /// This rank's counters so far.
    pub fn stats() -> Option<crate::engine::Stats> {
        crate::runtime::with_engine(|e| Ok(e.stats())).ok()
    }
    /// One context switch of this rank, as the job manager will drive it (every rank of
    /// the job calls it together): halt the links, drain what is in flight (at most
    /// `limit`), save what they hold, stay stopped for `stop` (a sleep stands in for
    /// SIGSTOP), restore, resume. Returns the datagrams and bytes saved.
    pub fn context_switch(
        stop: std::time::Duration,
        limit: std::time::Duration,
    ) -> Result<(usize, usize), crate::Error> {
        crate::runtime::with_engine(|e| {
            e.halt_links();
            e.quiesce(limit)?;
            let saved = e.save_links()?;
            let got = (saved.datagrams(), saved.bytes());
            let t = std::time::Instant::now();
            std::thread::sleep(stop);
            e.restore_links(saved);
            e.resume_links(t.elapsed());
            Ok(got)
        })
    }
}

/// Support for the C interface (`phalanx-capi`); not a stable API.
#[doc(hidden)]
pub mod capi_support;
