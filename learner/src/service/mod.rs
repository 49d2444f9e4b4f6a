//! The learner as a service over the queue (docs/architecture.md sections 1 and 5): it consumes
//! `reagent:{run}:scored` as group `learner`, trains on complete GRPO groups, publishes
//! versioned weights, and acknowledges an entry only once a durable checkpoint holds its
//! update — so whichever process dies, no trajectory is lost and none is trained on twice.
//!
//! ```text
//!  start: resolve_resume ─► restore weights, moments, step, version, ledger ─► publish vN if
//!         missing ─► XACK the checkpoint's queue_entry_ids (it is durable) ─► join the group
//!
//!  loop ─ next_batch ─► own redelivery? ignore │ id applied or batched? XACK, skip (duplicate)
//!    │                  untrainable? dead-letter │ stale? record as dropped │ else batch by group
//!    ├─ batch due ─► drop_stale ─► update (blocking thread) ─► ledger.record(step, ids, entries)
//!    │        └─ every publish_every: export ─► WeightStore::publish(v+1)
//!    │        └─ every checkpoint_every: checkpoint (ledger snapshot inside) ─► XACK its entries
//!    │           with the next read (Consumer::ack_and_next: one round trip), or alone before
//!    │           the next update when one is due first
//!    └─ every claim_idle/4: Consumer::keep(held entries), so nothing held is reclaimed
//!
//!  shutdown (CancellationToken): finish the update in progress, checkpoint, XACK, return
//! ```
//!
//! **Exactly once by trajectory id.** The [`ledger`] keeps the applied history (one record
//! per update: its step and the ids it trained or dropped), bounded to `applied_window` ids,
//! and the entries consumed since the last acknowledgement; every checkpoint holds both. After
//! a crash, entries not yet acknowledged are redelivered: those whose id the restored history
//! names are acknowledged and skipped, the rest are applied. The durable history — the newest
//! checkpoint's `history` — therefore names every trajectory applied, each once, and the
//! update that applied it.
//!
//! Every wait has a deadline: Redis commands through [`protocol::link::RedisLink`], updates
//! and checkpoints through `update_timeout_s` and `checkpoint_timeout_s`, batches through
//! `max_wait_ms`; an error names what was stuck.

pub mod age;
mod batcher;
pub mod config;
pub mod ledger;
pub mod record;
mod run;
mod trainer;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use policy::LoadedModel;
use protocol::keys::{Keys, LEARNER_GROUP};
use protocol::link::RedisLink;
use protocol::queue::Consumer;
use protocol::weights::WeightStore;
use protocol::wire::{PolicyVersion, ScoredTrajectory};
use tokio::sync::watch;

use batcher::Batcher;
pub use batcher::Held;
use config::ServiceConfig;
pub use config::ServiceSpec;
use ledger::Ledger;
use trainer::Trainer;

use crate::checkpoint::{resolve_resume, CheckpointStore};
use crate::error::{LearnerError, Result};
use crate::tensorboard::Board;
use crate::update::UpdateConfig;
use protocol::metrics::LEARNER_POLICY_VERSION;

/// What the learner has done, published on a watch channel after every change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LearnerStatus {
    /// Updates applied in total (the checkpoint's step).
    pub step: u64,
    /// The policy version published last (or resumed at).
    pub version: PolicyVersion,
    /// The step of the newest durable checkpoint, and of whose entries were acknowledged.
    pub checkpoint_step: Option<u64>,
    /// The checkpoint this process resumed from.
    pub resumed_from: Option<PathBuf>,
    /// Trajectories trained on by this process.
    pub applied: u64,
    /// Deliveries recognised as duplicates (acknowledged, skipped) by this process.
    pub duplicates: u64,
    /// Trajectories dropped as stale by this process.
    pub stale_dropped: u64,
    /// Entries sent to the dead-letter stream (untrainable) by this process.
    pub dead_lettered: u64,
    /// Batches consumed without an update (non-finite gradient) by this process.
    pub skipped_updates: u64,
    /// Trajectories waiting for their group or batch.
    pub buffered: usize,
    /// Consumed entries waiting for a checkpoint and their acknowledgement.
    pub unacknowledged: usize,
    /// The last update, as a learning-curve point.
    pub last_update: Option<record::UpdateRecord>,
}

/// The queue-consuming learner: built by [`LearnerService::start`], driven by
/// [`LearnerService::run`].
pub struct LearnerService {
    spec: ServiceSpec,
    trainer: Option<Trainer>,
    ledger: Ledger,
    batcher: Batcher,
    consumer: Consumer<ScoredTrajectory>,
    weights: WeightStore,
    store: CheckpointStore,
    status: watch::Sender<LearnerStatus>,
    keep_every: Duration,
    last_keep: Instant,
    /// Vocabulary size and longest sequence the model takes.
    limits: (i64, i64),
    /// Where update records go as TensorBoard scalars, when they do.
    board: Option<Board>,
    /// Acknowledgements that ride with the next read ([`Consumer::ack_and_next`]): duplicates
    /// skipped, and the step of a durable checkpoint whose entries (the ledger's pending ones)
    /// are to be acknowledged. Sent alone before anything else is recorded in the ledger.
    due: DueAcks,
}

/// Acknowledgements owed, sent with the learner's next read (see [`LearnerService`]).
#[derive(Debug, Default)]
struct DueAcks {
    /// Entries of duplicate deliveries.
    duplicates: Vec<String>,
    /// A durable checkpoint's step: the ledger's pending entries are all in it.
    checkpoint: Option<u64>,
}

impl std::fmt::Debug for LearnerService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LearnerService").field("status", &*self.status.borrow()).finish_non_exhaustive()
    }
}

/// Runs `f` on a blocking thread, with a deadline naming `what`.
async fn blocking<T, F>(what: &str, deadline: Duration, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    match tokio::time::timeout(deadline, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(result)) => result,
        Ok(Err(source)) => Err(LearnerError::Task { what: what.to_string(), source }),
        Err(_) => Err(LearnerError::Stuck { what: what.to_string(), after: deadline }),
    }
}

impl LearnerService {
    /// Resumes from the newest checkpoint (per `spec.learner.resume`) or starts fresh from
    /// `model`, publishes the current weights as the current version if the store does not
    /// have it, joins consumer group `learner` and acknowledges the entries the restored
    /// checkpoint holds. `model` is the run's initial model (e.g. the SFT output): with a KL
    /// penalty it is the reference, even when a checkpoint replaces the trained weights.
    pub async fn start(spec: ServiceSpec, model: LoadedModel, link: &RedisLink) -> Result<Self> {
        spec.validate()?;
        let svc: &ServiceConfig = &spec.service;
        let mut update = UpdateConfig::new(&spec.learner, svc.temperature, spec.pad_id, svc.micro_batch)?;
        update.micro_batch_tokens = svc.micro_batch_tokens;
        let (adamw, hash, window) = (spec.learner.adamw_config(), spec.config_hash(), svc.applied_window);
        let (dir, mode) = (spec.checkpoint_dir.clone(), spec.learner.resume.clone());
        let publish_dtype = spec.weights.dtype;
        let (trainer, ledger, resumed_from) =
            blocking("resuming from a checkpoint", svc.checkpoint_timeout(), move || {
                let mut trainer = Trainer::new(model, update, adamw, hash)?.with_publish_dtype(publish_dtype);
                let Some(loaded) = resolve_resume(&dir, &mode)? else {
                    return Ok((trainer, Ledger::new(window), None));
                };
                let ledger = Ledger::restore(&trainer.restore(&loaded)?, window);
                Ok((trainer, ledger, Some(loaded.path)))
            })
            .await?;
        let cfg = trainer.model().model.config();
        let limits = (cfg.vocab_size, cfg.max_position_embeddings);
        let consumer =
            Consumer::new(link, Keys::new(&spec.run).scored(), LEARNER_GROUP, spec.consumer.clone(), spec.queue)
                .await?;
        let status = LearnerStatus {
            step: trainer.step,
            version: trainer.version,
            checkpoint_step: resumed_from.as_ref().map(|_| trainer.step),
            resumed_from,
            ..LearnerStatus::default()
        };
        let mut service = Self {
            batcher: Batcher::new(
                svc.group_size,
                svc.groups_per_update,
                svc.max_wait(),
                spec.learner.separate_attempt_groups,
                spec.learner.feedback.refines().then_some(spec.refine),
            ),
            weights: WeightStore::new(link, &spec.run, spec.weights),
            store: CheckpointStore::new(&spec.checkpoint_dir, spec.learner.keep_checkpoints),
            keep_every: (spec.queue.claim_idle / 4).max(Duration::from_millis(10)),
            last_keep: Instant::now(),
            status: watch::Sender::new(status),
            trainer: Some(trainer),
            ledger,
            consumer,
            limits,
            board: spec.tensorboard.clone().map(Board::new),
            due: DueAcks::default(),
            spec,
        };
        service.publish_current_if_missing().await?;
        // The restored checkpoint is durable: what it holds can be acknowledged now.
        let held = service.ledger.pending_entries().to_vec();
        service.consumer.ack(&held).await?;
        service.ledger.acknowledged();
        LEARNER_POLICY_VERSION.set(service.status.borrow().version.0 as i64);
        Ok(service)
    }

    /// A receiver of the learner's status (for health endpoints, admin calls and tests).
    pub fn status(&self) -> watch::Receiver<LearnerStatus> {
        self.status.subscribe()
    }

    /// The spec the learner runs with.
    pub fn spec(&self) -> &ServiceSpec {
        &self.spec
    }

    /// Makes the store hold the learner's current weights under a version number that names
    /// nothing else. A learner that crashed after publishing version N but before a checkpoint
    /// covered it resumes at an older version; numbering on from there would publish a second,
    /// different N, and actors holding the first N never refetch a number they have. So when
    /// the store's latest is ahead, the current weights become latest + 1 at once (and the
    /// numbering continues from there); when it is behind or empty (a first start, or a Redis
    /// that lost its data), they are published as the current version; when it is equal, they
    /// are already there.
    async fn publish_current_if_missing(&mut self) -> Result<()> {
        let version = self.status.borrow().version;
        let target = match self.weights.latest_version().await? {
            Some(latest) if latest == version => return Ok(()),
            Some(latest) if latest > version => PolicyVersion(latest.0 + 1),
            _ => version,
        };
        let tensors =
            self.on_trainer(format!("exporting weights {target}"), self.checkpoint_timeout(), |t| t.export()).await?;
        let named: Vec<_> = tensors.iter().map(|t| t.as_named()).collect();
        self.weights.publish(target, &named).await?;
        if target != version {
            tracing::warn!(
                resumed = %version,
                published = %target,
                "versions up to the one before were published after the checkpoint this learner resumed from; numbering continues after them"
            );
            if let Some(t) = self.trainer.as_mut() {
                t.version = target;
            }
            self.status.send_modify(|s| s.version = target);
        }
        Ok(())
    }

    fn checkpoint_timeout(&self) -> Duration {
        self.spec.service.checkpoint_timeout()
    }
}
