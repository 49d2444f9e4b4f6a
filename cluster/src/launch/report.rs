//! The end of a local run: success of the starting model and of the newest published weights
//! on the same held-out tasks — greedy (each task once) and sampled (each task
//! `launch.eval_samples` times at the actors' temperature, the same random draws for both
//! models) — `summary.json`, and the learning curve as PNG and SVG.
//!
//! The sampled rate is the one that decides whether the run rose: it measures the policy the
//! actors play, over several times as many episodes. Greedy success of a few hundred tasks is a
//! coarse view of a policy trained by sampling (in the separate-process test it moved from −1 to
//! +6 points over runs whose sampled success rose 2.7 to 7.7).

use std::path::Path;

use anyhow::{Context, Result};
use episode::{evaluate_greedy, evaluate_sampled, held_out_specs, EvalReport, PolicyRef, RolloutConfig};
use learner::experiment::{paired, Difference};
use learner::service::record::UpdateRecord;
use policy::LoadedModel;
use protocol::config::ReagentConfig;
use protocol::weights::WeightStore;
use protocol::wire::{PolicyVersion, TaskFamily};
use serde::Serialize;

use crate::plot::{self, Chart, Series};

/// The sampler seed of the sampled evaluation (the same for every model evaluated).
const EVAL_SEED: u64 = 7;

/// What is evaluated, and how episodes are played (as the actors play them).
#[derive(Debug, Clone)]
pub struct EvalPlan {
    /// The task family (the actors' first).
    pub family: TaskFamily,
    /// The difficulty (the actors' first).
    pub difficulty: u32,
    /// Held-out tasks.
    pub tasks: usize,
    /// Episodes per task of the sampled evaluation.
    pub samples: usize,
    /// The actors' rollout settings (the sampled evaluation's temperature and top-p).
    pub rollout: RolloutConfig,
    /// The starting model (learner.model).
    pub model: String,
    /// learner.seed, which draws a built-in model's initial weights.
    pub seed: u64,
}

/// Success on the held-out tasks, played one way.
#[derive(Debug, Clone, Serialize)]
pub struct Rate {
    /// Episodes solved.
    pub successes: usize,
    /// Episodes played.
    pub episodes: usize,
    /// `successes / episodes`.
    pub success_rate: f64,
    /// Each held-out task's success (the fraction of its episodes solved), in task order: the
    /// before and after evaluations pair task by task.
    pub per_task: Vec<f64>,
}

impl Rate {
    fn of(r: EvalReport) -> Self {
        Self { successes: r.successes, episodes: r.episodes, success_rate: r.success_rate, per_task: r.per_task }
    }

    /// `41.0% (82/200)`.
    pub fn describe(&self) -> String {
        format!("{:.1}% ({}/{})", 100.0 * self.success_rate, self.successes, self.episodes)
    }
}

/// Greedy and sampled success of one model.
#[derive(Debug, Clone, Serialize)]
pub struct Eval {
    /// The policy version evaluated (None: the starting model).
    pub version: Option<u64>,
    /// Each task once at temperature 0.
    pub greedy: Rate,
    /// Each task `samples` times at the actors' temperature.
    pub sampled: Rate,
}

impl Eval {
    /// `greedy 41.0% (82/200), sampled 38.9% (311/800)`.
    pub fn describe(&self) -> String {
        format!("greedy {}, sampled {}", self.greedy.describe(), self.sampled.describe())
    }
}

impl EvalPlan {
    /// The plan for the job's actors and learner.
    pub fn from_config(cfg: &ReagentConfig, tasks: usize, samples: usize) -> Result<Self> {
        let actor = actors::ActorConfig::from_config(cfg)?;
        let (family, difficulty) = actor.task_mix().first().copied().context("actor.family: no task family")?;
        // The held-out evaluation plays in this process; an environment server's tasks cannot be.
        anyhow::ensure!(
            family != TaskFamily::Http,
            "actor.family = \"http\": `reagent run` evaluates in-process and cannot play an environment \
             server's tasks; start the roles with `reagent learner`, `reagent rrm` and `reagent actor` \
             (docs/env-http.md)"
        );
        let role = learner::role::LearnerRole::from_config(cfg)?;
        Ok(Self {
            family,
            difficulty,
            tasks,
            samples,
            rollout: actor.rollout_config(),
            model: role.keys.model,
            seed: role.spec.learner.seed,
        })
    }

    fn play(&self, model: &LoadedModel, version: Option<u64>) -> Result<Eval> {
        let specs = held_out_specs(self.family, self.difficulty, self.tasks);
        let tok = policy::pretrained::tokenizer_for_model(&self.model)?;
        let policy = PolicyRef { model: &model.model, tokenizer: tok.as_ref() };
        let greedy = evaluate_greedy(policy, &specs, &self.rollout)?;
        let sampled = evaluate_sampled(policy, &specs, self.samples, &self.rollout, EVAL_SEED)?;
        Ok(Eval { version, greedy: Rate::of(greedy), sampled: Rate::of(sampled) })
    }

    /// The line printed before an evaluation, which takes minutes on a real model.
    pub fn announce(&self, what: &str) -> String {
        format!(
            "evaluating {what} on {} held-out {} tasks of difficulty {} (greedy, and {} samples each)…",
            self.tasks, self.family, self.difficulty, self.samples
        )
    }

    /// The starting model.
    pub async fn evaluate_initial(&self) -> Result<Eval> {
        let plan = self.clone();
        tokio::task::spawn_blocking(move || {
            let model = learner::role::load_model(&plan.model, plan.seed)?;
            plan.play(&model, None)
        })
        .await?
    }

    /// The weights of `version` in the store (the newest when `None`, or when that version
    /// has expired), loaded into the starting model's architecture.
    pub async fn evaluate_published(&self, store: &WeightStore, version: Option<PolicyVersion>) -> Result<Eval> {
        let set = match version {
            Some(v) => match store.fetch(v).await {
                Ok(set) => set,
                Err(e) => {
                    println!("warning: version {} is no longer in the store ({e}); evaluating the newest", v.0);
                    store.fetch_latest().await?
                }
            },
            None => store.fetch_latest().await?,
        };
        let plan = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut model = learner::role::load_model(&plan.model, plan.seed)?;
            policy::weights::import_weight_set(&mut model.vs, &set)?;
            plan.play(&model, Some(set.version().0))
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
    /// Success of the starting model on the held-out tasks.
    pub before: Eval,
    /// Success of the newest published weights on the same tasks.
    pub after: Eval,
    /// After − before of the sampled success, in points, with a 95 % paired-bootstrap interval
    /// over the held-out tasks (what this run's draw of tasks leaves uncertain; another RL run
    /// from the same start varies more).
    pub sampled_change: Difference,
    /// The same for greedy success.
    pub greedy_change: Difference,
    /// Learner updates during the RL phase.
    pub updates: usize,
    /// Trajectories trained on during the RL phase.
    pub trajectories: usize,
    /// Sampled success of initial attempts (the policy without a critique's help) over the
    /// first and the last quarter of the updates: the training curve's rise.
    pub initial_success_first_quarter: f64,
    /// See `initial_success_first_quarter`.
    pub initial_success_last_quarter: f64,
    /// The standard errors of the two quarters' means, over their updates' rates. With a few
    /// tasks per update the training rate swings with each task's difficulty (0 % on one
    /// update, 81 % on the next in the SmolLM2 job): a quarter of 20 updates is a mean of
    /// about 10 tasks.
    pub initial_success_quarter_errors: [f64; 2],
    /// Trajectories trained by policy lag (entry `k`: generated `k` versions before the one
    /// they were trained at).
    pub policy_lag_counts: Vec<usize>,
}

/// `lag 0: 10.0%, 1: 25.0%, 2: 40.0%, 3: 25.0% (mean 1.8, median 2, 90th percentile 3)`.
fn describe_lags(counts: &[usize]) -> String {
    let total: usize = counts.iter().sum();
    if total == 0 {
        return "no trajectories trained".into();
    }
    let shares: Vec<String> = counts
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(k, &n)| format!("{k}: {:.1}%", 100.0 * n as f64 / total as f64))
        .collect();
    let mean = counts.iter().enumerate().map(|(k, &n)| (k * n) as f64).sum::<f64>() / total as f64;
    // The smallest lag at or below which at least a fraction `q` of the trajectories fall.
    let quantile = |q: f64| {
        let mut seen = 0;
        counts.iter().position(|&n| {
            seen += n;
            seen as f64 >= q * total as f64
        })
    };
    format!(
        "lag {} (mean {mean:.1}, median {}, 90th percentile {})",
        shares.join(", "),
        quantile(0.5).unwrap_or(0),
        quantile(0.9).unwrap_or(0)
    )
}

/// Mean of `f` over the records that have it, and the standard error of that mean (NaN with
/// fewer than two).
fn mean_of(records: &[UpdateRecord], f: impl Fn(&UpdateRecord) -> Option<f64>) -> (f64, f64) {
    let v: Vec<f64> = records.iter().filter_map(f).collect();
    let n = v.len() as f64;
    let mean = if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / n };
    let variance = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, if v.len() < 2 { f64::NAN } else { (variance / n).sqrt() })
}

/// Replicates of the paired bootstrap of the held-out change, and their seed.
const BOOTSTRAP_REPLICATES: usize = 10_000;
const BOOTSTRAP_SEED: u64 = 0xB007;

/// `after − before` over the same held-out tasks, with its paired-bootstrap interval.
fn change(after: &Rate, before: &Rate, replicates: usize) -> Difference {
    let (a, b) = (std::slice::from_ref(&after.per_task), std::slice::from_ref(&before.per_task));
    paired("after", a, "before", b, replicates, BOOTSTRAP_SEED)
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
        let quarter = records.len().div_ceil(4);
        let (first, first_error) = mean_of(&records[..quarter], initial_success);
        let (last, last_error) = mean_of(&records[records.len() - quarter..], initial_success);
        Self {
            run: cfg.run.id.clone(),
            feedback: cfg.run.feedback.to_string(),
            sampled_change: change(&after.sampled, &before.sampled, BOOTSTRAP_REPLICATES),
            greedy_change: change(&after.greedy, &before.greedy, BOOTSTRAP_REPLICATES),
            before,
            after,
            updates: records.len(),
            trajectories: records.iter().map(|r| r.trajectories).sum(),
            initial_success_first_quarter: first,
            initial_success_last_quarter: last,
            initial_success_quarter_errors: [first_error, last_error],
            policy_lag_counts: learner::service::record::lag_histogram(records),
        }
    }

    /// The rise of held-out sampled success in percentage points (what decides whether the run
    /// rose).
    pub fn rise_points(&self) -> f64 {
        100.0 * (self.after.sampled.success_rate - self.before.sampled.success_rate)
    }

    /// The rise of held-out greedy success in percentage points.
    pub fn greedy_rise_points(&self) -> f64 {
        100.0 * (self.after.greedy.success_rate - self.before.greedy.success_rate)
    }

    /// The lines printed at the end.
    pub fn describe(&self) -> String {
        let sampled =
            format!("sampled ({} per task):", self.after.sampled.episodes / self.after.greedy.episodes.max(1));
        format!(
            "held-out success at the start → at policy version {}, after {} updates on {} trajectories ({}):\n\
             \x20 {sampled:<22} {} → {} ({:+.1} points, 95% interval over tasks [{:+.1}, {:+.1}])\n\
             \x20 {:<22} {} → {} ({:+.1} points, 95% interval over tasks [{:+.1}, {:+.1}])\n\
             sampled success of initial attempts in training: {:.1}% ± {:.1} in the first quarter of the updates, \
             {:.1}% ± {:.1} in the last (± one standard error over the quarter's updates)\n\
             policy lag of the trajectories trained, in versions: {}",
            self.after.version.unwrap_or(0),
            self.updates,
            self.trajectories,
            self.feedback,
            self.before.sampled.describe(),
            self.after.sampled.describe(),
            self.rise_points(),
            self.sampled_change.low,
            self.sampled_change.high,
            "greedy:",
            self.before.greedy.describe(),
            self.after.greedy.describe(),
            self.greedy_rise_points(),
            self.greedy_change.low,
            self.greedy_change.high,
            100.0 * self.initial_success_first_quarter,
            100.0 * self.initial_success_quarter_errors[0],
            100.0 * self.initial_success_last_quarter,
            100.0 * self.initial_success_quarter_errors[1],
            describe_lags(&self.policy_lag_counts)
        )
    }
}

/// Writes `summary.json`, `curve.png` and `curve.svg` into `dir`.
pub fn write(dir: &Path, summary: &Summary, records: &[UpdateRecord]) -> Result<()> {
    let path = dir.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(summary)?)
        .with_context(|| format!("writing {}", path.display()))?;
    // A window that grows with the run, so that a long run's curve shows its trend, not the
    // noise of each 32-trajectory batch: 8 updates, or a fiftieth of the run if that is more.
    let window = (records.len() / 50).max(8);
    let series = |name: &str, f: &dyn Fn(&UpdateRecord) -> Option<f64>| Series::new(name, smoothed(records, window, f));
    let chart = Chart {
        title: format!("run {} ({}), means over {window} updates", summary.run, summary.feedback),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `successes` of `tasks` tasks played `per` times each: the first tasks solved every time,
    /// one task partly, the rest never.
    fn rate(successes: usize, tasks: usize, per: usize) -> Rate {
        let per_task: Vec<f64> = (0..tasks)
            .map(|i| ((successes as isize - (i * per) as isize).clamp(0, per as isize)) as f64 / per as f64)
            .collect();
        assert!((per_task.iter().sum::<f64>() * per as f64 - successes as f64).abs() < 1e-9);
        Rate { successes, episodes: tasks * per, success_rate: successes as f64 / (tasks * per) as f64, per_task }
    }

    fn summary(before: Eval, after: Eval) -> Summary {
        Summary {
            run: "r".into(),
            feedback: "unified".into(),
            sampled_change: change(&after.sampled, &before.sampled, 2000),
            greedy_change: change(&after.greedy, &before.greedy, 2000),
            before,
            after,
            updates: 84,
            trajectories: 2472,
            initial_success_first_quarter: 0.842,
            initial_success_last_quarter: 0.958,
            initial_success_quarter_errors: [0.031, 0.012],
            policy_lag_counts: vec![10, 25, 40, 25],
        }
    }

    #[test]
    fn the_sampled_rise_decides_and_both_rises_are_printed_aligned_with_their_intervals() {
        let summary = summary(
            Eval { version: None, greedy: rate(173, 200, 1), sampled: rate(662, 200, 4) },
            Eval { version: Some(86), greedy: rate(171, 200, 1), sampled: rate(717, 200, 4) },
        );
        // 717/800 − 662/800 = 55/800 = 6.875 points; greedy 171/200 − 173/200 = −1 point.
        assert!((summary.rise_points() - 6.875).abs() < 1e-9);
        assert!((summary.greedy_rise_points() + 1.0).abs() < 1e-9);
        assert!((summary.sampled_change.points - 6.875).abs() < 1e-9, "{:?}", summary.sampled_change);
        let text = summary.describe();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(lines[0].contains("policy version 86") && lines[0].contains("84 updates on 2472 trajectories"));
        let interval = |d: &Difference| format!("(95% interval over tasks [{:+.1}, {:+.1}])", d.low, d.high);
        assert!(lines[1].contains("sampled (4 per task):") && lines[1].contains("(+6.9 points,"), "{}", lines[1]);
        assert!(lines[1].ends_with(&interval(&summary.sampled_change)[1..]), "{}", lines[1]);
        assert!(lines[2].contains("greedy:") && lines[2].contains("(-1.0 points,"), "{}", lines[2]);
        assert_eq!(lines[1].find("82.8%"), lines[2].find("86.5%"), "the figures line up:\n{text}");
        assert!(lines[3].contains("84.2% ± 3.1") && lines[3].contains("95.8% ± 1.2"), "{}", lines[3]);
        // 100 trajectories: mean (25 + 80 + 75) / 100 = 1.8; the 50th falls at lag 2, the 90th at 3.
        assert!(
            lines[4].ends_with("lag 0: 10.0%, 1: 25.0%, 2: 40.0%, 3: 25.0% (mean 1.8, median 2, 90th percentile 3)"),
            "{}",
            lines[4]
        );
    }

    #[test]
    fn the_interval_pairs_tasks_and_is_as_wide_as_their_disagreement() {
        let eval = |per_task: Vec<f64>| {
            let successes = per_task.iter().sum::<f64>() as usize;
            let r = Rate { successes, episodes: per_task.len(), success_rate: successes as f64 / 64.0, per_task };
            Eval { version: None, greedy: r.clone(), sampled: r }
        };
        // Every task rises from 0 to 1: +100 points with no doubt at all.
        let all = summary(eval(vec![0.0; 64]), eval(vec![1.0; 64]));
        assert_eq!((all.sampled_change.low, all.sampled_change.high), (100.0, 100.0));
        // Half the tasks rise and half fall: 0 points, and an interval of about ±2 standard
        // errors, 2·100·√(1/64) = 25 points each side (an unpaired view would not see the tasks).
        let before: Vec<f64> = (0..64).map(|i| f64::from(i % 2 == 0)).collect();
        let after: Vec<f64> = (0..64).map(|i| f64::from(i % 2 == 1)).collect();
        let mixed = summary(eval(before.clone()), eval(after));
        let d = &mixed.sampled_change;
        assert_eq!(d.points, 0.0);
        assert!(d.low < -15.0 && d.low > -35.0 && d.high > 15.0 && d.high < 35.0, "{d:?}");
        // The same tasks unchanged: no change and no width, whatever their level.
        let same = summary(eval(before.clone()), eval(before));
        assert_eq!((same.sampled_change.low, same.sampled_change.points, same.sampled_change.high), (0.0, 0.0, 0.0));
    }

    #[test]
    fn a_quarter_reports_its_mean_and_standard_error() {
        let record = |rate: f64| UpdateRecord { initial_success_rate: Some(rate), ..UpdateRecord::default() };
        let records: Vec<UpdateRecord> = [0.0, 0.5, 1.0].into_iter().map(record).collect();
        let (mean, error) = mean_of(&records, initial_success);
        // Sample variance of 0, 0.5, 1 is 0.25; the standard error √(0.25 / 3).
        assert!((mean - 0.5).abs() < 1e-12 && (error - (0.25f64 / 3.0).sqrt()).abs() < 1e-12, "{mean} {error}");
        let (one, none) = mean_of(&records[..1], initial_success);
        assert!(one == 0.0 && none.is_nan());
    }

    #[test]
    fn lag_shares_skip_empty_lags_and_an_empty_run_says_so() {
        assert_eq!(describe_lags(&[]), "no trajectories trained");
        assert_eq!(describe_lags(&[0, 0]), "no trajectories trained");
        assert_eq!(describe_lags(&[0, 3, 0, 1]), "lag 1: 75.0%, 3: 25.0% (mean 1.5, median 1, 90th percentile 3)");
    }
}
