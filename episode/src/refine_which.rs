//! Which initial attempts get a refined attempt (setting `actor.refine`), decided in one place
//! for the rollout actors, the in-process trainer's lockstep pass and the learner's batcher
//! (which must know how many refined attempts a group will have, so that it does not wait for
//! ones that never come).
//!
//! ```text
//!  all:    every initial attempt ───────────────► critique ─► refined attempt
//!  failed: initial attempt solved? ── yes ─► none (nothing to fix; saves the refined attempt)
//!                                  └─ no ──► critique ─► refined attempt
//! ```
//!
//! "Solved" is read off the trajectory (its outcome reward is the full 1.0), so the learner,
//! which sees only trajectories, reaches the same decision as the actor did; for every built-in
//! family the full reward is exactly the environment's success. The RRM workers read it too:
//! in `critique` mode they do not judge the initial attempts no refined attempt will follow.

use protocol::config::{ConfigError, ReagentConfig};
use protocol::wire::Trajectory;
use serde::{Deserialize, Serialize};

/// Which initial attempts are refined in the modes that refine (critique, unified).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefineWhich {
    /// Every initial attempt, solved ones included (the paper's setup).
    #[default]
    All,
    /// Only initial attempts that did not solve the task.
    Failed,
}

/// Whether `first`, an initial attempt, solved its task: the full outcome reward.
pub fn solved(first: &Trajectory) -> bool {
    first.outcome_reward >= 1.0
}

impl RefineWhich {
    /// Whether initial attempt `first` gets a refined attempt.
    pub fn refines(self, first: &Trajectory) -> bool {
        match self {
            Self::All => true,
            Self::Failed => !solved(first),
        }
    }

    /// How many of a group's initial attempts `firsts` get a refined attempt.
    pub fn count<'a>(self, firsts: impl IntoIterator<Item = &'a Trajectory>) -> usize {
        firsts.into_iter().filter(|t| self.refines(t)).count()
    }

    /// `actor.refine` of the job, as the roles that do not type `[actor]` themselves (the
    /// learner, the RRM workers) read it: default `all` where the section leaves it out.
    pub fn of_job(cfg: &ReagentConfig) -> Result<Self, ConfigError> {
        let Some(value) = cfg.actor.get("refine") else { return Ok(Self::default()) };
        value
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ConfigError::invalid("actor.refine", "\"all\" or \"failed\"", value))
    }

    /// The setting's value as config spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Failed => "failed",
        }
    }
}

impl std::fmt::Display for RefineWhich {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RefineWhich {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "all" => Ok(Self::All),
            "failed" => Ok(Self::Failed),
            other => Err(format!("unknown refinement selection {other:?}; expected \"all\" or \"failed\"")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_reward(t: &Trajectory, reward: f32) -> Trajectory {
        Trajectory { outcome_reward: reward, ..t.clone() }
    }

    fn a_trajectory() -> Trajectory {
        let spec = protocol::wire::TaskSpec { family: protocol::wire::TaskFamily::Math, seed: 1, difficulty: 1 };
        let meta = crate::TrajectoryMeta {
            run_id: protocol::wire::RunId::new("t").unwrap(),
            actor_id: protocol::wire::ActorId("a".into()),
            policy_version: protocol::wire::PolicyVersion(0),
        };
        crate::reference_episode(spec, &policy::ByteTokenizer, &crate::RolloutConfig::default(), &meta)
            .unwrap()
            .trajectory
    }

    #[test]
    fn failed_refines_only_attempts_short_of_the_full_reward() {
        let t = a_trajectory();
        let (won, lost, partial) = (with_reward(&t, 1.0), with_reward(&t, 0.0), with_reward(&t, 0.5));
        assert_eq!(RefineWhich::All.count([&won, &lost, &partial]), 3);
        assert_eq!(RefineWhich::Failed.count([&won, &lost, &partial]), 2);
        assert!(!RefineWhich::Failed.refines(&won) && RefineWhich::Failed.refines(&partial));
        assert_eq!(RefineWhich::default(), RefineWhich::All, "the paper's setup stays the default");
    }

    #[test]
    fn parses_and_names_both_values() {
        for w in [RefineWhich::All, RefineWhich::Failed] {
            assert_eq!(w.name().parse::<RefineWhich>(), Ok(w));
        }
        let err = "solved".parse::<RefineWhich>().unwrap_err();
        assert!(err.contains("\"solved\"") && err.contains("failed"), "{err}");
    }

    #[test]
    fn every_role_reads_the_jobs_setting() {
        let mut cfg = ReagentConfig::load_with_env(None, std::iter::empty()).unwrap();
        assert_eq!(RefineWhich::of_job(&cfg).unwrap(), RefineWhich::All, "the default job's");
        cfg.actor.remove("refine");
        assert_eq!(RefineWhich::of_job(&cfg).unwrap(), RefineWhich::All, "absent: the default");
        cfg.actor.insert("refine".into(), "failed".into());
        assert_eq!(RefineWhich::of_job(&cfg).unwrap(), RefineWhich::Failed);
        cfg.actor.insert("refine".into(), "solved".into());
        let err = RefineWhich::of_job(&cfg).unwrap_err().to_string();
        assert!(err.contains("actor.refine") && err.contains("solved"), "{err}");
    }
}
