//! `reagent bench cartpole`: our CartPole PPO measured the way RL-Zoo measures
//! Stable-Baselines3's, and (with `--against-sb3`) SB3 itself with the same hyper-parameters in
//! the same run, seed by seed, so that machine load falls on both alike.
//!
//! ```text
//!  for seed in --seeds (0,1,2):   ours (in process)  →  SB3 (scripts/sb3_cartpole.py, venv)
//!  per seed: step of the first greedy evaluation ≥ 475, training wall (evaluations excluded)
//!  report:   medians, ratios ours/SB3, the goals (median ≤ 15,000 steps; wall ≤ 0.5× SB3's)
//! ```
//!
//! Without `--against-sb3` the SB3 column holds the figures issue 11 quotes, labelled as
//! quoted: they were not measured by this run.

mod report;
mod sb3;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use learner::cartpole::{self, CartpoleConfig, TrainReport};

use cluster::train::{progress_message, CartpoleKnobs};
use report::{Reference, SeedRow};

/// Options of `reagent bench cartpole`.
#[derive(Debug, Clone, Args)]
pub struct CartpoleBenchArgs {
    /// Seeds, comma-separated; each is trained once by each side.
    #[arg(long, value_delimiter = ',', default_value = "0,1,2", value_name = "S,…")]
    pub seeds: Vec<u64>,

    /// Also run Stable-Baselines3 2.9.2 on the same seeds, in the venv that
    /// scripts/sb3_venv.sh makes, and print the ratios.
    #[arg(long)]
    pub against_sb3: bool,

    /// The Python of the SB3 venv (default target/sb3-venv/bin/python, or
    /// $REAGENT_SB3_VENV/bin/python).
    #[arg(long, value_name = "PATH")]
    pub sb3_python: Option<PathBuf>,

    /// Torch intra-op threads, on both sides.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// The hyper-parameters, the same for both sides (last, so that their heading holds only
    /// them).
    #[command(flatten)]
    pub knobs: CartpoleKnobs,
}

/// Runs the bench and prints its report on stdout.
pub async fn bench(args: CartpoleBenchArgs) -> Result<bool> {
    anyhow::ensure!(!args.seeds.is_empty(), "--seeds: give at least one seed");
    let configs = args.seeds.iter().map(|&s| args.knobs.resolve(s)).collect::<Result<Vec<_>>>()?;
    let python = match args.against_sb3 {
        true => Some(sb3::python(args.sb3_python.as_deref()).await?),
        false => None,
    };
    let threads = usize::from(args.threads);
    let load_before = report::load_average();
    let mut rows = Vec::new();
    for cfg in &configs {
        let ours = ours(cfg.clone(), threads).await?;
        let sb3 = match &python {
            Some(python) => {
                eprintln!("seed {}: Stable-Baselines3 …", cfg.seed);
                Some(sb3::run(python, cfg, threads).await?)
            }
            None => None,
        };
        rows.push(SeedRow::new(cfg.seed, &ours, sb3));
    }
    let reference = if python.is_some() { Reference::Measured } else { Reference::Quoted };
    let summary = report::Summary::new(
        crate::command_line(),
        configs.first().cloned().context("no configuration")?,
        rows,
        reference,
        [load_before, report::load_average()],
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", summary.table());
    }
    Ok(true)
}

/// Trains one seed in process with a progress bar.
async fn ours(cfg: CartpoleConfig, threads: usize) -> Result<TrainReport> {
    let progress = cluster::train::progress_bar(&cfg)?;
    tokio::task::spawn_blocking(move || {
        tch::set_num_threads(threads as i32);
        let report = cartpole::train(&cfg, |u| {
            progress.set_position(u.iteration);
            progress.set_message(format!("seed {}: {}", cfg.seed, progress_message(u)));
        });
        progress.finish_and_clear();
        Ok(report?)
    })
    .await?
}
