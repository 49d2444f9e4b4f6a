//! One episode being played: the environment, the turns so far as wire [`Turn`]s, and the
//! conversation's ids (the concatenation of every turn's `token_ids`).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use env_workers::{registry, Environment, Guarded};
use policy::{ChatTemplate, Tokenizer};
use protocol::wire::{Episode, Outcome, Role, Source, Timing, Trajectory, TrajectoryId, Turn};

use super::{EpisodeResult, EpisodeTask, RolloutConfig, SystemPrompt, TrajectoryMeta};
use crate::error::{LearnerError, Result};

/// An episode in progress.
pub(super) struct Live {
    env: Guarded,
    task: EpisodeTask,
    turns: Vec<Turn>,
    context: Vec<u32>,
    agent_messages: Vec<String>,
    outcome: Option<Outcome>,
    started_at_ms: u64,
    generation_ms: u64,
    env_ms: u64,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Live {
    /// Makes the environment and renders its prompt (system turn per `config`, then the task).
    pub(super) fn start(
        task: EpisodeTask,
        tok: &dyn Tokenizer,
        template: &ChatTemplate,
        config: &RolloutConfig,
    ) -> Result<Self> {
        let env = registry::make(task.spec, config.limits).map_err(|e| LearnerError::Environment(e.to_string()))?;
        let prompt = env.prompt().clone();
        let mut ep = Self {
            env,
            task,
            turns: Vec::new(),
            context: Vec::new(),
            agent_messages: Vec::new(),
            outcome: None,
            started_at_ms: now_ms(),
            generation_ms: 0,
            env_ms: 0,
        };
        let system = match &config.system_prompt {
            SystemPrompt::Full => Some(prompt.system.as_str()),
            SystemPrompt::Omit => None,
            SystemPrompt::Replace(text) => Some(text.as_str()),
        };
        if let Some(system) = system {
            ep.push_context(Role::System, system, tok, template)?;
        }
        ep.push_context(Role::User, &prompt.user, tok, template)?;
        Ok(ep)
    }

    /// Whether the episode has ended.
    pub(super) fn is_over(&self) -> bool {
        self.outcome.is_some()
    }

    /// The environment's reference agent messages.
    pub(super) fn reference(&self) -> Vec<String> {
        self.env.reference()
    }

    /// The ids to generate the next agent message from: the conversation and an agent header.
    pub(super) fn prompt(&self, template: &ChatTemplate) -> Vec<u32> {
        let mut ids = self.context.clone();
        ids.extend_from_slice(template.header(Role::Agent));
        ids
    }

    /// Counts time spent waiting for a generation batch.
    pub(super) fn add_generation_ms(&mut self, ms: u64) {
        self.generation_ms += ms;
    }

    /// Ends the episode, unsolved, because the conversation no longer fits.
    pub(super) fn end_at_context_limit(&mut self, limit: usize) {
        self.outcome = Some(Outcome {
            reward: 0.0,
            success: false,
            summary: format!("context limit of {limit} tokens reached without an answer"),
        });
    }

    /// Appends a non-agent turn (nothing trained on, no log-probs).
    fn push_context(&mut self, role: Role, text: &str, tok: &dyn Tokenizer, template: &ChatTemplate) -> Result<()> {
        let rendered = template.render_turn(tok, role, text)?;
        let mut token_ids = if self.turns.is_empty() { template.start.clone() } else { Vec::new() };
        token_ids.extend(rendered.ids);
        self.context.extend_from_slice(&token_ids);
        let loss_mask = vec![false; token_ids.len()];
        self.turns.push(Turn { role, text: text.to_string(), token_ids, logprobs: Vec::new(), loss_mask });
        Ok(())
    }

    /// Appends an agent turn from the generated ids and their log-probs; returns its text.
    pub(super) fn push_agent(
        &mut self,
        generated: &[u32],
        logprobs: &[f32],
        tok: &dyn Tokenizer,
        template: &ChatTemplate,
    ) -> String {
        let header = template.header(Role::Agent);
        let eot = &template.end_of_turn;
        let closed = !eot.is_empty() && generated.ends_with(eot);
        let body = if closed { &generated[..generated.len() - eot.len()] } else { generated };
        let text = tok.decode(body, true);
        let mut token_ids = Vec::with_capacity(header.len() + generated.len() + eot.len() + template.separator.len());
        let mut loss_mask = Vec::with_capacity(token_ids.capacity());
        let mut lps = Vec::with_capacity(token_ids.capacity());
        token_ids.extend_from_slice(header);
        token_ids.extend_from_slice(generated);
        loss_mask.resize(header.len(), false);
        loss_mask.resize(token_ids.len(), true);
        lps.resize(header.len(), 0.0);
        lps.extend_from_slice(logprobs);
        // A message cut at the token budget (or ended by EOS) still closes its turn in the
        // conversation; the marker was not sampled, so it is not trained on.
        if !closed {
            token_ids.extend_from_slice(eot);
        }
        token_ids.extend_from_slice(&template.separator);
        loss_mask.resize(token_ids.len(), false);
        lps.resize(token_ids.len(), 0.0);
        self.context.extend_from_slice(&token_ids);
        self.turns.push(Turn { role: Role::Agent, text: text.clone(), token_ids, logprobs: lps, loss_mask });
        text
    }

    /// Sends the agent's message to the environment; appends the observation, or records the
    /// outcome when the episode ends.
    pub(super) fn step(&mut self, message: &str, tok: &dyn Tokenizer, template: &ChatTemplate) -> Result<()> {
        let started = Instant::now();
        let obs = self.env.step(message);
        self.env_ms += started.elapsed().as_millis() as u64;
        self.agent_messages.push(message.to_string());
        if let Some(outcome) = obs.end {
            self.outcome = Some(outcome);
            return Ok(());
        }
        let role = match obs.from {
            Source::Tool => Role::Tool,
            Source::User | Source::Env => Role::User,
        };
        self.push_context(role, &obs.text, tok, template)
    }

    /// The finished episode as a trajectory.
    pub(super) fn finish(self, meta: &TrajectoryMeta) -> EpisodeResult {
        let outcome = self.outcome.unwrap_or_else(|| Outcome {
            reward: 0.0,
            success: false,
            summary: "the episode was not finished".into(),
        });
        let trajectory = Trajectory {
            run_id: meta.run_id.clone(),
            id: TrajectoryId::random(),
            actor_id: meta.actor_id.clone(),
            task: self.task.spec,
            group_id: self.task.group_id,
            attempt: self.task.attempt,
            policy_version: meta.policy_version,
            episode: Episode::Text(self.turns),
            outcome_reward: outcome.reward,
            timing: Timing {
                started_at_ms: self.started_at_ms,
                finished_at_ms: now_ms(),
                generation_ms: self.generation_ms,
                env_ms: self.env_ms,
            },
        };
        EpisodeResult { trajectory, outcome, agent_messages: self.agent_messages }
    }
}
