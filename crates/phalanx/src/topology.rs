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
    _not_send: PhantomData<Rc<()>>,
}

impl SimpleCommunicator {
    pub(crate) fn world(rank: u32, size: u32) -> Self {
        SimpleCommunicator {
            ctx: 0,
            rank: rank as Rank,
            members: None,
            size: size as Rank,
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

