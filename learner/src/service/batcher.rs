//! Batching by GRPO group: deliveries wait in their group until it is complete, and an update
//! takes `groups_per_update` ready groups.
//!
//! ```text
//!  push ─► group (id, attempt kind) ─ members ≥ expected ─────────────────► ready
//!                                   └ waited max_wait (incomplete) ────────► ready
//!  take: ready groups ≥ groups_per_update, or the oldest ready one waited max_wait
//!        → up to groups_per_update ready groups, oldest first, sorted by (group, id)
//! ```
//!
//! **How many members a group expects.** An initial group: `group_size` (G). In a mode that
//! refines, only the initial attempts `actor.refine` selects get a refined attempt
//! ([`RefineWhich`]: every one, or the failed ones), and the batcher reaches the actor's decision
//! itself from the initial attempts it holds (the same [`RefineWhich::refines`] on the same
//! trajectories): once a task's G initial attempts are in, its refined group expects k, the
//! number selected — G with `all`, the failed ones with `failed`, and no refined group at all
//! when k = 0. Until then (or if the initial group was released incomplete) a refined group
//! expects G, as before.
//!
//! **Pooled attempts** (`learner.separate_attempt_groups = false` in a mode that refines): a
//! task's initial attempts and their refined attempts share one key and are normalised as one
//! group, complete at G + k members (G when no initial attempt is selected). Not every selected
//! attempt is refined (its critique failed or did not come in time), so a group that holds fewer
//! waits up to `max_wait` from its first member and is then trained with what it holds. A refined
//! attempt that arrives after its group was released is not lost: it starts a group of its own
//! under the same key, normalised among the late ones (counted by the caller like any group).
//!
//! **Lost members.** A member that will never join its group — dropped as stale on arrival,
//! dead-lettered, or evicted while it waited because the policy moved on past
//! `learner.max_staleness` ([`Batcher::take_stale`]) — is counted against its group
//! ([`Batcher::lost`]), which is then complete at that many fewer. A group is never held for
//! `max_wait` waiting for a member that is gone, and no stale member holds the stream's
//! acknowledgement back: the caller records what it evicts as dropped. (Measured before this:
//! after an RRM worker was killed, one stale member kept its seven siblings 120 s and the scored
//! stream grew to ~3,750 entries; the siblings, of the same policy version, were stale too.)
//!
//! Memory stays bounded: once [`CAPACITY_BATCHES`] batches' worth of trajectories wait, every
//! group counts as ready, so the oldest are trained (incomplete) rather than more piling up; a
//! remembered refined-group size is forgotten after [`PLANNED_TTL_WAITS`] × `max_wait`.
//!
//! A batch is sorted by group key and trajectory id, so its order (and hence the update's
//! floating-point result) does not depend on the order deliveries arrived in.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use episode::RefineWhich;
use protocol::wire::{Attempt, GroupId, PolicyVersion, ScoredTrajectory, Trajectory, TrajectoryId};

use crate::advantage::group_key;
use crate::staleness::is_stale;

/// A delivered trajectory and the queue entry it came in.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    /// The stream entry id (acknowledged once a checkpoint holds the update).
    pub entry_id: String,
    /// The trajectory.
    pub item: ScoredTrajectory,
}

impl Held {
    /// The trajectory's id.
    pub fn id(&self) -> TrajectoryId {
        self.item.trajectory.id
    }
}

type Key = (GroupId, bool);

/// Batches' worth of trajectories that may wait before incomplete groups are trained anyway.
pub const CAPACITY_BATCHES: usize = 8;

/// How many `max_wait`s a refined group's expected size is remembered after its initial group
/// was complete (its refined attempts come after the critique wait and a second episode).
pub const PLANNED_TTL_WAITS: u32 = 10;

#[derive(Debug)]
struct Group {
    key: Key,
    since: Instant,
    members: Vec<Held>,
}

impl Group {
    fn initial(&self) -> impl Iterator<Item = &Trajectory> {
        self.members.iter().map(|h| &h.item.trajectory).filter(|t| t.attempt == Attempt::Initial)
    }
}

/// Deliveries waiting for their group to fill.
#[derive(Debug)]
pub struct Batcher {
    groups: Vec<Group>,
    index: HashMap<Key, usize>,
    ids: HashSet<TrajectoryId>,
    entries: HashSet<String>,
    group_size: usize,
    groups_per_update: usize,
    max_wait: Duration,
    separate_attempts: bool,
    refine: Option<RefineWhich>,
    /// Separate groups: the refined attempts a task's complete initial group will have, and
    /// since when.
    planned: HashMap<GroupId, (usize, Instant)>,
    /// Members of each group that will not come (see the module header), and since when.
    lost: HashMap<Key, (usize, Instant)>,
    /// The policy version [`Batcher::take_stale`] last looked at: waiting members only go
    /// stale when the version moves, so the next look waits for that.
    stale_checked_at: Option<PolicyVersion>,
    capacity: usize,
}

impl Batcher {
    /// Groups of `group_size` initial attempts, `groups_per_update` per batch, waiting at most
    /// `max_wait`; `refine`: which initial attempts get a refined attempt, where the feedback
    /// mode refines (`None`: it does not). See the module header.
    pub fn new(
        group_size: usize,
        groups_per_update: usize,
        max_wait: Duration,
        separate_attempts: bool,
        refine: Option<RefineWhich>,
    ) -> Self {
        let group_size = group_size.max(1);
        let most = group_size * if refine.is_some() && !separate_attempts { 2 } else { 1 };
        Self {
            groups: Vec::new(),
            index: HashMap::new(),
            ids: HashSet::new(),
            entries: HashSet::new(),
            group_size,
            groups_per_update: groups_per_update.max(1),
            max_wait,
            separate_attempts,
            refine,
            planned: HashMap::new(),
            lost: HashMap::new(),
            stale_checked_at: None,
            capacity: CAPACITY_BATCHES * most * groups_per_update.max(1),
        }
    }

    /// Adds a delivery to its group (the caller has checked it is no duplicate).
    pub fn push(&mut self, held: Held, now: Instant) {
        let key = group_key(&held.item.trajectory, self.separate_attempts);
        self.ids.insert(held.id());
        self.entries.insert(held.entry_id.clone());
        let i = *self.index.entry(key).or_insert_with(|| {
            self.groups.push(Group { key, since: now, members: Vec::new() });
            self.groups.len() - 1
        });
        self.groups[i].members.push(held);
        let g = &self.groups[i];
        if let (Some(which), true, false) = (self.refine, self.separate_attempts, key.1) {
            if g.members.len() == self.group_size {
                let k = which.count(g.initial());
                if k > 0 {
                    self.planned.insert(key.0, (k, now));
                }
            }
        }
    }

    /// Counts trajectory `t` as a member its group will not get (dropped on arrival, or
    /// dead-lettered): the group is complete at one fewer.
    pub fn lost(&mut self, t: &Trajectory, now: Instant) {
        let key = group_key(t, self.separate_attempts);
        self.lost.entry(key).or_insert((0, now)).0 += 1;
    }

    /// Removes and returns every waiting member more than `max_staleness` versions behind
    /// `current` (the caller records them as dropped), counting each as lost to its group; a
    /// group left empty is gone. Does nothing until the version has moved since the last look.
    pub fn take_stale(&mut self, current: PolicyVersion, max_staleness: u64, now: Instant) -> Vec<Held> {
        if self.stale_checked_at.replace(current) == Some(current) {
            return Vec::new();
        }
        let stale = |h: &Held| is_stale(h.item.trajectory.policy_version, current, max_staleness);
        let mut out = Vec::new();
        for g in &mut self.groups {
            let (gone, kept): (Vec<Held>, Vec<Held>) = std::mem::take(&mut g.members).into_iter().partition(&stale);
            g.members = kept;
            if !gone.is_empty() {
                self.lost.entry(g.key).or_insert((0, now)).0 += gone.len();
                out.extend(gone);
            }
        }
        if !out.is_empty() {
            self.groups.retain(|g| !g.members.is_empty());
            self.index = self.groups.iter().enumerate().map(|(i, g)| (g.key, i)).collect();
            for h in &out {
                self.ids.remove(&h.id());
                self.entries.remove(&h.entry_id);
            }
        }
        out
    }

    /// The members group `g` is complete at (see the module header): its full size less the
    /// members it lost, and at least one.
    fn expected(&self, g: &Group) -> usize {
        let lost = self.lost.get(&g.key).map_or(0, |l| l.0);
        self.expected_in_full(g).saturating_sub(lost).max(1)
    }

    /// The members group `g` is complete at when none is lost.
    fn expected_in_full(&self, g: &Group) -> usize {
        let size = self.group_size;
        match self.refine {
            None => size,
            Some(_) if self.separate_attempts && !g.key.1 => size,
            Some(_) if self.separate_attempts => self.planned.get(&g.key.0).map_or(size, |p| p.0),
            Some(which) => {
                let initial: Vec<&Trajectory> = g.initial().collect();
                size + if initial.len() >= size { which.count(initial) } else { size }
            }
        }
    }

    /// Whether trajectory `id` is waiting here.
    pub fn contains(&self, id: TrajectoryId) -> bool {
        self.ids.contains(&id)
    }

    /// Whether queue entry `entry_id` is waiting here.
    pub fn holds_entry(&self, entry_id: &str) -> bool {
        self.entries.contains(entry_id)
    }

    /// The queue entries waiting here.
    pub fn entry_ids(&self) -> impl Iterator<Item = &String> {
        self.entries.iter()
    }

    /// Trajectories waiting.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    fn is_ready(&self, g: &Group, now: Instant, full: bool) -> bool {
        full || g.members.len() >= self.expected(g) || now.duration_since(g.since) >= self.max_wait
    }

    /// The next batch, if one is due at `now` (see the module header).
    pub fn take(&mut self, now: Instant) -> Option<Vec<Held>> {
        let full = self.len() >= self.capacity;
        let ready: Vec<usize> = (0..self.groups.len()).filter(|&i| self.is_ready(&self.groups[i], now, full)).collect();
        let oldest = ready.iter().map(|&i| self.groups[i].since).min()?;
        if !full && ready.len() < self.groups_per_update && now.duration_since(oldest) < self.max_wait {
            return None;
        }
        let mut chosen = ready;
        chosen.sort_by_key(|&i| self.groups[i].since);
        chosen.truncate(self.groups_per_update);
        chosen.sort_unstable_by(|a, b| b.cmp(a));
        let mut batch = Vec::new();
        for i in chosen {
            let g = self.groups.swap_remove(i);
            if g.key.1 {
                self.planned.remove(&g.key.0);
            }
            self.lost.remove(&g.key);
            batch.extend(g.members);
        }
        let ttl = self.max_wait * PLANNED_TTL_WAITS;
        self.planned.retain(|_, (_, since)| now.duration_since(*since) < ttl);
        self.lost.retain(|_, (_, since)| now.duration_since(*since) < ttl);
        self.index = self.groups.iter().enumerate().map(|(i, g)| (g.key, i)).collect();
        for h in &batch {
            self.ids.remove(&h.id());
            self.entries.remove(&h.entry_id);
        }
        let sep = self.separate_attempts;
        batch.sort_by_key(|h| (group_key(&h.item.trajectory, sep), h.id()));
        Some(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::scored;
    use protocol::wire::Verdict;

    const ALL: Option<RefineWhich> = Some(RefineWhich::All);
    const FAILED: Option<RefineWhich> = Some(RefineWhich::Failed);

    fn held(id: u128, group: u128) -> Held {
        Held { entry_id: format!("{id}-0"), item: scored(id, group, 0, 0.0, Verdict::NotRequested) }
    }

    fn solved(id: u128, group: u128) -> Held {
        Held { entry_id: format!("{id}-0"), item: scored(id, group, 0, 1.0, Verdict::NotRequested) }
    }

    fn ids(batch: &[Held]) -> Vec<u128> {
        batch.iter().map(|h| h.id().0).collect()
    }

    #[test]
    fn complete_groups_are_batched_in_order_and_sorted_within() {
        let t0 = Instant::now();
        let mut b = Batcher::new(2, 2, Duration::from_secs(60), true, None);
        b.push(held(5, 1), t0);
        b.push(held(7, 2), t0);
        b.push(held(4, 1), t0);
        assert!(b.take(t0).is_none(), "one complete group of the two a batch needs");
        b.push(held(6, 2), t0);
        b.push(held(9, 3), t0);
        assert_eq!(ids(&b.take(t0).unwrap()), [4, 5, 6, 7]);
        assert!(b.contains(TrajectoryId(9)) && !b.contains(TrajectoryId(4)) && b.len() == 1);
    }

    fn at_version(id: u128, group: u128, version: u64) -> Held {
        Held { entry_id: format!("{id}-0"), item: scored(id, group, version, 0.0, Verdict::NotRequested) }
    }

    /// A group whose missing member was dropped on arrival is complete without it: released at
    /// once, not after max_wait.
    #[test]
    fn a_group_that_lost_a_member_is_complete_without_it() {
        let t0 = Instant::now();
        let mut b = Batcher::new(4, 1, Duration::from_secs(120), true, None);
        for id in 1..=3 {
            b.push(held(id, 1), t0);
        }
        assert!(b.take(t0).is_none(), "three of four: it waits");
        b.lost(&held(4, 1).item.trajectory, t0);
        assert_eq!(ids(&b.take(t0).unwrap()), [1, 2, 3], "three of three left");
        // A loss before any member came counts too; it is forgotten with its group.
        b.lost(&held(8, 2).item.trajectory, t0);
        for id in 5..=7 {
            b.push(held(id, 2), t0);
        }
        assert_eq!(ids(&b.take(t0).unwrap()), [5, 6, 7]);
        b.push(held(9, 2), t0);
        assert!(b.take(t0).is_none(), "a later group under the same key expects all four again");
    }

    /// Members that went stale while they waited are taken out (for the caller to drop and
    /// acknowledge), their group emptied or completed by the loss; fresh ones stay.
    #[test]
    fn stale_members_are_taken_out_and_their_group_completes_without_them() {
        let t0 = Instant::now();
        let mut b = Batcher::new(3, 1, Duration::from_secs(120), true, None);
        b.push(at_version(1, 1, 0), t0);
        b.push(at_version(2, 1, 0), t0);
        b.push(at_version(3, 2, 5), t0);
        b.push(at_version(4, 2, 0), t0);
        // At version 5 with no staleness allowed, versions below 5 are stale.
        let gone = b.take_stale(PolicyVersion(5), 0, t0);
        assert_eq!(ids(&gone), [1, 2, 4]);
        assert!(!b.contains(TrajectoryId(1)) && !b.holds_entry("4-0") && b.len() == 1);
        assert!(b.take(t0).is_none(), "group 2 holds one of the two it can still get");
        b.push(at_version(5, 2, 5), t0);
        assert_eq!(ids(&b.take(t0).unwrap()), [3, 5], "complete at two: one of three was lost");
        assert!(b.take_stale(PolicyVersion(5), 0, t0).is_empty() && b.len() == 0);
    }

    #[test]
    fn waiting_past_max_wait_releases_incomplete_groups() {
        let t0 = Instant::now();
        let wait = Duration::from_millis(100);
        let mut b = Batcher::new(4, 2, wait, true, None);
        b.push(held(1, 1), t0);
        b.push(held(2, 1), t0 + Duration::from_millis(50));
        assert!(b.take(t0 + Duration::from_millis(99)).is_none());
        assert_eq!(ids(&b.take(t0 + wait).unwrap()), [1, 2]);
        assert_eq!(b.len(), 0);
    }

    #[test]
    fn a_full_buffer_releases_its_oldest_groups() {
        let t0 = Instant::now();
        let mut b = Batcher::new(2, 1, Duration::from_secs(60), true, None);
        for g in 0..(CAPACITY_BATCHES * 2) as u128 {
            assert!(b.take(t0).is_none(), "group {g}: nothing is complete or late yet");
            b.push(held(100 + g, g), t0 + Duration::from_millis(g as u64));
        }
        assert_eq!(ids(&b.take(t0).unwrap()), [100], "the oldest incomplete group goes first");
    }

    fn refined(id: u128, group: u128) -> Held {
        let mut h = held(id, group);
        h.item.trajectory.attempt = protocol::wire::Attempt::Refined { of: TrajectoryId(id - 10) };
        h
    }

    #[test]
    fn pooled_attempts_wait_for_the_refined_ones_and_train_as_one_group() {
        let t0 = Instant::now();
        let wait = Duration::from_millis(100);
        // G = 2, pooled: the initial pair alone is not a complete group.
        let mut b = Batcher::new(2, 1, wait, false, ALL);
        b.push(held(1, 1), t0);
        b.push(held(2, 1), t0);
        assert!(b.take(t0).is_none(), "the pooled group waits for its refined attempts");
        b.push(refined(11, 1), t0);
        b.push(refined(12, 1), t0);
        assert_eq!(ids(&b.take(t0).unwrap()), [1, 2, 11, 12], "2G members: one group, released at once");

        // Only one refined attempt comes: at the deadline the group goes with three members; the
        // late refined attempt is kept and forms its own group under the same key.
        b.push(held(3, 2), t0);
        b.push(held(4, 2), t0);
        b.push(refined(13, 2), t0);
        assert!(b.take(t0 + wait - Duration::from_millis(1)).is_none());
        assert_eq!(ids(&b.take(t0 + wait).unwrap()), [3, 4, 13]);
        b.push(refined(14, 2), t0 + wait);
        assert!(b.contains(TrajectoryId(14)), "a late refined attempt is not lost");
        assert_eq!(ids(&b.take(t0 + wait * 2).unwrap()), [14]);

        // Separate groups (or a mode without refinement): G members complete a group.
        let mut s = Batcher::new(2, 1, wait, true, ALL);
        s.push(held(5, 3), t0);
        s.push(held(6, 3), t0);
        assert_eq!(ids(&s.take(t0).unwrap()), [5, 6]);
    }

    #[test]
    fn with_failed_a_refined_group_is_complete_at_the_failed_initial_attempts() {
        let t0 = Instant::now();
        let wait = Duration::from_secs(60);
        let mut b = Batcher::new(3, 1, wait, true, FAILED);
        // One of three initial attempts failed: its refined group is complete at one member.
        b.push(solved(1, 1), t0);
        b.push(held(2, 1), t0);
        b.push(solved(3, 1), t0);
        assert_eq!(ids(&b.take(t0).unwrap()), [1, 2, 3]);
        b.push(refined(12, 1), t0);
        assert_eq!(ids(&b.take(t0).unwrap()), [12], "k = 1: no wait for refined attempts that never come");
        // Two failed: the first refined attempt alone is not the group.
        for (id, solved_first) in [(4, false), (5, true), (6, false)] {
            b.push(if solved_first { solved(id, 2) } else { held(id, 2) }, t0);
        }
        assert_eq!(ids(&b.take(t0).unwrap()), [4, 5, 6]);
        b.push(refined(14, 2), t0);
        assert!(b.take(t0).is_none(), "one of two refined attempts");
        b.push(refined(16, 2), t0);
        assert_eq!(ids(&b.take(t0).unwrap()), [14, 16]);
        // With `all`, the refined group of the same task still waits for G.
        let mut a = Batcher::new(3, 1, wait, true, ALL);
        for id in [1, 2, 3] {
            a.push(solved(id, 1), t0);
        }
        a.push(refined(12, 1), t0);
        assert_eq!(ids(&a.take(t0).unwrap()), [1, 2, 3]);
        assert!(a.take(t0).is_none(), "all: three refined attempts are coming");
    }

    #[test]
    fn with_failed_a_pooled_group_is_complete_at_g_plus_the_failed_ones() {
        let t0 = Instant::now();
        let mut b = Batcher::new(2, 1, Duration::from_secs(60), false, FAILED);
        b.push(solved(1, 1), t0);
        b.push(solved(2, 1), t0);
        assert_eq!(ids(&b.take(t0).unwrap()), [1, 2], "every initial attempt solved: no refined attempt to wait for");
        b.push(solved(3, 2), t0);
        b.push(held(4, 2), t0);
        assert!(b.take(t0).is_none(), "the failed attempt's refinement is coming");
        b.push(refined(14, 2), t0);
        assert_eq!(ids(&b.take(t0).unwrap()), [3, 4, 14]);
    }

    #[test]
    fn a_remembered_refined_size_is_forgotten_after_its_ttl() {
        let t0 = Instant::now();
        let wait = Duration::from_millis(10);
        let mut b = Batcher::new(1, 1, wait, true, FAILED);
        b.push(held(1, 1), t0);
        assert_eq!(ids(&b.take(t0).unwrap()), [1]);
        assert_eq!(b.planned.len(), 1);
        b.push(held(2, 2), t0 + wait * PLANNED_TTL_WAITS);
        b.take(t0 + wait * PLANNED_TTL_WAITS).unwrap();
        assert_eq!(b.planned.keys().collect::<Vec<_>>(), [&GroupId(2)], "group 1's refined attempt never came");
    }
}
