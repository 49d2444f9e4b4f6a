//! `reagent bench trl`: our single-turn GRPO (learner::inproc::single_turn) beside TRL 1.16's
//! GRPOTrainer on the same random tiny Qwen2, the same prompts, reward and hyper-parameters, one
//! after the other in the same run, so that machine load falls on both alike.
//!
//! ```text
//!  write the shared model directory once (config.json + model.safetensors + tokenizer files)
//!  for size in --completions-per-step (8, 64):   for repeat in 1..=R:
//!     ours: load the directory ─ warm-up step(s) ─ --steps timed steps      (one torch thread)
//!     TRL:  scripts/trl_grpo.py in target/trl-venv, same directory and prompts, same steps
//!     floor: the step's matrix products and attention kernels alone, at the same shapes
//!  report: median end-to-end completion tokens/s of each side, ratio ours/TRL (goal ≥ 3×),
//!          tokens/s inside generation, and the kernel floor: the highest ratio any
//!          implementation over this libtorch could reach here ([`floor`])
//! ```

mod floor;
mod python;
mod report;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use clap::Args;
use learner::inproc::single_turn::{
    draw_tasks, parity_cases, reward, write_shared_model, ReverseTask, SingleTurnConfig, SingleTurnTrainer,
};
use policy::{ByteTokenizer, LoadedModel};
use tch::Device;

use report::{Row, RunFigures, Summary};

/// Options of `reagent bench trl`.
#[derive(Debug, Clone, Args)]
pub struct TrlBenchArgs {
    /// Completions per optimizer step, comma-separated; each a multiple of 8 (prompts × 8
    /// generations).
    #[arg(long, value_delimiter = ',', default_value = "8,64", value_name = "N,…")]
    pub completions_per_step: Vec<usize>,

    /// Timed steps per run, after the warm-up.
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub steps: u64,

    /// Untimed steps at the start of every run.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=100))]
    pub warmup: u64,

    /// Runs of each side per batch size; the report takes medians.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeats: u16,

    /// Torch intra-op threads, on both sides.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,

    /// Seeds the model's weights, the prompts and both samplers.
    #[arg(long, default_value_t = 1, value_name = "S")]
    pub seed: u64,

    /// The Python of the TRL venv (default target/trl-venv/bin/python, or
    /// $REAGENT_TRL_VENV/bin/python; scripts/trl_venv.sh makes it).
    #[arg(long, value_name = "PATH")]
    pub trl_python: Option<PathBuf>,

    /// Keep the shared model directory here (default: a temporary directory, removed after).
    #[arg(long, value_name = "DIR")]
    pub model_dir: Option<PathBuf>,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs the bench and prints its report on stdout; `Ok(false)` when the goal is not met.
pub async fn bench(args: TrlBenchArgs) -> Result<bool> {
    ensure!(!args.completions_per_step.is_empty(), "--completions-per-step: give at least one size");
    let group = SingleTurnConfig::like_trl().group_size;
    for &n in &args.completions_per_step {
        ensure!(n > 0 && n % group == 0, "--completions-per-step: {n} is not a positive multiple of {group}");
    }
    let python = python::python(args.trl_python.as_deref()).await?;
    let temp = args
        .model_dir
        .is_none()
        .then(|| std::env::temp_dir().join(format!("reagent-bench-trl-{}", std::process::id())));
    let dir = args.model_dir.clone().or_else(|| temp.clone()).context("no model directory")?;
    let result = measure(&args, &python, &dir).await;
    if let Some(temp) = temp {
        let _ = std::fs::remove_dir_all(temp);
    }
    let summary = result?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", summary.table());
    }
    Ok(summary.goal_met())
}

async fn measure(args: &TrlBenchArgs, python: &Path, dir: &Path) -> Result<Summary> {
    eprintln!("bench trl: writing the shared model directory {}", dir.display());
    let (d, seed) = (dir.to_path_buf(), args.seed);
    tokio::task::spawn_blocking(move || write_shared_model(&d, seed)).await??;
    let load_before = super::report::load_average();
    let mut rows = Vec::new();
    let mut versions = serde_json::Value::Null;
    let threads = usize::from(args.threads);
    for &size in &args.completions_per_step {
        let prompts_per_step = size / SingleTurnConfig::like_trl().group_size;
        let tasks = draw_tasks(args.seed, (args.warmup + args.steps) as usize * prompts_per_step);
        let (mut ours, mut trl) = (Vec::new(), Vec::new());
        for rep in 1..=args.repeats {
            let label = format!("{size} completions/step, run {rep}/{}", args.repeats);
            eprintln!("bench trl: {label}: ours …");
            let run = ours_run(dir, &tasks, prompts_per_step, args, threads).await?;
            eprintln!("bench trl: {label}: ours {:.0} tokens/s; TRL …", run.tokens_per_sec());
            ours.push(run);
            let params = trl_params(dir, &tasks, prompts_per_step, args);
            let deadline = Duration::from_secs(120) + Duration::from_secs(size as u64 * (args.warmup + args.steps));
            let out = python::run(python, &params, threads, deadline).await?;
            versions = out.versions.clone();
            let mut figures = RunFigures::default();
            for s in out.steps.iter().skip(args.warmup as usize) {
                figures.add(s.completion_tokens, s.seconds, s.generate_seconds, s.update_seconds());
            }
            eprintln!("bench trl: {label}: TRL {:.0} tokens/s", figures.tokens_per_sec());
            trl.push(figures);
        }
        let floor = measure_floor(&tasks, size, threads).await?;
        eprintln!("bench trl: {size} completions/step: kernel floor {:.0} tokens/s", floor.tokens_per_sec());
        rows.push(Row::new(size, ours, trl, floor));
    }
    Ok(Summary {
        command: crate::command_line(),
        steps: args.steps,
        warmup_steps: args.warmup,
        repeats: args.repeats,
        threads,
        versions,
        load_average: [load_before, super::report::load_average()],
        rows,
    })
}

/// The kernel floor of a step of `size` completions ([`floor`]), on a blocking thread with the
/// bench's torch threads: the longest prompt of the run, every row to the token budget.
async fn measure_floor(tasks: &[ReverseTask], size: usize, threads: usize) -> Result<floor::Floor> {
    let prompt = tasks.iter().map(|t| ByteTokenizer::encode_str(&t.prompt()).len()).max().unwrap_or(1);
    let shape = floor::StepShape {
        rows: size as i64,
        prompt: prompt as i64,
        new_tokens: SingleTurnConfig::like_trl().max_new_tokens as i64,
    };
    let floor = tokio::task::spawn_blocking(move || {
        tch::set_num_threads(threads as i32);
        floor::measure(&learner::inproc::single_turn::shared_model_config(), shape, 5)
    })
    .await?;
    Ok(floor)
}

/// One run of ours: the shared model loaded afresh, the warm-up, then the timed steps.
async fn ours_run(
    dir: &Path,
    tasks: &[ReverseTask],
    prompts_per_step: usize,
    args: &TrlBenchArgs,
    threads: usize,
) -> Result<RunFigures> {
    let (dir, tasks, warmup, seed) = (dir.to_path_buf(), tasks.to_vec(), args.warmup as usize, args.seed);
    tokio::task::spawn_blocking(move || {
        tch::set_num_threads(threads as i32);
        let model = LoadedModel::from_dir(&dir, Device::Cpu, false)?;
        let mut trainer = SingleTurnTrainer::new(model, SingleTurnConfig { seed, ..SingleTurnConfig::like_trl() })?;
        let mut figures = RunFigures::default();
        let mut reward_sum = 0.0;
        for (i, step_tasks) in tasks.chunks(prompts_per_step).enumerate() {
            let s = trainer.step(step_tasks)?;
            if i >= warmup {
                figures.add(s.completion_tokens as u64, s.seconds, s.generation_seconds, s.update_seconds);
                reward_sum += s.mean_reward;
            }
        }
        let timed = tasks.len() / prompts_per_step - warmup;
        figures.mean_reward = Some(reward_sum / timed.max(1) as f64);
        Ok(figures)
    })
    .await?
}

/// scripts/trl_grpo.py's parameters: the same directory, prompts (in step order), settings, and
/// our reward of the parity cases.
fn trl_params(dir: &Path, tasks: &[ReverseTask], prompts_per_step: usize, args: &TrlBenchArgs) -> serde_json::Value {
    let cfg = SingleTurnConfig::like_trl();
    let cases: Vec<(String, String, f64)> = parity_cases()
        .into_iter()
        .map(|(c, t)| {
            let r = reward(&c, &t);
            (c, t, r)
        })
        .collect();
    serde_json::json!({
        "model_dir": dir,
        "prompts": tasks.iter().map(ReverseTask::prompt).collect::<Vec<_>>(),
        "targets": tasks.iter().map(ReverseTask::target).collect::<Vec<_>>(),
        "prompts_per_step": prompts_per_step,
        "num_generations": cfg.group_size,
        "warmup_steps": args.warmup,
        "steps": args.steps,
        "max_new_tokens": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "lr": cfg.learner.lr,
        "seed": args.seed,
        "threads": args.threads,
        "reward_cases": cases,
    })
}
