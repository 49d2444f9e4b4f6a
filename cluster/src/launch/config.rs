//! [`LaunchConfig`]: the `[launch]` section — how `reagent run` lays a job out on one machine:
//! the supervised cold start, how many processes of each role, how long RL runs, and the
//! held-out evaluation that measures the rise.

use anyhow::{bail, Result};
use protocol::config::{section, ReagentConfig};
use serde::Deserialize;

/// `[launch]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchConfig {
    /// The model of the cold start: a built-in size trained from scratch (`micro`, `tiny`,
    /// `small`), or a pretrained model directory fine-tuned in its own tokenizer and chat
    /// template; empty skips SFT and RL starts from learner.model.
    pub sft_model: String,
    /// Updates of the cold start (it stops at `sft_minutes` if that comes first).
    pub sft_steps: u64,
    /// Training time limit of the cold start, in minutes.
    pub sft_minutes: f64,
    /// Peak learning rate of the cold start (AdamW, 20 warm-up updates, then constant).
    pub sft_lr: f64,
    /// Learner updates the RL phase runs for; 0: `rl_minutes` alone decides.
    pub rl_updates: u64,
    /// Wall-clock limit of the RL phase, in minutes (with `rl_updates`, a guard).
    pub rl_minutes: f64,
    /// Actor processes.
    pub actors: usize,
    /// RRM worker processes.
    pub rrm_workers: usize,
    /// Env-worker processes (0: actors run environments in-process).
    pub env_workers: usize,
    /// Held-out tasks of the evaluation before and after RL.
    pub eval_tasks: usize,
    /// Episodes per held-out task of the sampled evaluation (at the actors' temperature).
    pub eval_samples: usize,
    /// How long a role process gets to leave after SIGTERM before it is killed, in seconds.
    pub stop_grace_s: u64,
    /// The private redis-server's `maxmemory` in MiB (policy `noeviction`: a full server
    /// refuses writes, producers back off, nothing is silently evicted).
    pub redis_maxmemory_mb: u64,
}

impl LaunchConfig {
    /// Reads and checks `[launch]`; errors name the key.
    pub fn from_config(cfg: &ReagentConfig) -> Result<Self> {
        let c: Self = section("launch", &cfg.launch)?;
        if !["", "micro", "tiny", "small"].contains(&c.sft_model.as_str()) && c.sft_init().is_none() {
            bail!(
                "config key `launch.sft_model`: expected \"micro\", \"tiny\", \"small\", \"\" or a model directory \
                 with config.json, found {:?}",
                c.sft_model
            );
        }
        if !(c.sft_lr.is_finite() && c.sft_lr > 0.0) {
            bail!("config key `launch.sft_lr`: expected a positive learning rate, found {}", c.sft_lr);
        }
        for (key, v) in [("sft_minutes", c.sft_minutes), ("rl_minutes", c.rl_minutes)] {
            if !(v.is_finite() && v > 0.0) {
                bail!("config key `launch.{key}`: expected a positive number of minutes, found {v}");
            }
        }
        if c.sft_steps == 0 {
            bail!("config key `launch.sft_steps`: expected at least 1, found 0");
        }
        for (key, v) in [
            ("actors", c.actors),
            ("rrm_workers", c.rrm_workers),
            ("eval_tasks", c.eval_tasks),
            ("eval_samples", c.eval_samples),
            ("redis_maxmemory_mb", c.redis_maxmemory_mb as usize),
        ] {
            if v == 0 {
                bail!("config key `launch.{key}`: expected at least 1, found 0");
            }
        }
        Ok(c)
    }

    /// The pretrained model directory the cold start fine-tunes, when `sft_model` names one.
    pub fn sft_init(&self) -> Option<std::path::PathBuf> {
        let dir = std::path::Path::new(&self.sft_model);
        policy::pretrained::is_model_dir(dir).then(|| dir.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]
    use super::*;

    fn launch(toml: &str) -> Result<LaunchConfig> {
        LaunchConfig::from_config(&ReagentConfig::from_toml_str(&format!("[launch]\n{toml}")).unwrap())
    }

    #[test]
    fn sft_model_is_a_built_in_size_or_a_model_directory_and_bad_values_name_the_key() {
        assert_eq!(launch("").unwrap().sft_init(), None, "the default, micro, is a built-in size");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let path = dir.path().display().to_string();
        assert_eq!(launch(&format!("sft_model = {path:?}")).unwrap().sft_init(), Some(dir.path().to_path_buf()));

        let missing = dir.path().join("nowhere").display().to_string();
        let err = launch(&format!("sft_model = {missing:?}")).unwrap_err().to_string();
        assert!(
            err.contains("launch.sft_model") && err.contains("model directory") && err.contains("nowhere"),
            "{err}"
        );
        for bad in ["0.0", "-1e-4", "nan"] {
            let err = launch(&format!("sft_lr = {bad}")).unwrap_err().to_string();
            assert!(err.contains("launch.sft_lr"), "{bad}: {err}");
        }
    }
}
