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

use super::algos::Shape;
use super::schedule::{Buf, CommOp, Plan, Region};
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
