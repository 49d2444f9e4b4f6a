//! The learner's one error type: every fallible function of the crate returns it.

use std::path::PathBuf;

/// Why a learner operation failed. Messages are lowercase and name the file, key or tensor.
#[derive(Debug, thiserror::Error)]
pub enum LearnerError {
    /// A libtorch call failed.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A checkpoint failed verification (a checksum, a missing file, an unreadable manifest).
    #[error("checkpoint {path} is corrupt: {detail}")]
    CorruptCheckpoint {
        /// The checkpoint directory.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// `--resume` named a checkpoint that is not there, or `auto` found only corrupt ones.
    #[error("no usable checkpoint: {0}")]
    NoCheckpoint(String),
    /// Tensors or slices that must agree in shape or length do not.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A configuration value is out of range or of the wrong form; names the dotted key (the
    /// one `ConfigError` every crate carries; build it with [`LearnerError::config`]).
    /// Boxed: the one config error is several strings, and every `Result` of the crate would
    /// otherwise carry its size.
    #[error(transparent)]
    Config(Box<protocol::config::ConfigError>),
    /// A line of an SFT episodes file (`reagent sft --episodes`) is malformed.
    #[error("episodes file {}, line {line}, field `{field}`: {detail}", file.display())]
    EpisodesFile {
        /// The file.
        file: PathBuf,
        /// The 1-based line number (0: the file as a whole).
        line: usize,
        /// The field at fault, e.g. `messages[2].role`.
        field: String,
        /// What is wrong.
        detail: String,
    },
    /// An environment refused a step (a bug in the caller: an action out of range, or a step
    /// after the episode ended).
    #[error("environment: {0}")]
    Environment(#[source] env_workers::EnvError),
    /// Playing or evaluating an episode failed.
    #[error("episode: {0}")]
    Episode(#[from] episode::EpisodeError),
    /// A policy operation (the model, the tokenizer, sampling, model files) failed.
    #[error("policy: {0}")]
    Policy(#[from] policy::PolicyError),
    /// The gradient norm is NaN or infinite; the update was not applied.
    #[error("non-finite gradient norm {0}; the update was skipped")]
    NonFiniteGradient(f64),
    /// A queue or weight-store operation failed (Redis unreachable past its retry window, a
    /// malformed reply, corrupt weights).
    #[error("queue: {0}")]
    Queue(#[source] Box<protocol::ProtocolError>),
    /// A wait passed its deadline; names what was stuck.
    #[error("{what} did not finish within {after:?}")]
    Stuck {
        /// What was waited for, e.g. `update 42 (tch, blocking thread)`.
        what: String,
        /// The deadline it missed.
        after: std::time::Duration,
    },
    /// A blocking task (an update, a checkpoint, loading the model) panicked or was cancelled.
    #[error("{what} failed on its blocking thread: {source}")]
    Task {
        /// What the task was doing, e.g. `update 42`.
        what: String,
        /// How it ended.
        #[source]
        source: tokio::task::JoinError,
    },
    /// The trainer went down with an earlier blocking task that failed, so nothing more can be
    /// trained or checkpointed.
    #[error("{what}: the trainer was lost to an earlier failure")]
    TrainerLost {
        /// What needed the trainer.
        what: String,
    },
}

impl From<protocol::config::ConfigError> for LearnerError {
    fn from(e: protocol::config::ConfigError) -> Self {
        Self::Config(Box::new(e))
    }
}

impl LearnerError {
    /// An [`LearnerError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }

    /// A [`LearnerError::Config`]: `key` (dotted) holds `found` where `expected` was wanted.
    pub fn config(key: impl Into<String>, expected: impl Into<String>, found: impl ToString) -> Self {
        Self::Config(Box::new(protocol::config::ConfigError::invalid(key, expected, found)))
    }

    /// The dotted key of a [`LearnerError::Config`], for callers that react to which key.
    pub fn config_key(&self) -> Option<&str> {
        match self {
            Self::Config(e) => match e.as_ref() {
                protocol::config::ConfigError::Invalid { key, .. } | protocol::config::ConfigError::Key { key, .. } => {
                    Some(key)
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// A [`LearnerError::CorruptCheckpoint`] for `path`.
    pub fn corrupt(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Self::CorruptCheckpoint { path: path.into(), detail: detail.into() }
    }
}

/// The crate's result type.
pub type Result<T, E = LearnerError> = std::result::Result<T, E>;

impl From<protocol::ProtocolError> for LearnerError {
    /// Boxed: `ProtocolError` is large, and every `Result` of the learner carries this enum.
    fn from(e: protocol::ProtocolError) -> Self {
        Self::Queue(Box::new(e))
    }
}
