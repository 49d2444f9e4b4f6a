//! `reagent run`: the whole job on one machine. A private `redis-server` when no Redis URL is
//! configured, the supervised cold start in this process, then the learner, env workers, RRM
//! workers and actors as separate OS processes for `launch.rl_updates` learner updates (or
//! `launch.rl_minutes`, whichever comes first), with a progress bar fed
//! by the learner's `metrics.jsonl`; at the end the roles leave gracefully and the newest
//! published weights are evaluated against the SFT start on the same held-out tasks (greedy,
//! and sampled at the actors' temperature: the rise that decides the exit status).
//!
//! ```text
//!  runs/<run id>/
//!    config.toml      the resolved configuration every role process reads (0600, no password)
//!    redis/           the private server's data (append-only file), redis.conf, users.acl and
//!                     admin.password (0600; for `reagent status` while the run is up)
//!    sft/             model/, sft_curve.jsonl, sft_report.json
//!    checkpoints/     the learner's (resume with the same command)
//!    metrics.jsonl    one line per learner update
//!    tb/              the same figures as TensorBoard event files (`tensorboard --logdir runs/`)
//!    curve.png/.svg   success rate, mean score and reward per update
//!    summary.json     held-out success (greedy, sampled) before and after RL, and the run's totals
//!    logs/<role>.log  each role process's output
//! ```

pub(crate) mod config;
pub mod procs;
mod progress;
mod report;
mod secrets;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use learner::sft::{self, SftConfig};
use protocol::config::ReagentConfig;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::weights::WeightStore;
use protocol::wire::RunId;

use crate::roles::run_dir;
use clap::Args;
pub use config::LaunchConfig;
use procs::RoleProcess;
use secrets::Credentials;

/// Options of `reagent run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Skip the supervised cold start and start RL from learner.model as it is.
    #[arg(long)]
    pub no_sft: bool,
}

fn set(table: &mut toml::Table, key: &str, value: impl Into<toml::Value>) {
    table.insert(key.to_string(), value.into());
}

/// The supervised cold start, into `<run dir>/sft`; returns the model directory.
async fn cold_start(launch: &LaunchConfig, dir: &Path, eval: &report::EvalPlan) -> Result<PathBuf> {
    let out = dir.join("sft");
    let model_dir = out.join("model");
    if model_dir.join("config.json").is_file() {
        println!("cold start: reusing {}", model_dir.display());
        return Ok(model_dir);
    }
    let mut cfg = SftConfig::experiment(sft::ExperimentSize::Micro);
    match launch.sft_init() {
        Some(dir) => {
            // The eval and rollout settings below apply; the model comes from the directory.
            cfg.model = policy::ModelConfig::from_file(&dir.join("config.json"))?;
            cfg.init = Some(dir);
        }
        None => cfg.model = policy::ModelConfig::builtin(&launch.sft_model)?,
    }
    cfg.lr = launch.sft_lr;
    cfg.rollout = eval.rollout.clone();
    cfg.family = eval.family;
    cfg.difficulties = vec![eval.difficulty];
    cfg.eval_difficulties = vec![eval.difficulty];
    cfg.eval_tasks = 32;
    cfg.eval_every = 0;
    cfg.steps = launch.sft_steps;
    cfg.time_limit = Some(Duration::from_secs_f64(launch.sft_minutes * 60.0));
    cfg.validate()?;
    let bar = progress::time_bar(launch.sft_minutes * 60.0, "cold start (SFT)")?;
    let target = out.clone();
    // A built-in model gets as many libtorch threads as each role (on a busy machine, two
    // threads spinning against other processes made micro's cold start about seven times slower
    // than one); a pretrained model's matrices are large enough to use every core, and nothing
    // else of the job runs yet. OMP_NUM_THREADS, when set, decides either way.
    let threads = match (std::env::var_os("OMP_NUM_THREADS"), &cfg.init) {
        (None, Some(_)) => std::thread::available_parallelism().map_or(1, |n| n.get()),
        _ => procs::threads_per_process(),
    };
    let report = tokio::task::spawn_blocking(move || {
        tch::set_num_threads(threads as i32);
        let r = sft::run(&cfg, &target, |p| {
            bar.set_position(p.train_seconds as u64);
            bar.set_message(format!("step {} loss {:.3}", p.step, p.loss));
        });
        bar.finish_and_clear();
        r
    })
    .await??
    .1;
    println!(
        "cold start: {} updates in {:.0} s, loss {:.3} → {:.3}",
        report.steps, report.train_seconds, report.first_loss, report.final_loss
    );
    if report.steps < launch.sft_steps {
        println!(
            "warning: the cold start reached launch.sft_minutes ({}) after {} of launch.sft_steps ({}) updates; \
             the machine is slower or busier than expected and RL starts from a weaker model (raise \
             launch.sft_minutes, or delete {} to redo it)",
            launch.sft_minutes,
            report.steps,
            launch.sft_steps,
            model_dir.display()
        );
    }
    Ok(model_dir)
}

/// Polls the weight store until the learner has published a version, or fails naming why.
async fn wait_for_weights(store: &WeightStore, learner: &mut RoleProcess, deadline: Duration) -> Result<()> {
    let started = Instant::now();
    loop {
        if store.latest_version().await?.is_some() {
            return Ok(());
        }
        if let Some(exit) = learner.exited() {
            exit?;
            bail!("the learner exited before publishing weights; see {}", learner.log.display());
        }
        if started.elapsed() > deadline {
            bail!("the learner published no weights within {} s; see {}", deadline.as_secs(), learner.log.display());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn free_local_addr() -> Result<String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.to_string())
}

/// Runs the job; `Ok(false)` when it ran but success did not rise.
pub async fn run(base: &ReagentConfig, args: RunArgs) -> Result<bool> {
    // Every role's section is checked here (EvalPlan reads the actor's and the learner's), so
    // a bad key fails before anything starts.
    let launch = LaunchConfig::from_config(base)?;
    rrm_worker::config::RrmConfig::from_config(base)?;
    env_workers::user_model::UserModelConfig::from_config(base)?;
    let mut eval = report::EvalPlan::from_config(base, launch.eval_tasks, launch.eval_samples)?;
    let mut cfg = base.clone();
    let dir = run_dir(&cfg);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating the run directory {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    println!("run {} in {} (feedback {})", cfg.run.id, dir.display(), cfg.run.feedback);

    // Redis: the configured one, or a private server in the run directory (127.0.0.1 only,
    // protected mode, a user per role with a random password, maxmemory with noeviction).
    let (_redis, credentials) = match cfg.redis.url() {
        Some(_) => (None, Credentials::from_url(&mut cfg)?),
        None => {
            let credentials = Credentials::generate();
            // Started on this thread, not a blocking-pool one: the server is told to stop when
            // its starting thread exits (a launcher killed with SIGKILL must not leave it running,
            // `run_launcher.rs`), and `run` runs on the main thread for the launcher's whole life.
            let options = RedisServerOptions {
                dir: Some(dir.join("redis")),
                auth: credentials.server_auth(&cfg.run.id),
                maxmemory: Some(launch.redis_maxmemory_mb << 20),
                stop_with_parent: true,
                ..RedisServerOptions::default()
            };
            let server = RedisServer::start(options)?;
            println!("redis: private redis-server at {} (data in {})", server.url(), server.dir().display());
            cfg.redis.url = server.url();
            credentials.point_config(&mut cfg);
            credentials.save_admin_password(server.dir())?;
            (Some(server), credentials)
        }
    };

    // The cold start, and every role starting from its model.
    if !args.no_sft && !launch.sft_model.is_empty() {
        let model_dir = cold_start(&launch, &dir, &eval).await?;
        eval.model = model_dir.display().to_string();
        set(&mut cfg.learner, "model", eval.model.clone());
        set(&mut cfg.actor, "model", eval.model.clone());
    }
    println!("{}", eval.announce("the starting model"));
    let started = Instant::now();
    let before = eval.evaluate_initial().await?;
    println!("  ({:.0} s)", started.elapsed().as_secs_f64());
    println!("before RL: held-out success {}", before.describe());

    // The roles, all from one resolved configuration.
    let mut env_addrs = Vec::new();
    for _ in 0..launch.env_workers {
        env_addrs.push(free_local_addr()?);
    }
    if !env_addrs.is_empty() {
        set(
            &mut cfg.actor,
            "env_workers",
            toml::Value::Array(env_addrs.iter().cloned().map(toml::Value::String).collect()),
        );
    }
    let config_path = dir.join("config.toml");
    let text = format!("{}{}", secrets::config_header(&credentials), cfg.to_toml());
    protocol::redis_server::write_private(&config_path, &text)?;
    let run = RunId::new(cfg.run.id.clone()).map_err(|e| anyhow::anyhow!("run.id: {}", e.found))?;
    let link = credentials.launcher_link(&cfg)?;
    let store = WeightStore::new(&link, &run, (&cfg.weights).into());

    let grace = Duration::from_secs(launch.stop_grace_s);
    let mut learner = RoleProcess::spawn("learner", &["learner"], &config_path, &dir, &credentials.env_for("learner"))?;
    wait_for_weights(&store, &mut learner, Duration::from_secs(120)).await?;
    let mut workers: Vec<RoleProcess> = Vec::new();
    for (i, addr) in env_addrs.iter().enumerate() {
        workers.push(RoleProcess::spawn(
            &format!("env-worker-{}", i + 1),
            &["env-worker", "--listen", addr],
            &config_path,
            &dir,
            &[],
        )?);
    }
    for i in 0..launch.rrm_workers {
        let mut env = credentials.env_for("rrm");
        env.push(("REAGENT__RRM__CONSUMER", format!("rrm-{}", i + 1)));
        workers.push(RoleProcess::spawn(&format!("rrm-{}", i + 1), &["rrm"], &config_path, &dir, &env)?);
    }
    let mut actors = Vec::new();
    for i in 0..launch.actors {
        let mut env = credentials.env_for("actor");
        env.push(("REAGENT__ACTOR__ID", format!("actor-{}", i + 1)));
        actors.push(RoleProcess::spawn(&format!("actor-{}", i + 1), &["actor"], &config_path, &dir, &env)?);
    }
    println!(
        "roles: learner, {} actor(s), {} rrm worker(s), {} env worker(s); logs in {}",
        launch.actors,
        launch.rrm_workers,
        launch.env_workers,
        dir.join("logs").display()
    );
    println!(
        "tensorboard: every update's figures in {} (tensorboard --logdir {})",
        dir.join(::learner::tensorboard::DIR).display(),
        dir.parent().unwrap_or(&dir).display()
    );

    let metrics = dir.join("metrics.jsonl");
    let watched =
        progress::watch(&metrics, launch.rl_updates, launch.rl_minutes * 60.0, &mut learner, &mut workers, &mut actors)
            .await;

    // Leave in order: actors stop producing, RRM workers drain, the learner checkpoints last.
    for p in actors.iter_mut().chain(workers.iter_mut()) {
        p.stop(grace).await;
    }
    learner.stop(grace).await;
    let records = watched?;
    if launch.rl_updates > 0 && (records.len() as u64) < launch.rl_updates {
        println!(
            "warning: RL reached launch.rl_minutes ({}) after {} of launch.rl_updates ({}) updates; the machine is \
             slower or busier than expected",
            launch.rl_minutes,
            records.len(),
            launch.rl_updates
        );
    }

    // With rl_updates, the version the last counted update published (the learner may have
    // published one more while the roles were leaving): the steps decide what is evaluated.
    let counted = (launch.rl_updates > 0)
        .then(|| records.get(launch.rl_updates as usize - 1))
        .flatten()
        .map(|r| protocol::wire::PolicyVersion(r.version + 1));
    println!("{}", eval.announce("the trained policy"));
    let after = eval.evaluate_published(&store, counted).await?;
    let summary = report::Summary::new(&cfg, before, after, &records);
    report::write(&dir, &summary, &records)?;
    println!("{}", summary.describe());
    Ok(summary.rise_points() > 0.0)
}
