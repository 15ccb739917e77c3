//! One timer table for the protocols ([`crate::gbn`], [`crate::urtp`], [`crate::careful`]).
//!
//! # Contract
//!
//! * A [`TimerTable`] is made for `peers` ranks and `kinds` timer kinds (each protocol
//!   numbers its own kinds `0..kinds`); it holds **at most one deadline per
//!   (peer, kind)**. [`TimerTable::set`] arms, re-arms (replaces) or cancels (`None`)
//!   that deadline; [`TimerTable::get`] reads it.
//! * All armed deadlines live in one ordered set of `(deadline, peer, kind)`, so they
//!   fire in that order: earliest deadline first, ties by peer, then by kind.
//!   [`TimerTable::first`] is the earliest deadline in O(1) (cached);
//!   [`TimerTable::set`] and [`TimerTable::pop_due`] are O(log n).
//! * [`TimerTable::pop_due`] removes and returns the earliest deadline that is due
//!   (`deadline <= now`) and clears its slot; a caller fires timers by looping on it,
//!   and may re-arm timers inside the loop (a re-armed deadline that is already due
//!   fires in the same loop, as with an ordered set).
//! * The per-(peer, kind) slots and the ordered set are always in step: a slot holds
//!   `Some(t)` exactly when `(t, peer, kind)` is in the set.
//! * [`TimerTable::postpone`] moves every armed deadline later by the same amount
//!   (a process that was stopped re-arms its timers so that the stopped time counts for
//!   no timeout); the firing order is unchanged.
//! * An out-of-range `peer` or `kind` is ignored: [`TimerTable::set`] does nothing and
//!   [`TimerTable::get`] is `None` (never a panic; the protocols only pass ranks they
//!   have validated).

use std::collections::BTreeSet;

/// Deadlines (`u64` nanoseconds) of up to `kinds` timers per peer, in one ordered set.
#[derive(Debug, Clone)]
pub struct TimerTable {
    /// Armed deadlines as `(deadline, peer, kind)`: the firing order.
    set: BTreeSet<(u64, u32, u8)>,
    /// The armed deadline of `(peer, kind)` at `peer * kinds + kind`, in step with `set`.
    slots: Vec<Option<u64>>,
    peers: u32,
    kinds: u8,
    /// The deadline of `set.first()`, refreshed on every change of `set`.
    earliest: Option<u64>,
}

impl TimerTable {
    /// An empty table for peers `0..peers` and timer kinds `0..kinds`.
    pub fn new(peers: u32, kinds: u8) -> Self {
        TimerTable {
            set: BTreeSet::new(),
            slots: vec![None; (peers as usize).saturating_mul(kinds as usize)],
            peers,
            kinds,
            earliest: None,
        }
    }

    /// Makes room for peers up to `peers` (no timer of a new peer is armed).
    pub fn grow(&mut self, peers: u32) {
        if peers > self.peers {
            self.peers = peers;
            self.slots
                .resize((peers as usize).saturating_mul(self.kinds as usize), None);
        }
    }

    fn index(&self, peer: u32, kind: u8) -> Option<usize> {
        (peer < self.peers && kind < self.kinds)
            .then(|| peer as usize * self.kinds as usize + kind as usize)
    }

    /// Sets the deadline of `peer`'s timer `kind` to `at` (replacing any armed one), or
    /// cancels it (`None`). Out-of-range `peer` or `kind`: nothing happens. O(log n).
    pub fn set(&mut self, peer: u32, kind: u8, at: Option<u64>) {
        let Some(i) = self.index(peer, kind) else {
            return;
        };
        let old = self.slots[i];
        if old == at {
            return;
        }
        if let Some(t) = old {
            self.set.remove(&(t, peer, kind));
        }
        if let Some(t) = at {
            self.set.insert((t, peer, kind));
        }
        self.slots[i] = at;
        self.earliest = self.set.first().map(|e| e.0);
    }

    /// The armed deadline of `peer`'s timer `kind` (`None` if unarmed or out of range).
    pub fn get(&self, peer: u32, kind: u8) -> Option<u64> {
        self.index(peer, kind).and_then(|i| self.slots[i])
    }

    /// The earliest armed deadline, if any. O(1).
    pub fn first(&self) -> Option<u64> {
        self.earliest
    }

    /// Removes the earliest armed timer if it is due (`deadline <= now`) and returns it
    /// as `(peer, kind, deadline)`; its slot is cleared. `None` if nothing is due.
    pub fn pop_due(&mut self, now: u64) -> Option<(u32, u8, u64)> {
        let &(t, peer, kind) = self.set.first()?;
        if t > now {
            return None;
        }
        self.set.pop_first();
        if let Some(i) = self.index(peer, kind) {
            self.slots[i] = None;
        }
        self.earliest = self.set.first().map(|e| e.0);
        Some((peer, kind, t))
    }

    /// Moves every armed deadline `by` nanoseconds later (saturating); the order of the
    /// deadlines, and so the firing order, is unchanged. O(n).
    pub fn postpone(&mut self, by: u64) {
        if by == 0 || self.set.is_empty() {
            return;
        }
        self.set = std::mem::take(&mut self.set)
            .into_iter()
            .map(|(t, peer, kind)| (t.saturating_add(by), peer, kind))
            .collect();
        for s in self.slots.iter_mut().flatten() {
            *s = s.saturating_add(by);
        }
        self.earliest = self.set.first().map(|e| e.0);
    }

    /// Armed timers.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// No timer armed.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::TimerTable;

    /// Slots and set in step, `first` the minimum of the set.
    fn check(t: &TimerTable) {
        let mut armed = 0;
        for peer in 0..t.peers {
            for kind in 0..t.kinds {
                if let Some(d) = t.get(peer, kind) {
                    armed += 1;
                    assert!(t.set.contains(&(d, peer, kind)));
                }
            }
        }
        assert_eq!(armed, t.len());
        for &(d, peer, kind) in &t.set {
            assert_eq!(t.get(peer, kind), Some(d));
        }
        assert_eq!(t.first(), t.set.iter().map(|e| e.0).min());
        assert_eq!(t.is_empty(), t.first().is_none());
    }

    #[test]
    fn set_replace_cancel_keep_slots_and_set_in_step() {
        let mut t = TimerTable::new(4, 3);
        assert!(t.is_empty());
        assert_eq!(t.first(), None);
        t.set(1, 0, Some(50));
        t.set(2, 2, Some(30));
        t.set(0, 1, Some(70));
        check(&t);
        assert_eq!(t.len(), 3);
        assert_eq!(t.first(), Some(30));
        // Replace: the old deadline is gone from the set.
        t.set(2, 2, Some(90));
        check(&t);
        assert_eq!(t.len(), 3);
        assert_eq!(t.get(2, 2), Some(90));
        assert_eq!(t.first(), Some(50));
        // Replace with the same value, cancel, cancel an unarmed timer.
        t.set(1, 0, Some(50));
        t.set(0, 1, None);
        t.set(3, 1, None);
        check(&t);
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(0, 1), None);
        // Same deadline for several (peer, kind): all kept.
        t.set(3, 0, Some(50));
        t.set(0, 2, Some(50));
        check(&t);
        assert_eq!(t.len(), 4);
        for (p, k) in [(1, 0), (2, 2), (3, 0), (0, 2)] {
            t.set(p, k, None);
            check(&t);
        }
        assert!(t.is_empty());
        assert_eq!(t.first(), None);
    }

    #[test]
    fn postpone_moves_every_deadline_and_keeps_the_order() {
        let mut t = TimerTable::new(3, 2);
        t.set(2, 0, Some(10));
        t.set(0, 1, Some(10));
        t.set(1, 1, Some(5));
        t.set(1, 0, Some(u64::MAX - 3));
        t.postpone(100);
        check(&t);
        assert_eq!(t.first(), Some(105));
        assert_eq!(t.get(1, 0), Some(u64::MAX));
        assert_eq!(t.pop_due(109), Some((1, 1, 105)));
        assert_eq!(t.pop_due(109), None);
        assert_eq!(t.pop_due(110), Some((0, 1, 110)));
        assert_eq!(t.pop_due(110), Some((2, 0, 110)));
        t.postpone(0);
        check(&t);
    }

    #[test]
    fn pop_due_fires_in_order_and_only_due_ones() {
        let mut t = TimerTable::new(3, 2);
        t.set(2, 0, Some(10));
        t.set(0, 1, Some(10));
        t.set(0, 0, Some(10));
        t.set(1, 1, Some(5));
        t.set(1, 0, Some(20));
        assert_eq!(t.pop_due(4), None);
        check(&t);
        // Deadline order, ties by peer then kind; nothing after `now`.
        assert_eq!(t.pop_due(10), Some((1, 1, 5)));
        assert_eq!(t.get(1, 1), None);
        check(&t);
        assert_eq!(t.pop_due(10), Some((0, 0, 10)));
        assert_eq!(t.pop_due(10), Some((0, 1, 10)));
        assert_eq!(t.pop_due(10), Some((2, 0, 10)));
        assert_eq!(t.pop_due(10), None);
        check(&t);
        assert_eq!(t.first(), Some(20));
        // Re-arming inside a firing loop: a due deadline fires in the same loop.
        t.set(2, 1, Some(15));
        let mut fired = Vec::new();
        while let Some((p, k, d)) = t.pop_due(u64::MAX) {
            fired.push((p, k, d));
            if (p, k, d) == (2, 1, 15) {
                t.set(0, 0, Some(18));
                t.set(2, 1, Some(100));
            }
            check(&t);
        }
        assert_eq!(
            fired,
            [(2, 1, 15), (0, 0, 18), (1, 0, 20), (2, 1, 100)].to_vec()
        );
        assert!(t.is_empty());
    }

    #[test]
    fn matches_an_ordered_set_model() {
        // A seeded walk of set/cancel/pop_due against the plain ordered set the
        // protocols used before.
        let mut t = TimerTable::new(5, 3);
        let mut model = std::collections::BTreeSet::new();
        let mut slots = [[None::<u64>; 3]; 5];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let peer = (x % 5) as u32;
            let kind = ((x >> 8) % 3) as u8;
            let d = (x >> 16) % 64;
            match (x >> 32) % 4 {
                0 => {
                    let now = (x >> 40) % 64;
                    let want = model
                        .first()
                        .copied()
                        .filter(|e: &(u64, u32, u8)| e.0 <= now);
                    if let Some(e) = want {
                        model.remove(&e);
                        slots[e.1 as usize][e.2 as usize] = None;
                    }
                    assert_eq!(t.pop_due(now), want.map(|(d, p, k)| (p, k, d)));
                }
                1 => {
                    if let Some(old) = slots[peer as usize][kind as usize].take() {
                        model.remove(&(old, peer, kind));
                    }
                    t.set(peer, kind, None);
                }
                _ => {
                    if let Some(old) = slots[peer as usize][kind as usize].take() {
                        model.remove(&(old, peer, kind));
                    }
                    model.insert((d, peer, kind));
                    slots[peer as usize][kind as usize] = Some(d);
                    t.set(peer, kind, Some(d));
                }
            }
            assert_eq!(t.set, model);
            assert_eq!(t.first(), model.first().map(|e| e.0));
        }
        check(&t);
    }

    #[test]
    fn out_of_range_is_ignored() {
        let mut t = TimerTable::new(2, 2);
        t.set(2, 0, Some(1));
        t.set(0, 2, Some(1));
        t.set(u32::MAX, u8::MAX, Some(1));
        assert!(t.is_empty());
        assert_eq!(t.get(2, 0), None);
        assert_eq!(t.get(0, 2), None);
        assert_eq!(t.get(u32::MAX, u8::MAX), None);
        t.set(1, 1, Some(7));
        t.set(7, 1, None);
        assert_eq!(t.len(), 1);
        check(&t);
        let mut empty = TimerTable::new(0, 0);
        empty.set(0, 0, Some(1));
        assert_eq!(empty.get(0, 0), None);
        assert_eq!(empty.pop_due(u64::MAX), None);
        assert!(empty.is_empty());
    }
}
