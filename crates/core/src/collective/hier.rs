//! Hierarchical collectives for jobs that span hosts: shared memory inside a host, the
//! network between hosts.
//!
//! Contract: the algorithm `hier` runs a *blocking* broadcast (with real multicast: of
//! 4 KiB or more), reduce, all-reduce, barrier or all-gather varcount of a communicator whose members live on
//! several hosts, at least one of them holding two or more members, when shared memory is
//! configured (`PHALANX_TRANSPORT` `auto` without `PHALANX_FAULTS`, or `shm`, and a
//! board). It is the default there;
//! `PHALANX_COLL_<NAME>=hier` names it, any other algorithm name avoids it. Every rank
//! derives the same plan from the same facts (the member list and each member's host):
//! * the hosts, in order of their first member; on each host a *leader*: the root when it
//!   lives there (rooted calls), else the host's first member;
//! * the members of a host meet on its shared-memory board
//!   ([`crate::coll::board`]), each phase under its own tag;
//! * the leaders run the network algorithm among themselves (multicast where available,
//!   else the point-to-point one) under the call's own context and sequence number, which
//!   no other member uses for anything.
//!
//! Broadcast: leaders broadcast from the root, then every leader broadcasts on its board.
//! All-gather varcount: each board gathers its members' blocks to the leader, packed at
//! their place in the whole (hosts in order); the leaders all-gather the hosts' packs;
//! every board broadcasts the whole, and each member copies the blocks to its layout.
//! Reduce: every board reduces to its leader, then the leaders reduce to the root (not
//! where the job's ranks share CPUs: [`supported`]).
//! All-reduce: board reduce to the leader, leaders all-reduce (chosen by size as a flat
//! all-reduce over the network is), board broadcast. Barrier:
//! the board gathers to the leader, the leaders barrier, the board releases. Reductions
//! therefore combine in (host, rank) order; with floating point the result can differ in
//! rounding from a flat reduction, as MPI allows.

use super::board::BoardCall;
use crate::coll::algos::{self, Shape};
use crate::coll::schedule::{Buf, Plan};
use crate::coll::varcount::{self as plans, Layout};
use crate::coll::{CollCall, CollKind};
use crate::engine::Engine;
use crate::error::{Error, Result};

/// Step numbers of a host phase run as a schedule (no board) start at phase × this, apart
/// from the leaders' network steps (which start at 0).
const LOCAL_STEPS: i32 = 1 << 16;

/// Broadcasts shorter than this stay flat when real multicast is available: one
/// multicast already reaches every rank in one hop, and the board step after the leaders'
/// hop costs more than it saves (measured with `bench/netns_bcast.py`, 3 hosts × 3 ranks).
const MCAST_BCAST_MIN: usize = 4096;

/// Does this call (`need` bytes) have a hierarchical form worth using? Not a reduction
/// where the job's ranks share CPUs (`cpus_shared`, the same on every rank; the caller
/// passes false when the environment forced an algorithm): there a
/// member's board partner is often descheduled, and the flat postal tree (wide at the
/// job's scaled λ) reaches the root in one step. Measured 2026-11-28 on 2 cores, 8 ranks
/// on 4 test hosts of two, shared memory inside each (`bench/thresholds.py reduce 8
/// 4:65536 PHALANX_COLL_REDUCE hier,tree`, medians of 3 alternating runs, µs): 4 B 84 /
/// 41, 1 KiB 79 / 39, 8 KiB 104 / 48, 64 KiB 207 / 166; with 2 test hosts of two and 3
/// of three the hierarchical form was ahead from 32 KiB (3 × 3: 91 / 103 at 32 KiB, 134
/// / 180 at 64 KiB; flat as fast or faster below): not settled. (The hierarchical all-reduce
/// and barrier stayed ahead there: all-reduce 1–64 KiB 204–657 µs against the flat
/// reduce + multicast's 222–1018, barrier 166–184 against 220–229.)
pub(crate) fn supported(kind: CollKind, need: usize, multicast: bool, cpus_shared: bool) -> bool {
    match kind {
        CollKind::Bcast => !multicast || need >= MCAST_BCAST_MIN,
        CollKind::Reduce => !cpus_shared,
        CollKind::Allreduce | CollKind::Barrier | CollKind::Allgatherv => true,
        _ => false,
    }
}

/// Do these hosts (one per member) call for the hierarchical form: several hosts, and a
/// host with more than one member?
pub(crate) fn worthwhile(hosts: &[u32]) -> bool {
    // Host ids are small dense indices (first appearance in the rank table): one pass,
    // on every blocking collective of a multi-host communicator.
    let mut seen = vec![false; hosts.iter().max().map_or(0, |&m| m as usize + 1)];
    let mut distinct = 0;
    for &h in hosts {
        if !std::mem::replace(&mut seen[h as usize], true) {
            distinct += 1;
        }
    }
    distinct > 1 && distinct < hosts.len()
}

/// One blocking hierarchical collective.
pub(crate) struct HierCall<'a> {
    pub call: &'a CollCall,
    pub kind: CollKind,
    /// Root (communicator rank); 0 for unrooted kinds.
    pub root: usize,
    /// World rank of each member.
    pub world: &'a [u32],
    /// Host of each member.
    pub hosts: &'a [u32],
    /// This member.
    pub me: usize,
    /// The blocks of an all-gather varcount (`None` for the others).
    pub layout: Option<&'a Layout>,
}

impl Engine {
    /// Runs a hierarchical collective (see the module docs).
    pub(crate) fn hier_collective(&mut self, hc: &HierCall<'_>) -> Result<()> {
        let (p, me) = (hc.world.len(), hc.me);
        self.stats.hier_collectives += 1;
        let rooted = matches!(hc.kind, CollKind::Bcast | CollKind::Reduce);
        let mut order: Vec<u32> = Vec::new();
        for &h in hc.hosts {
            if !order.contains(&h) {
                order.push(h);
            }
        }
        let leader_of = |h: u32| -> usize {
            if rooted && hc.hosts[hc.root] == h {
                hc.root
            } else {
                (0..p).find(|&i| hc.hosts[i] == h).unwrap_or(0)
            }
        };
        let leaders: Vec<usize> = order.iter().map(|&h| leader_of(h)).collect();
        let my_host = hc.hosts[me];
        let local: Vec<usize> = (0..p).filter(|&i| hc.hosts[i] == my_host).collect();
        let my_leader = leader_of(my_host);
        let local_world: Vec<u32> = local.iter().map(|&i| hc.world[i]).collect();
        let lme = local.iter().position(|&i| i == me).unwrap_or(0);
        let lleader = local.iter().position(|&i| i == my_leader).unwrap_or(0);
        let leader_world: Vec<u32> = leaders.iter().map(|&i| hc.world[i]).collect();
        let li = leaders.iter().position(|&i| i == me);
        let root_li = leaders.iter().position(|&i| i == hc.root).unwrap_or(0);
        let call = hc.call;
        let len = call.send.1.max(call.recv.1);
        let on_board = |e: &mut Engine,
                        kind,
                        send: (*const u8, usize),
                        recv: (*mut u8, usize),
                        phase: u8,
                        layout: Option<&Layout>|
         -> Result<()> {
            if local.len() < 2 {
                return Ok(());
            }
            let _phase = crate::trace::phase("host phase");
            if e.board.is_none() {
                // This host has no board (its segment could not be made and `auto` fell
                // back to UDP): the same phase as a schedule among the host's members,
                // its steps numbered apart from the leaders' and the other phase's.
                let s = Shape {
                    p: local.len(),
                    me: lme,
                    world: local_world.clone(),
                    packet: e.coll_packet(),
                    multicast: false,
                    board: 0,
                    board_slots: Vec::new(),
                    hosts: Vec::new(),
                };
                let n = send.1.max(recv.1);
                let base = match (kind, layout) {
                    (CollKind::Bcast, _) if n > 0 => {
                        algos::bcast_binomial(&s, lleader, Buf::Recv, n)
                    }
                    (CollKind::Reduce, _) => algos::reduce_binomial(&s, lleader, n),
                    (CollKind::Gatherv, Some(l)) => plans::gatherv(&s, lleader, send.1, &l.recv),
                    _ => algos::barrier_dissemination(&s),
                };
                let mut plan = Plan::default();
                plan.append(base, LOCAL_STEPS * i32::from(phase));
                return run_plan(e, call, send, recv, plan);
            }
            e.board_collective(&BoardCall {
                call: &with_buffers(call, send, recv),
                kind,
                root: lleader,
                world: &local_world,
                me: lme,
                phase: u64::from(phase),
                layout,
                slots: None,
            })
        };
        let shape = |e: &Engine, li: usize| Shape {
            p: leaders.len(),
            me: li,
            world: leader_world.clone(),
            packet: e.coll_packet(),
            multicast: e.coll_multicast(),
            board: 0,
            board_slots: Vec::new(),
            hosts: Vec::new(),
        };
        let network = |e: &mut Engine, send, recv, plan| {
            let _phase = crate::trace::phase("leaders' phase (network)");
            run_plan(e, call, send, recv, plan)
        };
        let (sp, rp) = (call.send.0, call.recv.0);
        match hc.kind {
            CollKind::Bcast => {
                let buf = (rp, len);
                if let (Some(li), true) = (li, leaders.len() > 1) {
                    let s = shape(self, li);
                    let plan = if s.multicast && s.p > 2 {
                        algos::bcast_mcast(&s, root_li, Buf::Recv, len)
                    } else {
                        algos::bcast_binomial(&s, root_li, Buf::Recv, len)
                    };
                    network(self, (rp as *const u8, len), buf, plan)?;
                }
                on_board(self, CollKind::Bcast, (rp as *const u8, len), buf, 1, None)?;
            }
            CollKind::Reduce => {
                // The leader's partial result: the root's receive buffer, or a temporary.
                let mut tmp = Vec::new();
                let partial: *mut u8 = if me == hc.root {
                    rp
                } else if me == my_leader {
                    tmp.resize(call.send.1, 0u8);
                    tmp.as_mut_ptr()
                } else {
                    std::ptr::null_mut()
                };
                let n = call.send.1;
                if local.len() > 1 {
                    on_board(self, CollKind::Reduce, (sp, n), (partial, n), 1, None)?;
                } else if me != hc.root {
                    // Alone on its host: the leader's partial is its own contribution.
                    tmp.copy_from_slice(send_slice(sp, n));
                } else {
                    copy(sp, rp, n);
                }
                if let (Some(li), true) = (li, leaders.len() > 1) {
                    let s = shape(self, li);
                    let plan = algos::reduce_binomial(&s, root_li, n);
                    let own = if me == hc.root {
                        // The root's partial must not be the buffer it receives into.
                        tmp = send_slice(rp, n).to_vec();
                        tmp.as_ptr()
                    } else {
                        tmp.as_ptr()
                    };
                    let into = if me == hc.root {
                        (rp, n)
                    } else {
                        (std::ptr::null_mut(), 0)
                    };
                    network(self, (own, n), into, plan)?;
                }
            }
            CollKind::Allreduce => {
                let n = call.send.1;
                if local.len() > 1 {
                    let into = if me == my_leader {
                        (rp, n)
                    } else {
                        (std::ptr::null_mut(), 0)
                    };
                    on_board(self, CollKind::Reduce, (sp, n), into, 1, None)?;
                } else {
                    copy(sp, rp, n);
                }
                if let (Some(li), true) = (li, leaders.len() > 1) {
                    let s = shape(self, li);
                    // The leaders choose by size as a flat all-reduce over the network
                    // does (its reduce + multicast broadcast from eight members aside:
                    // not measured among leaders); its point-to-point all-gather from
                    // eight members (`RSAG_MCAST_Q_MAX`) was measured with every rank on
                    // the same two cores, not among leaders on separate machines.
                    let esz = call.dt.size();
                    let plan = if n >= super::RSAG_MIN && algos::rsag_fits(s.p, n, esz) {
                        let k = crate::coll::algorithm::choices().allgather_k;
                        super::rsag_plan(&s, n, esz, usize::from(k))
                    } else {
                        algos::allreduce(&s, n)
                    };
                    let partial = send_slice(rp, n).to_vec();
                    network(self, (partial.as_ptr(), n), (rp, n), plan)?;
                }
                on_board(
                    self,
                    CollKind::Bcast,
                    (rp as *const u8, n),
                    (rp, n),
                    2,
                    None,
                )?;
            }
            CollKind::Barrier => {
                let none = (std::ptr::null::<u8>(), 0);
                let nowhere = (std::ptr::null_mut::<u8>(), 0);
                on_board(self, CollKind::Gather, none, nowhere, 1, None)?;
                if let (Some(li), true) = (li, leaders.len() > 1) {
                    let s = shape(self, li);
                    let plan = if s.multicast && s.p > 2 {
                        algos::barrier_mcast(&s)
                    } else {
                        algos::barrier_dissemination(&s)
                    };
                    network(self, none, nowhere, plan)?;
                }
                on_board(self, CollKind::Bcast, none, nowhere, 2, None)?;
            }
            CollKind::Allgatherv => {
                let lay = hc.layout.ok_or_else(|| {
                    Error::InvalidArg("all_gather_varcount without its blocks".into())
                })?;
                let blocks = &lay.recv;
                // Every block's place in the packed whole: hosts in order, members of a
                // host in rank order (every member knows every block).
                let (mut at, mut spans, mut total) = (vec![0usize; p], Vec::new(), 0);
                for &h in &order {
                    let start = total;
                    for i in (0..p).filter(|&i| hc.hosts[i] == h) {
                        at[i] = total;
                        total += blocks[i].1;
                    }
                    spans.push((start, total - start));
                }
                let mine = order.iter().position(|&h| h == my_host).unwrap_or(0);
                let (hstart, hlen) = spans[mine];
                let mut whole = vec![0u8; total];
                let wp = whole.as_mut_ptr();
                // 1. The host's blocks to its leader, packed at their place.
                let n = blocks[me].1;
                if local.len() > 1 {
                    let local_blocks = Layout {
                        send: Vec::new(),
                        recv: local
                            .iter()
                            .map(|&i| (at[i] - hstart, blocks[i].1))
                            .collect(),
                    };
                    let into = if me == my_leader {
                        // SAFETY: the host's span lies inside `whole`.
                        (unsafe { wp.add(hstart) }, hlen)
                    } else {
                        (std::ptr::null_mut(), 0)
                    };
                    let g = CollKind::Gatherv;
                    on_board(self, g, (sp, n), into, 1, Some(&local_blocks))?;
                } else {
                    // SAFETY: this member's block lies inside `whole`.
                    copy(sp, unsafe { wp.add(at[me]) }, n);
                }
                // 2. The leaders swap their hosts' packs.
                if let (Some(li), true) = (li, leaders.len() > 1) {
                    let s = shape(self, li);
                    let plan = plans::allgatherv(&s, &spans);
                    let own = whole[hstart..hstart + hlen].to_vec();
                    network(self, (own.as_ptr(), hlen), (wp, total), plan)?;
                }
                // 3. The whole to every member of the host; each block to its place.
                on_board(
                    self,
                    CollKind::Bcast,
                    (wp as *const u8, total),
                    (wp, total),
                    2,
                    None,
                )?;
                for (i, &(o, len)) in blocks.iter().enumerate() {
                    // SAFETY: block i lies inside `whole` and inside the receive buffer
                    // (the collective layer checked the layout).
                    copy(unsafe { wp.add(at[i]) }, unsafe { rp.add(o) }, len);
                }
            }
            _ => {
                return Err(Error::InvalidArg(format!(
                    "{:?} has no hierarchical form",
                    hc.kind
                )))
            }
        }
        Ok(())
    }
}

/// `call` with other buffers (one phase of it).
fn with_buffers(call: &CollCall, send: (*const u8, usize), recv: (*mut u8, usize)) -> CollCall {
    CollCall {
        send,
        recv,
        ..call.clone()
    }
}

/// Runs `plan` for a phase of `call` on the given buffers and waits for it.
fn run_plan(
    e: &mut Engine,
    call: &CollCall,
    send: (*const u8, usize),
    recv: (*mut u8, usize),
    plan: Plan,
) -> Result<()> {
    let id = e.start_collective(with_buffers(call, send, recv), plan)?;
    e.wait(id).map(|_| ())
}

/// `n` bytes at `p` (the collective layer checked the caller's buffer sizes).
fn send_slice<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if n == 0 || p.is_null() {
        return &[];
    }
    // SAFETY: a caller's buffer of at least `n` bytes that outlives the blocking call.
    unsafe { std::slice::from_raw_parts(p, n) }
}

/// Copies `n` bytes from `src` to `dst` unless they are the same buffer.
fn copy(src: *const u8, dst: *mut u8, n: usize) {
    if n > 0 && !src.is_null() && !dst.is_null() && !std::ptr::eq(src, dst) {
        // SAFETY: the caller's distinct send and receive buffers, both at least `n` bytes.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn worthwhile_needs_several_hosts_and_a_shared_one() {
        use super::worthwhile;
        assert!(worthwhile(&[0, 0, 1]));
        assert!(worthwhile(&[1, 0, 1, 2]));
        assert!(!worthwhile(&[0, 1, 2]), "one rank per host");
        assert!(!worthwhile(&[3, 3, 3]), "one host");
        assert!(!worthwhile(&[]));
    }
}
