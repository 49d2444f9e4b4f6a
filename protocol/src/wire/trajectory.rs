//! The trajectory an actor produces: one attempt at one task, as token ids with the behaviour
//! log-probs and loss mask the learner needs, the outcome reward and timing. The per-token
//! vectors travel as byte strings in the codec (`packed.rs`) and as arrays in JSON.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ActorId, GroupId, PolicyVersion, QueueItem, RunId, TrajectoryId, Validate};
use crate::error::InvalidValue;

/// The task families Reagent ships (docs/architecture.md section 4), and tasks served over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskFamily {
    /// Multi-step arithmetic with a calculator tool.
    Math,
    /// Tool use against a simulated store with a simulated user.
    Retail,
    /// Navigation over a generated web site.
    Webnav,
    /// Multi-hop question answering over a generated knowledge base.
    Searchqa,
    /// Classic control; the yardstick for PPO correctness and throughput.
    Cartpole,
    /// A user's own tasks from JSON-lines files (`[dataset]`); the seed picks the task.
    Dataset,
    /// A text task an environment server makes from the seed and difficulty, reached over HTTP
    /// (`docs/env-http.md`); not built in, so not in [`TaskFamily::ALL`].
    Http,
}

impl TaskFamily {
    /// Every built-in family, in a fixed order: those that need no files. [`TaskFamily::Dataset`]
    /// is not among them (its tasks exist only where a `[dataset]` is loaded).
    pub const ALL: [TaskFamily; 5] = [Self::Math, Self::Retail, Self::Webnav, Self::Searchqa, Self::Cartpole];

    /// The family's name as config and logs spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Math => "math",
            Self::Retail => "retail",
            Self::Webnav => "webnav",
            Self::Searchqa => "searchqa",
            Self::Cartpole => "cartpole",
            Self::Dataset => "dataset",
            Self::Http => "http",
        }
    }
}

impl fmt::Display for TaskFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TaskFamily {
    type Err = InvalidValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().chain([Self::Dataset, Self::Http]).find(|f| f.name() == s).ok_or_else(|| {
            InvalidValue::new(
                "task family",
                "one of math, retail, webnav, searchqa, cartpole, dataset, http",
                format!("{s:?}"),
            )
        })
    }
}

/// Which task: the environments are deterministic given these three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskSpec {
    /// The family.
    pub family: TaskFamily,
    /// The seed the task is generated from.
    pub seed: u64,
    /// The difficulty knob (family-specific meaning; 1 is easiest).
    pub difficulty: u32,
}

/// Whether this is a first attempt or one refined after the RRM's critique (Reagent-C/U).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Attempt {
    /// The first attempt at the task.
    Initial,
    /// A second attempt conditioned on the task, the first attempt and its critique.
    Refined {
        /// The initial attempt this one refines.
        of: TrajectoryId,
    },
}

/// Who wrote a turn. Only the agent's tokens are trained on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    /// The system prompt.
    System,
    /// The (simulated) user.
    User,
    /// The policy being trained.
    Agent,
    /// A tool's result.
    Tool,
}

/// One message of a text episode, with its tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Who wrote it.
    pub role: Role,
    /// The text, for judges and people; the tokens below are what the learner uses.
    pub text: String,
    /// The token ids of this turn, in the policy's tokenizer.
    #[serde(with = "super::packed::token_ids")]
    pub token_ids: Vec<u32>,
    /// Per-token log-probs under the behaviour policy; one per token for agent turns, empty
    /// for the others.
    #[serde(with = "super::packed::logprobs")]
    pub logprobs: Vec<f32>,
    /// Per token: trained on (`true`) or context only. All `false` outside agent turns.
    #[serde(with = "super::packed::loss_mask")]
    pub loss_mask: Vec<bool>,
}

/// One step of a control episode (CartPole): observation, action and its log-prob, reward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlStep {
    /// The observation vector before acting.
    #[serde(with = "super::packed::observation")]
    pub observation: Vec<f32>,
    /// The discrete action taken.
    pub action: u32,
    /// Its log-prob under the behaviour policy.
    pub logprob: f32,
    /// The reward received for it.
    pub reward: f32,
}

/// The body of a trajectory: text turns for the agentic families, steps for control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Episode {
    /// A multi-turn text episode.
    Text(Vec<Turn>),
    /// A control episode.
    Control(Vec<ControlStep>),
}

/// Wall-clock timing of an episode, in milliseconds since the Unix epoch and durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Timing {
    /// When the episode started.
    pub started_at_ms: u64,
    /// When it ended.
    pub finished_at_ms: u64,
    /// Time spent generating agent tokens.
    pub generation_ms: u64,
    /// Time spent in the environment (tool calls, user replies).
    pub env_ms: u64,
}

/// One attempt at one task, as produced by an actor and carried to the RRM and the learner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// The run it belongs to.
    pub run_id: RunId,
    /// Its unique id.
    pub id: TrajectoryId,
    /// The actor process that produced it.
    pub actor_id: ActorId,
    /// The task attempted.
    pub task: TaskSpec,
    /// The GRPO group it is normalised in.
    pub group_id: GroupId,
    /// Initial or refined.
    pub attempt: Attempt,
    /// The policy version that generated every agent token.
    pub policy_version: PolicyVersion,
    /// The episode itself.
    pub episode: Episode,
    /// The environment's outcome reward (before any RRM score is mixed in).
    pub outcome_reward: f32,
    /// When and how long.
    pub timing: Timing,
}

impl Trajectory {
    /// How many tokens the learner trains on.
    pub fn trained_tokens(&self) -> usize {
        match &self.episode {
            Episode::Text(turns) => turns.iter().map(|t| t.loss_mask.iter().filter(|m| **m).count()).sum(),
            Episode::Control(steps) => steps.len(),
        }
    }
}

impl QueueItem for Trajectory {
    fn item_id(&self) -> String {
        self.id.to_string()
    }
}

impl Validate for Trajectory {
    fn validate(&self) -> Result<(), InvalidValue> {
        let bad = |field: &str, expected: &str, found: String| Err(InvalidValue::new(field, expected, found));
        if !self.outcome_reward.is_finite() {
            return bad("outcome_reward", "a finite number", self.outcome_reward.to_string());
        }
        match &self.episode {
            Episode::Text(turns) => {
                for (i, t) in turns.iter().enumerate() {
                    let n = t.token_ids.len();
                    if t.loss_mask.len() != n {
                        return bad(
                            &format!("turns[{i}].loss_mask"),
                            &format!("{n} entries, one per token"),
                            t.loss_mask.len().to_string(),
                        );
                    }
                    let want_logprobs = if t.role == Role::Agent { n } else { 0 };
                    if t.logprobs.len() != want_logprobs {
                        return bad(
                            &format!("turns[{i}].logprobs"),
                            &format!("{want_logprobs} entries"),
                            t.logprobs.len().to_string(),
                        );
                    }
                    if t.role != Role::Agent && t.loss_mask.iter().any(|m| *m) {
                        return bad(
                            &format!("turns[{i}].loss_mask"),
                            "no trained tokens outside agent turns",
                            format!("{:?} turn with trained tokens", t.role),
                        );
                    }
                    if let Some(lp) = t.logprobs.iter().find(|lp| !(lp.is_finite() && **lp <= 0.0)) {
                        return bad(&format!("turns[{i}].logprobs"), "finite log-probs <= 0", lp.to_string());
                    }
                }
            }
            Episode::Control(steps) => {
                if let Some((i, s)) =
                    steps.iter().enumerate().find(|(_, s)| !(s.logprob.is_finite() && s.logprob <= 0.0))
                {
                    return bad(&format!("steps[{i}].logprob"), "a finite log-prob <= 0", s.logprob.to_string());
                }
            }
        }
        Ok(())
    }
}
