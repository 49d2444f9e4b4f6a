//! The command line of `reagent`: global flags and subcommands, as clap derive types. Parsing
//! only; what each command does lives in its own module.
//!
//! ```text
//!  reagent [--config PATH] [--log-format text|json] <command>
//!    doctor                   check config, Redis, libtorch and CUDA
//!    dlq list|show|replay|purge   a run's dead letters
//!    config show              print the resolved configuration as TOML
//!    bench queue [options]    queue throughput beside redis-benchmark's raw XADD
//!    bench env [options]      environment steps/s in-process and through an env-worker
//!    bench scale [options]    pipeline throughput with 1, 2, 4, 8 actor processes
//!    bench weights [options]  weight-sync latency to N actor processes beside one Redis GET
//!    bench cartpole [options] CartPole PPO steps-to-solved and wall time, beside SB3's
//!    bench trl [options]      single-turn GRPO completion tokens/s, beside TRL's GRPOTrainer
//!    bench generate --model D sampling tokens/s with the KV cache, beside transformers' generate
//!    env-worker --listen ADDR host environment sessions for actors (tarpc)
//!    train cartpole [options] PPO on CartPole, the yardstick for PPO correctness
//!    sft [options]            supervised cold start on reference episodes
//!    train grpo --init DIR    in-process GRPO (generation + learning, no Redis) from a model
//! ```

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use protocol::config::LogFormat;

pub use crate::bench::CartpoleBenchArgs;
pub use crate::bench::TrlBenchArgs;
pub use crate::train::CartpoleArgs;

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
        command: crate::dlq::DlqCommand,
    },

    /// Supervised cold start: trains a fresh model on the environments' reference episodes
    /// (loss on the agent's tokens only) and writes the model an RL run starts from, with the
    /// learning curve (sft_curve.jsonl), a report (sft_report.json) and greedy held-out success
    /// evaluated along the way. No Redis.
    Sft(SftArgs),

    /// Write a run's trained policy (the newest checkpoint, or --version / --checkpoint) as a
    /// Hugging Face model directory: config.json, safetensors (sharded above --max-shard-mb),
    /// generation_config.json and tokenizer files. No Redis.
    Export(crate::export::ExportArgs),

    /// An OpenAI-compatible chat server (POST /v1/chat/completions, GET /v1/models, /metrics)
    /// over a model directory or built-in size, or with --follow over a live run's newest
    /// weights; requests are batched by the actors' policy actor. Stops on SIGTERM or Ctrl-C.
    Serve(crate::serve::ServeArgs),

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
        command: BenchCommand,
    },

    /// Long experiments whose evidence goes to docs/experiments/ (not run by `make test`).
    Experiment {
        /// Which experiment.
        #[command(subcommand)]
        command: ExperimentCommand,
    },
}

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
}

/// Options of `reagent learner`.
#[derive(Debug, Clone, Args)]
pub struct LearnerArgs {
    /// Where the learner's state comes from: `auto` (the newest intact checkpoint, else a
    /// fresh start), `never`, or a checkpoint directory. Overrides learner.resume.
    #[arg(long, value_name = "auto|never|PATH")]
    pub resume: Option<String>,
}

/// Options of `reagent run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Skip the supervised cold start and start RL from learner.model as it is.
    #[arg(long)]
    pub no_sft: bool,
}

/// `reagent config …`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the resolved configuration (defaults, --config file and REAGENT__* variables
    /// merged and validated) as TOML, ready to save as a job file.
    Show,
    /// Write the Redis ACL file of the per-role users (learner, actor, rrm, keda, replica,
    /// admin) for run.id, their passwords read from LEARNER_PASSWORD, ACTOR_PASSWORD,
    /// RRM_PASSWORD, KEDA_PASSWORD, REPLICA_PASSWORD and ADMIN_PASSWORD and stored as SHA-256 hashes (mode 0600). Kubernetes
    /// runs it in Redis's init container (SECURITY.md).
    RedisAcl {
        /// The file to write.
        #[arg(long, value_name = "FILE")]
        out: std::path::PathBuf,
    },
}

/// `reagent bench …`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// End-to-end messages per second through Reagent's queue (produce → consume →
    /// acknowledge), beside redis-benchmark's raw XADD of the same payload size against the
    /// same server. Reports medians over --repeats runs.
    Queue(QueueBenchArgs),

    /// Environment steps per second for each family: the step function in-process on one core,
    /// and through an env-worker over loopback TCP with batched calls; reports the ratio.
    Env(EnvBenchArgs),

    /// The learner and the policy: tokens/s of a learner update beside a bare tch training loop
    /// over the same model and batch, and new tokens/s of KV-cache sampling beside full
    /// recomputation (same tokens required), for the built-in sizes.
    Learner(LearnerBenchArgs),

    /// The peak memory of one learner update on a real vocabulary (default Qwen's 151,936,
    /// 2 × 1,024 tokens, a 64-wide model) beside the size of its f32 logits tensor, and the same
    /// for the full log-softmax the chunked LM head replaced; each in a child process.
    LearnerMemory(crate::bench::LearnerMemoryArgs),

    /// The distributed pipeline's agent tokens/s (separate role processes, private Redis) beside
    /// the in-process trainer's on the same model and settings; reports the ratio.
    Pipeline(PipelineBenchArgs),

    /// The whole pipeline with 1, 2, 4, 8 actor processes: a private redis-server, the learner,
    /// one RRM worker and N actors (the job's configuration, a built-in model); trajectories/s
    /// and agent tokens/s reaching the learner, CPU use, and how long a newly started actor
    /// takes to get its first trajectory to the learner. Ratios are against the first point.
    Scale(ScaleBenchArgs),

    /// Weight-sync latency: a private redis-server, N follower processes each running the
    /// actors' policy and weight-sync actors over a model of each size; the time from the
    /// learner's publish call to every follower serving the new version, beside one Redis GET of
    /// the same bytes from the same server. Reports medians over --repeats versions.
    Weights(WeightsBenchArgs),

    /// PPO on CartPole, seeds 0–2: environment steps until a greedy evaluation averages 475
    /// and training wall time; with --against-sb3, Stable-Baselines3 with the same
    /// hyper-parameters in the same run (scripts/sb3_venv.sh makes its venv), and the ratios.
    Cartpole(Box<CartpoleBenchArgs>),

    /// Our single-turn GRPO beside TRL 1.16's GRPOTrainer on the same random tiny Qwen2,
    /// prompts, reward and hyper-parameters (8 generations per prompt, 64 new tokens,
    /// temperature 0.7, lr 1e-4, one torch thread each), one side after the other in the same
    /// run: end-to-end completion tokens/s at 8 and 64 completions per step, their ratio (goal
    /// ≥ 3×), tokens/s inside generation, and the kernel floor (the step's matrix products and
    /// attention alone, at its shapes): how close each side runs to it and the highest ratio any
    /// trainer on these kernels could reach. Needs the venv scripts/trl_venv.sh makes.
    Trl(Box<TrlBenchArgs>),

    /// Sampling with the KV cache beside transformers' generate on the same model directory
    /// (e.g. target/smollm2), prompt, batch sizes (1, 8, 32) and threads: median new tokens/s of
    /// each and their ratio (goal ≥ 3×), and batch 1 against the memory-bandwidth bound (copy
    /// bandwidth ÷ bytes of weights per token). Needs the venv scripts/hf_venv.sh makes.
    Generate(Box<crate::bench::GenerateBenchArgs>),

    /// Weight fan-out: N reader processes fetching a version of --mb MB (a) all from the
    /// primary Redis, (b) through --replicas replicas of it, (c) through replicas chained in a
    /// tree of fan-out --tree-k; the time until the last one holds it, beside one GET of the
    /// same bytes, and each part's CPU time. Medians over --repeats versions.
    Fanout(crate::bench::FanoutBenchArgs),

    /// One reader of `reagent bench fanout` (started by it, not by people).
    #[command(hide = true)]
    FanoutFollower(crate::bench::FanoutFollowerArgs),

    /// One follower of `reagent bench weights` (started by it, not by people).
    #[command(hide = true)]
    WeightsFollower(WeightsFollowerArgs),
}

/// Options of `reagent bench weights`.
#[derive(Debug, Clone, Args)]
pub struct WeightsBenchArgs {
    /// Policy sizes in MB (10^6 bytes of f32 weights), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100", value_name = "MB,…", value_parser = clap::value_parser!(u32).range(1..=4000))]
    pub sizes: Vec<u32>,

    /// Follower (actor) processes that must all swap each version; several counts
    /// (comma-separated) are measured one after the other in the same run.
    #[arg(long, value_delimiter = ',', default_value = "1,4", value_name = "N,…", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub followers: Vec<u16>,

    /// Versions published per size (and GETs timed); the median is reported.
    #[arg(long, default_value_t = 3, value_name = "R", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeats: u16,
}

/// Options of the hidden `reagent bench weights-follower`.
#[derive(Debug, Clone, Args)]
pub struct WeightsFollowerArgs {
    /// The bench's Redis.
    #[arg(long, value_name = "URL")]
    pub redis: String,

    /// The run id the weights are published under.
    #[arg(long, value_name = "ID")]
    pub run: String,

    /// This follower's name in the reports.
    #[arg(long, value_name = "NAME")]
    pub name: String,

    /// The policy size in MB.
    #[arg(long, value_name = "MB")]
    pub mb: u32,
}

/// Options of `reagent bench scale`.
#[derive(Debug, Clone, Args)]
pub struct ScaleBenchArgs {
    /// Actor process counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8", value_name = "N,…", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub actors: Vec<u16>,

    /// Seconds of the timed window of each point.
    #[arg(long, default_value_t = 30.0, value_name = "S")]
    pub seconds: f64,

    /// Seconds between every actor having a trajectory scored and the window's start.
    #[arg(long, default_value_t = 5.0, value_name = "S")]
    pub warmup: f64,

    /// How many times each point is measured; the median is reported.
    #[arg(long, default_value_t = 1, value_name = "R", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeats: u16,

    /// The model of learner and actors: a built-in size (micro, tiny, small) or a model directory.
    #[arg(long, default_value = "micro", value_name = "MODEL")]
    pub model: String,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

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

/// Options of `reagent bench learner`.
#[derive(Debug, Clone, Args)]
pub struct LearnerBenchArgs {
    /// Built-in model sizes or model directories (e.g. target/smollm2: its own weights),
    /// comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "tiny,small", value_name = "SIZE|DIR,…")]
    pub sizes: Vec<String>,

    /// Sequences per training update.
    #[arg(long, default_value_t = 16, value_name = "B", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub train_rows: u64,

    /// Tokens per training sequence (a quarter prompt, the rest trained agent tokens).
    #[arg(long, default_value_t = 256, value_name = "T", value_parser = clap::value_parser!(u64).range(8..=8192))]
    pub train_tokens: u64,

    /// Sequences per generation batch.
    #[arg(long, default_value_t = 8, value_name = "B", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub batch: u64,

    /// Prompt tokens per sequence.
    #[arg(long, default_value_t = 64, value_name = "T", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub prompt_tokens: u64,

    /// New tokens generated per sequence.
    #[arg(long, default_value_t = 256, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub new_tokens: u64,

    /// How many times each measurement is repeated; the median is reported.
    #[arg(long, default_value_t = 3, value_name = "R", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeats: u16,

    /// Unmeasured runs of each side (Reagent's queue, then redis-benchmark) before the measured
    /// ones, for each payload: the server's first allocations of that size are not measured.
    #[arg(long, default_value_t = 1, value_name = "W", value_parser = clap::value_parser!(u16).range(0..=100))]
    pub warmup: u16,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `reagent train …`
#[derive(Debug, Subcommand)]
pub enum TrainCommand {
    /// PPO on CartPole-v1 (CleanRL's and Stable-Baselines3's algorithm on Reagent's learner
    /// pieces), every hyper-parameter a flag over a preset (default: RL-Zoo's tuned `zoo`).
    /// Succeeds when a greedy evaluation (20 episodes every 5,000 steps, on environments of its
    /// own) averages 475, as RL-Zoo judges CartPole-v1 solved.
    Cartpole(Box<CartpoleArgs>),

    /// GRPO with outcome reward in one process (generation and learning, no Redis), from a
    /// model directory such as `reagent sft`'s; writes rl_curve.jsonl, rl_report.json and the
    /// trained model. Greedy held-out success is measured before and after.
    Grpo(GrpoArgs),
}

/// Built-in model sizes for `reagent sft`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SftSize {
    /// 1.6 M parameters: learns difficulty-1 `math` in five minutes on two CPU cores.
    Tiny,
    /// 0.17 M parameters, about six times faster per token: reaches difficulty 2 in five
    /// minutes, which gives RL something to reinforce there.
    Micro,
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
    /// reproducible; one fixed in time depends on the machine).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
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
}

/// A feedback mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FeedbackArg {
    /// The environment's outcome only.
    Outcome,
    /// Reagent-C: critique-guided refinement.
    Critique,
    /// Reagent-R: the judge's score in the reward.
    Score,
    /// Reagent-U: both.
    Unified,
}

impl From<FeedbackArg> for protocol::wire::FeedbackMode {
    fn from(a: FeedbackArg) -> Self {
        match a {
            FeedbackArg::Outcome => Self::Outcome,
            FeedbackArg::Critique => Self::Critique,
            FeedbackArg::Score => Self::Score,
            FeedbackArg::Unified => Self::Unified,
        }
    }
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
}

/// Options of `reagent env-worker`.
#[derive(Debug, Clone, Args)]
pub struct EnvWorkerArgs {
    /// Address to listen on (`host:port`; port 0 picks a free one, printed at start).
    #[arg(long, default_value = "127.0.0.1:7100", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,

    /// Most sessions open at once; opening more gets a clear "full" error.
    #[arg(long, default_value_t = 4096, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_sessions: u64,

    /// A session untouched for this many seconds is dropped (its client is presumed gone).
    #[arg(long, default_value_t = 300, value_name = "S", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_s: u64,

    /// On SIGTERM, seconds open sessions get to finish before the worker exits.
    #[arg(long, default_value_t = 30, value_name = "S")]
    pub grace_s: u64,
}

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

    /// Unmeasured runs of each side (Reagent's queue, then redis-benchmark) before the measured
    /// ones, for each payload: the server's first allocations of that size are not measured.
    #[arg(long, default_value_t = 1, value_name = "W", value_parser = clap::value_parser!(u16).range(0..=100))]
    pub warmup: u16,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Options of `reagent bench queue`.
#[derive(Debug, Clone, Args)]
pub struct QueueBenchArgs {
    /// Messages per measurement (for each payload size and each repeat). Default: about
    /// 200 MB of payload per run, at least 10,000 and at most 50,000 messages (50,000 at 4 KiB,
    /// 10,000 at 64 KiB), so that a run is long beside its start (connections, the first
    /// batch's round trip): 10,000 messages of 4 KiB pass in under a tenth of a second.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub messages: Option<u64>,

    /// Payload sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4096,65536", value_name = "BYTES,…", value_parser = clap::value_parser!(u32).range(1..=(64 << 20)))]
    pub sizes: Vec<u32>,

    /// Also send realistic trajectories of these many tokens (token ids, behaviour log-probs,
    /// loss mask and text, encoded as on a job's rollouts stream), comma-separated; the
    /// baseline XADDs their encoded size. 0: none.
    #[arg(long, value_delimiter = ',', default_value = "512", value_name = "TOKENS,…", value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub trajectory_tokens: Vec<u32>,

    /// The Redis server to measure against (`redis://[:password@]host:port[/db]`); the bench
    /// writes streams under `reagent:{bench}:` and deletes them. Default: a private
    /// redis-server started for the bench, append-only file off (`redis.url` is not used, so a
    /// job's server is never benchmarked by accident).
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,

    /// Concurrent producers, each on its own connection.
    #[arg(long, default_value_t = 2, value_name = "P", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub producers: u16,

    /// Concurrent consumers in one consumer group, each on its own connection.
    #[arg(long, default_value_t = 2, value_name = "C", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub consumers: u16,

    /// Messages per producer batch (one pipelined round trip) and per consumer read
    /// (XREADGROUP COUNT).
    #[arg(long, default_value_t = 128, value_name = "B", value_parser = clap::value_parser!(u16).range(1..=10_000))]
    pub batch: u16,

    /// How many times each measurement is repeated; the median is reported.
    #[arg(long, default_value_t = 3, value_name = "R", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeats: u16,

    /// Unmeasured runs of each side (Reagent's queue, then redis-benchmark) before the measured
    /// ones, for each payload: the server's first allocations of that size are not measured.
    #[arg(long, default_value_t = 1, value_name = "W", value_parser = clap::value_parser!(u16).range(0..=100))]
    pub warmup: u16,

    /// Threads of the runtime that drives the producers and consumers. The default, 1, is
    /// redis-benchmark's own shape (one thread, every connection on one event loop); on a
    /// machine of few cores, a second client thread takes CPU from redis-server itself.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub client_threads: u16,

    /// Print the results as one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--log-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormatArg {
    /// Human-readable lines.
    Text,
    /// JSON lines, one object per event.
    Json,
}

impl From<LogFormatArg> for LogFormat {
    fn from(f: LogFormatArg) -> Self {
        match f {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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

    #[test]
    fn bench_queue_parses_sizes_and_rejects_zero() {
        let cli =
            Cli::try_parse_from(["reagent", "bench", "queue", "--sizes", "4096,65536", "--repeats", "1"]).unwrap();
        let Command::Bench { command: BenchCommand::Queue(args) } = cli.command else { panic!("not bench queue") };
        assert_eq!(args.sizes, vec![4096, 65536]);
        assert_eq!(args.repeats, 1);
        assert!(Cli::try_parse_from(["reagent", "bench", "queue", "--sizes", "0"]).is_err());
        assert!(Cli::try_parse_from(["reagent", "bench", "queue", "--messages", "lots"]).is_err());
    }

    #[test]
    fn bench_scale_parses_actor_counts_and_rejects_zero() {
        let cli = Cli::try_parse_from(["reagent", "bench", "scale", "--actors", "1,3", "--seconds", "5"]).unwrap();
        let Command::Bench { command: BenchCommand::Scale(args) } = cli.command else { panic!("not bench scale") };
        assert_eq!((args.actors, args.seconds, args.repeats, args.model.as_str()), (vec![1, 3], 5.0, 1, "micro"));
        assert!(Cli::try_parse_from(["reagent", "bench", "scale", "--actors", "0"]).is_err());
    }

    #[test]
    fn bench_weights_parses_sizes_and_rejects_zero() {
        let cli = Cli::try_parse_from(["reagent", "bench", "weights", "--sizes", "1,100", "--followers", "2"]).unwrap();
        let Command::Bench { command: BenchCommand::Weights(args) } = cli.command else { panic!("not bench weights") };
        assert_eq!((args.sizes, args.followers, args.repeats), (vec![1, 100], vec![2], 3));
        let cli = Cli::try_parse_from(["reagent", "bench", "weights"]).unwrap();
        let Command::Bench { command: BenchCommand::Weights(args) } = cli.command else { panic!("not bench weights") };
        assert_eq!(args.followers, [1, 4], "one follower and four by default");
        assert!(Cli::try_parse_from(["reagent", "bench", "weights", "--followers", "1,0"]).is_err());
        assert!(Cli::try_parse_from(["reagent", "bench", "weights", "--sizes", "0"]).is_err());
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = Cli::try_parse_from(["reagent", "doctor", "--log-format", "json", "--config", "x.toml"]).unwrap();
        assert_eq!(cli.log_format, Some(LogFormatArg::Json));
        assert_eq!(cli.config.as_deref(), Some(std::path::Path::new("x.toml")));
    }
}
