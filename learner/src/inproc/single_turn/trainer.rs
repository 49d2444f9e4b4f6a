//! GRPO on single-turn tasks: each step samples `group_size` completions of every prompt in one
//! KV-cached batch ([`policy::Sampler`]), scores them with [`ReverseTask::reward`], and takes one
//! optimizer step through the queue learner's own update ([`grpo_update`]).
//!
//! ```text
//!  prompts ×group_size ─ Sampler::generate (T 0.7, ≤ max_new_tokens, stop at <|eos|> or <|end|>)
//!     ─ decode ─ reward ─ [user turn: prompt | agent turn: completion + behaviour log-probs]
//!     ─ grpo_update: GRPO advantages per prompt ─ PPO loss ─ backward ─ AdamW   (one step)
//! ```
//!
//! Synchronous tch work: run it on a blocking thread.

use std::time::Instant;

use policy::{ByteTokenizer, LoadedModel, Sampler, SamplingParams, Tokenizer};
use protocol::wire::{
    ActorId, Attempt, Episode, GroupId, PolicyVersion, Role, RunId, ScoredTrajectory, TaskFamily, TaskSpec, Timing,
    Trajectory, TrajectoryId, Turn, Verdict,
};

use super::task::ReverseTask;
use crate::config::LearnerConfig;
use crate::error::{LearnerError, Result};
use crate::optim::AdamW;
use crate::update::{grpo_update, Models, Proximal, UpdateConfig};

/// The settings of a single-turn run.
#[derive(Debug, Clone, PartialEq)]
pub struct SingleTurnConfig {
    /// Completions per prompt (the GRPO group).
    pub group_size: usize,
    /// The most tokens of one completion.
    pub max_new_tokens: usize,
    /// Sampling temperature (also the temperature the training log-probs are taken at).
    pub temperature: f64,
    /// Loss, advantages and optimizer.
    pub learner: LearnerConfig,
    /// Seeds the sampler.
    pub seed: u64,
}

impl SingleTurnConfig {
    /// TRL GRPOTrainer's defaults where they differ from ours, at the issue's settings: 8
    /// completions per prompt, 64 new tokens, temperature 0.7, lr 1e-4 constant, AdamW without
    /// weight decay, clip ε 0.2 on both sides, no KL term, std-normalised group advantages, one
    /// optimizer step per batch, every group trained on.
    pub fn like_trl() -> Self {
        let learner = LearnerConfig {
            lr: 1e-4,
            weight_decay: 0.0,
            clip_low: 0.2,
            clip_high: 0.2,
            kl_coef: 0.0,
            grpo_std_normalize: true,
            minibatches: 1,
            ppo_epochs: 1,
            skip_flat_groups: false,
            proximal: Proximal::Behaviour,
            ..LearnerConfig::default()
        };
        Self { group_size: 8, max_new_tokens: 64, temperature: 0.7, learner, seed: 1 }
    }

    fn sampling(&self) -> SamplingParams {
        SamplingParams {
            temperature: self.temperature,
            top_p: 1.0,
            max_new_tokens: self.max_new_tokens,
            stop_sequences: vec![vec![ByteTokenizer::END]],
            eos_id: Some(ByteTokenizer::EOS),
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepStats {
    /// Completions sampled.
    pub completions: usize,
    /// Their tokens (each up to and including its stop token).
    pub completion_tokens: usize,
    /// Mean reward.
    pub mean_reward: f64,
    /// Seconds in generation.
    pub generation_seconds: f64,
    /// Seconds in rewards and the update.
    pub train_seconds: f64,
    /// Of which in the update (forward, backward, optimizer step).
    pub update_seconds: f64,
    /// The whole step, in seconds.
    pub seconds: f64,
    /// The PPO loss.
    pub loss: f64,
    /// The gradient norm before clipping.
    pub grad_norm: f64,
}

/// Model, optimizer and sampler of a single-turn run.
pub struct SingleTurnTrainer {
    model: LoadedModel,
    opt: AdamW,
    update: UpdateConfig,
    sampler: Sampler,
    cfg: SingleTurnConfig,
    next_id: u128,
}

impl SingleTurnTrainer {
    /// A trainer of `model` (no KL reference is kept: `like_trl` has none).
    pub fn new(model: LoadedModel, cfg: SingleTurnConfig) -> Result<Self> {
        if cfg.group_size < 2 || cfg.max_new_tokens == 0 {
            return Err(LearnerError::config(
                "single_turn.group_size / max_new_tokens",
                "a group of at least 2 and at least 1 new token",
                format!("{} / {}", cfg.group_size, cfg.max_new_tokens),
            ));
        }
        let mut update = UpdateConfig::new(&cfg.learner, cfg.temperature, ByteTokenizer.special_ids().pad, 0)?;
        update.micro_batch_tokens = crate::service::config::ServiceConfig::default().micro_batch_tokens;
        let opt = AdamW::from_named(model.vs.variables(), cfg.learner.adamw_config());
        let sampler = Sampler::new(cfg.seed ^ 0x51E6_7E00);
        Ok(Self { model, opt, update, sampler, cfg, next_id: 1 })
    }

    /// The model being trained.
    pub fn model(&self) -> &LoadedModel {
        &self.model
    }

    /// One step on `tasks`: `group_size` completions of each, one optimizer update.
    pub fn step(&mut self, tasks: &[ReverseTask]) -> Result<StepStats> {
        let started = Instant::now();
        let prompts: Vec<Vec<u32>> = tasks.iter().map(|t| ByteTokenizer::encode_str(&t.prompt())).collect();
        let batch: Vec<Vec<u32>> =
            prompts.iter().flat_map(|p| std::iter::repeat_n(p.clone(), self.cfg.group_size)).collect();
        let generations = self.sampler.generate(&self.model.model, &batch, &self.cfg.sampling())?;
        let generation_seconds = started.elapsed().as_secs_f64();
        let train_start = Instant::now();
        let mut scored = Vec::with_capacity(generations.len());
        let mut reward_sum = 0.0;
        for (i, g) in generations.into_iter().enumerate() {
            let task = &tasks[i / self.cfg.group_size];
            let text = ByteTokenizer.decode(&g.tokens, true);
            let reward = task.reward(&text);
            reward_sum += reward;
            let group = GroupId(self.next_id + (i / self.cfg.group_size) as u128);
            let prompt = &prompts[i / self.cfg.group_size];
            scored.push(self.scored(i, group, prompt, text, g.tokens, g.logprobs, reward as f32));
        }
        let completion_tokens = scored.iter().map(|s| s.trajectory.trained_tokens()).sum();
        self.next_id += tasks.len() as u128;
        let models = Models { policy: &self.model.model, reference: None };
        let update_start = Instant::now();
        let out = grpo_update(models, &mut self.opt, &scored, &self.update)?;
        let update_seconds = update_start.elapsed().as_secs_f64();
        Ok(StepStats {
            completions: scored.len(),
            completion_tokens,
            mean_reward: reward_sum / scored.len().max(1) as f64,
            generation_seconds,
            train_seconds: train_start.elapsed().as_secs_f64(),
            update_seconds,
            seconds: started.elapsed().as_secs_f64(),
            loss: out.loss.total,
            grad_norm: out.optimizer.grad_norm,
        })
    }

    /// The reward of each task's greedy completion under the current weights.
    pub fn greedy_rewards(&self, tasks: &[ReverseTask]) -> Result<Vec<f64>> {
        let prompts: Vec<Vec<u32>> = tasks.iter().map(|t| ByteTokenizer::encode_str(&t.prompt())).collect();
        let params = SamplingParams { temperature: 0.0, ..self.cfg.sampling() };
        let out = Sampler::new(0).generate(&self.model.model, &prompts, &params)?;
        Ok(tasks.iter().zip(out).map(|(t, g)| t.reward(&ByteTokenizer.decode(&g.tokens, true))).collect())
    }

    /// One completion as the learner takes it: the prompt as a user turn, the completion as the
    /// agent turn.
    #[allow(clippy::too_many_arguments, reason = "one trajectory's parts, named at the one call")]
    fn scored(
        &self,
        index: usize,
        group: GroupId,
        prompt: &[u32],
        text: String,
        tokens: Vec<u32>,
        logprobs: Vec<f32>,
        reward: f32,
    ) -> ScoredTrajectory {
        let user = Turn {
            role: Role::User,
            text: String::new(),
            token_ids: prompt.to_vec(),
            logprobs: Vec::new(),
            loss_mask: vec![false; prompt.len()],
        };
        let mask = vec![true; tokens.len()];
        let agent = Turn { role: Role::Agent, text, token_ids: tokens, logprobs, loss_mask: mask };
        let trajectory = Trajectory {
            run_id: RunId::new("single-turn").expect("a valid run id"),
            id: TrajectoryId(self.next_id << 16 | index as u128),
            actor_id: ActorId("single-turn".into()),
            task: TaskSpec { family: TaskFamily::Dataset, seed: group.0 as u64, difficulty: 1 },
            group_id: group,
            attempt: Attempt::Initial,
            policy_version: PolicyVersion(self.opt.steps()),
            episode: Episode::Text(vec![user, agent]),
            outcome_reward: reward,
            timing: Timing::default(),
        };
        ScoredTrajectory { trajectory, verdict: Verdict::NotRequested }
    }
}
