//! The episode engine's one error type.

/// Why playing, replaying or evaluating an episode failed.
#[derive(Debug, thiserror::Error)]
pub enum EpisodeError {
    /// The model, tokenizer or sampler failed.
    #[error("policy: {0}")]
    Policy(#[from] policy::PolicyError),
    /// An in-process environment could not be made (an unknown family, a difficulty out of
    /// range, a control task where a text one was expected).
    #[error("environment: {0}")]
    Environment(#[from] env_workers::EnvError),
}

/// The crate's result type.
pub type Result<T, E = EpisodeError> = std::result::Result<T, E>;
