//! The in-process trainer: generation and GRPO in one process, no Redis. Used by tests, by
//! quick experiments, and as the reference the distributed pipeline's efficiency is measured
//! against (its [`IterationStats::tokens_per_sec`]).
//!
//! ```text
//!  loop (iterations, or until the time limit or the token budget):
//!    draw tasks_per_iteration training tasks (seeds below the held-out range)
//!    play group_size attempts of each at temperature 0.7, all in lockstep  ── episode::run_episodes
//!    reward (outcome; + λ·score in score modes) ─ GRPO advantages per group ─ PPO (clip 0.2/0.28,
//!    behaviour log-probs, optional KL to the frozen start model) ─ AdamW   ── update::learn
//!    every eval_every iterations: greedy success on fixed held-out seeds   ── Trainer::evaluate
//! ```
//!
//! Each optimizer update is one policy version; the episodes of an iteration are all played by
//! the version at its start, so the first minibatch is on-policy and later ones are corrected
//! by the clipped ratio against the behaviour log-probs.
//!
//! Synchronous tch work: run it on a blocking thread.

pub mod config;
pub mod feedback;
pub mod single_turn;
pub mod trainer;
pub mod update;

use std::path::Path;
use std::time::{Duration, Instant};

use policy::LoadedModel;
use serde::Serialize;
use tch::Device;

use crate::error::Result;
use crate::sft::curve::{write_json, CurveWriter};
pub use config::InprocConfig;
use episode::EvalReport;
pub use trainer::{IterationStats, Trainer};

/// The outcome of an in-process run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InprocReport {
    /// Iterations done.
    pub iterations: u64,
    /// Optimizer updates applied.
    pub updates: u64,
    /// Greedy held-out success before the first iteration.
    pub initial_eval: EvalReport,
    /// Greedy held-out success after the last iteration.
    pub final_eval: EvalReport,
    /// `final_eval.success_rate − initial_eval.success_rate`, in percentage points.
    pub success_gain_points: f64,
    /// Mean sampled success over the first and the last ten iterations.
    pub sampled_success_first: f64,
    /// See `sampled_success_first`.
    pub sampled_success_last: f64,
    /// Training time (generation and learning), evaluations excluded, in seconds.
    pub train_seconds: f64,
    /// Wall-clock time of the whole run, evaluations included, in seconds.
    pub wall_seconds: f64,
    /// Agent tokens generated in all.
    pub generated_tokens: usize,
    /// `generated_tokens / train_seconds`: the end-to-end rate.
    pub tokens_per_sec: f64,
    /// Seconds spent generating, in all.
    pub generation_seconds: f64,
    /// Tokens through forward and backward, in all.
    pub train_tokens: usize,
    /// `train_tokens` per second of learning.
    pub learner_tokens_per_sec: f64,
}

/// Trains `model` with `cfg`, calling `on_iteration` after every iteration (with the
/// evaluation when one followed it); returns the trained model and the report.
pub fn train(
    model: LoadedModel,
    cfg: &InprocConfig,
    on_iteration: impl FnMut(&IterationStats),
) -> Result<(LoadedModel, InprocReport)> {
    train_with(Trainer::new(model, cfg.clone())?, cfg, on_iteration)
}

/// [`train`] with a trainer made beforehand (e.g. [`Trainer::with_tokenizer`]).
pub fn train_with(
    mut trainer: Trainer,
    cfg: &InprocConfig,
    mut on_iteration: impl FnMut(&IterationStats),
) -> Result<(LoadedModel, InprocReport)> {
    let started = Instant::now();
    let initial_eval = trainer.evaluate()?;
    let (mut elapsed, mut history) = (Duration::ZERO, Vec::new());
    let mut generated: u64 = 0;
    let mut final_eval = initial_eval.clone();
    for i in 1..=cfg.iterations {
        let t0 = Instant::now();
        let mut stats = trainer.iteration()?;
        elapsed += t0.elapsed();
        stats.elapsed_seconds = elapsed.as_secs_f64();
        generated += stats.generated_tokens as u64;
        let last = i == cfg.iterations
            || cfg.time_limit.is_some_and(|limit| elapsed >= limit)
            || cfg.token_budget.is_some_and(|budget| generated >= budget);
        if last || (cfg.eval_every > 0 && i % cfg.eval_every == 0) {
            let eval = trainer.evaluate()?;
            final_eval = eval.clone();
            stats.eval = Some(eval);
        }
        on_iteration(&stats);
        history.push(stats);
        if last {
            break;
        }
    }
    let mean_success = |s: &[IterationStats]| s.iter().map(|x| x.success_rate).sum::<f64>() / s.len().max(1) as f64;
    let window = history.len().min(10);
    let sum = |f: fn(&IterationStats) -> f64| history.iter().map(f).sum::<f64>();
    let generated_tokens = history.iter().map(|s| s.generated_tokens).sum();
    let train_tokens = history.iter().map(|s| s.train_tokens).sum();
    let report = InprocReport {
        iterations: history.len() as u64,
        updates: history.iter().map(|s| s.updates as u64).sum(),
        success_gain_points: 100.0 * (final_eval.success_rate - initial_eval.success_rate),
        initial_eval,
        final_eval,
        sampled_success_first: mean_success(&history[..window]),
        sampled_success_last: mean_success(&history[history.len() - window..]),
        train_seconds: elapsed.as_secs_f64(),
        wall_seconds: started.elapsed().as_secs_f64(),
        generated_tokens,
        tokens_per_sec: generated_tokens as f64 / elapsed.as_secs_f64().max(1e-9),
        generation_seconds: sum(|s| s.generation_seconds),
        train_tokens,
        learner_tokens_per_sec: train_tokens as f64 / sum(|s| s.train_seconds).max(1e-9),
    };
    Ok((trainer.into_model(), report))
}

/// [`train`] from the model directory `init` (an SFT run's `model/`) on `device`, writing the
/// learning curve (`rl_curve.jsonl`) as it goes, then the trained model (`model/`) and the
/// report (`rl_report.json`) into `out_dir`.
pub fn run(
    cfg: &InprocConfig,
    init: &Path,
    out_dir: &Path,
    device: Device,
    mut on_iteration: impl FnMut(&IterationStats),
) -> Result<(LoadedModel, InprocReport)> {
    let model = LoadedModel::from_dir(init, device, false)?;
    let tokenizer = policy::pretrained::tokenizer_for_dir(init)?;
    let trainer = Trainer::new(model, cfg.clone())?.with_tokenizer(tokenizer.into())?;
    let mut curve = CurveWriter::create(&out_dir.join("rl_curve.jsonl"))?;
    let mut write_error = None;
    let (model, report) = train_with(trainer, cfg, |s| {
        if let Err(e) = curve.append(s) {
            write_error.get_or_insert(e);
        }
        on_iteration(s);
    })?;
    if let Some(e) = write_error {
        return Err(e);
    }
    model.save_dir_with_tokenizer(&out_dir.join("model"), Some(init))?;
    write_json(&out_dir.join("rl_report.json"), &report)?;
    Ok((model, report))
}
