//! `reagent bench pipeline`: the distributed pipeline's efficiency — agent tokens per second of
//! the roles as separate processes (learner, an RRM worker, N actors, a private redis-server;
//! the same measurement as `bench scale`) beside the in-process trainer (generation and GRPO in
//! one process, no Redis) on the same model, task mix, group size and rollout settings, one
//! after the other on the same machine. Both run the `--feedback` mode (default `outcome`) with
//! the reference judge: the in-process trainer synchronously, the pipeline in its RRM worker.
//! Below the ratio, where a group's time goes in the pipeline ([`super::breakdown`]).
//!
//! ```text
//!  in-process: Trainer::iteration until --seconds   → generated agent tokens / time
//!  pipeline:   scale::measure(N actors, --seconds) → agent tokens on the scored stream / window
//!  ratio = pipeline / in-process
//!  breakdown:  actors' phase times, the window's trajectory timings, the learner's ages
//! ```

use std::time::Duration;

use anyhow::Result;
use learner::inproc::{self, InprocConfig};
use protocol::config::ReagentConfig;
use protocol::wire::FeedbackMode;

use super::breakdown::{self, Phases};
use super::scale::measure;
use crate::scale::ScaleBenchArgs;
use clap::Args;
use cluster::cli::FeedbackArg;

/// Options of `reagent bench pipeline`.
#[derive(Debug, Clone, Args)]
pub struct PipelineBenchArgs {
    /// Actor processes of the distributed run (the in-process trainer plays as many groups at
    /// once as they have slots).
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub actors: u16,

    /// Seconds each side is timed.
    #[arg(long, default_value_t = 60.0, value_name = "S")]
    pub seconds: f64,

    /// Seconds of the distributed run after every actor's first trajectory, before timing.
    #[arg(long, default_value_t = 5.0, value_name = "S")]
    pub warmup: f64,

    /// The built-in model (micro, tiny, small) or a model directory.
    #[arg(long, default_value = "micro", value_name = "MODEL")]
    pub model: String,

    /// The feedback mode both sides run (the pipeline's RRM worker and the in-process trainer
    /// with the reference judge): outcome, critique, score or unified.
    #[arg(long, value_enum, default_value = "outcome")]
    pub feedback: FeedbackArg,
}

/// In-process agent tokens per second on the job's actor settings and feedback mode, with
/// `model`.
async fn in_process(cfg: &ReagentConfig, model: &str, tasks: usize, seconds: f64) -> Result<f64> {
    let actor = actors::ActorConfig::from_config(cfg)?;
    let (family, difficulty) = actor.task_mix()[0];
    let mut inproc = InprocConfig {
        family,
        difficulty,
        tasks_per_iteration: tasks,
        group_size: actor.group_size,
        rollout: actor.rollout_config(),
        iterations: u64::MAX,
        time_limit: Some(Duration::from_secs_f64(seconds)),
        eval_every: 0,
        eval_tasks: 1,
        reveal_outcome: rrm_worker::RrmConfig::from_config(cfg)?.reveal_outcome,
        ..InprocConfig::default()
    };
    inproc.learner.feedback = cfg.run.feedback;
    let model = model.to_string();
    let report = tokio::task::spawn_blocking(move || -> Result<_> {
        let m = learner::role::load_model(&model, 0)?;
        Ok(inproc::train(m, &inproc, |_| {})?.1)
    })
    .await??;
    Ok(report.tokens_per_sec)
}

/// Runs the comparison and prints it.
pub async fn bench(config: &ReagentConfig, args: PipelineBenchArgs) -> Result<()> {
    let mut cfg = config.clone();
    cfg.run.feedback = FeedbackMode::from(args.feedback);
    cfg.rrm.insert("judge".into(), toml::Value::String("reference".into()));
    cfg.actor.insert("model".into(), toml::Value::String(args.model.clone()));
    let slots = actors::ActorConfig::from_config(&cfg)?.slots;
    println!(
        "pipeline efficiency: model {}, {} actor process(es) × {slots} slot(s), {} s windows, feedback {}",
        args.model, args.actors, args.seconds, cfg.run.feedback
    );
    let reference = in_process(&cfg, &args.model, args.actors as usize * slots, args.seconds).await?;
    println!("in-process trainer: {reference:.0} agent tokens/s");
    let dir = std::env::temp_dir().join(format!("reagent-bench-pipeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let scale = ScaleBenchArgs {
        actors: vec![args.actors],
        seconds: args.seconds,
        warmup: args.warmup,
        repeats: 1,
        model: args.model.clone(),
        json: false,
    };
    let point = measure(&cfg, &scale, args.actors, &dir, "pipeline").await;
    let phases = Phases::of_logs(&dir.join("logs"));
    let learner = breakdown::learner_side(&dir.join("pipeline").join("metrics.jsonl"));
    let _ = std::fs::remove_dir_all(&dir);
    let point = point?;
    println!(
        "distributed pipeline: {:.0} agent tokens/s scored ({:.1} trajectories/s, machine CPU {:.0}%, roles {:.2} cores)",
        point.agent_tokens_per_s, point.scored_per_s, point.machine_cpu_pct, point.roles_cpu_cores
    );
    // What the learner trained: scored tokens in the proportion of scored trajectories it
    // trained rather than dropped as stale (or had not reached by the window's end).
    let trained_share =
        if point.scored_per_s > 0.0 { (point.trained_per_s / point.scored_per_s).min(1.0) } else { 0.0 };
    let trained_tokens = point.agent_tokens_per_s * trained_share;
    println!(
        "of which trained: {:.0} agent tokens/s ({:.1} trajectories/s, {:.0}% of those scored)",
        trained_tokens,
        point.trained_per_s,
        100.0 * trained_share
    );
    let reference = reference.max(1e-9);
    println!(
        "ratio (pipeline / in-process): {:.2} scored, {:.2} trained",
        point.agent_tokens_per_s / reference,
        trained_tokens / reference
    );
    breakdown::print(&phases, &point.stream, &learner);
    Ok(())
}
