//! The network-management interface of seed 001 (its Table 1): the only way the job
//! manager's daemons touch communication, so that another communication layer can plug
//! in by implementing [`NetworkManager`].
//!
//! Contract (what an implementation promises the daemons):
//! * Initialization and maintenance — [`init_node`](NetworkManager::init_node) prepares
//!   a node's communication (called once per node daemon), [`add_node`] and
//!   [`remove_node`] update the topology (a node that went down is removed; its jobs end).
//! * Process control — [`init_job`](NetworkManager::init_job) allocates a job's
//!   communication context and starts it (no rank sends before every rank can receive);
//!   [`end_job`](NetworkManager::end_job) cleans it up, whatever state it is in.
//! * Context switch control, in this order for the outgoing job —
//!   [`halt_network`](NetworkManager::halt_network): stop injecting at a packet boundary
//!   and flush the network (nothing of the job is in flight when it returns), then stop
//!   the job's processes; [`context_switch`](NetworkManager::context_switch): swap
//!   communication buffers (the outgoing job's valid packets to backing store, the
//!   incoming job's back); [`release_network`](NetworkManager::release_network) for the
//!   incoming job: synchronize its nodes, restart sending, continue its processes. Each
//!   call is bounded and reports what it did ([`StageReport`]), so that every switch's
//!   three stages can be timed and recorded.
//!
//! [`add_node`]: NetworkManager::add_node
//! [`remove_node`]: NetworkManager::remove_node

use crate::matrix::JobId;
use std::time::Duration;

/// A node of the cluster (a column of the matrix).
pub type NodeId = u32;

/// What a job runs: its ranks, over which nodes, the program and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub ranks: u32,
    pub nodes: Vec<NodeId>,
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// Its working directory.
    pub cwd: String,
}

/// What one stage of a context switch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageReport {
    /// How long it took.
    pub took: Duration,
    /// Datagrams moved to (or from) backing store, when known.
    pub datagrams: u64,
    /// Their bytes, when known.
    pub bytes: u64,
    /// What did not go as promised (a process that did not halt in time, say).
    pub warning: Option<String>,
}

/// The network-management library of a communication layer (module docs).
pub trait NetworkManager {
    /// The layer's error.
    type Error: std::error::Error;

    /// Prepares the communication of `node` in a cluster of `nodes`.
    fn init_node(&mut self, node: NodeId, nodes: u32) -> Result<(), Self::Error>;
    /// `node` joined (or came back).
    fn add_node(&mut self, node: NodeId) -> Result<(), Self::Error>;
    /// `node` left or went down.
    fn remove_node(&mut self, node: NodeId) -> Result<(), Self::Error>;

    /// Allocates `job`'s communication context and starts its processes.
    fn init_job(&mut self, job: JobId, spec: &JobSpec) -> Result<(), Self::Error>;
    /// Ends `job` and frees its context, whatever state it is in.
    fn end_job(&mut self, job: JobId) -> Result<(), Self::Error>;

    /// Stage 1 for the outgoing `job`: stop sending at a packet boundary, flush the
    /// network, stop its processes.
    fn halt_network(&mut self, job: JobId) -> Result<StageReport, Self::Error>;
    /// Stage 2: the outgoing job's buffers to backing store, the incoming job's back.
    fn context_switch(
        &mut self,
        outgoing: &[JobId],
        incoming: &[JobId],
    ) -> Result<StageReport, Self::Error>;
    /// Stage 3 for the incoming `job`: synchronize, restart sending, continue it.
    fn release_network(&mut self, job: JobId) -> Result<StageReport, Self::Error>;
}
