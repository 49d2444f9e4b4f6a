//! The end of a local run: greedy success of the starting model and of the newest published
//! weights on the same held-out tasks, `summary.json`, and the learning curve as PNG and SVG.

use std::path::Path;

use anyhow::{Context, Result};
use learner::episode::{evaluate_greedy, held_out_specs, EvalReport, PolicyRef, RolloutConfig};
use learner::service::record::UpdateRecord;
use policy::{ByteTokenizer, LoadedModel};
use protocol::config::ReagentConfig;
use protocol::weights::WeightStore;
use protocol::wire::TaskFamily;
use serde::Serialize;

use crate::plot::{self, Chart, Series};

/// What is evaluated, and how episodes are played (as the actors play them).
#[derive(Debug, Clone)]
pub struct EvalPlan {
    /// The task family (the actors' first).
    pub family: TaskFamily,
    /// The difficulty (the actors' first).
    pub difficulty: u32,
    /// Held-out tasks.
    pub tasks: usize,
    /// The actors' rollout settings.
    pub rollout: RolloutConfig,
    /// The starting model (learner.model).
    pub model: String,
    /// learner.seed, which draws a built-in model's initial weights.
    pub seed: u64,
}

/// Greedy success on the plan's tasks.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Eval {
    /// Tasks solved.
    pub successes: usize,
    /// Tasks played.
    pub episodes: usize,
    /// `successes / episodes`.
    pub success_rate: f64,
    /// The policy version evaluated (None: the starting model).
    pub version: Option<u64>,
}

impl Eval {
    fn of(r: &EvalReport, version: Option<u64>) -> Self {
        Self { successes: r.successes, episodes: r.episodes, success_rate: r.success_rate, version }
    }

    /// `41.0% (82/200)`.
    pub fn describe(&self) -> String {
        format!("{:.1}% ({}/{})", 100.0 * self.success_rate, self.successes, self.episodes)
    }
}

impl EvalPlan {
    /// The plan for the job's actors and learner.
    pub fn from_config(cfg: &ReagentConfig, tasks: usize) -> Result<Self> {
        let actor = actors::ActorConfig::from_config(cfg)?;
        let (family, difficulty) = actor.task_mix().first().copied().context("actor.family: no task family")?;
        let role = learner::role::LearnerRole::from_config(cfg)?;
        Ok(Self {
            family,
            difficulty,
            tasks,
            rollout: actor.rollout_config(),
            model: role.keys.model,
            seed: role.spec.learner.seed,
        })
    }

    fn play(&self, model: &LoadedModel) -> Result<EvalReport> {
        let specs = held_out_specs(self.family, self.difficulty, self.tasks);
        let policy = PolicyRef { model: &model.model, tokenizer: &ByteTokenizer };
        Ok(tch::no_grad(|| evaluate_greedy(policy, &specs, &self.rollout))?)
    }

    /// The starting model.
    pub async fn evaluate_initial(&self) -> Result<Eval> {
        let plan = self.clone();
        tokio::task::spawn_blocking(move || {
            let model = learner::role::load_model(&plan.model, plan.seed)?;
            Ok(Eval::of(&plan.play(&model)?, None))
        })
        .await?
    }

    /// The newest weights in the store, loaded into the starting model's architecture.
    pub async fn evaluate_published(&self, store: &WeightStore) -> Result<Eval> {
        let set = store.fetch_latest().await?;
        let plan = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut model = learner::role::load_model(&plan.model, plan.seed)?;
            policy::weights::import_weight_set(&mut model.vs, &set)?;
            Ok(Eval::of(&plan.play(&model)?, Some(set.version().0)))
        })
        .await?
    }
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The run id and feedback mode.
    pub run: String,
    /// `run.feedback`.
    pub feedback: String,
    /// Greedy success of the starting model.
    pub before: Eval,
    /// Greedy success of the newest published weights.
    pub after: Eval,
    /// Learner updates during the RL phase.
    pub updates: usize,
    /// Trajectories trained on during the RL phase.
    pub trajectories: usize,
    /// Sampled success of initial attempts (the policy without a critique's help) over the
    /// first and the last quarter of the updates: the training curve's rise.
    pub initial_success_first_quarter: f64,
    /// See `initial_success_first_quarter`.
    pub initial_success_last_quarter: f64,
}

/// Mean of `f` over the records that have it.
fn mean_of(records: &[UpdateRecord], f: impl Fn(&UpdateRecord) -> Option<f64>) -> f64 {
    let v: Vec<f64> = records.iter().filter_map(f).collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Trailing mean of the last `window` values present, at each record's step.
fn smoothed(records: &[UpdateRecord], window: usize, f: impl Fn(&UpdateRecord) -> Option<f64>) -> Vec<(f64, f64)> {
    let mut recent: Vec<f64> = Vec::new();
    let mut out = Vec::new();
    for r in records {
        if let Some(y) = f(r) {
            recent.push(y);
            let tail = &recent[recent.len().saturating_sub(window)..];
            out.push((r.step as f64, tail.iter().sum::<f64>() / tail.len() as f64));
        }
    }
    out
}

/// Initial attempts' success rate of a record, when its batch had initial attempts.
fn initial_success(r: &UpdateRecord) -> Option<f64> {
    r.initial_success_rate
}

impl Summary {
    /// The summary of a run.
    pub fn new(cfg: &ReagentConfig, before: Eval, after: Eval, records: &[UpdateRecord]) -> Self {
        Self {
            run: cfg.run.id.clone(),
            feedback: cfg.run.feedback.to_string(),
            before,
            after,
            updates: records.len(),
            trajectories: records.iter().map(|r| r.trajectories).sum(),
            initial_success_first_quarter: mean_of(&records[..records.len().div_ceil(4)], initial_success),
            initial_success_last_quarter: mean_of(
                &records[records.len() - records.len().div_ceil(4)..],
                initial_success,
            ),
        }
    }

    /// The rise in percentage points.
    pub fn rise_points(&self) -> f64 {
        100.0 * (self.after.success_rate - self.before.success_rate)
    }

    /// The line printed at the end.
    pub fn describe(&self) -> String {
        format!(
            "greedy success on {} held-out tasks: {} at the start → {} at policy version {} ({:+.1} points) \
             after {} updates on {} trajectories ({}); sampled success of initial attempts {:.1}% in the \
             first quarter of the updates, {:.1}% in the last",
            self.after.episodes,
            self.before.describe(),
            self.after.describe(),
            self.after.version.unwrap_or(0),
            self.rise_points(),
            self.updates,
            self.trajectories,
            self.feedback,
            100.0 * self.initial_success_first_quarter,
            100.0 * self.initial_success_last_quarter
        )
    }
}

/// Writes `summary.json`, `curve.png` and `curve.svg` into `dir`.
pub fn write(dir: &Path, summary: &Summary, records: &[UpdateRecord]) -> Result<()> {
    let path = dir.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(summary)?)
        .with_context(|| format!("writing {}", path.display()))?;
    let series = |name: &str, f: &dyn Fn(&UpdateRecord) -> Option<f64>| Series::new(name, smoothed(records, 8, f));
    let chart = Chart {
        title: format!("run {} ({}), means over 8 updates", summary.run, summary.feedback),
        x_label: "learner update".into(),
        y_label: "rate / score".into(),
        series: vec![
            series("initial-attempt success (sampled)", &initial_success),
            series("refined-attempt success (sampled)", &|r| r.refined_success_rate),
            series("mean RRM score", &|r| r.score_mean),
        ],
        y_range: Some((0.0, 1.0)),
    };
    plot::write_png(&chart, &dir.join("curve.png"), 900, 500).with_context(|| "writing curve.png")?;
    plot::write_svg(&chart, &dir.join("curve.svg"), 900, 500).with_context(|| "writing curve.svg")?;
    Ok(())
}
