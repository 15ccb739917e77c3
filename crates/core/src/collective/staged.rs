//! What every collective call goes through: the call's [`Shape`] (members, packet, and
//! which media it may use), and the packed stand-ins of an immediate collective with a
//! non-contiguous datatype ([`stage`]).
//!
//! Contract: `shape` is the same on every member of a communicator (configuration,
//! membership and start-up state only, so it is computed once per communicator and
//! kept); a collective reaching it on an
//! intercommunicator's point-to-point side (one `intercoll` does not serve) is an error. `stage` gives the next collective started packed
//! copies of the caller's buffers; they live until the collective completes, when the
//! receive copy is unpacked into the caller's buffer (its last step, which the engine
//! runs).

use super::hier;
use crate::coll::algos::Shape;
use crate::datatype::{Buffer, BufferMut, Packed};
use crate::error::Error;
use crate::runtime::call;
use crate::topology::{Communicator, SimpleCommunicator};

/// The shape of a (`blocking` or immediate) call on `c`, computed on its first call.
pub(super) fn shape(c: &SimpleCommunicator, blocking: bool) -> &Shape {
    // At MPI_THREAD_MULTIPLE every collective runs as a request: the board's and the
    // hierarchy's waits hold the engine, which other threads need meanwhile.
    let blocking = blocking && !crate::runtime::multiple();
    if c.inter {
        // Reported before the cache: the error names the call.
        compute(c, blocking);
    }
    // Computed outside the cache (which takes no lock: computing takes the process
    // lock, which another thread may hold while it reads the cache).
    if let Some(s) = c.shapes.get(blocking) {
        return s;
    }
    c.shapes.keep(blocking, compute(c, blocking))
}

#[cold]
#[inline(never)]
fn compute(c: &SimpleCommunicator, blocking: bool) -> Shape {
    if c.inter {
        crate::runtime::fatal(
            "collective",
            Error::InvalidComm(
                "this collective does not run on an intercommunicator (the immediate \
                 forms, the scans and the `_root` calls of a rank of the other group do \
                 not): merge it first (InterCommunicator::merge / MPI_Intercomm_merge)"
                    .into(),
            ),
        );
    }
    let world: Vec<u32> = (0..c.size()).map(|r| c.world_rank(r)).collect();
    let (packet, multicast, (board, board_slots), hosts) = call("collective", |e| {
        if world.iter().any(|&w| !e.in_era(w)) {
            // Members of two eras (spawned ranks and their parents): point-to-point
            // algorithms only, chunked alike on every member (see `engine::spawn`).
            let none = (0, Vec::new());
            return Ok((
                e.max_payload.saturating_sub(8).max(1),
                false,
                none,
                Vec::new(),
            ));
        }
        let board = blocking
            .then(|| e.board_of(&world))
            .flatten()
            .unwrap_or_default();
        let hosts = if blocking && board.0 == 0 && e.shm_wanted {
            let h: Vec<u32> = world.iter().map(|&w| e.host_of[w as usize]).collect();
            if hier::worthwhile(&h) {
                h
            } else {
                Vec::new()
            }
        } else {
            Vec::new()
        };
        Ok((e.coll_packet(), e.coll_multicast(), board, hosts))
    });
    Shape {
        p: c.size() as usize,
        me: c.rank() as usize,
        world,
        packet,
        multicast,
        board,
        board_slots,
        hosts,
    }
}

/// Packed stand-ins for the buffers of an immediate collective with a non-contiguous
/// datatype: `send` packed now, `recv` staged and unpacked into the caller's buffer when
/// the collective completes (its last step, which the engine runs then; the stand-ins
/// live until that step). Call it right before the one `start` it is for.
pub(super) fn stage<'a, S, R>(
    send: Option<&S>,
    recv: Option<*mut R>,
) -> (Option<&'a Packed>, Option<&'a mut Packed>)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut + 'a,
{
    let ps = send.map(|s| Box::new(Packed::of(s)));
    // SAFETY: the caller's receive buffer, borrowed by the request for 'a.
    let mut pr = recv.map(|r| Box::new(Packed::of_mut(unsafe { &mut *r })));
    let s_ptr = ps.as_deref().map(|p| p as *const Packed);
    let r_ptr = pr.as_deref_mut().map(|p| p as *mut Packed);
    let finish = move || {
        drop(ps);
        if let (Some(mut pr), Some(out)) = (pr, recv) {
            // SAFETY: as above; this runs when the collective completed.
            pr.unpack_into(unsafe { &mut *out });
        }
    };
    let finish: Box<dyn FnOnce() + 'a> = Box::new(finish);
    // SAFETY: it runs (or is dropped) when the collective completes, which the request
    // holding the caller's buffers for 'a waits for before 'a ends.
    let finish: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(finish) };
    call("immediate collective", |e| {
        e.finish_next_with(finish);
        Ok(())
    });
    // SAFETY: the stand-ins are on the heap, owned by the last step, which outlives the
    // collective that uses them.
    unsafe { (s_ptr.map(|p| &*p), r_ptr.map(|p| &mut *p)) }
}
