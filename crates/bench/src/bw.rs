//! Windowed two-rank bandwidth (the osu_bw and osu_bibw measurements).
//!
//! bw: per iteration rank 0 starts `window` nonblocking sends of one size and waits for
//! them all, then waits for a 4-byte acknowledgement; rank 1 starts `window` nonblocking
//! receives, waits for them and sends the acknowledgement. Bandwidth is
//! `size * window * iterations / elapsed` in MB/s (10^6 bytes per second), as OSU reports.
//!
//! bibw: per iteration both ranks start `window` nonblocking receives, then `window`
//! nonblocking sends (rank 0 sends with tag 100 and receives tag 10, rank 1 the reverse),
//! and wait for them all (rank 0 for its sends first, rank 1 for its receives first); there
//! is no acknowledgement. Bandwidth is `size * window * 2 * iterations / elapsed`.
//!
//! Both start each size with a pair barrier and time on rank 0 from the end of the
//! warm-up to the last wait (OMB 7.x's osu_bibw sums per-iteration times on rank 0: the
//! same interval, as nothing runs between iterations).
//!
//! As in OSU, every receive of a window targets the same buffer; [`SharedTarget`] makes
//! that expressible while the requests borrow their buffers mutably.

use crate::options::Plan;
use crate::report;
use crate::sync::pair_barrier;
use phalanx::environment::time;
use phalanx::request::{scope, wait_all};
use phalanx::topology::{Process, SimpleCommunicator};
use phalanx::traits::*;
use phalanx::Count;
use std::ffi::c_void;
use std::marker::PhantomData;

/// Tag of the data messages (OSU uses 100).
pub const DATA_TAG: phalanx::Tag = 100;
/// Tag of the acknowledgement (OSU uses 101).
pub const ACK_TAG: phalanx::Tag = 101;
/// Tag of bibw's data from rank 1 to rank 0 (OSU uses 10).
const BACK_TAG: phalanx::Tag = 10;

/// Runs the bandwidth test and prints its table on rank 0.
pub fn run(world: &SimpleCommunicator, plan: &Plan) {
    let rank = world.rank();
    let peer = world.process_at_rank(1 - rank);
    let send = vec![b'a'; plan.max_size()];
    let mut recv = vec![b'b'; plan.max_size()];
    let mut ack = [0u8; 4];
    if rank == 0 {
        report::header("Bandwidth", "Bandwidth (MB/s)");
    }
    for &size in &plan.sizes {
        let (iterations, warmup) = plan.counts(size);
        let target = SharedTarget::new(&mut recv[..size]);
        let mut slots: Vec<Slot<'_>> = (0..plan.window).map(|_| target.slot()).collect();
        pair_barrier(world);
        let mut start = time();
        for i in 0..iterations + warmup {
            if i == warmup {
                start = time();
            }
            if rank == 0 {
                send_window(&peer, &send[..size], plan.window, &mut ack);
            } else {
                recv_window(&peer, &mut slots, &ack);
            }
        }
        let elapsed = time() - start;
        if rank == 0 {
            let bytes = size as f64 * plan.window as f64 * iterations as f64;
            report::row(size, bytes / 1e6 / elapsed);
        }
    }
}

/// The sending side of one iteration of the OSU bandwidth loop: `window` nonblocking
/// sends of `data` to `peer`, a wait for all of them, then the receiver's acknowledgement.
pub fn send_window(peer: &Process<'_>, data: &[u8], window: usize, ack: &mut [u8; 4]) {
    scope(|sc| {
        let reqs = (0..window)
            .map(|_| peer.immediate_send_with_tag(sc, data, DATA_TAG))
            .collect();
        wait_all(reqs);
    });
    peer.receive_into_with_tag(&mut ack[..], ACK_TAG);
}

/// The receiving side of [`send_window`]: a nonblocking receive from `peer` into each
/// slot, a wait for all of them, then the acknowledgement.
pub fn recv_window(peer: &Process<'_>, slots: &mut [Slot<'_>], ack: &[u8; 4]) {
    scope(|sc| {
        let reqs = slots
            .iter_mut()
            .map(|slot| peer.immediate_receive_into_with_tag(sc, slot, DATA_TAG))
            .collect();
        wait_all(reqs);
    });
    peer.send_with_tag(&ack[..], ACK_TAG);
}

/// Runs the bidirectional bandwidth test and prints its table on rank 0.
pub fn run_bibw(world: &SimpleCommunicator, plan: &Plan) {
    let rank = world.rank();
    let peer = world.process_at_rank(1 - rank);
    let (send_tag, recv_tag) = if rank == 0 {
        (DATA_TAG, BACK_TAG)
    } else {
        (BACK_TAG, DATA_TAG)
    };
    let send = vec![b'a'; plan.max_size()];
    let mut recv = vec![b'b'; plan.max_size()];
    if rank == 0 {
        report::header("Bi-Directional Bandwidth", "Bandwidth (MB/s)");
    }
    for &size in &plan.sizes {
        let (iterations, warmup) = plan.counts(size);
        let target = SharedTarget::new(&mut recv[..size]);
        let mut slots: Vec<Slot<'_>> = (0..plan.window).map(|_| target.slot()).collect();
        pair_barrier(world);
        let mut start = time();
        for i in 0..iterations + warmup {
            if i == warmup {
                start = time();
            }
            scope(|sc| {
                let recvs = slots
                    .iter_mut()
                    .map(|slot| peer.immediate_receive_into_with_tag(sc, slot, recv_tag))
                    .collect();
                let sends = (0..plan.window)
                    .map(|_| peer.immediate_send_with_tag(sc, &send[..size], send_tag))
                    .collect();
                if rank == 0 {
                    wait_all(sends);
                    wait_all(recvs);
                } else {
                    wait_all(recvs);
                    wait_all(sends);
                }
            });
        }
        let elapsed = time() - start;
        if rank == 0 {
            let bytes = size as f64 * plan.window as f64 * 2.0 * iterations as f64;
            report::row(size, bytes / 1e6 / elapsed);
        }
    }
}

/// A byte buffer that several in-flight receives may target at once.
///
/// It holds the exclusive borrow of the bytes for `'a` and hands out [`Slot`]s, raw views
/// of the same bytes that each satisfy [`BufferMut`].
pub struct SharedTarget<'a> {
    ptr: *mut u8,
    len: usize,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> SharedTarget<'a> {
    pub fn new(bytes: &'a mut [u8]) -> Self {
        SharedTarget {
            ptr: bytes.as_mut_ptr(),
            len: bytes.len(),
            _borrow: PhantomData,
        }
    }

    pub fn slot(&self) -> Slot<'a> {
        Slot {
            ptr: self.ptr,
            len: self.len,
            _borrow: PhantomData,
        }
    }
}

/// One receive's view of a [`SharedTarget`].
pub struct Slot<'a> {
    ptr: *mut u8,
    len: usize,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: `ptr` covers `len` bytes exclusively borrowed (by the SharedTarget) for 'a,
// which every Slot's lifetime is bounded by, and no reference to them exists meanwhile.
// Receives into aliasing slots write the same bytes one after another on the single
// thread that drives phalanx (funneled), never concurrently, and any byte value is a
// valid `u8`.
unsafe impl PointerMut for Slot<'_> {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.ptr as *mut c_void
    }
}
// SAFETY: `len` bytes, as above.
unsafe impl Collection for Slot<'_> {
    fn count(&self) -> Count {
        Count::try_from(self.len).expect("slot longer than a Count")
    }
}
// SAFETY: bytes.
unsafe impl AsDatatype for Slot<'_> {
    type Out = <u8 as Equivalence>::Out;
    fn as_datatype(&self) -> Self::Out {
        u8::equivalent_datatype()
    }
}
// SAFETY: the parts above.
unsafe impl BufferMut for Slot<'_> {}
