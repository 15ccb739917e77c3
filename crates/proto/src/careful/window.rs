//! Flow-control arithmetic of the static windows (the careful contract's "Windows",
//! "Window updates" and "rule of Theorem 1"): send credit towards a peer, the bound on
//! a peer's credit towards us, freed-but-unadvertised frames and when they oblige an
//! explicit update, and how many frames a window admits under the rule. Pure functions
//! of the peers' counters and the engine's W and threshold; nothing here changes
//! state.

use super::{Careful, Peer};

impl Careful {
    pub(super) fn credit_of(&self, p: &Peer) -> u32 {
        let outstanding = p.snd_nxt.wrapping_sub(p.granted);
        self.window.saturating_sub(outstanding)
    }

    pub(super) fn unadv(p: &Peer) -> u32 {
        p.freed.wrapping_sub(p.adv)
    }

    /// Upper bound of the peer's credit towards us, from the frames that arrived.
    pub(super) fn peer_cap(&self, p: &Peer) -> u32 {
        self.window.saturating_sub(p.rcv_nxt.wrapping_sub(p.adv))
    }

    pub(super) fn owes_update(&self, p: &Peer) -> bool {
        let u = Self::unadv(p);
        p.broken.is_none() && u > 0 && (u >= self.threshold || self.peer_cap(p) <= 1)
    }

    /// Frames one peer's window admits now, given the increment a frame would carry.
    pub(super) fn space_one(&self, p: &Peer, inc: u32) -> u32 {
        let c = self.credit_of(p);
        if self.cfg.test_ignore_close_rule {
            c
        } else if c >= 2 {
            c - 1
        } else if c == 1 && inc > 0 {
            1
        } else {
            0
        }
    }

    pub(super) fn min_unadv(&self, targets: &[u32]) -> u32 {
        targets
            .iter()
            .map(|&t| Self::unadv(&self.peers[t as usize]))
            .min()
            .unwrap_or(0)
    }
}
