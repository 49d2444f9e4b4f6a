//! The actors crate's error types: [`ActorError`], the one every fallible function returns,
//! and [`InferenceError`], what the policy actor answers a request it could not serve with.
//! Messages are lowercase and name the actor, key or peer.

use std::sync::Arc;
use std::time::Duration;

use policy::PolicyError;
use protocol::config::ConfigError;
use protocol::wire::PolicyVersion;

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
    /// The policy actor could not serve a request (the prompt did not fit, the batch failed,
    /// the weights did not fit the model).
    #[error("policy actor: {0}")]
    Inference(#[from] InferenceError),
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

/// Why the policy actor (or its thread) could not serve a request: the error of its replies,
/// so callers can tell a prompt that will never fit from a batch that failed.
#[derive(Debug, thiserror::Error)]
pub enum InferenceError {
    /// The prompt is empty, or leaves no room for `max_new_tokens` in the model's context.
    #[error("a prompt of {len} ids does not fit (1..={max} ids)")]
    PromptDoesNotFit {
        /// The prompt's length.
        len: usize,
        /// The longest prompt that fits.
        max: usize,
    },
    /// Sampling failed for the whole batch the request was in (every request of the batch
    /// gets the same error).
    #[error("generation failed: {0}")]
    Generation(#[source] Arc<PolicyError>),
    /// Sampling panicked on the policy thread; the batch's requests fail, the thread goes on.
    #[error("generation panicked")]
    Panicked,
    /// `actor.device` is `cuda`, but libtorch sees no CUDA device.
    #[error(transparent)]
    NoCuda(#[from] policy::device::NoCuda),
    /// Loading the model (or its initial weights) failed.
    #[error("loading the model: {0}")]
    Load(#[source] PolicyError),
    /// A weight set lacks a variable of the model; the swap is refused and the old weights
    /// keep serving.
    #[error("weights {version} lack {name}")]
    MissingWeight {
        /// The weight set's version.
        version: PolicyVersion,
        /// The variable missing.
        name: String,
    },
    /// A weight set's variable has another shape than the model's; the swap is refused and
    /// the old weights keep serving.
    #[error("{name} is {in_weights:?} in weights {version} but {in_model:?} in the model")]
    WeightShape {
        /// The variable.
        name: String,
        /// The weight set's version.
        version: PolicyVersion,
        /// Its shape in the weight set.
        in_weights: Vec<i64>,
        /// Its shape in the model.
        in_model: Vec<i64>,
    },
    /// Importing checked weights failed part-way: the model is in an unknown state and the
    /// policy thread stops (the supervisor restarts the actor).
    #[error("loading weights {version} failed half-way: {source}")]
    SwapFailed {
        /// The weight set's version.
        version: PolicyVersion,
        /// What failed.
        #[source]
        source: PolicyError,
    },
}

/// The crate's result type.
pub type Result<T, E = ActorError> = std::result::Result<T, E>;
