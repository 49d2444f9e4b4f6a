//! Makes an environment for a task spec: the one place that maps families to their code.

use std::sync::Arc;

use protocol::wire::{TaskFamily, TaskSpec};

use crate::env::Environment;
use crate::error::EnvError;
use crate::session::{Guarded, Limits};
use crate::user_model::UserModel;

/// Difficulty levels every text family supports (1 is easiest).
pub const DIFFICULTIES: std::ops::RangeInclusive<u32> = 1..=3;

/// The environment for `spec`, with `limits` enforced; a simulated user is rule-based.
pub fn make(spec: TaskSpec, limits: Limits) -> Result<Guarded, EnvError> {
    make_with_user(spec, limits, None)
}

/// As [`make`], with the simulated user of families that have one (`retail`) played by
/// `user_model` when given (`[user_model]`); replays and reference solutions use [`make`].
pub fn make_with_user(
    spec: TaskSpec,
    limits: Limits,
    user_model: Option<&Arc<UserModel>>,
) -> Result<Guarded, EnvError> {
    if !DIFFICULTIES.contains(&spec.difficulty) {
        return Err(EnvError::Difficulty { family: spec.family, found: spec.difficulty });
    }
    let inner: Box<dyn Environment> = match spec.family {
        TaskFamily::Cartpole => return Err(EnvError::NotText(spec.family)),
        TaskFamily::Math => Box::new(crate::families::math::MathEnv::new(spec)),
        TaskFamily::Retail => Box::new(match user_model {
            Some(model) => crate::families::retail::RetailEnv::with_user_model(spec, model.clone()),
            None => crate::families::retail::RetailEnv::new(spec),
        }),
        TaskFamily::Webnav => Box::new(crate::families::webnav::WebnavEnv::new(spec)),
        TaskFamily::Searchqa => Box::new(crate::families::searchqa::SearchqaEnv::new(spec)),
        TaskFamily::Dataset => Box::new(crate::families::dataset::DatasetEnv::new(spec)?),
        // Every family is built today; the arm stays for families added to the wire enum later.
        #[allow(
            unreachable_patterns,
            reason = "every family is built today; families added to the wire enum later land here"
        )]
        other => return Err(EnvError::NotBuilt(other)),
    };
    Ok(Guarded::new(inner, limits))
}
