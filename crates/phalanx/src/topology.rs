//! Communicators and processes.
//!
//! Contract: a communicator is a context id plus an ordered list of world ranks; ranks
//! given to and returned by the facade are communicator ranks, the engine works in world
//! ranks. Handles are `!Send` (funneled thread level).

use crate::Rank;
use std::marker::PhantomData;

mod cartesian;
pub use cartesian::{CartesianCommunicator, CartesianLayout};
mod inter;
pub use inter::{InterCommunicator, MergeOrder};
use std::rc::Rc;

/// A communicator.
#[derive(Debug, Clone)]
pub struct SimpleCommunicator {
    ctx: u32,
    pub(crate) rank: Rank,
    /// World rank of each member; `None` for the identity (world).
    members: Option<Rc<Vec<u32>>>,
    pub(crate) size: Rank,
    /// Communicators derived from this one so far (all ranks derive in the same order).
    derived: Rc<std::cell::Cell<u32>>,
    /// Collective calls made so far (all ranks count the same calls).
    coll_seq: Rc<std::cell::Cell<u32>>,
    /// The point-to-point side of an intercommunicator ([`InterCommunicator`]): members
    /// are the remote group, `rank` is this process's rank in the local group. No
    /// collective runs on it.
    pub(crate) inter: bool,
    _not_send: PhantomData<Rc<()>>,
}

impl SimpleCommunicator {
    pub(crate) fn world(rank: u32, size: u32) -> Self {
        SimpleCommunicator {
            ctx: 0,
            rank: rank as Rank,
            members: None,
            size: size as Rank,
            derived: Rc::new(std::cell::Cell::new(0)),
            coll_seq: Rc::new(std::cell::Cell::new(0)),
            inter: false,
            _not_send: PhantomData,
        }
    }

    /// The world of a process whose era (see `engine::spawn`) is job ranks
    /// `first..first + count`: the identity for the original ranks, else those ranks.
    pub(crate) fn world_of(rank: u32, first: u32, count: u32) -> Self {
        let mut w = Self::world(rank.wrapping_sub(first), count);
        if first != 0 {
            w.members = Some(Rc::new((first..first + count).collect()));
        }
        w
    }

    /// A new communicator with the same members and a new context, so its messages never
    /// match this one's. Collective: every member calls it in the same order (as MPI
    /// requires), which lets every rank derive the same context id without messages.
    pub fn duplicate(&self) -> SimpleCommunicator {
        if self.inter {
            crate::runtime::fatal(
                "duplicate",
                crate::Error::InvalidComm(
                    "an intercommunicator's point-to-point side cannot be duplicated or \
                     carry collectives (InterCommunicator::duplicate, ::merge)"
                        .into(),
                ),
            );
        }
        let ctx = self.derive_context(0);
        self.sub(ctx, self.rank, self.members.clone(), self.size)
    }

    /// The next derived context id: a mix of (parent context, derivation number, salt);
    /// every member derives in the same order, so all agree without messages. Never 0.
    pub(crate) fn derive_context(&self, salt: u64) -> u32 {
        let n = self.derived.get() + 1;
        self.derived.set(n);
        let mut z = ((self.ctx as u64) << 32 | n as u64)
            .wrapping_add(salt.wrapping_mul(0xd6e8_feb8_6659_fd93))
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) as u32).max(1)
    }

    pub(crate) fn sub(
        &self,
        ctx: u32,
        rank: Rank,
        members: Option<Rc<Vec<u32>>>,
        size: Rank,
    ) -> Self {
        SimpleCommunicator {
            ctx,
            rank,
            members,
            size,
            derived: Rc::new(std::cell::Cell::new(0)),
            coll_seq: Rc::new(std::cell::Cell::new(0)),
            inter: false,
            _not_send: PhantomData,
        }
    }

    /// This communicator's group.
    pub fn group(&self) -> Group {
        Group {
            members: (0..self.size).map(|r| self.world_rank(r)).collect(),
            me: self.world_rank(self.rank),
        }
    }

    /// A communicator of the members of `group` (a subgroup of this one's). Collective
    /// over this communicator; members outside the group get `None`.
    pub fn split_by_subgroup_collective(&self, group: &Group) -> Option<SimpleCommunicator> {
        let salt = group
            .members
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, &m| {
                (h ^ m as u64).wrapping_mul(0x1000_0000_01b3)
            });
        let ctx = self.derive_context(salt);
        let rank = group
            .members
            .iter()
            .position(|&m| m == self.world_rank(self.rank))?;
        let size = group.members.len() as Rank;
        Some(self.sub(
            ctx,
            rank as Rank,
            Some(Rc::new(group.members.clone())),
            size,
        ))
    }
    /// The sequence number of the next collective call.
    pub(crate) fn next_coll_seq(&self) -> u32 {
        let n = self.coll_seq.get();
        self.coll_seq.set(n.wrapping_add(1));
        n
    }
    pub(crate) fn context(&self) -> u32 {
        self.ctx
    }
    /// World rank of each member; `None` for the identity (world).
    pub(crate) fn members(&self) -> Option<&Rc<Vec<u32>>> {
        self.members.as_ref()
    }
    /// World rank of communicator rank `r` (the caller checked the range).
    pub(crate) fn world_rank(&self, r: Rank) -> u32 {
        match &self.members {
            Some(m) => m.get(r as usize).copied().unwrap_or(u32::MAX),
            None => r as u32,
        }
    }
    /// Communicator rank of world rank `w`.
    /// The status of `raw` (world ranks) in this communicator's ranks.
    pub(crate) fn status(&self, raw: crate::requests::RawStatus) -> crate::status::Status {
        crate::status::Status::with_source(raw, self.comm_rank(raw.source))
    }

    pub(crate) fn comm_rank(&self, w: u32) -> Rank {
        match &self.members {
            Some(m) => m.iter().position(|&x| x == w).map_or(-1, |p| p as Rank),
            None => w as Rank,
        }
    }
}

/// A split color: members with the same color land in the same communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Color(pub(crate) i32);

impl Color {
    /// A defined color (non-negative).
    pub fn with_value(v: i32) -> Color {
        Color(v.max(0))
    }
    /// `MPI_UNDEFINED`: this member joins no new communicator.
    pub fn undefined() -> Color {
        Color(-32766)
    }
}

/// An ordered set of processes (world ranks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    members: Vec<u32>,
    me: u32,
}

impl Group {
    /// Number of members.
    pub fn size(&self) -> Rank {
        self.members.len() as Rank
    }
    /// This process's rank in the group, if it is a member.
    pub fn rank(&self) -> Option<Rank> {
        self.members
            .iter()
            .position(|&m| m == self.me)
            .map(|p| p as Rank)
    }
    /// The subgroup of the given ranks, in that order. A rank outside the group or given
    /// twice is an error (through the fatal handler), as in MPI.
    pub fn include(&self, ranks: &[Rank]) -> Group {
        let mut members = Vec::with_capacity(ranks.len());
        for &r in ranks {
            let Some(&m) = usize::try_from(r).ok().and_then(|i| self.members.get(i)) else {
                crate::runtime::fatal(
                    "Group::include",
                    crate::Error::InvalidRank {
                        rank: r,
                        size: self.members.len(),
                    },
                );
            };
            if members.contains(&m) {
                crate::runtime::fatal(
                    "Group::include",
                    crate::Error::InvalidArg(format!("rank {r} given twice")),
                );
            }
            members.push(m);
        }
        Group {
            members,
            me: self.me,
        }
    }
    /// The group without the given ranks.
    pub fn exclude(&self, ranks: &[Rank]) -> Group {
        Group {
            members: self
                .members
                .iter()
                .enumerate()
                .filter(|(i, _)| !ranks.contains(&(*i as Rank)))
                .map(|(_, &m)| m)
                .collect(),
            me: self.me,
        }
    }
    /// The members of this group, then those of `other` not in it (`MPI_Group_union`).
    pub fn union(&self, other: &Group) -> Group {
        let mut members = self.members.clone();
        members.extend(other.members.iter().filter(|m| !self.members.contains(m)));
        Group {
            members,
            me: self.me,
        }
    }
    /// The members of this group that are also in `other`, in this group's order
    /// (`MPI_Group_intersection`).
    pub fn intersection(&self, other: &Group) -> Group {
        self.filtered(|m| other.members.contains(m))
    }
    /// The members of this group that are not in `other`, in this group's order
    /// (`MPI_Group_difference`).
    pub fn difference(&self, other: &Group) -> Group {
        self.filtered(|m| !other.members.contains(m))
    }
    fn filtered(&self, keep: impl Fn(&u32) -> bool) -> Group {
        Group {
            members: self.members.iter().copied().filter(keep).collect(),
            me: self.me,
        }
    }
    /// How this group relates to `other` (`MPI_Group_compare`): the same members in the
    /// same order, the same members in another order, or not the same members.
    pub fn compare(&self, other: &Group) -> GroupRelation {
        relation(&self.members, &other.members)
    }
    /// The rank in `other` of this group's rank `rank` (`None` where not a member).
    pub fn translate_rank(&self, rank: Rank, other: &Group) -> Option<Rank> {
        self.translate_ranks(&[rank], other).pop().flatten()
    }
    /// Ranks in `other` of this group's ranks `ranks` (`None` where not a member).
    pub fn translate_ranks(&self, ranks: &[Rank], other: &Group) -> Vec<Option<Rank>> {
        ranks
            .iter()
            .map(|&r| {
                let w = self.members.get(usize::try_from(r).ok()?)?;
                other.members.iter().position(|m| m == w).map(|p| p as Rank)
            })
            .collect()
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

/// How two communicators relate (`MPI_Comm_compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommunicatorRelation {
    /// The same communicator (same context).
    Identical,
    /// Different contexts, the same members in the same order.
    Congruent,
    /// Different contexts, the same members in another order.
    Similar,
    /// Different members.
    Unequal,
}

fn relation(a: &[u32], b: &[u32]) -> GroupRelation {
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

/// Longest communicator name kept (`MPI_MAX_OBJECT_NAME`).
pub const MAX_OBJECT_NAME: usize = 127;

thread_local! {
    /// Names set with [`Communicator::set_name`], by context (bounded by the number of
    /// communicators the program makes).
    static NAMES: std::cell::RefCell<std::collections::HashMap<u32, String>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// Operations every communicator has.
pub trait Communicator {
    /// The underlying communicator.
    fn as_simple(&self) -> &SimpleCommunicator;

    /// This process's rank.
    fn rank(&self) -> Rank {
        self.as_simple().rank
    }
    /// Number of processes.
    fn size(&self) -> Rank {
        self.as_simple().size
    }
    /// The process at rank `r` (panics through the error handler if out of range).
    fn process_at_rank(&self, r: Rank) -> Process<'_> {
        let c = self.as_simple();
        if r < 0 || r >= c.size {
            crate::runtime::fatal(
                "process_at_rank",
                crate::Error::InvalidRank {
                    rank: r,
                    size: c.size as usize,
                },
            );
        }
        Process { comm: c, rank: r }
    }
    /// A wildcard source (`MPI_ANY_SOURCE`).
    fn any_process(&self) -> AnyProcess<'_> {
        AnyProcess {
            comm: self.as_simple(),
        }
    }
    /// How this communicator relates to `other` (`MPI_Comm_compare`).
    fn compare<C: Communicator + ?Sized>(&self, other: &C) -> CommunicatorRelation
    where
        Self: Sized,
    {
        let (a, b) = (self.as_simple(), other.as_simple());
        match relation(&a.group().members, &b.group().members) {
            GroupRelation::Identical if a.context() == b.context() => {
                CommunicatorRelation::Identical
            }
            GroupRelation::Identical => CommunicatorRelation::Congruent,
            GroupRelation::Similar => CommunicatorRelation::Similar,
            GroupRelation::Unequal => CommunicatorRelation::Unequal,
        }
    }
    /// Names this communicator (`MPI_Comm_set_name`; at most [`MAX_OBJECT_NAME`] bytes
    /// are kept, cut at a character boundary). The name belongs to this process's view
    /// of the communicator (its context), as in MPI.
    fn set_name(&self, name: &str) {
        let mut end = name.len().min(MAX_OBJECT_NAME);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        let ctx = self.as_simple().context();
        NAMES.with(|n| n.borrow_mut().insert(ctx, name[..end].to_string()));
    }
    /// The communicator's name (`MPI_Comm_get_name`): the one set, else `MPI_COMM_WORLD`
    /// for the world and an empty string for others.
    fn get_name(&self) -> String {
        let c = self.as_simple();
        NAMES
            .with(|n| n.borrow().get(&c.context()).cloned())
            .unwrap_or_else(|| {
                if c.context() == SimpleCommunicator::world(0, 1).context() {
                    "MPI_COMM_WORLD".into()
                } else {
                    String::new()
                }
            })
    }
    /// The first `product(dims)` members laid out on a grid (`MPI_Cart_create`; see
    /// [`CartesianCommunicator`]): `None` for members beyond it. Collective.
    fn create_cartesian_communicator(
        &self,
        dims: &[crate::Count],
        periods: &[bool],
        reorder: bool,
    ) -> Option<CartesianCommunicator> {
        let _ = reorder;
        CartesianCommunicator::create(self.as_simple(), dims, periods)
    }
    /// This rank's rank on the grid `dims` (`MPI_Cart_map`): its rank if it lies on the
    /// grid (phalanx does not reorder), else `None`.
    fn cartesian_map(&self, dims: &[crate::Count], periods: &[bool]) -> Option<Rank> {
        let c = self.as_simple();
        let n = cartesian::grid_size("cartesian_map", dims, periods, c.size);
        (c.rank < n).then_some(c.rank)
    }
    /// The intercommunicator to the processes that spawned this one
    /// (`MPI_Comm_get_parent`); `None` for a process `phalanx run` started.
    fn parent(&self) -> Option<InterCommunicator> {
        inter::parent()
    }
    /// This process.
    fn this_process(&self) -> Process<'_> {
        let c = self.as_simple();
        Process {
            comm: c,
            rank: c.rank,
        }
    }
    /// Ends the whole job with `code` (the launcher terminates every other rank).
    fn abort(&self, code: i32) -> ! {
        let rank = self.as_simple().rank;
        eprintln!("phalanx: rank {rank}: abort({code}) called");
        crate::runtime::end_job(
            if code == 0 { 1 } else { code },
            &format!("rank {rank}: abort({code}) called"),
        )
    }

    /// Bytes `incount` elements of `datatype` take packed (`MPI_Pack_size`).
    fn pack_size<Dt: crate::datatype::Datatype>(
        &self,
        incount: crate::Count,
        datatype: &Dt,
    ) -> crate::Count
    where
        Self: Sized,
    {
        crate::datatype::pack_size(incount, datatype)
    }
    /// The data of `inbuf`, packed (`MPI_Pack`); `unpack_into` takes it back.
    fn pack<Buf: ?Sized + crate::datatype::Buffer>(&self, inbuf: &Buf) -> Vec<u8>
    where
        Self: Sized,
    {
        let mut out = vec![0; inbuf.count() * inbuf.datatype().size()];
        self.pack_into(inbuf, &mut out, 0);
        out
    }
    /// Packs `inbuf` into `outbuf` at `position`; returns the position after it. A buffer
    /// too small is an error for the fatal handler.
    fn pack_into<Buf: ?Sized + crate::datatype::Buffer>(
        &self,
        inbuf: &Buf,
        outbuf: &mut [u8],
        position: crate::Count,
    ) -> crate::Count
    where
        Self: Sized,
    {
        crate::datatype::pack_into(inbuf, outbuf, position).unwrap_or_else(|e| {
            crate::runtime::fatal("pack_into", crate::error::Error::InvalidArg(e))
        })
    }
    /// Unpacks `outbuf`'s elements from `inbuf` at `position` (`MPI_Unpack`); returns the
    /// position after them. Too few bytes is an error for the fatal handler.
    ///
    /// # Safety
    /// The bytes must make valid values of `outbuf`'s elements (any bytes do for
    /// [`Equivalence`](crate::datatype::Equivalence) types; `bool`s are made 0 or 1).
    unsafe fn unpack_into<Buf: ?Sized + crate::datatype::BufferMut>(
        &self,
        inbuf: &[u8],
        outbuf: &mut Buf,
        position: crate::Count,
    ) -> crate::Count
    where
        Self: Sized,
    {
        crate::datatype::unpack_from(inbuf, outbuf, position).unwrap_or_else(|e| {
            crate::runtime::fatal("unpack_into", crate::error::Error::InvalidArg(e))
        })
    }
}

impl Communicator for SimpleCommunicator {
    fn as_simple(&self) -> &SimpleCommunicator {
        self
    }
}

/// A particular process of a communicator.
#[derive(Debug, Clone, Copy)]
pub struct Process<'a> {
    pub(crate) comm: &'a SimpleCommunicator,
    pub(crate) rank: Rank,
}

impl Process<'_> {
    /// Its rank in the communicator.
    pub fn rank(&self) -> Rank {
        self.rank
    }
}

/// Any process of a communicator (receive wildcard).
#[derive(Debug, Clone, Copy)]
pub struct AnyProcess<'a> {
    pub(crate) comm: &'a SimpleCommunicator,
}

impl crate::request::Members for SimpleCommunicator {
    fn members(&self) -> Option<&Rc<Vec<u32>>> {
        SimpleCommunicator::members(self)
    }
}
