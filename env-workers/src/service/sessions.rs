//! The session table behind the env-worker: many episodes per process, bounded, with idle
//! sessions expiring. Steps of different sessions run in parallel (one lock per session).
//!
//! Every session has an [`Owner`] (the connection that opened it): only it may step or close
//! the session, each owner but the in-process one holds at most `max_per_owner`, and an
//! owner's sessions are freed together when its connection ends. Ids are random 128-bit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, TryLockError};
use std::time::{Duration, Instant};

use protocol::rpc::{EnvAction, Opened, ServiceError, SessionId, Start, StepReply};
use protocol::wire::{Finding, TaskFamily, TaskSpec};

use crate::control::{CartPole, ControlEnvironment};
use crate::env::Environment;
use crate::registry;
use crate::session::{Guarded, Limits};
use crate::user_model::UserModel;

/// Tunables of a session table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableConfig {
    /// Most sessions open at once.
    pub max_sessions: usize,
    /// Most sessions one owner (connection) may hold; the in-process owner is not limited.
    pub max_per_owner: usize,
    /// A session untouched this long is dropped.
    pub idle_timeout: Duration,
    /// Limits of every text episode.
    pub limits: Limits,
}

impl Default for TableConfig {
    fn default() -> Self {
        Self {
            max_sessions: 4096,
            max_per_owner: 64,
            idle_timeout: Duration::from_secs(300),
            limits: Limits::default(),
        }
    }
}

/// Who opened a session: a connection of the env-worker, or this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner(pub u64);

impl Owner {
    /// In-process clients (trusted; no quota).
    pub const LOCAL: Owner = Owner(0);
}

enum Env {
    Text(Guarded),
    Control(CartPole),
}

struct Entry {
    env: Env,
    last_used: Instant,
}

struct Slot {
    owner: Owner,
    entry: Arc<Mutex<Entry>>,
}

#[derive(Default)]
struct Sessions {
    by_id: HashMap<SessionId, Slot>,
    per_owner: HashMap<Owner, usize>,
}

impl Sessions {
    fn remove(&mut self, id: &SessionId) -> Option<Slot> {
        let slot = self.by_id.remove(id)?;
        if let Some(n) = self.per_owner.get_mut(&slot.owner) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(&slot.owner);
            }
        }
        Some(slot)
    }
}

/// Open sessions, shared by every connection of an env-worker (and by in-process clients).
pub struct SessionTable {
    sessions: RwLock<Sessions>,
    closing: AtomicBool,
    config: TableConfig,
    user_model: Option<Arc<UserModel>>,
}

fn bad(e: impl std::fmt::Display) -> ServiceError {
    ServiceError::BadRequest(e.to_string())
}

impl SessionTable {
    /// An empty table.
    pub fn new(config: TableConfig) -> Self {
        Self { sessions: RwLock::default(), closing: AtomicBool::new(false), config, user_model: None }
    }

    /// Sessions opened from now on have their simulated user played by `model` when given
    /// (`[user_model]`; see [`registry::make_with_user`]).
    pub fn with_user_model(mut self, model: Option<Arc<UserModel>>) -> Self {
        self.user_model = model;
        self
    }

    /// The table's tunables.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// Sessions open now.
    pub fn len(&self) -> usize {
        self.sessions.read().map_or(0, |s| s.by_id.len())
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

    /// Sessions `owner` holds now.
    pub fn owned_by(&self, owner: Owner) -> usize {
        self.sessions.read().map_or(0, |s| s.per_owner.get(&owner).copied().unwrap_or(0))
    }

    /// Opens a session for `spec`, owned by `owner`.
    pub fn open(&self, owner: Owner, spec: TaskSpec) -> Result<Opened, ServiceError> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(ServiceError::ShuttingDown);
        }
        let (env, start) = if spec.family == TaskFamily::Cartpole {
            let mut env = CartPole::default();
            let observation = env.reset(spec.seed);
            let actions = env.action_count() as u32;
            (Env::Control(env), Start::Control { observation, actions })
        } else {
            let env = registry::make_with_user(spec, self.config.limits, self.user_model.as_ref()).map_err(bad)?;
            let prompt = env.prompt().clone();
            (Env::Text(env), Start::Text(prompt))
        };
        let mut sessions = self.sessions.write().map_err(|_| bad("session table poisoned"))?;
        let held = sessions.per_owner.get(&owner).copied().unwrap_or(0);
        if owner != Owner::LOCAL && held >= self.config.max_per_owner {
            return Err(ServiceError::Quota { limit: self.config.max_per_owner });
        }
        if sessions.by_id.len() >= self.config.max_sessions {
            return Err(ServiceError::Full { limit: self.config.max_sessions });
        }
        let mut session = SessionId::random();
        while sessions.by_id.contains_key(&session) {
            session = SessionId::random();
        }
        let entry = Arc::new(Mutex::new(Entry { env, last_used: Instant::now() }));
        sessions.by_id.insert(session, Slot { owner, entry });
        *sessions.per_owner.entry(owner).or_default() += 1;
        Ok(Opened { session, start })
    }

    /// The entry of `session` if `owner` owns it.
    fn owned(&self, owner: Owner, session: SessionId) -> Result<Arc<Mutex<Entry>>, ServiceError> {
        let sessions = self.sessions.read().map_err(|_| bad("session table poisoned"))?;
        let slot = sessions.by_id.get(&session).ok_or(ServiceError::UnknownSession(session))?;
        if slot.owner != owner {
            return Err(ServiceError::NotOwner(session));
        }
        Ok(slot.entry.clone())
    }

    /// Steps one session of `owner`. A finished text episode stays open (answering "episode
    /// is over") until closed or expired.
    pub fn step(&self, owner: Owner, session: SessionId, action: EnvAction) -> Result<StepReply, ServiceError> {
        let entry = self.owned(owner, session)?;
        let mut entry = entry.lock().map_err(|_| bad("session poisoned"))?;
        entry.last_used = Instant::now();
        match (&mut entry.env, action) {
            (Env::Text(env), EnvAction::Text(message)) => Ok(StepReply::Text(env.step(&message))),
            (Env::Control(env), EnvAction::Discrete(a)) => env.step(a).map(StepReply::Control).map_err(bad),
            (Env::Text(_), EnvAction::Discrete(_)) => Err(bad("a discrete action was sent to a text task")),
            (Env::Control(_), EnvAction::Text(_)) => Err(bad("a text action was sent to a control task")),
        }
    }

    /// Closes a session of `owner`; returns whether it was open. Another owner's session is
    /// refused and stays open.
    pub fn close(&self, owner: Owner, session: SessionId) -> Result<bool, ServiceError> {
        let mut sessions = self.sessions.write().map_err(|_| bad("session table poisoned"))?;
        match sessions.by_id.get(&session) {
            None => Ok(false),
            Some(slot) if slot.owner != owner => Err(ServiceError::NotOwner(session)),
            Some(_) => Ok(sessions.remove(&session).is_some()),
        }
    }

    /// Closes every session of `owner` (its connection ended); returns how many.
    pub fn close_owner(&self, owner: Owner) -> usize {
        let Ok(mut sessions) = self.sessions.write() else { return 0 };
        let ids: Vec<SessionId> =
            sessions.by_id.iter().filter(|(_, slot)| slot.owner == owner).map(|(id, _)| *id).collect();
        ids.iter().filter(|id| sessions.remove(id).is_some()).count()
    }

    /// Drops sessions idle longer than the timeout; returns how many.
    pub fn expire_idle(&self) -> usize {
        let Ok(mut sessions) = self.sessions.write() else { return 0 };
        let limit = self.config.idle_timeout;
        let idle: Vec<SessionId> = sessions
            .by_id
            .iter()
            // A session being stepped is in use (a step may wait on a user model): never wait for it here,
            // under the table's write lock.
            .filter(|(_, slot)| match slot.entry.try_lock() {
                Ok(e) => e.last_used.elapsed() >= limit,
                Err(TryLockError::WouldBlock) => false,
                Err(TryLockError::Poisoned(_)) => true,
            })
            .map(|(id, _)| *id)
            .collect();
        idle.iter().filter(|id| sessions.remove(id).is_some()).count()
    }

    /// The reference solution of a text task (in-process callers only: not served).
    pub fn reference(&self, spec: TaskSpec) -> Result<Vec<String>, ServiceError> {
        Ok(registry::make(spec, self.config.limits).map_err(bad)?.reference())
    }

    /// The verifier's findings on an episode of a text task; the episode's turn and message
    /// limits apply ([`Guarded::verify`]).
    pub fn verify(&self, spec: TaskSpec, agent_messages: &[String]) -> Result<Vec<Finding>, ServiceError> {
        Ok(registry::make(spec, self.config.limits).map_err(bad)?.verify(agent_messages))
    }
}
