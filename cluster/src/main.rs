//! `reagent`, the one binary of Reagent: parses the command line, loads the configuration, sets
//! up logging and hands over to the command's module. Nothing else happens here.
//!
//! ```text
//!  argv ─► cli::Cli ─► settings::load ─► telemetry::init ─► doctor | config show | bench | env-worker | train | sft
//! ```

mod bench;
mod cli;
mod dlq;
mod doctor;
mod env_worker;
mod errors;
mod experiment;
mod export;
mod launch;
mod plot;
mod progress;
mod redis_acl;
mod roles;
mod serve;
mod settings;
mod sft;
mod status;
mod train;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use tracing::Instrument;

use cli::{BenchCommand, Cli, Command, ConfigCommand, ExperimentCommand, TrainCommand};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let loaded = settings::load(cli.config.as_deref());
    let role = match &cli.command {
        Command::Doctor => "doctor",
        Command::Config { .. } => "config",
        Command::Bench { .. } => "bench",
        Command::Experiment { .. } => "experiment",
        Command::EnvWorker(_) => "env-worker",
        Command::Train { .. } => "train",
        Command::Sft(_) => "sft",
        Command::Run(_) => "run",
        Command::Learner(_) => "learner",
        Command::Actor => "actor",
        Command::Rrm => "rrm",
        Command::Status => "status",
        Command::Dlq { .. } => "dlq",
        Command::Export(_) => "export",
        Command::Serve(_) => "serve",
    };
    let log = settings::logging(&cli, loaded.config.as_ref().ok());
    if let Err(e) = protocol::telemetry::init(log.format, &log.filter, role, &log.run_id) {
        // Doctor reports a bad filter among its checks; every other command stops here.
        if !matches!(cli.command, Command::Doctor) {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
        let _ = protocol::telemetry::init(log.format, "info", role, &log.run_id);
    }
    let span = protocol::telemetry::role_span(role, &log.run_id);
    match dispatch(cli.command, loaded).instrument(span).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {}", errors::describe(&e));
            ExitCode::FAILURE
        }
    }
}

/// Runs the command; `Ok(false)` means it ran and found a failure (doctor's failed checks).
async fn dispatch(command: Command, loaded: settings::Loaded) -> Result<bool> {
    match command {
        Command::Doctor => doctor::run(&loaded.config, &loaded.source).await,
        Command::Config { command: ConfigCommand::Show } => {
            print!("{}", settings::show(&loaded.config?, &loaded.source));
            Ok(true)
        }
        Command::Config { command: ConfigCommand::RedisAcl { out } } => {
            redis_acl::write(&loaded.config?, &out)?;
            Ok(true)
        }
        Command::Bench { command: BenchCommand::Queue(args) } => {
            bench::queue(&loaded.config?, args).await?;
            Ok(true)
        }
        Command::Bench { command: BenchCommand::Learner(args) } => {
            bench::learner_steps(args).await?;
            Ok(true)
        }
        Command::Bench { command: BenchCommand::LearnerMemory(args) } => {
            bench::learner_memory(args).await?;
            Ok(true)
        }
        Command::Bench { command: BenchCommand::Pipeline(args) } => {
            bench::pipeline_efficiency(&loaded.config?, args).await?;
            Ok(true)
        }
        Command::Bench { command: BenchCommand::Scale(args) } => {
            bench::scale_pipeline(&loaded.config?, args).await?;
            Ok(true)
        }
        Command::Bench { command: BenchCommand::Weights(args) } => {
            bench::weight_sync(&loaded.config?, args).await?;
            Ok(true)
        }
        Command::Bench { command: BenchCommand::Fanout(args) } => {
            bench::fanout(&loaded.config?, args).await?;
            Ok(true)
        }
        Command::Bench { command: BenchCommand::FanoutFollower(args) } => {
            bench::fanout_follower(&loaded.config?, args).await?;
            Ok(true)
        }
        Command::Bench { command: BenchCommand::WeightsFollower(args) } => {
            bench::weight_sync_follower(&loaded.config?, args).await?;
            Ok(true)
        }
        Command::Bench { command: BenchCommand::Cartpole(args) } => bench::cartpole(*args).await,
        Command::Bench { command: BenchCommand::Trl(args) } => bench::trl(*args).await,
        Command::Bench { command: BenchCommand::Generate(args) } => bench::generate(*args).await,
        Command::Bench { command: BenchCommand::Env(args) } => {
            bench::env_steps(args).await?;
            Ok(true)
        }
        Command::Train { command: TrainCommand::Cartpole(args) } => train::cartpole(*args).await,
        Command::Train { command: TrainCommand::Grpo(args) } => sft::grpo(args).await,
        Command::Sft(args) => sft::sft(args).await,
        Command::Export(args) => export::run(&args).map(|()| true),
        Command::Serve(args) => serve::run(loaded.config.as_ref().ok(), args).await.map(|()| true),
        Command::Experiment { command: ExperimentCommand::Modes(args) } => experiment::modes(args).await,
        Command::Run(args) => launch::run(&loaded.config?, args).await,
        Command::Learner(args) => roles::learner(&loaded.config?, args).await.map(|()| true),
        Command::Actor => roles::actor(&loaded.config?).await.map(|()| true),
        Command::Rrm => roles::rrm(&loaded.config?).await.map(|()| true),
        Command::Status => status::run(&loaded.config?).await.map(|_| true),
        Command::Dlq { command } => dlq::run(&loaded.config?, command).await.map(|_| true),
        Command::EnvWorker(args) => roles::env_worker(&loaded.config?, args).await.map(|()| true),
    }
}
