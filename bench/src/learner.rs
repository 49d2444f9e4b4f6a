//! `reagent bench learner`: the policy's and learner's throughput, each figure beside a
//! reference run in the same process: the learner's update beside a bare tch training loop
//! over the same model and batch, and KV-cache generation beside full recomputation.

use anyhow::Result;

use super::generation::{self, GenerationRow};
use super::training::{self, TrainingRow};
use clap::Args;

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

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs the bench on a blocking thread (tch work never runs on the async runtime) and prints
/// a table or JSON.
pub async fn bench(args: LearnerBenchArgs) -> Result<()> {
    let a = args.clone();
    let (train_rows, rows): (Vec<TrainingRow>, Vec<GenerationRow>) = tokio::task::spawn_blocking(move || {
        let train = a
            .sizes
            .iter()
            .map(|size| {
                eprintln!("measuring training for {size} …");
                training::measure(size, a.train_rows as usize, a.train_tokens as usize, usize::from(a.repeats))
            })
            .collect::<Result<Vec<_>>>()?;
        let generation = a
            .sizes
            .iter()
            .map(|size| {
                eprintln!("measuring generation for {size} …");
                generation::measure(
                    size,
                    a.batch as usize,
                    a.prompt_tokens as usize,
                    a.new_tokens as usize,
                    usize::from(a.repeats),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok::<_, anyhow::Error>((train, generation))
    })
    .await??;
    if args.json {
        println!("{}", serde_json::json!({ "training": train_rows, "generation": rows }));
        return Ok(());
    }
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    println!(
        "machine: {} cores, device {:?}; batch {}, prompt {} tokens, {} new tokens, greedy; median of {}",
        std::thread::available_parallelism().map_or(1, usize::from),
        policy::device::pick(),
        args.batch,
        args.prompt_tokens,
        args.new_tokens,
        args.repeats
    );
    println!();
    println!("Training: {} sequences of {} tokens per update", args.train_rows, args.train_tokens);
    println!();
    println!("| model | parameters | learner update tokens/s | bare tch loop tokens/s | ratio | peak RSS, learner (MiB) | peak RSS, bare loop (MiB) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for r in &train_rows {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.2} | {:.0} | {:.0} |",
            r.size,
            r.parameters,
            r.learner,
            r.bare,
            r.learner / r.bare,
            r.learner_peak_mib,
            r.bare_peak_mib
        );
    }
    println!();
    println!("Generation:");
    println!();
    println!("| size | KV cache new tokens/s | full recomputation new tokens/s | speed-up |");
    println!("|---|---:|---:|---:|");
    for r in &rows {
        println!("| {} | {:.0} | {:.0} | {:.1}× |", r.size, r.cached, r.recomputed, r.cached / r.recomputed);
    }
    Ok(())
}
