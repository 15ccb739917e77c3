//! Rooted collectives ([`Root`]): broadcast, gather, scatter and reduce, blocking and
//! immediate (nonblocking) forms.
//!
//! Contract: as for every collective (see the parent module): each call takes the
//! communicator's next sequence number and carries its signature; the immediate forms run
//! the same schedules as the blocking ones (never the shared-memory board, which is for
//! blocking calls) and complete when the returned request does. Buffers given to an
//! immediate form belong to the request until it completes (the scope enforces it).

use super::{
    bytes, check, choose_board, contiguous, root_buffer, run, start, Chosen, Operation, PlanFn,
    Spec,
};
use crate::coll::algorithm::Algorithm::*;
use crate::coll::algos;
use crate::coll::ops::OpKind;
use crate::coll::schedule::{Buf, Plan};
use crate::coll::CollKind;
use crate::datatype::{Buffer, BufferMut, Packed, TypeMap};
use crate::datatype::{Described, ReadPtr, WritePtr};
use crate::request::{Request, Scope};
use crate::topology::{Communicator, Process};

/// Collectives with a root: called on the root's [`Process`] by every member.
pub trait Root {
    /// The root process.
    fn root_process(&self) -> Process<'_>;

    /// The root's rank in its communicator.
    fn root_rank(&self) -> crate::Rank {
        self.root_process().rank
    }

    /// Starts `maxprocs` processes running `command` (its program and arguments; the
    /// root's matter) and returns the intercommunicator to them (`MPI_Comm_spawn`): their
    /// `world()` is their own group, and their `parent()` the intercommunicator back to
    /// this communicator. Collective over the root's communicator. Needs `phalanx run`
    /// (the launcher starts them, on the launcher's host).
    fn spawn(
        &self,
        command: &std::process::Command,
        maxprocs: crate::Rank,
    ) -> Result<crate::topology::InterCommunicator, crate::MpiError> {
        super::inter::spawn(
            self.root_process(),
            std::slice::from_ref(command),
            &[maxprocs],
        )
    }

    /// Like [`Root::spawn`] with several programs: `maxprocs[i]` processes run
    /// `commands[i]`, numbered in that order in the new world (`MPI_Comm_spawn_multiple`).
    fn spawn_multiple(
        &self,
        commands: &[std::process::Command],
        maxprocs: &[crate::Rank],
    ) -> Result<crate::topology::InterCommunicator, crate::MpiError> {
        super::inter::spawn(self.root_process(), commands, maxprocs)
    }

    /// Broadcasts the root's `buffer` into every member's `buffer`.
    fn broadcast_into<B: ?Sized + BufferMut>(&self, buffer: &mut B) {
        let p = self.root_process();
        if let Some(x) = super::intercoll::sides(p.comm) {
            return super::intercoll::broadcast_from(x, p.rank, buffer);
        }
        if !buffer.datatype().is_contiguous() {
            // A derived datatype (or bools) travels packed (datatype::Packed).
            let mut p = Packed::of_mut(&mut *buffer);
            self.broadcast_into(&mut p);
            return p.unpack_into(buffer);
        }
        let (spec, plan) = bcast_spec(self.root_process(), buffer);
        run(spec, plan)
    }

    /// Starts a broadcast; `buffer` holds the root's data once the request completes.
    fn immediate_broadcast_into<'a, Sc, B>(
        &self,
        scope: Sc,
        buffer: &'a mut B,
    ) -> Request<'a, B, Sc>
    where
        Sc: Scope<'a>,
        B: ?Sized + BufferMut,
    {
        let p = self.root_process();
        let (spec, plan): (_, PlanFn) = if buffer.datatype().is_contiguous() {
            let (s, f) = bcast_spec(p, buffer);
            (s, Box::new(f))
        } else {
            let (_, r) = super::stage::<[u8], B>(None, Some(&mut *buffer as *mut B));
            let (s, f) = bcast_spec(p, r.unwrap());
            (s, Box::new(f))
        };
        Request::new(start(spec, plan), scope, p.comm, &*buffer)
    }

    /// Non-root side of a gather: sends `sendbuf` to the root.
    fn gather_into<S: ?Sized + Buffer>(&self, sendbuf: &S) {
        let p = self.root_process();
        if let Some(x) = super::intercoll::sides(p.comm) {
            return super::intercoll::gather_to(x, p.rank, sendbuf, false);
        }
        if !sendbuf.datatype().is_contiguous() {
            return self.gather_into(&Packed::of(sendbuf));
        }
        let (spec, plan) = gather_spec(self.root_process(), sendbuf, (std::ptr::null_mut(), 0));
        run(spec, plan)
    }

    /// Non-root side of a gather of different counts (`MPI_Gatherv`).
    fn gather_varcount_into<S: ?Sized + Buffer>(&self, sendbuf: &S) {
        let p = self.root_process();
        if let Some(x) = super::intercoll::sides(p.comm) {
            return super::intercoll::gather_to(x, p.rank, sendbuf, true);
        }
        super::varcount::gatherv::<S, [u8]>(self.root_process(), sendbuf, None, true);
    }

    /// Starts the non-root side of a gather of different counts (`MPI_Igatherv`).
    fn immediate_gather_varcount_into<'a, Sc, S>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
    ) -> Request<'a, S, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
    {
        let p = self.root_process();
        let id = super::varcount::gatherv::<S, [u8]>(p, sendbuf, None, false);
        Request::new(id.expect("immediate"), scope, p.comm, sendbuf)
    }

    /// Starts the root side of a gather of different counts.
    fn immediate_gather_varcount_into_root<'a, 'b, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut crate::datatype::PartitionMut<'b, R>,
    ) -> Request<'a, crate::datatype::PartitionMut<'b, R>, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let p = self.root_process();
        let id = super::varcount::gatherv(p, sendbuf, Some(&mut *recvbuf), false);
        Request::new(id.expect("immediate"), scope, p.comm, &*recvbuf)
    }

    /// Root side of a gather of different counts: block i of `recvbuf` receives member
    /// i's elements.
    fn gather_varcount_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut crate::datatype::PartitionMut<'_, R>,
    ) {
        super::varcount::gatherv(self.root_process(), sendbuf, Some(recvbuf), true);
    }

    /// Non-root side of a scatter of different counts (`MPI_Scatterv`).
    fn scatter_varcount_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) {
        let p = self.root_process();
        if let Some(x) = super::intercoll::sides(p.comm) {
            return super::intercoll::scatter_varcount_from(x, p.rank, recvbuf);
        }
        super::varcount::scatterv::<[u8], R>(self.root_process(), None, recvbuf, true);
    }

    /// Starts the non-root side of a scatter of different counts (`MPI_Iscatterv`).
    fn immediate_scatter_varcount_into<'a, Sc, R>(
        &self,
        scope: Sc,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        R: ?Sized + BufferMut,
    {
        let p = self.root_process();
        let id = super::varcount::scatterv::<[u8], R>(p, None, &mut *recvbuf, false);
        Request::new(id.expect("immediate"), scope, p.comm, &*recvbuf)
    }

    /// Starts the root side of a scatter of different counts.
    fn immediate_scatter_varcount_into_root<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a crate::datatype::Partition<'a, S>,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let p = self.root_process();
        let id = super::varcount::scatterv(p, Some(sendbuf), &mut *recvbuf, false);
        Request::new(id.expect("immediate"), scope, p.comm, &*recvbuf)
    }

    /// Root side of a scatter of different counts: member i gets block i of `sendbuf`.
    fn scatter_varcount_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &crate::datatype::Partition<'_, S>,
        recvbuf: &mut R,
    ) {
        super::varcount::scatterv(self.root_process(), Some(sendbuf), recvbuf, true);
    }

    /// Root side of a gather: `recvbuf` receives every member's block in rank order.
    fn gather_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        if !contiguous(sendbuf, recvbuf) {
            let mut r = Packed::of_mut(&mut *recvbuf);
            self.gather_into_root(&Packed::of(sendbuf), &mut r);
            return r.unpack_into(recvbuf);
        }
        let recv = (recvbuf.buffer_mut_ptr(), bytes(recvbuf));
        let (spec, plan) = gather_spec(self.root_process(), sendbuf, recv);
        run(spec, plan)
    }

    /// Starts the non-root side of a gather.
    fn immediate_gather_into<'a, Sc, S>(&self, scope: Sc, sendbuf: &'a S) -> Request<'a, S, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
    {
        let p = self.root_process();
        let (spec, plan) = if sendbuf.datatype().is_contiguous() {
            gather_spec(p, sendbuf, (std::ptr::null_mut(), 0))
        } else {
            let (s, _) = super::stage::<S, [u8]>(Some(sendbuf), None);
            gather_spec(p, s.unwrap(), (std::ptr::null_mut(), 0))
        };
        Request::new(start(spec, plan), scope, p.comm, sendbuf)
    }

    /// Starts the root side of a gather; `recvbuf` is complete once the request is.
    fn immediate_gather_into_root<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let p = self.root_process();
        let (spec, plan) = if contiguous(sendbuf, recvbuf) {
            let recv = (recvbuf.buffer_mut_ptr(), bytes(recvbuf));
            gather_spec(p, sendbuf, recv)
        } else {
            let (s, r) = super::stage(Some(sendbuf), Some(&mut *recvbuf as *mut R));
            let r = r.unwrap();
            let recv = (r.buffer_mut_ptr(), bytes(&*r));
            gather_spec(p, s.unwrap(), recv)
        };
        Request::new(start(spec, plan), scope, p.comm, &*recvbuf)
    }

    /// Non-root side of a scatter: receives this member's block into `recvbuf`.
    fn scatter_into<R: ?Sized + BufferMut>(&self, recvbuf: &mut R) {
        let p = self.root_process();
        if let Some(x) = super::intercoll::sides(p.comm) {
            return super::intercoll::scatter_from(x, p.rank, recvbuf);
        }
        if !recvbuf.datatype().is_contiguous() {
            let mut r = Packed::of_mut(&mut *recvbuf);
            self.scatter_into(&mut r);
            return r.unpack_into(recvbuf);
        }
        let (spec, plan) = scatter_spec(self.root_process(), (std::ptr::null(), 0), recvbuf);
        run(spec, plan)
    }

    /// Root side of a scatter: block i of `sendbuf` goes to member i.
    fn scatter_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
    ) {
        if !contiguous(sendbuf, recvbuf) {
            let mut r = Packed::of_mut(&mut *recvbuf);
            self.scatter_into_root(&Packed::of(sendbuf), &mut r);
            return r.unpack_into(recvbuf);
        }
        let send = (sendbuf.buffer_ptr(), bytes(sendbuf));
        let (spec, plan) = scatter_spec(self.root_process(), send, recvbuf);
        run(spec, plan)
    }

    /// Starts the non-root side of a scatter.
    fn immediate_scatter_into<'a, Sc, R>(&self, scope: Sc, recvbuf: &'a mut R) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        R: ?Sized + BufferMut,
    {
        let p = self.root_process();
        let (spec, plan) = if recvbuf.datatype().is_contiguous() {
            scatter_spec(p, (std::ptr::null(), 0), recvbuf)
        } else {
            let (_, r) = super::stage::<[u8], R>(None, Some(&mut *recvbuf as *mut R));
            scatter_spec(p, (std::ptr::null(), 0), r.unwrap())
        };
        Request::new(start(spec, plan), scope, p.comm, &*recvbuf)
    }

    /// Starts the root side of a scatter.
    fn immediate_scatter_into_root<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
    {
        let p = self.root_process();
        let (spec, plan) = if contiguous(sendbuf, recvbuf) {
            let send = (sendbuf.buffer_ptr(), bytes(sendbuf));
            scatter_spec(p, send, recvbuf)
        } else {
            let (s, r) = super::stage(Some(sendbuf), Some(&mut *recvbuf as *mut R));
            let s = s.unwrap();
            scatter_spec(p, (s.buffer_ptr(), bytes(s)), r.unwrap())
        };
        Request::new(start(spec, plan), scope, p.comm, &*recvbuf)
    }

    /// Non-root side of a reduction.
    fn reduce_into<S: ?Sized + Buffer, O: Operation>(&self, sendbuf: &S, op: O) {
        let p = self.root_process();
        if let Some(x) = super::intercoll::sides(p.comm) {
            return super::intercoll::reduce_to(x, p.rank, sendbuf, op);
        }
        if let Some(u) = op.user() {
            let p = self.root_process();
            return super::user::reduce::<S, [u8]>(p.comm, sendbuf, None, u, p.rank);
        }
        if !sendbuf.datatype().is_contiguous() {
            return self.reduce_into(&Packed::of(sendbuf), op);
        }
        let (spec, plan) = reduce_spec(
            self.root_process(),
            sendbuf,
            (std::ptr::null_mut(), 0),
            op.kind(),
        );
        run(spec, plan)
    }

    /// Root side of a reduction: `recvbuf` gets `op` over every member's `sendbuf`.
    fn reduce_into_root<S: ?Sized + Buffer, R: ?Sized + BufferMut, O: Operation>(
        &self,
        sendbuf: &S,
        recvbuf: &mut R,
        op: O,
    ) {
        if let Some(u) = op.user() {
            let p = self.root_process();
            return super::user::reduce(p.comm, sendbuf, Some(recvbuf), u, p.rank);
        }
        if !contiguous(sendbuf, recvbuf) {
            let mut r = Packed::of_mut(&mut *recvbuf);
            self.reduce_into_root(&Packed::of(sendbuf), &mut r, op);
            return r.unpack_into(recvbuf);
        }
        let recv = (recvbuf.buffer_mut_ptr(), bytes(recvbuf));
        let (spec, plan) = reduce_spec(self.root_process(), sendbuf, recv, op.kind());
        run(spec, plan)
    }

    /// Starts the non-root side of a reduction.
    fn immediate_reduce_into<'a, Sc, S, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        op: O,
    ) -> Request<'a, S, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        O: Operation + 'a,
    {
        let p = self.root_process();
        if op.user().is_some() {
            let fold = super::user::Fold::At(p.rank);
            let id = super::user::start::<S, [u8], O>(p.comm, sendbuf, None, op, fold);
            return Request::new(id, scope, p.comm, sendbuf);
        }
        let (spec, plan) = if sendbuf.datatype().is_contiguous() {
            reduce_spec(p, sendbuf, (std::ptr::null_mut(), 0), op.kind())
        } else {
            let (s, _) = super::stage::<S, [u8]>(Some(sendbuf), None);
            reduce_spec(p, s.unwrap(), (std::ptr::null_mut(), 0), op.kind())
        };
        Request::new(start(spec, plan), scope, p.comm, sendbuf)
    }

    /// Starts the root side of a reduction; `recvbuf` holds the result once it completes.
    fn immediate_reduce_into_root<'a, Sc, S, R, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        Sc: Scope<'a>,
        S: ?Sized + Buffer,
        R: ?Sized + BufferMut,
        O: Operation + 'a,
    {
        let p = self.root_process();
        if op.user().is_some() {
            let out = Some(&mut *recvbuf as *mut R);
            let id = super::user::start(p.comm, sendbuf, out, op, super::user::Fold::At(p.rank));
            return Request::new(id, scope, p.comm, &*recvbuf);
        }
        let (spec, plan) = if contiguous(sendbuf, recvbuf) {
            let recv = (recvbuf.buffer_mut_ptr(), bytes(recvbuf));
            reduce_spec(p, sendbuf, recv, op.kind())
        } else {
            let (s, r) = super::stage(Some(sendbuf), Some(&mut *recvbuf as *mut R));
            let r = r.unwrap();
            let recv = (r.buffer_mut_ptr(), bytes(&*r));
            reduce_spec(p, s.unwrap(), recv, op.kind())
        };
        Request::new(start(spec, plan), scope, p.comm, &*recvbuf)
    }
}

impl Root for Process<'_> {
    fn root_process(&self) -> Process<'_> {
        *self
    }
}

/// λ of the postal trees for `len`-byte messages in packets of `packet` bytes:
/// `PHALANX_COLL_LAMBDA`, else the cost model's for the job ([`crate::coll::cost::lambda`]).
pub(super) fn tree_lambda(len: usize, packet: usize) -> u32 {
    crate::coll::algorithm::choices()
        .lambda
        .unwrap_or_else(|| crate::coll::cost::lambda(len, packet))
}

/// Smallest message (a broadcast's, a gather's block) for which the postal tree is the
/// default.
const TREE_MIN: usize = 32 << 10;

/// The same for a reduction: every size. Measured 2026-11-28 on the 2-core Zen 3 over
/// UDP (`bench/thresholds.py reduce NP SIZES PHALANX_COLL_REDUCE binomial,tree`,
/// medians of 3 alternating runs, µs binomial / tree): 8 ranks on one host, 4 B 86 / 58,
/// 2 KiB 109 / 71, 8 KiB 120 / 77, 32 KiB 178 / 121, 64 KiB 295 / 189; 16 ranks on one
/// host, 4 B 263 / 146, 8 KiB 335 / 159, 64 KiB 775 / 349; 8 test hosts of one rank,
/// 2 KiB 147 / 90, 8 KiB 150 / 121, 16 KiB 166 / 143, 32 KiB 190 / 194, 64 KiB 286 /
/// 302; 4 test hosts of two ranks, 2 KiB 118 / 99, 8 KiB 115 / 107, 32 KiB 202 / 166.
/// (Before, the small sizes measured the other way, and the threshold was
/// [`TREE_MIN`].)
const REDUCE_TREE_MIN: usize = 0;

/// The postal tree in place of the binomial default from [`TREE_MIN`] bytes
/// ([`REDUCE_TREE_MIN`] for a reduction) where the
/// model predicts it clearly faster ([`crate::coll::tree::pays`]), unless the
/// environment chose; a tree carries its λ.
///
/// Measured on a 2-core machine over network namespaces without multicast (veth, MTU
/// 1500; `bench/seed002.py trees` and `bench/netns_bcast.py` with `TEST=reduce|gather`,
/// medians of 5 alternating runs): at 8 and 16 ranks the tree broadcast is 13-22 %
/// faster than the binomial tree at 32 and 64 KiB, and as fast or up to 30 % slower
/// below (members share the cores, which the postal model does not count); run
/// backwards, 1-37 % faster from 32 KiB and up to 25 % slower below at 8 ranks. At 4
/// ranks, where the model predicts only 17 % (not the 20 % margin, `TREE_GAIN`), the
/// binomial tree was faster at every size. (Those runs were at λ = 3; where ranks share
/// CPUs, λ is scaled by the job's ranks per CPU, [`crate::coll::cost::lambda`], and the
/// flatter trees that follow were 40–65 % faster for reductions and gathers at 4, 8 and
/// 16 ranks on 2 cores, at every size: its module docs.)
fn with_tree(kind: CollKind, mut c: Chosen, s: &algos::Shape, len: usize) -> Chosen {
    if c.alg == Shm {
        return c;
    }
    let forced = crate::coll::algorithm::choices().forced(kind).is_some();
    let mut cached = None;
    let mut lambda = || *cached.get_or_insert_with(|| tree_lambda(len, s.packet));
    let min = if kind == CollKind::Reduce {
        REDUCE_TREE_MIN
    } else {
        TREE_MIN
    };
    if c.alg == Binomial && !forced && len >= min && crate::coll::tree::pays(s.p, lambda()) {
        c = Chosen::plain(Tree);
    }
    if c.alg == Tree {
        c.k = lambda() as u16;
    }
    c
}

/// The plan is returned unboxed: a blocking broadcast (small ones are all per-call work)
/// takes no allocation for it.
fn bcast_spec<'c, B: ?Sized + BufferMut>(
    p: Process<'c>,
    buffer: &mut B,
) -> (
    Spec<'c>,
    impl FnOnce(&algos::Shape) -> Result<(Chosen, Plan), crate::Error> + 'static,
) {
    let len = bytes(buffer);
    let ptr = buffer.buffer_mut_ptr();
    let root = p.rank() as usize;
    let spec = Spec {
        name: "broadcast_into",
        kind: CollKind::Bcast,
        root: Some(p.rank()),
        op: None,
        dt: buffer.datatype(),
        count: buffer.elements(),
        send: (ptr as *const u8, len),
        recv: (ptr, len),
        comm: p.comm,
    };
    let plan = move |s: &algos::Shape| {
        let c = with_tree(
            CollKind::Bcast,
            choose_board(CollKind::Bcast, s, len, Mcast, Binomial),
            s,
            len,
        );
        let lambda = u32::from(c.k);
        Ok((
            c,
            match c.alg {
                Shm => Plan::on_board(),
                Hier | HierMcast => Plan::hierarchical(),
                Mcast => algos::bcast_mcast(s, root, Buf::Recv, len),
                Tree => crate::coll::tree::bcast_tree(
                    s,
                    root,
                    Buf::Recv,
                    len,
                    lambda,
                    s.packet,
                    crate::coll::algorithm::choices().pipeline,
                ),
                _ => algos::bcast_binomial(s, root, Buf::Recv, len),
            },
        ))
    };
    (spec, plan)
}

fn gather_spec<'c, S: ?Sized + Buffer>(
    p: Process<'c>,
    sendbuf: &S,
    recv: (*mut u8, usize),
) -> (Spec<'c>, PlanFn) {
    let block = bytes(sendbuf);
    let root = p.rank() as usize;
    let size = p.comm.size() as usize;
    let is_root = p.comm.rank() == p.rank();
    let spec = Spec {
        name: "gather",
        kind: CollKind::Gather,
        root: Some(p.rank()),
        op: None,
        dt: sendbuf.datatype(),
        count: sendbuf.elements(),
        send: (sendbuf.buffer_ptr(), block),
        recv,
        comm: p.comm,
    };
    let recv_null = recv.0.is_null();
    let plan = move |s: &algos::Shape| {
        root_buffer(is_root, recv_null, recv.1, size * block, "gather_into_root")?;
        let c = with_tree(
            CollKind::Gather,
            choose_board(CollKind::Gather, s, block, Linear, Binomial),
            s,
            block,
        );
        let lambda = u32::from(c.k);
        Ok((
            c,
            match c.alg {
                Shm => Plan::on_board(),
                Linear => algos::gather_linear(s, root, block),
                Tree => crate::coll::tree::gather_tree(s, root, block, lambda),
                _ => algos::gather_binomial(s, root, block),
            },
        ))
    };
    (spec, Box::new(plan))
}

fn scatter_spec<'c, R: ?Sized + BufferMut>(
    p: Process<'c>,
    send: (*const u8, usize),
    recvbuf: &mut R,
) -> (Spec<'c>, PlanFn) {
    let block = bytes(recvbuf);
    let dt: TypeMap = recvbuf.datatype();
    let root = p.rank() as usize;
    let size = p.comm.size() as usize;
    let is_root = p.comm.rank() == p.rank();
    let spec = Spec {
        name: "scatter",
        kind: CollKind::Scatter,
        root: Some(p.rank()),
        op: None,
        dt,
        count: recvbuf.elements(),
        send,
        recv: (recvbuf.buffer_mut_ptr(), block),
        comm: p.comm,
    };
    let send_null = send.0.is_null();
    let plan = move |s: &algos::Shape| {
        root_buffer(
            is_root,
            send_null,
            send.1,
            size * block,
            "scatter_into_root",
        )?;
        let need = size * block;
        // Multicast pays when one datagram carries every block; otherwise the root sends
        // each member its block straight (`bench/thresholds.py scatter …
        // PHALANX_COLL_SCATTER mcast,binomial,linear`, µs): the binomial tree forwards
        // most data twice and the multicast scatter's packed tails reach every member.
        // p = 4, 32 KiB: loopback 39.1 / 33.1 / 20.9, across 4 test hosts 56.2 / 64.7 /
        // 37.5; 1 MiB: 517 / 1022 / 410 and 1629 / 2103 / 1363. p = 8 alike (across
        // hosts 1 KiB 38.6 / 46.0 / 36.1); shared memory without the board, p = 4,
        // binomial / linear: 8 B 3.87 / 2.53, 1 MiB 553 / 216.
        let mcast = if need <= s.packet { Mcast } else { Linear };
        let c = choose_board(CollKind::Scatter, s, need, mcast, Linear);
        Ok((
            c,
            match c.alg {
                Shm => Plan::on_board(),
                Mcast => algos::scatter_mcast(s, root, block, s.packet),
                Linear => algos::scatter_linear(s, root, block),
                _ => algos::scatter_binomial(s, root, block),
            },
        ))
    };
    (spec, Box::new(plan))
}

fn reduce_spec<'c, S: ?Sized + Buffer>(
    p: Process<'c>,
    sendbuf: &S,
    recv: (*mut u8, usize),
    op: OpKind,
) -> (Spec<'c>, PlanFn) {
    let len = bytes(sendbuf);
    let root = p.rank() as usize;
    let is_root = p.comm.rank() == p.rank();
    let spec = Spec {
        name: "reduce",
        kind: CollKind::Reduce,
        root: Some(p.rank()),
        op: Some(op),
        dt: sendbuf.datatype(),
        count: sendbuf.elements(),
        send: (sendbuf.buffer_ptr(), len),
        recv,
        comm: p.comm,
    };
    let plan = move |s: &algos::Shape| {
        if is_root {
            check(
                recv.1 >= len,
                "reduce_into_root: receive buffer smaller than send buffer",
            )?;
        }
        // Every operation is commutative (the predefined ones are all there is), so the
        // tree's order of combining is as good as the binomial tree's.
        let c = with_tree(
            CollKind::Reduce,
            choose_board(CollKind::Reduce, s, len, Binomial, Binomial),
            s,
            len,
        );
        let lambda = u32::from(c.k);
        Ok((
            c,
            match c.alg {
                Shm => Plan::on_board(),
                Hier | HierMcast => Plan::hierarchical(),
                Tree => crate::coll::tree::reduce_tree(s, root, len, lambda),
                _ => algos::reduce_binomial(s, root, len),
            },
        ))
    };
    (spec, Box::new(plan))
}
