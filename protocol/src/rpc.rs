//! tarpc service traits of the control plane. Every call carries a deadline in its context;
//! nothing waits forever, and an error names the peer that did not answer.
//!
//! ```text
//!  actor ──open(spec)──────────► env-worker   Opened { session, start }
//!        ──step_batch([(s, a)])─►             [StepReply | ServiceError]   (one round trip for many)
//!        ──close(s)────────────►              idle sessions also expire on their own
//! ```

use serde::{Deserialize, Serialize};

use crate::wire::{ControlObservation, Finding, Observation, Prompt, TaskSpec};

/// A session on an env-worker: one episode of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SessionId(pub u64);

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s{}", self.0)
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
}

/// The env-worker service: many sessions per process.
#[tarpc::service]
pub trait EnvService {
    /// Opens a session for `spec`.
    async fn open(spec: TaskSpec) -> Result<Opened, ServiceError>;
    /// Steps one session.
    async fn step(session: SessionId, action: EnvAction) -> Result<StepReply, ServiceError>;
    /// Steps many sessions in one round trip; replies in the same order.
    async fn step_batch(steps: Vec<(SessionId, EnvAction)>) -> Vec<Result<StepReply, ServiceError>>;
    /// The reference solution's agent messages for a text task (for SFT and the reference judge).
    async fn reference(spec: TaskSpec) -> Result<Vec<String>, ServiceError>;
    /// The step verifier's findings for an episode of a text task, given its agent messages.
    async fn verify(spec: TaskSpec, agent_messages: Vec<String>) -> Result<Vec<Finding>, ServiceError>;
    /// Closes a session; closing an unknown one is not an error.
    async fn close(session: SessionId) -> bool;
}
