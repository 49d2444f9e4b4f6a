//! The actors crate's one error type: lowercase messages that name the actor, key or peer.

use std::time::Duration;

use protocol::config::ConfigError;

/// Why an actor operation, or the actor role, failed.
#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    /// The configuration is wrong: the `[actor]` section does not parse (unknown key, wrong
    /// type), or a value is missing or out of range ([`ConfigError::Invalid`]); names the
    /// dotted key.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Redis, the queue or the weight store failed past its deadlines and retries.
    #[error("{0}")]
    Protocol(#[from] protocol::ProtocolError),
    /// An environment (in-process or on an env-worker) failed; names the peer.
    #[error("environment: {0}")]
    Env(#[from] env_workers::EnvError),
    /// The model, tokenizer or sampling failed.
    #[error("policy: {0}")]
    Policy(#[from] policy::PolicyError),
    /// The episode engine failed.
    #[error("episode: {0}")]
    Episode(#[from] episode::EpisodeError),
    /// The policy thread could not generate (the batch failed, or the prompt did not fit).
    #[error("generation failed: {0}")]
    Generation(String),
    /// A call to another actor found it gone, or it dropped the reply.
    #[error("{actor} actor is unavailable: {detail}")]
    Unavailable {
        /// Which actor (`policy`, `publisher`, …).
        actor: &'static str,
        /// What happened.
        detail: String,
    },
    /// A call to another actor, or a wait, passed its deadline.
    #[error("{what} did not answer within {after:?}")]
    Timeout {
        /// What was waited for (`policy actor: generate`, …).
        what: String,
        /// The deadline.
        after: Duration,
    },
    /// A child failed too often in the restart window: the supervisor gave up, and the
    /// process stops with this error.
    #[error("child {child} failed {failures} times within {window:?}; giving up (last error: {last_error})")]
    Escalated {
        /// The child's name.
        child: String,
        /// Failures counted in the window.
        failures: usize,
        /// The restart window.
        window: Duration,
        /// The last failure's message.
        last_error: String,
    },
    /// An actor could not be started.
    #[error("could not start {what}: {detail}")]
    Spawn {
        /// Which actor.
        what: String,
        /// Why.
        detail: String,
    },
    /// A wire value broke its invariants (a trajectory that does not validate, a control
    /// task where a text one was expected).
    #[error("invalid {what}: {detail}")]
    Invalid {
        /// What kind of value.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A local I/O operation failed (binding the metrics listener, reading the host name).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl ActorError {
    /// An [`ActorError::Config`]: `key` (dotted) holds `found` where `expected` was wanted.
    pub fn config(key: impl Into<String>, expected: impl Into<String>, found: impl ToString) -> Self {
        Self::Config(ConfigError::invalid(key, expected, found))
    }
}

/// The crate's result type.
pub type Result<T, E = ActorError> = std::result::Result<T, E>;
