//! Checkpoints of a cold start, and resuming one: a `reagent sft` of hours survives being
//! killed and continues with exactly the updates an uninterrupted run makes.
//!
//! ```text
//!  <out>/checkpoints/step-0000001000/   the learner's checkpoint format (crate::checkpoint):
//!                                        weights, AdamW moments and step, state.json, manifest
//!  <out>/sft_curve.jsonl                one line per update; on resume cut back to the
//!                                        checkpoint's step (the updates after it are redone)
//! ```
//!
//! Saved every `checkpoint_every` updates and after the last. Resuming (`resume = auto`, the
//! default, or a checkpoint by path) loads the weights and the optimizer, takes the losses,
//! tokens and training time so far from the curve, and replays the task stream up to the
//! checkpoint's step: the stream is a function of the seed alone, so the next batch is the one
//! the killed run would have drawn. Settings that change what is trained (model, seed, tasks,
//! mix, optimizer) must match the checkpoint's; `steps`, the time budget and the evaluation
//! settings may change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use policy::LoadedModel;

use super::SftConfig;
use crate::checkpoint::{resolve_resume, sha256_hex, CheckpointData, CheckpointStore, ConsumptionState};
use crate::error::{LearnerError, Result};
use crate::optim::AdamW;
use protocol::wire::PolicyVersion;

/// The checkpoint directory inside a run's output directory.
pub const CHECKPOINTS: &str = "checkpoints";

/// Checkpoints kept (two, so that a corrupt newest one has a predecessor).
const KEEP: usize = 2;

/// What a resumed run continues from.
#[derive(Debug)]
pub struct Resumed {
    /// The checkpoint's directory.
    pub path: PathBuf,
    /// Updates already made.
    pub step: u64,
    /// The checkpoint's contents.
    data: CheckpointData,
}

/// The hash of the settings that decide what a cold start trains: a checkpoint resumes only
/// under the same. The `init` model and the `episodes` file count by their contents, so the
/// same run started from another working directory (or with the path spelt otherwise) resumes.
pub fn fingerprint(cfg: &SftConfig) -> Result<String> {
    // The decay's length matters only when the rate decays.
    let steps = (cfg.min_lr_ratio < 1.0).then_some(cfg.steps);
    let init = match &cfg.init {
        Some(dir) => Some(content_hash(&[dir.join("config.json"), dir.join("model.safetensors")])?),
        None => None,
    };
    let episodes = match &cfg.episodes {
        Some(file) => Some(content_hash(std::slice::from_ref(file))?),
        None => None,
    };
    let canonical = format!(
        "model={:?}|seed={}|family={:?}|difficulties={:?}|rollout={:?}|batch={}|refine_share={}|lr={}|warmup={}|\
         min_lr_ratio={}|weight_decay={}|max_grad_norm={}|episodes={episodes:?}|init={init:?}|decay_steps={steps:?}",
        cfg.model,
        cfg.seed,
        cfg.family,
        cfg.difficulties,
        cfg.rollout,
        cfg.batch_size,
        cfg.refine_share,
        cfg.lr,
        cfg.warmup_steps,
        cfg.min_lr_ratio,
        cfg.weight_decay,
        cfg.max_grad_norm,
    );
    Ok(sha256_hex(canonical.as_bytes()))
}

/// The sha256 of the files' contents, in order.
fn content_hash(files: &[PathBuf]) -> Result<String> {
    let mut all = Vec::new();
    for file in files {
        let bytes = std::fs::read(file).map_err(|e| LearnerError::io(file, e))?;
        all.extend_from_slice(sha256_hex(&bytes).as_bytes());
    }
    Ok(sha256_hex(&all))
}

/// Applies `cfg.resume` to `out_dir/checkpoints`: `Ok(None)` starts fresh. A checkpoint written
/// under settings other than those of `expected` (the run's [`fingerprint`]) is refused by name.
pub fn resolve(cfg: &SftConfig, expected: &str, out_dir: &Path) -> Result<Option<Resumed>> {
    let dir = out_dir.join(CHECKPOINTS);
    let Some(loaded) = resolve_resume(&dir, &cfg.resume)? else { return Ok(None) };
    if loaded.data.config_hash != expected {
        return Err(LearnerError::NoCheckpoint(format!(
            "{} was written by a cold start with other settings (model, seed, tasks, mix or optimizer; \
             settings hash {} against {expected}); resume with the settings it was started with, \
             or start afresh in another --out directory",
            loaded.path.display(),
            loaded.data.config_hash
        )));
    }
    Ok(Some(Resumed { path: loaded.path, step: loaded.data.step, data: loaded.data }))
}

impl Resumed {
    /// Puts the checkpoint's weights and optimizer state into `model` and `opt`.
    pub fn restore(&self, model: &LoadedModel, opt: &mut AdamW) -> Result<()> {
        let vars = model.vs.variables();
        let named: Vec<&String> = self.data.weights.iter().map(|(n, _)| n).collect();
        if vars.len() != named.len() || named.iter().any(|n| !vars.contains_key(*n)) {
            return Err(LearnerError::NoCheckpoint(format!(
                "{} holds {} tensors that are not this model's {} variables",
                self.path.display(),
                named.len(),
                vars.len()
            )));
        }
        opt.load_master_weights(&self.data.weights)?;
        opt.load_state(&self.data.optimizer)
    }
}

/// Writes the checkpoint of update `step` (of a run whose [`fingerprint`] is `fingerprint`) into
/// `out_dir/checkpoints`, keeping the newest two.
pub fn save(out_dir: &Path, fingerprint: String, step: u64, opt: &AdamW) -> Result<PathBuf> {
    let mut weights = opt.master_weights();
    weights.sort_by(|a, b| a.0.cmp(&b.0));
    CheckpointStore::new(out_dir.join(CHECKPOINTS), KEEP).save(&CheckpointData {
        step,
        policy_version: PolicyVersion(step),
        weights,
        optimizer: opt.state(),
        // The task stream is replayed from the seed; libtorch's generator is not drawn from.
        rng: BTreeMap::new(),
        config_hash: fingerprint,
        consumption: ConsumptionState::default(),
    })
}

/// A resumed run's counters, from its curve.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SoFar {
    /// The loss of every update made, in order.
    pub losses: Vec<f64>,
    /// Training tokens seen.
    pub tokens: usize,
    /// Training seconds spent (evaluations excluded).
    pub train_seconds: f64,
}

impl SoFar {
    /// The counters the records of [`curve_until`] hold.
    pub fn from_curve(records: &[serde_json::Value]) -> Self {
        let field = |r: &serde_json::Value, k: &str| r.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
        Self {
            losses: records.iter().map(|r| field(r, "loss")).collect(),
            tokens: records.last().map_or(0, |r| field(r, "tokens_seen") as usize),
            train_seconds: records.last().map_or(0.0, |r| field(r, "train_seconds")),
        }
    }
}

/// The curve's records of updates 1..=`step`, read from `path` (a resumed run keeps these and
/// redoes the rest). Every one of them must be there.
pub fn curve_until(path: &Path, step: u64) -> Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path).map_err(|e| LearnerError::io(path, e))?;
    let mut kept = Vec::with_capacity(step as usize);
    for (i, line) in text.lines().enumerate() {
        // A line cut short by the kill is the last one; it is after the checkpoint's step.
        let Ok(record) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let at = record.get("step").and_then(serde_json::Value::as_u64);
        match at {
            Some(s) if s <= step => {
                if s != kept.len() as u64 + 1 {
                    return Err(LearnerError::corrupt(path, format!("line {} holds step {s} out of order", i + 1)));
                }
                kept.push(record);
            }
            Some(_) => {}
            None => return Err(LearnerError::corrupt(path, format!("line {} has no step", i + 1))),
        }
    }
    if kept.len() as u64 != step {
        return Err(LearnerError::corrupt(
            path,
            format!("the curve holds {} of the {step} updates the checkpoint has made", kept.len()),
        ));
    }
    Ok(kept)
}
