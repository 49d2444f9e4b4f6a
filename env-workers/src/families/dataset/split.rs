//! The held-out split and which task a seed plays. The workspace splits every family by seed:
//! training draws seeds below `episode::HELD_OUT_SEED_BASE` (2⁴⁰), evaluation plays the seeds
//! from it up. A dataset follows that, with its tasks split once by a hash of their id:
//!
//! ```text
//!  id ─ SHA-256 ─ first 8 bytes mod 100 < eval_percent ? held-out : training   (fixed forever)
//!  seed < 2⁴⁰  ─► training task  SplitMix64(seed) mod |training pool|   (shuffled order)
//!  seed ≥ 2⁴⁰  ─► held-out task  (seed − 2⁴⁰) mod |held-out pool|         (in file order, so
//!                                  evaluating n = |pool| tasks plays each exactly once)
//! ```
//!
//! A pool is the tasks of one split at one difficulty. Adding lines to a file never moves a
//! task between splits, so a held-out task is never trained on, whatever the file grows into.

use protocol::rng::SplitMix64;
use sha2::{Digest, Sha256};

/// The first held-out seed; equal to `episode::HELD_OUT_SEED_BASE` (the learner's dataset
/// test checks it: `episode` depends on this crate, not the other way round).
pub const HELD_OUT_FROM: u64 = 1 << 40;

/// Training or held-out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Split {
    /// Drawn by training.
    Train,
    /// Played only by evaluation.
    HeldOut,
}

impl Split {
    /// The split of the task with this id, when `eval_percent` percent are held out.
    pub fn of_id(id: &str, eval_percent: u32) -> Self {
        let hash = Sha256::digest(id.as_bytes());
        let mut head = [0u8; 8];
        head.copy_from_slice(&hash[..8]);
        if u64::from_be_bytes(head) % 100 < u64::from(eval_percent) {
            Self::HeldOut
        } else {
            Self::Train
        }
    }

    /// The split a seed draws from.
    pub fn of_seed(seed: u64) -> Self {
        if seed < HELD_OUT_FROM {
            Self::Train
        } else {
            Self::HeldOut
        }
    }

    /// How errors name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Train => "training",
            Self::HeldOut => "held-out",
        }
    }
}

/// The position in a pool of `len` (> 0) tasks that `seed` plays.
pub fn position(seed: u64, len: usize) -> usize {
    let len = len.max(1) as u64;
    let pick = match Split::of_seed(seed) {
        Split::Train => SplitMix64::new(seed).next_u64() % len,
        Split::HeldOut => (seed - HELD_OUT_FROM) % len,
    };
    pick as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_is_a_fixed_function_of_the_id() {
        let ids: Vec<String> = (0..2000).map(|i| format!("gsm8k-{i}")).collect();
        let held = ids.iter().filter(|id| Split::of_id(id, 10) == Split::HeldOut).count();
        assert!((150..=250).contains(&held), "about 10% held out: {held}");
        for id in &ids {
            assert_eq!(Split::of_id(id, 10), Split::of_id(id, 10));
            if Split::of_id(id, 10) == Split::HeldOut {
                assert_eq!(Split::of_id(id, 20), Split::HeldOut, "a larger share keeps the smaller one's tasks");
            }
        }
        assert!(ids.iter().all(|id| Split::of_id(id, 0) == Split::Train));
        // Pinned, so that a change of hash (which would move tasks between splits) fails here.
        let pinned: Vec<usize> =
            (0..40).filter(|i| Split::of_id(&format!("gsm8k-{i}"), 10) == Split::HeldOut).collect();
        assert_eq!(pinned, PINNED_HELD_OUT);
    }

    /// Python: `[i for i in range(40) if int.from_bytes(hashlib.sha256(f"gsm8k-{i}".encode())
    /// .digest()[:8], "big") % 100 < 10]`.
    const PINNED_HELD_OUT: &[usize] = &[18, 25, 33];

    #[test]
    fn seeds_pick_training_tasks_shuffled_and_held_out_ones_in_order() {
        assert_eq!(Split::of_seed(HELD_OUT_FROM - 1), Split::Train);
        assert_eq!(Split::of_seed(HELD_OUT_FROM), Split::HeldOut);
        let held: Vec<usize> = (0..7).map(|i| position(HELD_OUT_FROM + i, 5)).collect();
        assert_eq!(held, [0, 1, 2, 3, 4, 0, 1]);
        let mut seen = [0usize; 5];
        for seed in 0..5000 {
            seen[position(seed, 5)] += 1;
        }
        assert!(seen.iter().all(|&n| (800..=1200).contains(&n)), "every training task is drawn: {seen:?}");
        assert_eq!(position(42, 5), position(42, 5));
    }
}
