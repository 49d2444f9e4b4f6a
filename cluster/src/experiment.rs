//! `reagent experiment modes`: the feedback-mode comparison (`learner::experiment`) from the
//! command line: one cold start (or `--init`), every arm on every seed with a progress bar, then
//! the evidence in the output directory — `modes.md` (the tables), `modes.json` (every run's
//! per-task results and the intervals) and `modes.png` (greedy held-out success against the
//! initial-attempt groups trained on, the mean over seeds per arm).
//!
//! ```text
//!  reagent experiment modes --quick      →  runs/modes-quick/{cold-start/, modes.md, modes.json, modes.png}
//!  reagent experiment modes              →  runs/modes/…   (5 seeds × 5 arms; hours on two cores)
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::progress::Progress;
use anyhow::{Context, Result};
use episode::fit_rollout;
use learner::experiment::{compare, Arm, Difference, ModesConfig, ModesEvent, ModesReport};
use learner::inproc::InprocConfig;
use learner::sft::{self, ExperimentSize, SftConfig};
use policy::LoadedModel;
use protocol::wire::FeedbackMode;
use tch::Device;

use crate::plot::{self, Chart, Series};
use clap::{Args, Subcommand};

use crate::cli::FeedbackArg;

/// `reagent experiment …`
#[derive(Debug, Clone, Subcommand)]
pub enum ExperimentCommand {
    /// Compare the feedback modes — outcome, critique (Reagent-C), score (Reagent-R), unified
    /// (Reagent-U), and Dr. GRPO as an ablation — trained in process with the reference judge
    /// from one cold start, with paired seeds, equal budgets in initial-attempt groups, the same
    /// held-out tasks and random draws; writes modes.md, modes.json and modes.png with paired
    /// bootstrap intervals for U−R, R−outcome, C−outcome and U−outcome. Exits non-zero when
    /// the paper's ordering does not appear (the data is reported either way).
    Modes(ModesArgs),
}

/// Options of `reagent experiment modes`. Unset sizes take the full run's defaults (5 seeds,
/// 60 iterations of 8 tasks, 200 held-out tasks × 4 samples, a 3,000-update cold start: hours
/// on two cores), or with --quick the short version's (2 seeds, 12 iterations, 100 × 2, 1,500
/// updates, no ablation: about 15 minutes).
#[derive(Debug, Clone, Args)]
pub struct ModesArgs {
    /// The short version.
    #[arg(long)]
    pub quick: bool,
    /// Training seeds per arm.
    #[arg(long, value_name = "N")]
    pub seeds: Option<u64>,
    /// Iterations per run (each trains on --tasks-per-iteration groups of initial attempts).
    #[arg(long, value_name = "N")]
    pub iterations: Option<u64>,
    /// Groups of initial attempts per iteration.
    #[arg(long, value_name = "N")]
    pub tasks_per_iteration: Option<u64>,
    /// Peak learning rate of every arm's updates, and the warm-up updates before it. The
    /// defaults (3e-4, 2) suit the built-in models trained from scratch; a pretrained model wants
    /// far less (SmolLM2-135M collapsed at 2e-5 and learns at 5e-6 with 4 warm-up updates, as in
    /// examples/smollm2/job.toml).
    #[arg(long, value_name = "LR")]
    pub lr: Option<f64>,
    /// See `--lr`.
    #[arg(long, value_name = "N")]
    pub warmup_steps: Option<u64>,
    /// Difficulty of training and held-out tasks (2 or 3 leave room above the cold start).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=3))]
    pub difficulty: u32,
    /// Task family of training, held-out tasks and the cold start: math, retail, webnav or
    /// searchqa (the second family of the comparison).
    #[arg(long, default_value = "math", value_name = "FAMILY")]
    pub family: protocol::wire::TaskFamily,
    /// Held-out tasks.
    #[arg(long, value_name = "N")]
    pub eval_tasks: Option<u64>,
    /// Sampled attempts per held-out task.
    #[arg(long, value_name = "N")]
    pub eval_samples: Option<u64>,
    /// Updates of the cold start (ignored with --init).
    #[arg(long, value_name = "N")]
    pub sft_steps: Option<u64>,
    /// Start every arm from this model directory instead of a fresh cold start.
    #[arg(long, value_name = "DIR")]
    pub init: Option<PathBuf>,
    /// Leave out the Dr. GRPO ablation arm.
    #[arg(long)]
    pub no_ablation: bool,
    /// The feedback modes compared, comma-separated (default: all four); the differences the
    /// claim is about are reported among those present.
    #[arg(long, value_name = "MODE,..", value_delimiter = ',')]
    pub arms: Vec<FeedbackArg>,
    /// Refining arms (critique, unified) take one optimizer step per as many groups as the
    /// others do: twice the steps per iteration over their initial and refined groups, instead
    /// of the same two steps with each holding twice the groups. Tests whether refined groups
    /// dilute the first attempt's update.
    #[arg(long)]
    pub matched_steps: bool,
    /// Also run each refining arm (critique, unified) with matched steps as an arm of its own,
    /// `critique (matched steps)`, compared with its usual twin and with outcome: the dilution
    /// ablation beside the usual arms, reusing their kept runs.
    #[arg(long)]
    pub matched_steps_arms: bool,
    /// Also run each usual arm with a learning rate that decays after its warm-up, along half a
    /// cosine down to a tenth of `--lr` at the run's last planned update, as an arm of its own,
    /// `critique (cosine)`: compared with its constant-rate twin, and the claimed differences
    /// among the cosine arms. Tests whether late updates at the peak rate undo what an arm
    /// learnt early. Not with --token-matched (a run's length is then not known ahead).
    #[arg(long)]
    pub cosine_arms: bool,
    /// The token-matched variant: every arm of a seed generates as many agent tokens as that
    /// seed's outcome arm did in its group budget (refining arms then see fewer tasks), instead
    /// of equal initial-attempt groups.
    #[arg(long)]
    pub token_matched: bool,
    /// Let the reference judge's critique say whether the task was solved (off by default, as
    /// the released Agent-RRM, which has no ground truth). Run the comparison both ways: a C >
    /// outcome result with it on may measure the outcome the critique leaks, not the critique.
    #[arg(long)]
    pub reveal_outcome: bool,
    /// Which initial attempts the refining arms refine: `all`, or `failed` (only those that did
    /// not solve the task); as actor.refine.
    #[arg(long, value_name = "all|failed", default_value = "all")]
    pub refine: episode::RefineWhich,
    /// Output directory; default runs/modes (runs/modes-quick with --quick). Finished runs
    /// are kept in its runs.jsonl (and the cold start in cold-start/, with checkpoints): the
    /// same command again after a kill skips what is done; other settings run afresh.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Where every arm trains and is evaluated: the first CUDA device when libtorch sees one,
    /// else the CPU (`auto`); `cuda` fails at once where there is none. Runs finished on one
    /// device are not reused on another (the weights' kind is part of their key).
    #[arg(long, value_enum, default_value = "auto")]
    pub device: crate::cli::DeviceArg,
}

/// The settings `args` asks for: `--quick` shrinks every default, explicit flags win.
fn settings(args: &ModesArgs) -> Result<(ModesConfig, u64)> {
    let quick = args.quick;
    let pick = |given: Option<u64>, full: u64, small: u64| given.unwrap_or(if quick { small } else { full });
    let all = [FeedbackMode::Outcome, FeedbackMode::Critique, FeedbackMode::Score, FeedbackMode::Unified];
    let chosen: Vec<FeedbackMode> = args.arms.iter().map(|a| FeedbackMode::from(*a)).collect();
    let mut arms: Vec<Arm> = all.into_iter().filter(|m| chosen.is_empty() || chosen.contains(m)).map(Arm::of).collect();
    if !quick && !args.no_ablation && arms.iter().any(|a| a.mode == FeedbackMode::Unified) {
        arms.push(Arm { std_normalize: false, ..Arm::of(FeedbackMode::Unified) });
    }
    if args.matched_steps_arms {
        let refining: Vec<Arm> = arms.iter().filter(|a| a.mode.refines() && a.std_normalize).copied().collect();
        anyhow::ensure!(
            !refining.is_empty(),
            "--matched-steps-arms: expected critique or unified among --arms, which have refined groups to match"
        );
        anyhow::ensure!(
            !args.matched_steps,
            "--matched-steps-arms and --matched-steps: pick one (the first adds matched-steps arms beside the usual ones, the second changes them)"
        );
        arms.extend(refining.into_iter().map(|a| Arm { matched_steps: true, ..a }));
    }
    if args.cosine_arms {
        anyhow::ensure!(
            !args.token_matched,
            "--cosine-arms with --token-matched: a token-matched run stops at a token budget, so the update where \
             its decay should end is not known ahead; run them apart"
        );
        let usual: Vec<Arm> = arms.iter().filter(|a| **a == Arm::of(a.mode)).copied().collect();
        arms.extend(usual.into_iter().map(|a| Arm { cosine: true, ..a }));
    }
    let iterations = pick(args.iterations, 60, 12);
    let mut run = InprocConfig {
        family: args.family,
        difficulty: args.difficulty,
        tasks_per_iteration: pick(args.tasks_per_iteration, 8, 8) as usize,
        iterations,
        time_limit: None,
        reveal_outcome: args.reveal_outcome,
        ..InprocConfig::default()
    };
    run.rollout.refine = args.refine;
    if let Some(lr) = args.lr {
        run.learner.lr = lr;
    }
    if let Some(steps) = args.warmup_steps {
        run.learner.warmup_steps = steps;
    }
    // The cold start's difficulties (a `micro` SFT trains 1 and 2) and the run's: one rollout
    // for both, fitted to the family's reference episodes.
    fit_rollout(&mut run.rollout, args.family, &[1, 2, args.difficulty])?;
    let cfg = ModesConfig {
        arms,
        seeds: (0..pick(args.seeds, 5, 2)).collect(),
        run,
        eval_tasks: pick(args.eval_tasks, 200, 100) as usize,
        eval_samples: pick(args.eval_samples, 4, 2) as usize,
        replicates: 2000,
        curve_every: (iterations / 4).max(1),
        token_matched: args.token_matched,
        matched_steps: args.matched_steps,
        runs_file: None,
    };
    Ok((cfg, pick(args.sft_steps, 3000, 1500)))
}

/// The cold start every arm begins from: `--init`, or a `micro` SFT written to `out/cold-start`.
fn cold_start(args: &ModesArgs, steps: u64, out: &Path, device: Device) -> Result<LoadedModel> {
    if let Some(dir) = &args.init {
        crate::sft::ensure_model_dir(dir)?;
        return Ok(LoadedModel::from_dir(dir, device, false)?);
    }
    let mut cfg = SftConfig::experiment(ExperimentSize::Micro);
    cfg.device = device;
    cfg.steps = steps;
    cfg.time_limit = None;
    cfg.eval_every = 0;
    cfg.eval_tasks = 50;
    cfg.eval_difficulties = vec![args.difficulty];
    cfg.family = args.family;
    fit_rollout(&mut cfg.rollout, args.family, &[1, 2, args.difficulty])?;
    let bar = Progress::new(
        steps,
        "cold start (SFT)",
        "updates",
        "cold start (SFT) {bar:30} {pos}/{len} updates {msg} [{elapsed}]",
    )?;
    let (model, report) = sft::run(&cfg, &out.join("cold-start"), |p| {
        bar.set_position(p.step);
        bar.set_message(format!("loss {:.3}", p.loss));
    })?;
    bar.finish_and_clear();
    println!(
        "cold start: {} updates, loss {:.3} → {:.3}, written to {}",
        report.steps,
        report.first_loss,
        report.final_loss,
        out.join("cold-start").display()
    );
    Ok(model)
}

fn row(d: &Difference) -> String {
    let verdict = if d.significant() { "excludes 0" } else { "includes 0" };
    format!("| {} − {} | {:+.1} | [{:+.1}, {:+.1}] | {verdict} |\n", d.a, d.b, d.points, d.low, d.high)
}

/// The Markdown tables of `report`.
pub fn markdown(report: &ModesReport, cfg: &ModesConfig) -> String {
    let mut s = String::new();
    let groups = cfg.run.iterations * cfg.run.tasks_per_iteration as u64;
    let _ = writeln!(
        s,
        "Feedback modes on `{}` difficulty {}: {} seeds per arm, {} initial-attempt groups of {} each \
         ({} iterations × {} tasks), from one cold start (held-out greedy {:.1} %, sampled {:.1} %). Held-out: \
         {} tasks, the first attempt only (no critique at test time), greedy once and {} samples at T = {}. \
         Learning rate {} ({} warm-up updates).\n",
        cfg.run.family,
        cfg.run.difficulty,
        cfg.seeds.len(),
        groups,
        cfg.run.group_size,
        cfg.run.iterations,
        cfg.run.tasks_per_iteration,
        100.0 * report.start_greedy,
        100.0 * report.start_sampled,
        cfg.eval_tasks,
        cfg.eval_samples,
        cfg.run.rollout.temperature,
        cfg.run.learner.lr,
        cfg.run.learner.warmup_steps
    );
    s.push_str(if cfg.run.reveal_outcome {
        "The judge's critiques said whether the task was solved (`--reveal-outcome`).\n\n"
    } else {
        "The judge's critiques did not say whether the task was solved (as the released Agent-RRM).\n\n"
    });
    let _ = writeln!(
        s,
        "Refined attempts (critique, unified): of `{}` initial attempts (`--refine`).\n",
        cfg.run.rollout.refine
    );
    if cfg.token_matched {
        s.push_str(
            "Token-matched: every arm generated about as many agent tokens as its seed's outcome arm did in the \
             group budget above (each arm stops after the iteration that reaches them).\n\n",
        );
    }
    if cfg.arms.iter().any(|a| a.matched_steps) {
        s.push_str(
            "An arm named `(matched steps)` took one optimizer step per as many groups as the others (twice the steps \
             per iteration over its initial and refined groups); the others share their steps between them.\n\n",
        );
    }
    if cfg.arms.iter().any(|a| a.cosine) {
        let _ = writeln!(
            s,
            "An arm named `(cosine)` decayed its learning rate after the warm-up along half a cosine, to {} of the \
             peak at its last planned update; the others kept the peak.\n",
            learner::experiment::COSINE_FLOOR
        );
    }
    if cfg.matched_steps {
        s.push_str(
            "Matched steps: the refining arms took one optimizer step per as many groups as the others (twice the \
             steps per iteration over their initial and refined groups).\n\n",
        );
    }
    s.push_str(
        "| arm | held-out sampled | held-out greedy | critique channel (refined − first) | generated tokens | groups \
         | refined attempts (solved) | training s (generation) |\n",
    );
    s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for arm in &cfg.arms {
        let runs: Vec<_> = report.runs.iter().filter(|r| r.arm == arm.name()).collect();
        let n = runs.len().max(1) as f64;
        let mean = |f: &dyn Fn(&learner::experiment::RunResult) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / n;
        let _ = writeln!(
            s,
            "| {} | {:.1} % | {:.1} % | {:+.1} points | {:.0} | {:.0} | {:.0} ({:.1} %) | {:.0} ({:.0}) |",
            arm.name(),
            100.0 * mean(&|r| r.sampled_rate),
            100.0 * mean(&|r| r.greedy_rate),
            mean(&|r| r.channel_points),
            mean(&|r| r.generated_tokens as f64),
            mean(&|r| r.groups as f64),
            mean(&|r| r.refined_attempts as f64),
            100.0 * mean(&|r| r.refined_solved as f64) / mean(&|r| r.refined_attempts as f64).max(1.0),
            mean(&|r| r.steps_seconds),
            mean(&|r| r.generation_seconds)
        );
    }
    s.push_str("\nPaired differences, sampled (the main metric), points with 95 % paired-bootstrap intervals over seeds and tasks:\n\n");
    s.push_str("| difference | points | 95 % interval | |\n|---|---:|---:|---|\n");
    report.sampled.iter().for_each(|d| s.push_str(&row(d)));
    s.push_str("\nThe same, greedy:\n\n| difference | points | 95 % interval | |\n|---|---:|---:|---|\n");
    report.greedy.iter().for_each(|d| s.push_str(&row(d)));
    s
}

/// Greedy held-out success against initial-attempt groups, the mean over seeds per arm.
fn chart(report: &ModesReport, cfg: &ModesConfig) -> Chart {
    let series = cfg
        .arms
        .iter()
        .map(|arm| {
            let runs: Vec<_> = report.runs.iter().filter(|r| r.arm == arm.name()).collect();
            let len = runs.iter().map(|r| r.curve.len()).min().unwrap_or(0);
            let at = |k: usize| (runs[0].curve[k].0 as f64, runs.iter().map(move |r| r.curve[k].1));
            let points = (0..len).map(|k| (at(k).0, at(k).1.sum::<f64>() / runs.len() as f64)).collect();
            let band = (0..len)
                .map(|k| (at(k).0, at(k).1.fold(f64::INFINITY, f64::min), at(k).1.fold(f64::NEG_INFINITY, f64::max)))
                .collect();
            Series::new(arm.name(), points).with_band(band)
        })
        .collect();
    Chart {
        title: format!(
            "Held-out greedy success by feedback mode (mean of {} seeds, band: min to max)",
            cfg.seeds.len()
        ),
        x_label: "initial-attempt groups trained on".into(),
        y_label: "success".into(),
        series,
        y_range: Some((0.0, 1.0)),
    }
}

/// The progress bar's message after `event`: where the run in progress is, or which run just
/// finished.
fn progress_message(event: &ModesEvent<'_>) -> String {
    match *event {
        ModesEvent::Iteration { arm, seed, iteration, iterations, tokens, token_budget, greedy } => {
            let of = match token_budget {
                Some(budget) => format!("{tokens}/{budget} tokens"),
                None => format!("{iteration}/{iterations}, {tokens} tokens"),
            };
            let curve = greedy.map_or(String::new(), |g| format!(", held-out greedy {:.1} %", 100.0 * g));
            format!("{arm} seed {seed}: iteration {of}{curve}")
        }
        ModesEvent::Evaluating { arm, seed } => {
            format!("{arm} seed {seed}: trained, final held-out evaluation and critique channel…")
        }
        ModesEvent::Finished { run, kept, .. } => {
            let from = if kept { " (kept from an earlier run)" } else { "" };
            format!("last: {} seed {} sampled {:.1} %{from}", run.arm, run.seed, 100.0 * run.sampled_rate)
        }
        ModesEvent::Kept { reused, total, .. } => format!("{reused} of {total} runs kept from an earlier run"),
        ModesEvent::ColdStart { tasks, samples, result: None } => {
            let plural = if samples == 1 { "" } else { "s" };
            format!("the cold start: held-out evaluation, {tasks} tasks greedy and {samples} sample{plural} each…")
        }
        ModesEvent::ColdStart { result: Some((greedy, sampled)), .. } => {
            format!("the cold start: held-out greedy {:.1} %, sampled {:.1} %", 100.0 * greedy, 100.0 * sampled)
        }
    }
}

/// The line printed once the runs file is read: how much of the comparison it holds, and when it
/// holds runs but none of this comparison's, why that can be (`None` for an empty file).
fn kept_line(event: &ModesEvent<'_>) -> Option<String> {
    let ModesEvent::Kept { in_file, reused, total, weights, starts } = *event else { return None };
    let short = &weights[..weights.len().min(16)];
    Some(match (in_file, reused) {
        (0, _) => return None,
        (_, 0) => {
            let from: Vec<String> = [
                (starts.same, "from these weights under other settings"),
                (starts.other, "from other cold-start weights"),
                (starts.unrecorded, "kept before lines named their cold start (2026-12-07)"),
            ]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, from)| format!("{n} {from}"))
            .collect();
            format!(
                "warning: none of the {in_file} finished runs in the runs file is one of this comparison's {total} \
                 ({}). A run is reused only from the same cold-start weights (here {short}…) and the same \
                 settings; a cold start remade on another CPU model can differ in its last bits. All {total} \
                 runs start now.",
                from.join("; ")
            )
        }
        (_, reused) if reused == total => format!("all {total} runs are in the runs file: nothing to train"),
        (_, reused) => format!("{reused} of {total} runs are in the runs file; {} to train", total - reused),
    })
}

/// The line printed when a run finishes: its results, so that a log shows every run.
fn finished_line(r: &learner::experiment::RunResult) -> String {
    format!(
        "finished {} seed {}: held-out sampled {:.1} %, greedy {:.1} %, critique channel {:+.1} points; \
         {} groups, {} agent tokens, {} updates, {:.0} min",
        r.arm,
        r.seed,
        100.0 * r.sampled_rate,
        100.0 * r.greedy_rate,
        r.channel_points,
        r.groups,
        r.generated_tokens,
        r.updates,
        r.train_seconds / 60.0
    )
}

/// Runs the comparison and writes its evidence; `Ok(false)` when U > R > outcome and
/// C > outcome did not all appear with intervals excluding 0 (reported, never tuned toward).
pub async fn modes(args: ModesArgs) -> Result<bool> {
    let (mut cfg, sft_steps) = settings(&args)?;
    cfg.run.validate()?;
    for arm in &cfg.arms {
        learner::experiment::arm_run(&cfg, arm, 0).validate().with_context(|| format!("the {} arm", arm.name()))?;
    }
    anyhow::ensure!(cfg.eval_tasks > 0 && cfg.eval_samples > 0, "--eval-tasks and --eval-samples: expected at least 1");
    anyhow::ensure!(
        args.family != protocol::wire::TaskFamily::Cartpole,
        "--family cartpole: expected a text family (math, retail, webnav, searchqa); cartpole has no judge"
    );
    let device = args.device.resolve()?;
    let out =
        args.out.clone().unwrap_or_else(|| PathBuf::from(if args.quick { "runs/modes-quick" } else { "runs/modes" }));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    cfg.runs_file = Some(out.join("runs.jsonl"));
    let (a, dir) = (args.clone(), out.clone());
    let (report, cfg) = tokio::task::spawn_blocking(move || -> Result<(ModesReport, ModesConfig)> {
        let start = cold_start(&a, sft_steps, &dir, device)?;
        // The init directory's own tokenizer and chat template (a built-in cold start: bytes).
        let tokenizer: Arc<dyn policy::Tokenizer> = match &a.init {
            Some(init) => policy::pretrained::tokenizer_for_dir(init)?.into(),
            None => Arc::new(policy::ByteTokenizer),
        };
        let total = (cfg.arms.len() * cfg.seeds.len()) as u64;
        let bar = Progress::new(total, "runs", "runs", "runs {bar:30} {pos}/{len} {msg} [{elapsed}, eta {eta}]")?;
        bar.enable_steady_tick(Duration::from_secs(1));
        bar.println(format!(
            "finished runs are kept in {}: after a kill, the same command continues from them",
            dir.join("runs.jsonl").display()
        ));
        let report = compare(&start, &tokenizer, &cfg, |event| {
            let message = progress_message(&event);
            match event {
                // Position and message at once: a progress line (when stderr is not a terminal)
                // printed for the move must name the run that just finished.
                ModesEvent::Finished { run, kept, done, .. } => {
                    if !kept {
                        bar.println(finished_line(run));
                    }
                    bar.set(done as u64, message);
                }
                // A phase of minutes with no update in it (a run's final evaluation, the cold
                // start's), and its result: said at once, not left to the next line.
                ModesEvent::Evaluating { .. } | ModesEvent::ColdStart { .. } => {
                    bar.println(&message);
                    bar.set_message(message);
                }
                ModesEvent::Iteration { .. } => bar.set_message(message),
                ModesEvent::Kept { .. } => {
                    if let Some(line) = kept_line(&event) {
                        bar.println(line);
                    }
                }
            }
        })?;
        bar.finish_and_clear();
        Ok((report, cfg))
    })
    .await??;
    let table = markdown(&report, &cfg);
    std::fs::write(out.join("modes.md"), &table).with_context(|| "writing modes.md")?;
    let json = serde_json::to_string_pretty(&report)?;
    std::fs::write(out.join("modes.json"), json).with_context(|| "writing modes.json")?;
    plot::write_png(&chart(&report, &cfg), &out.join("modes.png"), 900, 500).with_context(|| "writing modes.png")?;
    println!("{table}");
    println!("tables, per-task results and the curve in {} ({:.0} s)", out.display(), report.wall_seconds);
    let holds = |a: &str, b: &str| report.sampled.iter().any(|d| d.a == a && d.b == b && d.low > 0.0);
    Ok(holds("unified", "score") && holds("score", "outcome") && holds("critique", "outcome"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]
    use super::*;

    fn modes_args(words: &[&str]) -> ModesArgs {
        crate::cli::parse(words).unwrap()
    }

    /// A report with no runs yet: the table's header and notes only.
    fn no_runs() -> ModesReport {
        ModesReport {
            start_greedy: 0.5,
            start_sampled: 0.4,
            runs: Vec::new(),
            sampled: Vec::new(),
            greedy: Vec::new(),
            wall_seconds: 0.0,
        }
    }

    #[test]
    fn the_kept_line_says_how_much_is_reused_and_why_nothing_is() {
        use learner::experiment::cache::StartCounts;
        let weights = "90ecb7e565d453d3f64d50deaca19f2377212b56d6494547f56552e1ba47ed2a";
        let kept = |in_file, reused, starts| ModesEvent::Kept { in_file, reused, total: 18, weights, starts };
        let none = StartCounts::default();
        assert_eq!(kept_line(&kept(0, 0, none)), None, "a new file: nothing to say");
        let old = kept_line(&kept(25, 0, StartCounts { unrecorded: 25, ..none })).unwrap();
        assert!(old.starts_with("warning: none of the 25 finished runs"), "{old}");
        assert!(old.contains("(25 kept before lines named their cold start"), "{old}");
        assert!(old.contains("here 90ecb7e565d453d3…") && old.contains("another CPU model"), "{old}");
        assert!(old.ends_with("All 18 runs start now."), "{old}");
        let other = kept_line(&kept(3, 0, StartCounts { same: 1, other: 2, unrecorded: 0 })).unwrap();
        assert!(
            other.contains("(1 from these weights under other settings; 2 from other cold-start weights)"),
            "{other}"
        );
        assert_eq!(
            kept_line(&kept(25, 7, StartCounts { same: 7, ..none })).unwrap(),
            "7 of 18 runs are in the runs file; 11 to train"
        );
        assert_eq!(kept_line(&kept(18, 18, none)).unwrap(), "all 18 runs are in the runs file: nothing to train");
    }

    #[test]
    fn progress_says_where_the_run_in_progress_is_and_what_finished() {
        let iteration = |greedy, token_budget| ModesEvent::Iteration {
            arm: "critique",
            seed: 1,
            iteration: 7,
            iterations: 20,
            tokens: 5120,
            token_budget,
            greedy,
        };
        assert_eq!(progress_message(&iteration(None, None)), "critique seed 1: iteration 7/20, 5120 tokens");
        assert_eq!(
            progress_message(&iteration(Some(0.515625), None)),
            "critique seed 1: iteration 7/20, 5120 tokens, held-out greedy 51.6 %"
        );
        assert_eq!(progress_message(&iteration(None, Some(12000))), "critique seed 1: iteration 5120/12000 tokens");
        assert!(
            progress_message(&ModesEvent::Evaluating { arm: "score", seed: 2 }).starts_with("score seed 2: trained")
        );
        let cold_start = |result| ModesEvent::ColdStart { tasks: 64, samples: 4, result };
        assert_eq!(
            progress_message(&cold_start(None)),
            "the cold start: held-out evaluation, 64 tasks greedy and 4 samples each…"
        );
        assert_eq!(
            progress_message(&cold_start(Some((0.578125, 0.546875)))),
            "the cold start: held-out greedy 57.8 %, sampled 54.7 %"
        );
        let run = learner::experiment::RunResult {
            arm: "unified".into(),
            seed: 0,
            greedy: vec![1.0, 0.0],
            sampled: vec![0.5, 0.25],
            greedy_rate: 0.5,
            sampled_rate: 0.375,
            channel_points: 12.5,
            generated_tokens: 20334,
            groups: 40,
            curve: Vec::new(),
            train_seconds: 4560.0,
            steps_seconds: 4000.0,
            generation_seconds: 3000.0,
            refined_attempts: 320,
            refined_solved: 129,
            updates: 37,
        };
        let done = |kept| ModesEvent::Finished { run: &run, kept, done: 3, total: 12 };
        assert_eq!(progress_message(&done(false)), "last: unified seed 0 sampled 37.5 %");
        assert!(progress_message(&done(true)).ends_with("(kept from an earlier run)"));
        assert_eq!(
            finished_line(&run),
            "finished unified seed 0: held-out sampled 37.5 %, greedy 50.0 %, critique channel +12.5 points; \
             40 groups, 20334 agent tokens, 37 updates, 76 min"
        );
    }

    #[test]
    fn matched_steps_arms_are_added_beside_the_refining_arms_and_refused_without_one() {
        let names = |words: &[&str]| -> Vec<String> {
            settings(&modes_args(words)).unwrap().0.arms.iter().map(Arm::name).collect()
        };
        assert_eq!(
            names(&["--arms", "outcome,critique,unified", "--no-ablation", "--matched-steps-arms"]),
            ["outcome", "critique", "unified", "critique (matched steps)", "unified (matched steps)"]
        );
        assert_eq!(names(&["--arms", "outcome,critique", "--no-ablation"]), ["outcome", "critique"]);
        let refused = settings(&modes_args(&["--arms", "outcome,score", "--matched-steps-arms"])).unwrap_err();
        assert!(refused.to_string().contains("--matched-steps-arms: expected critique or unified"), "{refused}");
        let both = settings(&modes_args(&["--matched-steps-arms", "--matched-steps"])).unwrap_err();
        assert!(both.to_string().contains("pick one"), "{both}");
    }

    #[test]
    fn cosine_arms_are_added_beside_the_usual_arms_and_refused_with_token_matched_budgets() {
        let (cfg, _) = settings(&modes_args(&[
            "--arms",
            "outcome,critique",
            "--matched-steps-arms",
            "--cosine-arms",
            "--iterations",
            "20",
            "--tasks-per-iteration",
            "2",
        ]))
        .unwrap();
        let names: Vec<String> = cfg.arms.iter().map(Arm::name).collect();
        assert_eq!(names, ["outcome", "critique", "critique (matched steps)", "outcome (cosine)", "critique (cosine)"]);
        let cosine = learner::experiment::arm_run(&cfg, &cfg.arms[4], 0);
        assert_eq!(cosine.learner.lr_decay, learner::optim::LrDecay::Cosine);
        assert_eq!(cosine.learner.total_steps, 20 * (cosine.epochs * cosine.minibatches) as u64);
        let usual = learner::experiment::arm_run(&cfg, &cfg.arms[1], 0);
        assert_eq!((usual.learner.lr_decay, usual.learner.total_steps), (learner::optim::LrDecay::Constant, 0));
        let refused = settings(&modes_args(&["--cosine-arms", "--token-matched"])).unwrap_err();
        assert!(refused.to_string().contains("--cosine-arms with --token-matched"), "{refused}");
        let report = no_runs();
        assert!(markdown(&report, &cfg).contains("to 0.1 of the peak at its last planned update"));
    }

    #[test]
    fn the_learning_rate_and_warm_up_reach_every_arm_and_the_table() {
        let (default, _) = settings(&modes_args(&["--quick"])).unwrap();
        assert_eq!((default.run.learner.lr, default.run.learner.warmup_steps), (3e-4, 2), "the built-in models' rate");
        let (cfg, _) = settings(&modes_args(&["--quick", "--lr", "5e-6", "--warmup-steps", "4"])).unwrap();
        assert_eq!((cfg.run.learner.lr, cfg.run.learner.warmup_steps), (5e-6, 4));
        let report = no_runs();
        assert!(
            markdown(&report, &cfg).contains("Learning rate 0.000005 (4 warm-up updates)"),
            "{}",
            markdown(&report, &cfg)
        );
    }
}
