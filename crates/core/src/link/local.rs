//! The link of a rank to itself: a FIFO of datagrams, delivered by the engine's next
//! progress round.
//!
//! Contract: unbounded by datagram count (a rank's sends to itself are bounded by what
//! its program posts), ordered, never refuses a datagram unless halted; what it holds
//! counts as held, never as in flight.

use super::{Link, LinkReport, Net, Saved};
use crate::error::Result;
use std::collections::VecDeque;

/// This rank's datagrams to itself.
#[derive(Default)]
pub(crate) struct LocalLink {
    queue: VecDeque<Vec<u8>>,
    halted: bool,
}

impl LocalLink {
    /// The oldest datagram, if any.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Vec<u8>> {
        self.queue.pop_front()
    }

    /// Nothing queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

impl Link for LocalLink {
    fn has_room(&mut self, _peers: &[u32], _len: usize) -> bool {
        !self.halted
    }

    fn send(
        &mut self,
        _net: &mut Net,
        _now: u64,
        peers: &[u32],
        dgram: Vec<u8>,
    ) -> std::result::Result<(), Vec<u8>> {
        if self.halted {
            return Err(dgram);
        }
        // Every destination is this rank: one copy per destination named.
        if let Some((_, rest)) = peers.split_first() {
            for _ in rest {
                self.queue.push_back(dgram.clone());
            }
            self.queue.push_back(dgram);
        }
        Ok(())
    }

    fn poll(&mut self, _net: &mut Net, _now: u64) -> Result<bool> {
        Ok(false)
    }

    fn poll_timeout(&self) -> Option<u64> {
        None
    }

    fn report(&mut self) -> LinkReport {
        LinkReport {
            halted: self.halted,
            held: self.queue.len() as u64,
            ..LinkReport::default()
        }
    }

    fn halt(&mut self) {
        self.halted = true;
    }

    fn save(&mut self) -> Saved {
        Saved {
            frames: self.queue.drain(..).map(|d| (u32::MAX, d)).collect(),
        }
    }

    fn restore(&mut self, saved: Saved) {
        for (_, d) in saved.frames.into_iter().rev() {
            self.queue.push_front(d);
        }
    }

    fn resume(&mut self, _stopped_ns: u64) {
        self.halted = false;
    }
}
