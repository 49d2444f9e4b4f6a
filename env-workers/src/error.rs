//! The env-workers crate's error type.

use std::time::Duration;

use protocol::rpc::ServiceError;
use protocol::wire::TaskFamily;

/// What can go wrong making or serving environments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// A difficulty outside the supported range.
    #[error("{family}: difficulty {found} is not supported (expected 1..=3)")]
    Difficulty {
        /// The family.
        family: TaskFamily,
        /// The difficulty asked for.
        found: u32,
    },
    /// A text operation asked of a control family.
    #[error("{0} is a control task, not a text task; use the control environment")]
    NotText(TaskFamily),
    /// A control action out of range.
    #[error("action {action} is out of range (this task has {count} actions)")]
    BadAction {
        /// The action given.
        action: u32,
        /// How many actions there are.
        count: usize,
    },
    /// A step after the episode ended.
    #[error("the episode is over; reset or open a new session")]
    EpisodeOver,
    /// The env-worker refused the call.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// A remote call failed (connection refused or lost, malformed reply).
    #[error("env-worker {peer}: {op} failed: {detail}")]
    Rpc {
        /// The worker.
        peer: String,
        /// The call.
        op: &'static str,
        /// What happened.
        detail: String,
    },
    /// The env-worker refused this client's token (wrong, or none presented).
    #[error("env-worker {peer}: refused the connection: wrong or missing token (env_worker.token_env)")]
    Unauthorized {
        /// The worker.
        peer: String,
    },
    /// A remote call passed its deadline.
    #[error("env-worker {peer}: {op} did not answer within {after:?}")]
    Timeout {
        /// The worker that did not answer.
        peer: String,
        /// The call.
        op: &'static str,
        /// The deadline.
        after: Duration,
    },
    /// A `dataset` task could not be made (no dataset loaded, or no task of that split and
    /// difficulty).
    #[error(transparent)]
    Dataset(#[from] crate::families::dataset::DatasetError),
    /// The simulated user's model could not be set up (`[user_model]`); says why.
    #[error("{0}")]
    UserModel(String),
    /// An environment server does not serve an optional call (`docs/env-http.md`).
    #[error("environment server {peer}: does not serve {op} (its /v1/info says so)")]
    Unsupported {
        /// The server.
        peer: String,
        /// The call.
        op: &'static str,
    },
    /// An environment endpoint that cannot be used as configured.
    #[error("environment endpoint {endpoint}: {detail}")]
    Endpoint {
        /// The endpoint, as configured (credentials redacted).
        endpoint: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A family this build does not have yet.
    #[error("{0} is not available in this build")]
    NotBuilt(TaskFamily),
}
