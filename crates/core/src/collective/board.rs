//! Blocking collectives on the shared-memory board (one writer, many readers).
//!
//! Contract: the algorithm `shm` runs a *blocking* collective when every member of the
//! communicator is a rank of this host reached over shared memory, the host segment has a
//! board ([`phalanx_shm::Board`]) and the call's one publication per member fits a slot.
//! It is the default there; `PHALANX_COLL_<NAME>=shm` names it, any other algorithm name
//! avoids it. Nonblocking collectives never use it. The varcount collectives run here too
//! (`var`: blocks of any length, streamed).
//! * Each member publishes at most once per call, in its own slot, tagged with
//!   (context, sequence) and the call's signature; readers copy out of the writer's slot
//!   and release it. Root-to-all data (broadcast, scatter) is written once and read by all.
//! * Reductions combine the contributions in rank order on every rank, so every member of
//!   an all-reduce gets bit-identical results, whatever the operation.
//! * Waits progress the engine (point-to-point traffic and other collectives keep moving)
//!   and sleep like any other wait; a writer wakes the readers it published for, the last
//!   reader wakes the writer.
//! * A reader that finds another signature under its tag ends the call with
//!   [`Error::CollectiveMismatch`] naming both ranks; a waiter that has waited 200 ms
//!   compares what the other members announced for this call (and for its own previous,
//!   still unread publication) and reports a mismatch the same way instead of hanging.

use crate::coll::varcount::Layout;
use crate::coll::{describe, ops, CollCall, CollKind};
use crate::engine::{Engine, Waiting};
use crate::error::{Error, Result};
use phalanx_shm::Board;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Members of a board call by index (board slots, readers left): inline up to 16.
pub(crate) type Members = smallvec::SmallVec<[usize; 16]>;

mod var;

/// The size thresholds (`PHALANX_COLL_BOARD_*`, defaults in `coll::algorithm`):
/// all-reduces of at least `split` bytes (and at least two members) split the combining
/// work, each member reducing one block of every contribution; scatter and all-to-all
/// blocks of at least `pull` bytes move with one copy when every member may read the
/// others' memory (`board_pull`); calls whose largest publication exceeds `max` stay on
/// the point-to-point schedules (single-copy rendezvous), whatever the board size;
/// reductions of more than two contributions totalling at most `stash` bytes collect
/// them in any order first (no waiting on members in rank order), then combine in rank
/// order.
#[inline]
fn limits() -> &'static crate::coll::algorithm::BoardLimits {
    &crate::coll::algorithm::choices().board
}

/// How long a board wait goes before comparing what the other members announced.
const STALL_CHECK: Duration = Duration::from_millis(200);

/// One blocking collective for the board.
pub(crate) struct BoardCall<'a> {
    pub call: &'a CollCall,
    pub kind: CollKind,
    /// Root (communicator rank); 0 for unrooted kinds.
    pub root: usize,
    /// World rank of each member.
    pub world: &'a [u32],
    /// This member.
    pub me: usize,
    /// Phase of a call made of several board operations (hierarchical collectives): it
    /// keeps their tags apart. 0 for a plain board collective; at most 255. A whole word:
    /// read back right after the caller wrote it, a narrow store would stall the wide
    /// load of it (store forwarding).
    pub phase: u64,
    /// The blocks of a varcount call (`None` for the others).
    pub layout: Option<&'a Layout>,
    /// The board slot of each member, when the caller knows them (a communicator's
    /// shape keeps them); looked up here otherwise.
    pub slots: Option<&'a [usize]>,
}

/// The caller's buffers of a board call: byte ranges of them, empty when outside.
#[derive(Clone, Copy)]
struct Bytes {
    send: (*const u8, usize),
    recv: (*mut u8, usize),
}

impl Bytes {
    fn of(call: &CollCall) -> Bytes {
        Bytes {
            send: call.send,
            recv: call.recv,
        }
    }

    /// Bytes `o..o + len` of the send buffer (empty if they lie outside it).
    fn send(&self, o: usize, len: usize) -> &[u8] {
        let (p, n) = self.send;
        if len == 0 || o + len > n {
            return &[];
        }
        // SAFETY: inside the buffer, which the collective layer checked against the call
        // and which outlives the blocking call.
        unsafe { std::slice::from_raw_parts(p.add(o), len) }
    }

    /// Bytes `o..o + len` of the receive buffer (empty if they lie outside it). The
    /// callers hold one such slice at a time.
    #[allow(clippy::mut_from_ref)]
    fn recv(&self, o: usize, len: usize) -> &mut [u8] {
        let (p, n) = self.recv;
        if len == 0 || o + len > n {
            return &mut [];
        }
        // SAFETY: as for `send`; no other slice of these bytes is alive meanwhile.
        unsafe { std::slice::from_raw_parts_mut(p.add(o), len) }
    }
}

/// Per-call state shared by the steps.
struct Run<'a> {
    board: Rc<Board>,
    /// Board slot of each member.
    slots: &'a [usize],
    /// Tag of the publication at hand (a step or phase of the call).
    tag: u64,
    /// Tag of the call itself, as announced.
    base: u64,
    bc: &'a BoardCall<'a>,
    name: &'static str,
    /// Bytes this member reads of each publication in the step at hand (0: unknown):
    /// their data lines are fetched together with the header line (`Board::prefetch`).
    /// For scatter and all-to-all, one member's piece, at [`piece_index`] in the
    /// writer's packing.
    expect: usize,
}

/// Where member `me`'s piece lies in `writer`'s packed scatter or all-to-all publication
/// (the writer's own piece is left out), in pieces.
#[inline]
fn piece_index(writer: usize, me: usize) -> usize {
    me - usize::from(me > writer)
}

fn tag_of(ctx: u32, seq: u32) -> u64 {
    // Never 0 (the tag of a slot that has published nothing).
    ((u64::from(ctx) << 32) | u64::from(seq)).wrapping_add(1)
}

/// The tag of step `k` of a call: steps after the first flip bits of the context part,
/// and alternate the lowest bit so consecutive steps use alternate buffers.
fn step_tag(base: u64, k: usize) -> u64 {
    base ^ ((k as u64) << 48) ^ (k as u64 & 1)
}

fn untag(tag: u64) -> (u32, u32) {
    let t = tag.wrapping_sub(1);
    ((t >> 32) as u32, t as u32)
}

fn kind_name(k: CollKind) -> &'static str {
    match k {
        CollKind::Barrier => "barrier",
        CollKind::Bcast => "broadcast",
        CollKind::Gather => "gather",
        CollKind::Scatter => "scatter",
        CollKind::Allgather => "all_gather",
        CollKind::Reduce => "reduce",
        CollKind::Allreduce => "all_reduce",
        CollKind::Alltoall => "all_to_all",
        CollKind::Scan => "scan",
        CollKind::Split => "split",
        CollKind::Exscan => "exclusive_scan",
        CollKind::Gatherv => "gather_varcount",
        CollKind::Scatterv => "scatter_varcount",
        CollKind::Allgatherv => "all_gather_varcount",
        CollKind::Alltoallv => "all_to_all_varcount",
        CollKind::ReduceScatterBlock => "reduce_scatter_block",
    }
}

/// Can `kind` run on the board (`board` = bytes per buffer, 0 = no board; `need` = a
/// bound on the call's largest publication, which larger calls stream in steps — a
/// scatter's callers count p blocks, though it publishes p − 1; `p` members, whose
/// pieces of a scatter or all-to-all step must fit one buffer)?
pub(crate) fn fits(kind: CollKind, board: usize, need: usize, p: usize) -> bool {
    let pieces = matches!(
        kind,
        CollKind::Scatter
            | CollKind::Alltoall
            | CollKind::Scatterv
            | CollKind::Alltoallv
            | CollKind::ReduceScatterBlock
    );
    // Split and the exclusive scan run as schedules; the varcount collectives stream
    // blocks of any length (their callers pass `need` 0: members do not all know the
    // lengths, so the choice cannot depend on them).
    let scheduled = matches!(kind, CollKind::Split | CollKind::Exscan);
    board > 0 && !scheduled && need <= limits().max && (!pieces || p <= board)
}

#[cold]
fn no_board() -> Error {
    Error::InvalidArg("no shared-memory board".into())
}

/// The board slots of `world`'s members (looked up: the caller had none cached).
#[cold]
#[inline(never)]
fn slots_of(board: &Board, world: &[u32]) -> Result<Members> {
    world
        .iter()
        .map(|w| board.local_of(*w))
        .collect::<Option<Members>>()
        .ok_or_else(|| Error::InvalidArg("a member is not on this host's board".into()))
}

#[cold]
fn elements_too_large(kind: CollKind, esz: usize, cap: usize) -> Error {
    Error::InvalidArg(format!(
        "{}: elements of {esz} bytes exceed the shared-memory board's {cap}-byte buffers \
         (raise PHALANX_SHM_BOARD)",
        kind_name(kind)
    ))
}

#[cold]
fn not_on_board(kind: CollKind) -> Error {
    Error::InvalidArg(format!(
        "{} does not run on the shared-memory board",
        kind_name(kind)
    ))
}

impl Run<'_> {
    fn sig(&self) -> u64 {
        self.bc.call.sig
    }

    fn mismatch(&self, rank: u32, tag: u64, mine: u64, j: usize, theirs: u64) -> Error {
        let (context, seq) = untag(tag);
        Error::CollectiveMismatch {
            context,
            seq,
            local: rank,
            local_call: describe(mine),
            remote: self.bc.world[j],
            remote_call: describe(theirs),
        }
    }

    /// After a stall: does another member announce a different call under a tag we are
    /// in (this call, or our previous publication that is still unread)?
    fn stalled(&self, rank: u32) -> Option<Error> {
        let me = self.board.me();
        let mut ours = vec![(self.base, self.sig())];
        for t in self.board.published_tags(me) {
            if t != 0 && self.board.pending(me, t) > 0 {
                if let Some(p) = self.board.peek(me, t) {
                    ours.push((t, p.sig));
                }
            }
        }
        for (j, &slot) in self.slots.iter().enumerate() {
            if j == self.bc.me {
                continue;
            }
            for (t, s) in self.board.announced(slot) {
                for &(ot, os) in &ours {
                    if t == ot && t != 0 && s != os {
                        return Some(self.mismatch(rank, ot, os, j, s));
                    }
                }
            }
        }
        None
    }
}

/// The tag a rank announces when it enters Finalize (no call has it).
const FINALIZE_TAG: u64 = u64::MAX;

impl Engine {
    /// At Finalize: waits until every reader of this rank's board publications is done.
    /// When every local rank is in Finalize and one is still unread, the calls did not
    /// match (a reader skipped it): that is a collective mismatch, named from the other
    /// ranks' announcement history.
    pub(crate) fn board_finalize(&mut self) -> Result<()> {
        let Some(board) = self.board.clone() else {
            return Ok(());
        };
        board.announce(FINALIZE_TAG, 0);
        let me = board.me();
        let n = board.ranks().len();
        let unread = |b: &Board| {
            b.published_tags(me)
                .into_iter()
                .find(|&t| t != 0 && b.pending(me, t) > 0)
        };
        if unread(&board).is_none() {
            return Ok(());
        }
        let rank = self.rank;
        let mut polls = 0u32;
        let mut result = Ok(());
        let everyone_final = |b: &Board| {
            (0..n).all(|j| j == me || b.announced(j).first().map(|a| a.0) == Some(FINALIZE_TAG))
        };
        self.wait_until(Waiting::Finalize, |_| {
            let Some(t) = unread(&board) else {
                return true;
            };
            polls = polls.wrapping_add(1);
            if !polls.is_multiple_of(64) || !everyone_final(&board) {
                return false;
            }
            // Everyone is in Finalize: the readers will never come.
            let Some(mine) = board.peek(me, t) else {
                return true;
            };
            let (context, seq) = untag(t);
            let other = (0..n)
                .filter(|&j| j != me)
                .find_map(|j| {
                    board
                        .announced(j)
                        .into_iter()
                        .find(|a| a.0 == t && a.1 != mine.sig)
                        .map(|a| (board.ranks()[j], describe(a.1)))
                })
                .unwrap_or_else(|| {
                    let j = (0..n).find(|&j| j != me).unwrap_or(me);
                    (board.ranks()[j], "no matching call".into())
                });
            result = Err(Error::CollectiveMismatch {
                context,
                seq,
                local: rank,
                local_call: describe(mine.sig),
                remote: other.0,
                remote_call: other.1,
            });
            true
        })?;
        result
    }

    /// Runs a blocking collective on the board, in steps of at most one buffer each
    /// (large calls stream through the two buffers). The caller checked [`fits`] and that
    /// every member is on this host's board.
    pub(crate) fn board_collective(&mut self, bc: &BoardCall<'_>) -> Result<()> {
        let Some(board) = self.board.clone() else {
            return Err(no_board());
        };
        let looked_up: Members;
        let slots = match bc.slots {
            Some(s) => s,
            None => {
                looked_up = slots_of(&board, bc.world)?;
                &looked_up
            }
        };
        let call = bc.call;
        debug_assert!(bc.phase <= 0xff, "a board phase takes the tag's top byte");
        let base = tag_of(call.ctx, call.seq) ^ ((bc.phase & 0xff) << 56);
        board.announce(base, call.sig);
        self.stats.board_collectives += 1;
        if let Some(layout) = bc.layout {
            let mut run = Run {
                board,
                slots,
                tag: base,
                base,
                bc,
                name: kind_name(bc.kind),
                expect: 0,
            };
            return self.board_varcount(&mut run, layout);
        }
        let cap = board.capacity();
        let p = bc.world.len();
        let (slen, rlen) = (call.send.1, call.recv.1);
        // Bytes per member block (or of the vector), and bytes of it per step.
        let (block, chunk) = match bc.kind {
            CollKind::Barrier | CollKind::Split | CollKind::Exscan => (0, 1),
            CollKind::Gatherv
            | CollKind::Scatterv
            | CollKind::Allgatherv
            | CollKind::Alltoallv
            | CollKind::ReduceScatterBlock => (0, 1),
            CollKind::Bcast => (slen.max(rlen), cap),
            CollKind::Gather | CollKind::Allgather => (slen, cap),
            CollKind::Scatter => (rlen, (cap / p).max(1)),
            CollKind::Alltoall => (slen / p.max(1), (cap / p).max(1)),
            CollKind::Reduce | CollKind::Allreduce | CollKind::Scan => {
                let esz = call.dt.size().max(1);
                if esz > cap {
                    // The same on every rank: an error, not a hang.
                    return Err(elements_too_large(bc.kind, esz, cap));
                }
                (slen, cap / esz * esz)
            }
        };
        let steps = block.div_ceil(chunk).max(1);
        // Pull where streaming would make one rank copy everybody's data (the root of a
        // large scatter among many members; all-to-all only when asked: streaming measured
        // faster); broadcast, gather and all-gather stream (one copy in, readers copy out
        // of shared pages without system calls, and the writers of a gather need not wait
        // for the root).
        let pull = match limits().pull {
            Some(min) => matches!(bc.kind, CollKind::Scatter | CollKind::Alltoall) && block >= min,
            None => {
                bc.kind == CollKind::Scatter
                    && p >= 8
                    && block >= crate::coll::algorithm::SCATTER_PULL
            }
        } && self.single_copy_among(bc.world);
        let mut run = Run {
            board,
            slots,
            tag: base,
            base,
            bc,
            name: kind_name(bc.kind),
            expect: 0,
        };
        if pull {
            return self.board_pull(&run, block);
        }
        for k in 0..steps {
            let off = k * chunk;
            let n = chunk.min(block - off.min(block));
            run.tag = step_tag(base, k);
            run.expect = n;
            self.board_step(&run, off, n, block)?;
        }
        Ok(())
    }

    /// One step: bytes `off..off + n` of every block (`stride` bytes apart in the
    /// caller's buffers), or of the vector for reductions.
    fn board_step(&mut self, run: &Run<'_>, off: usize, n: usize, stride: usize) -> Result<()> {
        let bc = run.bc;
        let call = bc.call;
        let p = bc.world.len();
        let (me, root) = (bc.me, bc.root);
        let bytes = Bytes::of(call);
        let send = |o: usize, len: usize| bytes.send(o, len);
        let recv = |o: usize, len: usize| bytes.recv(o, len);
        let put = |dst: &mut [u8], src: &[u8]| {
            let k = dst.len().min(src.len());
            dst[..k].copy_from_slice(&src[..k]);
        };
        // The pieces of the other members' blocks (scatter, all-to-all), packed in member
        // order without the writer's own (which it copies itself): a small publication
        // stays small (p = 2, 32 B: inside the board's header line).
        let pieces = |buf: &mut [u8]| {
            for (i, j) in (0..p).filter(|&j| j != me).enumerate() {
                put(&mut buf[i * n..(i + 1) * n], send(j * stride + off, n));
            }
        };
        // Member `me`'s piece in `writer`'s publication.
        fn piece(d: &[u8], writer: usize, me: usize, n: usize) -> &[u8] {
            let lo = (piece_index(writer, me) * n).min(d.len());
            &d[lo..(lo + n).min(d.len())]
        }
        match bc.kind {
            CollKind::Barrier => {
                self.board_publish(run, 0, p - 1, |_| {})?;
                self.board_read_all(run, |_, _| {})?;
            }
            CollKind::Bcast => {
                if me == root {
                    self.board_publish(run, n, p - 1, |b| put(b, send(off, n)))?;
                } else {
                    self.board_read(run, root, |d| put(recv(off, n), d))?;
                }
            }
            CollKind::Gather => {
                if me != root {
                    self.board_publish(run, n, 1, |b| put(b, send(off, n)))?;
                } else {
                    put(recv(me * stride + off, n), send(off, n));
                    self.board_read_all(run, |j, d| put(recv(j * stride + off, n), d))?;
                }
            }
            CollKind::Scatter => {
                if me == root {
                    self.board_publish(run, (p - 1) * n, p - 1, pieces)?;
                    put(recv(off, n), send(me * stride + off, n));
                } else {
                    self.board_read(run, root, |d| put(recv(off, n), piece(d, root, me, n)))?;
                }
            }
            CollKind::Allgather => {
                self.board_publish(run, n, p - 1, |b| put(b, send(off, n)))?;
                put(recv(me * stride + off, n), send(off, n));
                self.board_read_all(run, |j, d| put(recv(j * stride + off, n), d))?;
            }
            CollKind::Alltoall => {
                self.board_publish(run, (p - 1) * n, p - 1, pieces)?;
                put(recv(me * stride + off, n), send(me * stride + off, n));
                self.board_read_all(run, |j, d| {
                    put(recv(j * stride + off, n), piece(d, j, me, n))
                })?;
            }
            CollKind::Reduce => {
                if me != root {
                    self.board_publish(run, n, 1, |b| put(b, send(off, n)))?;
                } else {
                    // Our own contribution: the send buffer itself, or a copy of it when
                    // the buffers overlap (compared as addresses, before any slice of
                    // them exists).
                    let (s, r) = (bytes.send.0 as usize, bytes.recv.0 as usize);
                    let kept: smallvec::SmallVec<[u8; 256]>;
                    let own = if s + bytes.send.1 <= r || r + bytes.recv.1 <= s {
                        send(off, n)
                    } else {
                        kept = send(off, n).into();
                        &kept
                    };
                    self.board_reduce_in_order(run, p, Some(own), 0..n, recv(off, n))?;
                }
            }
            CollKind::Allreduce => {
                self.board_publish(run, n, p - 1, |b| put(b, send(off, n)))?;
                let esz = call.dt.size().max(1);
                if n >= limits().split && p >= 2 && n / esz >= p {
                    // Reduce-scatter, then all-gather: member i combines element block i
                    // of every contribution, publishes it, and reads the others' blocks.
                    let elems = n / esz;
                    let seg = |j: usize| (j * elems / p * esz, (j + 1) * elems / p * esz);
                    let (lo, hi) = seg(me);
                    self.board_reduce_in_order(run, p, None, lo..hi, recv(off + lo, hi - lo))?;
                    let run2 = Run {
                        board: run.board.clone(),
                        slots: run.slots,
                        tag: !run.tag,
                        base: run.base,
                        bc,
                        name: run.name,
                        // About one block (the blocks are cut on element bounds).
                        expect: n / p,
                    };
                    self.board_publish(&run2, hi - lo, p - 1, |b| put(b, recv(off + lo, hi - lo)))?;
                    self.board_read_all(&run2, |j, d| {
                        let (lo, hi) = seg(j);
                        put(recv(off + lo, hi - lo), d)
                    })?;
                } else {
                    self.board_reduce_in_order(run, p, None, 0..n, recv(off, n))?;
                }
            }
            CollKind::Scan => {
                self.board_publish(run, n, p - 1 - me, |b| put(b, send(off, n)))?;
                self.board_reduce_in_order(run, me + 1, None, 0..n, recv(off, n))?;
            }
            CollKind::Split
            | CollKind::Exscan
            | CollKind::Gatherv
            | CollKind::Scatterv
            | CollKind::Allgatherv
            | CollKind::Alltoallv
            | CollKind::ReduceScatterBlock => return Err(not_on_board(bc.kind)),
        }
        Ok(())
    }

    /// Large data movement with one copy: members publish the address of their buffer
    /// and the others pull their bytes straight from it (`process_vm_readv`) before
    /// releasing the publication; a member whose buffer is read returns only when every
    /// reader is done with it.
    fn board_pull(&mut self, run: &Run<'_>, block: usize) -> Result<()> {
        let bc = run.bc;
        let call = bc.call;
        let p = bc.world.len();
        let (me, root) = (bc.me, bc.root);
        let (sp, slen) = call.send;
        let (rp, rlen) = call.recv;
        let pids: Vec<i32> = bc
            .world
            .iter()
            .map(|&w| self.single_copy_pids.get(w as usize).copied().unwrap_or(0))
            .collect();
        let mut failed: Option<Error> = None;
        // Pulls `len` bytes at address `a` of member j into the receive buffer at `dst`.
        let mut pull = |j: usize, a: u64, dst: usize, len: usize| {
            if len == 0 || dst + len > rlen {
                return;
            }
            // SAFETY: the range lies inside the caller's receive buffer (checked above),
            // which outlives this blocking call.
            let buf = unsafe { std::slice::from_raw_parts_mut(rp.add(dst), len) };
            if let Err(e) = phalanx_shm::read_remote(pids[j], a as usize, buf) {
                failed.get_or_insert(Error::Io(e));
            }
        };
        let addr_of = |d: &[u8]| -> u64 {
            let mut a = [0u8; 8];
            let n = d.len().min(8);
            a[..n].copy_from_slice(&d[..n]);
            u64::from_le_bytes(a)
        };
        let own = |dst: usize, src: usize| {
            if src + block <= slen && dst + block <= rlen && !std::ptr::eq(sp, rp) {
                // SAFETY: both ranges checked against the buffers just above; the send and
                // receive buffers are distinct (a shared and a mutable borrow in the API).
                unsafe { std::ptr::copy_nonoverlapping(sp.add(src), rp.add(dst), block) }
            }
        };
        let my_addr = (sp as u64).to_le_bytes();
        let publish = |e: &mut Engine, readers: usize| {
            e.board_publish(run, 8, readers, |b| b.copy_from_slice(&my_addr))
        };
        match bc.kind {
            CollKind::Bcast | CollKind::Scatter => {
                let at = if bc.kind == CollKind::Scatter {
                    me * block
                } else {
                    0
                };
                if me == root {
                    publish(self, p - 1)?;
                    if bc.kind == CollKind::Scatter {
                        own(0, at);
                    }
                    self.board_drain(run)?;
                } else {
                    self.board_read(run, root, |d| pull(root, addr_of(d) + at as u64, 0, block))?;
                }
            }
            CollKind::Gather => {
                if me != root {
                    publish(self, 1)?;
                    self.board_drain(run)?;
                } else {
                    own(me * block, 0);
                    self.board_read_all(run, |j, d| pull(j, addr_of(d), j * block, block))?;
                }
            }
            CollKind::Allgather => {
                publish(self, p - 1)?;
                own(me * block, 0);
                self.board_read_all(run, |j, d| pull(j, addr_of(d), j * block, block))?;
                self.board_drain(run)?;
            }
            CollKind::Alltoall => {
                publish(self, p - 1)?;
                own(me * block, me * block);
                let at = (me * block) as u64;
                self.board_read_all(run, |j, d| pull(j, addr_of(d) + at, j * block, block))?;
                self.board_drain(run)?;
            }
            _ => {
                return Err(Error::InvalidArg(format!(
                    "{} does not pull on the shared-memory board",
                    run.name
                )))
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until every reader of this call's publication is done (its buffer, which
    /// they read from, may then be reused by the caller).
    fn board_drain(&mut self, run: &Run<'_>) -> Result<()> {
        let (b, tag, me) = (&run.board, run.tag, run.bc.me);
        self.board_wait(run, me, |_| Ok(b.writable(tag)))
    }

    /// Waits (progressing the engine) until `ready` holds; after a stall, checks the other
    /// members' announcements for a mismatch.
    fn board_wait(
        &mut self,
        run: &Run<'_>,
        peer: usize,
        mut ready: impl FnMut(&mut Engine) -> Result<bool>,
    ) -> Result<()> {
        if ready(self)? {
            return Ok(());
        }
        let (ctx, seq) = (run.bc.call.ctx, run.bc.call.seq);
        let waiting = Waiting::Board {
            ctx,
            seq,
            kind: run.name,
            peer: run.bc.world[peer],
        };
        let mut polls = 0u32;
        let mut next_check: Option<Instant> = None;
        self.wait_until(waiting, |e| {
            match ready(e) {
                Ok(true) => return true,
                Ok(false) => {}
                Err(err) => {
                    e.coll.fail(err);
                    return false;
                }
            }
            // Idle anyway: learn which of our buffers the readers released, so the next
            // publication does not stall on reading that from their cores.
            run.board.refresh();
            polls = polls.saturating_add(1);
            if polls >= 4096 || polls.is_multiple_of(256) {
                let now = Instant::now();
                let due = *next_check.get_or_insert(now + STALL_CHECK);
                if now >= due {
                    next_check = Some(now + STALL_CHECK);
                    if let Some(err) = run.stalled(e.rank) {
                        e.coll.fail(err);
                    }
                }
            }
            false
        })
    }

    /// Publishes `len` bytes, written by `fill` into this rank's buffer, for `readers`
    /// readers (after the readers of the buffer's previous publication are done), and
    /// wakes the members that may wait for it.
    fn board_publish(
        &mut self,
        run: &Run<'_>,
        len: usize,
        readers: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<()> {
        let (b, tag) = (&run.board, run.tag);
        if !b.writable(tag) {
            let me = run.bc.me;
            self.board_wait(run, me, |_| Ok(b.writable(tag)))?;
        }
        let len = len.min(b.capacity());
        fill(b.own_data_len(tag, len));
        b.publish(tag, run.sig(), len, readers as u32);
        if readers > 0 {
            let me = self.rank;
            self.shm_wake(run.bc.world.iter().copied().filter(|&w| w != me));
        }
        Ok(())
    }

    /// Checks a publication's signature, hands it to `f` and releases it.
    fn board_take(
        &mut self,
        run: &Run<'_>,
        j: usize,
        f: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<bool> {
        let slot = run.slots[j];
        let at = match run.bc.kind {
            CollKind::Scatter | CollKind::Alltoall => piece_index(j, run.bc.me) * run.expect,
            _ => 0,
        };
        run.board.prefetch(slot, run.tag, at, run.expect);
        let Some(p) = run.board.peek(slot, run.tag) else {
            return Ok(false);
        };
        if p.sig != run.sig() {
            return Err(run.mismatch(self.rank, run.tag, run.sig(), j, p.sig));
        }
        f(j, p.data);
        if run.board.done(slot, run.tag) == 0 {
            self.shm_wake([run.bc.world[j]]);
        }
        Ok(true)
    }

    /// Waits for member `j`'s publication and takes it exactly once (a wait may evaluate
    /// its condition again after it held).
    fn board_take_once(
        &mut self,
        run: &Run<'_>,
        j: usize,
        f: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()> {
        let mut taken = false;
        self.board_wait(run, j, |e| {
            if !taken {
                taken = e.board_take(run, j, f)?;
            }
            Ok(taken)
        })
    }

    /// Reads member `j`'s publication of this call.
    fn board_read(&mut self, run: &Run<'_>, j: usize, f: impl FnOnce(&[u8])) -> Result<()> {
        let mut f = Some(f);
        let mut g = |_: usize, d: &[u8]| {
            if let Some(f) = f.take() {
                f(d)
            }
        };
        self.board_take_once(run, j, &mut g)
    }

    /// Reads every other member's publication, in whatever order they become ready.
    fn board_read_all(&mut self, run: &Run<'_>, f: impl FnMut(usize, &[u8])) -> Result<()> {
        let me = run.bc.me;
        let left: Members = (0..run.bc.world.len()).filter(|&j| j != me).collect();
        self.board_read_set(run, left, f)
    }

    /// Reads the publications of members `left`, in whatever order they become ready.
    fn board_read_set(
        &mut self,
        run: &Run<'_>,
        mut left: Members,
        mut f: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        while let Some(&first) = left.first() {
            self.board_wait(run, first, |e| {
                let mut i = 0;
                while i < left.len() {
                    if e.board_take(run, left[i], &mut f)? {
                        left.swap_remove(i);
                    } else {
                        i += 1;
                    }
                }
                Ok(left.is_empty())
            })?;
        }
        Ok(())
    }

    /// `acc = c0 op c1 op … op c(n-1)` over bytes `range` of the first `n` members'
    /// contributions, in rank order. This rank's contribution is `own`, or its own
    /// publication.
    fn board_reduce_in_order(
        &mut self,
        run: &Run<'_>,
        n: usize,
        own: Option<&[u8]>,
        range: std::ops::Range<usize>,
        acc: &mut [u8],
    ) -> Result<()> {
        let me = run.bc.me;
        let (op, dt) = (run.bc.call.op, &run.bc.call.dt);
        let op = op.ok_or_else(|| Error::InvalidOp("reduction without an operation".into()))?;
        let w = range.len();
        // With one other contribution there is no order to choose: the stash would only
        // add copies (measured: p = 2, 256 B reduce at the root 0.245 µs stashed, 0.18
        // in order).
        if n > 2 && n * w <= limits().stash {
            // Small: take the contributions as they come, then combine in rank order.
            // On the stack up to 1 KiB (small all-reduces: the common case).
            let mut stash: smallvec::SmallVec<[u8; 1024]> = smallvec::smallvec![0u8; n * w];
            let mut put = |j: usize, d: &[u8]| {
                let d = &d[range.start.min(d.len())..range.end.min(d.len())];
                stash[j * w..j * w + d.len()].copy_from_slice(d);
            };
            match own {
                Some(d) => put(me, d),
                None => {
                    let p = run
                        .board
                        .peek(run.slots[me], run.tag)
                        .ok_or_else(|| Error::InvalidArg("own board publication missing".into()))?;
                    put(me, p.data);
                }
            }
            let left = (0..n).filter(|&j| j != me).collect();
            self.board_read_set(run, left, &mut put)?;
            let k = w.min(acc.len());
            acc[..k].copy_from_slice(&stash[..k]);
            for j in 1..n {
                ops::apply(op, dt, &mut acc[..k], &stash[j * w..j * w + k])?;
            }
            return Ok(());
        }
        let mut failed: Option<Error> = None;
        let mut combine = |j: usize, d: &[u8]| {
            let d = &d[range.start.min(d.len())..range.end.min(d.len())];
            let n = d.len().min(acc.len());
            if j == 0 {
                acc[..n].copy_from_slice(&d[..n]);
            } else if let Err(e) = ops::apply(op, dt, &mut acc[..n], &d[..n]) {
                failed.get_or_insert(e);
            }
        };
        for j in 0..n {
            if j == me {
                match own {
                    Some(d) => combine(j, d),
                    None => {
                        let p = run.board.peek(run.slots[me], run.tag).ok_or_else(|| {
                            Error::InvalidArg("own board publication missing".into())
                        })?;
                        combine(j, p.data);
                    }
                }
            } else {
                let mut once = |j: usize, d: &[u8]| combine(j, d);
                self.board_take_once(run, j, &mut once)?;
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
