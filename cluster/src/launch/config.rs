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
    /// The model the cold start trains from scratch: `micro`, `tiny`; empty skips SFT and RL
    /// starts from learner.model.
    pub sft_model: String,
    /// Updates of the cold start (it stops at `sft_minutes` if that comes first).
    pub sft_steps: u64,
    /// Training time limit of the cold start, in minutes.
    pub sft_minutes: f64,
    /// Wall-clock time of the RL phase, in minutes (the roles run this long).
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
        if !["", "micro", "tiny", "small"].contains(&c.sft_model.as_str()) {
            bail!(
                "config key `launch.sft_model`: expected \"micro\", \"tiny\", \"small\" or \"\", found {:?}",
                c.sft_model
            );
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
}
