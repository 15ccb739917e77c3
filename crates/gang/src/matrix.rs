//! The gang matrix (Ousterhout): time slots × nodes, one job per cell.
//!
//! Contract:
//! * A job takes cells of **one row** (slot), on as many distinct nodes as it asks for;
//!   placement is first fit — the first row with enough free cells on nodes that are up,
//!   lowest nodes first — and opens a new row only when none has room, up to
//!   `max_slots` rows. A job that fits nowhere is refused ([`PlaceError`]) and stays
//!   pending; several small jobs may share a row.
//! * No cell ever holds two jobs; a job's cells are exactly the ones it was given until
//!   it is removed; a node marked down gets no new cell, and [`Matrix::node_down`] names
//!   the jobs that had one there (they end; the caller removes them).
//! * Switching is round-robin over the rows that hold a job ([`Matrix::advance`]): every
//!   such row becomes current within as many switches as there are rows; empty rows are
//!   skipped; with one busy row nothing switches.
//! * Pure data, no I/O: the master drives it and persists the placements.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A job's identifier (the master's job id).
pub type JobId = u64;

/// Where a job runs: its slot (row) and its nodes (columns), ascending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub slot: u32,
    pub nodes: Vec<u32>,
}

/// Why a job cannot be placed now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    /// More nodes than the cluster has up: it can never run.
    #[error("the job needs {want} nodes; the cluster has {up} up")]
    TooLarge { want: u32, up: u32 },
    /// Every slot is full for a job of that width: it waits.
    #[error("no slot has {want} free nodes (all {slots} slots are in use)")]
    Full { want: u32, slots: u32 },
    /// A job needs at least one node.
    #[error("a job needs at least one node")]
    Empty,
    /// The job is already placed.
    #[error("job {0} is already placed")]
    Placed(JobId),
}

/// The gang matrix.
#[derive(Debug, Clone)]
pub struct Matrix {
    nodes: u32,
    max_slots: u32,
    /// `rows[slot][node]`: the job in that cell.
    rows: Vec<Vec<Option<JobId>>>,
    down: Vec<bool>,
    placed: BTreeMap<JobId, Placement>,
    current: u32,
}

impl Matrix {
    /// An empty matrix of `nodes` columns and at most `max_slots` rows (at least 1).
    pub fn new(nodes: u32, max_slots: u32) -> Matrix {
        Matrix {
            nodes,
            max_slots: max_slots.max(1),
            rows: Vec::new(),
            down: vec![false; nodes as usize],
            placed: BTreeMap::new(),
            current: 0,
        }
    }

    /// Nodes (columns).
    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// Rows in use or ever opened.
    pub fn slots(&self) -> u32 {
        self.rows.len() as u32
    }

    /// Nodes that are up.
    pub fn nodes_up(&self) -> u32 {
        self.down.iter().filter(|d| !**d).count() as u32
    }

    /// Places `job` on `want` nodes (module docs).
    pub fn place(&mut self, job: JobId, want: u32) -> Result<Placement, PlaceError> {
        if want == 0 {
            return Err(PlaceError::Empty);
        }
        if self.placed.contains_key(&job) {
            return Err(PlaceError::Placed(job));
        }
        let up = self.nodes_up();
        if want > up {
            return Err(PlaceError::TooLarge { want, up });
        }
        let free = |row: &Vec<Option<JobId>>, down: &[bool]| -> Vec<u32> {
            (0..row.len())
                .filter(|&n| row[n].is_none() && !down[n])
                .map(|n| n as u32)
                .collect()
        };
        let mut slot = None;
        for (s, row) in self.rows.iter().enumerate() {
            if free(row, &self.down).len() >= want as usize {
                slot = Some(s);
                break;
            }
        }
        let slot = match slot {
            Some(s) => s,
            None if (self.rows.len() as u32) < self.max_slots => {
                self.rows.push(vec![None; self.nodes as usize]);
                self.rows.len() - 1
            }
            None => {
                return Err(PlaceError::Full {
                    want,
                    slots: self.max_slots,
                })
            }
        };
        let nodes: Vec<u32> = free(&self.rows[slot], &self.down)
            .into_iter()
            .take(want as usize)
            .collect();
        for &n in &nodes {
            self.rows[slot][n as usize] = Some(job);
        }
        let p = Placement {
            slot: slot as u32,
            nodes,
        };
        self.placed.insert(job, p.clone());
        Ok(p)
    }

    /// Puts `job` back exactly at `p` (a restarted master taking over its jobs): the
    /// cells must be free and on nodes of the matrix; rows are opened as needed.
    pub fn insert(&mut self, job: JobId, p: &Placement) -> Result<(), PlaceError> {
        if self.placed.contains_key(&job) {
            return Err(PlaceError::Placed(job));
        }
        let slot = p.slot as usize;
        let fits = p.slot < self.max_slots
            && !p.nodes.is_empty()
            && p.nodes.iter().all(|&n| {
                n < self.nodes && self.rows.get(slot).is_none_or(|r| r[n as usize].is_none())
            });
        if !fits {
            return Err(PlaceError::Full {
                want: p.nodes.len() as u32,
                slots: self.max_slots,
            });
        }
        while self.rows.len() <= slot {
            self.rows.push(vec![None; self.nodes as usize]);
        }
        for &n in &p.nodes {
            self.rows[slot][n as usize] = Some(job);
        }
        self.placed.insert(job, p.clone());
        Ok(())
    }

    /// Makes `slot` current (a restarted master: the slot whose jobs run).
    pub fn set_current(&mut self, slot: u32) {
        if (slot as usize) < self.rows.len() {
            self.current = slot;
        }
    }

    /// Frees `job`'s cells; its placement, if it had one.
    pub fn remove(&mut self, job: JobId) -> Option<Placement> {
        let p = self.placed.remove(&job)?;
        for &n in &p.nodes {
            self.rows[p.slot as usize][n as usize] = None;
        }
        Some(p)
    }

    /// Where `job` runs.
    pub fn placement(&self, job: JobId) -> Option<&Placement> {
        self.placed.get(&job)
    }

    /// The current slot (the one running).
    pub fn current(&self) -> u32 {
        self.current
    }

    /// The jobs of `slot`, ascending, each once.
    pub fn jobs_in(&self, slot: u32) -> Vec<JobId> {
        let mut v: Vec<JobId> = self
            .rows
            .get(slot as usize)
            .map(|r| r.iter().flatten().copied().collect())
            .unwrap_or_default();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn busy(&self, slot: usize) -> bool {
        self.rows[slot].iter().any(|c| c.is_some())
    }

    /// Makes the next row that holds a job current (round-robin) and returns it; `None`
    /// when no row holds one. The current row stays current when it is the only busy
    /// one.
    pub fn advance(&mut self) -> Option<u32> {
        let n = self.rows.len();
        if n == 0 {
            return None;
        }
        for k in 1..=n {
            let s = (self.current as usize + k) % n;
            if self.busy(s) {
                self.current = s as u32;
                return Some(self.current);
            }
        }
        None
    }

    /// Makes `slot` current if it holds a job, else the next busy row (after a removal
    /// emptied the current row); `None` when nothing is placed.
    pub fn settle(&mut self) -> Option<u32> {
        if (self.current as usize) < self.rows.len() && self.busy(self.current as usize) {
            return Some(self.current);
        }
        self.advance()
    }

    /// Marks `node` down: it gets no new cell. Returns the jobs that had a cell on it.
    pub fn node_down(&mut self, node: u32) -> Vec<JobId> {
        let Some(d) = self.down.get_mut(node as usize) else {
            return Vec::new();
        };
        *d = true;
        let mut v: Vec<JobId> = self.rows.iter().filter_map(|r| r[node as usize]).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Marks `node` up (again): it gets cells.
    pub fn node_up(&mut self, node: u32) {
        if let Some(d) = self.down.get_mut(node as usize) {
            *d = false;
        }
    }

    /// Whether `node` is down.
    pub fn is_down(&self, node: u32) -> bool {
        self.down.get(node as usize).copied().unwrap_or(true)
    }

    /// The matrix as rows of cells (`None`: free), for display and `--json`.
    pub fn cells(&self) -> &[Vec<Option<JobId>>] {
        &self.rows
    }

    /// Every placed job and its placement.
    pub fn placements(&self) -> impl Iterator<Item = (&JobId, &Placement)> {
        self.placed.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The invariants of the module docs.
    fn check(m: &Matrix) {
        for (job, p) in &m.placed {
            assert!((p.slot as usize) < m.rows.len());
            for &n in &p.nodes {
                assert_eq!(m.rows[p.slot as usize][n as usize], Some(*job));
            }
            let cells = m
                .rows
                .iter()
                .flatten()
                .filter(|c| **c == Some(*job))
                .count();
            assert_eq!(cells, p.nodes.len(), "job {job} holds exactly its cells");
        }
        for row in &m.rows {
            for c in row.iter().flatten() {
                assert!(m.placed.contains_key(c), "cell of an unplaced job");
            }
        }
    }

    #[test]
    fn first_fit_shares_rows_and_opens_new_ones() {
        let mut m = Matrix::new(4, 3);
        assert_eq!(
            m.place(1, 4).unwrap(),
            Placement {
                slot: 0,
                nodes: vec![0, 1, 2, 3]
            }
        );
        assert_eq!(
            m.place(2, 2).unwrap(),
            Placement {
                slot: 1,
                nodes: vec![0, 1]
            }
        );
        assert_eq!(
            m.place(3, 2).unwrap(),
            Placement {
                slot: 1,
                nodes: vec![2, 3]
            }
        );
        assert_eq!(m.place(4, 3).unwrap().slot, 2);
        assert_eq!(
            m.place(5, 1).unwrap(),
            Placement {
                slot: 2,
                nodes: vec![3]
            }
        );
        assert_eq!(m.place(6, 1), Err(PlaceError::Full { want: 1, slots: 3 }));
        assert_eq!(m.place(7, 5), Err(PlaceError::TooLarge { want: 5, up: 4 }));
        assert_eq!(m.place(1, 1), Err(PlaceError::Placed(1)));
        assert_eq!(m.place(8, 0), Err(PlaceError::Empty));
        assert_eq!(m.jobs_in(1), vec![2, 3]);
        // A removal frees cells for the next job of that width.
        m.remove(2);
        assert_eq!(
            m.place(6, 1).unwrap(),
            Placement {
                slot: 1,
                nodes: vec![0]
            }
        );
        check(&m);
    }

    #[test]
    fn round_robin_skips_empty_rows() {
        let mut m = Matrix::new(2, 4);
        assert_eq!(m.advance(), None);
        m.place(1, 2).unwrap();
        m.place(2, 2).unwrap();
        m.place(3, 2).unwrap();
        assert_eq!(m.current(), 0);
        assert_eq!(m.advance(), Some(1));
        m.remove(3);
        assert_eq!(m.advance(), Some(0), "row 2 is empty now");
        m.remove(1);
        assert_eq!(m.settle(), Some(1));
        assert_eq!(m.advance(), Some(1), "the only busy row stays");
    }

    #[test]
    fn a_node_down_names_its_jobs_and_takes_no_new_cell() {
        let mut m = Matrix::new(3, 2);
        m.place(1, 3).unwrap();
        m.place(2, 1).unwrap();
        assert_eq!(m.node_down(0), vec![1, 2]);
        m.remove(1);
        m.remove(2);
        assert_eq!(m.place(3, 3), Err(PlaceError::TooLarge { want: 3, up: 2 }));
        assert_eq!(m.place(3, 2).unwrap().nodes, vec![1, 2]);
        check(&m);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Place(u8, u8),
        Remove(u8),
        Advance,
        Down(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..32, 1u8..6).prop_map(|(j, w)| Op::Place(j, w)),
            (0u8..32).prop_map(Op::Remove),
            Just(Op::Advance),
            (0u8..5).prop_map(Op::Down),
        ]
    }

    proptest! {
        /// Any sequence of placements, removals, switches and node failures keeps every
        /// invariant, and every busy row becomes current within one round of switches.
        #[test]
        fn invariants_hold(ops in proptest::collection::vec(op(), 1..200)) {
            let mut m = Matrix::new(5, 4);
            for o in ops {
                match o {
                    Op::Place(j, w) => {
                        let r = m.place(j as JobId, w as u32);
                        if let Ok(p) = &r {
                            prop_assert_eq!(p.nodes.len(), w as usize);
                            prop_assert!(p.nodes.iter().all(|&n| !m.is_down(n)));
                        }
                    }
                    Op::Remove(j) => {
                        m.remove(j as JobId);
                    }
                    Op::Advance => {
                        m.advance();
                    }
                    Op::Down(n) => {
                        for j in m.node_down(n as u32) {
                            m.remove(j);
                        }
                    }
                }
                check(&m);
            }
            let busy: Vec<u32> = (0..m.slots()).filter(|&s| !m.jobs_in(s).is_empty()).collect();
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..m.slots() {
                if let Some(s) = m.advance() {
                    seen.insert(s);
                }
            }
            prop_assert_eq!(seen.into_iter().collect::<Vec<_>>(), busy);
        }
    }
}
