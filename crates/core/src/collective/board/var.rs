//! The varcount collectives on the shared-memory board: `MPI_Gatherv`, `MPI_Scatterv`,
//! `MPI_Allgatherv`, `MPI_Alltoallv` and `MPI_Reduce_scatter_block`.
//!
//! Contract: a member knows only its own blocks' lengths (and, at a root or in an
//! all-gather or all-to-all, the blocks of the others it reads or writes), so nothing
//! here depends on the other members' lengths beyond what MPI makes both ends agree on:
//! a block of `n` bytes travels in `⌈n / c⌉` steps of `c` bytes, the writer and its
//! reader counting the same steps from the same length. Gathers and all-gathers stream
//! each member's block through its own slot (`c` = a whole buffer); scatters,
//! all-to-alls and the reduce-scatter publish, per step, one piece of `c = buffer / p`
//! bytes for every reader at `reader × c`. A step is published for exactly the members
//! that read it (nothing when no one does), each member runs steps in order (publish,
//! then read), so a member waits only on members at the same or a later step: no
//! deadlock, whatever the lengths. Reductions combine in rank order on every member.

use super::{step_tag, Run};
use crate::coll::varcount::Layout;
use crate::coll::CollKind;
use crate::engine::Engine;
use crate::error::{Error, Result};

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
        let (sp, slen) = call.send;
        let (rp, rlen) = call.recv;
        // SAFETY (for the slices below): the collective layer checked every block against
        // its buffer (every range below lies inside them, else it is empty), and the
        // caller's buffers outlive this blocking call.
        let send = |o: usize, len: usize| -> &[u8] {
            if len == 0 || o + len > slen {
                return &[];
            }
            unsafe { std::slice::from_raw_parts(sp.add(o), len) }
        };
        let recv = |o: usize, len: usize| -> &mut [u8] {
            if len == 0 || o + len > rlen {
                return &mut [];
            }
            unsafe { std::slice::from_raw_parts_mut(rp.add(o), len) }
        };
        let name = run.name;
        let block = |blocks: &[(usize, usize)], j: usize| -> Result<(usize, usize)> {
            blocks
                .get(j)
                .copied()
                .ok_or_else(|| Error::InvalidArg(format!("{name}: no block for member {j}")))
        };
        let others = |me: usize| (0..p).filter(move |&j| j != me);
        match bc.kind {
            CollKind::Gatherv if me != root => {
                for k in 0..steps(slen, cap) {
                    run.tag = step_tag(run.base, k);
                    let n = step_len(slen, cap, k);
                    self.board_publish(run, n, 1, |b| put(b, send(k * cap, n)))?;
                }
            }
            CollKind::Gatherv => {
                let (o, n) = block(&layout.recv, me)?;
                put(recv(o, n), send(0, n));
                let last = others(me).map(|j| steps(layout.recv[j].1, cap)).max();
                for k in 0..last.unwrap_or(0) {
                    run.tag = step_tag(run.base, k);
                    let set = others(me)
                        .filter(|&j| k < steps(layout.recv[j].1, cap))
                        .collect();
                    self.board_read_set(run, set, |j, d| {
                        let (o, n) = layout.recv[j];
                        put(recv(o + k * cap, step_len(n, cap, k)), d)
                    })?;
                }
            }
            CollKind::Allgatherv => {
                let (o, n) = block(&layout.recv, me)?;
                put(recv(o, n), send(0, n));
                let own = steps(slen, cap);
                let last = (0..p).map(|j| steps(layout.recv[j].1, cap)).max();
                for k in 0..last.unwrap_or(0).max(own) {
                    run.tag = step_tag(run.base, k);
                    if k < own {
                        let n = step_len(slen, cap, k);
                        self.board_publish(run, n, p - 1, |b| put(b, send(k * cap, n)))?;
                    }
                    let set = others(me)
                        .filter(|&j| k < steps(layout.recv[j].1, cap))
                        .collect();
                    self.board_read_set(run, set, |j, d| {
                        let (o, n) = layout.recv[j];
                        put(recv(o + k * cap, step_len(n, cap, k)), d)
                    })?;
                }
            }
            CollKind::Scatterv if me != root => {
                let c = (cap / p).max(1);
                for k in 0..steps(rlen, c) {
                    run.tag = step_tag(run.base, k);
                    let n = step_len(rlen, c, k);
                    self.board_read(run, root, |d| put(recv(k * c, n), piece(d, me, c, n)))?;
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
                let c = (cap / p).max(1);
                let out = others(me).map(|j| steps(layout.send[j].1, c)).max();
                let inn = others(me).map(|j| steps(layout.recv[j].1, c)).max();
                let (out, inn) = (out.unwrap_or(0), inn.unwrap_or(0));
                for k in 0..out.max(inn) {
                    run.tag = step_tag(run.base, k);
                    if k < out {
                        self.board_pieces_step(run, &layout.send, send, c, k)?;
                    }
                    let set = others(me)
                        .filter(|&j| k < steps(layout.recv[j].1, c))
                        .collect();
                    self.board_read_set(run, set, |j, d| {
                        let (o, n) = layout.recv[j];
                        let m = step_len(n, c, k);
                        put(recv(o + k * c, m), piece(d, me, c, m))
                    })?;
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
        let c = (run.board.capacity() / p).max(1);
        let last = (0..p)
            .filter(|&j| j != me)
            .map(|j| steps(blocks[j].1, c))
            .max();
        for k in 0..last.unwrap_or(0) {
            run.tag = step_tag(run.base, k);
            self.board_pieces_step(run, blocks, send, c, k)?;
        }
        Ok(())
    }

    /// Publishes step `k` of the other members' blocks (pieces of `c` bytes, reader j's
    /// at j × c) for the members that still read at this step; nothing if none does.
    fn board_pieces_step<'b>(
        &mut self,
        run: &Run<'_>,
        blocks: &[(usize, usize)],
        send: impl Fn(usize, usize) -> &'b [u8],
        c: usize,
        k: usize,
    ) -> Result<()> {
        let me = run.bc.me;
        let readers = (0..blocks.len())
            .filter(|&j| j != me && k < steps(blocks[j].1, c))
            .count();
        if readers == 0 {
            return Ok(());
        }
        self.board_pieces_step_all(run, blocks, send, c, k, readers)
    }

    /// Publishes step `k` of every block, this member's own included, for `readers`.
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
