//! The session table behind the env-worker: many episodes per process, bounded, with idle
//! sessions expiring. Steps of different sessions run in parallel (one lock per session).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use protocol::rpc::{EnvAction, Opened, ServiceError, SessionId, Start, StepReply};
use protocol::wire::{Finding, TaskFamily, TaskSpec};

use crate::control::{CartPole, ControlEnvironment};
use crate::env::Environment;
use crate::registry;
use crate::session::{Guarded, Limits};

/// Tunables of a session table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableConfig {
    /// Most sessions open at once.
    pub max_sessions: usize,
    /// A session untouched this long is dropped.
    pub idle_timeout: Duration,
    /// Limits of every text episode.
    pub limits: Limits,
}

impl Default for TableConfig {
    fn default() -> Self {
        Self { max_sessions: 4096, idle_timeout: Duration::from_secs(300), limits: Limits::default() }
    }
}

enum Env {
    Text(Guarded),
    Control(CartPole),
}

struct Entry {
    env: Env,
    last_used: Instant,
}

/// Open sessions, shared by every connection of an env-worker (and by in-process clients).
pub struct SessionTable {
    sessions: RwLock<HashMap<SessionId, Arc<Mutex<Entry>>>>,
    next_id: AtomicU64,
    closing: AtomicBool,
    config: TableConfig,
}

fn bad(e: impl std::fmt::Display) -> ServiceError {
    ServiceError::BadRequest(e.to_string())
}

impl SessionTable {
    /// An empty table.
    pub fn new(config: TableConfig) -> Self {
        Self { sessions: RwLock::default(), next_id: AtomicU64::new(1), closing: AtomicBool::new(false), config }
    }

    /// The table's tunables.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// Sessions open now.
    pub fn len(&self) -> usize {
        self.sessions.read().map_or(0, |s| s.len())
    }

    /// Whether no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Refuses new sessions from now on (graceful shutdown); open ones may finish.
    pub fn begin_shutdown(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// Whether shutdown has begun.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// Opens a session for `spec`.
    pub fn open(&self, spec: TaskSpec) -> Result<Opened, ServiceError> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(ServiceError::ShuttingDown);
        }
        let (env, start) = if spec.family == TaskFamily::Cartpole {
            let mut env = CartPole::default();
            let observation = env.reset(spec.seed);
            let actions = env.action_count() as u32;
            (Env::Control(env), Start::Control { observation, actions })
        } else {
            let env = registry::make(spec, self.config.limits).map_err(bad)?;
            let prompt = env.prompt().clone();
            (Env::Text(env), Start::Text(prompt))
        };
        let mut sessions = self.sessions.write().map_err(|_| bad("session table poisoned"))?;
        if sessions.len() >= self.config.max_sessions {
            return Err(ServiceError::Full { limit: self.config.max_sessions });
        }
        let session = SessionId(self.next_id.fetch_add(1, Ordering::Relaxed));
        sessions.insert(session, Arc::new(Mutex::new(Entry { env, last_used: Instant::now() })));
        Ok(Opened { session, start })
    }

    /// Steps one session. A finished text episode stays open (answering "episode is over")
    /// until closed or expired.
    pub fn step(&self, session: SessionId, action: EnvAction) -> Result<StepReply, ServiceError> {
        let entry = self
            .sessions
            .read()
            .map_err(|_| bad("session table poisoned"))?
            .get(&session)
            .cloned()
            .ok_or(ServiceError::UnknownSession(session))?;
        let mut entry = entry.lock().map_err(|_| bad("session poisoned"))?;
        entry.last_used = Instant::now();
        match (&mut entry.env, action) {
            (Env::Text(env), EnvAction::Text(message)) => Ok(StepReply::Text(env.step(&message))),
            (Env::Control(env), EnvAction::Discrete(a)) => env.step(a).map(StepReply::Control).map_err(bad),
            (Env::Text(_), EnvAction::Discrete(_)) => Err(bad("a discrete action was sent to a text task")),
            (Env::Control(_), EnvAction::Text(_)) => Err(bad("a text action was sent to a control task")),
        }
    }

    /// Closes a session; returns whether it was open.
    pub fn close(&self, session: SessionId) -> bool {
        self.sessions.write().is_ok_and(|mut s| s.remove(&session).is_some())
    }

    /// Drops sessions idle longer than the timeout; returns how many.
    pub fn expire_idle(&self) -> usize {
        let Ok(mut sessions) = self.sessions.write() else { return 0 };
        let before = sessions.len();
        let limit = self.config.idle_timeout;
        sessions.retain(|_, e| e.lock().map(|e| e.last_used.elapsed() < limit).unwrap_or(false));
        before - sessions.len()
    }

    /// The reference solution of a text task.
    pub fn reference(&self, spec: TaskSpec) -> Result<Vec<String>, ServiceError> {
        Ok(registry::make(spec, self.config.limits).map_err(bad)?.reference())
    }

    /// The verifier's findings on an episode of a text task.
    pub fn verify(&self, spec: TaskSpec, agent_messages: &[String]) -> Result<Vec<Finding>, ServiceError> {
        Ok(registry::make(spec, self.config.limits).map_err(bad)?.verify(agent_messages))
    }
}
