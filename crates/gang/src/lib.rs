//! phalanx's job manager (seed 001), the parts below the daemons.
//!
//! Contract of this crate: pure scheduling state and its persistence, no processes and
//! no sockets — [`matrix`] is the Ousterhout gang matrix (time slots × nodes, first-fit
//! placement, round-robin switching, node failures), [`store`] the master's job store in
//! SQLite (jobs and switch timings survive a master restart), [`proto`] the commands'
//! protocol, [`seal`] the encryption of a launcher's connection to a node daemon's agent
//! (AES-256-GCM after the handshake), and [`netmgmt`] the network-management interface
//! of seed 001 through which the daemons (`phalanx gang`) reach communication — halt the
//! network at a packet boundary, switch buffers, release; phalanx implements it with its
//! launcher and the engine's link hooks.

pub mod matrix;
pub mod netmgmt;
pub mod proto;
pub mod seal;
pub mod store;

pub use matrix::{JobId, Matrix, PlaceError, Placement};
pub use store::{JobRecord, JobState, Store, StoreError, SwitchRecord};
