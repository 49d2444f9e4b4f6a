//! Checkpoints: everything a learner needs to continue exactly where it was, written atomically
//! and checksummed, the newest `keep` kept.
//!
//! ```text
//!  <dir>/
//!    step-0000000040/           one complete checkpoint per saved step
//!      weights.safetensors      the model's named tensors
//!      optimizer.safetensors    AdamW's moments, m.<param> and v.<param>
//!      state.json               step, optimizer step, policy version, RNG states (hex), config
//!                               hash, consumption state (trajectory ids applied since the last
//!                               acknowledgement, queue entry ids)
//!      manifest.json            length and sha256 of each file above; written last
//!    step-0000000050/
//!    .tmp-step-0000000060-<pid>/   being written; renamed into place once complete and synced
//! ```
//!
//! Saving writes into the temporary directory, fsyncs every file and the directory, renames it
//! to `step-N` and fsyncs `<dir>`: after a crash there is either a complete checkpoint or none.
//! Loading verifies every checksum first; `resolve_resume` falls back to the previous
//! checkpoint, with a warning, when the newest is corrupt or truncated.
//!
//! libtorch's global generator state is not reachable through tch, so it is not saved; a
//! trainer that draws from it re-seeds it from `(seed, step)` at each update
//! ([`crate::rng::reseed_torch`]), which makes its state a function of what is saved here.

mod fsio;
pub mod manifest;
mod resume;
mod state;
mod tensors;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use protocol::wire::PolicyVersion;
use tch::{Device, Tensor};

use crate::error::{LearnerError, Result};
use crate::optim::OptimizerState;
use fsio::{publish_dir, remove_dir_if_exists, sync_dir, sync_file};
pub use manifest::{sha256_hex, Manifest};
pub use resume::{load, resolve_resume, LoadedCheckpoint, ResumeMode, SkippedCheckpoint};
use state::StateFile;
pub use state::{AppliedRecord, ConsumptionState};
pub use tensors::copy_named_into;

/// The weights file's name.
pub const WEIGHTS: &str = "weights.safetensors";
/// The optimizer moments file's name.
pub const OPTIMIZER: &str = "optimizer.safetensors";
/// The state file's name.
pub const STATE: &str = "state.json";
/// The files every checkpoint has (besides the manifest).
pub const FILES: [&str; 3] = [WEIGHTS, OPTIMIZER, STATE];

/// Everything a checkpoint holds.
#[derive(Debug)]
pub struct CheckpointData {
    /// Learner updates applied.
    pub step: u64,
    /// The policy version the weights are published as.
    pub policy_version: PolicyVersion,
    /// The model's named tensors.
    pub weights: Vec<(String, Tensor)>,
    /// The optimizer's moments and step.
    pub optimizer: OptimizerState,
    /// Every RNG the learner owns, by name, as the bytes its `to_bytes` gives.
    pub rng: BTreeMap<String, Vec<u8>>,
    /// The hash of the configuration the run was started with ([`crate::config::config_hash`]).
    pub config_hash: String,
    /// What the learner consumed since its last acknowledgement.
    pub consumption: ConsumptionState,
}

/// The directory name of the checkpoint of `step`.
pub fn step_dir_name(step: u64) -> String {
    format!("step-{step:010}")
}

/// The step of a checkpoint directory name (`step-0000000042` → 42).
pub fn parse_step_dir(name: &str) -> Option<u64> {
    name.strip_prefix("step-").filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))?.parse().ok()
}

/// The complete-looking checkpoints in `dir` (named `step-N`), newest first; a missing `dir`
/// has none. Whether each is intact is checked only when it is loaded.
pub fn list_checkpoints(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LearnerError::io(dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| LearnerError::io(dir, e))?;
        if let Some(step) = entry.file_name().to_str().and_then(parse_step_dir) {
            if entry.path().is_dir() {
                out.push((step, entry.path()));
            }
        }
    }
    out.sort_by_key(|c| std::cmp::Reverse(c.0));
    Ok(out)
}

/// Where a learner's checkpoints live and how many are kept.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    dir: PathBuf,
    keep: usize,
}

fn cpu_contiguous(named: &[(String, Tensor)]) -> Vec<(String, Tensor)> {
    named.iter().map(|(n, t)| (n.clone(), t.detach().to_device(Device::Cpu).contiguous())).collect()
}

impl CheckpointStore {
    /// A store in `dir` keeping the newest `keep` checkpoints (at least 1; keep 2 or more so
    /// that a corrupt newest one has a predecessor to fall back to).
    pub fn new(dir: impl Into<PathBuf>, keep: usize) -> Self {
        Self { dir: dir.into(), keep: keep.max(1) }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `data` as the checkpoint of `data.step` atomically, then removes all but the
    /// newest `keep`. Returns the checkpoint's directory once it is durable.
    pub fn save(&self, data: &CheckpointData) -> Result<PathBuf> {
        fs::create_dir_all(&self.dir).map_err(|e| LearnerError::io(&self.dir, e))?;
        self.remove_leftovers()?;
        let name = step_dir_name(data.step);
        let tmp = self.dir.join(format!(".tmp-{name}-{}", std::process::id()));
        remove_dir_if_exists(&tmp)?;
        fs::create_dir(&tmp).map_err(|e| LearnerError::io(&tmp, e))?;

        Tensor::write_safetensors(&cpu_contiguous(&data.weights), tmp.join(WEIGHTS))?;
        sync_file(&tmp.join(WEIGHTS))?;
        Tensor::write_safetensors(&cpu_contiguous(&data.optimizer.tensors), tmp.join(OPTIMIZER))?;
        sync_file(&tmp.join(OPTIMIZER))?;
        StateFile::from_data(data).write(&tmp.join(STATE))?;
        Manifest::write(&tmp, data.step, &FILES)?;

        let target = self.dir.join(&name);
        let trash = self.dir.join(format!(".trash-{name}-{}", std::process::id()));
        publish_dir(&self.dir, &tmp, &target, &trash)?;
        self.prune()?;
        tracing::info!(path = %target.display(), step = data.step, version = data.policy_version.0, "checkpoint saved");
        Ok(target)
    }

    /// Removes all but the newest `keep` checkpoints.
    pub fn prune(&self) -> Result<()> {
        let all = list_checkpoints(&self.dir)?;
        if all.len() <= self.keep {
            return Ok(());
        }
        for (_, path) in &all[self.keep..] {
            remove_dir_if_exists(path)?;
        }
        sync_dir(&self.dir)
    }

    /// Removes temporary directories left by a save that crashed.
    fn remove_leftovers(&self) -> Result<()> {
        for entry in fs::read_dir(&self.dir).map_err(|e| LearnerError::io(&self.dir, e))?.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(".tmp-step-") || name.starts_with(".trash-step-") {
                remove_dir_if_exists(&entry.path())?;
            }
        }
        Ok(())
    }
}
