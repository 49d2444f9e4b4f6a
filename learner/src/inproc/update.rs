//! One iteration's learning step: the iteration's episodes as [`ScoredTrajectory`] values, one
//! [`grpo_update`] — the queue learner's own update (groups without a learning signal left out,
//! the rest split into minibatches of whole groups), with the PPO ratio taken against the
//! behaviour log-probs ([`Proximal::Behaviour`]).
//!
//! ```text
//!  scored trajectories (feedback::score_iteration) ─ reward::rewards ─ flat groups out
//!     ─ update::grpo_update: `epochs` passes over `minibatches` parts of whole groups
//! ```

use protocol::wire::ScoredTrajectory;

use super::config::InprocConfig;
use crate::error::Result;
use crate::loss::LossStats;
use crate::optim::AdamW;
use crate::update::{grpo_update, Models, Proximal, UpdateConfig};

/// What the learning step of one iteration did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateOutcome {
    /// Mean reward (outcome, plus λ·score where the mode uses it) of all trajectories.
    pub mean_reward: f64,
    /// Trajectories trained on (those of groups with unequal rewards, unless all are kept).
    pub trained_trajectories: usize,
    /// Optimizer updates applied.
    pub updates: usize,
    /// Tokens through forward and backward (all positions of trained sequences, per pass).
    pub train_tokens: usize,
    /// The loss parts, averaged over the updates (zero when nothing was trained on).
    pub loss: LossStats,
    /// The gradient norm before clipping, averaged over the updates.
    pub grad_norm: f64,
    /// The last update's learning rate.
    pub lr: f64,
}

/// The update settings of an in-process run: the `[learner]` section's, at the sampling
/// temperature, minibatches cut into passes by the queue learner's default token budget
/// (`learner.service.micro_batch_tokens`, so the two compute alike), the run's epochs and
/// minibatches, PPO against the behaviour policy.
pub fn update_config(cfg: &InprocConfig, pad_id: u32) -> Result<UpdateConfig> {
    let mut u = UpdateConfig::new(&cfg.learner, cfg.rollout.temperature, pad_id, 0)?;
    u.micro_batch_tokens = crate::service::config::ServiceConfig::default().micro_batch_tokens;
    u.proximal = Proximal::Behaviour;
    u.ppo_epochs = cfg.epochs;
    u.minibatches = cfg.minibatches;
    u.skip_flat_groups = cfg.skip_zero_advantage;
    Ok(u)
}

/// Applies the minibatch updates of the iteration's `scored` trajectories to `models.policy`.
pub fn learn(
    models: Models<'_>,
    opt: &mut AdamW,
    scored: &[ScoredTrajectory],
    update: &UpdateConfig,
) -> Result<UpdateOutcome> {
    // One update: flat groups left out (skip_zero_advantage), then `epochs` passes over
    // `minibatches` parts of whole groups — the queue learner's own code path.
    let stats = grpo_update(models, opt, scored, update)?;
    Ok(UpdateOutcome {
        mean_reward: stats.reward_mean,
        trained_trajectories: stats.trained_trajectories,
        updates: stats.steps,
        train_tokens: stats.tokens * update.ppo_epochs.max(1) * usize::from(stats.steps > 0),
        loss: stats.loss,
        grad_norm: stats.optimizer.grad_norm,
        lr: stats.optimizer.lr,
    })
}
