//! Supervised cold start (docs/architecture.md section 3): a fresh model trained on the environments'
//! reference episodes — the reference agent messages replayed through the environment, so the
//! observations are real — or on a file of the user's own ([`episodes_file`]), with the loss on
//! the agent's tokens only, as Reagent and MUA-RL do before RL. The RL run ([`crate::inproc`])
//! starts from the model directory it writes.
//!
//! ```text
//!  seeds (below the held-out range) ─ reference_episode ─ flatten ─ TokenBatch (right-padded)
//!     ─ mean NLL over agent tokens ─ backward ─ AdamW (warm-up, then constant or cosine) ─┐
//!     every eval_every updates: greedy success on held-out seeds ◄──────────────────────┘ ─► curve line
//!  out_dir/model/{config.json, model.safetensors}   out_dir/sft_curve.jsonl   out_dir/sft_report.json
//! ```
//!
//! Synchronous tch work: run it on a blocking thread.

pub mod config;
pub mod curve;
pub mod data;
pub mod episodes_file;
pub mod loss;
pub mod refine;
pub mod resume;

use std::path::Path;
use std::time::{Duration, Instant};

use policy::{LoadedModel, ModelConfig, Tokenizer};
use serde::Serialize;
use tch::Device;

use crate::error::Result;
use crate::optim::{AdamW, StepStats};
use crate::tensors::TokenBatch;
pub use config::{compact_rollout, micro_model, ExperimentSize, SftConfig};
use curve::{write_json, CurveWriter};
use data::ReferenceBatches;
use episode::{evaluate_greedy, evaluate_refinement, held_out_specs, EvalReport, PolicyRef, RefinementReport};

/// A freshly initialised model on `device` whose weights are a function of `seed` alone (drawn
/// on the CPU, then copied: a CUDA generator would draw others).
pub fn fresh_model(config: &ModelConfig, seed: u64, device: Device) -> Result<LoadedModel> {
    // libtorch's generator is process-wide: seeding it and drawing the initial weights happen
    // under policy's one lock, so runs on several threads each get their seed's weights.
    let cpu = policy::seed::seeded(seed as i64, || LoadedModel::fresh(config, Device::Cpu, false))?;
    if device == Device::Cpu {
        return Ok(cpu);
    }
    let mut model = LoadedModel::fresh(config, device, false)?;
    model.vs.copy(&cpu.vs)?;
    Ok(model)
}

/// Greedy evaluation at one difficulty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DifficultyEval {
    /// The difficulty.
    pub difficulty: u32,
    /// How the policy did.
    #[serde(flatten)]
    pub report: EvalReport,
}

/// What one update did; also one line of the learning curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SftProgress {
    /// Updates done, from 1.
    pub step: u64,
    /// Updates planned.
    pub steps: u64,
    /// Mean negative log-likelihood of this batch's agent tokens (nats per token).
    pub loss: f64,
    /// The learning rate used.
    pub lr: f64,
    /// Gradient norm before clipping.
    pub grad_norm: f64,
    /// Tokens seen so far (all tokens of every sequence, not only trained ones).
    pub tokens_seen: usize,
    /// Training throughput of this update (forward, backward, optimizer), tokens per second.
    pub tokens_per_sec: f64,
    /// Training time so far, evaluation excluded, in seconds.
    pub train_seconds: f64,
    /// Greedy held-out success, when this update was followed by an evaluation.
    pub eval: Vec<DifficultyEval>,
}

/// The outcome of an SFT run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SftReport {
    /// Updates done (fewer than planned when the time limit stopped the run).
    pub steps: u64,
    /// The first update's loss.
    pub first_loss: f64,
    /// Mean loss of the last ten updates.
    pub final_loss: f64,
    /// Training time, evaluation excluded, in seconds.
    pub train_seconds: f64,
    /// Wall-clock time of the whole run, evaluations included, in seconds.
    pub wall_seconds: f64,
    /// Tokens trained on (all positions of every sequence).
    pub tokens: usize,
    /// `tokens / train_seconds`.
    pub tokens_per_sec: f64,
    /// Greedy held-out success after the last update.
    pub final_eval: Vec<DifficultyEval>,
    /// The critique channel after the last update, per evaluated difficulty: first attempts and refined attempts after the reference judge's
    /// critique (outcome not revealed), at the rollout temperature, on the same held-out tasks.
    pub refinement: Vec<DifficultyRefinement>,
}

/// [`RefinementReport`] at one difficulty.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DifficultyRefinement {
    /// The difficulty.
    pub difficulty: u32,
    /// First against refined attempts.
    #[serde(flatten)]
    pub report: RefinementReport,
}

/// Samples per held-out task in the critique-channel check.
pub const REFINEMENT_SAMPLES: usize = 2;

/// The critique channel on the held-out tasks of each of `cfg.eval_difficulties` (see
/// [`SftReport::refinement`]).
pub fn evaluate_channel(
    model: &LoadedModel,
    tok: &dyn Tokenizer,
    cfg: &SftConfig,
) -> Result<Vec<DifficultyRefinement>> {
    let policy = PolicyRef { model: &model.model, tokenizer: tok };
    cfg.eval_difficulties
        .iter()
        .map(|&d| {
            let specs = held_out_specs(cfg.family, d, cfg.eval_tasks);
            let (attempts, t0) = (specs.len() * REFINEMENT_SAMPLES, Instant::now());
            tracing::info!(
                difficulty = d,
                "critique channel: {attempts} first attempts on {} held-out tasks, then a refined attempt after each one's critique",
                specs.len()
            );
            let report = evaluate_refinement(policy, &specs, REFINEMENT_SAMPLES, &cfg.rollout, cfg.seed, false)?;
            tracing::info!(
                difficulty = d,
                "critique channel: first attempts {:.1} %, refined {:.1} % ({:.0} s)",
                100.0 * report.initial_success,
                100.0 * report.refined_success,
                t0.elapsed().as_secs_f64()
            );
            Ok(DifficultyRefinement { difficulty: d, report })
        })
        .collect()
}

impl SftReport {
    /// The final greedy success rate at `difficulty`, if it was evaluated.
    pub fn success_at(&self, difficulty: u32) -> Option<f64> {
        self.final_eval.iter().find(|e| e.difficulty == difficulty).map(|e| e.report.success_rate)
    }
}

/// Greedy success on the held-out tasks of each of `cfg.eval_difficulties`.
pub fn evaluate(model: &LoadedModel, tok: &dyn Tokenizer, cfg: &SftConfig) -> Result<Vec<DifficultyEval>> {
    let policy = PolicyRef { model: &model.model, tokenizer: tok };
    cfg.eval_difficulties
        .iter()
        .map(|&d| {
            let specs = held_out_specs(cfg.family, d, cfg.eval_tasks);
            let t0 = Instant::now();
            tracing::info!(difficulty = d, "held-out greedy evaluation: {} tasks", specs.len());
            let report = evaluate_greedy(policy, &specs, &cfg.rollout)?;
            tracing::info!(
                difficulty = d,
                "held-out greedy evaluation: {}/{} solved ({:.0} s)",
                report.successes,
                report.episodes,
                t0.elapsed().as_secs_f64()
            );
            Ok(DifficultyEval { difficulty: d, report })
        })
        .collect()
}

/// Where the training batches come from.
enum Batches<'a> {
    /// The environments' reference episodes (and refinement examples).
    Reference(ReferenceBatches<'a>),
    /// A file of the user's demonstrations.
    Episodes(episodes_file::EpisodeBatches),
}

impl Batches<'_> {
    fn next_batch(&mut self) -> Result<Vec<crate::tensors::Sequence>> {
        match self {
            Self::Reference(r) => r.next_batch(),
            Self::Episodes(e) => Ok(e.next_batch()),
        }
    }
}

/// One update on one batch: the mean NLL of the agent tokens (the LM head in chunks,
/// [`loss::SftLoss`]), backward, AdamW.
fn update(model: &LoadedModel, opt: &mut AdamW, batch: &TokenBatch) -> Result<(f64, StepStats)> {
    opt.zero_grad();
    let loss = loss::SftLoss::new(&model.model, batch)?;
    loss.backward()?;
    let stats = opt.step()?;
    Ok((loss.value(), stats))
}

/// Trains a fresh `cfg.model` (byte tokenizer), or `cfg.init` (its own tokenizer), on reference episodes, calling `on_progress`
/// after every update; returns the model and the report. No checkpoints: [`run`] writes them.
pub fn train(cfg: &SftConfig, on_progress: impl FnMut(&SftProgress)) -> Result<(LoadedModel, SftReport)> {
    train_in(cfg, None, None, resume::SoFar::default(), on_progress)
}

/// [`train`], continuing from `resumed` (whose counters are `so_far`) and checkpointing into
/// `out_dir` (with the run's [`resume::fingerprint`]) when one is given.
fn train_in(
    cfg: &SftConfig,
    out_dir: Option<(&Path, &str)>,
    resumed: Option<&resume::Resumed>,
    so_far: resume::SoFar,
    mut on_progress: impl FnMut(&SftProgress),
) -> Result<(LoadedModel, SftReport)> {
    cfg.validate()?;
    let started = Instant::now();
    let model = match &cfg.init {
        Some(dir) => LoadedModel::from_dir(dir, cfg.device, false)?,
        None => fresh_model(&cfg.model, cfg.seed, cfg.device)?,
    };
    let mut opt = AdamW::from_named(model.vs.variables(), cfg.adam_config());
    let tok = cfg.tokenizer()?;
    let tok = tok.as_ref();
    let mut data = match &cfg.episodes {
        Some(file) => {
            let chats = episodes_file::load(file, tok, &cfg.rollout)?;
            Batches::Episodes(episodes_file::EpisodeBatches::new(chats, cfg.batch_size, cfg.seed))
        }
        None => Batches::Reference(
            ReferenceBatches::new(tok, &cfg.rollout, cfg.family, &cfg.difficulties, cfg.batch_size, cfg.seed)
                .with_refine_share(cfg.refine_share),
        ),
    };
    let done = resumed.map_or(0, |r| r.step);
    if let Some(r) = resumed {
        r.restore(&model, &mut opt)?;
        // The stream depends on the seed alone: drawing the batches already trained on puts it
        // where the checkpointed run was.
        for _ in 0..done {
            data.next_batch()?;
        }
        tracing::info!(path = %r.path.display(), step = done, "cold start resumed");
    }
    let mut train_time = Duration::from_secs_f64(so_far.train_seconds);
    let (mut tokens, mut losses) = (so_far.tokens, so_far.losses);
    let mut final_eval = Vec::new();
    let checkpoint = |step: u64, opt: &AdamW| match out_dir {
        Some((dir, fingerprint)) => resume::save(dir, fingerprint.to_string(), step, opt).map(|_| ()),
        None => Ok(()),
    };
    let out_of_time = |t: Duration| cfg.time_limit.is_some_and(|limit| t >= limit);
    let mut step = done;
    while step < cfg.steps && !out_of_time(train_time) {
        step += 1;
        let t0 = Instant::now();
        let batch = data.next_batch()?;
        let batch = TokenBatch::new(&batch.iter().collect::<Vec<_>>(), tok.special_ids().pad, cfg.device)?;
        let (loss, stats) = update(&model, &mut opt, &batch)?;
        let dt = t0.elapsed();
        train_time += dt;
        tokens += batch.tokens;
        losses.push(loss);
        let last = step == cfg.steps || out_of_time(train_time);
        let eval = if last || (cfg.eval_every > 0 && step.is_multiple_of(cfg.eval_every)) {
            evaluate(&model, tok, cfg)?
        } else {
            Vec::new()
        };
        if last {
            final_eval = eval.clone();
        }
        on_progress(&SftProgress {
            step,
            steps: cfg.steps,
            loss,
            lr: stats.lr,
            grad_norm: stats.grad_norm,
            tokens_seen: tokens,
            tokens_per_sec: batch.tokens as f64 / dt.as_secs_f64().max(1e-9),
            train_seconds: train_time.as_secs_f64(),
            eval,
        });
        if last || (cfg.checkpoint_every > 0 && step.is_multiple_of(cfg.checkpoint_every)) {
            checkpoint(step, &opt)?;
        }
    }
    if step == done {
        // Resumed at (or past) the end: nothing left to train, the model is evaluated as it is.
        final_eval = evaluate(&model, tok, cfg)?;
    }
    let refinement = evaluate_channel(&model, tok, cfg)?;
    let tail = &losses[losses.len().saturating_sub(10)..];
    let report = SftReport {
        steps: losses.len() as u64,
        first_loss: losses.first().copied().unwrap_or(f64::NAN),
        final_loss: tail.iter().sum::<f64>() / tail.len().max(1) as f64,
        train_seconds: train_time.as_secs_f64(),
        wall_seconds: started.elapsed().as_secs_f64(),
        tokens,
        tokens_per_sec: tokens as f64 / train_time.as_secs_f64().max(1e-9),
        final_eval,
        refinement,
    };
    Ok((model, report))
}

/// [`train`], writing the learning curve (`sft_curve.jsonl`) as it goes, a checkpoint every
/// `cfg.checkpoint_every` updates and after the last (`checkpoints/`, [`resume`]), then the
/// model (`model/`, loadable with [`LoadedModel::from_dir`]) and the report
/// (`sft_report.json`) into `out_dir`. With `cfg.resume` (`auto` by default) a run whose
/// `out_dir` holds checkpoints continues from the newest.
pub fn run(
    cfg: &SftConfig,
    out_dir: &Path,
    mut on_progress: impl FnMut(&SftProgress),
) -> Result<(LoadedModel, SftReport)> {
    cfg.validate()?;
    let curve_path = out_dir.join("sft_curve.jsonl");
    // Hashed once: the init model and the episodes file are read for it.
    let fingerprint = resume::fingerprint(cfg)?;
    let resumed = resume::resolve(cfg, &fingerprint, out_dir)?;
    let kept = match &resumed {
        Some(r) => resume::curve_until(&curve_path, r.step)?,
        None => Vec::new(),
    };
    let mut curve = CurveWriter::start_with(&curve_path, &kept)?;
    let so_far = resume::SoFar::from_curve(&kept);
    let mut write_error = None;
    let (model, report) = train_in(cfg, Some((out_dir, &fingerprint)), resumed.as_ref(), so_far, |p| {
        if let Err(e) = curve.append(p) {
            write_error.get_or_insert(e);
        }
        on_progress(p);
    })?;
    if let Some(e) = write_error {
        return Err(e);
    }
    model.save_dir_with_tokenizer(&out_dir.join("model"), cfg.init.as_deref())?;
    write_json(&out_dir.join("sft_report.json"), &report)?;
    Ok((model, report))
}
