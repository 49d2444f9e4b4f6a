//! The queue learner's settings: [`ServiceConfig`], the typed tunables of batching, deadlines
//! and the applied-id window (checked by `validate()`, which names the bad key), and
//! [`ServiceSpec`], everything a learner process needs to start.

use protocol::config::Section;
use std::path::PathBuf;
use std::time::Duration;

use protocol::queue::QueueSettings;
use protocol::weights::WeightSettings;
use protocol::wire::RunId;
use serde::{Deserialize, Serialize};

use crate::config::LearnerConfig;
use crate::error::Result;

/// How the queue learner batches, how long it waits, and how many applied ids it remembers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    /// Trajectories that make a GRPO group complete: the actors' attempts per task (default 8,
    /// as in the paper's code).
    pub group_size: usize,
    /// Complete groups per update (default 4).
    pub groups_per_update: usize,
    /// How long, in milliseconds, a group waits for missing members and a ready group waits
    /// for others to fill the batch; after it the batch is trained as it is (default 120000).
    pub max_wait_ms: u64,
    /// The actors' sampling temperature; log-probs are recomputed at it (default 0.7, as in
    /// the paper's code).
    pub temperature: f64,
    /// Sequences per forward/backward pass, gradients accumulated; 0: no cap on rows
    /// (default 0).
    pub micro_batch: usize,
    /// Padded positions (rows × longest row) per forward/backward pass: each minibatch's
    /// trajectories are taken longest first into micro-batches within it, so rows of like
    /// length share a pass and little of it is padding; 0: no budget, the minibatch's rows in
    /// arrival order (default 8192).
    #[serde(default = "default_micro_batch_tokens")]
    pub micro_batch_tokens: usize,
    /// Applied trajectory ids remembered, in the checkpoint too, to recognise duplicate
    /// deliveries after their original was acknowledged (default 100000).
    pub applied_window: usize,
    /// Deadline of one update on its blocking thread, in seconds (default 1800).
    pub update_timeout_s: u64,
    /// Deadline of writing one checkpoint, in seconds (default 600).
    pub checkpoint_timeout_s: u64,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            group_size: 8,
            groups_per_update: 4,
            max_wait_ms: 120_000,
            temperature: 0.7,
            micro_batch: 0,
            micro_batch_tokens: default_micro_batch_tokens(),
            applied_window: 100_000,
            update_timeout_s: 1800,
            checkpoint_timeout_s: 600,
        }
    }
}

fn default_micro_batch_tokens() -> usize {
    8192
}

/// The section these checks name keys under.
const SECTION: Section<'static> = Section("learner.service");

impl ServiceConfig {
    /// Checks every value; the first problem is returned, naming its key.
    pub fn validate(&self) -> Result<()> {
        SECTION.check(self.group_size >= 1, "group_size", "an integer >= 1", self.group_size)?;
        SECTION.check(self.groups_per_update >= 1, "groups_per_update", "an integer >= 1", self.groups_per_update)?;
        SECTION.check(self.max_wait_ms >= 1, "max_wait_ms", "an integer >= 1", self.max_wait_ms)?;
        let t = self.temperature;
        SECTION.check(t.is_finite() && t > 0.0, "temperature", "a number > 0", t)?;
        SECTION.check(self.applied_window >= 1, "applied_window", "an integer >= 1", self.applied_window)?;
        SECTION.check(self.update_timeout_s >= 1, "update_timeout_s", "an integer >= 1", self.update_timeout_s)?;
        Ok(SECTION.check(
            self.checkpoint_timeout_s >= 1,
            "checkpoint_timeout_s",
            "an integer >= 1",
            self.checkpoint_timeout_s,
        )?)
    }

    /// [`ServiceConfig::max_wait_ms`] as a duration.
    pub fn max_wait(&self) -> Duration {
        Duration::from_millis(self.max_wait_ms)
    }

    /// [`ServiceConfig::update_timeout_s`] as a duration.
    pub fn update_timeout(&self) -> Duration {
        Duration::from_secs(self.update_timeout_s)
    }

    /// [`ServiceConfig::checkpoint_timeout_s`] as a duration.
    pub fn checkpoint_timeout(&self) -> Duration {
        Duration::from_secs(self.checkpoint_timeout_s)
    }
}

/// Everything a learner process needs besides its model and its Redis link.
#[derive(Debug, Clone)]
pub struct ServiceSpec {
    /// The run: its streams and weight keys.
    pub run: RunId,
    /// The learner's consumer name in group `learner`. Keep it stable across restarts (a
    /// restarted learner first takes back the entries its previous incarnation held).
    pub consumer: String,
    /// Where checkpoints are written and resumed from.
    pub checkpoint_dir: PathBuf,
    /// `[learner]`: rewards, loss, optimizer, staleness, publish and checkpoint cadence, resume.
    pub learner: LearnerConfig,
    /// Batching, deadlines and the applied-id window.
    pub service: ServiceConfig,
    /// `[queue]` tunables.
    pub queue: QueueSettings,
    /// `[weights]` tunables.
    pub weights: WeightSettings,
    /// Which initial attempts the actors refine (`actor.refine`, copied in): how many refined
    /// attempts a group will have, so the batcher does not wait for ones that never come.
    pub refine: episode::RefineWhich,
    /// The tokenizer's padding id.
    pub pad_id: u32,
    /// A file the learner appends one JSON line per update to (its [`super::record::UpdateRecord`]),
    /// written before the update's status is published, so no update is missed.
    pub records: Option<PathBuf>,
    /// A folder the learner writes TensorBoard event files to, every number of each update
    /// record as a scalar at its step ([`crate::tensorboard`]).
    pub tensorboard: Option<PathBuf>,
}

impl ServiceSpec {
    /// Checks the learner and service sections and the consumer name.
    pub fn validate(&self) -> Result<()> {
        self.learner.validate()?;
        self.service.validate()?;
        Ok(SECTION.check(!self.consumer.trim().is_empty(), "consumer", "a non-empty consumer name", &self.consumer)?)
    }

    /// The hash recorded in checkpoints: of the learner and service sections as JSON.
    pub fn config_hash(&self) -> String {
        let text = serde_json::json!({ "learner": self.learner, "service": self.service }).to_string();
        crate::config::config_hash(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_values_name_their_key() {
        ServiceConfig::default().validate().unwrap();
        let bad = ServiceConfig { temperature: 0.0, ..ServiceConfig::default() };
        match bad.validate() {
            Err(e) => assert_eq!(e.config_key(), Some("learner.service.temperature"), "{e}"),
            other => panic!("expected a config error, got {other:?}"),
        }
        let text = "group_size = 4\ngroups_per_update = 2\nmax_wait_ms = 10\ntemperature = 1.0\nmicro_batch = 0\n\
                    applied_window = 9\nupdate_timeout_s = 1\ncheckpoint_timeout_s = 1\nextra = 1\n";
        assert!(toml::from_str::<ServiceConfig>(text).unwrap_err().to_string().contains("extra"));
    }
}
