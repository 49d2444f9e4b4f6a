//! `reagent`, the one binary of Reagent: parses the command line, loads the configuration, sets
//! up logging and hands over to the command, whose options and work live in the `cluster` crate
//! (one module per command) or the `bench` crate. Nothing else happens here.
//!
//! ```text
//!  argv ─► Cli ─► settings::load ─► telemetry::init (role = the command's name) ─► dispatch ─► cluster::<command>::run | bench::run
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use cluster::cli::LogFormatArg;
use cluster::env_worker::EnvWorkerArgs;
use cluster::experiment::ExperimentCommand;
use cluster::launch::RunArgs;
use cluster::roles::LearnerArgs;
use cluster::settings::{self, ConfigCommand};
use cluster::sft::SftArgs;
use cluster::train::TrainCommand;
use cluster::{dlq, doctor, errors, experiment, export, launch, redis_acl, roles, serve, sft, status, train};
use tracing::Instrument;

#[tokio::main]
async fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    // Logs and metrics name the role after the command: `learner`, `env-worker`, `bench`, …
    let role = matches.subcommand_name().unwrap_or("reagent").to_string();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let loaded = settings::load(cli.config.as_deref());
    let log = settings::logging(cli.log_format.map(Into::into), loaded.config.as_ref().ok());
    if let Err(e) = protocol::telemetry::init(log.format, &log.filter, &role, &log.run_id) {
        // Doctor reports a bad filter among its checks; every other command stops here.
        if !matches!(cli.command, Command::Doctor) {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
        let _ = protocol::telemetry::init(log.format, "info", &role, &log.run_id);
    }
    let span = protocol::telemetry::role_span(&role, &log.run_id);
    match dispatch(cli.command, loaded).instrument(span).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {}", errors::describe(&e));
            ExitCode::FAILURE
        }
    }
}

/// Runs the command; `Ok(false)` means it ran and found a failure (doctor's failed checks, a
/// bench or an experiment whose goal was not met).
async fn dispatch(command: Command, loaded: settings::Loaded) -> Result<bool> {
    match command {
        Command::Doctor => doctor::run(&loaded.config, &loaded.source).await,
        Command::Config { command: ConfigCommand::Show } => {
            print!("{}", settings::show(&loaded.config?, &loaded.source)?);
            Ok(true)
        }
        Command::Config { command: ConfigCommand::RedisAcl { out } } => {
            redis_acl::write(&loaded.config?, &out)?;
            Ok(true)
        }
        Command::Bench { command } => bench::run(command, || loaded.config).await,
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

/// Reagent: a distributed actor-learner system that trains LLM agents with reinforcement
/// learning and a reasoning reward model.
#[derive(Debug, Parser)]
#[command(name = "reagent", version, propagate_version = true)]
#[command(after_help = "Configuration layers, later ones winning: the embedded defaults \
(config/default.toml), the --config file, then REAGENT__SECTION__KEY environment variables \
(e.g. REAGENT__REDIS__URL=redis://host:6379).")]
pub struct Cli {
    /// A TOML job file layered over the embedded defaults; it need only name the keys it
    /// changes. Unknown keys are errors.
    #[arg(long, global = true, value_name = "PATH", help_heading = "Global options")]
    pub config: Option<PathBuf>,

    /// Log format on stderr: `text` for people, `json` for log collectors (one object per
    /// line). Overrides `logging.format` from the configuration.
    #[arg(long, global = true, value_enum, value_name = "FORMAT", help_heading = "Global options")]
    pub log_format: Option<LogFormatArg>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check that this machine can run Reagent: the configuration is valid, Redis is reachable
    /// (or redis-server is installed), libtorch loads, and whether CUDA is available. Exits
    /// non-zero when a required check fails.
    Doctor,

    /// Inspect the configuration.
    Config {
        /// What to do with it.
        #[command(subcommand)]
        command: ConfigCommand,
    },

    /// Host environment sessions for actors over tarpc: many sessions per process, every call
    /// with a deadline, idle sessions expiring. Stops on SIGTERM or Ctrl-C: new sessions are
    /// refused and open ones get --grace-s to finish. Serves /metrics, /healthz and /readyz on
    /// `metrics.listen`.
    EnvWorker(EnvWorkerArgs),

    /// Run the whole job on this machine: a private redis-server (unless redis.url is set),
    /// the supervised cold start, then the learner, RRM workers, env workers and actors as
    /// separate processes, with a progress bar; writes the run directory (resolved config,
    /// metrics.jsonl, checkpoints, learning curve as PNG and SVG) and prints the success rate
    /// before and after RL.
    Run(RunArgs),

    /// The learner role: consumes scored trajectories, trains (PPO/GRPO), publishes versioned
    /// weights, checkpoints, and acknowledges what a durable checkpoint holds. Stops on SIGTERM
    /// or Ctrl-C after a final checkpoint. Serves /metrics, /healthz, /readyz on metrics.listen.
    Learner(LearnerArgs),

    /// The rollout actor role: environment slots playing groups of attempts with the newest
    /// weights, publishing trajectories; in critique/unified modes a refined attempt follows
    /// each judged first attempt. Leaves gracefully on SIGTERM (finishes in-flight groups
    /// within actor.grace_s). Serves /metrics, /healthz, /readyz on metrics.listen.
    Actor,

    /// The RRM scoring worker role: judges rollouts (reference judge or an OpenAI-compatible
    /// endpoint serving Agent-RRM) and forwards them, scored, to the learner. Stops on SIGTERM
    /// after the batch in flight. Serves /metrics, /healthz, /readyz on metrics.listen.
    Rrm,

    /// Print a run's state from Redis: the newest policy version, queue depths and pending
    /// entries, dead letters, and the live consumers of each group.
    Status,

    /// A run's dead letters (entries the RRM workers or the learner gave up on): list them,
    /// show one, replay them once the cause is fixed, purge them.
    Dlq {
        /// What to do with them.
        #[command(subcommand)]
        command: cluster::dlq::DlqCommand,
    },

    /// Supervised cold start: trains a fresh model on the environments' reference episodes
    /// (loss on the agent's tokens only) and writes the model an RL run starts from, with the
    /// learning curve (sft_curve.jsonl), a report (sft_report.json) and greedy held-out success
    /// evaluated along the way. No Redis.
    Sft(SftArgs),

    /// Write a run's trained policy (the newest checkpoint, or --version / --checkpoint) as a
    /// Hugging Face model directory: config.json, safetensors (sharded above --max-shard-mb),
    /// generation_config.json and tokenizer files. No Redis.
    Export(cluster::export::ExportArgs),

    /// An OpenAI-compatible chat server (POST /v1/chat/completions, GET /v1/models, /metrics)
    /// over a model directory or built-in size, or with --follow over a live run's newest
    /// weights; requests are batched by the actors' policy actor. Stops on SIGTERM or Ctrl-C.
    Serve(cluster::serve::ServeArgs),

    /// Train in this process (no Redis): quick experiments and yardsticks.
    Train {
        /// What to train.
        #[command(subcommand)]
        command: TrainCommand,
    },

    /// Measure throughput.
    Bench {
        /// What to measure.
        #[command(subcommand)]
        command: bench::Command,
    },

    /// Long experiments whose evidence goes to docs/experiments/ (not run by `make test`).
    Experiment {
        /// Which experiment.
        #[command(subcommand)]
        command: ExperimentCommand,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// The `reagent …` commands in the code blocks of README.md, BENCHMARKS.md and docs/*.md
    /// (a `$ ` prompt, `target/release/reagent`, `\` continuations, `#` comments and a
    /// trailing shell operator allowed).
    fn documented_commands() -> Vec<(String, Vec<String>)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = vec![root.join("README.md"), root.join("BENCHMARKS.md")];
        let mut docs: Vec<_> = std::fs::read_dir(root.join("docs")).unwrap().map(|e| e.unwrap().path()).collect();
        docs.sort();
        files.extend(docs.into_iter().filter(|p| p.extension().is_some_and(|e| e == "md")));
        let mut out = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let (mut fence, mut pending) = (false, String::new());
            for (i, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("```") {
                    fence = !fence;
                    continue;
                }
                if !fence {
                    continue;
                }
                let line = format!("{pending}{}", line.trim());
                if let Some(head) = line.strip_suffix('\\') {
                    pending = format!("{head} ");
                    continue;
                }
                pending.clear();
                let words = shlex::split(line.split(" #").next().unwrap_or("")).unwrap_or_default();
                let words: Vec<String> = words
                    .into_iter()
                    .skip_while(|w| {
                        w == "$" || (w.contains('=') && w.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
                    })
                    // A shell operator ends the command.
                    .take_while(|w| !["&", "&&", "|", "||", ";", ">", ">>", "2>&1"].contains(&w.as_str()))
                    .collect();
                if words.first().is_some_and(|w| w == "reagent" || w.ends_with("/reagent")) {
                    out.push((format!("{}:{}", file.display(), i + 1), words));
                }
            }
        }
        out
    }

    /// Every command the docs show parses as the binary would parse it (a renamed flag or
    /// command fails here, naming the file and line), so the docs cannot drift from the CLI.
    #[test]
    fn every_command_the_docs_show_parses() {
        let commands = documented_commands();
        assert!(commands.len() >= 20, "the docs show {} reagent commands; expected many more", commands.len());
        assert!(commands.iter().any(|(at, _)| at.contains("README.md")), "none found in README.md");
        let failures: Vec<String> = commands
            .iter()
            .filter_map(|(at, words)| {
                Cli::try_parse_from(words).err().map(|e| format!("{at}: {}: {e}", words.join(" ")))
            })
            .collect();
        assert!(failures.is_empty(), "documented commands that do not parse:\n{}", failures.join("\n"));
    }

    /// The repository's text files a user reads or deploys (docs, config, manifests, scripts).
    fn user_facing_files() -> Vec<std::path::PathBuf> {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| ["md", "toml", "yaml", "py", "sh"].iter().any(|x| e == *x)) {
                    out.push(path);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files: Vec<_> = ["README.md", "BENCHMARKS.md", "SECURITY.md"].map(|f| root.join(f)).into();
        for dir in ["docs", "config", "cluster/k8s", "scripts"] {
            walk(&root.join(dir), &mut files);
        }
        files.sort();
        files
    }

    /// Every `toml` block the docs show loads as a configuration and every role reads its
    /// section of it (`config show`'s check), so a renamed or moved key fails here.
    #[test]
    fn every_configuration_the_docs_show_loads() {
        let mut blocks = 0;
        for file in user_facing_files().into_iter().filter(|f| f.extension().is_some_and(|e| e == "md")) {
            let text = std::fs::read_to_string(&file).unwrap();
            let mut lines = text.lines().enumerate();
            while let Some((start, line)) = lines.next() {
                if line.trim() != "```toml" {
                    continue;
                }
                let indent = line.len() - line.trim_start().len();
                let body: Vec<&str> = lines
                    .by_ref()
                    .map(|(_, l)| l)
                    .take_while(|l| l.trim() != "```")
                    .map(|l| l.get(indent..).unwrap_or(l.trim_start()))
                    .collect();
                let at = format!("{}:{}", file.file_name().unwrap_or_default().to_string_lossy(), start + 1);
                let config = protocol::config::ReagentConfig::from_toml_str(&body.join("\n"))
                    .unwrap_or_else(|e| panic!("{at}: does not load: {e}"));
                cluster::settings::check_role_sections(&config).unwrap_or_else(|e| panic!("{at}: refused: {e:#}"));
                blocks += 1;
            }
        }
        assert!(blocks >= 5, "found {blocks} toml blocks in the docs; expected more");
    }

    /// Every `REAGENT__SECTION__KEY` override a doc, manifest or script names is a key of
    /// `config/default.toml` (a moved key would otherwise be ignored by the loader's overrides).
    #[test]
    fn every_override_the_repository_names_is_a_key() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let defaults: toml::Table = std::fs::read_to_string(root.join("config/default.toml")).unwrap().parse().unwrap();
        let (mut seen, mut unknown) = (0, Vec::new());
        for file in user_facing_files() {
            let text = std::fs::read_to_string(&file).unwrap();
            for (i, line) in text.lines().enumerate() {
                for (at, _) in line.match_indices("REAGENT__") {
                    let name: String = line[at..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    if name == "REAGENT__SECTION__KEY" || name.ends_with("__") {
                        continue; // the placeholder that explains the scheme, or the bare prefix
                    }
                    let path: Vec<String> = name["REAGENT__".len()..].split("__").map(str::to_lowercase).collect();
                    let mut value = Some(&defaults);
                    let mut found = false;
                    for (depth, part) in path.iter().enumerate() {
                        match value.and_then(|t| t.get(part)) {
                            Some(toml::Value::Table(t)) => value = Some(t),
                            Some(_) => {
                                found = depth + 1 == path.len();
                                break;
                            }
                            None => break,
                        }
                    }
                    seen += 1;
                    if !found {
                        let shown = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
                        unknown.push(format!("{shown}:{}: {name}", i + 1));
                    }
                }
            }
        }
        assert!(seen >= 20, "found {seen} overrides; expected more");
        assert!(unknown.is_empty(), "overrides of keys config/default.toml does not have:\n{}", unknown.join("\n"));
    }

    #[test]
    fn bench_queue_parses_sizes_and_rejects_zero() {
        let cli =
            Cli::try_parse_from(["reagent", "bench", "queue", "--sizes", "4096,65536", "--repeats", "1"]).unwrap();
        let Command::Bench { command: bench::Command::Queue(args) } = cli.command else { panic!("not bench queue") };
        assert_eq!(args.sizes, vec![4096, 65536]);
        assert_eq!(args.repeats, 1);
        assert!(Cli::try_parse_from(["reagent", "bench", "queue", "--sizes", "0"]).is_err());
        assert!(Cli::try_parse_from(["reagent", "bench", "queue", "--messages", "lots"]).is_err());
    }

    #[test]
    fn bench_scale_parses_actor_counts_and_rejects_zero() {
        let cli = Cli::try_parse_from(["reagent", "bench", "scale", "--actors", "1,3", "--seconds", "5"]).unwrap();
        let Command::Bench { command: bench::Command::Scale(args) } = cli.command else { panic!("not bench scale") };
        assert_eq!((args.actors, args.seconds, args.repeats, args.model.as_str()), (vec![1, 3], 5.0, 1, "micro"));
        assert!(Cli::try_parse_from(["reagent", "bench", "scale", "--actors", "0"]).is_err());
    }

    #[test]
    fn bench_weights_parses_sizes_and_rejects_zero() {
        let cli = Cli::try_parse_from(["reagent", "bench", "weights", "--sizes", "1,100", "--followers", "2"]).unwrap();
        let Command::Bench { command: bench::Command::Weights(args) } = cli.command else {
            panic!("not bench weights")
        };
        assert_eq!((args.sizes, args.followers, args.repeats), (vec![1, 100], vec![2], 3));
        let cli = Cli::try_parse_from(["reagent", "bench", "weights"]).unwrap();
        let Command::Bench { command: bench::Command::Weights(args) } = cli.command else {
            panic!("not bench weights")
        };
        assert_eq!(args.followers, [1, 4], "one follower and four by default");
        assert!(Cli::try_parse_from(["reagent", "bench", "weights", "--followers", "1,0"]).is_err());
        assert!(Cli::try_parse_from(["reagent", "bench", "weights", "--sizes", "0"]).is_err());
    }

    #[test]
    fn bench_cartpole_parses_seeds_and_the_baseline() {
        let cli =
            Cli::try_parse_from(["reagent", "bench", "cartpole", "--seeds", "0,1", "--against-sb3", "--epochs", "10"])
                .unwrap();
        let Command::Bench { command: bench::Command::Cartpole(a) } = cli.command else { panic!("not bench cartpole") };
        assert_eq!((a.seeds.as_slice(), a.against_sb3, a.threads, a.knobs.epochs), (&[0, 1][..], true, 1, Some(10)));
        assert!(Cli::try_parse_from(["reagent", "bench", "cartpole", "--threads", "0"]).is_err());
    }

    /// Logs and metrics carry the role as the command line names it.
    #[test]
    fn the_role_is_the_command_name() {
        for (words, role) in [(&["reagent", "env-worker"][..], "env-worker"), (&["reagent", "learner"], "learner")] {
            let matches = Cli::command().try_get_matches_from(words).unwrap();
            assert_eq!(matches.subcommand_name(), Some(role));
        }
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = Cli::try_parse_from(["reagent", "doctor", "--log-format", "json", "--config", "x.toml"]).unwrap();
        assert_eq!(cli.log_format, Some(LogFormatArg::Json));
        assert_eq!(cli.config.as_deref(), Some(std::path::Path::new("x.toml")));
    }
}
