//! One iteration's learning step: the iteration's episodes as [`ScoredTrajectory`] values, one
//! [`grpo_update`] — the queue learner's own update (groups without a learning signal left out,
//! the rest split into minibatches of whole groups), with the PPO ratio taken against the
//! behaviour log-probs ([`Proximal::Behaviour`]).
//!
//! ```text
//!  scored trajectories (feedback::score_iteration) ─ reward::rewards ─ flat groups out
//!     ─ update::grpo_update: `epochs` passes over `minibatches` parts of whole groups
//! ```

use policy::ModelConfig;
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

/// Activations a micro-batch of an in-process update may keep for its backward pass: 4 GiB,
/// so that a run fits a 16 GiB machine beside its model, optimizer and generation caches.
pub const ACTIVATION_BUDGET_BYTES: u64 = 4 << 30;

/// The token budget of an in-process update's micro-batches for `model`: the queue learner's
/// default (`learner.service.micro_batch_tokens`, 8,192, so the two compute alike) where the
/// model's activations for that many tokens fit [`ACTIVATION_BUDGET_BYTES`], else as many
/// tokens as fit, a multiple of 256 and at least 256. SmolLM2-135M: 2,560 (at 8,192 tokens a
/// refining run's micro-batch of long refined attempts kept about 13 GB of activations and was
/// killed for memory on a 24 GiB machine). The micro-batches of a minibatch sum into one step,
/// so the budget changes the update only by floating-point summation order.
pub fn micro_batch_tokens_for(model: &ModelConfig) -> usize {
    let default = crate::service::config::ServiceConfig::default().micro_batch_tokens;
    let fit = (ACTIVATION_BUDGET_BYTES / model.activation_bytes_per_token()) as usize;
    default.min((fit / 256 * 256).max(256))
}

/// The update settings of an in-process run of `model`: the `[learner]` section's, at the
/// sampling temperature, minibatches cut into micro-batches by [`micro_batch_tokens_for`], the
/// run's epochs and minibatches, PPO against the behaviour policy.
pub fn update_config(cfg: &InprocConfig, pad_id: u32, model: &ModelConfig) -> Result<UpdateConfig> {
    let mut u = UpdateConfig::new(&cfg.learner, cfg.rollout.temperature, pad_id, 0)?;
    u.micro_batch_tokens = micro_batch_tokens_for(model);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M-Instruct's `config.json` (the fields the estimate reads are its shape).
    const SMOLLM2: &str = r#"{"model_type": "llama", "vocab_size": 49152, "hidden_size": 576,
        "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
        "num_key_value_heads": 3, "head_dim": 64, "max_position_embeddings": 8192,
        "rope_theta": 100000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": true,
        "hidden_act": "silu", "attention_bias": false, "mlp_bias": false, "initializer_range": 0.02}"#;

    #[test]
    fn a_real_models_micro_batches_hold_its_activations_within_the_budget() {
        let smol = ModelConfig::from_json_str(SMOLLM2).unwrap();
        // 30 layers × 4 bytes × (8·576 + 4·576 + 3·192 + 4·1536) = 1,635,840 bytes a token.
        assert_eq!(smol.activation_bytes_per_token(), 1_635_840);
        let budget = micro_batch_tokens_for(&smol);
        assert_eq!(budget, 2560, "4 GiB / 1.64 MB = 2,625 tokens, cut to a multiple of 256");
        assert!(budget as u64 * smol.activation_bytes_per_token() <= ACTIVATION_BUDGET_BYTES);
        assert!((budget as u64 + 256) * smol.activation_bytes_per_token() > ACTIVATION_BUDGET_BYTES);
        // The built-in models keep the queue learner's budget, so both learners cut alike.
        let queue = crate::service::config::ServiceConfig::default().micro_batch_tokens;
        for small in [ModelConfig::tiny(), ModelConfig::micro()] {
            assert_eq!(micro_batch_tokens_for(&small), queue);
        }
        // A model too large for even 256 tokens gets 256, not 0.
        let huge = ModelConfig { hidden_size: 1 << 20, intermediate_size: 1 << 22, ..smol.clone() };
        assert_eq!(micro_batch_tokens_for(&huge), 256);
        let cfg = InprocConfig::default();
        assert_eq!(update_config(&cfg, 0, &smol).unwrap().micro_batch_tokens, 2560);
    }
}
