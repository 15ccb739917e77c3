//! Point-to-point collective algorithms as [`Plan`]s: binomial trees, rings, recursive
//! doubling, dissemination and pairwise exchange.
//!
//! Contract: every builder gets the communicator shape (`p` members, this member `me`,
//! `world[i]` = world rank of member `i`) and byte sizes, and returns the same kind of
//! plan on every member, with step ids unique per (sender, receiver). Results land in
//! the receive buffer (`Buf::Recv`); inputs come from `Buf::Send`. Reductions assume a
//! commutative operation (all predefined operations are).

pub use super::rsag::{allreduce_rsag, rsag_fits, rsag_mcast, RSAG_MCAST_BLOCK_MIN};
use super::schedule::{Buf, CommOp, LocalOp, Plan, Region};
use super::CollKind;
use crate::datatype::TypeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Shape of the communicator a plan is for.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Number of members.
    pub p: usize,
    /// This member.
    pub me: usize,
    /// World rank of each member.
    pub world: Vec<u32>,
    /// Collective payload bytes per packet.
    pub packet: usize,
    /// Whether real multicast is available (else multicasts are fanned out).
    pub multicast: bool,
    /// Bytes per slot of the shared-memory board when this (blocking) call may run on it
    /// (every member on this host's board); 0 otherwise.
    pub board: usize,
    /// Board slot of each member when `board` > 0 (looked up once per communicator, not
    /// per call); empty otherwise.
    pub board_slots: Vec<usize>,
    /// Host of each member, when this (blocking) call may run hierarchically (members on
    /// several hosts, shared memory configured); empty otherwise.
    pub hosts: Vec<u32>,
}

/// The shapes of a communicator's calls, computed once: a shape depends only on
/// configuration, membership and start-up state, which a communicator keeps for its life.
/// Also the type hashes of its last lean calls ([`SigMemo`], rewritten as calls change).
/// Shared by every clone of a communicator's handle.
#[derive(Default)]
pub(crate) struct ShapeCache([std::sync::OnceLock<Shape>; 2], [SigMemo; LEAN_KINDS]);

/// Kinds of lean calls: `CollKind` values up to `Alltoall`'s (`Barrier` is 1).
const LEAN_KINDS: usize = CollKind::Alltoall as usize + 1;

/// The type hash ([`super::type_hash`]) of a communicator's last lean call of one kind
/// with a predefined type, and the count and type it was computed from: a program
/// repeats the same call (with any root), and the hash is then two compares. Touched
/// only inside the thread rule (one thread at a time), so relaxed atomics are enough.
#[derive(Default)]
struct SigMemo {
    count: AtomicU64,
    dt: AtomicUsize,
    hash: AtomicU32,
}

impl ShapeCache {
    /// The type hash of `count` elements of `dt` in a lean call of `kind`
    /// ([`super::type_hash`]), remembered from the last such call when it is the same.
    #[inline]
    pub(crate) fn lean_type_hash(&self, kind: CollKind, dt: &TypeMap, count: usize) -> u32 {
        // Only a predefined type map has an identity that is never reused.
        let (Some(id), Some(m)) = (dt.static_id(), self.1.get(kind as usize)) else {
            return super::type_hash(dt, count);
        };
        if m.count.load(Ordering::Relaxed) == count as u64 && m.dt.load(Ordering::Relaxed) == id {
            return m.hash.load(Ordering::Relaxed);
        }
        let hash = super::type_hash(dt, count);
        m.count.store(count as u64, Ordering::Relaxed);
        m.dt.store(id, Ordering::Relaxed);
        m.hash.store(hash, Ordering::Relaxed);
        hash
    }

    /// The shape of blocking (index 1) or immediate (index 0) calls, once computed.
    pub(crate) fn get(&self, blocking: bool) -> Option<&Shape> {
        self.0[usize::from(blocking)].get()
    }

    /// Keeps `s` as the shape of `blocking` calls (a shape another thread kept first
    /// stays: both were computed from the same state) and returns the one kept.
    pub(crate) fn keep(&self, blocking: bool, s: Shape) -> &Shape {
        let slot = &self.0[usize::from(blocking)];
        let _ = slot.set(s);
        slot.get().expect("a shape was just kept")
    }
}

impl std::fmt::Debug for ShapeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShapeCache")
    }
}

impl Shape {
    pub(super) fn w(&self, i: usize) -> u32 {
        self.world[i]
    }
    fn vrank(&self, root: usize) -> usize {
        (self.me + self.p - root) % self.p
    }
    fn real(&self, v: usize, root: usize) -> usize {
        (v + root) % self.p
    }
}

pub(super) fn send(to: u32, step: i32, from: Region) -> CommOp {
    CommOp::Send {
        to: vec![to],
        step,
        from,
    }
}
pub(super) fn recv(from: u32, step: i32, into: Region) -> CommOp {
    CommOp::Recv { from, step, into }
}
/// A first round copying the send buffer into `to` (its length).
pub(super) fn copy_send(plan: &mut Plan, to: Region) {
    let from = Region::new(Buf::Send, 0, to.len);
    plan.round(vec![], vec![LocalOp::Copy { from, to }]);
}

fn level(mask: usize) -> i32 {
    mask.trailing_zeros() as i32
}

/// Binomial-tree broadcast of `len` bytes held in `buf` (at the root) into `buf`
/// everywhere.
pub fn bcast_binomial(s: &Shape, root: usize, buf: Buf, len: usize) -> Plan {
    let mut plan = Plan::default();
    let v = s.vrank(root);
    let all = Region::new(buf, 0, len);
    let mut mask = 1;
    while mask < s.p {
        if v & mask != 0 {
            let parent = s.real(v - mask, root);
            plan.round(vec![recv(s.w(parent), level(mask), all)], vec![]);
            break;
        }
        mask <<= 1;
    }
    let mut sends = Vec::new();
    mask >>= 1;
    while mask > 0 {
        if v + mask < s.p {
            sends.push(send(s.w(s.real(v + mask, root)), level(mask), all));
        }
        mask >>= 1;
    }
    plan.round(sends, vec![]);
    plan
}

/// Binomial-tree reduction of `len` bytes from every send buffer into the root's
/// receive buffer.
pub fn reduce_binomial(s: &Shape, root: usize, len: usize) -> Plan {
    let mut plan = Plan::default();
    let v = s.vrank(root);
    let acc = plan.tmp(len);
    let accr = Region::new(acc, 0, len);
    copy_send(&mut plan, accr);
    let mut recvs = Vec::new();
    let mut reduces = Vec::new();
    let mut parent = None;
    let mut mask = 1;
    while mask < s.p {
        if v & mask == 0 {
            if v | mask < s.p {
                let t = Region::new(plan.tmp(len), 0, len);
                recvs.push(recv(s.w(s.real(v | mask, root)), level(mask), t));
                reduces.push(LocalOp::Reduce {
                    from: t,
                    into: accr,
                });
            }
        } else {
            parent = Some(s.real(v & !mask, root));
            break;
        }
        mask <<= 1;
    }
    plan.round(recvs, reduces);
    match parent {
        Some(pr) => plan.round(vec![send(s.w(pr), level(mask), accr)], vec![]),
        None => plan.round(
            vec![],
            vec![LocalOp::Copy {
                from: accr,
                to: Region::new(Buf::Recv, 0, len),
            }],
        ),
    }
    plan
}

/// Allreduce: recursive doubling when `p` is a power of two, else reduce + broadcast.
pub fn allreduce(s: &Shape, len: usize) -> Plan {
    if !s.p.is_power_of_two() {
        let mut plan = reduce_binomial(s, 0, len);
        plan.append(bcast_binomial(s, 0, Buf::Recv, len), 64);
        return plan;
    }
    let mut plan = Plan::default();
    let out = Region::new(Buf::Recv, 0, len);
    copy_send(&mut plan, out);
    let mut k = 0;
    while (1 << k) < s.p {
        let partner = s.me ^ (1 << k);
        let t = Region::new(plan.tmp(len), 0, len);
        plan.round(
            vec![send(s.w(partner), k, out), recv(s.w(partner), k, t)],
            vec![LocalOp::Reduce { from: t, into: out }],
        );
        k += 1;
    }
    plan
}

/// Inclusive scan by recursive doubling (Hillis–Steele).
pub fn scan(s: &Shape, len: usize) -> Plan {
    let mut plan = Plan::default();
    let out = Region::new(Buf::Recv, 0, len);
    copy_send(&mut plan, out);
    let mut k = 0;
    while (1 << k) < s.p {
        let d = 1 << k;
        let mut comm = Vec::new();
        let mut local = Vec::new();
        if s.me + d < s.p {
            comm.push(send(s.w(s.me + d), k, out));
        }
        if s.me >= d {
            let t = Region::new(plan.tmp(len), 0, len);
            comm.push(recv(s.w(s.me - d), k, t));
            local.push(LocalOp::Reduce { from: t, into: out });
        }
        plan.round(comm, local);
        k += 1;
    }
    plan
}

/// Exclusive prefix reduction of `len` bytes by recursive doubling (for any p): every
/// member keeps the reduction of the window of members it has heard of (`partial`, its
/// own data first) and exchanges it with the member whose index differs in bit k;
/// contributions from below also go into the result, the first one copied (member 0
/// gets none: its receive buffer is left as it was, as MPI leaves it undefined). The
/// predefined operations are commutative, so the order of combination does not matter.
pub fn exscan(s: &Shape, len: usize) -> Plan {
    let mut plan = Plan::default();
    let out = Region::new(Buf::Recv, 0, len);
    let partial = Region::new(plan.tmp(len), 0, len);
    copy_send(&mut plan, partial);
    let mut have_out = false;
    let mut k = 0;
    while (1usize << k) < s.p {
        let partner = s.me ^ (1 << k);
        if partner < s.p {
            let t = Region::new(plan.tmp(len), 0, len);
            let comm = vec![send(s.w(partner), k, partial), recv(s.w(partner), k, t)];
            let mut local = Vec::new();
            if partner < s.me {
                local.push(if have_out {
                    LocalOp::Reduce { from: t, into: out }
                } else {
                    LocalOp::Copy { from: t, to: out }
                });
                have_out = true;
            }
            local.push(LocalOp::Reduce {
                from: t,
                into: partial,
            });
            plan.round(comm, local);
        }
        k += 1;
    }
    plan
}

/// Gather of `block` bytes per member to `root` along a binomial tree (subtrees travel
/// as contiguous runs in root-relative order).
pub fn gather_binomial(s: &Shape, root: usize, block: usize) -> Plan {
    let mut plan = Plan::default();
    let v = s.vrank(root);
    // Size of my subtree.
    let low = if v == 0 {
        s.p.next_power_of_two()
    } else {
        1 << v.trailing_zeros()
    };
    let sub = low.min(s.p - v);
    let t = plan.tmp(sub * block);
    plan.round(
        vec![],
        vec![LocalOp::Copy {
            from: Region::new(Buf::Send, 0, block),
            to: Region::new(t, 0, block),
        }],
    );
    let mut recvs = Vec::new();
    let mut mask = 1;
    while mask < low && v + mask < s.p {
        let child = v + mask;
        let n = mask.min(s.p - child);
        recvs.push(recv(
            s.w(s.real(child, root)),
            level(mask),
            Region::new(t, mask * block, n * block),
        ));
        mask <<= 1;
    }
    plan.round(recvs, vec![]);
    if v == 0 {
        // Rotate root-relative order into rank order.
        let copies = (0..s.p)
            .map(|i| LocalOp::Copy {
                from: Region::new(t, i * block, block),
                to: Region::new(Buf::Recv, s.real(i, root) * block, block),
            })
            .collect();
        plan.round(vec![], copies);
    } else {
        let parent = s.real(v - low, root);
        plan.round(
            vec![send(
                s.w(parent),
                level(low),
                Region::new(t, 0, sub * block),
            )],
            vec![],
        );
    }
    plan
}

/// Scatter of `block` bytes per member from `root` along a binomial tree.
pub fn scatter_binomial(s: &Shape, root: usize, block: usize) -> Plan {
    let mut plan = Plan::default();
    let v = s.vrank(root);
    let low = if v == 0 {
        s.p.next_power_of_two()
    } else {
        1 << v.trailing_zeros()
    };
    let sub = low.min(s.p - v);
    let t = plan.tmp(sub * block);
    if v == 0 {
        let copies = (0..s.p)
            .map(|i| LocalOp::Copy {
                from: Region::new(Buf::Send, s.real(i, root) * block, block),
                to: Region::new(t, i * block, block),
            })
            .collect();
        plan.round(vec![], copies);
    } else {
        let parent = s.real(v - low, root);
        plan.round(
            vec![recv(
                s.w(parent),
                level(low),
                Region::new(t, 0, sub * block),
            )],
            vec![],
        );
    }
    let mut sends = Vec::new();
    let mut mask = low >> 1;
    while mask > 0 {
        if v + mask < s.p {
            let n = mask.min(s.p - v - mask);
            sends.push(send(
                s.w(s.real(v + mask, root)),
                level(mask),
                Region::new(t, mask * block, n * block),
            ));
        }
        mask >>= 1;
    }
    plan.round(
        sends,
        vec![LocalOp::Copy {
            from: Region::new(t, 0, block),
            to: Region::new(Buf::Recv, 0, block),
        }],
    );
    plan
}

/// Ring allgather: p - 1 steps, each passing one block to the right.
pub fn allgather_ring(s: &Shape, block: usize) -> Plan {
    let mut plan = Plan::default();
    let blk = |i: usize| Region::new(Buf::Recv, i * block, block);
    plan.round(
        vec![],
        vec![LocalOp::Copy {
            from: Region::new(Buf::Send, 0, block),
            to: blk(s.me),
        }],
    );
    let right = s.w((s.me + 1) % s.p);
    let left = s.w((s.me + s.p - 1) % s.p);
    for i in 0..s.p.saturating_sub(1) {
        let out = (s.me + s.p - i) % s.p;
        let inb = (s.me + s.p - i - 1) % s.p;
        plan.round(
            vec![
                send(right, i as i32, blk(out)),
                recv(left, i as i32, blk(inb)),
            ],
            vec![],
        );
    }
    plan
}

/// Recursive-doubling allgather (p a power of two).
pub fn allgather_rd(s: &Shape, block: usize) -> Plan {
    let mut plan = Plan::default();
    plan.round(
        vec![],
        vec![LocalOp::Copy {
            from: Region::new(Buf::Send, 0, block),
            to: Region::new(Buf::Recv, s.me * block, block),
        }],
    );
    let mut k = 0;
    while (1 << k) < s.p {
        let d = 1 << k;
        let partner = s.me ^ d;
        let mine = s.me & !(d - 1);
        let theirs = partner & !(d - 1);
        plan.round(
            vec![
                send(
                    s.w(partner),
                    k,
                    Region::new(Buf::Recv, mine * block, d * block),
                ),
                recv(
                    s.w(partner),
                    k,
                    Region::new(Buf::Recv, theirs * block, d * block),
                ),
            ],
            vec![],
        );
        k += 1;
    }
    plan
}

/// Pairwise-exchange all-to-all; all pairs at once when the total is small.
pub fn alltoall_pairwise(s: &Shape, block: usize) -> Plan {
    let mut plan = Plan::default();
    plan.round(
        vec![],
        vec![LocalOp::Copy {
            from: Region::new(Buf::Send, s.me * block, block),
            to: Region::new(Buf::Recv, s.me * block, block),
        }],
    );
    let together = block * s.p <= 256 << 10;
    let mut all = Vec::new();
    for i in 1..s.p {
        let to = (s.me + i) % s.p;
        let from = (s.me + s.p - i) % s.p;
        let ops = vec![
            send(s.w(to), 0, Region::new(Buf::Send, to * block, block)),
            recv(s.w(from), 0, Region::new(Buf::Recv, from * block, block)),
        ];
        if together {
            all.extend(ops);
        } else {
            plan.round(ops, vec![]);
        }
    }
    plan.round(all, vec![]);
    plan
}

/// Dissemination barrier: ceil(log2 p) rounds of empty messages.
pub fn barrier_dissemination(s: &Shape) -> Plan {
    let mut plan = Plan::default();
    let empty = Region::new(Buf::Recv, 0, 0);
    let mut k = 0;
    while (1 << k) < s.p {
        let d = 1 << k;
        plan.round(
            vec![
                send(s.w((s.me + d) % s.p), k, empty),
                recv(s.w((s.me + s.p - d) % s.p), k, empty),
            ],
            vec![],
        );
        k += 1;
    }
    plan
}

/// Multicast broadcast (seed 000 §4.2): the root multicasts the message (URTP cuts it
/// into ⌈M/m⌉ packets) and every other member receives it.
pub fn bcast_mcast(s: &Shape, root: usize, buf: Buf, len: usize) -> Plan {
    let mut plan = Plan::default();
    let all = Region::new(buf, 0, len);
    if s.me == root {
        let to: Vec<u32> = (0..s.p).filter(|&i| i != root).map(|i| s.w(i)).collect();
        if !to.is_empty() {
            plan.round(
                vec![CommOp::Send {
                    to,
                    step: 0,
                    from: all,
                }],
                vec![],
            );
        }
    } else {
        plan.round(vec![recv(s.w(root), 0, all)], vec![]);
    }
    plan
}

/// All-gather as a gather to member 0 (every member sends its block straight to it), then
/// one multicast of the whole from it: two steps whatever p, and p − 1 + 1 sends in all.
pub fn allgather_gather_mcast(s: &Shape, block: usize) -> Plan {
    let mut plan = gather_linear(s, 0, block);
    plan.append(bcast_mcast(s, 0, Buf::Recv, s.p * block), 1);
    plan
}

/// Allgather algorithm 1 (seed 000 §4.3, round-robin multicast): in turn, each member
/// multicasts its block while all others receive it.
pub fn allgather_mcast_rr(s: &Shape, block: usize) -> Plan {
    let mut plan = Plan::default();
    let blk = |i: usize| Region::new(Buf::Recv, i * block, block);
    plan.round(
        vec![],
        vec![LocalOp::Copy {
            from: Region::new(Buf::Send, 0, block),
            to: blk(s.me),
        }],
    );
    let others: Vec<u32> = (0..s.p).filter(|&i| i != s.me).map(|i| s.w(i)).collect();
    for i in 0..s.p {
        if i == s.me {
            plan.round(
                vec![CommOp::Send {
                    to: others.clone(),
                    step: 0,
                    from: blk(s.me),
                }],
                vec![],
            );
        } else {
            plan.round(vec![recv(s.w(i), 0, blk(i))], vec![]);
        }
    }
    plan
}

/// Allgather algorithm 2 (seed 000 §4.3, k-concurrency multicast): the block is cut into
/// chunks of `chunk` bytes; each member multicasts k chunks, then receives the same k
/// chunks from every other member, and repeats.
pub fn allgather_mcast_k(s: &Shape, block: usize, chunk: usize, k: usize) -> Plan {
    let mut plan = Plan::default();
    plan.round(
        vec![],
        vec![LocalOp::Copy {
            from: Region::new(Buf::Send, 0, block),
            to: Region::new(Buf::Recv, s.me * block, block),
        }],
    );
    let chunk = chunk.max(1);
    let q = block.div_ceil(chunk).max(1);
    let k = k.max(1);
    let others: Vec<u32> = (0..s.p).filter(|&i| i != s.me).map(|i| s.w(i)).collect();
    let piece = |owner: usize, j: usize| {
        let off = j * chunk;
        Region::new(
            Buf::Recv,
            owner * block + off,
            chunk.min(block - off.min(block)),
        )
    };
    let mut j = 0;
    while j < q {
        let end = (j + k).min(q);
        let mut comm = Vec::new();
        for c in j..end {
            comm.push(CommOp::Send {
                to: others.clone(),
                step: c as i32,
                from: piece(s.me, c),
            });
        }
        for c in j..end {
            for i in (0..s.p).filter(|&i| i != s.me) {
                comm.push(recv(s.w(i), c as i32, piece(i, c)));
            }
        }
        plan.round(comm, vec![]);
        j = end;
    }
    plan
}

/// Linear gather: every member sends its block straight to the root.
pub fn gather_linear(s: &Shape, root: usize, block: usize) -> Plan {
    let mut plan = Plan::default();
    if s.me == root {
        let recvs = (0..s.p)
            .filter(|&i| i != root)
            .map(|i| recv(s.w(i), 0, Region::new(Buf::Recv, i * block, block)))
            .collect();
        plan.round(
            recvs,
            vec![LocalOp::Copy {
                from: Region::new(Buf::Send, 0, block),
                to: Region::new(Buf::Recv, root * block, block),
            }],
        );
    } else {
        plan.round(
            vec![send(s.w(root), 0, Region::new(Buf::Send, 0, block))],
            vec![],
        );
    }
    plan
}

/// Linear scatter: the root sends every member its block straight from the send buffer.
pub fn scatter_linear(s: &Shape, root: usize, block: usize) -> Plan {
    let mut plan = Plan::default();
    if s.me == root {
        let sends = (0..s.p)
            .filter(|&i| i != root)
            .map(|i| send(s.w(i), 0, Region::new(Buf::Send, i * block, block)))
            .collect();
        plan.round(
            sends,
            vec![LocalOp::Copy {
                from: Region::new(Buf::Send, root * block, block),
                to: Region::new(Buf::Recv, 0, block),
            }],
        );
    } else {
        plan.round(
            vec![recv(s.w(root), 0, Region::new(Buf::Recv, 0, block))],
            vec![],
        );
    }
    plan
}

/// Multicast scatter (seed 000 §4.4): small blocks are packed into one multicast packet
/// (the whole send buffer) from which every member takes its block; large blocks go
/// point-to-point in whole packets, with the last pieces of all blocks packed together
/// into one multicast.
pub fn scatter_mcast(s: &Shape, root: usize, block: usize, packet: usize) -> Plan {
    let mut plan = Plan::default();
    let total = block * s.p;
    if total > packet {
        // Whole packets of each block go point-to-point; the last pieces of all blocks
        // are packed together and multicast once.
        let tail = block % packet.max(1);
        let full = block - tail;
        let tails = tail * s.p;
        if s.me == root {
            let t = plan.tmp(tails);
            let packing = (0..s.p)
                .map(|i| LocalOp::Copy {
                    from: Region::new(Buf::Send, i * block + full, tail),
                    to: Region::new(t, i * tail, tail),
                })
                .collect();
            plan.round(vec![], packing);
            let others: Vec<usize> = (0..s.p).filter(|&i| i != root).collect();
            let mut sends: Vec<CommOp> = if full > 0 {
                others
                    .iter()
                    .map(|&i| send(s.w(i), 0, Region::new(Buf::Send, i * block, full)))
                    .collect()
            } else {
                Vec::new()
            };
            if tail > 0 && !others.is_empty() {
                sends.push(CommOp::Send {
                    to: others.iter().map(|&i| s.w(i)).collect(),
                    step: 1,
                    from: Region::new(t, 0, tails),
                });
            }
            plan.round(
                sends,
                vec![LocalOp::Copy {
                    from: Region::new(Buf::Send, root * block, block),
                    to: Region::new(Buf::Recv, 0, block),
                }],
            );
        } else {
            let t = plan.tmp(tails);
            let mut recvs = Vec::new();
            if full > 0 {
                recvs.push(recv(s.w(root), 0, Region::new(Buf::Recv, 0, full)));
            }
            let mut local = Vec::new();
            if tail > 0 {
                recvs.push(recv(s.w(root), 1, Region::new(t, 0, tails)));
                local.push(LocalOp::Copy {
                    from: Region::new(t, s.me * tail, tail),
                    to: Region::new(Buf::Recv, full, tail),
                });
            }
            plan.round(recvs, local);
        }
        return plan;
    }
    if s.me == root {
        let to: Vec<u32> = (0..s.p).filter(|&i| i != root).map(|i| s.w(i)).collect();
        let comm = if to.is_empty() {
            vec![]
        } else {
            vec![CommOp::Send {
                to,
                step: 0,
                from: Region::new(Buf::Send, 0, total),
            }]
        };
        plan.round(
            comm,
            vec![LocalOp::Copy {
                from: Region::new(Buf::Send, root * block, block),
                to: Region::new(Buf::Recv, 0, block),
            }],
        );
    } else {
        let t = plan.tmp(total);
        plan.round(
            vec![recv(s.w(root), 0, Region::new(t, 0, total))],
            vec![LocalOp::Copy {
                from: Region::new(t, s.me * block, block),
                to: Region::new(Buf::Recv, 0, block),
            }],
        );
    }
    plan
}

/// Barrier as seed 000 §4.5: a gather of 0 bytes to member 0, then a multicast of 0
/// bytes from it.
pub fn barrier_mcast(s: &Shape) -> Plan {
    let mut plan = gather_linear(s, 0, 0);
    plan.append(bcast_mcast(s, 0, Buf::Recv, 0), 1);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Runs every member's plan in memory, reductions as u64 sums; panics on a deadlock.
    fn simulate(plans: &[Plan], sends: &[Vec<u8>], recv_len: usize) -> Vec<Vec<u8>> {
        let p = plans.len();
        let mut bufs: Vec<Vec<Vec<u8>>> = plans
            .iter()
            .map(|pl| pl.tmps.iter().map(|&n| vec![0xa5u8; n]).collect())
            .collect();
        let mut recvs = vec![vec![0x5au8; recv_len]; p];
        let mut mail: HashMap<(u32, u32, i32), Vec<u8>> = HashMap::new();
        let (mut at, mut started) = (vec![0usize; p], vec![false; p]);
        let get = |m: usize, r: Region, bufs: &Vec<Vec<Vec<u8>>>, recvs: &Vec<Vec<u8>>| match r.buf
        {
            Buf::Send => sends[m][r.off..r.off + r.len].to_vec(),
            Buf::Recv => recvs[m][r.off..r.off + r.len].to_vec(),
            Buf::Tmp(i) => bufs[m][i][r.off..r.off + r.len].to_vec(),
        };
        loop {
            let mut progress = false;
            for m in 0..p {
                let Some(round) = plans[m].rounds.get(at[m]) else {
                    continue;
                };
                if !started[m] {
                    for c in &round.comm {
                        if let CommOp::Send { to, step, from } = c {
                            for &t in to {
                                let data = get(m, *from, &bufs, &recvs);
                                assert!(mail.insert((m as u32, t, *step), data).is_none());
                            }
                        }
                    }
                    started[m] = true;
                    progress = true;
                }
                let ready = round.comm.iter().all(|c| match c {
                    CommOp::Recv { from, step, .. } => mail.contains_key(&(*from, m as u32, *step)),
                    _ => true,
                });
                if !ready {
                    continue;
                }
                type Bufs = Vec<Vec<Vec<u8>>>;
                fn put(m: usize, r: Region, d: &[u8], bufs: &mut Bufs, recvs: &mut [Vec<u8>]) {
                    let dst = match r.buf {
                        Buf::Recv => &mut recvs[m][r.off..r.off + r.len],
                        Buf::Tmp(i) => &mut bufs[m][i][r.off..r.off + r.len],
                        Buf::Send => panic!("write to the send buffer"),
                    };
                    assert_eq!(dst.len(), d.len());
                    dst.copy_from_slice(d);
                }
                for c in &round.comm {
                    if let CommOp::Recv { from, step, into } = c {
                        let d = mail.remove(&(*from, m as u32, *step)).unwrap();
                        put(m, *into, &d, &mut bufs, &mut recvs);
                    }
                }
                for l in &round.local {
                    match l {
                        LocalOp::Copy { from, to } => {
                            let d = get(m, *from, &bufs, &recvs);
                            put(m, *to, &d, &mut bufs, &mut recvs);
                        }
                        LocalOp::Reduce { from, into } => {
                            let a = get(m, *from, &bufs, &recvs);
                            let b = get(m, *into, &bufs, &recvs);
                            let s: Vec<u8> = a
                                .chunks(8)
                                .zip(b.chunks(8))
                                .flat_map(|(x, y)| {
                                    let x = u64::from_ne_bytes(x.try_into().unwrap());
                                    let y = u64::from_ne_bytes(y.try_into().unwrap());
                                    x.wrapping_add(y).to_ne_bytes()
                                })
                                .collect();
                            put(m, *into, &s, &mut bufs, &mut recvs);
                        }
                    }
                }
                at[m] += 1;
                started[m] = false;
                progress = true;
            }
            if (0..p).all(|m| at[m] == plans[m].rounds.len()) {
                assert!(mail.is_empty(), "messages nobody received");
                return recvs;
            }
            assert!(progress, "deadlock at rounds {at:?}");
        }
    }

    fn shape(p: usize, me: usize) -> Shape {
        Shape {
            p,
            me,
            world: (0..p as u32).collect(),
            packet: 1 << 16,
            multicast: false,
            board: 0,
            board_slots: Vec::new(),
            hosts: Vec::new(),
        }
    }

    #[test]
    fn rsag_all_reduce_sums_every_element_on_every_member() {
        for p in 1..=9 {
            for n in [0usize, 1, 3, 8, 17, 64, 100] {
                let len = n * 8;
                if p >= 3 && !rsag_fits(p, len, 8) {
                    continue;
                }
                let sends: Vec<Vec<u8>> = (0..p)
                    .map(|m| {
                        (0..n)
                            .flat_map(|i| ((m * 1000 + i) as u64).to_ne_bytes())
                            .collect()
                    })
                    .collect();
                // Point-to-point all-gather, and the multicast one with pieces of
                // 1, 2 and 3 elements, 1 and 2 per round.
                for mcast in [None, Some((8, 1)), Some((16, 2)), Some((24, 2))] {
                    let plans: Vec<Plan> = (0..p)
                        .map(|m| {
                            let mut sh = shape(p, m);
                            sh.multicast = mcast.is_some();
                            allreduce_rsag(&sh, len, 8, mcast)
                        })
                        .collect();
                    let got = simulate(&plans, &sends, len);
                    let want: Vec<u8> = (0..n)
                        .flat_map(|i| {
                            (0..p)
                                .map(|m| (m * 1000 + i) as u64)
                                .sum::<u64>()
                                .to_ne_bytes()
                        })
                        .collect();
                    for (m, g) in got.iter().enumerate() {
                        assert_eq!(g, &want, "p={p} n={n} {mcast:?} member {m}");
                    }
                }
            }
        }
    }

    #[test]
    fn gather_and_multicast_all_gather_gives_every_member_every_block() {
        for p in 1..=9 {
            for block in [0usize, 1, 5, 64] {
                let sends: Vec<Vec<u8>> = (0..p)
                    .map(|m| (0..block).map(|i| (m * 31 + i) as u8).collect())
                    .collect();
                let plans: Vec<Plan> = (0..p)
                    .map(|m| allgather_gather_mcast(&shape(p, m), block))
                    .collect();
                let got = simulate(&plans, &sends, p * block);
                let want = sends.concat();
                for (m, g) in got.iter().enumerate() {
                    assert_eq!(g, &want, "p={p} block={block} member {m}");
                }
            }
        }
    }

    #[test]
    fn rsag_multicasts_its_all_gather_from_32_kib_blocks_below_eight_members_only() {
        let mut s = shape(4, 3);
        assert_eq!(rsag_mcast(&s, 1 << 20, 65536, 4), None, "no multicast");
        s.multicast = true;
        // Four members: 128 KiB makes 32 KiB blocks; five: the power of two is 4.
        assert_eq!(rsag_mcast(&s, 64 << 10, 65536, 4), None);
        assert_eq!(rsag_mcast(&s, 128 << 10, 65536, 4), Some((65536, 4)));
        s.p = 5;
        assert_eq!(rsag_mcast(&s, 96 << 10, 65536, 4), None);
        assert_eq!(rsag_mcast(&s, 128 << 10, 65536, 2), Some((65536, 2)));
        // Seven members still multicast (the power of two is 4); eight and more are
        // point-to-point at every size.
        s.p = 7;
        assert_eq!(rsag_mcast(&s, 128 << 10, 65536, 4), Some((65536, 4)));
        for p in [8, 9, 16] {
            s.p = p;
            assert_eq!(rsag_mcast(&s, 256 << 10, 65536, 4), None, "p = {p}");
            assert_eq!(rsag_mcast(&s, 16 << 20, 65536, 4), None, "p = {p}");
        }
    }

    #[test]
    fn rsag_moves_less_than_recursive_doubling_from_four_members() {
        let sent = |pl: &Plan| -> usize {
            pl.rounds
                .iter()
                .flat_map(|r| &r.comm)
                .map(|c| match c {
                    CommOp::Send { from, .. } => from.len,
                    _ => 0,
                })
                .sum()
        };
        let len = 64 << 10;
        for p in [4, 8, 16] {
            let rd = sent(&allreduce(&shape(p, 1), len));
            let rs = sent(&allreduce_rsag(&shape(p, 1), len, 8, None));
            assert!(rs < rd, "p={p}: {rs} bytes vs {rd}");
            assert_eq!(rs, 2 * len * (p - 1) / p);
        }
    }
}
