//! Attribute caching on communicators (rsmpi's `mpi::attribute`): implement
//! [`CommAttribute`] for a type, then use `set_attr`/`get_attr` of
//! [`AnyCommunicator`](crate::topology::AnyCommunicator) on any communicator.
//!
//! Contract: values belong to the communicator (every handle of it sees them); a
//! `duplicate` starts with clones of those whose type sets
//! [`CommAttribute::CLONE_ON_DUP`], every other new communicator with none; values are
//! dropped when the communicator's last handle goes (replaced ones too, not before — a
//! reference returned by `get_attr` may still point to them). The predefined MPI
//! attributes rsmpi reads through this module are [`Universe::size`] and
//! [`Universe::appnum`](crate::Universe::appnum).
//!
//! [`Universe::size`]: crate::Universe::size

pub use crate::topology::attribute::{AttributeKey, CommAttribute};

/// The attribute trait, for `use mpi::traits::*`.
pub mod traits {
    pub use super::CommAttribute;
}
