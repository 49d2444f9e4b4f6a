//! Text episodes played by a [`CausalLm`]: the conversation rendered with the tokenizer's chat
//! template, agent messages sampled until the end-of-turn token, each fed to the environment
//! and its observation appended as the next turn, until the episode ends. What comes out is a
//! real [`Trajectory`] (token ids, behaviour log-probs and loss mask per turn) and the outcome.
//! The in-process trainer, SFT (through [`reference_episode`]) and the rollout actors share
//! this code: one episode is an [`Episode`], a state machine with no environment inside, which
//! [`run_episodes`] drives in lockstep batches with in-process environments and the actors
//! drive from async code, one generation request and one env-worker step at a time.
//!
//! ```text
//!  tasks ─ registry::make ─► live episodes ──┐  one Sampler::generate per turn over every
//!      ▲                                     │  live episode (left-padded batch, KV cache)
//!      └── env.step(agent text) ◄── decode ◄─┘  observation → tool/user turn; ended → out
//! ```
//!
//! A refined attempt (Reagent-C/U) opens with a [`RefinedStart`] ([`refined_start`]): the task
//! and the RRM's critique, and either the whole first attempt in the prompt or its messages up
//! to the first flagged one replayed into the conversation ([`RefineFrom`]). Which initial
//! attempts get one is [`RefineWhich`] (every one, or only the failed ones).
//!
//! Episodes step in lockstep: turn k of every live episode is generated in one batch, so G
//! attempts of a group and several groups share each forward pass. An episode leaves the batch
//! when the environment ends it (answer, turn limit) or when its next prompt would not fit
//! [`RolloutConfig::max_context_tokens`] (then it ends unsolved, reward 0).
//!
//! How turns become tokens (see [`Episode`]): the template's `start` ids open the first turn's
//! `token_ids`; an agent turn is its header (not trained), the sampled ids (trained, with their
//! log-probs) and, when sampling stopped without it, the end-of-turn marker (not trained);
//! observations from a tool are `tool` turns, those from a simulated user or from the
//! environment itself (a format error) are `user` turns. The observation that ends the episode
//! (its outcome summary) is not appended: no agent token follows it.

mod driver;
pub mod error;
mod eval;
mod fit;
#[cfg(test)]
mod fit_tests;
mod live;
mod refine;
mod refine_which;
pub mod refinement;
#[cfg(test)]
mod tests;

use std::time::Instant;

use env_workers::Limits;
use policy::{CausalLm, PrefixCache, Sampler, SamplingParams, Tokenizer};
use protocol::wire::{ActorId, Attempt, GroupId, Outcome, PolicyVersion, RunId, TaskSpec, Trajectory};

pub use driver::Episode;
pub use error::{EpisodeError, Result};
pub use eval::{evaluate_greedy, evaluate_sampled, held_out_specs, EvalReport, HELD_OUT_SEED_BASE};
pub use fit::{fit_rollout, reference_extent, shortfalls, Extent, Shortfall};
use live::Live;
pub use refine::{
    agent_label, flagged_message, kept_count, refined_prompt, refined_start, RefineFrom, RefinedStart,
    REFINE_FROM_FLAW_INSTRUCTION, REFINE_INSTRUCTION,
};
pub use refine_which::{solved, RefineWhich};
pub use refinement::{critique_of, evaluate_refinement, play_refinements, RefinementReport};

/// What the policy is shown before the task.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SystemPrompt {
    /// The environment's own system prompt (role, tools, protocol): what an instruct model
    /// that has never seen the protocol needs.
    #[default]
    Full,
    /// No system turn: the conversation opens with the task. For small models that learn the
    /// protocol from the reference episodes (SFT): with the byte tokenizer the math system
    /// prompt alone is about 700 tokens, three times a difficulty-1 episode, and every prompt
    /// token is paid for in every forward pass.
    Omit,
    /// This text instead of the environment's.
    Replace(String),
}

/// How episodes are played.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutConfig {
    /// The system turn.
    pub system_prompt: SystemPrompt,
    /// Sampling temperature (0: greedy).
    pub temperature: f64,
    /// Nucleus mass.
    pub top_p: f64,
    /// The most tokens of one agent message; a message cut there is sent as it is.
    pub max_new_tokens: usize,
    /// The environment's limits (agent turns, message length).
    pub limits: Limits,
    /// The longest conversation in tokens, generated tokens included; an episode whose next
    /// prompt would exceed it ends unsolved. At most the model's `max_position_embeddings`.
    pub max_context_tokens: usize,
    /// The most episodes generated in one batch; more tasks are played in chunks of this many.
    pub max_batch: usize,
    /// Where refined attempts start (`actor.refine_from`).
    pub refine_from: RefineFrom,
    /// Which initial attempts get a refined attempt (`actor.refine`).
    pub refine: RefineWhich,
}

impl RolloutConfig {
    /// The compact conversation for small byte-level models: no system prompt (the protocol is
    /// learnt from the reference episodes), messages of at most 48 tokens, 10 agent turns, a
    /// 1,024-token context. It fits `math`; [`fit_rollout`] raises it for the other families.
    pub fn compact() -> Self {
        Self {
            system_prompt: SystemPrompt::Omit,
            max_new_tokens: 48,
            limits: Limits { max_turns: 10, max_message_chars: 4096 },
            max_context_tokens: 1024,
            ..Self::default()
        }
    }
}

impl Default for RolloutConfig {
    fn default() -> Self {
        Self {
            system_prompt: SystemPrompt::Full,
            temperature: 0.7,
            top_p: 1.0,
            max_new_tokens: 64,
            limits: Limits { max_turns: 10, max_message_chars: 4096 },
            max_context_tokens: 2048,
            max_batch: 64,
            refine_from: RefineFrom::default(),
            refine: RefineWhich::default(),
        }
    }
}

impl RolloutConfig {
    /// The same settings, greedy: what evaluation uses.
    pub fn greedy(&self) -> Self {
        Self { temperature: 0.0, ..self.clone() }
    }

    /// The longest conversation `model` may play: [`RolloutConfig::max_context_tokens`], at
    /// most the model's `max_position_embeddings`.
    pub fn context_limit(&self, model: &CausalLm) -> usize {
        self.max_context_tokens.min(model.config().max_position_embeddings as usize)
    }
}

/// The model and tokenizer that play the agent.
#[derive(Clone, Copy)]
pub struct PolicyRef<'a> {
    /// The model.
    pub model: &'a CausalLm,
    /// Its tokenizer.
    pub tokenizer: &'a dyn Tokenizer,
}

/// One episode to play: the task and the trajectory fields that identify the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpisodeTask {
    /// The task.
    pub spec: TaskSpec,
    /// The GRPO group of the attempt.
    pub group_id: GroupId,
    /// Initial or refined.
    pub attempt: Attempt,
}

impl EpisodeTask {
    /// A first attempt at `spec` in group `group_id`.
    pub fn initial(spec: TaskSpec, group_id: GroupId) -> Self {
        Self { spec, group_id, attempt: Attempt::Initial }
    }
}

/// Who produced the trajectories: copied into each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrajectoryMeta {
    /// The run.
    pub run_id: RunId,
    /// The producing process.
    pub actor_id: ActorId,
    /// The weights' version.
    pub policy_version: PolicyVersion,
}

/// A played episode.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeResult {
    /// The trajectory as the learner and the judge take it.
    pub trajectory: Trajectory,
    /// How it ended (success, reward, why).
    pub outcome: Outcome,
    /// The agent's messages as the environment read them.
    pub agent_messages: Vec<String>,
}

/// Plays every task to its end with `policy`, generating each turn of all live episodes in one
/// batch (chunks of [`RolloutConfig::max_batch`] tasks); results come in the order of `tasks`.
pub fn run_episodes(
    policy: PolicyRef<'_>,
    tasks: &[EpisodeTask],
    config: &RolloutConfig,
    meta: &TrajectoryMeta,
    sampler: &mut Sampler,
) -> Result<Vec<EpisodeResult>> {
    let opening = vec![None; tasks.len()];
    run_episodes_from(policy, tasks, &opening, config, meta, sampler)
}

/// [`run_episodes`], each task opened with its start in `starts` (`None`: the environment's own
/// prompt): how refined attempts are played, from the first attempt and its critique.
pub fn run_episodes_from(
    policy: PolicyRef<'_>,
    tasks: &[EpisodeTask],
    starts: &[Option<RefinedStart>],
    config: &RolloutConfig,
    meta: &TrajectoryMeta,
    sampler: &mut Sampler,
) -> Result<Vec<EpisodeResult>> {
    let mut out = Vec::with_capacity(tasks.len());
    let size = config.max_batch.max(1);
    for (chunk, opening) in tasks.chunks(size).zip(starts.chunks(size)) {
        out.extend(run_chunk(policy, chunk, opening, config, meta, sampler)?);
    }
    Ok(out)
}

fn run_chunk(
    policy: PolicyRef<'_>,
    tasks: &[EpisodeTask],
    opening: &[Option<RefinedStart>],
    config: &RolloutConfig,
    meta: &TrajectoryMeta,
    sampler: &mut Sampler,
) -> Result<Vec<EpisodeResult>> {
    let tok = policy.tokenizer;
    let mut live = tasks
        .iter()
        .zip(opening.iter().chain(std::iter::repeat(&None)))
        .map(|(t, p)| Live::start_with(*t, p.as_ref(), tok, config))
        .collect::<Result<Vec<_>>>()?;
    let params = sampling_params(config, tok);
    let context_limit = config.context_limit(policy.model);
    // Each episode's keys and values so far: a turn prefills only what came since its last one.
    let mut caches: Vec<Option<PrefixCache>> = live.iter().map(|_| None).collect();
    loop {
        let mut active = Vec::new();
        let mut prompts = Vec::new();
        for (i, ep) in live.iter_mut().enumerate() {
            let ep = ep.episode();
            if ep.is_over() || !ep.ensure_room(config.max_new_tokens, context_limit) {
                caches[i] = None;
                continue;
            }
            active.push(i);
            prompts.push(ep.prompt_ids());
        }
        if active.is_empty() {
            break;
        }
        let started = Instant::now();
        let mut held: Vec<Option<PrefixCache>> = active.iter().map(|&i| caches[i].take()).collect();
        let generations = sampler.generate_continuing(policy.model, &prompts, &params, &mut held)?;
        for (&i, cache) in active.iter().zip(held) {
            caches[i] = cache;
        }
        let generation_ms = started.elapsed().as_millis() as u64;
        for (&i, g) in active.iter().zip(&generations) {
            let ep = &mut live[i];
            ep.episode().add_generation_ms(generation_ms);
            ep.act(&g.tokens, &g.logprobs)?;
        }
    }
    Ok(live.into_iter().map(|ep| ep.finish(meta)).collect())
}

/// The sampling settings of `config` for an agent turn with `tok`'s chat template: stop at the
/// end-of-turn marker or the tokenizer's EOS.
pub fn sampling_params(config: &RolloutConfig, tok: &dyn Tokenizer) -> SamplingParams {
    SamplingParams {
        temperature: config.temperature,
        top_p: config.top_p,
        max_new_tokens: config.max_new_tokens,
        stop_sequences: tok.chat_template().stop_sequences(),
        eos_id: Some(tok.special_ids().eos),
    }
}

/// The environment's reference episode for `spec`, replayed through the environment so that
/// the observations are real, as a trajectory whose agent tokens are the reference messages
/// (trained on; behaviour log-probs 0, since no policy sampled them). What SFT trains on.
/// `config` gives the system prompt and the message-length limit; the turn limit does not
/// apply (the reference is as long as it is).
pub fn reference_episode(
    spec: TaskSpec,
    tokenizer: &dyn Tokenizer,
    config: &RolloutConfig,
    meta: &TrajectoryMeta,
) -> Result<EpisodeResult> {
    scripted_episode(EpisodeTask::initial(spec, GroupId(0)), None, None, tokenizer, config, meta)
}

/// An episode whose agent messages are given (`messages`; `None`: the environment's reference
/// solution), replayed through the environment so that the observations are real, opened with
/// `start` (`None`: the environment's own prompt; a refined start's kept messages are replayed
/// first, not trained on). Agent tokens of `messages` are trained on, with behaviour log-probs 0
/// (no policy sampled them). What SFT trains on: reference episodes, flawed first attempts to
/// refine, and refined attempts under a critique. Messages after the environment ends the
/// episode are not played; the turn limit does not apply.
pub fn scripted_episode(
    task: EpisodeTask,
    start: Option<&RefinedStart>,
    messages: Option<&[String]>,
    tokenizer: &dyn Tokenizer,
    config: &RolloutConfig,
    meta: &TrajectoryMeta,
) -> Result<EpisodeResult> {
    let template = tokenizer.chat_template();
    let config = RolloutConfig { limits: Limits { max_turns: usize::MAX, ..config.limits }, ..config.clone() };
    let mut ep = Live::start_with(task, start, tokenizer, &config)?;
    let messages = match messages {
        Some(m) => m.to_vec(),
        None => ep.reference(),
    };
    for message in messages {
        if ep.episode().is_over() {
            break;
        }
        let mut ids = tokenizer.encode(&message)?;
        ids.extend_from_slice(&template.end_of_turn);
        let zeros = vec![0.0; ids.len()];
        ep.act(&ids, &zeros)?;
    }
    Ok(ep.finish(meta))
}
