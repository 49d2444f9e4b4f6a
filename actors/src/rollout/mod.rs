//! The rollout actor: one per environment slot. It draws a task, plays a group of G attempts
//! ([`group`]), publishes it, and draws the next, until the drain token is cancelled; then it
//! lets the group in flight finish within the grace period (or drops it: nothing of it was
//! published) and stops by itself.
//!
//! ```text
//!  post_start ─► Next ─► drained? ── yes ─► stop
//!                  │ no
//!                  ▼
//!      TaskSource::next ─► play_group ──────────── done ─► Next
//!                              └ drain + grace elapsed ─► drop the group (counted) ─► stop
//! ```
//!
//! An error (an env-worker gone, the policy restarted under a request) fails the actor; the
//! supervisor restarts it, which reconnects to its env-worker.

mod attempt;
mod critique;
mod group;
mod phase;
mod tasks;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use env_workers::http_env::{is_http, HttpEnv};
use env_workers::service::{EnvClient, SessionTable, Token};
use env_workers::Limits;
use episode::RolloutConfig;
use policy::Tokenizer;
use protocol::keys::Keys;
use protocol::link::RedisLink;
use protocol::metrics::ACTOR_EPISODES_DROPPED;
use protocol::wire::{ActorId, RunId};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio_util::sync::CancellationToken;

pub use critique::{await_critiques, Critique};
pub use group::Unpublished;
pub use phase::Phase;
pub use tasks::{TaskSource, SEED_BLOCK};

use crate::error::{ActorError, Result};
use crate::handle::Handle;
use crate::inference::PolicyMsg;
use crate::publisher::PublisherMsg;
use crate::stats::Stats;

/// Where a slot's environments live.
#[derive(Clone)]
pub enum EnvSource {
    /// In this process, in a session table shared by the slots.
    Local(Arc<SessionTable>),
    /// On the env-worker at this `host:port` (or the environment server at this `http(s)://`
    /// URL), each call with this deadline, presenting this token.
    Remote(String, Duration, Option<Token>),
}

/// Waiting for critiques (critique and unified modes).
#[derive(Clone)]
pub struct CritiqueWait {
    /// A link the slot's BLPOPs own (made fresh at each start).
    pub link: RedisLink,
    /// The run's keys.
    pub keys: Keys,
    /// How long an initial attempt waits for its critique.
    pub wait: Duration,
}

/// What every slot of a process shares.
#[derive(Clone)]
pub struct SlotShared {
    /// The policy actor.
    pub policy: Handle<PolicyMsg>,
    /// The publisher actor.
    pub publisher: Handle<PublisherMsg>,
    /// The policy's tokenizer.
    pub tokenizer: Arc<dyn Tokenizer>,
    /// How episodes are played.
    pub rollout: RolloutConfig,
    /// The longest conversation (`max_context_tokens`, at most the model's positions).
    pub context_limit: usize,
    /// The run.
    pub run_id: RunId,
    /// This process.
    pub actor_id: ActorId,
    /// Attempts per group.
    pub group_size: usize,
    /// Deadline of calls to the policy and publisher actors.
    pub call_timeout: Duration,
    /// Set when the feedback mode refines.
    pub critique: Option<CritiqueWait>,
    /// Where tasks come from.
    pub tasks: Arc<TaskSource>,
    /// Cancelled when the process leaves.
    pub drain: CancellationToken,
    /// How long in-flight groups may take to finish once `drain` is cancelled.
    pub grace: Duration,
    /// The process's counters.
    pub stats: Arc<Stats>,
}

/// What a rollout actor is started with.
#[derive(Clone)]
pub struct RolloutArgs {
    /// The slot's index, for logs.
    pub index: usize,
    /// Its environments.
    pub env: EnvSource,
    /// What the slots share.
    pub shared: SlotShared,
}

/// A running slot: what attempts and groups are played with.
pub struct Slot {
    env: EnvClient,
    policy: Handle<PolicyMsg>,
    publisher: Handle<PublisherMsg>,
    tokenizer: Arc<dyn Tokenizer>,
    rollout: RolloutConfig,
    context_limit: usize,
    run_id: RunId,
    actor_id: ActorId,
    group_size: usize,
    call_timeout: Duration,
    critique: Option<CritiqueWait>,
    stats: Arc<Stats>,
}

/// The rollout actor (field-less; its state is [`RolloutState`]).
pub struct RolloutActor;

/// The rollout actor's messages.
#[derive(Debug)]
pub enum RolloutMsg {
    /// Play the next group (sent to itself after each group).
    Next,
}

/// The rollout actor's state.
pub struct RolloutState {
    index: usize,
    slot: Slot,
    tasks: Arc<TaskSource>,
    drain: CancellationToken,
    grace: Duration,
}

async fn connect(env: &EnvSource, limits: Limits) -> Result<EnvClient> {
    match env {
        EnvSource::Local(table) => Ok(EnvClient::local(table.clone())),
        EnvSource::Remote(url, timeout, token) if is_http(url) => {
            Ok(EnvClient::Http(HttpEnv::connect(url, *timeout, token.as_ref(), limits).await?))
        }
        EnvSource::Remote(addr, timeout, token) => {
            let resolved = tokio::time::timeout(*timeout, tokio::net::lookup_host(addr.as_str()))
                .await
                .map_err(|_| ActorError::Timeout { what: format!("resolving env-worker {addr}"), after: *timeout })?
                .map_err(|source| ActorError::Io { what: format!("resolving env-worker {addr}"), source })?
                .next()
                .ok_or_else(|| ActorError::config("actor.env_workers", "a resolvable host:port", addr))?;
            Ok(EnvClient::connect(resolved, *timeout, token.as_ref()).await?)
        }
    }
}

impl Actor for RolloutActor {
    type Msg = RolloutMsg;
    type State = RolloutState;
    type Arguments = RolloutArgs;

    async fn pre_start(&self, _: ActorRef<RolloutMsg>, args: RolloutArgs) -> Result<RolloutState, ActorProcessingErr> {
        let env = connect(&args.env, args.shared.rollout.limits).await?;
        let s = args.shared;
        let critique = s.critique.map(|c| CritiqueWait { link: c.link.fresh(), ..c });
        let slot = Slot {
            env,
            policy: s.policy,
            publisher: s.publisher,
            tokenizer: s.tokenizer,
            rollout: s.rollout,
            context_limit: s.context_limit,
            run_id: s.run_id,
            actor_id: s.actor_id,
            group_size: s.group_size,
            call_timeout: s.call_timeout,
            critique,
            stats: s.stats,
        };
        Ok(RolloutState { index: args.index, slot, tasks: s.tasks, drain: s.drain, grace: s.grace })
    }

    async fn post_start(&self, myself: ActorRef<RolloutMsg>, _: &mut RolloutState) -> Result<(), ActorProcessingErr> {
        myself.cast(RolloutMsg::Next)?;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<RolloutMsg>,
        _: RolloutMsg,
        state: &mut RolloutState,
    ) -> Result<(), ActorProcessingErr> {
        if !state.drain.is_cancelled() {
            play_next(state).await?;
        }
        if state.drain.is_cancelled() {
            tracing::debug!(slot = state.index, "slot leaves");
            myself.stop(Some("drained".into()));
        } else {
            myself.cast(RolloutMsg::Next)?;
        }
        Ok(())
    }
}

/// Draws a task and plays its group, unless the leave's grace period runs out first.
async fn play_next(state: &RolloutState) -> Result<()> {
    let spec = state.tasks.next().await?;
    let unpublished = Unpublished::default();
    let grace_over = async {
        state.drain.cancelled().await;
        tokio::time::sleep(state.grace).await;
    };
    let stats = &state.slot.stats;
    tokio::select! {
        played = group::play_group(&state.slot, spec, &unpublished) => {
            if let Err(e) = &played {
                stats.dropped_on_error.fetch_add(unpublished.get(), Ordering::SeqCst);
                ACTOR_EPISODES_DROPPED.with_label_values(&["error"]).inc_by(unpublished.get());
                tracing::warn!(slot = state.index, task = ?spec, error = %e, dropped = unpublished.get(), "group failed");
            }
            played
        }
        _ = grace_over => {
            stats.dropped_at_leave.fetch_add(unpublished.get(), Ordering::SeqCst);
            ACTOR_EPISODES_DROPPED.with_label_values(&["shutdown"]).inc_by(unpublished.get());
            tracing::info!(slot = state.index, dropped = unpublished.get(), grace = ?state.grace, "grace period over; unfinished episodes dropped");
            Ok(())
        }
    }
}
