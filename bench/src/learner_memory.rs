//! `reagent bench learner-memory`: the peak memory of one learner update on a real vocabulary,
//! beside the size of the f32 logits tensor `[rows, seq, vocab]` that a full log-softmax
//! would make. Each figure comes from a child process of its own (`--child`), so one
//! measurement's allocations cannot inflate another's.
//!
//! ```text
//!  parent ─ spawn `reagent bench learner-memory --child learner …` ─┐ one JSON line each
//!         ─ spawn `… --child sft …`, `… --child sft-unchunked …`   │
//!         ─ spawn `reagent bench learner-memory --child full …`    ─┘
//!  child:  model (tiny hidden size, the given vocabulary) + AdamW + batch
//!          ─ read VmRSS ─ reset VmHWM (/proc/self/clear_refs ← 5) ─ one update ─ read VmHWM
//! ```
//!
//! `learner` is `learner::update::grpo_update` (one optimizer step, the LM head in chunks);
//! `full` is the computation it replaced: full logits, log-softmax, gather, backward, the same
//! AdamW step. `sft` is one SFT update (`learner::sft::loss::SftLoss`, the chunked head with its
//! recomputing backward) on the same batch's agent tokens; `sft-unchunked` the SFT path it
//! replaced (`TokenBatch::nll`: the head in chunks but with gradient, so autograd keeps every
//! chunk's logits). The figure is the rise of the resident set during the update (VmHWM after the
//! update minus VmRSS before it: weights, batch and allocator arenas already resident are not
//! counted; gradients and the optimizer's moments, made by the first step, are).

use std::path::Path;
use std::process::Stdio;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use learner::optim::AdamW;
use learner::sft::loss::SftLoss;
use learner::tensors::{flatten, Sequence, TokenBatch};
use learner::update::{grpo_update, Models, UpdateConfig};
use learner::LearnerConfig;
use policy::{ByteTokenizer, LoadedModel, ModelConfig};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use super::training::batch;

/// Options of `reagent bench learner-memory`.
#[derive(Debug, Clone, Args)]
pub struct LearnerMemoryArgs {
    /// Vocabulary size (Qwen2.5 and Qwen3: 151936).
    #[arg(long, default_value_t = 151_936, value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
    pub vocab: u64,

    /// Tokens per sequence.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(8..=32_768))]
    pub seq: u64,

    /// Sequences in the update (one GRPO group).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..=64))]
    pub rows: u64,

    /// The model's hidden size (its layers: 2, 4 heads, 2 key/value heads, MLP 4× wide).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(8..=8192))]
    pub hidden: u64,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Measure one computation in this process and print it as JSON (what the parent spawns).
    #[arg(long, value_enum, hide = true)]
    pub child: Option<Computation>,
}

/// What a child measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum Computation {
    /// The learner's update.
    Learner,
    /// One SFT update with the chunked head.
    Sft,
    /// One SFT update through `TokenBatch::nll`, as before.
    SftUnchunked,
    /// Full logits and log-softmax, as before the chunked head.
    Full,
}

/// One child's figures, in bytes.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Measured {
    computation: Computation,
    rss_before: u64,
    peak: u64,
    seconds: f64,
}

/// Runs the bench (or, with `--child`, one measurement).
pub async fn bench(args: LearnerMemoryArgs) -> Result<()> {
    if let Some(computation) = args.child {
        let a = args.clone();
        let m = tokio::task::spawn_blocking(move || measure(&a, computation)).await??;
        println!("{}", serde_json::to_string(&m)?);
        return Ok(());
    }
    let exe = std::env::current_exe().context("cannot find the reagent binary")?;
    let mut rows = Vec::new();
    for computation in [Computation::Learner, Computation::Sft, Computation::SftUnchunked, Computation::Full] {
        eprintln!("measuring {computation:?} in a child process …");
        rows.push(child(&exe, &args, computation).await?);
    }
    let logits = args.rows * args.seq * args.vocab * 4;
    if args.json {
        println!("{}", serde_json::json!({ "logits_bytes": logits, "rows": rows }));
        return Ok(());
    }
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    println!(
        "model: vocab {}, hidden {}, 2 layers ({} parameters); {} × {} tokens; f32 logits tensor {:.0} MiB",
        args.vocab,
        args.hidden,
        config(&args).num_parameters(),
        args.rows,
        args.seq,
        mib(logits)
    );
    println!();
    println!("| computation | RSS before (MiB) | peak rise in the update (MiB) | × logits | seconds |");
    println!("|---|---:|---:|---:|---:|");
    for m in &rows {
        let rise = m.peak.saturating_sub(m.rss_before);
        let name = match m.computation {
            Computation::Learner => "learner update (chunked head)",
            Computation::Sft => "SFT update (chunked head)",
            Computation::SftUnchunked => "SFT update, TokenBatch::nll (before)",
            Computation::Full => "full log-softmax (before)",
        };
        let ratio = rise as f64 / logits as f64;
        println!("| {name} | {:.0} | {:.0} | {ratio:.2} | {:.1} |", mib(m.rss_before), mib(rise), m.seconds);
    }
    Ok(())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

async fn child(exe: &Path, args: &LearnerMemoryArgs, computation: Computation) -> Result<Measured> {
    let kind = computation.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
    let out = tokio::process::Command::new(exe)
        .args(["bench", "learner-memory", "--child", &kind])
        .args(["--vocab", &args.vocab.to_string(), "--seq", &args.seq.to_string()])
        .args(["--rows", &args.rows.to_string(), "--hidden", &args.hidden.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .await
        .context("cannot start the measuring child")?;
    if !out.status.success() {
        bail!("the {kind} child failed: {}", out.status);
    }
    let line = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(line.trim()).with_context(|| format!("the {kind} child printed {line:?}"))
}

fn config(args: &LearnerMemoryArgs) -> ModelConfig {
    let h = args.hidden as i64;
    ModelConfig {
        vocab_size: args.vocab as i64,
        hidden_size: h,
        intermediate_size: 4 * h,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        head_dim: h / 4,
        max_position_embeddings: (args.seq as i64).max(4096),
        ..ModelConfig::tiny()
    }
}

/// A `/proc/self/status` field in bytes (`VmRSS`, `VmHWM`).
pub(super) fn status_bytes(field: &str) -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status").context("cannot read /proc/self/status")?;
    let line = status.lines().find(|l| l.starts_with(field)).with_context(|| format!("no {field} in status"))?;
    let kib: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).context("unreadable status")?;
    Ok(kib * 1024)
}

fn measure(args: &LearnerMemoryArgs, computation: Computation) -> Result<Measured> {
    let cfg = config(args);
    let loaded = policy::seed::seeded(0, || LoadedModel::fresh(&cfg, Device::Cpu, false))?;
    let data = batch(args.rows as usize, args.seq as usize, cfg.vocab_size as usize);
    let learner_cfg = LearnerConfig { minibatches: 1, ppo_epochs: 1, ..LearnerConfig::default() };
    let update_cfg = UpdateConfig::new(&learner_cfg, 1.0, ByteTokenizer::PAD, 0)?;
    let mut opt = AdamW::from_named(loaded.vs.variables(), learner_cfg.adamw_config());
    let sequences = data.iter().map(|st| flatten(&st.trajectory)).collect::<Result<Vec<_>, _>>()?;
    let ids = ids_of(&sequences, args);
    let tokens = TokenBatch::new(&sequences.iter().collect::<Vec<_>>(), ByteTokenizer::PAD, Device::Cpu)?;
    let rss_before = status_bytes("VmRSS")?;
    // Resets VmHWM to the current RSS (Linux ≥ 4.0), so the peak is the update's.
    std::fs::write("/proc/self/clear_refs", "5").context("cannot reset VmHWM via /proc/self/clear_refs")?;
    let start = std::time::Instant::now();
    match computation {
        Computation::Learner => {
            grpo_update(Models { policy: &loaded.model, reference: None }, &mut opt, &data, &update_cfg)?;
        }
        Computation::Sft => {
            opt.zero_grad();
            SftLoss::new(&loaded.model, &tokens)?.backward()?;
            opt.step()?;
        }
        Computation::SftUnchunked => {
            opt.zero_grad();
            tokens.nll(&loaded.model)?.backward();
            opt.step()?;
        }
        Computation::Full => {
            let logits = loaded.model.forward(&ids, None)?.logits;
            let logp = policy::logprob::shifted_logprobs(&logits, &ids, 1.0)?;
            opt.zero_grad();
            (-logp.mean(Kind::Float)).backward();
            opt.step()?;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Measured { computation, rss_before, peak: status_bytes("VmHWM")?, seconds })
}

/// The batch's ids as one `[rows, seq]` tensor (every row is full length).
fn ids_of(sequences: &[Sequence], args: &LearnerMemoryArgs) -> Tensor {
    let flat: Vec<i64> = sequences.iter().flat_map(|s| s.ids.iter().map(|&id| i64::from(id))).collect();
    Tensor::from_slice(&flat).view([args.rows as i64, args.seq as i64])
}
