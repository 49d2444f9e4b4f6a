//! `reagent train cartpole`: PPO on CartPole from the command line, the yardstick for PPO
//! correctness (`learner::cartpole`). Shows a progress bar with the running average return and
//! writes the learning curve as JSON lines into the output directory.
//!
//! ```text
//!  reagent train cartpole --preset yardstick --seed 1   →  runs/cartpole-yardstick-1/curve.jsonl
//! ```

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use learner::cartpole::{self, CartpoleConfig};

use crate::cli::{CartpoleArgs, CartpolePreset};

/// Trains, prints a summary, and writes the curve; `Ok(false)` when the run did not reach 475.
pub async fn cartpole(args: CartpoleArgs) -> Result<bool> {
    let mut cfg = match args.preset {
        CartpolePreset::Yardstick => CartpoleConfig::yardstick(),
        CartpolePreset::Cleanrl => CartpoleConfig::cleanrl(),
        CartpolePreset::Default => CartpoleConfig::default(),
    };
    cfg.seed = args.seed;
    if let Some(steps) = args.total_steps {
        cfg.total_steps = steps;
    }
    cfg.validate()?;
    let out: PathBuf = args
        .out
        .unwrap_or_else(|| PathBuf::from(format!("runs/cartpole-{:?}-{}", args.preset, args.seed).to_lowercase()));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let curve_path = out.join("curve.jsonl");
    let mut curve = std::io::BufWriter::new(
        std::fs::File::create(&curve_path).with_context(|| format!("creating {}", curve_path.display()))?,
    );
    let progress = ProgressBar::new(cfg.iterations());
    progress.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} iterations {msg} [{elapsed}]")?);
    let report = tokio::task::spawn_blocking(move || {
        let report = cartpole::train(&cfg, |u| {
            progress.set_position(u.iteration);
            let avg = u.avg_return_100.map_or("-".into(), |a| format!("{a:.1}"));
            progress.set_message(format!("step {} avg return {avg}", u.global_step));
            let line = serde_json::json!({
                "iteration": u.iteration, "global_step": u.global_step, "lr": u.lr,
                "avg_return_100": u.avg_return_100, "episodes": u.episodes,
                "explained_variance": u.explained_variance, "grad_norm": u.grad_norm,
                "elapsed_s": u.elapsed.as_secs_f64(),
            });
            let _ = writeln!(curve, "{line}");
        });
        progress.finish_and_clear();
        let _ = curve.flush();
        report
    })
    .await??;
    println!(
        "cartpole: {} steps in {:.1} s; average return of the last 100 episodes {:.1}; reached 475 at {}",
        report.steps,
        report.wall.as_secs_f64(),
        report.final_avg_return_100,
        report.first_solved_step.map_or("never".into(), |s| format!("step {s}")),
    );
    println!("learning curve: {}", curve_path.display());
    Ok(report.final_avg_return_100 >= cartpole::SOLVED_RETURN)
}
