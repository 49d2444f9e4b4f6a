//! The learning-rate schedule: linear warm-up, then constant or cosine decay.
//!
//! ```text
//!  lr │      ┌──────────── constant
//!     │     ╱ ╲___
//!     │    ╱      ╲___     cosine, down to min_lr_ratio · peak at total_steps
//!     │   ╱           ╲___
//!     └──┴────────────────► update
//!        warmup_steps
//! ```

use serde::{Deserialize, Serialize};

/// What follows the warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LrDecay {
    /// Stay at the peak.
    #[default]
    Constant,
    /// Half a cosine from the peak down to `min_lr_ratio · peak` at `total_steps`.
    Cosine,
}

/// A learning-rate schedule, a pure function of the update index (so resuming needs only the
/// optimizer's step count). A trainer whose planned updates can be skipped (a minibatch of
/// flat groups takes none) reads the decay at its place in the plan instead:
/// [`LrSchedule::lr_at_position`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LrSchedule {
    /// The learning rate after warm-up.
    pub peak: f64,
    /// Updates over which the rate rises linearly: update `i < warmup_steps` uses
    /// `peak · (i + 1) / warmup_steps`, so no update is wasted at rate 0.
    pub warmup_steps: u64,
    /// What follows the warm-up.
    pub decay: LrDecay,
    /// For `cosine`: the update at which the minimum is reached (and kept).
    pub total_steps: u64,
    /// For `cosine`: the final rate as a fraction of the peak.
    pub min_lr_ratio: f64,
}

impl LrSchedule {
    /// A constant rate with no warm-up.
    pub fn constant(lr: f64) -> Self {
        Self { peak: lr, warmup_steps: 0, decay: LrDecay::Constant, total_steps: 0, min_lr_ratio: 0.0 }
    }

    /// The rate for update `step` (0 for the first update).
    pub fn lr_at(&self, step: u64) -> f64 {
        self.lr_at_position(step, step)
    }

    /// The rate for update `step` taken at `position` of the plan (`total_steps` counts
    /// positions): the warm-up follows the updates taken, the decay the position (never less
    /// than `step`), so a run that skips planned updates still ends its decay where its budget
    /// ends.
    pub fn lr_at_position(&self, step: u64, position: u64) -> f64 {
        if step < self.warmup_steps {
            return self.peak * (step + 1) as f64 / self.warmup_steps as f64;
        }
        match self.decay {
            LrDecay::Constant => self.peak,
            LrDecay::Cosine => {
                let span = self.total_steps.saturating_sub(self.warmup_steps).max(1) as f64;
                let progress = (position.max(step) - self.warmup_steps) as f64 / span;
                let progress = progress.min(1.0);
                let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
                self.peak * (self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_then_constant() {
        let s = LrSchedule { warmup_steps: 4, ..LrSchedule::constant(1.0) };
        let lrs: Vec<f64> = (0..6).map(|i| s.lr_at(i)).collect();
        assert_eq!(lrs, [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]);
        assert_eq!(LrSchedule::constant(3e-4).lr_at(0), 3e-4);
    }

    #[test]
    fn cosine_reaches_its_floor_and_stays() {
        let s = LrSchedule { peak: 1.0, warmup_steps: 2, decay: LrDecay::Cosine, total_steps: 6, min_lr_ratio: 0.1 };
        // After warm-up: progress 0, 1/4, 1/2, 3/4, 1 over updates 2..=6.
        // 0.1 + 0.9 · ½(1 + cos(π/4)) = 0.1 + 0.45 · 1.7071068 = 0.86819805
        let want = [0.5, 1.0, 1.0, 0.868_198_05, 0.55, 0.231_801_95, 0.1, 0.1];
        for (i, w) in want.iter().enumerate() {
            assert!((s.lr_at(i as u64) - w).abs() < 1e-8, "update {i}: {} vs {w}", s.lr_at(i as u64));
        }
    }

    #[test]
    fn the_decay_follows_the_position_and_the_warm_up_the_updates() {
        let s = LrSchedule { peak: 1.0, warmup_steps: 2, decay: LrDecay::Cosine, total_steps: 6, min_lr_ratio: 0.1 };
        // Warm-up counts updates taken, wherever the plan is.
        assert_eq!((s.lr_at_position(0, 5), s.lr_at_position(1, 5)), (0.5, 1.0));
        // After it, update 2 at position 4 decays as update 4 would (progress 1/2).
        assert!((s.lr_at_position(2, 4) - 0.55).abs() < 1e-12);
        assert!((s.lr_at_position(3, 6) - 0.1).abs() < 1e-12 && (s.lr_at_position(3, 60) - 0.1).abs() < 1e-12);
        // A position behind the updates taken is read as the update itself.
        assert_eq!(s.lr_at_position(5, 0), s.lr_at(5));
        // A constant rate ignores the position.
        let c = LrSchedule { warmup_steps: 2, ..LrSchedule::constant(1.0) };
        assert_eq!((c.lr_at_position(0, 9), c.lr_at_position(4, 9)), (0.5, 1.0));
    }
}
