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
             after {} updates on {} trajectories ({})",
            self.after.episodes,
            self.before.describe(),
            self.after.describe(),
            self.after.version.unwrap_or(0),
            self.rise_points(),
            self.updates,
            self.trajectories,
            self.feedback
        )
    }
}

/// Writes `summary.json`, `curve.png` and `curve.svg` into `dir`.
pub fn write(dir: &Path, summary: &Summary, records: &[UpdateRecord]) -> Result<()> {
    let path = dir.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(summary)?)
        .with_context(|| format!("writing {}", path.display()))?;
    let series = |name: &str, f: &dyn Fn(&UpdateRecord) -> Option<f64>| {
        Series::new(name, records.iter().filter_map(|r| f(r).map(|y| (r.step as f64, y))).collect())
    };
    let chart = Chart {
        title: format!("run {} ({})", summary.run, summary.feedback),
        x_label: "learner update".into(),
        y_label: "rate / score".into(),
        series: vec![
            series("success rate (sampled)", &|r| Some(r.success_rate)),
            series("mean RRM score", &|r| r.score_mean),
            series("refined-attempt success", &|r| r.refined_success_rate),
        ],
        y_range: Some((0.0, 1.0)),
    };
    plot::write_png(&chart, &dir.join("curve.png"), 900, 500).with_context(|| "writing curve.png")?;
    plot::write_svg(&chart, &dir.join("curve.svg"), 900, 500).with_context(|| "writing curve.svg")?;
    Ok(())
}
