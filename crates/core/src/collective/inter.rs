//! Making, duplicating, splitting, merging and synchronizing intercommunicators
//! (`MPI_Intercomm_create`, `MPI_Comm_dup`, `MPI_Comm_split`/`MPI_Comm_create` on an
//! intercommunicator, `MPI_Intercomm_merge`, `MPI_Barrier` on an intercommunicator), and
//! spawning processes (`MPI_Comm_spawn(_multiple)`,
//! `MPI_Comm_get_parent`).
//!
//! Contract: every operation here is collective over both groups (create: over the local
//! communicator, with the two leaders exchanging over the peer communicator). Only the
//! leaders talk across: [`create_intercommunicator`] swaps each group's members and
//! private context over the peer communicator with the caller's tag; merge and barrier
//! swap one word over the intercommunicator's internal context; each leader then
//! broadcasts what it learned on its local communicator. A spawn is collective over the
//! root's communicator: the root asks the launcher, broadcasts the outcome, and every
//! member reaches the new ranks; the new processes find the parents' group and the
//! intercommunicator's context in their environment (`PHALANX_SPAWNED`). Every member of both groups
//! derives new contexts in the same order, so all agree without further messages. A
//! group that overlaps the other, a leader out of range or an intercommunicator call on
//! an ordinary communicator is an error.

use crate::datatype::{Buffer, BufferMut};
use crate::error::{Error, MpiError};
use crate::point_to_point::{Destination, Source};
use crate::request::scope;
use crate::topology::{
    Color, Communicator, InterCommunicator, MergeOrder, Process, SimpleCommunicator,
};
use crate::{Rank, Tag};
use phalanx_boot::{SpawnCommand, SpawnRequest, MAX_SPAWN};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;

use super::{CommunicatorCollectives, Root};

/// Tags on the internal context: the leaders' word (merge, barrier) and the
/// intercommunicator broadcast.
const TAG_WORD: Tag = 0;
pub(super) const TAG_BCAST: Tag = 1;
/// Tag of the leaders' exchange of split tables.
const TAG_SPLIT: Tag = 2;

/// Most members a group may have (bounds the leaders' exchange).
const MAX_GROUP: usize = 1 << 20;

/// The intercommunicator between the members of `local` and the group whose leader is
/// rank `remote_leader` of `peer` (`MPI_Intercomm_create`). Collective over `local`;
/// `local_leader` (a rank of `local`) and the remote group's leader exchange their
/// groups over `peer` with `tag`. `peer` and `remote_leader` matter at the leader only.
pub fn create_intercommunicator(
    local: &SimpleCommunicator,
    local_leader: Rank,
    peer: &SimpleCommunicator,
    remote_leader: Rank,
    tag: Tag,
) -> Result<InterCommunicator, Error> {
    if local.inter {
        return Err(Error::InvalidComm(
            "the local communicator of MPI_Intercomm_create is an intercommunicator".into(),
        ));
    }
    if !(0..local.size).contains(&local_leader) {
        return Err(Error::InvalidRank {
            rank: local_leader,
            size: local.size as usize,
        });
    }
    let mine: Vec<u32> = (0..local.size).map(|r| local.world_rank(r)).collect();
    let private = local.duplicate();
    // At the leader: [remote context, remote members...]; elsewhere filled by broadcast.
    let mut answer: Vec<u32> = Vec::new();
    let mut problem = 0u32;
    if local.rank == local_leader {
        match leaders_exchange(&private, &mine, peer, remote_leader, tag) {
            Ok(v) => answer = v,
            Err(e) => {
                // Tell the group before failing, so no member waits for nothing.
                problem = 1;
                let mut head = [problem, 0];
                private
                    .process_at_rank(local_leader)
                    .broadcast_into(&mut head[..]);
                return Err(e);
            }
        }
    }
    let mut head = [problem, answer.len() as u32];
    private
        .process_at_rank(local_leader)
        .broadcast_into(&mut head[..]);
    if head[0] != 0 {
        return Err(Error::InvalidArg(format!(
            "MPI_Intercomm_create: the leader (rank {local_leader}) could not reach the remote group"
        )));
    }
    answer.resize(head[1] as usize, 0);
    private
        .process_at_rank(local_leader)
        .broadcast_into(&mut answer[..]);
    let (ctx, remote) = answer.split_first().ok_or_else(|| {
        Error::InvalidArg("MPI_Intercomm_create: no answer from the leader".into())
    })?;
    Ok(InterCommunicator::new(*ctx, private, remote.to_vec()))
}

/// At the local leader: swaps `[private context, members...]` with the remote leader
/// and returns `[intercommunicator context, remote members...]`.
fn leaders_exchange(
    private: &SimpleCommunicator,
    mine: &[u32],
    peer: &SimpleCommunicator,
    remote_leader: Rank,
    tag: Tag,
) -> Result<Vec<u32>, Error> {
    if peer.inter || !(0..peer.size).contains(&remote_leader) {
        return Err(Error::InvalidRank {
            rank: remote_leader,
            size: peer.size as usize,
        });
    }
    let mut out = vec![private.context()];
    out.extend_from_slice(mine);
    let other = peer.process_at_rank(remote_leader);
    let theirs: Vec<u32> = scope(|s| {
        let sent = other.immediate_send_with_tag(s, &out[..], tag);
        let (v, _) = other.receive_vec_with_tag::<u32>(tag);
        sent.wait();
        v
    });
    let Some((&their_ctx, remote)) = theirs.split_first() else {
        return Err(Error::InvalidArg(
            "MPI_Intercomm_create: the remote leader sent an empty group".into(),
        ));
    };
    if remote.is_empty() || remote.len() > MAX_GROUP {
        return Err(Error::InvalidArg(format!(
            "MPI_Intercomm_create: the remote group has {} members",
            remote.len()
        )));
    }
    if let Some(w) = remote.iter().find(|w| mine.contains(w)) {
        return Err(Error::InvalidArg(format!(
            "MPI_Intercomm_create: the groups overlap (world rank {w} is in both)"
        )));
    }
    // Both leaders compute the same context from the two private ones.
    let (a, b) = if mine[0] < remote[0] {
        (private.context(), their_ctx)
    } else {
        (their_ctx, private.context())
    };
    let mut v = vec![mix(a, b)];
    v.extend_from_slice(remote);
    Ok(v)
}

/// A context from two: never 0, and even, so that `ctx + 1` (the internal context) is
/// the intercommunicator's too.
fn mix(a: u32, b: u32) -> u32 {
    let mut z = ((a as u64) << 32 | b as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (((z ^ (z >> 31)) as u32) & !1).max(2)
}

/// `MPI_Comm_spawn(_multiple)`: the root asks the launcher for the processes, then
/// broadcasts the outcome (and the new ranks' addresses) to its communicator, whose
/// members all grow their engines to reach them.
pub(crate) fn spawn(
    root: Process<'_>,
    commands: &[Command],
    maxprocs: &[Rank],
) -> Result<InterCommunicator, MpiError> {
    let comm = root.comm;
    if comm.inter {
        crate::runtime::fatal(
            "spawn",
            Error::InvalidComm("spawn runs on an ordinary communicator".into()),
        );
    }
    let private = comm.duplicate();
    let ctx = (private.derive_context(0x7370_6177) & !1).max(2);
    // [started?, first new job rank, count or requested]
    let mut head = [0u32; 3];
    let mut addrs: Vec<u64> = Vec::new();
    if comm.rank == root.rank {
        let requested: i64 = maxprocs.iter().map(|&m| m as i64).sum();
        head[2] = requested.clamp(0, u32::MAX as i64) as u32;
        let parents: Vec<u32> = (0..comm.size).map(|r| comm.world_rank(r)).collect();
        let asked = spawn_request(commands, maxprocs, ctx, parents)
            .and_then(|req| crate::runtime::with_engine(|e| e.spawn(req)));
        match asked {
            Ok((first, eps)) => {
                head = [1, first, eps.len() as u32];
                addrs = eps
                    .iter()
                    .map(|ep| (u32::from(*ep.addr.ip()) as u64) << 16 | ep.addr.port() as u64)
                    .collect();
            }
            Err(e) => eprintln!("phalanx: rank {}: {e}", comm.world_rank(comm.rank)),
        }
    }
    let bcast = private.process_at_rank(root.rank);
    bcast.broadcast_into(&mut head[..]);
    if head[0] == 0 {
        return Err(MpiError::Spawn(head[2] as Rank, 0));
    }
    addrs.resize(head[2] as usize, 0);
    bcast.broadcast_into(&mut addrs[..]);
    let eps: Vec<SocketAddrV4> = addrs
        .iter()
        .map(|&a| SocketAddrV4::new(Ipv4Addr::from((a >> 16) as u32), a as u16))
        .collect();
    let first = head[1];
    if let Err(e) = crate::runtime::with_engine(|e| e.add_peers(first, &eps)) {
        crate::runtime::fatal("spawn", e);
    }
    Ok(InterCommunicator::new(
        ctx,
        private,
        (first..first + head[2]).collect(),
    ))
}

/// The launcher's request for `commands`, checked.
fn spawn_request(
    commands: &[Command],
    maxprocs: &[Rank],
    context: u32,
    parents: Vec<u32>,
) -> Result<SpawnRequest, Error> {
    if commands.is_empty() || commands.len() != maxprocs.len() {
        return Err(Error::InvalidArg(format!(
            "spawn: {} commands and {} process counts",
            commands.len(),
            maxprocs.len()
        )));
    }
    let mut total = 0u32;
    let mut out = Vec::with_capacity(commands.len());
    for (c, &n) in commands.iter().zip(maxprocs) {
        if n < 1 {
            return Err(Error::InvalidArg(format!(
                "spawn: {n} processes for a command"
            )));
        }
        total = total.saturating_add(n as u32);
        let text = |s: &std::ffi::OsStr| {
            s.to_str()
                .map(str::to_owned)
                .ok_or_else(|| Error::InvalidArg(format!("spawn: {s:?} is not UTF-8")))
        };
        out.push(SpawnCommand {
            prog: text(c.get_program())?,
            args: c.get_args().map(text).collect::<Result<_, _>>()?,
            count: n as u32,
        });
    }
    if total > MAX_SPAWN {
        return Err(Error::InvalidArg(format!(
            "spawn: {total} processes (at most {MAX_SPAWN} per call)"
        )));
    }
    Ok(SpawnRequest {
        commands: out,
        context,
        parents,
    })
}

impl InterCommunicator {
    /// One word from this group's leader to the other's and back; every member of the
    /// local group returns the remote leader's word.
    fn swap_word(&self, word: u32) -> u32 {
        let mut theirs = [0u32];
        if self.local.rank == 0 {
            let other = self.internal.process_at_rank(0);
            theirs[0] = scope(|s| {
                let sent = other.immediate_send_with_tag(s, &word, TAG_WORD);
                let (v, _) = other.receive_with_tag::<u32>(TAG_WORD);
                sent.wait();
                v
            });
        }
        self.local
            .process_at_rank(0)
            .broadcast_into(&mut theirs[..]);
        theirs[0]
    }

    /// An ordinary communicator of both groups (`MPI_Intercomm_merge`): the `Low` group's
    /// ranks first (see [`MergeOrder`]). Collective over both groups.
    pub fn merge(&self, order: MergeOrder) -> SimpleCommunicator {
        let high = order == MergeOrder::High;
        let remote_high = self.swap_word(high as u32) != 0;
        let mine: Vec<u32> = (0..self.local.size)
            .map(|r| self.local.world_rank(r))
            .collect();
        let remote = self.remote_members();
        let local_first = if high != remote_high {
            !high
        } else {
            mine[0] < remote[0]
        };
        let members: Vec<u32> = if local_first {
            mine.iter().chain(remote.iter()).copied().collect()
        } else {
            remote.iter().chain(mine.iter()).copied().collect()
        };
        let me = self.local.world_rank(self.local.rank);
        let rank = members.iter().position(|&w| w == me).unwrap_or(0) as Rank;
        let ctx = self.internal.derive_context(0x6d65_7267);
        let size = members.len() as Rank;
        self.local
            .sub(ctx, rank, Some(std::sync::Arc::new(members)), size)
    }

    /// Splits both groups by color (`MPI_Comm_split` on an intercommunicator): the new
    /// intercommunicator of a color joins this group's members of that color to the
    /// remote group's members of the same color, each group ordered by (key, rank).
    /// Collective over both groups. `None` for [`Color::undefined`] and for a color the
    /// other group does not have. `MPI_Comm_create` on an intercommunicator is the split
    /// with color 0 for the members of the group (keyed by their rank in it).
    pub fn split(&self, color: Color, key: i32) -> Option<InterCommunicator> {
        let mine = [color.0, key];
        let mut table = vec![0i32; 2 * self.local.size as usize];
        self.local.all_gather_into(&mine[..], &mut table[..]);
        let mut theirs = vec![0i32; 2 * self.view.size as usize];
        if self.local.rank == 0 {
            let other = self.internal.process_at_rank(0);
            scope(|s| {
                let sent = other.immediate_send_with_tag(s, &table[..], TAG_SPLIT);
                other.receive_into_with_tag(&mut theirs[..], TAG_SPLIT);
                sent.wait();
            });
        }
        self.local
            .process_at_rank(0)
            .broadcast_into(&mut theirs[..]);
        // Every member of both groups derives once, the same salt for the same color.
        let ctx = self
            .internal
            .derive_context(0x7370_6c74_0000_0000 | color.0 as u32 as u64)
            & !1;
        let local = self.local.split_by_color_with_key(color, key)?;
        let mut remote: Vec<(i32, Rank)> = (0..self.view.size)
            .filter(|&r| theirs[2 * r as usize] == color.0)
            .map(|r| (theirs[2 * r as usize + 1], r))
            .collect();
        if remote.is_empty() {
            return None;
        }
        remote.sort_unstable();
        let remote = remote
            .iter()
            .map(|&(_, r)| self.view.world_rank(r))
            .collect();
        Some(InterCommunicator::new(ctx.max(2), local, remote))
    }

    /// A new intercommunicator between the same groups (`MPI_Comm_dup`). Collective
    /// over both groups.
    pub fn duplicate(&self) -> InterCommunicator {
        let ctx = self.internal.derive_context(0x0064_7570) & !1;
        let local = self.local.duplicate();
        InterCommunicator::new(ctx.max(2), local, self.remote_members())
    }

    /// Returns once every member of both groups has called it (`MPI_Barrier`).
    pub fn barrier(&self) {
        CommunicatorCollectives::barrier(self);
    }

    /// The root's side of a broadcast to the remote group (`MPI_Bcast` with
    /// `MPI_ROOT`): `buf` goes to every member of the remote group, which calls
    /// [`InterCommunicator::broadcast_from`]. The root group's other members take no part
    /// (`MPI_PROC_NULL`).
    pub fn broadcast_root<B: ?Sized + Buffer>(&self, buf: &B) {
        self.internal
            .process_at_rank(0)
            .send_with_tag(buf, TAG_BCAST);
    }

    /// The receivers' side of [`InterCommunicator::broadcast_root`]: every member of this
    /// group receives into `buf` what rank `root` of the remote group sends.
    pub fn broadcast_from<B: ?Sized + BufferMut>(&self, root: Rank, buf: &mut B) {
        self.process_at_rank(root).broadcast_into(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::mix;

    #[test]
    fn the_context_is_even_and_not_zero() {
        for (a, b) in [(0, 0), (1, 2), (u32::MAX, 7), (12345, 54321)] {
            let c = mix(a, b);
            assert!(c >= 2 && c.is_multiple_of(2), "{a} {b} -> {c}");
        }
        assert_ne!(mix(1, 2), mix(2, 1));
    }
}
