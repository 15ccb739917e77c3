//! Communicators and processes.
//!
//! Contract: a communicator is a context id plus an ordered list of world ranks; ranks
//! given to and returned by the facade are communicator ranks, the engine works in world
//! ranks. Handles are `!Send` (funneled thread level).

use crate::Rank;
use std::marker::PhantomData;
use std::rc::Rc;

/// A communicator.
#[derive(Debug, Clone)]
pub struct SimpleCommunicator {
    ctx: u32,
    rank: Rank,
    /// World rank of each member; `None` for the identity (world).
    members: Option<Rc<Vec<u32>>>,
    size: Rank,
    /// Communicators derived from this one so far (all ranks derive in the same order).
    derived: Rc<std::cell::Cell<u32>>,
    _not_send: PhantomData<Rc<()>>,
}

impl SimpleCommunicator {
    pub(crate) fn world(rank: u32, size: u32) -> Self {
        SimpleCommunicator {
            ctx: 0,
            rank: rank as Rank,
            members: None,
            size: size as Rank,
            derived: Rc::new(std::cell::Cell::new(0)),
            _not_send: PhantomData,
        }
    }

    /// A new communicator with the same members and a new context, so its messages never
    /// match this one's. Collective: every member calls it in the same order (as MPI
    /// requires), which lets every rank derive the same context id without messages.
    pub fn duplicate(&self) -> SimpleCommunicator {
        let n = self.derived.get() + 1;
        self.derived.set(n);
        // splitmix-style mix of (parent context, derivation number); never 0 (world).
        let mut z = ((self.ctx as u64) << 32 | n as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let ctx = ((z ^ (z >> 31)) as u32).max(1);
        SimpleCommunicator {
            ctx,
            rank: self.rank,
            members: self.members.clone(),
            size: self.size,
            derived: Rc::new(std::cell::Cell::new(0)),
            _not_send: PhantomData,
        }
    }
    pub(crate) fn context(&self) -> u32 {
        self.ctx
    }
    /// World rank of communicator rank `r` (the caller checked the range).
    pub(crate) fn world_rank(&self, r: Rank) -> u32 {
        match &self.members {
            Some(m) => m.get(r as usize).copied().unwrap_or(u32::MAX),
            None => r as u32,
        }
    }
    /// Communicator rank of world rank `w`.
    pub(crate) fn comm_rank(&self, w: u32) -> Rank {
        match &self.members {
            Some(m) => m.iter().position(|&x| x == w).map_or(-1, |p| p as Rank),
            None => w as Rank,
        }
    }
}

/// Operations every communicator has.
pub trait Communicator {
    /// The underlying communicator.
    fn as_simple(&self) -> &SimpleCommunicator;

    /// This process's rank.
    fn rank(&self) -> Rank {
        self.as_simple().rank
    }
    /// Number of processes.
    fn size(&self) -> Rank {
        self.as_simple().size
    }
    /// The process at rank `r` (panics through the error handler if out of range).
    fn process_at_rank(&self, r: Rank) -> Process<'_> {
        let c = self.as_simple();
        if r < 0 || r >= c.size {
            crate::environment::fatal(
                "process_at_rank",
                crate::Error::InvalidRank {
                    rank: r,
                    size: c.size as usize,
                },
            );
        }
        Process { comm: c, rank: r }
    }
    /// A wildcard source (`MPI_ANY_SOURCE`).
    fn any_process(&self) -> AnyProcess<'_> {
        AnyProcess {
            comm: self.as_simple(),
        }
    }
    /// This process.
    fn this_process(&self) -> Process<'_> {
        let c = self.as_simple();
        Process {
            comm: c,
            rank: c.rank,
        }
    }
    /// Ends the whole job with `code` (the launcher terminates every other rank).
    fn abort(&self, code: i32) -> ! {
        let rank = self.as_simple().rank;
        eprintln!("phalanx: rank {rank}: abort({code}) called");
        std::process::exit(if code == 0 { 1 } else { code })
    }
}

impl Communicator for SimpleCommunicator {
    fn as_simple(&self) -> &SimpleCommunicator {
        self
    }
}

/// A particular process of a communicator.
#[derive(Debug, Clone, Copy)]
pub struct Process<'a> {
    pub(crate) comm: &'a SimpleCommunicator,
    pub(crate) rank: Rank,
}

impl Process<'_> {
    /// Its rank in the communicator.
    pub fn rank(&self) -> Rank {
        self.rank
    }
}

/// Any process of a communicator (receive wildcard).
#[derive(Debug, Clone, Copy)]
pub struct AnyProcess<'a> {
    pub(crate) comm: &'a SimpleCommunicator,
}
