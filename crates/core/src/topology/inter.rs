//! Intercommunicators: communication between two disjoint groups (MPI 6.6, rsmpi's
//! `InterCommunicator`).
//!
//! Contract: an [`InterCommunicator`] joins a *local* group (this process's) and a
//! *remote* group. Point-to-point ranks name processes of the remote group: a send to rank
//! r goes to the remote group's rank r, and a receive's status names the remote sender.
//! `rank()` and `size()` are those of the local group (`MPI_Comm_rank`/`MPI_Comm_size`),
//! `remote_size()` and `remote_group()` the remote one's. The collectives MPI defines on
//! intercommunicators run on it (`collective/intercoll.rs`: every member gets the remote
//! group's data); [`InterCommunicator::merge`] makes an ordinary communicator of both
//! groups.
//!
//! Layout: `view` is the point-to-point side (the intercommunicator's context, the
//! remote group as members, the local rank), `internal` the same on a second context the
//! library's own exchanges use (merge, duplicate), so they never match a user message;
//! `local` is a private communicator of the local group. Creating and merging
//! intercommunicators moves messages, so those operations live with the collectives
//! (`collective/inter.rs`); this module holds the data.

use super::{Communicator, SimpleCommunicator, UserGroup};
use crate::Rank;
use std::sync::Arc;

/// A communicator between two disjoint groups.
#[derive(Debug, Clone)]
pub struct InterCommunicator {
    pub(crate) view: SimpleCommunicator,
    pub(crate) internal: SimpleCommunicator,
    pub(crate) local: SimpleCommunicator,
}

/// What an intercommunicator's collectives run on: the local group's communicator (its
/// collectives) and the internal context (the leaders' and the pairwise exchanges).
/// Clones share the counters of the intercommunicator's own.
#[derive(Debug)]
pub(crate) struct InterSides {
    pub(crate) local: SimpleCommunicator,
    pub(crate) internal: SimpleCommunicator,
}

/// How the two groups are ordered by [`InterCommunicator::merge`]: every member of one
/// group passes `Low` and every member of the other `High`, and the `Low` group comes
/// first. When both pass the same, the group holding the lower world rank of the two
/// groups' first members comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeOrder {
    /// This group's ranks come first.
    Low,
    /// This group's ranks come last.
    High,
}

impl InterCommunicator {
    /// The intercommunicator on context `ctx` (`ctx + 1` carries the library's own
    /// exchanges) between the members of `local` and the `remote` world ranks.
    pub(crate) fn new(ctx: u32, local: SimpleCommunicator, remote: Vec<u32>) -> Self {
        let remote = Arc::new(remote);
        let size = remote.len() as Rank;
        let mut view = local.sub(ctx, local.rank, Some(remote.clone()), size);
        view.inter = true;
        let mut internal = local.sub(ctx.wrapping_add(1).max(1), local.rank, Some(remote), size);
        internal.inter = true;
        view.sides = Some(Arc::new(InterSides {
            local: local.clone(),
            internal: internal.clone(),
        }));
        InterCommunicator {
            view,
            internal,
            local,
        }
    }

    /// Number of processes in the remote group (`MPI_Comm_remote_size`).
    pub fn remote_size(&self) -> Rank {
        self.view.size
    }

    /// The remote group (`MPI_Comm_remote_group`).
    pub fn remote_group(&self) -> UserGroup {
        UserGroup::new(
            self.remote_members(),
            self.local.world_rank(self.local.rank),
        )
    }

    /// A private communicator of the local group (its own context).
    pub fn local_communicator(&self) -> &SimpleCommunicator {
        &self.local
    }

    /// World ranks of the remote group.
    pub(crate) fn remote_members(&self) -> Vec<u32> {
        (0..self.view.size)
            .map(|r| self.view.world_rank(r))
            .collect()
    }
}

impl Communicator for InterCommunicator {
    fn as_simple(&self) -> &SimpleCommunicator {
        &self.view
    }
    /// Size of the local group (`MPI_Comm_size`); [`InterCommunicator::remote_size`]
    /// for the remote one.
    fn size(&self) -> Rank {
        self.local.size
    }
    /// The local group (`MPI_Comm_group` of an intercommunicator).
    fn group(&self) -> UserGroup {
        self.local.user_group()
    }
}

/// The parent intercommunicator, made once (its contexts' counters are shared by every
/// copy handed out).
static PARENT: crate::runtime::Shared<std::cell::OnceCell<Option<InterCommunicator>>> =
    crate::runtime::Shared::new(std::cell::OnceCell::new);

/// The intercommunicator to the processes that spawned this one (`MPI_Comm_get_parent`),
/// `None` for a process `phalanx run` started.
pub(crate) fn parent() -> Option<InterCommunicator> {
    PARENT.with(|p| {
        p.get_or_init(|| {
            let (rank, s) =
                crate::runtime::call("parent", |e| Ok((e.rank, e.spawned_env().cloned())));
            let s = s?;
            let world = SimpleCommunicator::world_of(rank, s.first, s.count);
            // Not derived from the world's counter: members may call parent() at
            // different points of their programs.
            let local_ctx = private_context(s.context);
            let local = world.sub(local_ctx, world.rank, world.members().cloned(), world.size);
            Some(InterCommunicator::new(s.context, local, s.parents))
        })
        .clone()
    })
}

/// The context of the children's private local communicator of intercommunicator `ctx`
/// (a mix of it; never 0).
fn private_context(ctx: u32) -> u32 {
    let mut z = (ctx as u64 ^ 0x7061_7265_6e74_0000).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) as u32).max(1)
}
