//! Receiver side of the careful protocol: [`Careful::handle_packet`] checks a frame's
//! kind, flags, frame number, window update and the sender's window occupancy against
//! the link, and either accepts it (a data frame is held in a receive buffer, an update
//! frame frees its buffer at once; either grants the sender's credit and restarts the
//! stall clock of a declared wait on that peer) or breaks the link with a [`LinkFault`]
//! reported once as [`CarefulEvent::LinkError`]; malformed frames are
//! [`Verdict::Invalid`] and change no state. Also owns freeing held frames
//! ([`Careful::consumed`], [`Careful::copied_out`], oldest first), which schedules the
//! window update owed, and the copy-out advice that keeps a flood deadlock-free.

use phalanx_wire::{flags, mcast, serial, Kind, Packet};

use super::detect::TIMER_STALL;
use super::{Careful, CarefulEvent, LinkFault, Verdict};

impl Careful {
    fn break_link(&mut self, src: u32, fault: LinkFault) -> Verdict {
        let to = self.local;
        let p = &mut self.peers[src as usize];
        p.broken = Some(fault);
        self.timers.set(src, TIMER_STALL, None);
        self.stats.link_errors += 1;
        self.push_event(CarefulEvent::LinkError {
            from: src,
            to,
            detail: fault,
        });
        Verdict::Error(fault)
    }

    /// Processes a validated datagram (see the module docs).
    #[must_use]
    pub fn handle_packet(&mut self, now: u64, pkt: &Packet<'_>) -> Verdict {
        let v = self.handle_inner(now, pkt);
        if matches!(v, Verdict::Invalid(_)) {
            self.stats.invalid += 1;
        }
        v
    }

    fn handle_inner(&mut self, now: u64, pkt: &Packet<'_>) -> Verdict {
        let src = pkt.src();
        if src as usize >= self.peers.len() || src == self.local {
            return Verdict::Invalid("source rank out of range or local");
        }
        if pkt.job_key() != self.job_key {
            return Verdict::Invalid("foreign job key");
        }
        let fl = pkt.flags();
        let kind = pkt.kind();
        if !matches!(kind, Kind::CarefulData | Kind::CarefulUpdate) {
            return Verdict::Invalid("not a careful frame");
        }
        if fl & flags::ACK_VALID == 0 {
            return Verdict::Invalid("careful frame without ACK_VALID");
        }
        let multi = fl & flags::MULTICAST != 0;
        let seq = if multi {
            if kind == Kind::CarefulUpdate {
                return Verdict::Invalid("multicast update frame");
            }
            let Ok(view) = mcast::TargetsView::of_packet(pkt, self.size) else {
                return Verdict::Invalid("malformed multicast extension");
            };
            match view.counter(self.local) {
                Some(s) => s,
                None => return Verdict::Invalid("not a target of this frame"),
            }
        } else {
            if fl & flags::SEQ_VALID == 0 {
                return Verdict::Invalid("careful frame without SEQ_VALID");
            }
            if kind == Kind::CarefulUpdate && !pkt.payload().is_empty() {
                return Verdict::Invalid("update frame with payload");
            }
            pkt.seq()
        };
        let window = self.window;
        let p = &self.peers[src as usize];
        if let Some(f) = p.broken {
            return Verdict::Error(f);
        }
        if seq != p.rcv_nxt {
            let (expected, got) = (p.rcv_nxt, seq);
            let fault = if serial::lt(seq, p.rcv_nxt) {
                LinkFault::Duplicate { expected, got }
            } else {
                LinkFault::Gap { expected, got }
            };
            return self.break_link(src, fault);
        }
        let inc = pkt.ack();
        let outstanding = p.snd_nxt.wrapping_sub(p.granted);
        if inc > outstanding {
            return self.break_link(
                src,
                LinkFault::BadUpdate {
                    granted: inc,
                    outstanding,
                },
            );
        }
        if p.rcv_nxt.wrapping_add(1).wrapping_sub(p.adv) > window {
            return self.break_link(src, LinkFault::WindowOverrun { window });
        }
        let stall = self.cfg.stall_ns;
        let p = &mut self.peers[src as usize];
        p.rcv_nxt = p.rcv_nxt.wrapping_add(1);
        p.granted = p.granted.wrapping_add(inc);
        p.counts.frames_received += 1;
        if p.waiting {
            let at = Some(now.saturating_add(stall));
            self.timers.set(src, TIMER_STALL, at);
        }
        let v = if kind == Kind::CarefulUpdate {
            p.freed = p.freed.wrapping_add(1);
            self.stats.updates_received += 1;
            Verdict::Update
        } else {
            p.held += 1;
            p.counts.data_received += 1;
            self.total_held += 1;
            self.stats.data_received += 1;
            Verdict::Deliver
        };
        self.schedule_check(src);
        v
    }

    /// The caller is done with the oldest delivered frame from `from`: its buffer is free
    /// (this drives window updates). Ignored without a held frame.
    pub fn consumed(&mut self, now: u64, from: u32) {
        let _ = now;
        if self.free_held(from, 1) == 1 {
            self.stats.consumed += 1;
        }
    }

    /// The caller copied the `n` oldest delivered frames from `from` to ordinary memory:
    /// their buffers are free. Returns how many were freed (at most the held frames).
    pub fn copied_out(&mut self, from: u32, n: u32) -> u32 {
        let k = self.free_held(from, n);
        self.stats.copied_out += k as u64;
        k
    }

    fn free_held(&mut self, from: u32, n: u32) -> u32 {
        let Some(p) = self.peers.get_mut(from as usize) else {
            self.stats.spurious_frees += 1;
            return 0;
        };
        let k = n.min(p.held);
        if k < n || n == 0 {
            self.stats.spurious_frees += 1;
        }
        if k == 0 {
            return 0;
        }
        p.held -= k;
        p.freed = p.freed.wrapping_add(k);
        self.total_held -= k as u64;
        self.schedule_check(from);
        k
    }

    /// Copy-out advice `(peer, n)`: copy the `n` oldest frames held from `peer` to
    /// ordinary memory and report them with [`Careful::copied_out`] — needed before the
    /// caller blocks without consuming (it may consume instead). Given when `peer`'s
    /// window to us is (nearly) closed by frames we hold, or when free buffers fall below
    /// the copy-out threshold (then for the peer holding most). O(size).
    pub fn copy_out_advice(&self) -> Option<(u32, u32)> {
        for (i, p) in self.peers.iter().enumerate() {
            if p.held > 0 && p.broken.is_none() && self.peer_cap(p) <= 1 {
                return Some((i as u32, p.held));
            }
        }
        if self.free_buffers() < self.copy_threshold as u64 {
            let (i, p) = self.peers.iter().enumerate().max_by_key(|(_, p)| p.held)?;
            if p.held > 0 {
                return Some((i as u32, p.held));
            }
        }
        None
    }
}
