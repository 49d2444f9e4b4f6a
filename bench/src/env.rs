//! `reagent bench env`: environment steps per second for each family, in-process (one core,
//! the step function alone) and through an env-worker over loopback TCP (batched `step_batch`
//! calls, server and client in this process), with the ratio between the two.
//!
//! ```text
//!  in-process:  make(spec) [untimed] → step(reference message) × n [timed] → next task …
//!  service:     open S sessions [untimed] → step_batch(all live sessions' next message) [timed]
//!               → finished sessions closed and replaced [untimed] …
//! ```
//!
//! Episodes replay each task's reference solution, so every step does real work (tool calls,
//! page renders, BM25 searches, simulated-user replies) rather than hitting the error path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cluster::progress::Progress;
use env_workers::control::{CartPole, ControlEnvironment};
use env_workers::service::{serve, EnvClient, EnvWorkerConfig, ServeOptions, SessionTable, TableConfig};
use env_workers::{registry, Environment, Limits};
use protocol::rpc::{EnvAction, SessionId};
use protocol::wire::{TaskFamily, TaskSpec};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use clap::Args;

/// Options of `reagent bench env`.
#[derive(Debug, Clone, Args)]
pub struct EnvBenchArgs {
    /// Seconds of timed stepping per measurement.
    #[arg(long, default_value_t = 1.0, value_name = "S")]
    pub seconds: f64,

    /// Sessions stepped per `step_batch` call on the service path.
    #[arg(long, default_value_t = 256, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub sessions: u64,

    /// Task difficulty (1..=3).
    #[arg(long, default_value_t = 2, value_name = "D", value_parser = clap::value_parser!(u32).range(1..=3))]
    pub difficulty: u32,

    /// How many times each measurement is repeated; the median is reported.
    #[arg(long, default_value_t = 3, value_name = "R", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeats: u16,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One family's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EnvRow {
    /// The family.
    pub family: String,
    /// Median steps/s of the step function on one core.
    pub in_process: f64,
    /// Median steps/s through the env-worker (batched).
    pub service: f64,
}

fn spec(family: TaskFamily, seed: u64, difficulty: u32) -> TaskSpec {
    TaskSpec { family, seed, difficulty }
}

fn action(family: TaskFamily, message: &str, step: usize) -> EnvAction {
    if family == TaskFamily::Cartpole {
        EnvAction::Discrete((step % 2) as u32)
    } else {
        EnvAction::Text(message.to_string())
    }
}

/// The messages of one episode: the reference for text tasks, alternating pushes for CartPole.
fn script(family: TaskFamily, seed: u64, difficulty: u32) -> Result<Vec<String>> {
    if family == TaskFamily::Cartpole {
        return Ok(vec![String::new(); 20]);
    }
    Ok(registry::make(spec(family, seed, difficulty), Limits::default())?.reference())
}

/// Steps/s of the step function alone, measured for about `budget`.
pub fn in_process(family: TaskFamily, difficulty: u32, budget: Duration) -> Result<f64> {
    let (mut timed, mut steps, mut seed) = (Duration::ZERO, 0u64, 0u64);
    while timed < budget {
        seed += 1;
        if family == TaskFamily::Cartpole {
            let mut env = CartPole::default();
            env.reset(seed);
            let start = Instant::now();
            for i in 0..200u32 {
                steps += 1;
                let o = env.step(i % 2)?;
                if o.terminated || o.truncated {
                    break;
                }
            }
            timed += start.elapsed();
            continue;
        }
        let mut env = registry::make(spec(family, seed, difficulty), Limits::default())?;
        let messages = env.reference();
        let start = Instant::now();
        for m in &messages {
            std::hint::black_box(env.step(m));
        }
        timed += start.elapsed();
        steps += messages.len() as u64;
    }
    Ok(steps as f64 / timed.as_secs_f64())
}

/// Steps/s through an env-worker on loopback with `sessions` stepped per `step_batch` call.
pub async fn service(family: TaskFamily, difficulty: u32, sessions: usize, budget: Duration) -> Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let table = Arc::new(SessionTable::new(TableConfig {
        max_sessions: sessions * 2,
        max_per_owner: sessions * 2,
        ..TableConfig::default()
    }));
    let stop = CancellationToken::new();
    // One client steps every session in one call: its caps are the benchmark's size.
    let config = EnvWorkerConfig { max_batch: sessions, max_request_bytes: 16 << 20, ..EnvWorkerConfig::default() };
    let options = ServeOptions { config, token: None, grace: Duration::from_secs(1) };
    let server = tokio::spawn(serve(listener, table, options, stop.clone()));
    let client = EnvClient::connect(addr, Duration::from_secs(10), None).await?;

    let mut seed = 0u64;
    let mut live: Vec<(SessionId, Vec<String>, usize)> = Vec::with_capacity(sessions);
    let (mut timed, mut steps) = (Duration::ZERO, 0u64);
    while timed < budget {
        while live.len() < sessions {
            seed += 1;
            let opened = client.open(spec(family, seed, difficulty)).await?;
            live.push((opened.session, script(family, seed, difficulty)?, 0));
        }
        let batch: Vec<(SessionId, EnvAction)> =
            live.iter().map(|(s, msgs, i)| (*s, action(family, &msgs[*i], *i))).collect();
        let start = Instant::now();
        let replies = client.step_batch(batch).await?;
        timed += start.elapsed();
        steps += replies.len() as u64;
        let mut still = Vec::with_capacity(live.len());
        for ((session, msgs, i), reply) in live.into_iter().zip(replies) {
            let over = match reply.context("a benchmark step failed")? {
                protocol::rpc::StepReply::Text(o) => o.end.is_some(),
                protocol::rpc::StepReply::Control(o) => o.terminated || o.truncated,
            };
            if over || i + 1 >= msgs.len() {
                client.close(session).await?;
            } else {
                still.push((session, msgs, i + 1));
            }
        }
        live = still;
    }
    stop.cancel();
    for (s, _, _) in live {
        client.close(s).await?;
    }
    server.await??;
    Ok(steps as f64 / timed.as_secs_f64())
}

/// Median of a non-empty list.
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Measures every family `repeats` times and returns the medians.
pub async fn run_all(
    difficulty: u32,
    sessions: usize,
    budget: Duration,
    repeats: usize,
    mut tick: impl FnMut(&str),
) -> Result<Vec<EnvRow>> {
    let mut rows = Vec::new();
    for family in TaskFamily::ALL {
        let (mut local, mut remote) = (Vec::new(), Vec::new());
        for _ in 0..repeats.max(1) {
            tick(family.name());
            local.push(tokio::task::spawn_blocking(move || in_process(family, difficulty, budget)).await??);
            remote.push(service(family, difficulty, sessions, budget).await?);
        }
        rows.push(EnvRow { family: family.name().into(), in_process: median(local), service: median(remote) });
    }
    Ok(rows)
}

/// Runs `reagent bench env` and prints the table (or JSON) on stdout.
pub async fn bench(args: EnvBenchArgs) -> Result<()> {
    let budget = Duration::from_secs_f64(args.seconds.max(0.05));
    let total = TaskFamily::ALL.len() as u64 * u64::from(args.repeats);
    let progress = Progress::new(total, "bench env", "runs", "{bar:30} {pos}/{len} {msg}")?;
    let rows = run_all(args.difficulty, args.sessions as usize, budget, usize::from(args.repeats), |family| {
        progress.set_message(family.to_string());
        progress.inc(1);
    })
    .await?;
    progress.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    println!(
        "machine: {} cores; difficulty {}; {} s per measurement; median of {}; service: {} sessions per step_batch, server and client in this process",
        std::thread::available_parallelism().map_or(1, usize::from),
        args.difficulty,
        args.seconds,
        args.repeats,
        args.sessions
    );
    println!();
    println!("| family | in-process steps/s (1 core) | env-worker steps/s (loopback, batched) | ratio |");
    println!("|---|---:|---:|---:|");
    for r in &rows {
        println!("| {} | {:.0} | {:.0} | {:.2} |", r.family, r.in_process, r.service, r.service / r.in_process);
    }
    Ok(())
}
