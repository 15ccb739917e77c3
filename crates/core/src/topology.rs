//! Communicators, processes and groups.
//!
//! Contract: a communicator is a context id plus an ordered list of world ranks; ranks
//! given to and returned by the facade are communicator ranks, the engine works in world
//! ranks. Handles are `Send` (any thread may use one at `MPI_THREAD_MULTIPLE`): their
//! shared parts are `Arc`s, atomics and mutexes. Clones of a handle are the same
//! communicator (same context, same attributes); `duplicate` makes a new one.

pub use crate::Rank;

pub(crate) mod attribute;
mod cartesian;
mod group;
use attribute::{Attributes, CommAttribute};
pub use cartesian::{CartesianCommunicator, CartesianLayout};
mod inter;
use crate::runtime::Shared;
pub use group::{Group, GroupRelation, SystemGroup, UserGroup};
pub(crate) use inter::InterSides;
pub use inter::{InterCommunicator, MergeOrder};
use std::sync::Arc;

/// The context of [`SimpleCommunicator::self_comm`] (only its own process sends on it).
const SELF_CONTEXT: u32 = 0x5e1f_c0de;

/// `MPI_COMM_SELF`'s counters and attributes, shared by all its handles.
#[allow(clippy::type_complexity)]
static SELF_SHARED: Shared<(Arc<Counter>, Arc<Counter>, Arc<Attributes>)> =
    Shared::new(|| (Arc::default(), Arc::default(), Arc::default()));
/// The world's derivation and collective counters, shared by all its handles.
#[allow(clippy::type_complexity)]
static WORLD_COUNTERS: Shared<(Arc<Counter>, Arc<Counter>)> =
    Shared::new(|| (Arc::default(), Arc::default()));

/// A counter shared by a communicator's handles (derivations, collective calls): MPI
/// orders such calls on one communicator, so relaxed loads and stores are enough.
#[derive(Debug, Default)]
pub(crate) struct Counter(std::sync::atomic::AtomicU32);

impl Counter {
    pub(crate) fn get(&self) -> u32 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
    pub(crate) fn set(&self, v: u32) {
        self.0.store(v, std::sync::atomic::Ordering::Relaxed)
    }
}

/// A communicator.
#[derive(Debug, Clone)]
pub struct SimpleCommunicator {
    ctx: u32,
    pub(crate) rank: Rank,
    /// World rank of each member; `None` for the identity (world).
    members: Option<Arc<Vec<u32>>>,
    pub(crate) size: Rank,
    /// Communicators derived from this one so far (all ranks derive in the same order).
    derived: Arc<Counter>,
    /// Collective calls made so far (all ranks count the same calls).
    coll_seq: Arc<Counter>,
    /// The point-to-point side of an intercommunicator ([`InterCommunicator`]): members
    /// are the remote group, `rank` is this process's rank in the local group. No
    /// collective runs on it.
    pub(crate) inter: bool,
    /// On an intercommunicator's point-to-point side: the local group's communicator and
    /// the library's own context, which its collectives run on (`collective/intercoll`).
    pub(crate) sides: Option<Arc<inter::InterSides>>,
    /// Calls of [`Communicator::split_by_subgroup_with_tag`] so far, by (group, tag)
    /// (the members of a group count the same calls).
    group_calls: Arc<std::sync::Mutex<std::collections::HashMap<(u64, i32), u32>>>,
    /// Cached attributes ([`AnyCommunicator`]).
    attrs: Arc<Attributes>,
    /// The grid (extents, periods) of a Cartesian communicator and its duplicates.
    grid: Option<Arc<(Vec<crate::Count>, Vec<bool>)>>,
    /// The shapes of its collective calls, once computed (`collective::staged`), and the
    /// type hashes of its last lean calls.
    pub(crate) shapes: Arc<crate::coll::algos::ShapeCache>,
}

impl SimpleCommunicator {
    /// The world communicator. Every handle of it is the same communicator: they share
    /// its derivation and collective counters (and attributes), so that two handles
    /// (`universe.world()` called twice) never derive the same context for different
    /// communicators or number two collectives alike.
    pub(crate) fn world(rank: u32, size: u32) -> Self {
        let (derived, coll_seq) = WORLD_COUNTERS.with(|c| c.clone());
        SimpleCommunicator {
            ctx: 0,
            rank: rank as Rank,
            members: None,
            size: size as Rank,
            derived,
            coll_seq,
            inter: false,
            sides: None,
            group_calls: Arc::default(),
            attrs: Attributes::world(),
            grid: None,
            shapes: Arc::default(),
        }
    }

    /// The communicator of this process alone (`MPI_COMM_SELF`), made without messages.
    pub fn self_comm() -> SimpleCommunicator {
        let me = crate::runtime::call("self_comm", |e| Ok(e.rank));
        let mut c = Self::world(0, 1);
        // Its own context, counters and attributes (only this process talks on it), the
        // same for every handle of it, as for the world.
        (c.derived, c.coll_seq, c.attrs) = SELF_SHARED.with(|x| x.clone());
        c.ctx = SELF_CONTEXT;
        c.members = Some(Arc::new(vec![me]));
        c
    }

    /// The world of a process whose era (see `engine::spawn`) is job ranks
    /// `first..first + count`: the identity for the original ranks, else those ranks.
    pub(crate) fn world_of(rank: u32, first: u32, count: u32) -> Self {
        let mut w = Self::world(rank.wrapping_sub(first), count);
        if first != 0 {
            w.members = Some(Arc::new((first..first + count).collect()));
        }
        w
    }

    /// A new communicator with the same members and a new context, so its messages never
    /// match this one's. Collective: every member calls it in the same order (as MPI
    /// requires), which lets every rank derive the same context id without messages.
    /// Attributes whose type asks ([`CommAttribute::CLONE_ON_DUP`]) are cloned to it,
    /// and a Cartesian communicator's grid is kept (as `MPI_Comm_dup` does).
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
        let mut d = self.sub(ctx, self.rank, self.members.clone(), self.size);
        d.attrs = self.attrs.duplicate();
        d.grid = self.grid.clone();
        d
    }

    /// Whether this is an intercommunicator's point-to-point side (for the C interface,
    /// which then looks the intercommunicator up). Not a stable API.
    #[doc(hidden)]
    #[inline]
    pub fn c_is_inter(&self) -> bool {
        self.inter
    }

    /// The topology of this communicator (`MPI_Topo_test`): Cartesian for one made by
    /// [`Communicator::create_cartesian_communicator`] or a duplicate of one, else
    /// undefined (phalanx's Rust API has no graph topologies, like rsmpi 0.8's; the C ABI
    /// has them).
    pub fn topology(&self) -> Topology {
        if self.grid.is_some() {
            Topology::Cartesian
        } else {
            Topology::Undefined
        }
    }

    /// This communicator as its precise type: a [`CartesianCommunicator`] when it has a
    /// grid, else itself.
    pub fn into_topology(self) -> IntoTopology {
        match self.grid.clone() {
            Some(g) => IntoTopology::Cartesian(CartesianCommunicator::wrap(self, &g.0, &g.1)),
            None => IntoTopology::Undefined(self),
        }
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
        members: Option<Arc<Vec<u32>>>,
        size: Rank,
    ) -> Self {
        SimpleCommunicator {
            ctx,
            rank,
            members,
            size,
            derived: Arc::new(Counter::default()),
            coll_seq: Arc::new(Counter::default()),
            inter: false,
            sides: None,
            group_calls: Arc::default(),
            attrs: Arc::default(),
            grid: None,
            shapes: Arc::default(),
        }
    }

    /// This communicator's group (the members in rank order).
    fn user_group(&self) -> UserGroup {
        UserGroup::new(
            (0..self.size).map(|r| self.world_rank(r)).collect(),
            self.world_rank(self.rank),
        )
    }

    /// See [`Communicator::split_by_subgroup_collective`].
    fn subgroup_collective(&self, group: &dyn Group) -> Option<SimpleCommunicator> {
        let members = self.subgroup_members("split_by_subgroup_collective", group);
        let ctx = self.derive_context(fnv(members));
        self.subgroup_of(ctx, members)
    }

    /// See [`Communicator::split_by_subgroup_with_tag`]: the context mixes this one's,
    /// the group, the tag and how many times the members made this (group, tag) before —
    /// all known to every member without messages.
    fn subgroup_local(&self, group: &dyn Group, tag: crate::Tag) -> Option<SimpleCommunicator> {
        let members = self.subgroup_members("split_by_subgroup", group);
        members
            .contains(&self.world_rank(self.rank))
            .then_some(())?;
        let h = fnv(members);
        let n = {
            let mut calls = self
                .group_calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = calls.entry((h, tag)).or_insert(0);
            *n += 1;
            *n
        };
        let mut z = (u64::from(self.ctx) << 32 | u64::from(n))
            ^ h.rotate_left(17)
            ^ (tag as u32 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ 0x5bd1_e995_2f1c_d3a7;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.subgroup_of(((z ^ (z >> 31)) as u32).max(1), members)
    }

    /// The group's members, each a member of this communicator (else fatal).
    fn subgroup_members<'g>(&self, call: &str, group: &'g dyn Group) -> &'g [u32] {
        let (members, _) = group.members_and_me();
        if let Some(&m) = members.iter().find(|&&m| self.comm_rank(m) < 0) {
            crate::runtime::fatal(
                call,
                crate::Error::InvalidArg(format!(
                    "world rank {m} of the group is not a member of the communicator"
                )),
            );
        }
        members
    }

    /// The communicator `ctx` of `members`, if this rank is one.
    fn subgroup_of(&self, ctx: u32, members: &[u32]) -> Option<SimpleCommunicator> {
        let rank = members
            .iter()
            .position(|&m| m == self.world_rank(self.rank))?;
        Some(self.sub(
            ctx,
            rank as Rank,
            Some(Arc::new(members.to_vec())),
            members.len() as Rank,
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
    pub(crate) fn members(&self) -> Option<&Arc<Vec<u32>>> {
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

/// FNV-1a of a member list (a group's identity in derived contexts).
fn fnv(members: &[u32]) -> u64 {
    members.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &m| {
        (h ^ m as u64).wrapping_mul(0x1000_0000_01b3)
    })
}

/// The topology kinds of MPI (`MPI_Topo_test`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// A graph (`MPI_GRAPH`).
    Graph,
    /// A Cartesian grid (`MPI_CART`).
    Cartesian,
    /// A distributed graph (`MPI_DIST_GRAPH`).
    DistributedGraph,
    /// None (`MPI_UNDEFINED`).
    Undefined,
}

/// A communicator as its precise type ([`SimpleCommunicator::into_topology`]).
#[derive(Debug)]
pub enum IntoTopology {
    /// A graph communicator (never made by the Rust API).
    Graph(GraphCommunicator),
    /// A Cartesian communicator.
    Cartesian(CartesianCommunicator),
    /// A distributed graph communicator (never made by the Rust API).
    DistributedGraph(DistributedGraphCommunicator),
    /// A communicator without a topology.
    Undefined(SimpleCommunicator),
}

/// rsmpi 0.8's placeholder for graph communicators (it has no graph API either);
/// graphs are in phalanx's C ABI (`MPI_Graph_create`).
#[derive(Debug)]
pub struct GraphCommunicator;

/// rsmpi 0.8's placeholder for distributed graph communicators; they are in phalanx's C
/// ABI (`MPI_Dist_graph_create_adjacent`).
#[derive(Debug)]
pub struct DistributedGraphCommunicator;

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

/// Longest communicator name kept (`MPI_MAX_OBJECT_NAME`).
pub const MAX_OBJECT_NAME: usize = 127;

/// Names set with [`Communicator::set_name`], by context (bounded by the number of
/// communicators the program makes).
static NAMES: Shared<std::cell::RefCell<std::collections::HashMap<u32, String>>> =
    Shared::new(|| std::cell::RefCell::new(std::collections::HashMap::new()));

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
    /// Number of processes this one can address: the size, or the remote group's size
    /// for an intercommunicator.
    fn target_size(&self) -> Rank {
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
        match group::relation(a.user_group().members(), b.user_group().members()) {
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
    /// This communicator's group (`MPI_Comm_group`).
    fn group(&self) -> UserGroup {
        self.as_simple().user_group()
    }
    /// A communicator of the members of `group`, a subgroup of this one's
    /// (`MPI_Comm_create`). Collective over this communicator (every member passes the
    /// same group); members outside the group get `None`. A group with a process that
    /// is not a member of this communicator ends the rank through the error handler.
    fn split_by_subgroup_collective(&self, group: &dyn Group) -> Option<SimpleCommunicator> {
        self.as_simple().subgroup_collective(group)
    }
    /// A communicator of the members of `group` (`MPI_Comm_create_group` with tag 0):
    /// only the group's members call it (not collective over this communicator); a
    /// caller outside the group gets `None`.
    fn split_by_subgroup(&self, group: &dyn Group) -> Option<SimpleCommunicator> {
        self.split_by_subgroup_with_tag(group, 0)
    }
    /// [`Communicator::split_by_subgroup`] with a tag, so that calls for the same group
    /// made concurrently (MPI: in different orders on different members) are told apart.
    /// Members calling with the same (group, tag) must call in the same order.
    fn split_by_subgroup_with_tag(
        &self,
        group: &dyn Group,
        tag: crate::Tag,
    ) -> Option<SimpleCommunicator> {
        self.as_simple().subgroup_local(group, tag)
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
        use crate::datatype::Described;
        let mut out = vec![0; inbuf.elements() * inbuf.datatype().size()];
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

/// Attribute access, for every communicator (rsmpi's `AnyCommunicator`: methods that
/// would otherwise keep [`Communicator`] from being used as `dyn Communicator`). See
/// [`crate::attribute`] for what is shared, copied and dropped when.
pub trait AnyCommunicator: Communicator {
    /// The value of attribute `A` cached on this communicator, `None` if not set
    /// (`MPI_Comm_get_attr`).
    fn get_attr<A: CommAttribute>(&self) -> Option<&A>;
    /// Caches `val` on this communicator, replacing any value of `A`
    /// (`MPI_Comm_set_attr`).
    fn set_attr<A: CommAttribute>(&mut self, val: A);
}

impl<C: Communicator + ?Sized> AnyCommunicator for C {
    fn get_attr<A: CommAttribute>(&self) -> Option<&A> {
        Attributes::get(&self.as_simple().attrs)
    }
    fn set_attr<A: CommAttribute>(&mut self, val: A) {
        Attributes::set(&self.as_simple().attrs, val)
    }
}

/// Something that has a communicator (rsmpi's `AsCommunicator`).
pub trait AsCommunicator {
    /// The communicator's type.
    type Out: Communicator;
    /// The communicator.
    fn as_communicator(&self) -> &Self::Out;
}

impl AsCommunicator for SimpleCommunicator {
    type Out = SimpleCommunicator;
    fn as_communicator(&self) -> &SimpleCommunicator {
        self
    }
}

impl AsCommunicator for InterCommunicator {
    type Out = InterCommunicator;
    fn as_communicator(&self) -> &InterCommunicator {
        self
    }
}

impl AsCommunicator for CartesianCommunicator {
    type Out = CartesianCommunicator;
    fn as_communicator(&self) -> &CartesianCommunicator {
        self
    }
}

impl AsCommunicator for Process<'_> {
    type Out = SimpleCommunicator;
    fn as_communicator(&self) -> &SimpleCommunicator {
        self.comm
    }
}

impl AsCommunicator for AnyProcess<'_> {
    type Out = SimpleCommunicator;
    fn as_communicator(&self) -> &SimpleCommunicator {
        self.comm
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
    fn members(&self) -> Option<&Arc<Vec<u32>>> {
        SimpleCommunicator::members(self)
    }
}

/// Communicator handles may move to other threads (`MPI_THREAD_MULTIPLE`).
const _: () = {
    const fn send<T: Send>() {}
    send::<SimpleCommunicator>();
    send::<InterCommunicator>();
    send::<CartesianCommunicator>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_world_handle_is_the_same_communicator() {
        // Two handles (universe.world() twice): new communicators derived from either
        // get distinct contexts, and collectives are numbered in one sequence.
        let (a, b) = (
            SimpleCommunicator::world(0, 2),
            SimpleCommunicator::world(0, 2),
        );
        let (x, y) = (a.duplicate(), b.duplicate());
        assert_ne!(x.context(), y.context());
        let first = a.next_coll_seq();
        assert_eq!(b.next_coll_seq(), first + 1);
    }

    #[test]
    fn duplicates_keep_the_grid_and_splits_do_not() {
        let world = SimpleCommunicator::world(0, 4);
        assert_eq!(world.topology(), Topology::Undefined);
        let cart = CartesianCommunicator::wrap(world.duplicate(), &[2, 2], &[true, false]);
        let d = cart.as_simple().duplicate();
        assert_eq!(d.topology(), Topology::Cartesian);
        match d.into_topology() {
            IntoTopology::Cartesian(c) => assert_eq!(c.get_layout().dims, [2, 2]),
            other => panic!("not Cartesian: {other:?}"),
        }
        let ctx = world.derive_context(7);
        let plain = world.sub(ctx, 0, None, 4);
        assert!(matches!(plain.into_topology(), IntoTopology::Undefined(_)));
    }
}
