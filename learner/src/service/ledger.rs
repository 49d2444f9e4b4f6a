//! The applied-id bookkeeping that makes at-least-once delivery exactly-once application.
//!
//! ```text
//!   history   [rec₁ rec₂ … recₖ | recₖ₊₁ … recₙ]    one record per update (and per drop),
//!              acknowledged     | since the last      oldest evicted once acknowledged and
//!                               | acknowledgement     more than `window` ids are held
//!   known     every id in history (+ since_ack)      "already applied?" is one lookup
//!   pending   queue entry ids of since_ack           XACKed once a checkpoint holding them is
//!                                                   durable, then cleared
//! ```
//!
//! The invariant: an entry is acknowledged only after a checkpoint holding its trajectory's
//! record is durable. A restart restores `history`, `since_ack` and `pending` from the
//! checkpoint, acknowledges `pending` (that checkpoint is durable), and from then on a delivery
//! whose id is `known` is a duplicate: acknowledged and skipped. Everything else was never
//! durably applied and is applied now.

use std::collections::{HashSet, VecDeque};

use protocol::wire::TrajectoryId;

use crate::checkpoint::{AppliedRecord, ConsumptionState};

/// Which trajectories were consumed, which entries await acknowledgement.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    history: VecDeque<AppliedRecord>,
    history_ids: usize,
    /// Records at the back of `history` not yet acknowledged.
    unacked_records: usize,
    window: usize,
    known: HashSet<TrajectoryId>,
    since_ack: Vec<TrajectoryId>,
    pending: Vec<String>,
    pending_set: HashSet<String>,
}

fn ids_of(r: &AppliedRecord) -> impl Iterator<Item = &TrajectoryId> {
    r.trained.iter().chain(&r.dropped)
}

impl Ledger {
    /// An empty ledger remembering about `window` ids.
    pub fn new(window: usize) -> Self {
        Self { window: window.max(1), ..Self::default() }
    }

    /// The ledger a checkpoint's consumption state describes. Its `queue_entry_ids` are
    /// pending: acknowledge them (the checkpoint is durable), then call [`Ledger::acknowledged`].
    pub fn restore(state: &ConsumptionState, window: usize) -> Self {
        let mut ledger = Self::new(window);
        for r in &state.history {
            ledger.known.extend(ids_of(r));
            ledger.history_ids += r.trained.len() + r.dropped.len();
            ledger.history.push_back(r.clone());
        }
        // A checkpoint without history (an older layout) still names what it applied.
        ledger.known.extend(&state.applied_since_ack);
        ledger.since_ack = state.applied_since_ack.clone();
        ledger.unacked_records = ledger.history.len();
        for e in &state.queue_entry_ids {
            ledger.add_pending(e.clone());
        }
        ledger
    }

    /// Whether `id` was consumed (trained or dropped) in the remembered history.
    pub fn is_applied(&self, id: TrajectoryId) -> bool {
        self.known.contains(&id)
    }

    /// Whether the queue entry `entry_id` is held here, waiting for its acknowledgement.
    pub fn holds_entry(&self, entry_id: &str) -> bool {
        self.pending_set.contains(entry_id)
    }

    /// The entries waiting for a durable checkpoint and their acknowledgement.
    pub fn pending_entries(&self) -> &[String] {
        &self.pending
    }

    /// Whether anything was consumed since the last acknowledgement.
    pub fn has_unacknowledged(&self) -> bool {
        !self.pending.is_empty() || !self.since_ack.is_empty()
    }

    /// Records what learner step `step` consumed: `trained` and `dropped` as (trajectory id,
    /// queue entry id). Their entries become pending.
    pub fn record(&mut self, step: u64, trained: &[(TrajectoryId, String)], dropped: &[(TrajectoryId, String)]) {
        if trained.is_empty() && dropped.is_empty() {
            return;
        }
        let record = AppliedRecord {
            step,
            trained: trained.iter().map(|(id, _)| *id).collect(),
            dropped: dropped.iter().map(|(id, _)| *id).collect(),
        };
        for (id, entry) in trained.iter().chain(dropped) {
            self.known.insert(*id);
            self.since_ack.push(*id);
            self.add_pending(entry.clone());
        }
        self.history_ids += trained.len() + dropped.len();
        self.history.push_back(record);
        self.unacked_records += 1;
    }

    fn add_pending(&mut self, entry: String) {
        if self.pending_set.insert(entry.clone()) {
            self.pending.push(entry);
        }
    }

    /// The consumption state a checkpoint taken now holds.
    pub fn snapshot(&self) -> ConsumptionState {
        ConsumptionState {
            applied_since_ack: self.since_ack.clone(),
            queue_entry_ids: self.pending.clone(),
            history: self.history.iter().cloned().collect(),
        }
    }

    /// Everything recorded so far was acknowledged (after a durable checkpoint held it):
    /// clears the pending entries and evicts the oldest acknowledged records beyond the window.
    pub fn acknowledged(&mut self) {
        self.pending.clear();
        self.pending_set.clear();
        self.since_ack.clear();
        self.unacked_records = 0;
        while self.history_ids > self.window && self.history.len() > self.unacked_records {
            let Some(old) = self.history.pop_front() else { break };
            self.history_ids -= old.trained.len() + old.dropped.len();
            for id in ids_of(&old) {
                self.known.remove(id);
            }
        }
    }

    /// The remembered history, oldest first.
    pub fn history(&self) -> impl Iterator<Item = &AppliedRecord> {
        self.history.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(ids: &[u128]) -> Vec<(TrajectoryId, String)> {
        ids.iter().map(|&i| (TrajectoryId(i), format!("{i}-0"))).collect()
    }

    #[test]
    fn applied_ids_survive_a_checkpoint_round_trip_and_pending_entries_are_named() {
        let mut l = Ledger::new(100);
        l.record(1, &pairs(&[1, 2]), &pairs(&[3]));
        assert!(l.is_applied(TrajectoryId(3)) && !l.is_applied(TrajectoryId(4)));
        assert!(l.holds_entry("1-0") && l.has_unacknowledged());
        let snap = l.snapshot();
        assert_eq!(snap.queue_entry_ids, ["1-0", "2-0", "3-0"]);
        assert_eq!(snap.history[0].trained, [TrajectoryId(1), TrajectoryId(2)]);

        let mut back = Ledger::restore(&snap, 100);
        assert_eq!(back.pending_entries(), ["1-0", "2-0", "3-0"]);
        back.acknowledged();
        assert!(back.is_applied(TrajectoryId(1)) && !back.has_unacknowledged());
        assert!(back.snapshot().queue_entry_ids.is_empty());
        assert_eq!(back.snapshot().history.len(), 1, "acknowledged history is kept for duplicates");
    }

    #[test]
    fn the_window_evicts_only_acknowledged_records() {
        let mut l = Ledger::new(3);
        l.record(1, &pairs(&[1, 2]), &[]);
        l.record(2, &pairs(&[3, 4]), &[]);
        assert!(l.is_applied(TrajectoryId(1)), "nothing is evicted before acknowledgement");
        l.acknowledged();
        assert!(!l.is_applied(TrajectoryId(1)) && l.is_applied(TrajectoryId(3)));
        assert_eq!(l.history().map(|r| r.step).collect::<Vec<_>>(), [2]);
    }
}
