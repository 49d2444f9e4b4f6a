//! Rollout limits against the families' reference episodes. The per-message token cap
//! (`max_new_tokens`) and the context (`max_context_tokens`) that fit `math` (messages of at
//! most about 30 byte tokens) cut every `searchqa`, `retail` and `webnav` message short (their
//! reference messages, a sentence of reasoning and a tool call, run to 110-140 byte tokens), so
//! no episode of theirs can end in an answer, whatever the model has learnt. [`reference_extent`]
//! measures the longest reference message and episode, [`fit_rollout`] raises a rollout to them
//! (SFT and the modes experiment), and [`shortfalls`] names where a configured rollout falls
//! short (the actor role warns at start).
//!
//! ```text
//!  family × difficulty × seeds 0..32 ─ reference_episode ─► longest agent message, longest episode
//!      fit_rollout: cap ≥ message + ¼ (to 16), context ≥ episode + ¼ (to 256)
//!      shortfalls:  cap < message or context < episode ─► Shortfall per family
//! ```

use policy::{ByteTokenizer, Tokenizer};
use protocol::wire::{ActorId, Episode as WireEpisode, PolicyVersion, Role, RunId, TaskFamily, TaskSpec};

use crate::{reference_episode, Result, RolloutConfig, TrajectoryMeta};

/// Reference episodes measured per family and difficulty.
const SEEDS: u64 = 32;

/// The longest reference agent message and the longest reference episode, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extent {
    /// Tokens of the longest agent message, its end-of-turn marker included (what
    /// `max_new_tokens` must allow).
    pub message: usize,
    /// Tokens of the longest whole episode (every turn, the prompt included).
    pub episode: usize,
}

impl Extent {
    /// A rollout limit with room: a quarter more than `n`, rounded up to `unit`.
    fn spare(n: usize, unit: usize) -> usize {
        (n + n / 4).div_ceil(unit) * unit
    }

    /// The per-message cap this extent asks for (a quarter spare, a multiple of 16).
    pub fn message_cap(&self) -> usize {
        Self::spare(self.message, 16)
    }

    /// The context this extent asks for (a quarter spare, a multiple of 256).
    pub fn context(&self) -> usize {
        Self::spare(self.episode, 256)
    }
}

/// The extent of `family`'s reference episodes at `difficulties` (seeds 0..32 each), rendered
/// with `tokenizer` under `rollout`'s system prompt; `None` for families without built-in
/// reference episodes (`dataset`, `http`, `cartpole`).
pub fn reference_extent(
    family: TaskFamily,
    difficulties: &[u32],
    tokenizer: &dyn Tokenizer,
    rollout: &RolloutConfig,
) -> Result<Option<Extent>> {
    if matches!(family, TaskFamily::Dataset | TaskFamily::Cartpole | TaskFamily::Http) {
        return Ok(None);
    }
    let meta = TrajectoryMeta {
        run_id: RunId::new("fit").expect("a valid run id"),
        actor_id: ActorId("fit".into()),
        policy_version: PolicyVersion(0),
    };
    // The reference is replayed whole: a message cap must not cut what is being measured.
    let open = RolloutConfig { max_new_tokens: usize::MAX / 2, ..rollout.clone() };
    let mut extent = Extent::default();
    for &difficulty in difficulties {
        for seed in 0..SEEDS {
            let spec = TaskSpec { family, seed, difficulty };
            let ep = reference_episode(spec, tokenizer, &open, &meta)?;
            let WireEpisode::Text(turns) = &ep.trajectory.episode else { continue };
            let agent = turns.iter().filter(|t| t.role == Role::Agent);
            // The sampled part of a turn (its trained tokens): the message and its end-of-turn
            // marker, which is what max_new_tokens bounds.
            let longest = agent.map(|t| t.loss_mask.iter().filter(|m| **m).count()).max().unwrap_or(0);
            extent.message = extent.message.max(longest);
            extent.episode = extent.episode.max(turns.iter().map(|t| t.token_ids.len()).sum());
        }
    }
    Ok(Some(extent))
}

/// Raises `rollout`'s message cap and context to `family`'s reference episodes at
/// `difficulties` with a quarter spare (byte tokenizer); never lowers them. `math` stays as it
/// is under the compact rollout (its messages fit 48 tokens).
pub fn fit_rollout(rollout: &mut RolloutConfig, family: TaskFamily, difficulties: &[u32]) -> Result<()> {
    if let Some(extent) = reference_extent(family, difficulties, &ByteTokenizer, rollout)? {
        rollout.max_new_tokens = rollout.max_new_tokens.max(extent.message_cap());
        rollout.max_context_tokens = rollout.max_context_tokens.max(extent.context());
    }
    Ok(())
}

/// Where a configured rollout cannot hold a family's reference episodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    /// The family whose episodes do not fit.
    pub family: TaskFamily,
    /// Its reference episodes' extent.
    pub extent: Extent,
    /// The configured per-message cap.
    pub max_new_tokens: usize,
    /// The configured context.
    pub max_context_tokens: usize,
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} reference episodes have agent messages of up to {} tokens and episodes of up to {} \
             tokens, but the rollout allows {} tokens per message and {} in all: such episodes are \
             cut short and cannot end in an answer; set actor.max_new_tokens >= {} and \
             actor.max_context_tokens >= {}",
            self.family,
            self.extent.message,
            self.extent.episode,
            self.max_new_tokens,
            self.max_context_tokens,
            self.extent.message_cap().max(self.max_new_tokens),
            self.extent.context().max(self.max_context_tokens),
        )
    }
}

/// The families of `mix` whose reference messages or episodes `rollout` (with `context_limit`,
/// the context the model allows) cannot hold, rendered with `tokenizer`.
pub fn shortfalls(
    mix: &[(TaskFamily, u32)],
    tokenizer: &dyn Tokenizer,
    rollout: &RolloutConfig,
    context_limit: usize,
) -> Result<Vec<Shortfall>> {
    let mut families: Vec<TaskFamily> = mix.iter().map(|(f, _)| *f).collect();
    families.sort_by_key(|f| f.to_string());
    families.dedup();
    let mut out = Vec::new();
    for family in families {
        let levels: Vec<u32> = mix.iter().filter(|(f, _)| *f == family).map(|(_, d)| *d).collect();
        let Some(extent) = reference_extent(family, &levels, tokenizer, rollout)? else { continue };
        let context = rollout.max_context_tokens.min(context_limit);
        if rollout.max_new_tokens < extent.message || context < extent.episode {
            out.push(Shortfall { family, extent, max_new_tokens: rollout.max_new_tokens, max_context_tokens: context });
        }
    }
    Ok(out)
}
