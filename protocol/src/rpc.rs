//! tarpc service traits of the control plane. Every call carries a deadline in its context;
//! nothing waits forever, and an error names the peer that did not answer.
//!
//! ```text
//!  actor ──open(spec)──────────► env-worker   Opened { session, start }
//!        ──step_batch([(s, a)])─►             [StepReply | ServiceError]   (one round trip for many)
//!        ──close(s)────────────►              idle sessions also expire on their own
//! ```
//!
//! A session belongs to the connection that opened it: its id is random (128 bits, not
//! guessable), another connection's step or close is refused with [`ServiceError::NotOwner`],
//! and the sessions of a connection are freed when it closes. Reference solutions are not
//! served over the network (they would hand an actor the answers).

use serde::{Deserialize, Serialize};

use crate::wire::{ControlObservation, Finding, Observation, Prompt, TaskSpec};

/// A session on an env-worker: one episode of one task. Random, so that no client can guess
/// another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SessionId(pub u128);

impl SessionId {
    /// A fresh random id.
    pub fn random() -> Self {
        Self(rand::random())
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s{:032x}", self.0)
    }
}

/// How an episode starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Start {
    /// A text task: the prompt.
    Text(Prompt),
    /// A control task: the first observation and the sizes.
    Control {
        /// The first observation.
        observation: Vec<f32>,
        /// How many discrete actions there are.
        actions: u32,
    },
}

/// An opened session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Opened {
    /// Its id, for the following calls.
    pub session: SessionId,
    /// What the agent sees first.
    pub start: Start,
}

/// One action of the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EnvAction {
    /// A text message (tool call, answer or free text).
    Text(String),
    /// A discrete control action.
    Discrete(u32),
}

/// What a step returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StepReply {
    /// A text observation.
    Text(Observation),
    /// A control observation.
    Control(ControlObservation),
}

/// Why a service call failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ServiceError {
    /// No such session (never opened, closed, or expired after being idle).
    #[error("no session {0}: never opened, closed, or expired after being idle")]
    UnknownSession(SessionId),
    /// The worker holds its maximum number of sessions.
    #[error("env-worker is full: {limit} sessions open; close some or add workers")]
    Full {
        /// The limit.
        limit: usize,
    },
    /// The task or the action does not fit (bad difficulty, text action to a control task…).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The worker is shutting down and takes no new sessions.
    #[error("env-worker is shutting down")]
    ShuttingDown,
    /// The session was opened by another connection.
    #[error("session {0} belongs to another connection")]
    NotOwner(SessionId),
    /// This connection holds its quota of sessions.
    #[error("this connection holds {limit} sessions, its quota; close some or open another connection")]
    Quota {
        /// The per-connection quota.
        limit: usize,
    },
    /// A request over one of the per-request caps.
    #[error("{what}: {found} is over the limit of {limit}")]
    TooLarge {
        /// What was counted (`sessions per step_batch`, `characters of message 3`…).
        what: String,
        /// How many there were.
        found: usize,
        /// The cap.
        limit: usize,
    },
}

/// The env-worker service: many sessions per process.
#[tarpc::service]
pub trait EnvService {
    /// Opens a session for `spec`.
    async fn open(spec: TaskSpec) -> Result<Opened, ServiceError>;
    /// Steps one session.
    async fn step(session: SessionId, action: EnvAction) -> Result<StepReply, ServiceError>;
    /// Steps many sessions in one round trip; replies in the same order. More sessions than
    /// the worker's cap are refused as a whole.
    async fn step_batch(
        steps: Vec<(SessionId, EnvAction)>,
    ) -> Result<Vec<Result<StepReply, ServiceError>>, ServiceError>;
    /// The step verifier's findings for an episode of a text task, given its agent messages.
    async fn verify(spec: TaskSpec, agent_messages: Vec<String>) -> Result<Vec<Finding>, ServiceError>;
    /// Closes a session; closing an unknown one is not an error, another connection's is.
    async fn close(session: SessionId) -> Result<bool, ServiceError>;
}
