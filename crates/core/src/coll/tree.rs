//! Latency-optimal broadcast trees in the postal model (seed 002 §4, after Bar-Noy and
//! Kipnis), and the broadcast that runs along them with multi-send and packet-wise
//! pipelining.
//!
//! Contract:
//! * [`postal_tree`]`(p, λ, root)` is a pure function. Time is counted in units of the
//!   time a sender spends on one destination; a packet reaches its receiver λ units
//!   after its sender starts on it, and a receiver starts forwarding at once. The greedy
//!   construction: the root waits in the *new* queue at time 0; for each member in
//!   order (root+1, root+2, … mod p) the queued node `q` with the least time `t` (the
//!   *new* queue first on a tie) takes it as its next child, which joins the *new*
//!   queue at `t + λ`, and `q` joins the *old* queue at `t + 1`. Every member is then
//!   reached at the earliest time the postal model allows: the members reached by time
//!   `t` number `min(p, F_λ(t))` ([`reach`]), and λ = 1 gives a binomial tree.
//! * [`bcast_tree`] is the broadcast plan of one member: receive from its parent, send
//!   to all its children with one multi-destination send, chunk by chunk; with
//!   pipelining a chunk is forwarded as soon as it has arrived, while the next one is
//!   being received. Steps are the chunk indices (unique per sender and receiver).
//! * [`reduce_tree`] and [`gather_tree`] run the same tree backwards (the time-reversed
//!   optimal broadcast tree is the optimal tree for combining, in the postal model): a
//!   member takes what its children send, combines it with its own and sends one
//!   message to its parent. The reduction needs a commutative operation (every
//!   predefined one is); the gather carries a subtree's blocks in the subtree's
//!   depth-first order, which both ends compute from the tree, and the root puts every
//!   block at its member's place.
//! * [`pays`] is the default's choice between this tree and the binomial one: the
//!   tree where the postal model predicts it at least [`TREE_GAIN`] faster (module
//!   `collective::root` says why a margin).

use super::algos::Shape;
use super::schedule::{Buf, CommOp, LocalOp, Plan, Region};
use std::collections::VecDeque;

/// A broadcast tree over members `0..p`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// The root member.
    pub root: usize,
    /// Each member's parent (`None` for the root).
    pub parent: Vec<Option<usize>>,
    /// Each member's children, in the order its sends reach them.
    pub children: Vec<Vec<usize>>,
    /// When each member has the packet (postal-model units).
    pub time: Vec<u64>,
}

/// The postal-model optimal tree for `p` members, ratio `lambda` (at least 1), rooted
/// at `root` (module docs).
pub fn postal_tree(p: usize, lambda: u32, root: usize) -> Tree {
    assert!(root < p.max(1), "root {root} outside 0..{p}");
    let lambda = u64::from(lambda.max(1));
    let mut t = Tree {
        root,
        parent: vec![None; p],
        children: vec![Vec::new(); p],
        time: vec![0; p],
    };
    // Both queues are in time order: entries are appended with times that never
    // decrease (the dequeued time never decreases).
    let mut new: VecDeque<(u64, usize)> = VecDeque::from([(0, root)]);
    let mut old: VecDeque<(u64, usize)> = VecDeque::new();
    for k in 1..p {
        let member = (root + k) % p;
        let from_new = match (new.front(), old.front()) {
            (Some(&(tn, _)), Some(&(to, _))) => tn <= to,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let (at, q) = if from_new {
            new.pop_front()
        } else {
            old.pop_front()
        }
        .expect("one queue holds the sender");
        t.children[q].push(member);
        t.parent[member] = Some(q);
        t.time[member] = at + lambda;
        new.push_back((at + lambda, member));
        old.push_back((at + 1, q));
    }
    t
}

/// `F_λ(t)`: how many members the postal model can reach by time `t` (capped at `cap`).
pub fn reach(lambda: u32, t: u64, cap: u64) -> u64 {
    let lambda = u64::from(lambda.max(1)) as usize;
    let mut f: Vec<u64> = Vec::with_capacity(t as usize + 1);
    for i in 0..=t as usize {
        let v = if i < lambda {
            1
        } else {
            f[i - 1].saturating_add(f[i - lambda]).min(cap)
        };
        f.push(v);
    }
    f[t as usize]
}

/// The predicted gain (binomial time over tree time, as a fraction) the postal tree must
/// exceed to be the default.
pub const TREE_GAIN: (u64, u64) = (6, 5);

/// Postal-model time at which the last member has the packet in the library's binomial
/// broadcast (`algos::bcast_binomial`: every member sends to its largest subtree first).
pub fn binomial_time(p: usize, lambda: u32) -> u64 {
    let l = u64::from(lambda.max(1));
    let mut time = vec![0u64; p];
    // A parent's virtual rank is below its children's: times are set before they are read.
    for v in 0..p {
        let top = if v == 0 {
            p.next_power_of_two()
        } else {
            1 << v.trailing_zeros()
        };
        let (mut mask, mut k) = (top >> 1, 0);
        while mask > 0 {
            if v + mask < p {
                time[v + mask] = time[v] + k + l;
                k += 1;
            }
            mask >>= 1;
        }
    }
    time.into_iter().max().unwrap_or(0)
}

/// Whether the postal tree for `lambda` is the default over the binomial tree for `p`
/// members: its predicted time beats the binomial one's by more than [`TREE_GAIN`].
/// The answer of the last (p, λ) asked is kept: a reduction of any size asks on every
/// call, and building the tree to tell is O(p) with allocations.
pub fn pays(p: usize, lambda: u32) -> bool {
    if lambda <= 1 || p < 3 {
        return false;
    }
    thread_local! {
        static LAST: std::cell::Cell<Option<(usize, u32, bool)>> =
            const { std::cell::Cell::new(None) };
    }
    if let Some((lp, ll, ans)) = LAST.get() {
        if (lp, ll) == (p, lambda) {
            return ans;
        }
    }
    let ans = predicted_gain(p, lambda);
    LAST.set(Some((p, lambda, ans)));
    ans
}

/// [`pays`], computed.
fn predicted_gain(p: usize, lambda: u32) -> bool {
    let tree = postal_tree(p, lambda, 0)
        .time
        .into_iter()
        .max()
        .unwrap_or(0);
    binomial_time(p, lambda) * TREE_GAIN.1 > tree * TREE_GAIN.0
}

/// Reduction of `len` bytes from every member's send buffer into the root's receive
/// buffer along the time-reversed postal tree for `lambda` (module docs). Every child
/// sends once to its parent (step 0).
pub fn reduce_tree(s: &Shape, root: usize, len: usize, lambda: u32) -> Plan {
    let tree = postal_tree(s.p, lambda, root);
    let mut plan = Plan::default();
    let acc = Region::new(plan.tmp(len), 0, len);
    plan.round(
        vec![],
        vec![LocalOp::Copy {
            from: Region::new(Buf::Send, 0, len),
            to: acc,
        }],
    );
    let (mut recvs, mut folds) = (Vec::new(), Vec::new());
    for &c in &tree.children[s.me] {
        let t = Region::new(plan.tmp(len), 0, len);
        recvs.push(CommOp::Recv {
            from: s.world[c],
            step: 0,
            into: t,
        });
        folds.push(LocalOp::Reduce { from: t, into: acc });
    }
    plan.round(recvs, folds);
    match tree.parent[s.me] {
        Some(q) => plan.round(
            vec![CommOp::Send {
                to: vec![s.world[q]],
                step: 0,
                from: acc,
            }],
            vec![],
        ),
        None => plan.round(
            vec![],
            vec![LocalOp::Copy {
                from: acc,
                to: Region::new(Buf::Recv, 0, len),
            }],
        ),
    }
    plan
}

/// The members of `v`'s subtree, depth first: `v`, then each child's subtree in order.
fn subtree(t: &Tree, v: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(x) = stack.pop() {
        out.push(x);
        stack.extend(t.children[x].iter().rev());
    }
    out
}

/// Gather of `block` bytes per member to `root` along the time-reversed postal tree for
/// `lambda` (module docs). Every child sends its subtree's blocks once (step 0).
pub fn gather_tree(s: &Shape, root: usize, block: usize, lambda: u32) -> Plan {
    let tree = postal_tree(s.p, lambda, root);
    let mine = subtree(&tree, s.me);
    let mut plan = Plan::default();
    let t = plan.tmp(mine.len() * block);
    plan.round(
        vec![],
        vec![LocalOp::Copy {
            from: Region::new(Buf::Send, 0, block),
            to: Region::new(t, 0, block),
        }],
    );
    let mut recvs = Vec::new();
    let mut at = 1;
    for &c in &tree.children[s.me] {
        let n = subtree(&tree, c).len();
        recvs.push(CommOp::Recv {
            from: s.world[c],
            step: 0,
            into: Region::new(t, at * block, n * block),
        });
        at += n;
    }
    plan.round(recvs, vec![]);
    match tree.parent[s.me] {
        Some(q) => plan.round(
            vec![CommOp::Send {
                to: vec![s.world[q]],
                step: 0,
                from: Region::new(t, 0, mine.len() * block),
            }],
            vec![],
        ),
        None => {
            let copies = mine
                .iter()
                .enumerate()
                .map(|(i, &m)| LocalOp::Copy {
                    from: Region::new(t, i * block, block),
                    to: Region::new(Buf::Recv, m * block, block),
                })
                .collect();
            plan.round(vec![], copies);
        }
    }
    plan
}

/// Broadcast of `len` bytes in `buf` (at the root) into `buf` everywhere along the
/// postal tree for `lambda`, in chunks of `chunk` bytes, forwarding each chunk as it
/// arrives when `pipeline` (module docs).
pub fn bcast_tree(
    s: &Shape,
    root: usize,
    buf: Buf,
    len: usize,
    lambda: u32,
    chunk: usize,
    pipeline: bool,
) -> Plan {
    let tree = postal_tree(s.p, lambda, root);
    let kids: Vec<u32> = tree.children[s.me].iter().map(|&c| s.world[c]).collect();
    let parent = tree.parent[s.me].map(|q| s.world[q]);
    let chunk = chunk.max(1);
    let n = len.div_ceil(chunk).max(1);
    let region = |i: usize| {
        let off = i * chunk;
        Region::new(buf, off, chunk.min(len - off.min(len)))
    };
    let send = |i: usize| CommOp::Send {
        to: kids.clone(),
        step: i as i32,
        from: region(i),
    };
    let recv = |from: u32, i: usize| CommOp::Recv {
        from,
        step: i as i32,
        into: region(i),
    };
    let mut plan = Plan::default();
    match parent {
        // The root: every chunk at once (the links pace them).
        None => plan.round((0..n).map(send).collect(), vec![]),
        // A leaf: every chunk at once.
        Some(from) if kids.is_empty() => {
            plan.round((0..n).map(|i| recv(from, i)).collect(), vec![])
        }
        Some(from) if pipeline => {
            // Round i: forward chunk i-1 while chunk i arrives.
            for i in 0..=n {
                let mut ops = Vec::with_capacity(2);
                if i > 0 {
                    ops.push(send(i - 1));
                }
                if i < n {
                    ops.push(recv(from, i));
                }
                plan.round(ops, vec![]);
            }
        }
        Some(from) => {
            plan.round((0..n).map(|i| recv(from, i)).collect(), vec![]);
            plan.round((0..n).map(send).collect(), vec![]);
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a tree up to the order of children: a canonical string.
    fn canon(t: &Tree, v: usize) -> String {
        let mut kids: Vec<String> = t.children[v].iter().map(|&c| canon(t, c)).collect();
        kids.sort();
        format!("({})", kids.concat())
    }

    /// The binomial tree of the library's binomial broadcast (vrank v's children are
    /// v + 2^k below its lowest set bit), root 0.
    fn binomial(p: usize) -> Tree {
        let mut t = Tree {
            root: 0,
            parent: vec![None; p],
            children: vec![Vec::new(); p],
            time: vec![0; p],
        };
        for v in 1..p {
            let q = v & (v - 1); // clear the lowest set bit
            t.parent[v] = Some(q);
            t.children[q].push(v);
        }
        t
    }

    #[test]
    fn every_member_is_reached_as_early_as_the_postal_model_allows() {
        for lambda in 1..=10u32 {
            for p in (1..=64).chain([100, 127, 128, 129, 255, 256, 500, 1000, 1023, 1024]) {
                for root in [0, p / 2, p - 1] {
                    let t = postal_tree(p, lambda, root);
                    // A tree: every member but the root has a parent that had the packet
                    // λ units before it at the latest.
                    assert_eq!(t.parent[root], None);
                    for m in (0..p).filter(|&m| m != root) {
                        let q = t.parent[m].unwrap_or_else(|| panic!("{m} unreached"));
                        assert!(t.time[q] + u64::from(lambda) <= t.time[m]);
                        assert!(t.children[q].contains(&m));
                    }
                    // The k-th send of q starts at time[q] + k.
                    for q in 0..p {
                        for (k, &c) in t.children[q].iter().enumerate() {
                            assert_eq!(t.time[c], t.time[q] + k as u64 + u64::from(lambda));
                        }
                    }
                    // Reached by time t: exactly what F_λ(t) allows.
                    let last = t.time.iter().copied().max().unwrap_or(0);
                    for at in 0..=last {
                        let got = t.time.iter().filter(|&&x| x <= at).count() as u64;
                        assert_eq!(got, reach(lambda, at, p as u64), "p={p} λ={lambda} t={at}");
                    }
                    // ...and nothing faster: F_λ(last - 1) < p.
                    if p > 1 {
                        assert!(reach(lambda, last - 1, p as u64) < p as u64);
                    }
                }
            }
        }
    }

    #[test]
    fn lambda_one_is_the_binomial_tree() {
        for k in 0..=10 {
            let p = 1usize << k;
            assert_eq!(
                canon(&postal_tree(p, 1, 0), 0),
                canon(&binomial(p), 0),
                "p={p}"
            );
        }
        // Any size: the depth (rounds) of the binomial tree, ⌈log2 p⌉.
        for p in 2..=1024usize {
            let t = postal_tree(p, 1, 0);
            let depth = t.time.iter().copied().max().unwrap_or(0);
            assert_eq!(depth, u64::from(p.next_power_of_two().trailing_zeros()));
        }
    }

    #[test]
    fn binomial_time_is_the_binomial_trees_depth_at_lambda_one() {
        for p in 1..=1024usize {
            let rounds = u64::from(p.next_power_of_two().trailing_zeros());
            assert_eq!(binomial_time(p, 1), rounds, "p={p}");
            // The postal tree is never later than the binomial tree.
            for lambda in 1..=10 {
                let t = postal_tree(p, lambda, 0)
                    .time
                    .into_iter()
                    .max()
                    .unwrap_or(0);
                assert!(t <= binomial_time(p, lambda), "p={p} λ={lambda}");
            }
        }
        // λ = 3, 4 members: the root's three sends (5 units) against two levels (6).
        assert_eq!(binomial_time(4, 3), 6);
    }

    #[test]
    fn the_tree_is_the_default_only_where_the_model_predicts_a_clear_gain() {
        for p in 1..=64 {
            assert!(!pays(p, 1), "λ = 1 is the binomial tree");
        }
        // λ = 3: 4 and 6 members gain at most 20 % (binomial), 8 and 16 more (tree).
        assert!(!pays(4, 3) && !pays(6, 3));
        assert!(pays(8, 3) && pays(16, 3));
    }

    /// Runs the plans of every member of a reduction or gather "on paper": the bytes of
    /// each receive come from the matching send, rounds in order.
    fn members_reached_by(plans: &[Plan], p: usize) -> Vec<Vec<usize>> {
        // Who sends to whom: (from, to) pairs, each exactly once.
        let mut edges = Vec::new();
        for (me, plan) in plans.iter().enumerate() {
            for r in &plan.rounds {
                for op in &r.comm {
                    if let CommOp::Send { to, .. } = op {
                        edges.extend(to.iter().map(|&t| (me, t as usize)));
                    }
                }
            }
        }
        let mut got = vec![Vec::new(); p];
        for (me, plan) in plans.iter().enumerate() {
            for r in &plan.rounds {
                for op in &r.comm {
                    if let CommOp::Recv { from, .. } = op {
                        assert!(edges.contains(&(*from as usize, me)), "{from}->{me}");
                        got[me].push(*from as usize);
                    }
                }
            }
        }
        assert_eq!(edges.len(), p - 1);
        got
    }

    #[test]
    fn reduce_and_gather_run_the_tree_backwards() {
        for (p, lambda, root) in [(8, 3, 0), (16, 2, 5), (7, 15, 6), (5, 1, 2)] {
            let t = postal_tree(p, lambda, root);
            let reduce: Vec<Plan> = (0..p)
                .map(|me| reduce_tree(&shape(p, me), root, 64, lambda))
                .collect();
            let gather: Vec<Plan> = (0..p)
                .map(|me| gather_tree(&shape(p, me), root, 8, lambda))
                .collect();
            for plans in [&reduce, &gather] {
                let got = members_reached_by(plans, p);
                for (m, from) in got.iter().enumerate() {
                    assert_eq!(from, &t.children[m], "p={p} member {m}");
                }
            }
            // The gather's root places every member's block once, at its own place.
            let last = gather[root].rounds.last().expect("a round");
            let mut places: Vec<usize> = last
                .local
                .iter()
                .map(|op| match op {
                    LocalOp::Copy { to, .. } => to.off / 8,
                    other => panic!("{other:?}"),
                })
                .collect();
            places.sort_unstable();
            assert_eq!(places, (0..p).collect::<Vec<_>>());
            // Each child's message is its subtree, in the parent's layout.
            for m in (0..p).filter(|&m| m != root) {
                let n = subtree(&t, m).len();
                match &gather[m].rounds.last().expect("a round").comm[..] {
                    [CommOp::Send { from, .. }] => assert_eq!(from.len, n * 8),
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    #[test]
    fn large_lambda_is_flat() {
        // When a hop costs more than sending to everyone, the root sends to all.
        let t = postal_tree(8, 7, 3);
        assert_eq!(t.children[3].len(), 7);
        assert_eq!(t.children[3][0], 4);
    }

    fn shape(p: usize, me: usize) -> Shape {
        Shape {
            p,
            me,
            world: (0..p as u32).collect(),
            packet: 1000,
            multicast: false,
            board: 0,
            board_slots: Vec::new(),
            hosts: Vec::new(),
        }
    }

    #[test]
    fn plans_pipeline_chunks_through_inner_members() {
        let (p, root, lambda) = (8, 0, 2);
        let t = postal_tree(p, lambda, root);
        let inner = (1..p)
            .find(|&m| !t.children[m].is_empty())
            .expect("an inner member");
        let plan = bcast_tree(&shape(p, inner), root, Buf::Recv, 2500, lambda, 1000, true);
        // 3 chunks: recv 0; send 0 + recv 1; send 1 + recv 2; send 2.
        assert_eq!(plan.rounds.len(), 4);
        assert!(matches!(
            plan.rounds[0].comm[..],
            [CommOp::Recv { step: 0, .. }]
        ));
        match &plan.rounds[3].comm[..] {
            [CommOp::Send { to, step: 2, from }] => {
                assert_eq!(to.len(), t.children[inner].len());
                assert_eq!((from.off, from.len), (2000, 500));
            }
            other => panic!("{other:?}"),
        }
        let flat = bcast_tree(&shape(p, inner), root, Buf::Recv, 2500, lambda, 1000, false);
        assert_eq!(flat.rounds.len(), 2);
        // The root sends every chunk in one round; a zero-byte broadcast is one chunk.
        let r = bcast_tree(&shape(p, root), root, Buf::Recv, 0, lambda, 1000, true);
        assert_eq!(r.rounds.len(), 1);
        assert_eq!(r.rounds[0].comm.len(), 1);
    }
}
