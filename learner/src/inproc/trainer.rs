//! The in-process trainer's state and one iteration: draw tasks, play `group_size` attempts
//! of each in lockstep, learn from them.

use std::time::Instant;

use policy::{ByteTokenizer, LoadedModel, Sampler, Tokenizer};
use protocol::wire::{ActorId, GroupId, PolicyVersion, RunId, TaskSpec};
use serde::Serialize;
use std::sync::Arc;

use super::config::InprocConfig;
use super::feedback::score_iteration;
use super::update::{learn, update_config};
use crate::error::Result;
use crate::optim::AdamW;
use crate::rng::SampleRng;
use crate::update::{Models, UpdateConfig};
use episode::{
    evaluate_greedy, held_out_specs, run_episodes, EpisodeTask, EvalReport, PolicyRef, TrajectoryMeta,
    HELD_OUT_SEED_BASE,
};

/// What one iteration did; also one line of the learning curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterationStats {
    /// The iteration just finished, from 1.
    pub iteration: u64,
    /// Episodes played (initial and refined).
    pub episodes: usize,
    /// Fraction of this iteration's initial attempts that succeeded.
    pub success_rate: f64,
    /// Fraction of its refined attempts that succeeded (critique and unified modes).
    pub refined_success_rate: Option<f64>,
    /// Mean reward of this iteration's episodes.
    pub mean_reward: f64,
    /// Trajectories with a non-zero advantage (the ones trained on, by default).
    pub trained_trajectories: usize,
    /// Optimizer updates applied.
    pub updates: usize,
    /// Mean PPO loss over the updates.
    pub loss: f64,
    /// Mean fraction of trained tokens whose ratio was clipped.
    pub clip_fraction: f64,
    /// Mean approximate KL between the behaviour and the updated policy.
    pub approx_kl: f64,
    /// Mean KL to the reference policy (0 without one).
    pub kl_ref: f64,
    /// Mean gradient norm before clipping.
    pub grad_norm: f64,
    /// The learning rate of the last update.
    pub lr: f64,
    /// Agent tokens generated.
    pub generated_tokens: usize,
    /// Seconds spent generating (episodes included).
    pub generation_seconds: f64,
    /// Tokens through forward and backward.
    pub train_tokens: usize,
    /// Seconds spent learning.
    pub train_seconds: f64,
    /// Generated agent tokens per second of the whole iteration (generation and learning):
    /// the end-to-end rate the distributed pipeline is compared with.
    pub tokens_per_sec: f64,
    /// Policy version after this iteration (one per optimizer update).
    pub policy_version: u64,
    /// Time since the run started, evaluations excluded, in seconds.
    pub elapsed_seconds: f64,
    /// Greedy held-out success, when this iteration was followed by an evaluation.
    pub eval: Option<EvalReport>,
}

/// Model, frozen reference, optimizer and RNGs of an in-process run.
pub struct Trainer {
    model: LoadedModel,
    reference: Option<LoadedModel>,
    opt: AdamW,
    update: UpdateConfig,
    sampler: Sampler,
    task_rng: SampleRng,
    cfg: InprocConfig,
    iteration: u64,
    version: u64,
    next_group: u128,
    tokenizer: Arc<dyn Tokenizer>,
}

impl Trainer {
    /// A trainer starting from `model` (typically the SFT model); with `kl_coef > 0` a frozen
    /// copy of it becomes the KL reference.
    pub fn new(model: LoadedModel, cfg: InprocConfig) -> Result<Self> {
        cfg.validate()?;
        let reference = if cfg.learner.kl_coef > 0.0 {
            let mut copy = LoadedModel::fresh(model.model.config(), model.vs.device(), false)?;
            copy.vs.copy(&model.vs)?;
            copy.vs.freeze();
            Some(copy)
        } else {
            None
        };
        let opt = AdamW::from_named(model.vs.variables(), cfg.learner.adamw_config());
        let update = update_config(&cfg, ByteTokenizer.special_ids().pad, model.model.config())?;
        let sampler = Sampler::new(cfg.seed ^ 0x5A3F_1E00);
        let task_rng = SampleRng::new(cfg.seed ^ 0x7A5C_0000);
        let tokenizer: Arc<dyn Tokenizer> = Arc::new(ByteTokenizer);
        Ok(Self {
            model,
            reference,
            opt,
            update,
            sampler,
            task_rng,
            cfg,
            iteration: 0,
            version: 0,
            next_group: 1,
            tokenizer,
        })
    }

    /// Episodes written in `tokenizer` (a pretrained model's own, with its chat template)
    /// instead of the byte-level tokenizer of the built-in models.
    pub fn with_tokenizer(mut self, tokenizer: Arc<dyn Tokenizer>) -> Result<Self> {
        self.update = update_config(&self.cfg, tokenizer.special_ids().pad, self.model.model.config())?;
        self.tokenizer = tokenizer;
        Ok(self)
    }

    /// The model being trained.
    pub fn model(&self) -> &LoadedModel {
        &self.model
    }

    /// Gives the trained model back.
    pub fn into_model(self) -> LoadedModel {
        self.model
    }

    /// The settings.
    pub fn config(&self) -> &InprocConfig {
        &self.cfg
    }

    /// Greedy success on the fixed held-out tasks (`eval_tasks` seeds from
    /// [`HELD_OUT_SEED_BASE`] at the run's difficulty).
    pub fn evaluate(&self) -> Result<EvalReport> {
        let specs = held_out_specs(self.cfg.family, self.cfg.difficulty, self.cfg.eval_tasks);
        Ok(evaluate_greedy(self.policy(), &specs, &self.cfg.rollout)?)
    }

    fn policy(&self) -> PolicyRef<'_> {
        PolicyRef { model: &self.model.model, tokenizer: self.tokenizer.as_ref() }
    }

    /// One iteration: `tasks_per_iteration` fresh training tasks, `group_size` sampled
    /// attempts each (one batch per turn), rewards, GRPO advantages, PPO updates.
    pub fn iteration(&mut self) -> Result<IterationStats> {
        let started = Instant::now();
        let mut tasks = Vec::with_capacity(self.cfg.tasks_per_iteration * self.cfg.group_size);
        for _ in 0..self.cfg.tasks_per_iteration {
            let seed = self.task_rng.next_u64() % HELD_OUT_SEED_BASE;
            let spec = TaskSpec { family: self.cfg.family, seed, difficulty: self.cfg.difficulty };
            let group = GroupId(self.next_group);
            self.next_group += 1;
            tasks.extend((0..self.cfg.group_size).map(|_| EpisodeTask::initial(spec, group)));
        }
        let meta = TrajectoryMeta {
            run_id: RunId::new("inproc").expect("a valid run id"),
            actor_id: ActorId("inproc".into()),
            policy_version: PolicyVersion(self.version),
        };
        let episodes = {
            let policy = PolicyRef { model: &self.model.model, tokenizer: self.tokenizer.as_ref() };
            let cfg = &self.cfg.rollout;
            let sampler = &mut self.sampler;
            tch::no_grad(|| run_episodes(policy, &tasks, cfg, &meta, sampler))?
        };
        let initial_success =
            episodes.iter().filter(|e| e.outcome.success).count() as f64 / episodes.len().max(1) as f64;
        let (scored, refined) = {
            let policy = PolicyRef { model: &self.model.model, tokenizer: self.tokenizer.as_ref() };
            let mode = self.cfg.learner.feedback;
            score_iteration(
                policy,
                episodes,
                mode,
                self.cfg.reveal_outcome,
                &self.cfg.rollout,
                &meta,
                &mut self.sampler,
            )?
        };
        let refined_success = (!refined.is_empty())
            .then(|| refined.iter().filter(|e| e.outcome.success).count() as f64 / refined.len() as f64);
        let generation_seconds = started.elapsed().as_secs_f64();
        let generated_tokens = scored.iter().map(|s| s.trajectory.trained_tokens()).sum();
        let train_start = Instant::now();
        // The schedule's decay follows the group budget: this iteration's updates sit after the
        // `epochs × minibatches` planned for each earlier one, taken or not (a minibatch of
        // flat groups takes none). A constant rate reads only the updates taken.
        let planned = (self.cfg.epochs * self.cfg.minibatches) as u64;
        self.opt.advance_schedule_to(self.iteration * planned);
        let reference = self.reference.as_ref().map(|r| &r.model);
        let models = Models { policy: &self.model.model, reference };
        let out = learn(models, &mut self.opt, &scored, &self.update)?;
        let train_seconds = train_start.elapsed().as_secs_f64();
        self.iteration += 1;
        self.version += out.updates as u64;
        Ok(IterationStats {
            iteration: self.iteration,
            episodes: scored.len(),
            success_rate: initial_success,
            refined_success_rate: refined_success,
            mean_reward: out.mean_reward,
            trained_trajectories: out.trained_trajectories,
            updates: out.updates,
            loss: out.loss.total,
            clip_fraction: out.loss.clip_fraction,
            approx_kl: out.loss.approx_kl,
            kl_ref: out.loss.kl,
            grad_norm: out.grad_norm,
            lr: out.lr,
            generated_tokens,
            generation_seconds,
            train_tokens: out.train_tokens,
            train_seconds,
            tokens_per_sec: generated_tokens as f64 / started.elapsed().as_secs_f64().max(1e-9),
            policy_version: self.version,
            elapsed_seconds: 0.0,
            eval: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::LrDecay;
    use policy::ModelConfig;
    use tch::Device;

    /// Two groups an iteration split into four minibatches: at most two of the four planned
    /// updates are taken (fewer when a group's rewards are equal), so an optimizer whose
    /// position counted only updates taken would stand at most at 6 after three iterations.
    #[test]
    fn the_decay_is_at_the_planned_update_whether_or_not_the_updates_were_taken() {
        let mut cfg = InprocConfig {
            tasks_per_iteration: 2,
            group_size: 2,
            minibatches: 4,
            iterations: 3,
            ..InprocConfig::default()
        };
        cfg.rollout.max_new_tokens = 8;
        cfg.learner.lr_decay = LrDecay::Cosine;
        cfg.learner.total_steps = 12;
        cfg.learner.min_lr_ratio = 0.1;
        let model = policy::seed::seeded(5, || LoadedModel::fresh(&ModelConfig::micro(), Device::Cpu, false)).unwrap();
        let mut trainer = Trainer::new(model, cfg).unwrap();
        let mut taken = 0;
        for k in 0..3u64 {
            let stats = trainer.iteration().unwrap();
            assert!(stats.updates <= 2, "iteration {k}: {} updates from two groups", stats.updates);
            taken += stats.updates as u64;
            assert_eq!(trainer.opt.schedule_position(), 4 * k + stats.updates as u64, "iteration {k}");
        }
        assert_eq!(trainer.opt.steps(), taken);
    }
}
