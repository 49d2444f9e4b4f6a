//! Stable-Baselines3 as the baseline of `reagent bench cartpole`: finds the venv that
//! `scripts/sb3_venv.sh` makes, checks that it imports torch, SB3 and gymnasium (the error says
//! what is missing), and runs `scripts/sb3_cartpole.py` (compiled into this binary) for one seed
//! with our hyper-parameters, reading back its one JSON line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use learner::cartpole::CartpoleConfig;
use serde::{Deserialize, Serialize};

use crate::venv::{run_script, Venv};

/// The runner script, kept in scripts/ so that it can be read and run by hand.
const SCRIPT: &str = include_str!("../../../scripts/sb3_cartpole.py");
/// The venv's interpreter when neither --sb3-python nor REAGENT_SB3_VENV says otherwise.
const DEFAULT_VENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/sb3-venv");
/// How long one SB3 run may take (100k steps take seconds to a minute on two busy cores).
const RUN_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// What one SB3 run reported (scripts/sb3_cartpole.py's JSON line).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sb3Run {
    /// The seed.
    pub seed: u64,
    /// Environment steps taken.
    pub steps: u64,
    /// (step, mean return of the greedy evaluation).
    pub evaluations: Vec<(u64, f64)>,
    /// The step of the first evaluation with mean ≥ 475.
    pub first_solved_step: Option<u64>,
    /// learn()'s wall time less the evaluations'.
    pub train_wall_s: f64,
    /// The evaluations' wall time.
    pub eval_wall_s: f64,
    /// Package versions, as imported.
    pub versions: serde_json::Value,
}

/// The Stable-Baselines3 venv: target/sb3-venv, or $REAGENT_SB3_VENV.
const VENV: Venv = Venv {
    env_var: "REAGENT_SB3_VENV",
    default_dir: DEFAULT_VENV,
    made_by: "scripts/sb3_venv.sh (stable-baselines3 2.9.2 and gymnasium 1.4.0 from PyPI, torch from .libtorch; \
              it compiles stand-ins for the CUDA libraries PyPI's torch names)",
    probe: "import torch, stable_baselines3, gymnasium; torch.zeros(1).sum(); \
            print(torch.__version__, stable_baselines3.__version__, gymnasium.__version__)",
};

/// The interpreter to use: `--sb3-python`, else `$REAGENT_SB3_VENV/bin/python`, else the
/// repository's target/sb3-venv. Fails, saying how to make it, when it is missing or does not
/// import what the baseline needs.
pub async fn python(given: Option<&Path>) -> Result<PathBuf> {
    VENV.python(given).await.context("--against-sb3")
}

/// Runs SB3 on `cfg` (its seed) with `threads` torch threads; `Err` names the failure.
pub async fn run(python: &Path, cfg: &CartpoleConfig, threads: usize) -> Result<Sb3Run> {
    let params = serde_json::to_string(cfg)?;
    let (seed, t) = (cfg.seed.to_string(), threads.to_string());
    let args = ["--seed", seed.as_str(), "--threads", t.as_str(), "--params", params.as_str()];
    let line = run_script(python, SCRIPT, &args, threads, RUN_DEADLINE, "{")
        .await
        .with_context(|| format!("Stable-Baselines3 seed {}", cfg.seed))?;
    serde_json::from_str(&line).with_context(|| format!("reading Stable-Baselines3's result: {line}"))
}
