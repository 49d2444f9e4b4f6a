//! [`SftConfig`]: what a supervised cold start trains, on what, for how long.

use std::path::PathBuf;
use std::time::Duration;

use policy::ModelConfig;
use protocol::wire::TaskFamily;

use crate::checkpoint::ResumeMode;
use crate::error::{LearnerError, Result};
use crate::optim::{AdamWConfig, LrDecay, LrSchedule};
use episode::RolloutConfig;

/// A supervised fine-tuning run on reference episodes.
#[derive(Debug, Clone, PartialEq)]
pub struct SftConfig {
    /// The model to train from a fresh initialisation.
    pub model: ModelConfig,
    /// Seeds the initial weights (libtorch's generator) and the order of training tasks.
    pub seed: u64,
    /// The task family trained on.
    pub family: TaskFamily,
    /// Difficulties of the training tasks, drawn uniformly per episode.
    pub difficulties: Vec<u32>,
    /// How conversations are rendered (system prompt) and how evaluation plays episodes.
    pub rollout: RolloutConfig,
    /// Reference episodes per update.
    pub batch_size: usize,
    /// The share of training sequences that are refinement examples (a flawed or flawless
    /// first attempt and its critique, then the correct solution; [`super::refine`]) instead of
    /// plain reference episodes: what critique-guided refinement (Reagent-C/U) builds on.
    pub refine_share: f64,
    /// Updates (the learning-rate schedule decays over them).
    pub steps: u64,
    /// Training stops early once this much training time (evaluation excluded) has passed.
    pub time_limit: Option<Duration>,
    /// Peak learning rate.
    pub lr: f64,
    /// Linear warm-up updates.
    pub warmup_steps: u64,
    /// Cosine decay to `min_lr_ratio · lr` at `steps` (1 keeps the rate constant).
    pub min_lr_ratio: f64,
    /// AdamW's decoupled weight decay on matrices.
    pub weight_decay: f64,
    /// Global gradient-norm clip.
    pub max_grad_norm: f64,
    /// Greedy evaluation every this many updates (0: only after the last).
    pub eval_every: u64,
    /// Held-out tasks per evaluated difficulty.
    pub eval_tasks: usize,
    /// Difficulties evaluated.
    pub eval_difficulties: Vec<u32>,
    /// Train on the chats of this JSON-lines file ([`super::episodes_file`], the OpenAI
    /// format) instead of the environments' reference episodes; `None`: reference episodes.
    pub episodes: Option<PathBuf>,
    /// Continue from this model directory (`config.json`, `model.safetensors`) instead of a
    /// fresh initialisation; `model` is then its configuration. A staged cold start: plain
    /// reference episodes first, refinement examples after.
    pub init: Option<PathBuf>,
    /// A checkpoint every this many updates, and after the last ([`super::resume`]); 0: only
    /// after the last.
    pub checkpoint_every: u64,
    /// Where [`super::run`] starts: the newest checkpoint in its output directory (`auto`), a
    /// checkpoint by path, or afresh (`never`, refused when checkpoints are there).
    pub resume: ResumeMode,
    /// Where the model trains and is evaluated: the CPU in f32, or a CUDA device in bf16 with
    /// fp32 masters (a checkpoint resumes on either).
    pub device: tch::Device,
}

/// The share of refinement examples in a cold start (see [`SftConfig::refine_share`]).
pub const DEFAULT_REFINE_SHARE: f64 = 0.3;

/// The model of an issue-4 experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExperimentSize {
    /// [`ModelConfig::tiny`] (1.6 M parameters), the size issue 4 names. Within five
    /// minutes on two CPU cores it learns difficulty 1 only, so it trains on difficulty 1.
    Tiny,
    /// [`micro_model`] (0.17 M parameters): about six times as many tokens per second as
    /// `tiny`, so five minutes take it through difficulty 1 and into difficulty 2, on both of
    /// which it trains.
    Micro,
}

/// A two-layer, 64-wide model for the byte tokenizer (about 0.17 M parameters): the
/// smallest that learns `math` from reference episodes, for the test suite and CPU runs.
pub fn micro_model() -> ModelConfig {
    ModelConfig::micro()
}

impl SftConfig {
    /// The settings of the full-length experiment (`reagent sft --size …`) for `size`: at
    /// most five minutes of training, compact prompt, batches of 8, constant learning rate
    /// after a short warm-up (a decaying rate delays the point where the model learns to copy
    /// numbers from the problem; 3e-3 is too high for `tiny`).
    pub fn experiment(size: ExperimentSize) -> Self {
        let (model, difficulties, lr) = match size {
            ExperimentSize::Tiny => (ModelConfig::tiny(), vec![1], 1e-3),
            ExperimentSize::Micro => (micro_model(), vec![1, 2], 2e-3),
        };
        Self {
            model,
            seed: 1,
            family: TaskFamily::Math,
            difficulties,
            rollout: compact_rollout(),
            batch_size: 8,
            refine_share: DEFAULT_REFINE_SHARE,
            steps: 100_000,
            time_limit: Some(Duration::from_secs(300)),
            lr,
            warmup_steps: 20,
            min_lr_ratio: 1.0,
            weight_decay: 0.01,
            max_grad_norm: 1.0,
            eval_every: match size {
                ExperimentSize::Tiny => 250,
                ExperimentSize::Micro => 1000,
            },
            eval_tasks: 100,
            eval_difficulties: vec![1, 2],
            episodes: None,
            init: None,
            checkpoint_every: 500,
            resume: ResumeMode::Auto,
            device: tch::Device::Cpu,
        }
    }

    /// The tokenizer episodes are written in: `init`'s own (its `tokenizer.json` and chat
    /// template), or the byte-level tokenizer of a fresh built-in model.
    pub fn tokenizer(&self) -> Result<Box<dyn policy::Tokenizer>> {
        Ok(match &self.init {
            Some(dir) => policy::pretrained::tokenizer_for_dir(dir)?,
            None => Box::new(policy::ByteTokenizer),
        })
    }

    /// AdamW with warm-up and cosine decay over `steps`.
    pub fn adam_config(&self) -> AdamWConfig {
        let decay = if self.min_lr_ratio >= 1.0 { LrDecay::Constant } else { LrDecay::Cosine };
        AdamWConfig {
            schedule: LrSchedule {
                peak: self.lr,
                warmup_steps: self.warmup_steps,
                decay,
                total_steps: self.steps,
                min_lr_ratio: self.min_lr_ratio,
            },
            weight_decay: self.weight_decay,
            max_grad_norm: (self.max_grad_norm > 0.0).then_some(self.max_grad_norm),
            ..AdamWConfig::default()
        }
    }

    /// Checks every value; the error names the first bad key.
    pub fn validate(&self) -> Result<()> {
        let bad =
            |key: &str, expected: &str, found: String| Err(LearnerError::config(format!("sft.{key}"), expected, found));
        self.model.validate()?;
        if self.difficulties.is_empty() || self.difficulties.iter().any(|d| !(1..=3).contains(d)) {
            return bad("difficulties", "a non-empty list of 1, 2 or 3", format!("{:?}", self.difficulties));
        }
        if self.eval_difficulties.iter().any(|d| !(1..=3).contains(d)) {
            return bad("eval_difficulties", "a list of 1, 2 or 3", format!("{:?}", self.eval_difficulties));
        }
        if !(0.0..=1.0).contains(&self.refine_share) {
            return bad("refine_share", "a number in [0, 1]", self.refine_share.to_string());
        }
        if self.batch_size == 0 {
            return bad("batch_size", "at least 1", "0".into());
        }
        if self.steps == 0 && self.init.is_none() {
            return bad("steps", "at least 1 (0 only with a model directory to evaluate as it is)", "0".into());
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return bad("lr", "a finite positive number", self.lr.to_string());
        }
        if !(0.0..=1.0).contains(&self.min_lr_ratio) {
            return bad("min_lr_ratio", "a number in [0, 1]", self.min_lr_ratio.to_string());
        }
        if self.family == TaskFamily::Dataset && self.episodes.is_none() {
            // Reference episodes need a reference answer; a regex names none.
            let catalog = env_workers::families::dataset::installed()
                .map_err(|e| LearnerError::Environment(env_workers::EnvError::Dataset(e)))?;
            if let Some(t) = catalog.tasks().iter().find(|t| t.answer.reference().is_none()) {
                return bad(
                    "family",
                    "a dataset whose answers are literal (match \"exact\" or \"numeric\") to train on its reference episodes, or an episodes file",
                    format!("task {:?} of a match = \"regex\" file", t.id),
                );
            }
        }
        Ok(())
    }
}

/// The compact conversation for small byte-level models ([`RolloutConfig::compact`]).
pub fn compact_rollout() -> RolloutConfig {
    RolloutConfig::compact()
}
