//! The worker loop: trajectories in, verdicts attached, scored trajectories out, each exactly
//! once (docs/architecture.md sections 1 and 5).
//!
//! ```text
//!  loop until cancelled (checked between batches; the batch in flight is always finished):
//!    the batch read with the last forward, or Consumer<Trajectory>::next_batch
//!      reagent:{run}:rollouts, group "rrm" (own unfinished entries first, then entries a
//!      dead worker left idle, then new ones)
//!    judge the batch, at most max_concurrency at once, per plan (feedback mode × attempt ×
//!      actor.refine: in critique mode, no judge call for an initial attempt left unrefined)
//!      └─ meanwhile Consumer::keep renews the batch's lease, so a slow judge is not reclaimed
//!    critique replies for the initial attempts refined (modes that refine) ── before forwarding
//!    Consumer::forward_and_next ── [XADD scored; XACK rollouts] in one script, only entries
//!      still ours, pipelined with the read of the next batch: one round trip (once cancelled,
//!      Consumer::forward alone, so that nothing more is read)
//! ```
//!
//! A judge failure is a `Verdict::Failed` (counted, logged), never a lost trajectory; a Redis
//! failure past its retries ends the loop with an error and leaves the batch pending, to be
//! reclaimed by another worker.

mod plan;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use protocol::keys::{Keys, LEARNER_GROUP, RRM_GROUP};
use protocol::link::RedisLink;
use protocol::queue::{Consumer, Delivery, Producer, QueueSettings};
use protocol::wire::{RunId, ScoredTrajectory, Trajectory, TrajectoryId, Validate, Verdict};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use plan::Plan;

use crate::error::{JudgeError, RrmError};
use crate::judge::Judge;
use protocol::metrics;

/// How the worker behaves, beside its queues and its judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSettings {
    /// What is judged and replied to: `run.feedback` and `actor.refine`.
    pub plan: Plan,
    /// Judgements in flight at once.
    pub max_concurrency: usize,
    /// Expiry of critique replies.
    pub critique_reply_ttl: Duration,
}

/// What a worker has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Non-empty batches handled.
    pub batches: u64,
    /// Trajectories forwarded with a judgement.
    pub judged: u64,
    /// Trajectories forwarded with a failed verdict.
    pub failed: u64,
    /// Trajectories forwarded without judging (the plan did not ask for it).
    pub not_requested: u64,
    /// Of those, initial attempts in `critique` mode that the actors do not refine
    /// (`actor.refine = "failed"`, solved): judge calls saved.
    pub unrefined_skipped: u64,
    /// Critique replies sent.
    pub replies: u64,
    /// Entries another worker reclaimed before this one could forward them (not forwarded here).
    pub reclaimed_meanwhile: u64,
}

/// One RRM worker: a consumer of the rollouts stream, a producer of the scored stream, a judge.
pub struct Worker {
    consumer: Consumer<Trajectory>,
    scored: Producer<ScoredTrajectory>,
    link: RedisLink,
    keys: Keys,
    judge: Arc<dyn Judge>,
    settings: WorkerSettings,
    keep_every: Duration,
    stats: WorkerStats,
    /// The batch read with the last forward: the next one to judge.
    carried: Vec<Delivery<Trajectory>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("consumer", &self.consumer.name())
            .field("judge", &self.judge.id())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// The verdict for one trajectory: judged per the plan, a failure recorded as such.
async fn verdict(judge: &dyn Judge, plan: Plan, t: &Trajectory) -> Verdict {
    if !plan.judges(t) {
        return Verdict::NotRequested;
    }
    let span = protocol::telemetry::trajectory_span(&t.run_id, &t.id);
    async {
        let started = Instant::now();
        let result = judge.judge(t).await.and_then(|j| match j.validate() {
            Ok(()) => Ok(j),
            Err(e) => Err(JudgeError::Internal(format!("the judge returned an invalid judgement: {e}"))),
        });
        metrics::RRM_JUDGE_SECONDS.observe(started.elapsed().as_secs_f64());
        match result {
            Ok(j) => {
                metrics::RRM_SCORE.observe(f64::from(j.score));
                tracing::debug!(score = j.score, latency_ms = j.latency_ms, "judged");
                Verdict::Judged(j)
            }
            Err(e) => {
                metrics::RRM_JUDGE_FAILURES.with_label_values(&[e.kind()]).inc();
                tracing::warn!(error = %e, attempts = e.attempts(), "judging failed; recording a failed verdict");
                Verdict::Failed { judge_id: judge.id().to_string(), reason: e.to_string(), attempts: e.attempts() }
            }
        }
    }
    .instrument(span)
    .await
}

fn verdict_label(v: &Verdict) -> &'static str {
    match v {
        Verdict::Judged(_) => "judged",
        Verdict::Failed { .. } => "failed",
        Verdict::NotRequested => "not_requested",
    }
}

impl Worker {
    /// Joins group `rrm` on the run's rollouts stream as `consumer` and opens the scored stream
    /// (group `learner`). Consumer names must be unique among live workers.
    pub async fn new(
        link: &RedisLink,
        run: &RunId,
        consumer: &str,
        queue: QueueSettings,
        judge: Arc<dyn Judge>,
        settings: WorkerSettings,
    ) -> Result<Self, RrmError> {
        let keys = Keys::new(run);
        let consumer = Consumer::new(link, keys.rollouts(), RRM_GROUP, consumer, queue).await?;
        let scored = Producer::new(link.clone(), keys.scored(), LEARNER_GROUP, queue).await?;
        Ok(Self {
            consumer,
            scored,
            link: link.clone(),
            keys,
            judge,
            settings: WorkerSettings { max_concurrency: settings.max_concurrency.max(1), ..settings },
            keep_every: (queue.claim_idle / 3).max(Duration::from_millis(10)),
            stats: WorkerStats::default(),
            carried: Vec::new(),
        })
    }

    /// This worker's consumer name.
    pub fn name(&self) -> &str {
        self.consumer.name()
    }

    /// What it has done so far.
    pub fn stats(&self) -> WorkerStats {
        self.stats
    }

    /// Judges a batch, renewing its lease while the judge works.
    async fn judge_batch(&mut self, batch: &[Delivery<Trajectory>]) -> Vec<Verdict> {
        let (judge, plan) = (self.judge.clone(), self.settings.plan);
        let ids: Vec<String> = batch.iter().map(|d| d.entry_id.clone()).collect();
        // Boxed as `dyn Future + Send`: the erased type keeps the worker's future `Send` for
        // every lifetime (the unboxed combinator chain trips the compiler's HRTB inference).
        let judging: Vec<Pin<Box<dyn Future<Output = Verdict> + Send + '_>>> =
            batch.iter().map(|d| Box::pin(verdict(judge.as_ref(), plan, &d.item)) as _).collect();
        let all = futures::stream::iter(judging).buffered(self.settings.max_concurrency).collect::<Vec<_>>();
        tokio::pin!(all);
        let mut lease = tokio::time::interval(self.keep_every);
        lease.tick().await;
        loop {
            tokio::select! {
                verdicts = &mut all => return verdicts,
                _ = lease.tick() => {
                    if let Err(e) = self.consumer.keep(&ids).await {
                        tracing::warn!(error = %e, "renewing the batch's lease failed; another worker may reclaim it");
                    }
                }
            }
        }
    }

    /// Handles one batch: read (or take the one read with the last forward), judge, reply,
    /// forward with the read of the next batch. Returns how many entries it handled (0 when the
    /// stream had nothing within the queue's block time).
    pub async fn step(&mut self) -> Result<usize, RrmError> {
        self.step_until(&CancellationToken::new()).await
    }

    /// [`Worker::step`]; once `cancel` has fired, the forward goes alone and reads nothing more.
    async fn step_until(&mut self, cancel: &CancellationToken) -> Result<usize, RrmError> {
        let batch = match std::mem::take(&mut self.carried) {
            carried if carried.is_empty() => self.consumer.next_batch().await?,
            carried => carried,
        };
        if batch.is_empty() {
            return Ok(0);
        }
        let read = batch.len();
        let verdicts = self.judge_batch(&batch).await;
        let replies: Vec<(TrajectoryId, &Verdict)> = batch
            .iter()
            .zip(&verdicts)
            .filter(|(d, _)| self.settings.plan.replies(&d.item))
            .map(|(d, v)| (d.item.id, v))
            .collect();
        // Written before the trajectories are forwarded: a crash between the two leaves the
        // entries pending (judged and replied again), never a forwarded trajectory without a reply.
        let sent = protocol::critique::send(&self.link, &self.keys, &replies, self.settings.critique_reply_ttl).await?;
        metrics::RRM_CRITIQUE_REPLIES.inc_by(sent as u64);
        self.stats.replies += replies.len() as u64;
        let moves: Vec<(String, ScoredTrajectory)> = batch
            .into_iter()
            .zip(verdicts)
            .map(|(d, verdict)| (d.entry_id, ScoredTrajectory { trajectory: d.item, verdict }))
            .collect();
        let forwarded = if cancel.is_cancelled() {
            self.consumer.forward(&self.scored, &moves).await?
        } else {
            let (forwarded, next) = self.consumer.forward_and_next(&self.scored, &moves).await?;
            self.carried = next;
            forwarded
        };
        self.note(&moves, &forwarded);
        Ok(read)
    }

    fn note(&mut self, moves: &[(String, ScoredTrajectory)], forwarded: &[String]) {
        self.stats.batches += 1;
        self.stats.reclaimed_meanwhile += (moves.len() - forwarded.len()) as u64;
        let mut scores = Vec::new();
        for (_, s) in moves.iter().filter(|(id, _)| forwarded.contains(id)) {
            metrics::RRM_TRAJECTORIES.with_label_values(&[verdict_label(&s.verdict)]).inc();
            match &s.verdict {
                Verdict::Judged(j) => {
                    self.stats.judged += 1;
                    scores.push(f64::from(j.score));
                }
                Verdict::Failed { .. } => self.stats.failed += 1,
                Verdict::NotRequested => {
                    self.stats.not_requested += 1;
                    if self.settings.plan.unrefined_in_critique(&s.trajectory) {
                        self.stats.unrefined_skipped += 1;
                    }
                }
            }
        }
        if !scores.is_empty() {
            metrics::RRM_BATCH_SCORE_MEAN.set(scores.iter().sum::<f64>() / scores.len() as f64);
        }
    }

    /// Runs until `cancel` fires, finishing the batch in flight, and returns what it did.
    pub async fn run(mut self, cancel: CancellationToken) -> Result<WorkerStats, RrmError> {
        tracing::info!(
            consumer = %self.name(),
            judge = %self.judge.id(),
            feedback = %self.settings.plan.mode,
            refine = %self.settings.plan.refine,
            "rrm worker consuming rollouts"
        );
        while !cancel.is_cancelled() {
            self.step_until(&cancel).await?;
        }
        // A batch read with the last forward was delivered to this worker and is in progress:
        // it is finished too, as any batch in flight (forwarded alone, nothing more read).
        if !self.carried.is_empty() {
            self.step_until(&cancel).await?;
        }
        tracing::info!(consumer = %self.name(), stats = ?self.stats, "rrm worker stopped");
        Ok(self.stats)
    }
}

#[cfg(test)]
mod tests;
