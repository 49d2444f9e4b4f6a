//! One attempt at a task, driven from async code: an environment session (in-process or on an
//! env-worker), an [`Episode`] driver, and one generation request to the policy actor per
//! agent message — so attempts of every slot share the policy's batches.
//!
//! ```text
//!  open(spec) ─► prompt (refined: episode::refined_start) ─► Episode::start ─► kept messages: push_kept ─► step
//!  loop: ensure_room? ─► Generate(prompt_ids) ─► push_agent ─► step(session, message) ─► apply_observation
//!  close(session) ─► finish: the trajectory, with the oldest policy version that generated it
//! ```
//!
//! A weight swap may fall between two messages of one attempt; its behaviour log-probs are
//! exact per token either way, and the trajectory records the oldest version used (the one
//! staleness is measured against).

use std::time::Instant;

use env_workers::service::EnvClient;
use episode::{refined_start, Episode, EpisodeResult, EpisodeTask, RefinedStart, TrajectoryMeta};
use protocol::rpc::{EnvAction, SessionId, Start, StepReply};
use protocol::wire::{PolicyVersion, Trajectory};

use super::Slot;
use crate::error::{ActorError, Result};
use crate::inference::PolicyMsg;

/// What a refined attempt is conditioned on.
#[derive(Debug, Clone, Copy)]
pub struct Refinement<'a> {
    /// The initial attempt.
    pub first: &'a Trajectory,
    /// The RRM's critique of it.
    pub critique: &'a str,
}

/// An open environment session, closed when done — or, if the attempt is dropped half-way
/// (an error, the end of a graceful leave), closed in the background.
struct Session {
    env: EnvClient,
    id: SessionId,
    open: bool,
}

impl Session {
    async fn close(mut self) {
        self.open = false;
        if let Err(e) = self.env.close(self.id).await {
            tracing::debug!(session = %self.id, error = %e, "closing an environment session failed; it will expire");
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (env, id) = (self.env.clone(), self.id);
            runtime.spawn(async move {
                let _ = env.close(id).await;
            });
        }
    }
}

/// Plays `task` to its end (or to the context limit) and returns it as a trajectory.
pub async fn play(slot: &Slot, task: EpisodeTask, refine: Option<Refinement<'_>>) -> Result<EpisodeResult> {
    let opened = slot.env.open(task.spec).await?;
    let session = Session { env: slot.env.clone(), id: opened.session, open: true };
    let Start::Text(prompt) = opened.start else {
        return Err(ActorError::Invalid { what: "task", detail: format!("{} is not a text task", task.spec.family) });
    };
    let tok = slot.tokenizer.as_ref();
    let start = match refine {
        Some(r) => refined_start(&prompt, r.first, r.critique, slot.rollout.refine_from, tok, slot.context_limit / 2)?,
        None => RefinedStart::fresh(prompt),
    };
    let mut episode = Episode::start(task, &start.prompt, tok, &slot.rollout)?;
    for message in &start.kept {
        if episode.is_over() {
            break;
        }
        let message = episode.push_kept(message)?;
        step(slot, &session, &mut episode, message).await?;
    }
    let mut oldest: Option<PolicyVersion> = None;
    while !episode.is_over() && episode.ensure_room(slot.rollout.max_new_tokens, slot.context_limit) {
        let prompt = episode.prompt_ids();
        let started = Instant::now();
        let generated = slot
            .policy
            .call("generate", |reply| PolicyMsg::Generate(prompt, reply), slot.call_timeout)
            .await?
            .map_err(ActorError::Inference)?;
        episode.add_generation_ms(started.elapsed().as_millis() as u64);
        oldest = Some(oldest.map_or(generated.policy_version, |v| v.min(generated.policy_version)));
        let message = episode.push_agent(&generated.tokens, &generated.logprobs);
        step(slot, &session, &mut episode, message).await?;
    }
    session.close().await;
    let policy_version = match oldest {
        Some(v) => v,
        None => slot.policy.call("version", PolicyMsg::Version, slot.call_timeout).await?,
    };
    Ok(episode.finish(&TrajectoryMeta { run_id: slot.run_id.clone(), actor_id: slot.actor_id.clone(), policy_version }))
}

/// Sends an agent message to the session and takes the observation (or the outcome).
async fn step(slot: &Slot, session: &Session, episode: &mut Episode<'_>, message: String) -> Result<()> {
    let started = Instant::now();
    let reply = slot.env.step(session.id, EnvAction::Text(message)).await?;
    episode.add_env_ms(started.elapsed().as_millis() as u64);
    let StepReply::Text(observation) = reply else {
        return Err(ActorError::Invalid { what: "step reply", detail: "a control observation for a text task".into() });
    };
    Ok(episode.apply_observation(observation)?)
}
