//! The publisher actor: writes finished trajectories to `reagent:{run}:rollouts` (consumer group
//! `rrm`) through a [`Producer`], which waits at the queue's high-water mark. A publish is a
//! call, answered once the entries are in Redis, so backpressure reaches the rollout slots: they
//! wait for the answer before drawing their next task. At publish time each trajectory's policy
//! lag (the newest published version minus its own) goes into a histogram.
//!
//! ```text
//!  rollout ──Publish(group)──► publisher ── GET weights:latest ─► lag histogram
//!          ◄── stream ids ─────────┘      ── XADD × n (waits at the high-water mark) ─► rollouts
//! ```
//!
//! Messages are handled in order and the supervisor drains the publisher's mailbox before it
//! stops, so every publish that was asked for is answered.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use protocol::metrics::{ACTOR_POLICY_LAG, ACTOR_TRAJECTORIES};
use protocol::queue::Producer;
use protocol::weights::WeightStore;
use protocol::wire::{Attempt, Trajectory, Validate};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::error::{ActorError, Result};
use crate::stats::Stats;

/// The publisher actor (field-less; its state is [`PublisherState`]).
pub struct Publisher;

/// What the publisher is started with.
#[derive(Clone)]
pub struct PublisherArgs {
    /// The producer to the rollouts stream (shared across restarts: it holds no state that a
    /// failure could corrupt).
    pub producer: Arc<Producer<Trajectory>>,
    /// Where the newest published version is read, for the policy lag.
    pub store: WeightStore,
    /// The process's counters.
    pub stats: Arc<Stats>,
}

/// The publisher's messages.
pub enum PublisherMsg {
    /// Publish these trajectories (one group's attempts) in one pipeline; answers with their
    /// stream ids once Redis holds them.
    Publish(Vec<Trajectory>, RpcReplyPort<Result<Vec<String>>>),
}

/// The publisher's state: its arguments.
pub struct PublisherState {
    args: PublisherArgs,
}

impl Actor for Publisher {
    type Msg = PublisherMsg;
    type State = PublisherState;
    type Arguments = PublisherArgs;

    async fn pre_start(
        &self,
        _: ActorRef<PublisherMsg>,
        args: PublisherArgs,
    ) -> Result<PublisherState, ActorProcessingErr> {
        Ok(PublisherState { args })
    }

    async fn handle(
        &self,
        _: ActorRef<PublisherMsg>,
        msg: PublisherMsg,
        state: &mut PublisherState,
    ) -> Result<(), ActorProcessingErr> {
        let PublisherMsg::Publish(batch, reply) = msg;
        let _ = reply.send(publish(&state.args, &batch).await);
        Ok(())
    }
}

async fn publish(args: &PublisherArgs, batch: &[Trajectory]) -> Result<Vec<String>> {
    for t in batch {
        t.validate().map_err(|e| ActorError::Invalid { what: "trajectory", detail: format!("{}: {e}", t.id) })?;
    }
    let ids = args.producer.send_batch(batch).await?;
    match args.store.latest_version().await {
        Ok(latest) => {
            for t in batch {
                ACTOR_POLICY_LAG.observe(t.policy_version.lag_behind(latest.unwrap_or_default()) as f64);
            }
        }
        Err(e) => tracing::debug!(error = %e, "newest weight version unknown; policy lag not recorded"),
    }
    for t in batch {
        let (label, counter) = match t.attempt {
            Attempt::Initial => ("initial", &args.stats.initial),
            Attempt::Refined { .. } => ("refined", &args.stats.refined),
        };
        ACTOR_TRAJECTORIES.with_label_values(&[label]).inc();
        counter.fetch_add(1, Ordering::SeqCst);
        args.stats.newest_version.fetch_max(t.policy_version.0, Ordering::SeqCst);
        tracing::debug!(trajectory_id = %t.id, group_id = %t.group_id, version = %t.policy_version, reward = t.outcome_reward, "published");
    }
    Ok(ids)
}
