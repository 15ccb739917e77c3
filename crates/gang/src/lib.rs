//! phalanx's job manager (seed 001), the parts below the daemons.
//!
//! Contract of this crate: pure scheduling state and its persistence, no processes and
//! no sockets — [`matrix`] is the Ousterhout gang matrix (time slots × nodes, first-fit
//! placement, round-robin switching, node failures), [`store`] the master's job store in
//! SQLite (jobs survive a master restart). The master and node daemons (`phalanx gang`)
//! drive them; the context switch itself — halt the network at a packet boundary, save
//! and restore the links' buffers, release — is the runtime's (`phalanx::engine`'s link
//! hooks, driven today by `phalanx run` on SIGTSTP/SIGCONT).

pub mod matrix;
pub mod proto;
pub mod store;

pub use matrix::{JobId, Matrix, PlaceError, Placement};
pub use store::{JobRecord, JobState, Store, StoreError};
