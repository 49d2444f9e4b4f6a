//! `reagent sft` and `reagent train grpo`: the supervised cold start and the in-process GRPO
//! trainer from the command line (`learner::sft`, `learner::inproc`), each with a progress bar,
//! a learning curve as JSON lines, a report and the model written into the output directory.
//!
//! ```text
//!  reagent sft --size tiny                       →  runs/sft-tiny-1/{model/, sft_curve.jsonl, sft_report.json, checkpoints/}
//!  reagent train grpo --init runs/sft-tiny-1/model  →  runs/grpo-d2-1/{model/, rl_curve.jsonl, rl_report.json}
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::progress::Progress;
use anyhow::{Context, Result};
use learner::inproc::{self, InprocConfig};
use learner::sft::{self, ExperimentSize, SftConfig};

use crate::cli::FeedbackArg;
use clap::{Args, ValueEnum};

/// Built-in model sizes for `reagent sft`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SftSize {
    /// 1.6 M parameters: learns difficulty-1 `math` in five minutes on two CPU cores.
    Tiny,
    /// 0.17 M parameters, about six times faster per token: reaches difficulty 2 in five
    /// minutes, which gives RL something to reinforce there.
    Micro,
}

/// `--system-prompt` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SystemPromptArg {
    /// No system turn.
    Omit,
    /// The environment's own system prompt.
    Full,
}

/// Options of `reagent sft`.
#[derive(Debug, Clone, Args)]
pub struct SftArgs {
    /// The model trained from a fresh initialisation.
    #[arg(long, value_enum, default_value = "tiny")]
    pub size: SftSize,

    /// Difficulties of the training tasks, comma-separated (1–3); default: the size's own
    /// (`tiny` 1, `micro` 1,2). `--difficulty 2` gives a cold start that solves difficulty 2,
    /// where the critique channel and the feedback modes can be compared on harder tasks.
    #[arg(long, value_name = "D,..", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=3))]
    pub difficulty: Vec<u32>,

    /// Training time budget in minutes (evaluations excluded).
    #[arg(long, default_value_t = 5.0, value_name = "MIN")]
    pub minutes: f64,

    /// Stop after this many updates even if time is left (a run fixed in steps is
    /// reproducible; one fixed in time depends on the machine). 0 with --init: no training, the
    /// model evaluated as it is (held-out success and the critique channel).
    #[arg(long, value_name = "N")]
    pub steps: Option<u64>,

    /// Seed of the initial weights and of the task order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Greedy evaluation on held-out tasks every this many updates (0: only at the end).
    #[arg(long, value_name = "N")]
    pub eval_every: Option<u64>,

    /// Held-out tasks per evaluated difficulty.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub eval_tasks: usize,

    /// Share of refinement examples in the training mix (a flawed or flawless first attempt
    /// and its critique, then the correct solution): what critique-guided refinement builds on.
    /// The report then compares refined with first attempts on the held-out tasks.
    #[arg(long, value_name = "SHARE", default_value_t = learner::sft::config::DEFAULT_REFINE_SHARE)]
    pub refine_share: f64,

    /// Where refined attempts start: `first_flaw` (the first attempt's messages before the one
    /// the critique flags are kept) or `start` (from the beginning, the whole first attempt in
    /// the prompt); as actor.refine_from.
    #[arg(long, value_name = "first_flaw|start", default_value = "first_flaw")]
    pub refine_from: episode::RefineFrom,

    /// What the model is shown before each task, in training and evaluation: `omit` (no system
    /// turn: a model that learns the protocol in this cold start) or `full` (the environment's
    /// own system prompt: role, tools, action protocol; what an instruct model that has never
    /// seen the protocol needs). As actor.system_prompt.
    #[arg(long, value_enum, default_value = "omit")]
    pub system_prompt: SystemPromptArg,

    /// A file whose text is the system turn instead (say, the protocol and a worked example: a
    /// few-shot prompt); overrides --system-prompt.
    #[arg(long, value_name = "FILE")]
    pub system_prompt_file: Option<PathBuf>,

    /// Train on your own demonstrations: a JSON-lines file of chats in the OpenAI format
    /// ({"messages": [{"role": "user", "content": …}, {"role": "assistant", …}, …]}, tool calls
    /// written <tool>name(args)</tool> in the content) instead of reference episodes.
    #[arg(long, value_name = "FILE")]
    pub episodes: Option<PathBuf>,

    /// The task family trained on (reference episodes) and evaluated on; "dataset" plays the
    /// configuration's [dataset] files.
    #[arg(long, value_name = "FAMILY", default_value = "math")]
    pub family: protocol::wire::TaskFamily,

    /// Peak learning rate (AdamW, 20 warm-up updates); default: the size's own (`tiny` 1e-3,
    /// `micro` 2e-3). Fine-tuning a pretrained model (`--init`) wants about 1e-4 or less.
    #[arg(long, value_name = "LR")]
    pub lr: Option<f64>,

    /// Continue from this model directory (e.g. an earlier `reagent sft` run's model/) instead
    /// of a fresh model of `--size`: a staged cold start, plain reference episodes first
    /// (`--refine-share 0`), then refinement examples on top.
    #[arg(long, value_name = "DIR")]
    pub init: Option<PathBuf>,

    /// Output directory (model/, sft_curve.jsonl, sft_report.json, checkpoints/); default
    /// runs/sft-SIZE-SEED.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// A checkpoint (weights and optimizer, in --out's checkpoints/) every this many updates
    /// and after the last; 0: after the last only.
    #[arg(long, default_value_t = 500, value_name = "N")]
    pub checkpoint_every: u64,

    /// `auto`: continue from the newest checkpoint in --out when there is one (a killed run
    /// picks up where it was, with the same updates an uninterrupted run makes; --minutes
    /// counts the training time before the resume); `never`: start afresh (refused when --out
    /// holds checkpoints); or a checkpoint directory. Resuming needs the settings the run was
    /// started with; --steps, --minutes and the evaluation options may change.
    #[arg(long, default_value = "auto", value_name = "auto|never|PATH")]
    pub resume: learner::checkpoint::ResumeMode,

    /// Where the model trains: the first CUDA device when libtorch sees one, else the CPU
    /// (`auto`); `cuda` fails at once where there is none.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: crate::cli::DeviceArg,

    /// `fast`: libtorch's kernels for this CPU (the quickest; the model's last bits depend on
    /// the CPU model). `portable`: kernels that give the same bytes on any x86-64 CPU, about
    /// three times slower (CPU only): for a cold start that a long experiment keys its runs by
    /// and remakes on whichever machine continues it.
    #[arg(long, value_enum, default_value = "fast")]
    pub numerics: Numerics,
}

/// `reagent sft --numerics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Numerics {
    /// libtorch's kernels for this CPU.
    Fast,
    /// libtorch's plain kernels and MKL's reproducible path: the same bytes on any x86-64 CPU.
    Portable,
}

/// What `--numerics portable` sets before libtorch starts: ATen's kernels without its
/// AVX2/AVX-512 variants (their vector widths change the order of sums), and MKL's conditional
/// numerical reproducibility in its `COMPATIBLE` mode (the same code path on every Intel and
/// compatible CPU), so the matrix products and reductions add in one order everywhere.
const PORTABLE_ENV: [(&str, &str); 2] = [("ATEN_CPU_CAPABILITY", "default"), ("MKL_CBWR", "COMPATIBLE")];

/// Under `--numerics portable`, makes sure libtorch runs with [`PORTABLE_ENV`]: it reads those
/// variables once, when it first computes, so a process without them runs itself again with
/// them (the same executable and arguments; nothing has touched libtorch yet). Returns only
/// when the settings hold.
fn ensure_portable_numerics() -> Result<()> {
    if PORTABLE_ENV.iter().all(|(k, v)| std::env::var(k).is_ok_and(|found| found == *v)) {
        tracing::info!(settings = ?PORTABLE_ENV, "portable numerics: the same bytes on any x86-64 CPU");
        return Ok(());
    }
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().context("--numerics portable: cannot find this executable to run it again")?;
    let err = std::process::Command::new(&exe).args(std::env::args_os().skip(1)).envs(PORTABLE_ENV).exec();
    Err(anyhow::anyhow!("--numerics portable: cannot run {} again with {PORTABLE_ENV:?}: {err}", exe.display()))
}

/// Options of `reagent train grpo`.
#[derive(Debug, Clone, Args)]
pub struct GrpoArgs {
    /// The model directory to start from (config.json + model.safetensors), e.g. an SFT run's
    /// `model/`.
    #[arg(long, value_name = "DIR")]
    pub init: PathBuf,

    /// `math` difficulty of training and evaluation tasks (1–3).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=3))]
    pub difficulty: u32,

    /// Training time budget in minutes (evaluations excluded).
    #[arg(long, default_value_t = 10.0, value_name = "MIN")]
    pub minutes: f64,

    /// Held-out tasks of the greedy evaluation before and after.
    #[arg(long, default_value_t = 300, value_name = "N")]
    pub eval_tasks: usize,

    /// Seed of the task draw and the sampler.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// The feedback mode, run as the distributed roles run it with the reference judge:
    /// outcome (the baseline), critique (Reagent-C: a refined attempt after each critique),
    /// score (Reagent-R: outcome + 0.3 x the judge's score), unified (Reagent-U: both).
    #[arg(long, value_enum, default_value = "outcome")]
    pub feedback: FeedbackArg,

    /// Let the judge's critique say whether the task was solved (off: as the released
    /// Agent-RRM, which has no ground truth).
    #[arg(long)]
    pub reveal_outcome: bool,

    /// Where refined attempts start: `first_flaw` (the first attempt's messages before the one
    /// the critique flags are kept) or `start` (from the beginning, the whole first attempt in
    /// the prompt); as actor.refine_from.
    #[arg(long, value_name = "first_flaw|start", default_value = "first_flaw")]
    pub refine_from: episode::RefineFrom,

    /// Which initial attempts get a refined attempt (critique, unified): `all`, or `failed`
    /// (only those that did not solve the task); as actor.refine.
    #[arg(long, value_name = "all|failed", default_value = "all")]
    pub refine: episode::RefineWhich,

    /// Output directory (model/, rl_curve.jsonl, rl_report.json); default runs/grpo-dD-SEED.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Where the model trains and generates: the first CUDA device when libtorch sees one,
    /// else the CPU (`auto`); `cuda` fails at once where there is none.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: crate::cli::DeviceArg,
}

fn bar(seconds: f64, unit: &str) -> Result<Progress> {
    let template = format!("{{bar:30}} {{pos}}/{{len}} s of {unit} {{msg}} [{{elapsed}}]");
    Progress::new(seconds.ceil().max(1.0) as u64, unit, &format!("s of {unit}"), &template)
}

fn budget(minutes: f64) -> Result<Duration> {
    anyhow::ensure!(minutes.is_finite() && minutes > 0.0, "--minutes: expected a positive number, found {minutes}");
    Ok(Duration::from_secs_f64(minutes * 60.0))
}

/// `--init DIR` names a model directory (what `LoadedModel::from_dir` reads), or says what it
/// should be.
pub(crate) fn ensure_model_dir(dir: &Path) -> Result<()> {
    anyhow::ensure!(
        dir.join("config.json").is_file(),
        "--init {}: expected a model directory with config.json and model.safetensors (e.g. a `reagent sft` run's model/)",
        dir.display()
    );
    Ok(())
}

/// Trains, prints the summary; `Ok(false)` when nothing was solved at the end.
pub async fn sft(args: SftArgs) -> Result<bool> {
    if args.numerics == Numerics::Portable {
        // Before anything asks libtorch about devices: it reads the settings on first use.
        ensure_portable_numerics()?;
    }
    let size = match args.size {
        SftSize::Tiny => ExperimentSize::Tiny,
        SftSize::Micro => ExperimentSize::Micro,
    };
    let mut cfg = SftConfig::experiment(size);
    cfg.seed = args.seed;
    cfg.time_limit = Some(budget(args.minutes)?);
    cfg.eval_tasks = args.eval_tasks;
    cfg.refine_share = args.refine_share;
    cfg.rollout.refine_from = args.refine_from;
    cfg.rollout.system_prompt = match &args.system_prompt_file {
        Some(path) => episode::SystemPrompt::Replace(
            std::fs::read_to_string(path)
                .with_context(|| format!("--system-prompt-file: cannot read {}", path.display()))?,
        ),
        None => match args.system_prompt {
            SystemPromptArg::Omit => episode::SystemPrompt::Omit,
            SystemPromptArg::Full => episode::SystemPrompt::Full,
        },
    };
    cfg.family = args.family;
    cfg.episodes = args.episodes;
    cfg.checkpoint_every = args.checkpoint_every;
    cfg.resume = args.resume;
    cfg.device = args.device.resolve()?;
    anyhow::ensure!(
        args.numerics == Numerics::Fast || cfg.device == tch::Device::Cpu,
        "--numerics portable is for the CPU (GPU kernels differ by card): add --device cpu"
    );
    if let Some(lr) = args.lr {
        anyhow::ensure!(lr.is_finite() && lr > 0.0, "--lr: expected a positive learning rate, found {lr}");
        cfg.lr = lr;
    }
    if let Some(dir) = args.init {
        ensure_model_dir(&dir)?;
        cfg.init = Some(dir);
    }
    if !args.difficulty.is_empty() {
        for d in &args.difficulty {
            if !cfg.eval_difficulties.contains(d) {
                cfg.eval_difficulties.push(*d);
            }
        }
        cfg.eval_difficulties.sort_unstable();
        cfg.difficulties = args.difficulty;
    }
    if cfg.family == protocol::wire::TaskFamily::Dataset {
        use env_workers::families::dataset::{installed, Split};
        let catalog = installed().context(
            "--family dataset trains on the configuration's [dataset] files: pass --config FILE (`reagent --config FILE config show` says whether it loads)",
        )?;
        cfg.difficulties = catalog.difficulties(Split::Train);
        cfg.eval_difficulties = catalog.difficulties(Split::HeldOut);
    }
    let mut seen: Vec<u32> = cfg.difficulties.iter().chain(&cfg.eval_difficulties).copied().collect();
    seen.sort_unstable();
    seen.dedup();
    episode::fit_rollout(&mut cfg.rollout, cfg.family, &seen)?;
    if let Some(steps) = args.steps {
        cfg.steps = steps;
    }
    if let Some(every) = args.eval_every {
        cfg.eval_every = every;
    }
    cfg.validate()?;
    let out =
        args.out.unwrap_or_else(|| PathBuf::from(format!("runs/sft-{:?}-{}", args.size, args.seed).to_lowercase()));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let progress = bar(args.minutes * 60.0, "training")?;
    let dir = out.clone();
    let report = tokio::task::spawn_blocking(move || {
        let mut last_eval = String::from("-");
        let result = sft::run(&cfg, &dir, |p| {
            progress.set_position(p.train_seconds as u64);
            if !p.eval.is_empty() {
                let parts: Vec<String> =
                    p.eval.iter().map(|e| format!("d{} {:.0}%", e.difficulty, 100.0 * e.report.success_rate)).collect();
                last_eval = parts.join(" ");
            }
            progress.set_message(format!(
                "step {} loss {:.3} {:.0} tok/s greedy {last_eval}",
                p.step, p.loss, p.tokens_per_sec
            ));
        });
        progress.finish_and_clear();
        result
    })
    .await??
    .1;
    let evals: Vec<String> = report
        .final_eval
        .iter()
        .map(|e| format!("difficulty {} {}/{}", e.difficulty, e.report.successes, e.report.episodes))
        .collect();
    if report.steps == 0 {
        // `--steps 0` (or a run resumed at its end): no update here, so no loss to show.
        println!("sft: no update (evaluated as it is); greedy held-out success: {}", evals.join(", "));
    } else {
        println!(
            "sft: {} updates in {:.0} s ({:.0} tokens/s), loss {:.3} → {:.3}; greedy held-out success: {}",
            report.steps,
            report.train_seconds,
            report.tokens_per_sec,
            report.first_loss,
            report.final_loss,
            evals.join(", ")
        );
    }
    for r in &report.refinement {
        println!(
            "critique channel, difficulty {}: first attempt {:.1} %, refined after the critique {:.1} % \
             ({:+.1} points; fixed {:.1} % of failures, broke {:.1} % of successes; {} attempts each)",
            r.difficulty,
            100.0 * r.report.initial_success,
            100.0 * r.report.refined_success,
            100.0 * (r.report.refined_success - r.report.initial_success),
            100.0 * r.report.fixed_share,
            100.0 * r.report.broken_share,
            r.report.episodes
        );
    }
    println!("model, curve and report in {}", out.display());
    Ok(report.final_eval.iter().any(|e| e.report.successes > 0))
}

/// Trains with GRPO, prints the before/after success; `Ok(false)` when success did not rise.
pub async fn grpo(args: GrpoArgs) -> Result<bool> {
    let mut cfg = InprocConfig::experiment();
    cfg.difficulty = args.difficulty;
    cfg.seed = args.seed;
    cfg.eval_tasks = args.eval_tasks;
    cfg.time_limit = Some(budget(args.minutes)?);
    cfg.learner.feedback = args.feedback.into();
    cfg.reveal_outcome = args.reveal_outcome;
    cfg.rollout.refine_from = args.refine_from;
    cfg.rollout.refine = args.refine;
    cfg.validate()?;
    let device = args.device.resolve()?;
    ensure_model_dir(&args.init)?;
    let out = args.out.unwrap_or_else(|| PathBuf::from(format!("runs/grpo-d{}-{}", args.difficulty, args.seed)));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let progress = bar(args.minutes * 60.0, "training")?;
    progress.set_message("greedy evaluation before training…");
    let (init, dir) = (args.init.clone(), out.clone());
    let report = tokio::task::spawn_blocking(move || {
        let result = inproc::run(&cfg, &init, &dir, device, |s| {
            progress.set_position(s.elapsed_seconds as u64);
            let eval = s.eval.as_ref().map_or(String::new(), |e| format!(" greedy {:.1}%", 100.0 * e.success_rate));
            let refined = s.refined_success_rate.map_or(String::new(), |r| format!(", refined {:.0}%", 100.0 * r));
            progress.set_message(format!(
                "iteration {} sampled success {:.0}%{refined} v{} {:.0} tok/s{eval}",
                s.iteration,
                100.0 * s.success_rate,
                s.policy_version,
                s.tokens_per_sec
            ));
        });
        progress.finish_and_clear();
        result
    })
    .await??
    .1;
    println!(
        "grpo ({:?} feedback): {} iterations, {} updates in {:.0} s ({:.0} generated tokens/s); greedy success on \
         {} held-out difficulty-{} tasks {:.1}% → {:.1}% ({:+.1} points)",
        args.feedback,
        report.iterations,
        report.updates,
        report.train_seconds,
        report.tokens_per_sec,
        report.final_eval.episodes,
        args.difficulty,
        100.0 * report.initial_eval.success_rate,
        100.0 * report.final_eval.success_rate,
        report.success_gain_points
    );
    println!("model, curve and report in {}", out.display());
    Ok(report.success_gain_points > 0.0)
}
