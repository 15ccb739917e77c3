//! Groups and attributes the way rsmpi 0.8's documentation and examples use them
//! (`examples/group.rs`, `examples/split.rs`, `examples/attributes.rs`): the `Group`
//! trait over `UserGroup` and `SystemGroup`, `split_by_subgroup_collective` with a
//! `&dyn Group`, the non-collective `split_by_subgroup(_with_tag)`, and `CommAttribute` values cached on communicators, cloned on
//! `duplicate` only when the type asks.

use mpi::topology::{
    Color, Communicator, GroupRelation, IntoTopology, Rank, SimpleCommunicator, SystemGroup,
    Topology,
};
use mpi::traits::*;

#[derive(Debug, PartialEq)]
struct Kept(i32);

impl CommAttribute for Kept {
    const CLONE_ON_DUP: bool = true;
}

// A clone counts up, so that the test sees which value a duplicate holds.
impl Clone for Kept {
    fn clone(&self) -> Self {
        Kept(self.0 + 1)
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Local(i32);

impl CommAttribute for Local {}

fn groups(world: &SimpleCommunicator) {
    let g = world.group();
    assert_eq!(world.size(), g.size());
    assert_eq!(world.rank(), g.rank().unwrap());
    assert_eq!(GroupRelation::Identical, g.compare(&g));
    let h = world.group();
    assert_eq!(GroupRelation::Identical, g.compare(&g.union(&h)));
    let empty = g.difference(&h);
    assert_eq!(
        GroupRelation::Identical,
        SystemGroup::empty().compare(&empty)
    );
    assert_eq!(0, empty.size());
    assert_eq!(0, g.intersection(&empty).size());

    let first_half: Vec<Rank> = (0..g.size() / 2).collect();
    let f = g.include(&first_half[..]);
    let s = g.exclude(&first_half[..]);
    assert_eq!(GroupRelation::Unequal, f.compare(&s));
    assert_eq!(GroupRelation::Identical, f.compare(&g.intersection(&f)));
    assert_eq!(GroupRelation::Identical, s.compare(&g.difference(&f)));
    assert_eq!(GroupRelation::Identical, g.compare(&f.union(&s)));
    if f.size() > 0 {
        assert_eq!(GroupRelation::Similar, g.compare(&s.union(&f)));
    }
    assert!(f.rank().is_some() ^ s.rank().is_some());
    let last = g.size() - 1;
    assert_eq!(g.translate_rank(last, &s), Some(s.size() - 1));
    assert_eq!(
        g.translate_ranks(&[0, last], &f),
        vec![(f.size() > 0).then_some(0), None]
    );
}

fn subgroups(world: &SimpleCommunicator) {
    let odd = (0..world.size()).filter(|x| x % 2 != 0).collect::<Vec<_>>();
    let odd_group = world.group().include(&odd[..]);
    let even_group = world.group().difference(&odd_group);
    let my_group = if odd_group.rank().is_some() {
        &odd_group
    } else {
        &even_group
    };
    let oddness = world
        .split_by_subgroup_collective(my_group)
        .expect("a member of its own group");
    assert_eq!(GroupRelation::Identical, oddness.group().compare(my_group));
    assert_eq!(oddness.size(), my_group.size());

    // Members outside the group passed get no communicator; the empty group is legal.
    let empty_group = SystemGroup::empty();
    let odd_comm = if odd_group.rank().is_some() {
        world.split_by_subgroup_collective(&odd_group)
    } else {
        world.split_by_subgroup_collective(&empty_group)
    };
    assert_eq!(odd_comm.is_some(), world.rank() % 2 != 0);
    if let Some(c) = odd_comm {
        let mut sum = 0;
        c.all_reduce_into(
            &world.rank(),
            &mut sum,
            mpi::collective::SystemOperation::sum(),
        );
        assert_eq!(sum, odd.iter().sum::<Rank>());
    }

    // Not collective: only the group's members call (rsmpi's split.rs).
    let sum = |c: &SimpleCommunicator| {
        let mut total = 0;
        c.all_reduce_into(
            &world.rank(),
            &mut total,
            mpi::collective::SystemOperation::sum(),
        );
        total
    };
    if even_group.rank().is_some() {
        let even_comm = world
            .split_by_subgroup(&even_group)
            .expect("a member of the group");
        assert_eq!(
            GroupRelation::Identical,
            even_comm.group().compare(&even_group)
        );
        let evens: Rank = (0..world.size()).filter(|x| x % 2 == 0).sum();
        assert_eq!(sum(&even_comm), evens);
        assert!(world.split_by_subgroup(&odd_group).is_none());
    } else {
        // Tags tell apart communicators of one group made in different orders.
        let (a, b) = if world.rank() % 4 == 1 {
            (1, 2)
        } else {
            (2, 1)
        };
        let first = world.split_by_subgroup_with_tag(&odd_group, a).unwrap();
        let second = world.split_by_subgroup_with_tag(&odd_group, b).unwrap();
        let (one, two) = if a == 1 {
            (first, second)
        } else {
            (second, first)
        };
        assert_eq!(sum(&two), odd.iter().sum::<Rank>());
        assert_eq!(sum(&one), odd.iter().sum::<Rank>());
    }

    // The same split by color agrees with the subgroup one.
    let by_color = world
        .split_by_color(Color::with_value(world.rank() % 2))
        .expect("a defined color");
    assert_eq!(GroupRelation::Identical, by_color.group().compare(my_group));
}

fn with_trait_object(comm: &mut dyn Communicator) -> Option<i32> {
    comm.set_attr(Local(22));
    comm.get_attr::<Local>().map(|l| l.0)
}

fn attributes(world: &mut SimpleCommunicator) {
    assert_eq!(world.get_attr::<Kept>(), None);
    world.set_attr(Kept(10));
    world.set_attr(Local(20));
    assert_eq!(world.get_attr::<Kept>(), Some(&Kept(10)));
    assert_eq!(world.get_attr::<Local>(), Some(&Local(20)));

    let mut comm = world.duplicate();
    assert_eq!(
        comm.get_attr::<Kept>(),
        Some(&Kept(11)),
        "cloned on duplicate"
    );
    assert_eq!(comm.get_attr::<Local>(), None, "not cloned on duplicate");
    let grandchild = comm.duplicate();
    assert_eq!(grandchild.get_attr::<Kept>(), Some(&Kept(12)));

    // Replacing a value: the new one is seen, the world keeps its own.
    comm.set_attr(Kept(30));
    assert_eq!(comm.get_attr::<Kept>(), Some(&Kept(30)));
    assert_eq!(world.get_attr::<Kept>(), Some(&Kept(10)));
    assert_eq!(with_trait_object(&mut comm), Some(22));

    // A split starts with no attributes.
    let half = comm
        .split_by_color(Color::with_value(0))
        .expect("a defined color");
    assert_eq!(half.get_attr::<Kept>(), None);
}

fn main() {
    let universe = mpi::initialize().unwrap();
    let mut world = universe.world();
    let (rank, size) = (world.rank(), world.size());

    assert_eq!(world.topology(), Topology::Undefined);
    assert!(matches!(
        world.duplicate().into_topology(),
        IntoTopology::Undefined(_)
    ));
    groups(&world);
    subgroups(&world);
    attributes(&mut world);
    // Every handle of the world is the same communicator, attributes included.
    assert_eq!(universe.world().get_attr::<Local>(), Some(&Local(20)));

    world.barrier();
    println!("rank {rank} of {size}: groups ok");
}
