//! Stable-Baselines3 as the baseline of `reagent bench cartpole`: finds the venv that
//! `scripts/sb3_venv.sh` makes, checks that it imports torch, SB3 and gymnasium (the error says
//! what is missing), and runs `scripts/sb3_cartpole.py` (compiled into this binary) for one seed
//! with our hyper-parameters, reading back its one JSON line.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use learner::cartpole::CartpoleConfig;
use serde::{Deserialize, Serialize};
use tokio::process::Command;

/// The runner script, kept in scripts/ so that it can be read and run by hand.
const SCRIPT: &str = include_str!("../../../../scripts/sb3_cartpole.py");
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

/// The interpreter to use: `--sb3-python`, else `$REAGENT_SB3_VENV/bin/python`, else the
/// repository's target/sb3-venv. Fails, saying how to make it, when it is missing or does not
/// import what the baseline needs.
pub async fn python(given: Option<&Path>) -> Result<PathBuf> {
    let python = match given {
        Some(p) => p.to_path_buf(),
        None => {
            let venv = std::env::var_os("REAGENT_SB3_VENV").map_or_else(|| PathBuf::from(DEFAULT_VENV), PathBuf::from);
            venv.join("bin/python")
        }
    };
    if !python.exists() {
        bail!(
            "--against-sb3: no Stable-Baselines3 venv at {} — run scripts/sb3_venv.sh (stable-baselines3 2.9.2 and \
             gymnasium 1.4.0 from PyPI, torch from .libtorch), or pass --sb3-python",
            python.display()
        );
    }
    let probe = "import torch, stable_baselines3, gymnasium; torch.zeros(1).sum(); \
                 print(torch.__version__, stable_baselines3.__version__, gymnasium.__version__)";
    let out = Command::new(&python)
        .args(["-c", probe])
        .output()
        .await
        .with_context(|| format!("starting {}", python.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no error output");
        bail!(
            "--against-sb3: {} cannot import torch, stable_baselines3 and gymnasium ({last}); scripts/sb3_venv.sh \
             makes a venv that can (it compiles stand-ins for the CUDA libraries PyPI's torch names)",
            python.display()
        );
    }
    Ok(python)
}

/// Runs SB3 on `cfg` (its seed) with `threads` torch threads; `Err` names the failure.
pub async fn run(python: &Path, cfg: &CartpoleConfig, threads: usize) -> Result<Sb3Run> {
    let params = serde_json::to_string(cfg)?;
    let child = Command::new(python)
        .args(["-c", SCRIPT, "--seed", &cfg.seed.to_string(), "--threads", &threads.to_string(), "--params", &params])
        .env("OMP_NUM_THREADS", threads.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", python.display()))?;
    let out = tokio::time::timeout(RUN_DEADLINE, child.wait_with_output())
        .await
        .with_context(|| format!("Stable-Baselines3 seed {} took longer than {RUN_DEADLINE:?}", cfg.seed))??;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        bail!("Stable-Baselines3 seed {} failed ({}): {}", cfg.seed, out.status, tail.join(" / "));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{')).context("Stable-Baselines3 printed no result")?;
    serde_json::from_str(line).with_context(|| format!("reading Stable-Baselines3's result: {line}"))
}
