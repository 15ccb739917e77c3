//! The schedule executor: advances every active collective's [`Plan`] round by round,
//! driven by the engine through [`CollIo`] — sans-I/O, so this module never names the
//! engine (the engine depends on it, not the other way round).
//!
//! Contract: a round's sends go out (through [`CollIo::send`]) and its receives are
//! posted together; when every receive of the round has its data, the round's local
//! steps (copies, reductions) run and the next round starts. A finished schedule
//! completes its request through [`CollIo::complete`]. A round that waits longer than
//! [`PROBE_AFTER_NS`] sends one signature probe to the ranks it waits on, so calls where
//! every rank waits to receive (mismatched roots) still end in a mismatch error. Once a
//! mismatch is seen no schedule takes another step: the mismatched data is dropped, no
//! reduction or forwarding runs on it, and no request completes with a result.

use super::schedule::{CommOp, LocalOp, Plan, Region};
use super::{describe, ops, CollCall, CollState, Key, Posted, Sched, PROBE_STEP};
use crate::error::{Error, Result};
use crate::requests::ReqId;

/// A round waiting this long sends signature probes to the ranks it waits on.
const PROBE_AFTER_NS: u64 = 200_000_000;

/// What the executor needs from the engine.
pub(crate) trait CollIo {
    /// The engine's clock (ns).
    fn now(&self) -> u64;
    /// This rank (world).
    fn rank(&self) -> u32;
    /// Sends `data` as collective fragments of step `step` to the world ranks `to`.
    fn send(&mut self, to: &[u32], ctx: u32, seq: u32, step: i32, sig: u64, data: &[u8]);
    /// Completes collective request `id` with the bytes received, or an error.
    fn complete(&mut self, id: ReqId, r: Result<u64>);
}

impl CollState {
    /// Checks `call` against the signatures seen so far and builds its schedule; the
    /// caller then makes a request for it and [`launch`](Self::launch)es it.
    pub(crate) fn prepare(&mut self, rank: u32, call: CollCall, plan: Plan) -> Result<Sched> {
        let mut s = Sched {
            ctx: call.ctx,
            seq: call.seq,
            sig: call.sig,
            op: call.op,
            dt: call.dt,
            send: call.send,
            recv: call.recv,
            tmps: Vec::new(),
            plan,
            cur: 0,
            in_round: false,
            outstanding: 0,
            round_since: 0,
            probed: false,
        };
        s.check()?;
        if let Some(&(src, sig)) = self.early.get(&(call.ctx, call.seq)) {
            if sig != call.sig {
                return Err(CollState::mismatch(
                    rank, call.ctx, call.seq, call.sig, src, sig,
                ));
            }
        }
        // Temporaries once the call is known to go ahead (none taken for a refused one).
        s.tmps = s.plan.tmps.iter().map(|&n| self.spare.take(n)).collect();
        self.early.remove(&(call.ctx, call.seq));
        self.sigs.insert((call.ctx, call.seq), call.sig);
        // Keep a bounded history for checking late arrivals.
        if self.sigs.len() > 4096 {
            let (ctx, seq) = (call.ctx, call.seq);
            self.sigs
                .retain(|&(c, s), _| c != ctx || seq.wrapping_sub(s) < 1024);
        }
        Ok(s)
    }

    /// Starts schedule `s` as request `id`.
    pub(crate) fn launch(&mut self, io: &mut dyn CollIo, id: ReqId, s: Sched) {
        self.scheds.insert(id, s);
        self.active.push(id);
        self.advance(io, id);
    }

    /// No schedule is active.
    pub(crate) fn no_schedules(&self) -> bool {
        self.active.is_empty()
    }

    /// Advances every active schedule; returns whether any moved.
    pub(crate) fn progress(&mut self, io: &mut dyn CollIo) -> bool {
        if self.active.is_empty() {
            return false;
        }
        let ids = self.active.clone();
        let mut did = false;
        for id in ids {
            did |= self.advance(io, id);
        }
        did
    }

    fn advance(&mut self, io: &mut dyn CollIo, id: ReqId) -> bool {
        let mut did = false;
        let now_ns = io.now();
        loop {
            // A mismatch seen anywhere stops every schedule where it stands: no reduction
            // of foreign data, no forwarding, no result (the wait returns the error).
            if self.error.is_some() {
                return did;
            }
            let Some(s) = self.scheds.get_mut(&id) else {
                return did;
            };
            if s.outstanding > 0 {
                if !s.probed && now_ns.saturating_sub(s.round_since) > PROBE_AFTER_NS {
                    s.probed = true;
                    let (ctx, seq, sig) = (s.ctx, s.seq, s.sig);
                    let from = self.sources_of(id);
                    io.send(&from, ctx, seq, PROBE_STEP, sig, &[]);
                }
                return did;
            }
            did = true;
            if s.in_round {
                let round = s.cur;
                let local = s.plan.rounds[round].local.clone();
                for op in local {
                    if let Err(e) = run_local(s, &op) {
                        self.finish(io, id, Err(e));
                        return true;
                    }
                }
                s.cur += 1;
                s.in_round = false;
            }
            if s.cur == s.plan.rounds.len() {
                let bytes = s.recv.1 as u64;
                self.finish(io, id, Ok(bytes));
                return true;
            }
            s.in_round = true;
            s.probed = false;
            s.round_since = now_ns;
            let comm = s.plan.rounds[s.cur].comm.clone();
            let (ctx, seq, sig) = (s.ctx, s.seq, s.sig);
            for c in comm {
                match c {
                    CommOp::Send { to, step, from } => {
                        let Some(s) = self.scheds.get_mut(&id) else {
                            return true;
                        };
                        let p = s.ptr(from) as *const u8;
                        // SAFETY: the region was bounds-checked at start and the buffer
                        // outlives the collective.
                        let data = unsafe { std::slice::from_raw_parts(p, from.len) };
                        io.send(&to, ctx, seq, step, sig, data);
                    }
                    CommOp::Recv { from, step, into } => {
                        self.post(io.rank(), id, (from, ctx, seq, step), into)
                    }
                }
            }
        }
    }

    fn finish(&mut self, io: &mut dyn CollIo, id: ReqId, r: Result<u64>) {
        if let Some(s) = self.scheds.remove(&id) {
            // Receives still posted into its buffers go with it, so that nothing arriving
            // later writes into a buffer given back (none in practice: a schedule
            // finishes once every receive of its round is done).
            if s.outstanding > 0 {
                self.posted.retain(|_, p| p.sched != id);
            }
            self.spare.give(s.tmps);
        }
        self.active.retain(|&x| x != id);
        io.complete(id, r);
    }

    fn post(&mut self, rank: u32, id: ReqId, key: Key, into: Region) {
        let Some(s) = self.scheds.get_mut(&id) else {
            return;
        };
        let ptr = s.ptr(into);
        s.outstanding += 1;
        let mut posted = Posted {
            sched: id,
            ptr,
            len: into.len,
            got: 0,
            started: false,
        };
        if let Some(part) = self.unexpected.remove(&key) {
            self.unexpected_bytes = self.unexpected_bytes.saturating_sub(part.total as usize);
            let mine = self.scheds.get(&id).map_or(part.sig, |s| s.sig);
            // A mismatched call's data is dropped, never copied (see `advance`).
            if part.sig != mine {
                let e = CollState::mismatch(rank, key.1, key.2, mine, key.0, part.sig);
                self.error.get_or_insert(e);
                return;
            } else if part.total as usize != into.len {
                let e = self.size_mismatch(rank, key, into.len, part.total);
                self.error.get_or_insert(e);
                return;
            }
            let n = part.data.len().min(into.len);
            // SAFETY: `ptr` addresses `into.len` bytes of a checked region.
            unsafe { std::ptr::copy_nonoverlapping(part.data.as_ptr(), ptr, n) };
            posted.got = part.data.len();
            posted.started = true;
            if part.data.len() as u64 >= part.total {
                self.recv_done(id);
                return;
            }
        }
        self.posted.insert(key, posted);
    }

    /// The ranks schedule `id` waits for data from, ascending, each once.
    pub(crate) fn sources_of(&self, id: ReqId) -> Vec<u32> {
        let mut from: Vec<u32> = self
            .posted
            .iter()
            .filter(|(_, p)| p.sched == id)
            .map(|(k, _)| k.0)
            .collect();
        from.sort_unstable();
        from.dedup();
        from
    }

    /// What collective `id` waits for (for the launcher's timeout report).
    pub(crate) fn describe_wait(&self, id: ReqId) -> String {
        let Some(s) = self.scheds.get(&id) else {
            return "in a collective that just finished".into();
        };
        let from = self.sources_of(id);
        format!(
            "in {} (communicator {:#x}, call #{}), round {} of {}, waiting for data from ranks {:?}",
            describe(s.sig),
            s.ctx,
            s.seq,
            s.cur + 1,
            s.plan.rounds.len(),
            from
        )
    }

    /// Error for collective data nobody consumed (checked at Finalize).
    pub(crate) fn leftover(&self, rank: u32) -> Option<Error> {
        let (&(src, ctx, seq, _), _) = self.unexpected.iter().next()?;
        let remote = self.early.get(&(ctx, seq)).map_or(0, |e| e.1);
        let local = self.sigs.get(&(ctx, seq)).copied();
        Some(Error::CollectiveMismatch {
            context: ctx,
            seq,
            local: rank,
            local_call: local.map_or("no matching collective call".into(), describe),
            remote: src,
            remote_call: if remote == 0 {
                "a collective whose data was never consumed".into()
            } else {
                describe(remote)
            },
        })
    }
}

fn run_local(s: &mut Sched, op: &LocalOp) -> Result<()> {
    match *op {
        LocalOp::Copy { from, to } => {
            let (a, b) = (s.ptr(from) as *const u8, s.ptr(to));
            if from.len > 0 && !std::ptr::eq(a, b) {
                // SAFETY: both regions were bounds-checked; `copy` allows overlap.
                unsafe { std::ptr::copy(a, b, from.len.min(to.len)) };
            }
            Ok(())
        }
        LocalOp::Reduce { from, into } => {
            let Some(kind) = s.op else {
                return Err(Error::InvalidOp(
                    "reduction step without an operation".into(),
                ));
            };
            let dt = s.dt.clone();
            let a = s.ptr(from) as *const u8;
            let b = s.ptr(into);
            // SAFETY: bounds-checked regions of distinct buffers (algorithms never
            // reduce a region into itself).
            let (src, acc) = unsafe {
                (
                    std::slice::from_raw_parts(a, from.len),
                    std::slice::from_raw_parts_mut(b, into.len),
                )
            };
            ops::apply(kind, &dt, acc, src)
        }
    }
}
