//! `reagent bench …`: throughput and latency of Reagent's parts and of the whole pipeline, each
//! measured beside a reference in the same run (redis-benchmark, a bare tch loop, transformers'
//! generate, TRL's GRPOTrainer, Stable-Baselines3, one Redis GET) and reported as a ratio with
//! the exact command line. BENCHMARKS.md records the latest figures.
//!
//! ```text
//!  reagent bench <name> ─► run ─► <module>::bench(args) ─► table or JSON on stdout
//!                                   └─ cluster::launch::procs for role processes, cluster::progress for progress
//! ```

mod breakdown;
mod cartpole;
mod efficiency;
mod env;
mod fanout;
mod generate;
mod generation;
mod gpu;
mod judge;
mod learner;
mod learner_memory;
mod queue;
mod redis_benchmark;
mod report;
mod scale;
mod training;
mod trl;
mod venv;
mod weights;

use anyhow::Result;
use clap::Subcommand;
use protocol::config::ReagentConfig;
use protocol::redis_server::{RedisServer, RedisServerOptions};

pub use cartpole::CartpoleBenchArgs;
pub use efficiency::PipelineBenchArgs;
pub use env::EnvBenchArgs;
pub use fanout::{FanoutBenchArgs, FanoutFollowerArgs};
pub use generate::GenerateBenchArgs;
pub use gpu::GpuBenchArgs;
pub use judge::JudgeBenchArgs;
pub use learner::LearnerBenchArgs;
pub use learner_memory::LearnerMemoryArgs;
pub use queue::QueueBenchArgs;
pub use scale::ScaleBenchArgs;
pub use trl::TrlBenchArgs;
pub use weights::{WeightsBenchArgs, WeightsFollowerArgs};

/// `reagent bench …`: which bench.
#[derive(Debug, Subcommand)]
pub enum Command {
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
    LearnerMemory(LearnerMemoryArgs),

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
    Generate(Box<GenerateBenchArgs>),

    /// The device check of the GPU path (scripts/gpu_check.sh runs it on a GPU machine): CUDA
    /// loaded and a kernel run; bf16 updates with fp32 masters and fp32 gradient sums; log-probs
    /// on the device vs f32 on the CPU; the chunked LM head and its gradient vs f64; the
    /// learner's tokens/s and MFU for a Qwen2-0.5B-shaped model at 64 × 1024 tokens (and
    /// --model); generation tokens/s at batch 1, 32, 128; weights
    /// published and imported bit for bit, timed; forward + backward at T = 1024 and 4096. One
    /// PASS/FAIL/SKIP line per part, a table, --report FILE for JSON. `--device cpu --quick`
    /// tries it on any machine.
    Gpu(Box<GpuBenchArgs>),

    /// The RRM's OpenAI-compatible judge against a real server (scripts/llama_server.sh starts
    /// llama-cpp-python's with SmolLM2), beside the reference judge, on the same math episodes
    /// (half solved, half with a wrong final answer), in each prompt format: answers parsed,
    /// retried attempts by reason, failures, score means for right and wrong episodes and their
    /// AUC, latency and judgements/s.
    Judge(Box<JudgeBenchArgs>),

    /// Weight fan-out: N reader processes fetching a version of --mb MB (a) all from the
    /// primary Redis, (b) through --replicas replicas of it, (c) through replicas chained in a
    /// tree of fan-out --tree-k; the time until the last one holds it, beside one GET of the
    /// same bytes, and each part's CPU time. Medians over --repeats versions.
    Fanout(FanoutBenchArgs),

    /// One reader of `reagent bench fanout` (started by it, not by people).
    #[command(hide = true)]
    FanoutFollower(FanoutFollowerArgs),

    /// One follower of `reagent bench weights` (started by it, not by people).
    #[command(hide = true)]
    WeightsFollower(WeightsFollowerArgs),
}

/// Runs a bench; `config` gives the job's configuration to the benches that read it (the others
/// run without one, so that a broken job file does not stop them). `Ok(false)`: the bench ran and
/// its goal or check failed (the report says which).
pub async fn run<E>(command: Command, config: impl FnOnce() -> Result<ReagentConfig, E>) -> Result<bool>
where
    anyhow::Error: From<E>,
{
    match command {
        Command::Queue(args) => queue::bench(&config()?, args).await.map(|()| true),
        Command::Env(args) => env::bench(args).await.map(|()| true),
        Command::Learner(args) => learner::bench(args).await.map(|()| true),
        Command::LearnerMemory(args) => learner_memory::bench(args).await.map(|()| true),
        Command::Pipeline(args) => efficiency::bench(&config()?, args).await.map(|()| true),
        Command::Scale(args) => scale::bench(&config()?, args).await.map(|()| true),
        Command::Weights(args) => weights::bench(&config()?, args).await.map(|()| true),
        Command::WeightsFollower(args) => weights::follower(&config()?, args).await.map(|()| true),
        Command::Fanout(args) => fanout::bench(&config()?, args).await.map(|()| true),
        Command::FanoutFollower(args) => fanout::follower(&config()?, args).await.map(|()| true),
        Command::Cartpole(args) => cartpole::bench(*args).await,
        Command::Trl(args) => trl::bench(*args).await,
        Command::Generate(args) => generate::bench(*args).await,
        Command::Gpu(args) => gpu::bench(*args).await,
        Command::Judge(args) => judge::bench(*args).await.map(|()| true),
    }
}

/// The command line as typed, quoted where a shell would need it.
pub(crate) fn command_line() -> String {
    let quote = |a: String| {
        if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "_-./=:,@%+".contains(c)) {
            a
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    std::env::args().map(quote).collect::<Vec<_>>().join(" ")
}

/// The time since `start` once every kernel queued on `device` has finished. CUDA runs
/// asynchronously: without the synchronisation a timer stops when the last kernel is launched,
/// not when the work is done, and a rate comes out as high as the launch queue allows.
pub(crate) fn elapsed_on(device: tch::Device, start: std::time::Instant) -> std::time::Duration {
    if let tch::Device::Cuda(index) = device {
        tch::Cuda::synchronize(index as i64);
    }
    start.elapsed()
}

/// The CPU model from /proc/cpuinfo (Linux), if it names one.
pub(crate) fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines().find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim().to_string()))
}

/// A bench's private redis-server, started on the calling thread. On the process's main thread
/// (where the CLI's future runs) the server is also told to stop when that thread ends, so a
/// bench killed with SIGKILL leaves no server behind ([`protocol::child`]); on any other thread,
/// which might retire before the bench ends, it is not, and the server's destructor alone stops
/// it. Blocks until the server answers PING.
pub(crate) fn private_redis(options: RedisServerOptions) -> protocol::Result<RedisServer> {
    RedisServer::start(RedisServerOptions { stop_with_parent: protocol::child::on_main_thread(), ..options })
}
