//! `state.json`: the scalar part of a checkpoint (step, versions, RNG states, config hash) and
//! the learner's consumption state, in a form people can read.

use std::collections::BTreeMap;
use std::path::Path;

use protocol::wire::{PolicyVersion, TrajectoryId};
use serde::{Deserialize, Serialize};

use super::fsio::write_synced;
use super::CheckpointData;
use crate::error::{LearnerError, Result};

/// What one learner step consumed: one record of the applied history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppliedRecord {
    /// The update that trained `trained`; for a record with only `dropped` ids, the number of
    /// updates applied when they were consumed.
    pub step: u64,
    /// Trajectories this update trained on.
    #[serde(with = "hex_ids")]
    pub trained: Vec<TrajectoryId>,
    /// Trajectories consumed without training: stale ones, or a batch whose gradient was not
    /// finite.
    #[serde(with = "hex_ids", default)]
    pub dropped: Vec<TrajectoryId>,
}

/// What the learner consumed since it last acknowledged queue entries: on restart, entries
/// whose trajectories are listed here (or in `history`) are recognised as applied
/// (acknowledged, not retrained); the rest are redelivered and applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumptionState {
    /// Trajectories whose update this checkpoint holds (or that were dropped as stale), not yet
    /// acknowledged; stored as 32 hex digits each.
    #[serde(with = "hex_ids")]
    pub applied_since_ack: Vec<TrajectoryId>,
    /// The queue entry ids (Redis stream ids) those trajectories arrived in, to acknowledge once
    /// this checkpoint is durable.
    pub queue_entry_ids: Vec<String>,
    /// The applied history, oldest first: one record per update (and per batch of drops),
    /// bounded to the newest records holding the learner's `applied_window` ids. It recognises
    /// duplicates that arrive after their original was acknowledged, and it is the durable
    /// record of which update trained which trajectory.
    #[serde(default)]
    pub history: Vec<AppliedRecord>,
}

/// The serialised form of `state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StateFile {
    pub step: u64,
    pub optimizer_step: u64,
    pub policy_version: u64,
    /// RNG name → state bytes as hex.
    pub rng: BTreeMap<String, String>,
    pub config_hash: String,
    pub consumption: ConsumptionState,
}

impl StateFile {
    pub fn from_data(d: &CheckpointData) -> Self {
        Self {
            step: d.step,
            optimizer_step: d.optimizer.step,
            policy_version: d.policy_version.0,
            rng: d.rng.iter().map(|(k, v)| (k.clone(), hex::encode(v))).collect(),
            config_hash: d.config_hash.clone(),
            consumption: d.consumption.clone(),
        }
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        write_synced(path, &serde_json::to_vec_pretty(self).expect("the state serialises"))
    }

    pub fn read(dir: &Path, path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| LearnerError::io(path, e))?;
        serde_json::from_slice(&bytes).map_err(|e| LearnerError::corrupt(dir, format!("state.json: {e}")))
    }

    pub fn rng_bytes(&self, dir: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
        self.rng
            .iter()
            .map(|(k, v)| {
                hex::decode(v)
                    .map(|b| (k.clone(), b))
                    .map_err(|e| LearnerError::corrupt(dir, format!("rng state {k}: {e}")))
            })
            .collect()
    }

    pub fn version(&self) -> PolicyVersion {
        PolicyVersion(self.policy_version)
    }
}

mod hex_ids {
    use protocol::wire::TrajectoryId;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(ids: &[TrajectoryId], s: S) -> Result<S::Ok, S::Error> {
        ids.iter().map(|id| id.to_string()).collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<TrajectoryId>, D::Error> {
        Vec::<String>::deserialize(d)?.iter().map(|s| s.parse().map_err(serde::de::Error::custom)).collect()
    }
}
