//! The learner's tch side: the model being trained, the frozen reference, AdamW, the step and
//! the policy version. It is moved onto a blocking thread for every update, checkpoint and
//! export, and back (CODE_STYLE.md rule 5: tch never runs on the async runtime).

use std::collections::BTreeMap;
use std::path::PathBuf;

use policy::weights::{export_as, OwnedTensor};
use policy::LoadedModel;
use protocol::wire::{PolicyVersion, ScoredTrajectory};
use tch::Tensor;

use crate::checkpoint::{CheckpointData, CheckpointStore, ConsumptionState, LoadedCheckpoint};
use crate::error::Result;
use crate::optim::AdamW;
use crate::update::{grpo_update, Models, UpdateConfig, UpdateStats};

/// The training state a checkpoint holds, on whatever device the model lives.
#[derive(Debug)]
pub struct Trainer {
    model: LoadedModel,
    reference: Option<LoadedModel>,
    opt: AdamW,
    update: UpdateConfig,
    /// Updates applied.
    pub step: u64,
    /// The newest published (or resumed) policy version.
    pub version: PolicyVersion,
    config_hash: String,
    /// The kind published weights are cast to (`weights.dtype`); `None`: the model's own.
    publish_kind: Option<tch::Kind>,
}

impl Trainer {
    /// A trainer over `model`; with `kl_coef > 0` a frozen copy of these initial weights is the
    /// KL reference (taken before any checkpoint is restored, so a resumed run keeps the run's
    /// reference, not the checkpoint's weights).
    pub fn new(
        model: LoadedModel,
        update: UpdateConfig,
        adamw: crate::optim::AdamWConfig,
        hash: String,
    ) -> Result<Self> {
        let reference = if update.loss.kl_coef > 0.0 {
            // In the policy's kind (learner.precision), not the device's default.
            let kind = model.vs.variables().values().next().map_or(tch::Kind::Float, |t| t.kind());
            let mut r =
                LoadedModel::fresh_as(model.model.config(), model.model.device(), kind, model.model.has_value_head())?;
            r.vs.copy(&model.vs)?;
            r.vs.freeze();
            Some(r)
        } else {
            None
        };
        let opt = AdamW::from_named(model.vs.variables(), adamw);
        Ok(Self {
            model,
            reference,
            opt,
            update,
            step: 0,
            version: PolicyVersion(0),
            config_hash: hash,
            publish_kind: None,
        })
    }

    /// Publishes weights as `dtype` says (`auto`: the model's training kind).
    pub fn with_publish_dtype(mut self, dtype: protocol::config::Precision) -> Self {
        self.publish_kind = match dtype {
            protocol::config::Precision::Auto => None,
            other => Some(policy::device::precision_kind(other, self.model.model.device())),
        };
        self
    }

    /// Restores weights, optimizer moments, step and version from a loaded checkpoint; returns
    /// its consumption state. A different config hash is allowed (a resumed run may change,
    /// say, the learning rate) and logged.
    pub fn restore(&mut self, loaded: &LoadedCheckpoint) -> Result<ConsumptionState> {
        let data = &loaded.data;
        // The fp32 masters exactly, and the working copies rounded from them (the same as the
        // run had: it rounded the same masters).
        self.opt.load_master_weights(&data.weights)?;
        self.opt.load_state(&data.optimizer)?;
        self.step = data.step;
        self.version = data.policy_version;
        if data.config_hash != self.config_hash {
            tracing::warn!(
                path = %loaded.path.display(),
                checkpoint = %data.config_hash,
                now = %self.config_hash,
                "resuming with a configuration other than the checkpoint's"
            );
        }
        tracing::info!(path = %loaded.path.display(), step = self.step, version = self.version.0, "resumed from checkpoint");
        Ok(data.consumption.clone())
    }

    /// One GRPO update on `batch`; the step advances only when the weights changed.
    pub fn update(&mut self, batch: &[ScoredTrajectory]) -> Result<UpdateStats> {
        let models = Models { policy: &self.model.model, reference: self.reference.as_ref().map(|r| &r.model) };
        let stats = grpo_update(models, &mut self.opt, batch, &self.update)?;
        self.step += 1;
        Ok(stats)
    }

    /// The weights as the weight store takes them, in the publish kind.
    pub fn export(&self) -> Result<Vec<OwnedTensor>> {
        Ok(export_as(&self.model.vs, self.publish_kind)?)
    }

    /// Writes a checkpoint of the current state with `consumption`; returns its directory once
    /// durable.
    pub fn checkpoint(&self, store: &CheckpointStore, consumption: ConsumptionState) -> Result<PathBuf> {
        // The fp32 masters (the working copies when they are fp32 themselves): what resumes exactly.
        let mut weights: Vec<(String, Tensor)> = self.opt.master_weights();
        weights.sort_by(|a, b| a.0.cmp(&b.0));
        store.save(&CheckpointData {
            step: self.step,
            policy_version: self.version,
            weights,
            optimizer: self.opt.state(),
            // No generator of our own: libtorch's is re-seeded from (seed, step) per update.
            rng: BTreeMap::new(),
            config_hash: self.config_hash.clone(),
            consumption,
        })
    }

    /// The model being trained.
    pub fn model(&self) -> &LoadedModel {
        &self.model
    }
}
