//! Sender side of the careful protocol: target validation, [`Careful::send_space`],
//! [`Careful::send`] (stamping kind, flags, job key, source, frame number(s) and the
//! window update into the caller's datagram; a frame to several ranks becomes one
//! multicast datagram) and [`Careful::poll_transmit`], which hands out queued data
//! frames in order — their update topped up to everything freed by then — and, when no
//! data is queued, the explicit update frames owed. A frame is queued only if every
//! target's window admits it under the rule of Theorem 1; a refused datagram comes back
//! unchanged and nothing is queued.

use phalanx_wire::{flags, mcast, stamp, Kind, MsgKind, Packet, HEADER_LEN, MAGIC, VERSION};

use super::{Careful, CarefulTransmit, Frame, Refused, SendError};

/// Flag bits owned by the protocol; the caller's copies are replaced.
const OWN_FLAGS: u8 = flags::SEQ_VALID | flags::ACK_VALID | flags::MULTICAST | flags::RETRANSMIT;

impl Careful {
    fn valid_target(&self, r: u32) -> Result<(), SendError> {
        match self.peers.get(r as usize) {
            _ if r == self.local => Err(SendError::BadTarget { rank: r }),
            None => Err(SendError::BadTarget { rank: r }),
            Some(p) if p.broken.is_some() => Err(SendError::Broken { peer: r }),
            Some(_) => Ok(()),
        }
    }

    /// Data frames to `targets` (all of them) that could be sent now; 0 if a target is
    /// invalid. A frame to several ranks needs every target's window (min-window).
    pub fn send_space(&self, targets: &[u32]) -> u32 {
        if targets.is_empty() || targets.iter().any(|&t| self.valid_target(t).is_err()) {
            return 0;
        }
        let inc = self.min_unadv(targets);
        targets
            .iter()
            .map(|&t| self.space_one(&self.peers[t as usize], inc))
            .min()
            .unwrap_or(0)
    }

    /// Queues one data frame for `targets` (one rank, or several: one datagram, the same
    /// bytes to all). `datagram` is a header emitted by the caller (message-layer fields,
    /// `ext_len` 0) followed by the payload; the protocol stamps kind, flags, job key,
    /// source, frame number(s) and window update. Nothing is queued on error.
    pub fn send(&mut self, now: u64, targets: &[u32], datagram: Vec<u8>) -> Result<(), Refused> {
        let _ = now;
        let refuse = |datagram, reason| Err(Refused { datagram, reason });
        if datagram.len() < HEADER_LEN {
            return refuse(datagram, SendError::BadDatagram("shorter than the header"));
        }
        if datagram[6] != 0 || datagram[7] != 0 {
            return refuse(datagram, SendError::BadDatagram("ext_len must be 0"));
        }
        if MsgKind::from_u8(datagram[4]).is_none() {
            return refuse(datagram, SendError::BadDatagram("unknown message kind"));
        }
        let mut tg: Vec<u32> = targets.to_vec();
        tg.sort_unstable();
        tg.dedup();
        if tg.is_empty() {
            return refuse(datagram, SendError::NoTargets);
        }
        for &t in &tg {
            if let Err(e) = self.valid_target(t) {
                return refuse(datagram, e);
            }
        }
        let multi = tg.len() > 1;
        let ext = if multi {
            mcast::ext_len(self.size, tg.len())
        } else {
            0
        };
        if ext > u16::MAX as usize {
            return refuse(datagram, SendError::BadDatagram("too many targets"));
        }
        let inc = self.min_unadv(&tg);
        for &t in &tg {
            if self.space_one(&self.peers[t as usize], inc) == 0 {
                self.stats.window_blocked += 1;
                return refuse(datagram, SendError::WindowClosed { peer: t });
            }
        }
        let caller_flags = datagram[phalanx_wire::OFF_FLAGS] & !OWN_FLAGS;
        let mut bytes = if multi {
            let mut b = Vec::with_capacity(datagram.len() + ext);
            b.extend_from_slice(&datagram[..HEADER_LEN]);
            b.resize(HEADER_LEN + ext, 0);
            let peers = &self.peers;
            let entries = tg.iter().map(|&r| (r, peers[r as usize].snd_nxt));
            // Cannot fail: targets are valid, increasing, and the area has `ext` bytes.
            let _ = mcast::emit(&mut b[HEADER_LEN..], self.size, entries);
            b.extend_from_slice(&datagram[HEADER_LEN..]);
            b
        } else {
            datagram
        };
        let (fl, seq) = if multi {
            (caller_flags | flags::MULTICAST | flags::ACK_VALID, 0)
        } else {
            let seq = self.peers[tg[0] as usize].snd_nxt;
            (caller_flags | flags::SEQ_VALID | flags::ACK_VALID, seq)
        };
        self.own_fields(&mut bytes, Kind::CarefulData, fl, ext as u16, seq, inc);
        for &t in &tg {
            let p = &mut self.peers[t as usize];
            p.snd_nxt = p.snd_nxt.wrapping_add(1);
            p.adv = p.adv.wrapping_add(inc);
            p.counts.data_sent += 1;
            p.counts.frames_sent += 1;
        }
        self.stats.data_sent += 1;
        if multi {
            self.stats.multi_sent += 1;
        }
        self.queue.push_back(Frame { bytes, targets: tg });
        Ok(())
    }

    fn own_fields(&self, b: &mut [u8], kind: Kind, fl: u8, ext: u16, seq: u32, ack: u32) {
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = kind as u8;
        b[5] = fl;
        b[6..8].copy_from_slice(&ext.to_le_bytes());
        b[8..16].copy_from_slice(&self.job_key.to_le_bytes());
        b[16..20].copy_from_slice(&self.local.to_le_bytes());
        let _ = stamp::seq(b, seq);
        let _ = stamp::ack(b, ack);
    }

    /// The next datagram for the wire. Data frames leave in the order they were queued,
    /// their window update topped up to everything freed so far; explicit update frames
    /// follow when no data is queued.
    #[must_use]
    pub fn poll_transmit(&mut self, now: u64) -> Option<CarefulTransmit<'_>> {
        let _ = now;
        if let Some(mut f) = self.queue.pop_front() {
            self.top_up(&mut f);
            self.current = Some(f);
            let f = self.current.as_ref()?;
            return Some(CarefulTransmit {
                targets: &f.targets,
                bytes: &f.bytes,
            });
        }
        while let Some(peer) = self.check.pop_front() {
            let p = &self.peers[peer as usize];
            let owed = self.owes_update(p);
            let credit = self.credit_of(p);
            let p = &mut self.peers[peer as usize];
            p.in_check = false;
            if !owed || credit == 0 {
                // Re-examined when the peer's next frame (with credit) arrives.
                continue;
            }
            let inc = Self::unadv(p);
            let seq = p.snd_nxt;
            p.snd_nxt = seq.wrapping_add(1);
            p.adv = p.freed;
            p.counts.frames_sent += 1;
            self.stats.updates_sent += 1;
            let mut b = [0u8; HEADER_LEN];
            b[4] = MsgKind::None as u8;
            self.own_fields(
                &mut b,
                Kind::CarefulUpdate,
                flags::SEQ_VALID | flags::ACK_VALID,
                0,
                seq,
                inc,
            );
            self.upd_buf = b;
            self.upd_target = [peer];
            return Some(CarefulTransmit {
                targets: &self.upd_target,
                bytes: &self.upd_buf,
            });
        }
        None
    }

    fn top_up(&mut self, f: &mut Frame) {
        let extra = self.min_unadv(&f.targets);
        let committed = Packet::new_checked(&f.bytes).map_or(0, |p| p.ack());
        if extra > 0 {
            for &t in &f.targets {
                let p = &mut self.peers[t as usize];
                p.adv = p.adv.wrapping_add(extra);
            }
            let _ = stamp::ack(&mut f.bytes, committed.wrapping_add(extra));
        }
        if committed > 0 || extra > 0 {
            self.stats.piggybacked += 1;
        }
    }
}
