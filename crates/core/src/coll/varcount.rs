//! Schedules of the collectives whose members contribute different counts
//! (`MPI_Gatherv`, `MPI_Scatterv`, `MPI_Allgatherv`, `MPI_Alltoallv`) and of
//! `MPI_Reduce_scatter_block`.
//!
//! Contract: blocks are `(offset, length)` in bytes of the buffer they lie in, one per
//! member in rank order, checked by the caller (inside the buffer; a receive's blocks
//! disjoint). Every plan is one round: each member sends its blocks straight to the
//! members that need them (step 0; an empty block is neither sent nor received, as both
//! ends know its length is 0) and its own block is copied locally after the receives.
//! The reduce-scatter exchanges block i of every member with member i (one step per
//! member) and then reduces, in rank order, the p blocks it received into its result.

use super::algos::Shape;
use super::schedule::{Buf, CommOp, LocalOp, Plan, Region};

/// A block of a buffer: (offset, length) in bytes.
pub type Block = (usize, usize);

/// The blocks a varcount call moves when it runs on the shared-memory board instead of
/// a schedule (`crate::collective::board`); every member's lengths agree with the
/// others' as MPI requires (`mine` of a member is its block at the root).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// Blocks of the send buffer, one per member: at the root of a scatter, and on every
    /// member of an all-to-all; empty elsewhere.
    pub send: Vec<Block>,
    /// Blocks of the receive buffer, one per member: at the root of a gather, and on every
    /// member of an all-gather or all-to-all; empty elsewhere.
    pub recv: Vec<Block>,
}

fn region(buf: Buf, (off, len): Block) -> Region {
    Region::new(buf, off, len)
}

/// `MPI_Gatherv`: the root receives member i's `mine` bytes into its block `blocks[i]`
/// (`blocks` matters at the root only).
pub fn gatherv(s: &Shape, root: usize, mine: usize, blocks: &[Block]) -> Plan {
    let mut plan = Plan::default();
    if s.me != root {
        let comm = (mine > 0)
            .then(|| CommOp::Send {
                to: vec![s.world[root]],
                step: 0,
                from: Region::new(Buf::Send, 0, mine),
            })
            .into_iter()
            .collect();
        plan.round(comm, vec![]);
        return plan;
    }
    let comm = (0..s.p)
        .filter(|&i| i != root && blocks[i].1 > 0)
        .map(|i| CommOp::Recv {
            from: s.world[i],
            step: 0,
            into: region(Buf::Recv, blocks[i]),
        })
        .collect();
    let own = blocks[root];
    let local = (own.1 > 0)
        .then(|| LocalOp::Copy {
            from: Region::new(Buf::Send, 0, own.1),
            to: region(Buf::Recv, own),
        })
        .into_iter()
        .collect();
    plan.round(comm, local);
    plan
}

/// `MPI_Scatterv`: member i receives the root's block `blocks[i]` into its `mine` bytes.
pub fn scatterv(s: &Shape, root: usize, mine: usize, blocks: &[Block]) -> Plan {
    let mut plan = Plan::default();
    if s.me != root {
        let comm = (mine > 0)
            .then(|| CommOp::Recv {
                from: s.world[root],
                step: 0,
                into: Region::new(Buf::Recv, 0, mine),
            })
            .into_iter()
            .collect();
        plan.round(comm, vec![]);
        return plan;
    }
    let comm = (0..s.p)
        .filter(|&i| i != root && blocks[i].1 > 0)
        .map(|i| CommOp::Send {
            to: vec![s.world[i]],
            step: 0,
            from: region(Buf::Send, blocks[i]),
        })
        .collect();
    let own = blocks[root];
    let local = (own.1 > 0)
        .then(|| LocalOp::Copy {
            from: region(Buf::Send, own),
            to: Region::new(Buf::Recv, 0, own.1),
        })
        .into_iter()
        .collect();
    plan.round(comm, local);
    plan
}

/// `MPI_Allgatherv`: every member's send buffer (`blocks[me].1` bytes) lands in block
/// `blocks[me]` of every member's receive buffer (one send to all others).
pub fn allgatherv(s: &Shape, blocks: &[Block]) -> Plan {
    let mut plan = Plan::default();
    let own = blocks[s.me];
    let others: Vec<u32> = (0..s.p)
        .filter(|&i| i != s.me)
        .map(|i| s.world[i])
        .collect();
    let mut comm = Vec::new();
    if own.1 > 0 && !others.is_empty() {
        comm.push(CommOp::Send {
            to: others,
            step: 0,
            from: Region::new(Buf::Send, 0, own.1),
        });
    }
    comm.extend(
        (0..s.p)
            .filter(|&i| i != s.me && blocks[i].1 > 0)
            .map(|i| CommOp::Recv {
                from: s.world[i],
                step: 0,
                into: region(Buf::Recv, blocks[i]),
            }),
    );
    let local = (own.1 > 0)
        .then(|| LocalOp::Copy {
            from: Region::new(Buf::Send, 0, own.1),
            to: region(Buf::Recv, own),
        })
        .into_iter()
        .collect();
    plan.round(comm, local);
    plan
}

/// `MPI_Alltoallv`: send block `sends[i]` goes to member i, whose receive block
/// `recvs[me]` takes it.
pub fn alltoallv(s: &Shape, sends: &[Block], recvs: &[Block]) -> Plan {
    let mut plan = Plan::default();
    let mut comm = Vec::new();
    for i in (0..s.p).filter(|&i| i != s.me) {
        if sends[i].1 > 0 {
            comm.push(CommOp::Send {
                to: vec![s.world[i]],
                step: 0,
                from: region(Buf::Send, sends[i]),
            });
        }
        if recvs[i].1 > 0 {
            comm.push(CommOp::Recv {
                from: s.world[i],
                step: 0,
                into: region(Buf::Recv, recvs[i]),
            });
        }
    }
    let (from, to) = (sends[s.me], recvs[s.me]);
    let local = (to.1 > 0)
        .then(|| LocalOp::Copy {
            from: region(Buf::Send, from),
            to: region(Buf::Recv, to),
        })
        .into_iter()
        .collect();
    plan.round(comm, local);
    plan
}

/// `MPI_Reduce_scatter_block`: member i's result is the reduction, in rank order, of
/// block i (`block` bytes) of every member's send buffer.
pub fn reduce_scatter_block(s: &Shape, block: usize) -> Plan {
    let mut plan = Plan::default();
    if block == 0 {
        return plan;
    }
    let tmp = plan.tmp(block * s.p);
    let mut comm = Vec::new();
    for i in (0..s.p).filter(|&i| i != s.me) {
        comm.push(CommOp::Send {
            to: vec![s.world[i]],
            step: 0,
            from: Region::new(Buf::Send, i * block, block),
        });
        comm.push(CommOp::Recv {
            from: s.world[i],
            step: 0,
            into: Region::new(tmp, i * block, block),
        });
    }
    let part = |i: usize| {
        if i == s.me {
            Region::new(Buf::Send, s.me * block, block)
        } else {
            Region::new(tmp, i * block, block)
        }
    };
    let mut local = vec![LocalOp::Copy {
        from: part(0),
        to: Region::new(Buf::Recv, 0, block),
    }];
    local.extend((1..s.p).map(|i| LocalOp::Reduce {
        from: part(i),
        into: Region::new(Buf::Recv, 0, block),
    }));
    plan.round(comm, local);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(p: usize, me: usize) -> Shape {
        Shape {
            p,
            me,
            world: (0..p as u32).map(|r| r * 10).collect(),
            packet: 1000,
            multicast: false,
            board: 0,
            board_slots: Vec::new(),
            hosts: Vec::new(),
        }
    }

    #[test]
    fn every_block_is_sent_once_and_received_where_it_belongs() {
        // Alltoallv on 3 members: member i sends (i + j) bytes to j.
        let p = 3;
        let sizes = |i: usize, j: usize| i + j;
        let mut sent = Vec::new();
        let mut received = Vec::new();
        for me in 0..p {
            let mut off = 0;
            let sends: Vec<Block> = (0..p)
                .map(|j| {
                    let b = (off, sizes(me, j));
                    off += b.1;
                    b
                })
                .collect();
            let mut off = 0;
            let recvs: Vec<Block> = (0..p)
                .map(|i| {
                    let b = (off, sizes(i, me));
                    off += b.1;
                    b
                })
                .collect();
            let plan = alltoallv(&shape(p, me), &sends, &recvs);
            assert_eq!(plan.rounds.len(), 1);
            for op in &plan.rounds[0].comm {
                match op {
                    CommOp::Send { to, from, .. } => sent.push((me, to[0] / 10, from.len)),
                    CommOp::Recv { from, into, .. } => {
                        received.push((*from as usize / 10, me as u32, into.len))
                    }
                }
            }
        }
        let mut a: Vec<_> = sent.iter().map(|&(f, t, l)| (f, t as usize, l)).collect();
        let mut b: Vec<_> = received
            .iter()
            .map(|&(f, t, l)| (f, t as usize, l))
            .collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        // (0, 0) is local and empty blocks travel nowhere: 0->1 (1), 0->2 (2), 1->0 (1),
        // 1->2 (3), 2->0 (2), 2->1 (3).
        assert_eq!(a.len(), 6);
    }

    #[test]
    fn a_gather_root_receives_each_nonempty_block_in_place() {
        let blocks = [(8, 4), (0, 0), (0, 8)];
        let plan = gatherv(&shape(3, 2), 2, 8, &blocks);
        let r = &plan.rounds[0];
        assert_eq!(r.comm.len(), 1, "member 1 sends nothing");
        assert!(matches!(r.comm[0], CommOp::Recv { from: 0, into, .. } if into.off == 8));
        assert!(matches!(r.local[0], LocalOp::Copy { to, .. } if to.off == 0 && to.len == 8));
        // A member with nothing to send has an empty round.
        let idle = gatherv(&shape(3, 1), 2, 0, &[]);
        assert!(idle.rounds.iter().all(|r| r.comm.is_empty()));
    }
}
