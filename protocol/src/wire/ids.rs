//! Identifiers: run, trajectory, actor, GRPO group and policy version.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::InvalidValue;

/// The id of a training run. Every Redis key and stream is namespaced by it, so two runs can
/// share one Redis. 1–64 characters from `[A-Za-z0-9_-]`, which keeps keys printable and safe
/// inside a Redis Cluster hash tag.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RunId(String);

impl RunId {
    /// Checks the form and wraps the id.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidValue> {
        let id = id.into();
        let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if id.is_empty() || id.len() > 64 || !id.chars().all(ok_char) {
            return Err(InvalidValue::new("run id", "1-64 characters from [A-Za-z0-9_-]", format!("{id:?}")));
        }
        Ok(Self(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A trajectory's id: 128 random bits, printed as 32 hex digits. It is the key of
/// exactly-once application at the learner and of tracing spans from actor to learner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TrajectoryId(pub u128);

impl TrajectoryId {
    /// A fresh random id; collisions are negligible at 2^-64 after 2^32 trajectories.
    pub fn random() -> Self {
        Self(rand::random())
    }
}

impl fmt::Display for TrajectoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl std::str::FromStr for TrajectoryId {
    type Err = InvalidValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        u128::from_str_radix(s, 16)
            .map(Self)
            .map_err(|_| InvalidValue::new("trajectory id", "32 hex digits", format!("{s:?}")))
    }
}

/// The id of an actor process (its pod name on Kubernetes, a generated name locally).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ActorId(pub String);

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The GRPO group a trajectory belongs to: the attempts at one task that are normalised
/// together. Initial and refined attempts get different group ids unless configured otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupId(pub u128);

impl GroupId {
    /// A fresh random group id.
    pub fn random() -> Self {
        Self(rand::random())
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// The version of the policy weights; the learner increments it with each publish, and every
/// trajectory records the version that produced it so staleness can be measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub struct PolicyVersion(pub u64);

impl PolicyVersion {
    /// How many versions `self` is behind `newest` (0 when it is not behind).
    pub fn lag_behind(self, newest: PolicyVersion) -> u64 {
        newest.0.saturating_sub(self.0)
    }
}

impl fmt::Display for PolicyVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_id_rejects_bad_forms_and_names_itself() {
        assert!(RunId::new("exp-1_a").is_ok());
        for bad in ["", "has space", "brace{", &"x".repeat(65)] {
            let err = RunId::new(bad).unwrap_err().to_string();
            assert!(err.contains("run id"), "{err}");
        }
    }

    #[test]
    fn trajectory_id_prints_and_parses_as_hex() {
        let id = TrajectoryId(0xabc);
        assert_eq!(id.to_string(), "00000000000000000000000000000abc");
        assert_eq!(id.to_string().parse::<TrajectoryId>().unwrap(), id);
        assert!("zz".parse::<TrajectoryId>().is_err());
    }

    #[test]
    fn lag_saturates() {
        assert_eq!(PolicyVersion(3).lag_behind(PolicyVersion(7)), 4);
        assert_eq!(PolicyVersion(9).lag_behind(PolicyVersion(7)), 0);
    }
}
