//! The feedback-mode comparison (`reagent experiment modes`): does the RRM's feedback make the
//! agent learn better than the outcome alone? The paper's ordering Reagent-U > Reagent-R >
//! Reagent-C > outcome is the claim to test, never to tune the evaluation toward.
//!
//! ```text
//!  one cold start ──┬─ seed s, mode m: in-process GRPO (feedback m, reference judge) for the same
//!                   │  number of initial-attempt groups ─► held-out evaluation of the first attempt:
//!                   │  greedy (once per task) and sampled (k draws per task, the same draws for
//!                   │  every run) ─► per-task success; the critique channel of the final model
//!                   └─ paired bootstrap over seeds and tasks: U−R, R−outcome, C−outcome, U−outcome
//! ```
//!
//! Budgets are equal in initial-attempt groups (iterations × tasks per iteration): a refining
//! mode also plays a refined attempt per initial one, so it generates more tokens. With
//! `token_matched`, every arm of a seed instead generates as many agent tokens as that seed's
//! first arm (outcome) did in its group budget: a refining arm then sees fewer tasks.
//! No critique is given at test time: the evaluated attempt is the first one.

pub mod bootstrap;
pub mod cache;

use std::path::PathBuf;
use std::time::Instant;

use episode::{evaluate_refinement, held_out_specs, PolicyRef, RolloutConfig};
use policy::{LoadedModel, Tokenizer};
use protocol::wire::{FeedbackMode, TaskSpec};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::error::Result;
use crate::inproc::{self, InprocConfig};
use crate::optim::LrDecay;
pub use bootstrap::{paired, Difference};

/// One arm of the comparison: a feedback mode, how its advantages are normalised, and (for a
/// refining mode) how its initial and refined groups share the optimizer steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Arm {
    /// The feedback mode.
    pub mode: FeedbackMode,
    /// Std-normalised GRPO (the paper's code) or Dr. GRPO (mean-centred only).
    pub std_normalize: bool,
    /// A refining mode takes twice the optimizer steps per iteration, one per as many groups
    /// as the other arms' steps hold, instead of its initial and refined groups sharing the
    /// same steps (which gives the first attempt half a step): the dilution ablation.
    pub matched_steps: bool,
    /// After its warm-up the learning rate decays along half a cosine to [`COSINE_FLOOR`] of
    /// the peak at the run's last planned update, instead of staying at the peak: the
    /// decaying-rate ablation.
    pub cosine: bool,
}

/// A cosine arm's final learning rate, as a fraction of the peak.
pub const COSINE_FLOOR: f64 = 0.1;

impl Arm {
    /// The usual arm of `mode`: std-normalised, shared steps.
    pub fn of(mode: FeedbackMode) -> Self {
        Self { mode, std_normalize: true, matched_steps: false, cosine: false }
    }

    /// `outcome`, `critique`, `score`, `unified`, with ` (Dr. GRPO)`, ` (matched steps)` and
    /// ` (cosine)` for the ablations.
    pub fn name(&self) -> String {
        let mut name = format!("{:?}", self.mode).to_lowercase();
        if !self.std_normalize {
            name.push_str(" (Dr. GRPO)");
        }
        if self.matched_steps {
            name.push_str(" (matched steps)");
        }
        if self.cosine {
            name.push_str(" (cosine)");
        }
        name
    }

    /// The arm's part of a run's key in the runs file. A field added after runs were kept is
    /// written only when it is set, so that an arm without it keeps the key it had before.
    pub fn key_text(&self) -> String {
        let Self { mode, std_normalize, matched_steps, cosine } = self;
        let mut key = format!("Arm {{ mode: {mode:?}, std_normalize: {std_normalize}");
        if *matched_steps {
            key.push_str(", matched_steps: true");
        }
        if *cosine {
            key.push_str(", cosine: true");
        }
        key.push_str(" }");
        key
    }

    /// An ablation of a usual arm (Dr. GRPO, matched steps, cosine), compared with its twin.
    fn is_ablation(&self) -> bool {
        !self.std_normalize || self.matched_steps || self.cosine
    }

    /// Whether this arm's refined groups get steps of their own (`all`: `--matched-steps`
    /// for every refining arm).
    fn steps_matched(&self, all: bool) -> bool {
        (all || self.matched_steps) && self.mode.refines()
    }
}

/// What the comparison runs.
#[derive(Debug, Clone)]
pub struct ModesConfig {
    /// The arms, in table order.
    pub arms: Vec<Arm>,
    /// Training seeds (task draw and sampler); every arm runs every seed.
    pub seeds: Vec<u64>,
    /// The in-process run of one arm and seed (its `learner.feedback`, `learner.grpo_std_normalize`
    /// and `seed` are set per run; `iterations` × `tasks_per_iteration` is the budget).
    pub run: InprocConfig,
    /// Held-out tasks (seeds from the held-out base) at `run.difficulty`.
    pub eval_tasks: usize,
    /// Sampled attempts per held-out task, at the rollout temperature.
    pub eval_samples: usize,
    /// Bootstrap replicates per interval.
    pub replicates: usize,
    /// A greedy held-out evaluation every this many iterations, for the learning curve (0: none).
    pub curve_every: u64,
    /// Token-matched budgets: each arm after a seed's first stops once it has generated the
    /// agent tokens the first arm generated (within at most 8× the group budget).
    pub token_matched: bool,
    /// Refining arms take `run.minibatches` × 2 optimizer steps per iteration, so that every
    /// step holds as many groups in every arm (their initial and refined groups are twice the
    /// others' initial groups).
    pub matched_steps: bool,
    /// Finished runs are appended to this JSON-lines file, and a run it already holds under the
    /// same settings and cold start is taken from it instead of being run again
    /// ([`cache`]): a killed comparison continues where it was. `None`: nothing kept.
    pub runs_file: Option<PathBuf>,
}

/// One finished run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// Which arm.
    pub arm: String,
    /// Which seed.
    pub seed: u64,
    /// Greedy success per held-out task (0 or 1).
    pub greedy: Vec<f64>,
    /// Sampled success per held-out task (a fraction of `eval_samples`).
    pub sampled: Vec<f64>,
    /// Greedy success rate.
    pub greedy_rate: f64,
    /// Sampled success rate.
    pub sampled_rate: f64,
    /// The final model's critique channel: refined minus first attempt success, in points.
    pub channel_points: f64,
    /// Agent tokens generated in training (refined attempts included).
    pub generated_tokens: usize,
    /// Initial-attempt groups trained on.
    pub groups: u64,
    /// Greedy held-out success against initial-attempt groups trained on (the curve).
    pub curve: Vec<(u64, f64)>,
    /// Training time in seconds.
    pub train_seconds: f64,
    /// Of it, generation and learning (the held-out curve's evaluations left out).
    pub steps_seconds: f64,
    /// Of that, generation (initial and refined attempts, the judge's critiques).
    pub generation_seconds: f64,
    /// Refined attempts played in training (critique, unified; `--refine` says of which).
    pub refined_attempts: usize,
    /// Of them, those that solved their task.
    pub refined_solved: usize,
    /// Optimizer updates taken: fewer than planned when a minibatch held only groups with equal
    /// rewards (0 in runs kept before this was recorded).
    #[serde(default)]
    pub updates: u64,
}

/// The comparison's evidence.
#[derive(Debug, Clone, Serialize)]
pub struct ModesReport {
    /// Greedy and sampled success of the cold start itself, the common starting point.
    pub start_greedy: f64,
    /// See `start_greedy`.
    pub start_sampled: f64,
    /// Every run.
    pub runs: Vec<RunResult>,
    /// Paired differences of the sampled success (the main metric).
    pub sampled: Vec<Difference>,
    /// Paired differences of the greedy success.
    pub greedy: Vec<Difference>,
    /// Wall-clock time of the experiment, in seconds.
    pub wall_seconds: f64,
}

/// The per-task success of `policy` on `specs`: greedy once, and `samples` draws at `rollout`'s
/// temperature from a sampler seeded with `seed` (the same numbers for every model).
pub fn per_task_success(
    policy: PolicyRef<'_>,
    specs: &[TaskSpec],
    samples: usize,
    rollout: &RolloutConfig,
    seed: u64,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let greedy = episode::evaluate_greedy(policy, specs, rollout)?;
    let sampled = episode::evaluate_sampled(policy, specs, samples, rollout, seed)?;
    Ok((greedy.per_task, sampled.per_task))
}

/// The in-process run of `arm` on `seed`: the comparison's run with the arm's feedback mode,
/// normalisation, steps per iteration and learning-rate schedule. A cosine arm's decay ends at
/// the update its group budget plans (iterations × epochs × minibatches); the trainer counts
/// planned updates, taken or not, so it ends there however many a run skips.
pub fn arm_run(cfg: &ModesConfig, arm: &Arm, seed: u64) -> InprocConfig {
    let mut run = cfg.run.clone();
    run.seed = seed;
    run.eval_every = cfg.curve_every;
    run.eval_tasks = cfg.eval_tasks;
    run.learner.feedback = arm.mode;
    run.learner.grpo_std_normalize = arm.std_normalize;
    if arm.steps_matched(cfg.matched_steps) {
        run.minibatches = cfg.run.minibatches * 2;
    }
    if arm.cosine {
        run.learner.lr_decay = LrDecay::Cosine;
        run.learner.total_steps = cfg.run.iterations * (run.epochs * run.minibatches) as u64;
        run.learner.min_lr_ratio = COSINE_FLOOR;
    }
    run
}

/// The seed of the held-out sampled draws (shared by every run).
const EVAL_DRAWS_SEED: u64 = 0xE7A1;

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// What [`compare`] reports as it goes: a run of one arm and seed takes minutes on a GPU and an
/// hour on two CPU cores, so its iterations are reported, not only its end.
#[derive(Debug, Clone, Copy)]
pub enum ModesEvent<'a> {
    /// The runs file was read, before the first run: how much of the comparison it holds.
    Kept {
        /// Finished runs in the file, of any comparison.
        in_file: usize,
        /// This comparison's runs among them (taken as they are, not trained again).
        reused: usize,
        /// This comparison's runs in all.
        total: usize,
        /// The cold start's weights hash, of which every run's key is made.
        weights: &'a str,
        /// The file's runs by the cold start they were kept from.
        starts: cache::StartCounts,
    },
    /// The cold start's own held-out evaluation (minutes on a CPU, before the first run):
    /// `result` is `None` as it begins, then its greedy and sampled success rates.
    ColdStart {
        /// Held-out tasks.
        tasks: usize,
        /// Sampled attempts per task (besides the greedy one).
        samples: usize,
        /// Greedy and sampled success, once evaluated.
        result: Option<(f64, f64)>,
    },
    /// A training iteration of a run finished.
    Iteration {
        /// The arm's name.
        arm: &'a str,
        /// The run's seed.
        seed: u64,
        /// Iterations done in this run, from 1.
        iteration: u64,
        /// Iterations planned (an upper bound when the run stops at a token budget).
        iterations: u64,
        /// Agent tokens generated so far in this run.
        tokens: usize,
        /// The token budget, when budgets are token-matched and this run is held to one.
        token_budget: Option<u64>,
        /// Held-out greedy success, when this iteration ended with a curve point.
        greedy: Option<f64>,
    },
    /// A run finished training; its final held-out evaluation and critique channel follow.
    Evaluating {
        /// The arm's name.
        arm: &'a str,
        /// The run's seed.
        seed: u64,
    },
    /// A run finished, or was found in the runs file: `done` of `total` runs are in.
    Finished {
        /// The run.
        run: &'a RunResult,
        /// Whether it was taken from the runs file rather than run now.
        kept: bool,
        /// Runs done.
        done: usize,
        /// Runs in all.
        total: usize,
    },
}

/// The run of `arm` and `seed` as [`compare`] trains it (held to `matched` agent tokens when the
/// budgets are token-matched and the seed's first arm has run), and the canonical text of its
/// settings, which with the cold start's weights makes its key in the runs file.
fn planned_run(cfg: &ModesConfig, arm: &Arm, seed: u64, matched: Option<u64>) -> (InprocConfig, String) {
    let mut run = arm_run(cfg, arm, seed);
    if let Some(tokens) = matched {
        run.token_budget = Some(tokens);
        run.iterations = cfg.run.iterations.saturating_mul(8);
    }
    let settings = format!(
        "arm={}|run={run:?}|eval_tasks={}|eval_samples={}|draws={EVAL_DRAWS_SEED}",
        arm.key_text(),
        cfg.eval_tasks,
        cfg.eval_samples
    );
    (run, settings)
}

/// How many of the comparison's runs `cache` already holds for the cold start `weights`. With
/// token-matched budgets a seed's later arms are counted only once its first arm is kept (their
/// budget, and so their key, is that run's token count).
fn reusable(cfg: &ModesConfig, cache: &cache::RunCache, weights: &str) -> usize {
    let mut reused = 0;
    for &seed in &cfg.seeds {
        let mut matched: Option<u64> = None;
        for arm in &cfg.arms {
            let (_, settings) = planned_run(cfg, arm, seed, matched);
            match cache.get(&cache::run_key(weights, &settings)) {
                Some(done) => {
                    reused += 1;
                    if cfg.token_matched && matched.is_none() {
                        matched = Some(done.generated_tokens as u64);
                    }
                }
                None if cfg.token_matched && matched.is_none() => break,
                None => {}
            }
        }
    }
    reused
}

/// Runs every arm on every seed from `start` (the cold start), calling `on_event` after each
/// training iteration and each run ([`ModesEvent`]); returns the evidence.
pub fn compare(
    start: &LoadedModel,
    tokenizer: &Arc<dyn Tokenizer>,
    cfg: &ModesConfig,
    mut on_event: impl FnMut(ModesEvent<'_>),
) -> Result<ModesReport> {
    let started = Instant::now();
    let specs = held_out_specs(cfg.run.family, cfg.run.difficulty, cfg.eval_tasks);
    let total = cfg.arms.len() * cfg.seeds.len();
    let mut cache = cfg.runs_file.as_deref().map(cache::RunCache::open).transpose()?;
    let weights = match &cache {
        Some(_) => cache::weights_hash(start)?,
        None => String::new(),
    };
    // Said before the cold start's own evaluation (minutes on a CPU): whether the file's runs
    // are reused is what a resumed comparison's user wants to know first.
    if let Some(c) = &cache {
        let reused = reusable(cfg, c, &weights);
        on_event(ModesEvent::Kept { in_file: c.len(), reused, total, weights: &weights, starts: c.starts(&weights) });
    }
    let policy = PolicyRef { model: &start.model, tokenizer: tokenizer.as_ref() };
    on_event(ModesEvent::ColdStart { tasks: specs.len(), samples: cfg.eval_samples, result: None });
    let (g0, s0) = per_task_success(policy, &specs, cfg.eval_samples, &cfg.run.rollout, EVAL_DRAWS_SEED)?;
    on_event(ModesEvent::ColdStart {
        tasks: specs.len(),
        samples: cfg.eval_samples,
        result: Some((mean(&g0), mean(&s0))),
    });
    let mut runs = Vec::with_capacity(total);
    for &seed in &cfg.seeds {
        let mut matched: Option<u64> = None;
        for arm in &cfg.arms {
            let (run, settings) = planned_run(cfg, arm, seed, matched);
            let key = cache.as_ref().map(|_| cache::run_key(&weights, &settings));
            if let Some(done) = cache.as_ref().zip(key.as_deref()).and_then(|(c, k)| c.get(k)) {
                if cfg.token_matched && matched.is_none() {
                    matched = Some(done.generated_tokens as u64);
                }
                runs.push(done.clone());
                let run = runs.last().expect("just pushed");
                on_event(ModesEvent::Finished { run, kept: true, done: runs.len(), total });
                continue;
            }
            // Each arm trains where the cold start was loaded (`--device`).
            let mut model = LoadedModel::fresh(start.model.config(), start.model.device(), false)?;
            model.vs.copy(&start.vs)?;
            let t0 = Instant::now();
            let (mut generated, mut curve, mut iterations) = (0, Vec::new(), 0);
            let (mut refined_attempts, mut refined_solved) = (0, 0);
            let groups = run.tasks_per_iteration as u64;
            let initial_per_iteration = run.tasks_per_iteration * run.group_size;
            let name = arm.name();
            let trainer = inproc::Trainer::new(model, run.clone())?.with_tokenizer(tokenizer.clone())?;
            let (model, report) = inproc::train_with(trainer, &run, |s| {
                iterations += 1;
                generated += s.generated_tokens;
                let refined = s.episodes.saturating_sub(initial_per_iteration);
                refined_attempts += refined;
                refined_solved += (s.refined_success_rate.unwrap_or(0.0) * refined as f64).round() as usize;
                if let Some(e) = &s.eval {
                    curve.push((s.iteration * groups, e.success_rate));
                }
                on_event(ModesEvent::Iteration {
                    arm: &name,
                    seed,
                    iteration: iterations,
                    iterations: run.iterations,
                    tokens: generated,
                    token_budget: run.token_budget,
                    greedy: s.eval.as_ref().map(|e| e.success_rate),
                });
            })?;
            on_event(ModesEvent::Evaluating { arm: &name, seed });
            curve.insert(0, (0, report.initial_eval.success_rate));
            let train_seconds = t0.elapsed().as_secs_f64();
            let policy = PolicyRef { model: &model.model, tokenizer: tokenizer.as_ref() };
            let (greedy, sampled) =
                per_task_success(policy, &specs, cfg.eval_samples, &cfg.run.rollout, EVAL_DRAWS_SEED)?;
            let channel = evaluate_refinement(policy, &specs, 1, &cfg.run.rollout, EVAL_DRAWS_SEED, false)?;
            let result = RunResult {
                arm: name,
                seed,
                greedy_rate: mean(&greedy),
                sampled_rate: mean(&sampled),
                greedy,
                sampled,
                channel_points: 100.0 * (channel.refined_success - channel.initial_success),
                generated_tokens: generated,
                groups: iterations * groups,
                curve,
                train_seconds,
                steps_seconds: report.train_seconds,
                generation_seconds: report.generation_seconds,
                refined_attempts,
                refined_solved,
                updates: report.updates,
            };
            if cfg.token_matched && matched.is_none() {
                matched = Some(result.generated_tokens as u64);
            }
            if let Some((c, k)) = cache.as_mut().zip(key.as_deref()) {
                c.record(k, &weights, &result)?;
            }
            runs.push(result);
            let run = runs.last().expect("just pushed");
            on_event(ModesEvent::Finished { run, kept: false, done: runs.len(), total });
        }
    }
    let of = |arm: &Arm, pick: fn(&RunResult) -> &Vec<f64>| -> Vec<Vec<f64>> {
        cfg.seeds
            .iter()
            .filter_map(|s| runs.iter().find(|r| r.seed == *s && r.arm == arm.name()).map(|r| pick(r).clone()))
            .collect()
    };
    let pairs = comparisons(&cfg.arms);
    let diffs = |pick: fn(&RunResult) -> &Vec<f64>, salt: u64| -> Vec<Difference> {
        pairs
            .iter()
            .enumerate()
            .map(|(k, (a, b))| {
                paired(&a.name(), &of(a, pick), &b.name(), &of(b, pick), cfg.replicates, salt + k as u64)
            })
            .collect()
    };
    Ok(ModesReport {
        start_greedy: mean(&g0),
        start_sampled: mean(&s0),
        sampled: diffs(|r| &r.sampled, 100),
        greedy: diffs(|r| &r.greedy, 200),
        runs,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

/// The differences the claim is about, among the usual arms present: U−R, R−outcome,
/// C−outcome, U−outcome; the same among the cosine arms; each ablation (Dr. GRPO, matched
/// steps, cosine) against its usual twin; and a matched-steps arm against outcome too.
pub fn comparisons(arms: &[Arm]) -> Vec<(Arm, Arm)> {
    let mut out: Vec<(Arm, Arm)> = Vec::new();
    for cosine in [false, true] {
        let find = |mode| arms.iter().copied().find(|a| *a == Arm { cosine, ..Arm::of(mode) });
        let (o, c, r, u) = (
            find(FeedbackMode::Outcome),
            find(FeedbackMode::Critique),
            find(FeedbackMode::Score),
            find(FeedbackMode::Unified),
        );
        out.extend([(u, r), (r, o), (c, o), (u, o)].into_iter().filter_map(|(a, b)| Some((a?, b?))));
    }
    let find = |mode| arms.iter().copied().find(|a| *a == Arm::of(mode));
    let o = find(FeedbackMode::Outcome);
    for ablation in arms.iter().filter(|a| a.is_ablation()) {
        if let Some(twin) = find(ablation.mode) {
            out.push((*ablation, twin));
        }
        if let Some(outcome) = o.filter(|_| ablation.matched_steps) {
            out.push((*ablation, outcome));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(mode: FeedbackMode, std_normalize: bool) -> Arm {
        Arm { std_normalize, ..Arm::of(mode) }
    }

    /// The names of the arms [`comparisons`] pairs.
    fn compared(arms: &[Arm]) -> Vec<[String; 2]> {
        comparisons(arms).iter().map(|(a, b)| [a.name(), b.name()]).collect()
    }

    #[test]
    fn an_arm_without_matched_steps_keeps_the_key_its_runs_were_kept_under() {
        // What `format!("{arm:?}")` wrote before the field existed: runs.jsonl files hold it.
        assert_eq!(arm(FeedbackMode::Critique, true).key_text(), "Arm { mode: Critique, std_normalize: true }");
        assert_eq!(arm(FeedbackMode::Unified, false).key_text(), "Arm { mode: Unified, std_normalize: false }");
        let matched = Arm { matched_steps: true, ..Arm::of(FeedbackMode::Critique) };
        assert_eq!(matched.key_text(), "Arm { mode: Critique, std_normalize: true, matched_steps: true }", "kept runs");
        assert_eq!(matched.name(), "critique (matched steps)");
        assert!(matched.steps_matched(false) && !Arm::of(FeedbackMode::Critique).steps_matched(false));
        assert!(Arm::of(FeedbackMode::Unified).steps_matched(true), "--matched-steps: every refining arm");
        assert!(
            !Arm { matched_steps: true, ..Arm::of(FeedbackMode::Score) }.steps_matched(true),
            "score refines nothing"
        );
    }

    #[test]
    fn a_cosine_arm_has_a_key_and_name_of_its_own_and_leaves_the_others_keys_alone() {
        let cosine = Arm { cosine: true, ..Arm::of(FeedbackMode::Score) };
        assert_eq!(cosine.key_text(), "Arm { mode: Score, std_normalize: true, cosine: true }");
        assert_eq!(cosine.name(), "score (cosine)");
        let both = Arm { matched_steps: true, cosine: true, ..Arm::of(FeedbackMode::Unified) };
        assert_eq!(both.key_text(), "Arm { mode: Unified, std_normalize: true, matched_steps: true, cosine: true }");
        assert_eq!(both.name(), "unified (matched steps) (cosine)");
    }

    fn modes_config(matched_steps: bool) -> ModesConfig {
        let mut run = InprocConfig { iterations: 20, tasks_per_iteration: 2, ..InprocConfig::default() };
        (run.learner.lr, run.learner.warmup_steps) = (5e-6, 4);
        ModesConfig {
            arms: Vec::new(),
            seeds: vec![0],
            run,
            eval_tasks: 64,
            eval_samples: 4,
            replicates: 100,
            curve_every: 5,
            token_matched: false,
            matched_steps,
            runs_file: None,
        }
    }

    #[test]
    fn a_cosine_arm_decays_to_its_floor_at_its_last_planned_update_and_the_others_stay_at_the_peak() {
        let cfg = modes_config(false);
        let (epochs, minibatches) = (cfg.run.epochs as u64, cfg.run.minibatches as u64);
        let planned = |run: &InprocConfig| 20 * epochs * run.minibatches as u64;
        let usual = arm_run(&cfg, &Arm::of(FeedbackMode::Critique), 1);
        let mut before = cfg.run.clone();
        (before.seed, before.eval_every, before.eval_tasks) = (1, 5, 64);
        (before.learner.feedback, before.learner.grpo_std_normalize) = (FeedbackMode::Critique, true);
        assert_eq!(format!("{usual:?}"), format!("{before:?}"), "a usual arm's run, and so its kept key, is as before");
        let constant = usual.learner.adamw_config().schedule;
        assert_eq!((constant.lr_at(3), constant.lr_at(planned(&usual) - 1)), (5e-6, 5e-6));

        for (arm, cfg) in [
            (Arm { cosine: true, ..Arm::of(FeedbackMode::Outcome) }, modes_config(false)),
            (Arm { cosine: true, ..Arm::of(FeedbackMode::Critique) }, modes_config(true)),
            (Arm { cosine: true, matched_steps: true, ..Arm::of(FeedbackMode::Unified) }, modes_config(false)),
        ] {
            let run = arm_run(&cfg, &arm, 0);
            run.validate().unwrap();
            let matched = arm.mode.refines() && (cfg.matched_steps || arm.matched_steps);
            assert_eq!(run.minibatches as u64, minibatches * if matched { 2 } else { 1 }, "{}", arm.name());
            assert_eq!(run.learner.total_steps, planned(&run), "{}", arm.name());
            let schedule = run.learner.adamw_config().schedule;
            let last = planned(&run) - 1;
            assert_eq!((schedule.lr_at(3), schedule.lr_at(4)), (5e-6, 5e-6), "{}: warm-up up to the peak", arm.name());
            assert!(schedule.lr_at(5) < 5e-6 && schedule.lr_at(5) > 0.99 * 5e-6, "{}: then it decays", arm.name());
            let half = schedule.lr_at(4 + (planned(&run) - 4) / 2);
            assert!((half - 5e-6 * (1.0 + COSINE_FLOOR) / 2.0).abs() < 1e-12, "{}: half way {half}", arm.name());
            assert!(schedule.lr_at(last) < 5e-6 * 0.11, "{}: the last update {}", arm.name(), schedule.lr_at(last));
            assert!((schedule.lr_at(planned(&run)) - 5e-6 * COSINE_FLOOR).abs() < 1e-15, "{}: the floor", arm.name());
        }
    }

    #[test]
    fn cosine_arms_are_compared_among_themselves_and_with_their_twins() {
        let cosine = |mode| Arm { cosine: true, ..Arm::of(mode) };
        let all = [
            Arm::of(FeedbackMode::Outcome),
            Arm::of(FeedbackMode::Critique),
            cosine(FeedbackMode::Outcome),
            cosine(FeedbackMode::Critique),
            cosine(FeedbackMode::Unified),
        ];
        let want = [
            ["critique", "outcome"],
            ["critique (cosine)", "outcome (cosine)"],
            ["unified (cosine)", "outcome (cosine)"],
            ["outcome (cosine)", "outcome"],
            ["critique (cosine)", "critique"],
        ];
        assert_eq!(compared(&all), want, "no usual unified: no twin for its cosine");
    }

    #[test]
    fn a_matched_steps_arm_is_compared_with_its_twin_and_with_outcome() {
        let matched = |mode| Arm { matched_steps: true, ..Arm::of(mode) };
        let all = [
            Arm::of(FeedbackMode::Outcome),
            Arm::of(FeedbackMode::Critique),
            matched(FeedbackMode::Critique),
            matched(FeedbackMode::Unified),
        ];
        let want = [
            ["critique", "outcome"],
            ["critique (matched steps)", "critique"],
            ["critique (matched steps)", "outcome"],
            ["unified (matched steps)", "outcome"],
        ];
        assert_eq!(compared(&all), want, "no usual unified: no twin to compare");
    }

    #[test]
    fn the_claimed_differences_are_compared_and_ablations_against_their_twin() {
        let all = [
            arm(FeedbackMode::Outcome, true),
            arm(FeedbackMode::Critique, true),
            arm(FeedbackMode::Score, true),
            arm(FeedbackMode::Unified, true),
            arm(FeedbackMode::Unified, false),
        ];
        let want = [
            ["unified", "score"],
            ["score", "outcome"],
            ["critique", "outcome"],
            ["unified", "outcome"],
            ["unified (Dr. GRPO)", "unified"],
        ];
        assert_eq!(compared(&all), want);
        assert_eq!(comparisons(&all[..2]).len(), 1, "only C−outcome among outcome and critique");
    }
}
