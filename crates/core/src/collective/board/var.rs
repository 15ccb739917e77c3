//! The varcount collectives on the shared-memory board: `MPI_Gatherv`, `MPI_Scatterv`,
//! `MPI_Allgatherv`, `MPI_Alltoallv` and `MPI_Reduce_scatter_block`.
//!
//! Contract: a member knows only its own blocks' lengths (and, at a root or in an
//! all-gather or all-to-all, the blocks of the others it reads or writes), so nothing
//! here depends on the other members' lengths beyond what MPI makes both ends agree on:
//! a block of `n` bytes travels in `⌈n / c⌉` steps of `c` bytes, the writer and its
//! reader counting the same steps from the same length. Gathers and all-gathers stream
//! each member's block through its own slot (`c` = a whole buffer less a header);
//! scatters and all-to-alls publish, per step, one piece for every reader in a
//! `buffer / p`-byte cell at `reader × cell` (a header, then `c` bytes), and the
//! reduce-scatter one `c`-byte piece per member (`c` = whole elements of `buffer / p`).
//! A step is published for exactly the members that read it (nothing when no one does),
//! each member runs steps in order (publish, then read), so a member waits only on
//! members at the same or a later step: no deadlock while the lengths agree. Every
//! piece of a gather, scatter or all-to-all carries its writer's whole block length
//! ([`HEADER`]): a reader whose count disagrees ends the call with an error (truncation
//! when the writer sends more) instead of hanging or truncating silently — except when
//! the reader expects nothing at all (it reads no step). Reductions combine in rank
//! order on every member.

use super::{step_tag, Bytes, Run};
use crate::coll::varcount::Layout;
use crate::coll::CollKind;
use crate::engine::Engine;
use crate::error::{Error, Result};

/// Bytes before each piece's data: the writer's whole block length (`u64`, little
/// endian).
pub(crate) const HEADER: usize = 8;

fn header(b: &mut [u8], total: usize) {
    if b.len() >= HEADER {
        b[..HEADER].copy_from_slice(&(total as u64).to_le_bytes());
    }
}

/// The writer's block length in a piece (header and data), and the data.
fn unheader(d: &[u8]) -> (u64, &[u8]) {
    if d.len() < HEADER {
        return (u64::MAX, &[]);
    }
    let mut h = [0u8; HEADER];
    h.copy_from_slice(&d[..HEADER]);
    (u64::from_le_bytes(h), &d[HEADER..])
}

/// The error of a block whose writer's length (`theirs`) differs from the reader's
/// count (`mine`), both in bytes.
fn disagree(name: &str, world: u32, theirs: u64, mine: usize) -> Error {
    if theirs > mine as u64 {
        Error::Truncated {
            len: theirs,
            cap: mine as u64,
            source_rank: world as i32,
        }
    } else {
        Error::InvalidArg(format!(
            "{name}: rank {world} sends {theirs} bytes to a block of {mine}"
        ))
    }
}

/// Steps of `c` bytes in a block of `len` bytes.
fn steps(len: usize, c: usize) -> usize {
    len.div_ceil(c.max(1))
}

/// Bytes of step `k` of a block of `len` bytes.
fn step_len(len: usize, c: usize, k: usize) -> usize {
    c.min(len.saturating_sub(k * c))
}

fn put(dst: &mut [u8], src: &[u8]) {
    let k = dst.len().min(src.len());
    dst[..k].copy_from_slice(&src[..k]);
}

/// Reader `j`'s piece (of `n` bytes) in a publication of pieces `c` bytes apart.
fn piece(d: &[u8], j: usize, c: usize, n: usize) -> &[u8] {
    let lo = (j * c).min(d.len());
    &d[lo..(lo + n).min(d.len())]
}

impl Engine {
    /// Runs a varcount collective (the module docs) with the blocks of `layout`.
    pub(super) fn board_varcount(&mut self, run: &mut Run<'_>, layout: &Layout) -> Result<()> {
        let bc = run.bc;
        let call = bc.call;
        let p = bc.world.len();
        let (me, root) = (bc.me, bc.root);
        let cap = run.board.capacity();
        let (slen, rlen) = (call.send.1, call.recv.1);
        // The collective layer checked every block against its buffer.
        let bytes = Bytes::of(call);
        let send = |o: usize, len: usize| bytes.send(o, len);
        let recv = |o: usize, len: usize| bytes.recv(o, len);
        let name = run.name;
        let block = |blocks: &[(usize, usize)], j: usize| -> Result<(usize, usize)> {
            blocks
                .get(j)
                .copied()
                .ok_or_else(|| Error::InvalidArg(format!("{name}: no block for member {j}")))
        };
        let others = |me: usize| (0..p).filter(move |&j| j != me);
        // The first reader error of a step (kept until its reads are done).
        let bad: std::cell::Cell<Option<Error>> = std::cell::Cell::new(None);
        let world = bc.world;
        let check = |j: usize, theirs: u64, mine: usize| {
            if theirs != mine as u64 {
                let first = bad.take();
                bad.set(Some(
                    first.unwrap_or_else(|| disagree(name, world[j], theirs, mine)),
                ));
            }
        };
        // Data bytes per step of a gather's slot, and per piece of a scatter's cell.
        let gc = cap.saturating_sub(HEADER).max(1);
        let cell = cap / p;
        let pc = cell.saturating_sub(HEADER).max(1);
        match bc.kind {
            CollKind::Gatherv | CollKind::Allgatherv => {
                // A gather's root reads and does not publish; its other members publish
                // for the root alone; an all-gather's members do both.
                let all = bc.kind == CollKind::Allgatherv;
                let reads = all || me == root;
                let own = if reads && !all { 0 } else { steps(slen, gc) };
                let readers = if all { p - 1 } else { 1 };
                let mut last = 0;
                if reads {
                    let (o, n) = block(&layout.recv, me)?;
                    put(recv(o, n), send(0, n));
                    last = others(me)
                        .map(|j| steps(layout.recv[j].1, gc))
                        .max()
                        .unwrap_or(0);
                }
                for k in 0..last.max(own) {
                    run.tag = step_tag(run.base, k);
                    if k < own {
                        let n = step_len(slen, gc, k);
                        self.board_publish(run, HEADER + n, readers, |b| {
                            header(b, slen);
                            put(&mut b[HEADER..], send(k * gc, n))
                        })?;
                    }
                    if !reads {
                        continue;
                    }
                    let set = others(me)
                        .filter(|&j| k < steps(layout.recv[j].1, gc))
                        .collect();
                    self.board_read_set(run, set, |j, d| {
                        let (o, n) = layout.recv[j];
                        let (theirs, d) = unheader(d);
                        check(j, theirs, n);
                        put(recv(o + k * gc, step_len(n, gc, k)), d)
                    })?;
                    if let Some(e) = bad.take() {
                        return Err(e);
                    }
                }
            }
            CollKind::Scatterv if me != root => {
                for k in 0..steps(rlen, pc) {
                    run.tag = step_tag(run.base, k);
                    let n = step_len(rlen, pc, k);
                    self.board_read(run, root, |d| {
                        let (theirs, d) = unheader(piece(d, me, cell, HEADER + n));
                        check(root, theirs, rlen);
                        put(recv(k * pc, n), d)
                    })?;
                    if let Some(e) = bad.take() {
                        return Err(e);
                    }
                }
            }
            CollKind::Scatterv => {
                let (o, n) = block(&layout.send, me)?;
                put(recv(0, n), send(o, n));
                self.board_pieces(run, &layout.send, send)?;
            }
            CollKind::Alltoallv => {
                let (so, sn) = block(&layout.send, me)?;
                let (ro, _) = block(&layout.recv, me)?;
                put(recv(ro, sn), send(so, sn));
                let out = others(me).map(|j| steps(layout.send[j].1, pc)).max();
                let inn = others(me).map(|j| steps(layout.recv[j].1, pc)).max();
                let (out, inn) = (out.unwrap_or(0), inn.unwrap_or(0));
                for k in 0..out.max(inn) {
                    run.tag = step_tag(run.base, k);
                    if k < out {
                        self.board_pieces_step(run, &layout.send, send, k)?;
                    }
                    let set = others(me)
                        .filter(|&j| k < steps(layout.recv[j].1, pc))
                        .collect();
                    self.board_read_set(run, set, |j, d| {
                        let (o, n) = layout.recv[j];
                        let m = step_len(n, pc, k);
                        let (theirs, d) = unheader(piece(d, me, cell, HEADER + m));
                        check(j, theirs, n);
                        put(recv(o + k * pc, m), d)
                    })?;
                    if let Some(e) = bad.take() {
                        return Err(e);
                    }
                }
            }
            CollKind::ReduceScatterBlock => {
                // Block j of every member's vector is member j's result.
                let esz = call.dt.size().max(1);
                let c = cap / p / esz * esz;
                if c == 0 {
                    // Every member computes the same: an error, not a hang.
                    return Err(Error::InvalidArg(format!(
                        "{}: {p} elements of {esz} bytes exceed the shared-memory board's \
                         {cap}-byte buffers",
                        run.name
                    )));
                }
                let blocks: Vec<(usize, usize)> = (0..p).map(|j| (j * rlen, rlen)).collect();
                for k in 0..steps(rlen, c) {
                    run.tag = step_tag(run.base, k);
                    // Our own piece too: the reduction reads it from our publication.
                    self.board_pieces_step_all(run, &blocks, send, c, k, p - 1)?;
                    let n = step_len(rlen, c, k);
                    let range = me * c..me * c + n;
                    self.board_reduce_in_order(run, p, None, range, recv(k * c, n))?;
                }
            }
            _ => {
                return Err(Error::InvalidArg(format!(
                    "{} is not a varcount collective",
                    run.name
                )))
            }
        }
        Ok(())
    }

    /// A scatter's root: publishes every other member's block in steps of pieces.
    fn board_pieces<'b>(
        &mut self,
        run: &mut Run<'_>,
        blocks: &[(usize, usize)],
        send: impl Fn(usize, usize) -> &'b [u8] + Copy,
    ) -> Result<()> {
        let (p, me) = (run.bc.world.len(), run.bc.me);
        let pc = (run.board.capacity() / p).saturating_sub(HEADER).max(1);
        let last = (0..p)
            .filter(|&j| j != me)
            .map(|j| steps(blocks[j].1, pc))
            .max();
        for k in 0..last.unwrap_or(0) {
            run.tag = step_tag(run.base, k);
            self.board_pieces_step(run, blocks, send, k)?;
        }
        Ok(())
    }

    /// Publishes step `k` of the other members' blocks (reader j's piece, a header and
    /// its data, in the cell at j × buffer / p) for the members that still read at this
    /// step; nothing if none does.
    fn board_pieces_step<'b>(
        &mut self,
        run: &Run<'_>,
        blocks: &[(usize, usize)],
        send: impl Fn(usize, usize) -> &'b [u8],
        k: usize,
    ) -> Result<()> {
        let (p, me) = (blocks.len(), run.bc.me);
        let cell = run.board.capacity() / p.max(1);
        let pc = cell.saturating_sub(HEADER).max(1);
        let readers = (0..p)
            .filter(|&j| j != me && k < steps(blocks[j].1, pc))
            .count();
        if readers == 0 {
            return Ok(());
        }
        self.board_publish(run, p * cell, readers, |b| {
            for (j, &(o, n)) in blocks.iter().enumerate() {
                let m = step_len(n, pc, k);
                if j != me && m > 0 && (j + 1) * cell <= b.len() {
                    let c = &mut b[j * cell..j * cell + HEADER + m];
                    header(c, n);
                    put(&mut c[HEADER..], send(o + k * pc, m));
                }
            }
        })
    }

    /// Publishes step `k` of every block, this member's own included (`c` bytes per
    /// piece at `j × c`, no header), for `readers`: the reduce-scatter.
    fn board_pieces_step_all<'b>(
        &mut self,
        run: &Run<'_>,
        blocks: &[(usize, usize)],
        send: impl Fn(usize, usize) -> &'b [u8],
        c: usize,
        k: usize,
        readers: usize,
    ) -> Result<()> {
        let p = blocks.len();
        self.board_publish(run, p * c, readers, |b| {
            for (j, &(o, n)) in blocks.iter().enumerate() {
                let m = step_len(n, c, k);
                if m > 0 && (j + 1) * c <= b.len() {
                    put(&mut b[j * c..j * c + m], send(o + k * c, m));
                }
            }
        })
    }
}
