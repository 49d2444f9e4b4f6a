//! Makes an environment for a task spec: the one place that maps families to their code.

use protocol::wire::{TaskFamily, TaskSpec};

use crate::env::Environment;
use crate::error::EnvError;
use crate::session::{Guarded, Limits};

/// Difficulty levels every text family supports (1 is easiest).
pub const DIFFICULTIES: std::ops::RangeInclusive<u32> = 1..=3;

/// The environment for `spec`, with `limits` enforced.
pub fn make(spec: TaskSpec, limits: Limits) -> Result<Guarded, EnvError> {
    if !DIFFICULTIES.contains(&spec.difficulty) {
        return Err(EnvError::Difficulty { family: spec.family, found: spec.difficulty });
    }
    let inner: Box<dyn Environment> = match spec.family {
        TaskFamily::Cartpole => return Err(EnvError::NotText(spec.family)),
        other => return Err(EnvError::NotBuilt(other)),
    };
    #[allow(unreachable_code)]
    Ok(Guarded::new(inner, limits))
}
