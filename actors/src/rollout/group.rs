//! One group: G concurrent initial attempts at one task, published together; then, where the
//! run's feedback mode refines (critique, unified), a refined attempt for every initial one that
//! `actor.refine` selects (every one, or the failed ones: [`episode::RefineWhich`]) and whose
//! critique came back judged, published together too. Refined attempts keep the group id
//! (the learner normalises them apart, or not, per `learner.separate_attempt_groups`).
//!
//! ```text
//!  G × attempt::play(initial) ─► Publish(G) ─┬─ outcome / score: done
//!                                            └─ critique / unified: await_critiques(selected ids)
//!       judged ─► attempt::play(Refined { of }, task + attempt + critique) ─► Publish(judged)
//!       failed / timed out / not requested ─► counted, no refinement
//! ```
//!
//! Each step is timed as a [`Phase`] (initial, publish, critique wait, refined).

use std::sync::atomic::{AtomicU64, Ordering};

use episode::{EpisodeResult, EpisodeTask};
use futures::future::try_join_all;
use protocol::wire::{Attempt, GroupId, TaskSpec, Trajectory};

use super::attempt::{self, Refinement};
use super::critique::{await_critiques, Critique};
use super::phase::{timed, Phase};
use super::Slot;
use crate::error::Result;
use crate::publisher::PublisherMsg;

/// Episodes of a group played (or being played) but not yet published: what a graceful leave
/// drops if it cuts the group short.
#[derive(Debug, Default)]
pub struct Unpublished(AtomicU64);

impl Unpublished {
    /// Episodes not yet published.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
    fn add(&self, n: usize) {
        self.0.fetch_add(n as u64, Ordering::SeqCst);
    }
    fn published(&self, n: usize) {
        self.0.fetch_sub(n as u64, Ordering::SeqCst);
    }
}

async fn publish(slot: &Slot, results: &[EpisodeResult], unpublished: &Unpublished) -> Result<()> {
    let batch: Vec<Trajectory> = results.iter().map(|r| r.trajectory.clone()).collect();
    let call = slot.publisher.call("publish", |reply| PublisherMsg::Publish(batch, reply), slot.call_timeout);
    timed(&slot.stats, Phase::Publish, call).await??;
    unpublished.published(results.len());
    Ok(())
}

/// Plays and publishes one group at `spec`.
pub async fn play_group(slot: &Slot, spec: TaskSpec, unpublished: &Unpublished) -> Result<()> {
    let group_id = GroupId::random();
    let task = EpisodeTask::initial(spec, group_id);
    unpublished.add(slot.group_size);
    let attempts = try_join_all((0..slot.group_size).map(|_| attempt::play(slot, task, None)));
    let initial = timed(&slot.stats, Phase::Initial, attempts).await?;
    publish(slot, &initial, unpublished).await?;
    slot.stats.groups.fetch_add(1, Ordering::SeqCst);
    let Some(critique) = &slot.critique else { return Ok(()) };

    let selected: Vec<&EpisodeResult> = initial.iter().filter(|r| slot.rollout.refine.refines(&r.trajectory)).collect();
    if selected.is_empty() {
        return Ok(());
    }
    let ids: Vec<_> = selected.iter().map(|r| r.trajectory.id).collect();
    let waiting = await_critiques(&critique.link, &critique.keys, &ids, critique.wait);
    let critiques = timed(&slot.stats, Phase::CritiqueWait, waiting).await?;
    let mut judged = Vec::new();
    for first in selected {
        match critiques.get(&first.trajectory.id) {
            Some(Critique::Judged(text)) => {
                slot.stats.critiques_judged.fetch_add(1, Ordering::SeqCst);
                judged.push((first, text.as_str()));
            }
            Some(Critique::Failed(reason)) => {
                slot.stats.critiques_failed.fetch_add(1, Ordering::SeqCst);
                tracing::info!(trajectory_id = %first.trajectory.id, %reason, "critique failed; no refinement");
            }
            Some(Critique::TimedOut) | None => {
                slot.stats.critiques_timed_out.fetch_add(1, Ordering::SeqCst);
                tracing::info!(trajectory_id = %first.trajectory.id, wait = ?critique.wait, "no critique in time; no refinement");
            }
            Some(Critique::NotRequested) => {}
        }
    }
    if judged.is_empty() {
        return Ok(());
    }
    unpublished.add(judged.len());
    let attempts = try_join_all(judged.iter().map(|(first, text)| {
        let task = EpisodeTask { spec, group_id, attempt: Attempt::Refined { of: first.trajectory.id } };
        attempt::play(slot, task, Some(Refinement { first: &first.trajectory, critique: text }))
    }));
    let refined = timed(&slot.stats, Phase::Refined, attempts).await?;
    publish(slot, &refined, unpublished).await
}
