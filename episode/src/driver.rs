//! One episode as a state machine its caller drives, step by step, with no environment inside:
//! the caller generates (in a batch, on a policy thread, across the network) and steps the
//! environment (in-process or an env-worker session), and hands both results in. The lockstep
//! batches of [`super::run_episodes`] and the rollout actors' async slots drive the same code.
//!
//! ```text
//!  start(task, prompt) ─► prompt_ids() ─► [generate] ─► push_agent(ids, logprobs) → message
//!                             ▲                                  │ [environment step]
//!                             └──── apply_observation(obs) ◄─────┘   obs.end → is_over()
//!  ensure_room(max_new, limit) before each generation; finish(meta) → EpisodeResult
//! ```

use policy::{ChatTemplate, Tokenizer};
use protocol::wire::{
    Episode as Body, Observation, Outcome, Prompt, Role, Source, Timing, Trajectory, TrajectoryId, Turn,
};

use super::{EpisodeResult, EpisodeTask, RolloutConfig, SystemPrompt, TrajectoryMeta};
use crate::error::Result;

/// An episode in progress: its turns as wire [`Turn`]s, the conversation's ids (the
/// concatenation of every turn's `token_ids`), the agent's messages and, once ended, the
/// outcome.
pub struct Episode<'t> {
    tok: &'t dyn Tokenizer,
    template: ChatTemplate,
    task: EpisodeTask,
    turns: Vec<Turn>,
    context: Vec<u32>,
    agent_messages: Vec<String>,
    outcome: Option<Outcome>,
    started_at_ms: u64,
    generation_ms: u64,
    env_ms: u64,
}

impl std::fmt::Debug for Episode<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Episode")
            .field("task", &self.task)
            .field("turns", &self.turns.len())
            .field("context_tokens", &self.context.len())
            .field("outcome", &self.outcome)
            .finish()
    }
}

impl<'t> Episode<'t> {
    /// Opens the conversation with the system turn `config.system_prompt` asks for and the
    /// task (`prompt.user`), rendered with `tok`'s chat template.
    pub fn start(task: EpisodeTask, prompt: &Prompt, tok: &'t dyn Tokenizer, config: &RolloutConfig) -> Result<Self> {
        let mut ep = Self {
            tok,
            template: tok.chat_template(),
            task,
            turns: Vec::new(),
            context: Vec::new(),
            agent_messages: Vec::new(),
            outcome: None,
            started_at_ms: protocol::clock::unix_ms(),
            generation_ms: 0,
            env_ms: 0,
        };
        let system = match &config.system_prompt {
            SystemPrompt::Full => Some(prompt.system.as_str()),
            SystemPrompt::Omit => None,
            SystemPrompt::Replace(text) => Some(text.as_str()),
        };
        if let Some(system) = system {
            ep.push_context(Role::System, system)?;
        }
        ep.push_context(Role::User, &prompt.user)?;
        Ok(ep)
    }

    /// The attempt being played.
    pub fn task(&self) -> &EpisodeTask {
        &self.task
    }

    /// Whether the episode has ended.
    pub fn is_over(&self) -> bool {
        self.outcome.is_some()
    }

    /// The turns so far.
    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }

    /// The agent's messages so far, as the environment read them.
    pub fn agent_messages(&self) -> &[String] {
        &self.agent_messages
    }

    /// The ids to generate the next agent message from: the conversation and an agent header.
    pub fn prompt_ids(&self) -> Vec<u32> {
        let header = self.template.header(Role::Agent);
        let mut ids = Vec::with_capacity(self.context.len() + header.len());
        ids.extend_from_slice(&self.context);
        ids.extend_from_slice(header);
        ids
    }

    /// Whether the next prompt plus `max_new_tokens` fits `context_limit`; if not, the episode
    /// ends unsolved (reward 0) and `false` comes back.
    pub fn ensure_room(&mut self, max_new_tokens: usize, context_limit: usize) -> bool {
        let needed = self.context.len() + self.template.header(Role::Agent).len() + max_new_tokens;
        if needed > context_limit {
            self.end_at_context_limit(context_limit);
            return false;
        }
        true
    }

    /// Ends the episode, unsolved, because the conversation no longer fits `limit` tokens.
    pub fn end_at_context_limit(&mut self, limit: usize) {
        self.outcome = Some(Outcome {
            reward: 0.0,
            success: false,
            summary: format!("context limit of {limit} tokens reached without an answer"),
        });
    }

    /// Counts time spent waiting for a generation.
    pub fn add_generation_ms(&mut self, ms: u64) {
        self.generation_ms += ms;
    }

    /// Counts time spent in the environment.
    pub fn add_env_ms(&mut self, ms: u64) {
        self.env_ms += ms;
    }

    /// Appends an agent turn from the generated ids and their log-probs; returns its text, the
    /// message to send to the environment.
    pub fn push_agent(&mut self, generated: &[u32], logprobs: &[f32]) -> String {
        let template = &self.template;
        let header = template.header(Role::Agent);
        let eot = &template.end_of_turn;
        let closed = !eot.is_empty() && generated.ends_with(eot);
        let body = if closed { &generated[..generated.len() - eot.len()] } else { generated };
        let text = self.tok.decode(body, true);
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
        self.agent_messages.push(text.clone());
        text
    }

    /// Appends an agent message kept from an earlier attempt (a `first_flaw` refinement): in the
    /// conversation as the policy wrote it, with no token trained on; returns its text.
    pub fn push_kept(&mut self, message: &str) -> Result<String> {
        let mut ids = self.tok.encode(message)?;
        ids.extend_from_slice(&self.template.end_of_turn);
        let zeros = vec![0.0; ids.len()];
        let text = self.push_agent(&ids, &zeros);
        if let Some(turn) = self.turns.last_mut() {
            turn.loss_mask.iter_mut().for_each(|m| *m = false);
        }
        Ok(text)
    }

    /// Takes the environment's answer to the last agent message: the outcome when the episode
    /// ended (its summary is not appended: no agent token follows it), else the observation as
    /// the next turn (`tool` from a tool, `user` from the user or the environment itself).
    pub fn apply_observation(&mut self, obs: Observation) -> Result<()> {
        if let Some(outcome) = obs.end {
            self.outcome = Some(outcome);
            return Ok(());
        }
        let role = match obs.from {
            Source::Tool => Role::Tool,
            Source::User | Source::Env => Role::User,
        };
        self.push_context(role, &obs.text)
    }

    /// Appends a non-agent turn (nothing trained on, no log-probs).
    fn push_context(&mut self, role: Role, text: &str) -> Result<()> {
        let rendered = self.template.render_turn(self.tok, role, text)?;
        let mut token_ids = if self.turns.is_empty() { self.template.opening(role) } else { Vec::new() };
        token_ids.extend(rendered.ids);
        self.context.extend_from_slice(&token_ids);
        let loss_mask = vec![false; token_ids.len()];
        self.turns.push(Turn { role, text: text.to_string(), token_ids, logprobs: Vec::new(), loss_mask });
        Ok(())
    }

    /// The episode as a trajectory (an episode stopped before its end counts as unsolved).
    pub fn finish(self, meta: &TrajectoryMeta) -> EpisodeResult {
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
            episode: Body::Text(self.turns),
            outcome_reward: outcome.reward,
            timing: Timing {
                started_at_ms: self.started_at_ms,
                finished_at_ms: protocol::clock::unix_ms(),
                generation_ms: self.generation_ms,
                env_ms: self.env_ms,
            },
        };
        EpisodeResult { trajectory, outcome, agent_messages: self.agent_messages }
    }
}
