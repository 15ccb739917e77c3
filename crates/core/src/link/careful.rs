//! The careful link: [`phalanx_proto::careful`] over the shared UDP socket, for networks
//! the user declares reliable (seed 003).
//!
//! Contract: no retransmission and no acknowledgements — window flow control only; a
//! gap, duplicate or reordering breaks the link and [`Link::poll`] reports it naming
//! both ranks. A multi-send is one multi-target frame: the smallest window among its
//! readers decides whether it goes, it takes one buffer in each, and it leaves as one
//! `sendmmsg` to all of them. Frames the message layer does not take yet stay in
//! [`Held`] (they keep their receive buffer, which is the flow control); the engine's
//! careful module decides when they are taken or copied out.

use super::{Link, LinkReport, Net, Saved};
use crate::error::{Error, Result};
use phalanx_proto::careful::{Careful, CarefulEvent};
use std::collections::VecDeque;

/// Frames the careful protocol delivered that the message layer has not taken yet: per
/// source, in arrival order. Each occupies one of the protocol's receive buffers, so
/// there are at most R of them.
#[derive(Default)]
pub(crate) struct Held {
    pub(crate) frames: Vec<VecDeque<Vec<u8>>>,
    pub(crate) count: usize,
}

impl Held {
    pub(crate) fn is_empty_for(&self, src: u32) -> bool {
        self.frames.get(src as usize).is_none_or(|q| q.is_empty())
    }

    /// Keeps `frame` from `src` behind the others from it.
    pub(crate) fn push(&mut self, size: u32, src: u32, frame: Vec<u8>) {
        if self.frames.len() <= src as usize {
            self.frames.resize_with(size as usize, Default::default);
        }
        self.frames[src as usize].push_back(frame);
        self.count += 1;
    }
}

/// The careful protocol to every UDP peer.
pub(crate) struct CarefulLink {
    pub(crate) proto: Careful,
    pub(crate) held: Held,
    size: u32,
    halted: bool,
    /// Saved and not restored yet: every new frame is held behind the saved ones.
    pub(crate) saved_out: bool,
}

impl CarefulLink {
    pub(crate) fn new(proto: Careful, size: u32) -> CarefulLink {
        CarefulLink {
            proto,
            held: Held::default(),
            size,
            halted: false,
            saved_out: false,
        }
    }
}

impl Link for CarefulLink {
    #[inline]
    fn has_room(&mut self, peers: &[u32], _len: usize) -> bool {
        !self.halted && self.proto.send_space(peers) > 0
    }

    fn send(
        &mut self,
        _net: &mut Net,
        now: u64,
        peers: &[u32],
        dgram: Vec<u8>,
    ) -> std::result::Result<(), Vec<u8>> {
        if self.halted {
            return Err(dgram);
        }
        self.proto.send(now, peers, dgram).map_err(|r| r.datagram)
    }

    fn poll(&mut self, net: &mut Net, now: u64) -> Result<bool> {
        // A halted job is silent by design: no stall is suspected while halted (the
        // timers move by the halted time on resume).
        if !self.halted && self.proto.poll_timeout().is_some_and(|d| d <= now) {
            self.proto.handle_timeout(now);
        }
        let mut did = false;
        while let Some(tx) = self.proto.poll_transmit(now) {
            did = true;
            match tx.targets {
                [one] => net.send_to(*one, tx.bytes),
                many => net.multi_send(many, tx.bytes),
            }
        }
        if let Some(ev) = self.proto.poll_event() {
            return Err(Error::LinkFailure(match ev {
                CarefulEvent::LinkError { .. } | CarefulEvent::SuspectedLoss { .. } => {
                    ev.to_string()
                }
            }));
        }
        Ok(did)
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.proto.poll_timeout()
    }

    fn report(&mut self) -> LinkReport {
        LinkReport {
            halted: self.halted,
            // The careful protocol has nothing in flight once its transmit queue is
            // empty: the network is declared reliable.
            in_flight: u64::from(!self.proto.is_idle()),
            peers: Vec::new(),
            held: self.held.count as u64,
        }
    }

    fn halt(&mut self) {
        self.halted = true;
    }

    fn save(&mut self) -> Saved {
        let mut frames = Vec::with_capacity(self.held.count);
        for (src, q) in self.held.frames.iter_mut().enumerate() {
            frames.extend(q.drain(..).map(|d| (src as u32, d)));
        }
        self.held.count = 0;
        self.saved_out = true;
        Saved { frames }
    }

    fn restore(&mut self, saved: Saved) {
        let mut before = std::mem::take(&mut self.held);
        for (src, d) in saved.frames {
            self.held.push(self.size, src, d);
        }
        for (src, q) in before.frames.iter_mut().enumerate() {
            for d in q.drain(..) {
                self.held.push(self.size, src as u32, d);
            }
        }
        self.saved_out = false;
    }

    fn resume(&mut self, stopped_ns: u64) {
        self.halted = false;
        self.proto.postpone_timers(stopped_ns);
    }
}
