//! Collective schedules: rounds of sends and receives followed by local work.
//!
//! Contract: a schedule is a list of [`Round`]s. Starting a round sends every
//! [`CommOp::Send`] (its bytes are copied when it starts, so later local work may reuse
//! the region) and posts every [`CommOp::Recv`]; when all of the round's receives have
//! arrived, its [`LocalOp`]s run in order and the next round starts. Regions name bytes
//! of the caller's send buffer, receive buffer or a schedule-owned temporary. Each
//! message is identified by (source, context, collective sequence, step), so the steps an
//! algorithm assigns must be unique per (sender, receiver) within one collective.

/// Which buffer a region lies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buf {
    /// The caller's send buffer (read only).
    Send,
    /// The caller's receive buffer.
    Recv,
    /// Temporary buffer `i` of the schedule.
    Tmp(usize),
}

/// A byte range of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// The buffer.
    pub buf: Buf,
    /// Offset in bytes.
    pub off: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Region {
    /// A region.
    pub fn new(buf: Buf, off: usize, len: usize) -> Region {
        Region { buf, off, len }
    }
}

/// Communication of a round.
#[derive(Debug, Clone)]
pub enum CommOp {
    /// Send the region to these world ranks (several = one multicast or a fan-out).
    Send {
        /// Destinations (world ranks).
        to: Vec<u32>,
        /// Step id of the message.
        step: i32,
        /// Data.
        from: Region,
    },
    /// Receive the message `step` from a world rank into the region.
    Recv {
        /// Source (world rank).
        from: u32,
        /// Step id of the message.
        step: i32,
        /// Destination.
        into: Region,
    },
}

/// Local work after a round's receives completed.
#[derive(Debug, Clone)]
pub enum LocalOp {
    /// Copy bytes.
    Copy {
        /// Source.
        from: Region,
        /// Destination.
        to: Region,
    },
    /// `into = into op from` with the schedule's operation and datatype.
    Reduce {
        /// Operand.
        from: Region,
        /// Accumulator.
        into: Region,
    },
}

/// One round.
#[derive(Debug, Clone, Default)]
pub struct Round {
    /// Sends and receives started together.
    pub comm: Vec<CommOp>,
    /// Local work once the receives are done.
    pub local: Vec<LocalOp>,
}

/// A schedule under construction: rounds plus temporary buffer sizes.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The rounds.
    pub rounds: Vec<Round>,
    /// Sizes of the temporaries.
    pub tmps: Vec<usize>,
    /// Run on the shared-memory board instead (no rounds; blocking calls only).
    pub board: bool,
    /// Run hierarchically instead: boards inside hosts, the network between them.
    pub hier: bool,
    /// The blocks of a varcount call run on the board (`board` set).
    pub layout: Option<Box<super::varcount::Layout>>,
}

impl Plan {
    /// The plan of a call that runs hierarchically (boards and network).
    pub fn hierarchical() -> Plan {
        Plan {
            hier: true,
            ..Plan::default()
        }
    }

    /// The plan of a call that runs on the shared-memory board.
    pub fn on_board() -> Plan {
        Plan {
            board: true,
            ..Plan::default()
        }
    }

    /// The plan of an all-gather varcount that runs hierarchically, moving the blocks of
    /// `layout`.
    pub fn hierarchical_varcount(layout: super::varcount::Layout) -> Plan {
        Plan {
            hier: true,
            layout: Some(Box::new(layout)),
            ..Plan::default()
        }
    }

    /// The plan of a varcount call that runs on the shared-memory board, moving the
    /// blocks of `layout`.
    pub fn on_board_varcount(layout: super::varcount::Layout) -> Plan {
        Plan {
            board: true,
            layout: Some(Box::new(layout)),
            ..Plan::default()
        }
    }
    /// Adds a temporary of `len` bytes; returns its buffer id.
    pub fn tmp(&mut self, len: usize) -> Buf {
        self.tmps.push(len);
        Buf::Tmp(self.tmps.len() - 1)
    }
    /// Appends a round.
    pub fn round(&mut self, comm: Vec<CommOp>, local: Vec<LocalOp>) {
        if !comm.is_empty() || !local.is_empty() {
            self.rounds.push(Round { comm, local });
        }
    }
    /// Appends `other`, renumbering its temporaries and offsetting its steps.
    pub fn append(&mut self, other: Plan, step_offset: i32) {
        let base = self.tmps.len();
        let fix = |r: Region| match r.buf {
            Buf::Tmp(i) => Region::new(Buf::Tmp(i + base), r.off, r.len),
            _ => r,
        };
        self.tmps.extend(other.tmps);
        for round in other.rounds {
            let comm = round
                .comm
                .into_iter()
                .map(|c| match c {
                    CommOp::Send { to, step, from } => CommOp::Send {
                        to,
                        step: step + step_offset,
                        from: fix(from),
                    },
                    CommOp::Recv { from, step, into } => CommOp::Recv {
                        from,
                        step: step + step_offset,
                        into: fix(into),
                    },
                })
                .collect();
            let local = round
                .local
                .into_iter()
                .map(|l| match l {
                    LocalOp::Copy { from, to } => LocalOp::Copy {
                        from: fix(from),
                        to: fix(to),
                    },
                    LocalOp::Reduce { from, into } => LocalOp::Reduce {
                        from: fix(from),
                        into: fix(into),
                    },
                })
                .collect();
            self.rounds.push(Round { comm, local });
        }
    }
}
