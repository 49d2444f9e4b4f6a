//! TRL as the baseline of `reagent bench trl`: finds the venv that `scripts/trl_venv.sh` makes,
//! checks that it imports torch, transformers and TRL (the error says what to run), and runs
//! `scripts/trl_grpo.py` (compiled into this binary) on one batch size, reading back its one JSON
//! line of per-step timings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::venv::{run_script, Venv};

/// The runner script, kept in scripts/ so that it can be read and run by hand.
const SCRIPT: &str = include_str!("../../../scripts/trl_grpo.py");
/// The venv's interpreter when neither --trl-python nor REAGENT_TRL_VENV says otherwise.
const DEFAULT_VENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/trl-venv");

/// One TRL step as scripts/trl_grpo.py timed it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TrlStep {
    /// From the end of the previous step (or the start of training) to the end of this one.
    pub seconds: f64,
    /// Completion tokens of the step (each up to and including its stop token).
    pub completion_tokens: u64,
    /// Seconds inside `model.generate`.
    pub generate_seconds: f64,
    /// Seconds in the trainer's `_prepare_inputs`: generation, decoding, rewards, advantages.
    pub prepare_seconds: f64,
    /// Seconds in its `training_step`: `_prepare_inputs`, then the loss's forward and backward.
    pub training_step_seconds: f64,
}

impl TrlStep {
    /// Seconds in the loss's forward and backward (the optimizer step is not in it).
    pub fn update_seconds(&self) -> f64 {
        (self.training_step_seconds - self.prepare_seconds).max(0.0)
    }
}

/// What one TRL run reported.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrlRun {
    /// Every step, warm-up first.
    pub steps: Vec<TrlStep>,
    /// Package versions, as imported.
    pub versions: serde_json::Value,
    /// Reward cases the script checked against ours before training.
    pub reward_cases_checked: usize,
}

/// The TRL venv: target/trl-venv, or $REAGENT_TRL_VENV.
const VENV: Venv = Venv {
    env_var: "REAGENT_TRL_VENV",
    default_dir: DEFAULT_VENV,
    made_by: "scripts/trl_venv.sh (trl 1.16.0 and transformers 5.23.0 from PyPI, torch from .libtorch)",
    probe: "import torch, transformers, trl; torch.zeros(1).sum(); print(trl.__version__)",
};

/// The interpreter: `given`, else `$REAGENT_TRL_VENV/bin/python`, else the repository's
/// target/trl-venv. Fails, saying how to make it, when it is missing or cannot import TRL.
pub async fn python(given: Option<&Path>) -> Result<PathBuf> {
    VENV.python(given).await.context("bench trl")
}

/// Runs scripts/trl_grpo.py with `params` (see its header) and `threads` torch threads, within
/// `deadline`; `Err` names the failure with the end of its stderr.
pub async fn run(python: &Path, params: &serde_json::Value, threads: usize, deadline: Duration) -> Result<TrlRun> {
    let params = params.to_string();
    let line =
        run_script(python, SCRIPT, &["--params", &params], threads, deadline, "{\"steps\"").await.context("TRL")?;
    serde_json::from_str(&line).with_context(|| format!("reading TRL's result: {line}"))
}
