//! The status of a completed receive, in communicator ranks.
//!
//! Contract: a [`Status`] is made from the engine's [`RawStatus`] (world ranks) by the
//! communicator that ran the operation; a source outside the communicator is -1.

use crate::datatype::Datatype;
use crate::requests::RawStatus;
use crate::{Count, Rank, Tag};

/// What a completed receive reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    source: Rank,
    tag: Tag,
    bytes: u64,
    cancelled: bool,
}

impl Status {
    /// The status of `raw` with its source already a communicator rank (`source`).
    pub(crate) fn with_source(raw: RawStatus, source: Rank) -> Status {
        Status {
            source,
            tag: raw.tag,
            bytes: raw.bytes,
            cancelled: raw.cancelled,
        }
    }
    pub(crate) fn from_raw_members(raw: RawStatus, members: &[u32]) -> Status {
        Status {
            source: members
                .iter()
                .position(|&w| w == raw.source)
                .map_or(-1, |p| p as Rank),
            tag: raw.tag,
            bytes: raw.bytes,
            cancelled: raw.cancelled,
        }
    }
    pub(crate) fn from_raw_world(raw: RawStatus) -> Status {
        Status {
            source: raw.source as Rank,
            tag: raw.tag,
            bytes: raw.bytes,
            cancelled: raw.cancelled,
        }
    }
    /// Rank of the sender in the communicator.
    pub fn source_rank(&self) -> Rank {
        self.source
    }
    /// Tag of the message.
    pub fn tag(&self) -> Tag {
        self.tag
    }
    /// Number of elements of `dt` in the message (`MPI_UNDEFINED` = -32766 if not whole).
    pub fn count<D: Datatype>(&self, d: D) -> Count {
        let dt = d.as_type_map();
        if dt.size() == 0 {
            return 0;
        }
        if !self.bytes.is_multiple_of(dt.size() as u64) {
            return -32766;
        }
        (self.bytes / dt.size() as u64) as Count
    }
    /// Bytes in the message.
    pub fn byte_count(&self) -> u64 {
        self.bytes
    }
    /// Whether the operation was cancelled ([`Request::cancel`](crate::request::Request::cancel);
    /// MPI's `MPI_Test_cancelled`, which rsmpi does not wrap): a cancelled receive
    /// received nothing.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }
}
