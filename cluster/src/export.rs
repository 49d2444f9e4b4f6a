//! `reagent export`: a run's trained policy out to a Hugging Face model directory.
//!
//! ```text
//!  <run dir>/config.toml ── learner.model ──► architecture (built-in size or config.json) + tokenizer
//!  <run dir>/checkpoints/step-N/ (newest, or the one that published --version, or --checkpoint)
//!          manifest verified ─► weights.safetensors ─► model ─► policy::hf_export ─► --out
//! ```
//!
//! A checkpoint is the learner's own record of its weights (what it published as
//! `policy_version`), so exporting needs no running Redis.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use learner::checkpoint::{list_checkpoints, Manifest, WEIGHTS};
use policy::hf_export::{self, TokenizerSource};
use policy::{ByteTokenizer, LoadedModel, ModelConfig, Tokenizer};
use tch::{Device, Kind, Tensor};

/// `reagent export`'s arguments.
#[derive(Debug, clap::Args)]
#[command(disable_version_flag = true)]
pub struct ExportArgs {
    /// The run directory (`<run.dir>/<run.id>`, holding config.toml and checkpoints/).
    #[arg(long)]
    pub run: PathBuf,
    /// Export the checkpoint that published this policy version (default: the newest).
    #[arg(long = "version", id = "policy_version", value_name = "N", conflicts_with = "checkpoint")]
    pub policy_version: Option<u64>,
    /// Export this checkpoint directory (`step-N`) instead of one of the run's.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// The model directory to write (new or empty).
    #[arg(long)]
    pub out: PathBuf,
    /// Largest safetensors file (`5GB`, `500MB`, `200KB`, bytes without a unit; powers of
    /// 1000 as transformers counts); bigger models are sharded with model.safetensors.index.json.
    #[arg(long, default_value = "5GB", value_parser = parse_size)]
    pub max_shard_size: u64,
}

/// A size such as `5GB` or `200KB` in bytes (powers of 1000).
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let scale = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => return Err(format!("unknown unit {other:?} in {text:?}; use B, KB, MB or GB")),
    };
    match digits.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(format!("{text:?} is not a positive size such as 5GB")),
    }
}

/// What the run's config says about the model and the checkpoints.
struct RunModel {
    /// `learner.model`: a built-in size or a model directory.
    model: String,
    /// Where the learner's checkpoints are.
    checkpoints: PathBuf,
}

fn run_model(run: &Path) -> Result<RunModel> {
    let path = run.join("config.toml");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!("reading {} (a run directory holds the config.toml that `reagent run` wrote)", path.display())
    })?;
    let table: toml::Table = toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let learner = table.get("learner").and_then(|l| l.as_table());
    let get = |key: &str| learner.and_then(|l| l.get(key)).and_then(|v| v.as_str()).map(str::trim);
    let model = get("model").filter(|m| !m.is_empty()).unwrap_or("tiny").to_string();
    let checkpoints = match get("checkpoint_dir") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => run.join("checkpoints"),
    };
    Ok(RunModel { model, checkpoints })
}

/// The policy version a checkpoint's `state.json` records.
fn checkpoint_version(dir: &Path) -> Result<u64> {
    let path = dir.join(learner::checkpoint::STATE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    json.get("policy_version")
        .and_then(|v| v.as_u64())
        .with_context(|| format!("{} has no policy_version", path.display()))
}

/// The checkpoint to export: `--checkpoint`, the one that published `--version`, or the newest.
fn pick_checkpoint(args: &ExportArgs, dir: &Path) -> Result<PathBuf> {
    if let Some(path) = &args.checkpoint {
        return Ok(path.clone());
    }
    let all = list_checkpoints(dir)?;
    if all.is_empty() {
        bail!(
            "no checkpoint in {} (the learner writes one every learner.checkpoint_every updates and when it stops); \
             pass --checkpoint PATH to export another",
            dir.display()
        );
    }
    let Some(version) = args.policy_version else { return Ok(all[0].1.clone()) };
    let mut seen = Vec::new();
    for (_, path) in &all {
        let v = checkpoint_version(path)?;
        if v == version {
            return Ok(path.clone());
        }
        seen.push(v.to_string());
    }
    bail!(
        "no checkpoint in {} holds policy version {version}; the kept checkpoints hold versions {}",
        dir.display(),
        seen.join(", ")
    )
}

/// The architecture and tokenizer of `learner.model`.
fn architecture(model: &str) -> Result<(ModelConfig, TokenizerSource, Box<dyn Tokenizer>)> {
    if let Ok(cfg) = ModelConfig::builtin(model) {
        return Ok((cfg, TokenizerSource::ByteLevel, Box::new(ByteTokenizer)));
    }
    let dir = PathBuf::from(model);
    let cfg = ModelConfig::from_file(&dir.join("config.json"))
        .with_context(|| format!("learner.model {model:?} is neither a built-in size nor a model directory"))?;
    let tokenizer = policy::pretrained::tokenizer_for_dir(&dir)?;
    let source =
        if dir.join("tokenizer.json").is_file() { TokenizerSource::Dir(dir) } else { TokenizerSource::ByteLevel };
    Ok((cfg, source, tokenizer))
}

/// Loads a checkpoint's verified weights into a model of `cfg`, in the checkpoint's kind.
fn load_checkpoint(cfg: &ModelConfig, checkpoint: &Path) -> Result<LoadedModel> {
    if !checkpoint.join(WEIGHTS).is_file() {
        bail!("{} has no {WEIGHTS}: not a learner checkpoint directory (step-N)", checkpoint.display());
    }
    Manifest::verify(checkpoint, &[WEIGHTS]).with_context(|| format!("verifying {}", checkpoint.display()))?;
    let weights = checkpoint.join(WEIGHTS);
    let tensors = Tensor::read_safetensors(&weights).with_context(|| format!("reading {}", weights.display()))?;
    let kind = tensors.iter().find(|(n, _)| n == "model.embed_tokens.weight").map_or(Kind::Float, |(_, t)| t.kind());
    let value_head = tensors.iter().any(|(n, _)| n.starts_with("value_head."));
    drop(tensors);
    let mut model = LoadedModel::fresh_as(cfg, Device::Cpu, kind, value_head)?;
    policy::weights::load_safetensors(&mut model.vs, &[&weights])
        .with_context(|| format!("{} does not fit the run's model", weights.display()))?;
    Ok(model)
}

/// `reagent export`.
pub fn run(args: &ExportArgs) -> Result<()> {
    let run = run_model(&args.run)?;
    let checkpoint = pick_checkpoint(args, &run.checkpoints)?;
    if args.out.exists() && std::fs::read_dir(&args.out).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("--out {} exists and is not empty; pick a new directory", args.out.display());
    }
    let (cfg, source, tokenizer) = architecture(&run.model)?;
    let model = load_checkpoint(&cfg, &checkpoint)?;
    let version = checkpoint_version(&checkpoint).ok();
    let summary =
        hf_export::write_model_dir(&model, &tokenizer.special_ids(), &source, &args.out, args.max_shard_size)?;
    println!(
        "exported {} (policy version {}) to {}: {} tensors, {:.1} MB in {} safetensors file(s); {}",
        checkpoint.display(),
        version.map_or("unknown".into(), |v| v.to_string()),
        args.out.display(),
        summary.tensors,
        summary.weight_bytes as f64 / 1e6,
        summary.shards,
        summary.files.join(", ")
    );
    if source == TokenizerSource::ByteLevel {
        println!("tokenizer: Reagent's byte-level tokenizer as tokenizer.json (ids 0-255 are bytes, 256-267 its special tokens), with its chat template");
    }
    Ok(())
}
