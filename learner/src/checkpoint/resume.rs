//! Loading checkpoints and the `--resume auto|PATH|never` decision.
//!
//! ```text
//!  auto   newest intact checkpoint in the directory; a corrupt or truncated one is skipped
//!         with a warning and the previous one tried; none at all → a fresh start; only
//!         corrupt ones → an error (a silent fresh start would retrain on acknowledged data)
//!  PATH   exactly that checkpoint, verified; no fallback (it was asked for by name)
//!  never  a fresh start; refused when the directory already holds checkpoints, since new
//!         ones would be pruned against (and mixed with) the old run's
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tch::Tensor;

use super::manifest::Manifest;
use super::state::StateFile;
use super::{list_checkpoints, CheckpointData, FILES, OPTIMIZER, STATE, WEIGHTS};
use crate::error::{LearnerError, Result};
use crate::optim::OptimizerState;

/// Where a run's state comes from when the learner starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ResumeMode {
    /// The newest intact checkpoint of the run's directory, else a fresh start.
    #[default]
    Auto,
    /// This checkpoint directory, exactly.
    Path(PathBuf),
    /// A fresh start.
    Never,
}

impl FromStr for ResumeMode {
    type Err = std::convert::Infallible;
    /// `auto`, `never`, or anything else as a path.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "auto" => Self::Auto,
            "never" => Self::Never,
            path => Self::Path(PathBuf::from(path)),
        })
    }
}

impl fmt::Display for ResumeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Never => f.write_str("never"),
            Self::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

impl Serialize for ResumeMode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ResumeMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(serde::de::Error::custom("expected auto, never or a checkpoint path"));
        }
        Ok(s.parse().unwrap_or_default())
    }
}

/// A checkpoint passed over while resolving `auto`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedCheckpoint {
    /// Its directory.
    pub path: PathBuf,
    /// Why it was not used.
    pub reason: String,
}

/// A verified, loaded checkpoint.
#[derive(Debug)]
pub struct LoadedCheckpoint {
    /// Its directory.
    pub path: PathBuf,
    /// Its contents (tensors on the CPU).
    pub data: CheckpointData,
    /// Newer checkpoints that were corrupt and skipped (each logged as a warning).
    pub skipped: Vec<SkippedCheckpoint>,
}

/// Verifies every checksum of the checkpoint in `dir`, then reads it.
pub fn load(dir: &Path) -> Result<CheckpointData> {
    let manifest = Manifest::verify(dir, &FILES)?;
    let state = StateFile::read(dir, &dir.join(STATE))?;
    if state.step != manifest.step {
        return Err(LearnerError::corrupt(
            dir,
            format!("state step {} != manifest step {}", state.step, manifest.step),
        ));
    }
    let read = |name: &str| {
        Tensor::read_safetensors(dir.join(name)).map_err(|e| LearnerError::corrupt(dir, format!("{name}: {e}")))
    };
    Ok(CheckpointData {
        step: state.step,
        policy_version: state.version(),
        weights: read(WEIGHTS)?,
        optimizer: OptimizerState { step: state.optimizer_step, tensors: read(OPTIMIZER)? },
        rng: state.rng_bytes(dir)?,
        config_hash: state.config_hash.clone(),
        consumption: state.consumption,
    })
}

/// Applies `--resume` to the checkpoints in `dir` (see the module header). `Ok(None)` means
/// start fresh.
pub fn resolve_resume(dir: &Path, mode: &ResumeMode) -> Result<Option<LoadedCheckpoint>> {
    match mode {
        ResumeMode::Never => {
            let existing = list_checkpoints(dir)?;
            if let Some((step, path)) = existing.first() {
                return Err(LearnerError::NoCheckpoint(format!(
                    "resume is `never` but {} already holds {} checkpoint(s), the newest {} (step {step}); \
                     resume with `auto`, or give the run another directory",
                    dir.display(),
                    existing.len(),
                    path.display()
                )));
            }
            Ok(None)
        }
        ResumeMode::Path(path) => {
            if !path.is_dir() {
                return Err(LearnerError::NoCheckpoint(format!("{} is not a checkpoint directory", path.display())));
            }
            Ok(Some(LoadedCheckpoint { path: path.clone(), data: load(path)?, skipped: Vec::new() }))
        }
        ResumeMode::Auto => {
            let mut skipped = Vec::new();
            for (_, path) in list_checkpoints(dir)? {
                match load(&path) {
                    Ok(data) => return Ok(Some(LoadedCheckpoint { path, data, skipped })),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "checkpoint unusable; trying the previous one");
                        skipped.push(SkippedCheckpoint { path, reason: e.to_string() });
                    }
                }
            }
            if skipped.is_empty() {
                return Ok(None);
            }
            let reasons: Vec<String> = skipped.iter().map(|s| s.reason.clone()).collect();
            Err(LearnerError::NoCheckpoint(format!(
                "all {} checkpoint(s) in {} are unusable: {}",
                skipped.len(),
                dir.display(),
                reasons.join("; ")
            )))
        }
    }
}
