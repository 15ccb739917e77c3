//! Groups (rsmpi's `Group` trait, `UserGroup`, `SystemGroup`; MPI §6.3).
//!
//! Contract: a group is an ordered list of distinct processes (world ranks) plus the
//! calling process's world rank, so that [`Group::rank`] is local arithmetic. Every
//! operation is local (no messages). The algebra follows MPI: a union keeps the first
//! group's order then appends the second's new members; an intersection or difference
//! keeps the first group's order. Ranks given to [`Group::include`] or
//! [`Group::exclude`] must be members and distinct — anything else ends the rank through
//! the error handler, as MPI's `MPI_ERR_RANK`/`MPI_ERR_ARG` do.

use crate::Rank;

/// World rank standing for "no process" (the empty system group knows no caller).
const NOBODY: u32 = u32::MAX;

/// Groups are collections of processes (rsmpi's `mpi::topology::Group`).
///
/// Implemented by [`UserGroup`] (what [`Communicator::group`](super::Communicator::group)
/// and the group algebra return) and [`SystemGroup`] (`MPI_GROUP_EMPTY`).
pub trait Group {
    /// The members' world ranks in group order, and the calling process's world rank.
    #[doc(hidden)]
    fn members_and_me(&self) -> (&[u32], u32);

    /// All members of this group, then those of `other` not in it (`MPI_Group_union`).
    fn union<G>(&self, other: &G) -> UserGroup
    where
        G: Group + ?Sized,
        Self: Sized,
    {
        let (a, me) = self.members_and_me();
        let (b, other_me) = other.members_and_me();
        let mut members = a.to_vec();
        members.extend(b.iter().filter(|m| !a.contains(m)));
        UserGroup::new(members, pick(me, other_me))
    }

    /// The members of this group that are also in `other`, in this group's order
    /// (`MPI_Group_intersection`).
    fn intersection<G>(&self, other: &G) -> UserGroup
    where
        G: Group + ?Sized,
        Self: Sized,
    {
        let (a, me) = self.members_and_me();
        let (b, other_me) = other.members_and_me();
        let members = a.iter().copied().filter(|m| b.contains(m)).collect();
        UserGroup::new(members, pick(me, other_me))
    }

    /// The members of this group that are not in `other`, in this group's order
    /// (`MPI_Group_difference`).
    fn difference<G>(&self, other: &G) -> UserGroup
    where
        G: Group + ?Sized,
        Self: Sized,
    {
        let (a, me) = self.members_and_me();
        let (b, other_me) = other.members_and_me();
        let members = a.iter().copied().filter(|m| !b.contains(m)).collect();
        UserGroup::new(members, pick(me, other_me))
    }

    /// The subgroup where this group's rank `ranks[i]` has rank `i` (`MPI_Group_incl`).
    fn include(&self, ranks: &[Rank]) -> UserGroup {
        let (all, me) = self.members_and_me();
        let picked = checked("Group::include", all, ranks);
        UserGroup::new(picked.iter().map(|&i| all[i]).collect(), me)
    }

    /// The subgroup without the members at `ranks`, in this group's order
    /// (`MPI_Group_excl`).
    fn exclude(&self, ranks: &[Rank]) -> UserGroup {
        let (all, me) = self.members_and_me();
        let dropped = checked("Group::exclude", all, ranks);
        let members = all
            .iter()
            .enumerate()
            .filter(|(i, _)| !dropped.contains(i))
            .map(|(_, &m)| m)
            .collect();
        UserGroup::new(members, me)
    }

    /// Number of members (`MPI_Group_size`).
    fn size(&self) -> Rank {
        self.members_and_me().0.len() as Rank
    }

    /// This process's rank in the group, `None` if it is not a member
    /// (`MPI_Group_rank`).
    fn rank(&self) -> Option<Rank> {
        let (all, me) = self.members_and_me();
        all.iter().position(|&m| m == me).map(|p| p as Rank)
    }

    /// The rank in `other` of this group's rank `rank`: `None` if that process is not a
    /// member of `other`, or `rank` is not a rank of this group
    /// (`MPI_Group_translate_ranks`).
    fn translate_rank<G>(&self, rank: Rank, other: &G) -> Option<Rank>
    where
        G: Group + ?Sized,
        Self: Sized,
    {
        let (all, _) = self.members_and_me();
        let w = all.get(usize::try_from(rank).ok()?)?;
        let (theirs, _) = other.members_and_me();
        theirs.iter().position(|m| m == w).map(|p| p as Rank)
    }

    /// [`Group::translate_rank`] of each of `ranks`.
    fn translate_ranks<G>(&self, ranks: &[Rank], other: &G) -> Vec<Option<Rank>>
    where
        G: Group + ?Sized,
        Self: Sized,
    {
        ranks
            .iter()
            .map(|&r| self.translate_rank(r, other))
            .collect()
    }

    /// How this group relates to `other` (`MPI_Group_compare`): the same members in the
    /// same order, the same members in another order, or not the same members.
    fn compare<G>(&self, other: &G) -> GroupRelation
    where
        G: Group + ?Sized,
        Self: Sized,
    {
        relation(self.members_and_me().0, other.members_and_me().0)
    }
}

/// The caller's world rank, from whichever operand knows it.
fn pick(a: u32, b: u32) -> u32 {
    if a == NOBODY {
        b
    } else {
        a
    }
}

/// The indices `ranks` into `all`, each a member and given once (else fatal: module docs).
fn checked(call: &str, all: &[u32], ranks: &[Rank]) -> Vec<usize> {
    let mut seen = vec![false; all.len()];
    let mut out = Vec::with_capacity(ranks.len());
    for &r in ranks {
        let Some(i) = usize::try_from(r).ok().filter(|&i| i < all.len()) else {
            crate::runtime::fatal(
                call,
                crate::Error::InvalidRank {
                    rank: r,
                    size: all.len(),
                },
            );
        };
        if std::mem::replace(&mut seen[i], true) {
            crate::runtime::fatal(
                call,
                crate::Error::InvalidArg(format!("rank {r} given twice")),
            );
        }
        out.push(i);
    }
    out
}

/// A group of processes made by a communicator or the group algebra (rsmpi's
/// `UserGroup`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserGroup {
    members: Vec<u32>,
    me: u32,
}

impl UserGroup {
    /// The group of `members` (world ranks, distinct) seen by world rank `me`.
    pub(crate) fn new(members: Vec<u32>, me: u32) -> UserGroup {
        UserGroup { members, me }
    }

    /// The members' world ranks, in group order.
    pub(crate) fn members(&self) -> &[u32] {
        &self.members
    }
}

impl Group for UserGroup {
    fn members_and_me(&self) -> (&[u32], u32) {
        (&self.members, self.me)
    }
}

/// A predefined group (rsmpi's `SystemGroup`): [`SystemGroup::empty`] is
/// `MPI_GROUP_EMPTY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemGroup(());

impl SystemGroup {
    /// The group with no members (`MPI_GROUP_EMPTY`).
    pub fn empty() -> SystemGroup {
        SystemGroup(())
    }
}

impl Group for SystemGroup {
    fn members_and_me(&self) -> (&[u32], u32) {
        (&[], NOBODY)
    }
}

/// How two groups relate (`MPI_IDENT`, `MPI_SIMILAR`, `MPI_UNEQUAL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupRelation {
    /// The same members in the same order.
    Identical,
    /// The same members in another order.
    Similar,
    /// Different members.
    Unequal,
}

/// How member lists `a` and `b` relate.
pub(crate) fn relation(a: &[u32], b: &[u32]) -> GroupRelation {
    if a == b {
        return GroupRelation::Identical;
    }
    let (mut x, mut y) = (a.to_vec(), b.to_vec());
    x.sort_unstable();
    y.sort_unstable();
    if x == y {
        GroupRelation::Similar
    } else {
        GroupRelation::Unequal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algebra_follows_mpi_order_rules() {
        // World rank 2 looks at a group of world ranks 0..5.
        let g = UserGroup::new(vec![0, 1, 2, 3, 4], 2);
        let first = g.include(&[3, 0]);
        assert_eq!(first.members(), [3, 0]);
        assert_eq!(first.rank(), None);
        let rest = g.exclude(&[3, 0]);
        assert_eq!(rest.members(), [1, 2, 4]);
        assert_eq!(rest.rank(), Some(1));
        assert_eq!(first.union(&rest).members(), [3, 0, 1, 2, 4]);
        assert_eq!(first.union(&rest).compare(&g), GroupRelation::Similar);
        assert_eq!(g.intersection(&first).members(), [0, 3]);
        assert_eq!(g.difference(&rest).compare(&first), GroupRelation::Similar);
        assert_eq!(
            g.translate_ranks(&[0, 2, 4, 9, -1], &rest),
            [None, Some(1), Some(2), None, None]
        );
        let empty = SystemGroup::empty();
        assert_eq!(empty.size(), 0);
        assert_eq!(
            empty.union(&g).rank(),
            Some(2),
            "the caller comes from the other operand"
        );
        assert_eq!(g.difference(&g).compare(&empty), GroupRelation::Identical);
        assert_eq!(first.compare(&rest), GroupRelation::Unequal);
    }
}
