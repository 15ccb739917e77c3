//! Point-to-point over UDP with the careful protocol, for networks the user declares
//! reliable (`PHALANX_RELIABLE_NET=1`, seed 003).
//!
//! Contract: user point-to-point traffic to UDP peers goes through
//! [`phalanx_proto::careful`] instead of go-back-n: no retransmission, no timers, no
//! acknowledgements — window flow control only. A gap, duplicate or reordering on a link
//! ends the rank's current wait in an error naming the link (`careful link A→B broken`);
//! a wait on a peer that hears nothing from it for `PHALANX_CAREFUL_STALL` (10 s) ends in
//! "suspected loss A→B" — never a silent hang.
//!
//! A frame that starts a message no posted receive wants stays in its receive buffer
//! ([`Held`]: it keeps occupying the sender's window, which is the flow control), and
//! every later frame of its link waits behind it. A held frame is taken when a receive
//! for it is posted (the buffer is then consumed), or moved to ordinary memory only when
//! the protocol advises it ([`Careful::copy_out_advice`]: the sender's window to us is
//! closing, or free buffers run low) and the unexpected-message limit allows — so a flood
//! neither deadlocks the windows nor grows memory past that limit. The receive buffers R that the windows share are what the
//! smallest socket buffer of the job can queue unread (each rank reports its granted
//! `SO_RCVBUF` in full-size datagrams at start-up), so a sender inside its window never
//! overflows a socket buffer; a buffer too small for three frames per sender is warned
//! about.

use super::{Engine, RawStatus};
use crate::error::{Error, Result};
use crate::link::Link;
use phalanx_boot::Table;
use phalanx_proto::careful::{Careful, CarefulConfig, Verdict};
use phalanx_wire::{Header, Kind, MsgKind, Packet};

/// Receive buffers R when no rank could read its socket's granted buffer.
const FALLBACK_FRAMES_PER_RANK: u64 = 64;

/// R, the receive buffers (frames) every rank grants its senders: the fewest
/// largest-size datagrams any rank's socket can queue unread (each rank's endpoint in
/// `table` says how many its kernel granted), so that a sender that stays inside its
/// window can never overflow a socket buffer. Every rank computes it from the same table,
/// so all agree. `None` if no rank could tell.
pub(super) fn frames_granted(table: &Table) -> Option<u64> {
    table
        .endpoints
        .iter()
        .map(|e| e.recv_frames)
        .filter(|&f| f > 0)
        .min()
}

/// The careful engine for this rank, if the network is declared reliable
/// (`reliable`; `stall_ns` overrides the silence bound).
pub(super) fn setup(
    reliable: bool,
    stall_ns: Option<u64>,
    table: &Table,
    rank: u32,
    size: u32,
) -> Option<Careful> {
    if !reliable {
        return None;
    }
    let peers = u64::from(size.max(2) - 1);
    let granted = frames_granted(table);
    let buffers = granted.unwrap_or(FALLBACK_FRAMES_PER_RANK * u64::from(size.max(2)));
    // The protocol needs three frames per sender (W ≥ 3); a smaller socket buffer could
    // drop frames on a loss-free link, which the protocol would report as a broken link.
    if buffers < 3 * peers {
        tracing::warn!(
            "phalanx: rank {rank}: PHALANX_RELIABLE_NET=1 but the smallest socket receive \
             buffer of the job holds {buffers} full-size datagrams, fewer than the 3 per \
             sender ({}) the careful protocol needs; raise net.core.rmem_max or the \
             link may report loss that is only a full buffer",
            3 * peers
        );
    }
    let mut cfg = CarefulConfig {
        buffers: u32::try_from(buffers).unwrap_or(u32::MAX),
        ..CarefulConfig::default()
    };
    if let Some(ns) = stall_ns {
        cfg.stall_ns = ns;
    }
    tracing::debug!(
        "phalanx: rank {rank}: careful protocol: R = {} receive buffers ({}), window {}",
        cfg.buffers,
        if granted.is_some() {
            "from the granted socket buffers"
        } else {
            "default"
        },
        cfg.buffers / peers.max(1) as u32
    );
    Some(Careful::new(cfg, table.job_key, rank, size))
}

impl Engine {
    /// Handles a careful frame from the network.
    pub(super) fn careful_input(&mut self, now: u64, pkt: &Packet<'_>) {
        let Some(c) = self.links.careful.as_mut() else {
            self.stats.drop_invalid += 1;
            return;
        };
        match c.proto.handle_packet(now, pkt) {
            Verdict::Deliver => {
                let src = pkt.src();
                // On the timeline a careful message is numbered as its link delivers it:
                // frames held for a receive that wants them are handed over out of order.
                let starts = matches!(pkt.msg_kind(), MsgKind::Rts)
                    || (pkt.msg_kind() == MsgKind::Eager && pkt.aux() == 0);
                if crate::trace::on() && starts && src < self.size {
                    self.trace_numbers.arrived(src, pkt.tag(), pkt.msg_len());
                }
                // Nothing from `src` waits before it (saved frames wait until restored).
                let held = |e: &Engine| {
                    e.links
                        .careful
                        .as_ref()
                        .is_none_or(|c| !c.saved_out && c.held.is_empty_for(src))
                };
                let take = match pkt.msg_kind() {
                    // The start of a message: taken if a receive wants it and nothing from
                    // its link waits before it; else it stays in its buffer.
                    MsgKind::Eager if pkt.aux() == 0 => held(self) && self.wanted(pkt),
                    MsgKind::Rts => held(self) && self.wanted(pkt),
                    // A later fragment follows its first one: held if that one is.
                    MsgKind::Eager => held(self) || self.receiving_from(src),
                    // Protocol answers (clear-to-send, data of our rendezvous sends, …) are
                    // not messages to match: never held.
                    _ => true,
                };
                if take {
                    self.on_message(pkt, true);
                    if let Some(c) = self.links.careful.as_mut() {
                        c.proto.consumed(now, src);
                    }
                } else if let Some(c) = self.links.careful.as_mut() {
                    c.held.push(self.size, src, pkt.as_bytes().to_vec());
                    self.stats.careful_held += 1;
                }
            }
            Verdict::Update => {}
            Verdict::Error(_) => self.stats.drop_invalid += 1,
            Verdict::Invalid(_) => self.stats.drop_invalid += 1,
        }
    }

    /// The envelope of the first held message from `src` (any: `None`) with `tag` (any:
    /// `None`) on `ctx` (for probes: held messages are not in the unexpected queue).
    pub(super) fn careful_probe(
        &self,
        src: Option<u32>,
        tag: Option<i32>,
        ctx: u32,
    ) -> Option<RawStatus> {
        let held = &self.links.careful.as_ref()?.held;
        if held.count == 0 {
            return None;
        }
        held.frames
            .iter()
            .flatten()
            .filter_map(|d| Packet::new_checked(d).ok())
            .find(|p| {
                (p.msg_kind() == MsgKind::Rts || (p.msg_kind() == MsgKind::Eager && p.aux() == 0))
                    && p.context() == ctx
                    && src.is_none_or(|s| s == p.src())
                    && tag.is_none_or(|t| t == p.tag())
            })
            .map(|p| RawStatus {
                source: p.src(),
                tag: p.tag(),
                bytes: p.msg_len(),
                cancelled: false,
            })
    }

    /// Whether a posted receive wants the message `pkt` starts.
    fn wanted(&self, pkt: &Packet<'_>) -> bool {
        self.has_posted_for(pkt.src(), pkt.tag(), pkt.context())
    }

    /// Hands held messages to the message layer, per link in arrival order: every one a
    /// posted receive now wants (its frames are consumed; an earlier one it does not want
    /// stays, which is MPI's order: only messages one receive could match are ordered),
    /// and, where the protocol advises copying out, the oldest ones into ordinary memory
    /// as far as the unexpected-message limit allows (what was copied out is always older
    /// than what is held, so the unexpected queue keeps arrival order).
    fn careful_release(&mut self, now: u64) -> bool {
        let advice = self
            .links
            .careful
            .as_ref()
            .and_then(|c| c.proto.copy_out_advice());
        let sources = self
            .links
            .careful
            .as_ref()
            .map_or(0, |c| c.held.frames.len());
        let mut did = false;
        for src in 0..sources as u32 {
            let Some(c) = self.links.careful.as_mut() else {
                return did;
            };
            let mut queue = std::mem::take(&mut c.held.frames[src as usize]);
            let mut kept = std::collections::VecDeque::new();
            let mut copying = advice.is_some_and(|(p, _)| p == src);
            while let Some(first) = queue.pop_front() {
                // The message's frames: its first one and the later fragments after it.
                let mut group = vec![first];
                while queue.front().is_some_and(|d| {
                    Packet::new_checked(d)
                        .is_ok_and(|p| p.msg_kind() == MsgKind::Eager && p.aux() != 0)
                }) {
                    group.extend(queue.pop_front());
                }
                let Ok(head) = Packet::new_checked(&group[0]) else {
                    continue; // validated on arrival: cannot happen
                };
                let starts = matches!(head.msg_kind(), MsgKind::Rts)
                    || (head.msg_kind() == MsgKind::Eager && head.aux() == 0);
                let n = group.len() as u32;
                if !starts || self.wanted(&head) {
                    for d in &group {
                        if let Ok(p) = Packet::new_checked(d) {
                            self.on_message(&p, true);
                        }
                        if let Some(c) = self.links.careful.as_mut() {
                            c.proto.consumed(now, src);
                        }
                    }
                } else if copying && kept.is_empty() && self.on_message(&head, false) {
                    for d in &group[1..] {
                        if let Ok(p) = Packet::new_checked(d) {
                            self.on_message(&p, true);
                        }
                    }
                    self.stats.careful_copied_out += u64::from(n);
                    if let Some(c) = self.links.careful.as_mut() {
                        c.proto.copied_out(src, n);
                    }
                } else {
                    copying = false;
                    kept.extend(group);
                    continue;
                }
                if let Some(c) = self.links.careful.as_mut() {
                    c.held.count -= n as usize;
                }
                did = true;
            }
            if let Some(c) = self.links.careful.as_mut() {
                c.held.frames[src as usize] = kept;
            }
        }
        did
    }

    /// Drops the held request-to-send of `src`'s rendezvous send `sreq` (its sender
    /// cancelled it, [`Engine::cancel`]): true when it was held here (unmatched).
    pub(super) fn careful_drop_rts(&mut self, src: u32, sreq: u64) -> bool {
        let now = self.now();
        let Some(c) = self.links.careful.as_mut() else {
            return false;
        };
        let Some(q) = c.held.frames.get_mut(src as usize) else {
            return false;
        };
        let Some(i) = q.iter().position(|d| {
            Packet::new_checked(d).is_ok_and(|p| p.msg_kind() == MsgKind::Rts && p.aux() == sreq)
        }) else {
            return false;
        };
        q.remove(i);
        c.held.count -= 1;
        c.proto.consumed(now, src);
        true
    }

    /// Held frames the message layer can take now, then the protocol: timers, frames
    /// to put on the wire, link errors.
    pub(super) fn careful_progress(&mut self, now: u64) -> Result<bool> {
        let mut did = false;
        if self
            .links
            .careful
            .as_ref()
            .is_some_and(|c| c.held.count > 0 && !c.saved_out)
        {
            did |= self.careful_release(now);
        }
        let l = &mut self.links;
        match l.careful.as_mut() {
            Some(c) => Ok(did | c.poll(&mut l.net, now)?),
            None => Ok(did),
        }
    }
}

impl Engine {
    /// Finalize, first step on careful links: tell every UDP peer how many data frames
    /// were sent to it. Returns how many peers' counts this rank waits for.
    pub(super) fn careful_send_counts(&mut self) -> usize {
        let Some(c) = self.links.careful.as_ref() else {
            return 0;
        };
        let counts = c.proto.counts();
        let peers: Vec<u32> = (0..self.size)
            .filter(|&p| p != self.rank && !self.via_shm(p))
            .collect();
        for &p in &peers {
            let mut h = Header::new(Kind::GbnData, self.job_key, self.rank);
            h.msg = MsgKind::LinkCounts;
            h.aux = counts.get(p as usize).map_or(0, |c| c.data_sent);
            self.queue_frames(p, vec![h.to_datagram(&[])]);
        }
        let now = self.now();
        if let Some(c) = self.links.careful.as_mut() {
            for &p in &peers {
                c.proto.waiting_on(now, p);
            }
        }
        peers.len()
    }

    /// A peer's final count arrived: every data frame it sent (and this count frame) must
    /// have arrived, in order, on a link declared reliable.
    pub(super) fn careful_counts_arrived(&mut self, src: u32, sent: u64) {
        self.careful_counts_seen += 1;
        let Some(c) = self.links.careful.as_mut() else {
            return;
        };
        c.proto.stop_waiting(src);
        let got = c
            .proto
            .counts()
            .get(src as usize)
            .map_or(0, |c| c.data_received);
        if got != sent + 1 {
            self.link_error.get_or_insert(Error::LinkFailure(format!(
                "careful link {src}→{}: final count mismatch: {sent} data frames sent, {} received",
                self.rank,
                got.saturating_sub(1)
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phalanx_boot::{Endpoint, HostInfo};

    fn table(frames: &[u64]) -> Table {
        Table {
            job_key: 1,
            endpoints: frames
                .iter()
                .map(|&f| Endpoint {
                    addr: "127.0.0.1:1".parse().unwrap(),
                    host: HostInfo::current(),
                    recv_frames: f,
                })
                .collect(),
        }
    }

    #[test]
    fn windows_come_from_the_smallest_granted_buffer() {
        assert_eq!(frames_granted(&table(&[512, 96, 0, 2048])), Some(96));
        assert_eq!(frames_granted(&table(&[0, 0])), None);
        let c = setup(true, None, &table(&[300, 300, 300, 300]), 0, 4).unwrap();
        assert_eq!(c.config().buffers, 300);
        assert_eq!(c.window(), 100);
        // Too few for three frames per sender: raised (with a warning), never below.
        let c = setup(true, None, &table(&[4, 4, 4, 4]), 0, 4).unwrap();
        assert_eq!(c.config().buffers, 9);
        assert!(setup(false, None, &table(&[300]), 0, 1).is_none());
    }
}
