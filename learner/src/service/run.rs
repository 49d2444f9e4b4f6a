//! The learner's loop: deliveries in, updates, publishes, checkpoints and acknowledgements out
//! (see the module header of [`super`]).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use protocol::queue::Delivery;
use protocol::wire::{Episode, PolicyVersion, ScoredTrajectory, TrajectoryId};
use tokio_util::sync::CancellationToken;

use super::age::TrainedAges;
use super::batcher::Held;
use super::record::UpdateRecord;
use super::trainer::Trainer;
use super::{LearnerService, LearnerStatus};
use crate::error::{LearnerError, Result};
use crate::staleness::{drop_stale, is_stale};
use protocol::metrics::{
    LEARNER_CHECKPOINT_SECONDS, LEARNER_DUPLICATES_SKIPPED, LEARNER_FLAT_GROUPS, LEARNER_POLICY_VERSION,
    LEARNER_STALE_DROPPED, LEARNER_TRAJECTORIES_APPLIED, LEARNER_UPDATES, LEARNER_UPDATES_SKIPPED,
    LEARNER_UPDATE_SECONDS,
};

type Consumed = Vec<(TrajectoryId, String)>;

/// Why a trajectory cannot be trained on by this model, if it cannot.
fn untrainable(st: &ScoredTrajectory, (vocab, max_len): (i64, i64)) -> Option<String> {
    let Episode::Text(turns) = &st.trajectory.episode else {
        return Some("a control episode; this learner trains a language model".into());
    };
    let len: usize = turns.iter().map(|t| t.token_ids.len()).sum();
    if len as i64 > max_len {
        return Some(format!("{len} tokens, more than the model's {max_len} positions"));
    }
    let bad = turns.iter().flat_map(|t| &t.token_ids).find(|&&id| i64::from(id) >= vocab);
    bad.map(|id| format!("token id {id} is outside the model's vocabulary of {vocab}"))
}

impl LearnerService {
    /// Consumes and trains until `shutdown` is cancelled; then finishes the update in progress,
    /// checkpoints, acknowledges, and returns the final status. An error leaves the newest
    /// checkpoint as the state to resume from; nothing unacknowledged is lost.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<LearnerStatus> {
        while !shutdown.is_cancelled() {
            if let Some(batch) = self.batcher.take(Instant::now()) {
                self.train(batch).await?;
                continue;
            }
            let owed = self.due_acks();
            let (_, deliveries) = self.consumer.ack_and_next(&owed).await?;
            self.acknowledged();
            self.accept(deliveries).await?;
            if self.last_keep.elapsed() >= self.keep_every {
                self.keep_alive().await?;
            }
        }
        self.flush_acks().await?;
        let step = self.trainer()?.step;
        let behind = self.status.borrow().checkpoint_step.map_or(step > 0, |c| c != step);
        if behind || self.ledger.has_unacknowledged() {
            self.checkpoint().await?;
            self.flush_acks().await?;
        }
        tracing::info!(step, version = %self.status.borrow().version, "learner stopped");
        Ok(self.status.borrow().clone())
    }

    fn trainer(&self) -> Result<&Trainer> {
        self.trainer.as_ref().ok_or_else(|| LearnerError::TrainerLost { what: "reading the step and version".into() })
    }

    fn set_status(&self, f: impl FnOnce(&mut LearnerStatus)) {
        let (buffered, unacknowledged) = (self.batcher.len(), self.ledger.pending_entries().len());
        self.status.send_modify(|s| {
            f(s);
            s.buffered = buffered;
            s.unacknowledged = unacknowledged;
        });
    }

    /// Sorts deliveries: own redeliveries ignored, duplicates acknowledged, untrainable ones
    /// dead-lettered, stale ones recorded as dropped, the rest batched.
    async fn accept(&mut self, deliveries: Vec<Delivery<ScoredTrajectory>>) -> Result<()> {
        let (now, version, step) = (Instant::now(), self.trainer()?.version, self.trainer()?.step);
        let (mut duplicates, mut stale, mut dead) = (Vec::new(), Consumed::new(), 0u64);
        let (mut stale_ids, mut waiting) = (HashSet::new(), Vec::new());
        // What waits here and went stale as the policy moved on is dropped now, not after
        // max_wait: it could not be trained, and it holds the stream's acknowledgement back.
        let max_staleness = self.spec.learner.max_staleness;
        let evicted = self.batcher.take_stale(version, max_staleness, now);
        for h in evicted {
            stale_ids.insert(h.id());
            stale.push((h.id(), h.entry_id));
        }
        for d in deliveries {
            if self.batcher.holds_entry(&d.entry_id) || self.ledger.holds_entry(&d.entry_id) {
                continue; // ours already: redelivered to us after an idle spell
            }
            let id = d.item.trajectory.id;
            if self.ledger.is_applied(id) || self.batcher.contains(id) || stale_ids.contains(&id) {
                tracing::debug!(trajectory = %id, entry = %d.entry_id, "duplicate delivery; acknowledged and skipped");
                duplicates.push(d.entry_id);
            } else if let Some(reason) = untrainable(&d.item, self.limits) {
                self.batcher.lost(&d.item.trajectory, now);
                dead += u64::from(self.consumer.dead_letter(&d.entry_id, d.deliveries, &reason).await?);
            } else if is_stale(d.item.trajectory.policy_version, version, max_staleness) {
                self.batcher.lost(&d.item.trajectory, now);
                stale_ids.insert(id);
                waiting.push(d.entry_id.clone());
                stale.push((id, d.entry_id));
            } else {
                waiting.push(d.entry_id.clone());
                self.batcher.push(Held { entry_id: d.entry_id, item: d.item }, now);
            }
        }
        // Batched or dropped, these are not being processed: a crash now is not their failure.
        self.consumer.finish(&waiting).await?;
        if !duplicates.is_empty() {
            LEARNER_DUPLICATES_SKIPPED.inc_by(duplicates.len() as u64);
            self.due.duplicates.extend(duplicates.iter().cloned());
        }
        LEARNER_STALE_DROPPED.inc_by(stale.len() as u64);
        self.ledger.record(step, &[], &stale);
        let n = (duplicates.len() as u64, stale.len() as u64);
        self.set_status(|s| {
            s.duplicates += n.0;
            s.stale_dropped += n.1;
            s.dead_lettered += dead;
        });
        Ok(())
    }

    /// One update on `batch` (after dropping what went stale while it waited), then the
    /// publish and the checkpoint when they are due.
    async fn train(&mut self, batch: Vec<Held>) -> Result<()> {
        // What a checkpoint made acknowledgeable goes before the ledger records anything new.
        self.flush_acks().await?;
        let (version, step) = (self.trainer()?.version, self.trainer()?.step);
        let entries: HashMap<TrajectoryId, String> = batch.iter().map(|h| (h.id(), h.entry_id.clone())).collect();
        let filtered =
            drop_stale(batch.into_iter().map(|h| h.item).collect(), version, self.spec.learner.max_staleness);
        let pair = |id: TrajectoryId| (id, entries[&id].clone());
        let dropped: Consumed = filtered.dropped.iter().map(|&id| pair(id)).collect();
        let kept: Consumed = filtered.kept.iter().map(|st| pair(st.trajectory.id)).collect();
        if !dropped.is_empty() {
            self.set_status(|s| s.stale_dropped += dropped.len() as u64);
        }
        if filtered.kept.is_empty() {
            self.ledger.record(step, &[], &dropped);
            return Ok(());
        }
        let publish = (step + 1) % self.spec.learner.publish_every == 0;
        let items = filtered.kept;
        let ages = TrainedAges::of(&items, protocol::clock::unix_ms());
        ages.observe();
        let pending_record = UpdateRecord::of_batch(&items, version).with_ages(&ages);
        let what = format!("update {} ({} trajectories, blocking thread)", step + 1, items.len());
        // In progress from here until the update is over: an update that crashes the learner
        // every time counts against its entries, and they end in the dead-letter stream.
        let updating: Vec<String> = kept.iter().map(|(_, e)| e.clone()).collect();
        self.consumer.begin(&updating).await?;
        let result = self
            .on_trainer(what, self.spec.service.update_timeout(), move |t| {
                let stats = t.update(&items)?;
                Ok((stats, if publish { Some(t.export()?) } else { None }))
            })
            .await;
        if matches!(result, Ok(_) | Err(LearnerError::NonFiniteGradient(_))) {
            self.consumer.finish(&updating).await?;
        }
        let (stats, exported) = match result {
            Err(LearnerError::NonFiniteGradient(norm)) => {
                tracing::warn!(
                    step,
                    norm,
                    trajectories = kept.len(),
                    "non-finite gradient; batch consumed without an update"
                );
                LEARNER_UPDATES_SKIPPED.inc();
                self.ledger.record(step, &[], &[kept, dropped].concat());
                self.set_status(|s| s.skipped_updates += 1);
                return Ok(());
            }
            other => other?,
        };
        let step = step + 1;
        let record = pending_record.finish(&stats);
        record.observe();
        if let Some(path) = &self.spec.records {
            if let Err(e) = record.append_to(path) {
                tracing::warn!(path = %path.display(), error = %e, "could not append the update record");
            }
        }
        if let Some(board) = &mut self.board {
            if let Err(e) = record.write_to(board) {
                tracing::warn!(dir = %board.dir().display(), error = %e, "could not write the update to TensorBoard");
            }
        }
        LEARNER_UPDATES.inc();
        LEARNER_UPDATE_SECONDS.observe(stats.elapsed.as_secs_f64());
        LEARNER_TRAJECTORIES_APPLIED.inc_by(kept.len() as u64);
        LEARNER_FLAT_GROUPS.inc_by(stats.flat_groups as u64);
        self.ledger.record(step, &kept, &dropped);
        tracing::info!(
            step,
            trajectories = stats.trajectories,
            groups = stats.groups,
            reward_mean = stats.reward_mean,
            loss = stats.loss.total,
            grad_norm = stats.optimizer.grad_norm,
            flat_groups = stats.flat_groups,
            steps = stats.steps,
            clip_low = stats.loss.clip_low_fraction,
            clip_high = stats.loss.clip_high_fraction,
            kl_proximal = stats.loss.approx_kl,
            kl_behaviour = stats.loss.kl_behaviour,
            is_weight_mean = stats.loss.is_weight_mean,
            is_truncated = stats.loss.is_truncated_fraction,
            elapsed_ms = stats.elapsed.as_millis() as u64,
            "update applied"
        );
        let mut new_version = None;
        if let Some(tensors) = exported {
            let v = PolicyVersion(version.0 + 1);
            let named: Vec<_> = tensors.iter().map(|t| t.as_named()).collect();
            // A full Redis (maxmemory) frees room as superseded versions expire: wait for it
            // rather than leave the run, for two grace periods and half a minute.
            let patience = self.spec.weights.expire_grace * 2 + Duration::from_secs(30);
            self.weights.publish_when_room(v, &named, patience).await?;
            if let Some(t) = self.trainer.as_mut() {
                t.version = v;
            }
            LEARNER_POLICY_VERSION.set(v.0 as i64);
            new_version = Some(v);
        }
        self.set_status(|s| {
            s.step = step;
            s.applied += kept.len() as u64;
            s.version = new_version.unwrap_or(s.version);
            s.last_update = Some(record);
        });
        if step % self.spec.learner.checkpoint_every == 0 {
            self.checkpoint().await?;
        }
        Ok(())
    }

    /// Writes a checkpoint holding everything consumed so far; its entries are acknowledged
    /// with the next read, or by [`LearnerService::flush_acks`] before anything else is
    /// recorded.
    async fn checkpoint(&mut self) -> Result<()> {
        let (consumption, store) = (self.ledger.snapshot(), self.store.clone());
        let step = self.trainer()?.step;
        let started = Instant::now();
        let what = format!("checkpoint of step {step} in {}", store.dir().display());
        self.on_trainer(what, self.spec.service.checkpoint_timeout(), move |t| t.checkpoint(&store, consumption))
            .await?;
        LEARNER_CHECKPOINT_SECONDS.observe(started.elapsed().as_secs_f64());
        self.due.checkpoint = Some(step);
        Ok(())
    }

    /// The entries owed an acknowledgement: duplicates, and a durable checkpoint's entries.
    fn due_acks(&self) -> Vec<String> {
        let held = if self.due.checkpoint.is_some() { self.ledger.pending_entries() } else { &[] };
        self.due.duplicates.iter().chain(held).cloned().collect()
    }

    /// Notes that [`LearnerService::due_acks`] were acknowledged: the ledger lets go of a
    /// checkpoint's entries, and the status names the checkpoint.
    fn acknowledged(&mut self) {
        self.due.duplicates.clear();
        if let Some(step) = self.due.checkpoint.take() {
            self.ledger.acknowledged();
            self.set_status(|s| s.checkpoint_step = Some(step));
        }
    }

    /// Acknowledges what is owed on its own (no read follows).
    async fn flush_acks(&mut self) -> Result<()> {
        let owed = self.due_acks();
        self.consumer.ack(&owed).await?;
        self.acknowledged();
        Ok(())
    }

    /// Renews the lease on every entry the learner holds (batched or awaiting a checkpoint).
    async fn keep_alive(&mut self) -> Result<()> {
        let held: Vec<String> = self.batcher.entry_ids().chain(self.ledger.pending_entries()).cloned().collect();
        self.last_keep = Instant::now();
        if held.is_empty() {
            return Ok(());
        }
        let kept = self.consumer.keep(&held).await?;
        if kept.len() < held.len() {
            tracing::warn!(
                lost = held.len() - kept.len(),
                consumer = %self.spec.consumer,
                "entries the learner held were reclaimed by another consumer or dead-lettered; is a second learner running?"
            );
        }
        Ok(())
    }

    /// Runs `f` on the trainer on a blocking thread with a deadline naming `what`, renewing the
    /// lease on held entries while it runs.
    pub(super) async fn on_trainer<T, F>(&mut self, what: String, deadline: Duration, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Trainer) -> Result<T> + Send + 'static,
    {
        let mut trainer = self.trainer.take().ok_or_else(|| LearnerError::TrainerLost { what: what.clone() })?;
        let mut handle = tokio::task::spawn_blocking(move || {
            let result = f(&mut trainer);
            (trainer, result)
        });
        let stuck = tokio::time::sleep(deadline);
        tokio::pin!(stuck);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + self.keep_every, self.keep_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                joined = &mut handle => {
                    let (trainer, result) =
                        joined.map_err(|source| LearnerError::Task { what: what.clone(), source })?;
                    self.trainer = Some(trainer);
                    return result;
                }
                _ = &mut stuck => return Err(LearnerError::Stuck { what, after: deadline }),
                _ = tick.tick() => self.keep_alive().await?,
            }
        }
    }
}
