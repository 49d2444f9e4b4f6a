//! The simulated user played by an OpenAI-compatible chat model (MUA-RL): any environment with a
//! user (today `retail`) hands the model the user's private goal and persona as a system prompt
//! and the conversation so far, role-flipped, and shows the agent what the model replies.
//!
//! ```text
//!  agent ──Say(text)──► environment ──► Conversation (role-flipped)          ──► UserModel::reply
//!     system:    persona, private goal and facts, rules, the stop signal            (blocking; the
//!     user:      "Hi! How can I help you today?"  (a fixed greeting)                  model's own
//!     assistant: the environment's opening (the user's first message)                  runtime)
//!     user:      agent message 1         assistant: user reply 1        …   user: text
//!  ◄── Says(reply) | Ends(last words: the reply held the stop signal)
//!  ◄── Err: every attempt failed (chat client: deadlines, retries, endpoints) ─► the environment's
//!           rule-based user answers instead, counted (reagent_user_model_fallbacks_total)
//! ```
//!
//! The model is asked from synchronous `Environment::step`: each request runs on the model's own
//! runtime thread and the caller waits for it, within the worst case of every attempt and backoff
//! (inside a multi-threaded tokio runtime the wait is `block_in_place`, so other tasks move off
//! the waiting thread; on a current-thread runtime that runtime's tasks wait with it, so a server
//! the model is reached through must not run there). The agent-facing reward never depends on what the model says: it comes
//! from the environment's ground truth. The turn limit and what ends an episode are the
//! environment's ([`UserModel::max_turns`]).

pub mod config;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use protocol::config::{ConfigError, ReagentConfig};
use protocol::metrics::{self, ChatMetrics};
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

pub use config::{Player, UserModelConfig};

use crate::chat::{AttemptError, ChatClient, ChatError, ChatSettings, Completion, Message};

/// The agent's fixed first line in the user model's view (chat templates expect a conversation
/// to open with a user turn, which the agent's side becomes).
pub const GREETING: &str = "Hi! How can I help you today?";

/// Why the model could not be set up, or gave no reply for one turn.
#[derive(Debug, thiserror::Error)]
pub enum UserModelError {
    /// The configuration is wrong; names the key.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error("simulated user model: http client: {0}")]
    Client(String),
    /// Every attempt failed; `last` says how the last one did.
    #[error("simulated user model: no usable reply after {attempts} attempts; last: {last}")]
    Exhausted {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        last: ChatError,
    },
    /// The attempts together outlasted their worst case (should not happen: each is bounded).
    #[error("simulated user model: no reply within {after_ms} ms")]
    Deadline {
        /// How long the caller waited.
        after_ms: u64,
    },
    /// The model's runtime has stopped (the process is shutting down).
    #[error("simulated user model: its runtime has stopped")]
    Stopped,
}

impl UserModelError {
    /// A short label for metrics and logs: the last attempt's kind when every attempt failed.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config(_) => "config",
            Self::Client(_) => "client",
            Self::Exhausted { last, .. } => last.kind(),
            Self::Deadline { .. } => "deadline",
            Self::Stopped => "stopped",
        }
    }
}

/// What the user does with its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserTurn {
    /// Replies with this text.
    Says(String),
    /// Ends the conversation (its reply held the stop signal); its last words, possibly empty.
    Ends(String),
}

/// One episode's conversation with the user, as the user model sees it (role-flipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    system: String,
    turns: Vec<Message>,
    replies: usize,
}

impl Conversation {
    /// A conversation whose user holds `system` (persona, goal, rules) and opened with `opening`.
    pub fn new(system: impl Into<String>, opening: impl Into<String>) -> Self {
        let turns = vec![Message::user(GREETING), Message::assistant(opening)];
        Self { system: system.into(), turns, replies: 0 }
    }

    /// The agent said `text` to the user: a "user" message in the model's view.
    pub fn agent_said(&mut self, text: &str) {
        self.turns.push(Message::user(text));
    }

    /// The user replied `text` (the model's, or the rule-based fallback's): an "assistant"
    /// message in the model's view.
    pub fn user_said(&mut self, text: &str) {
        self.turns.push(Message::assistant(text));
        self.replies += 1;
    }

    /// Replies the user gave after its opening.
    pub fn replies(&self) -> usize {
        self.replies
    }

    /// The request's messages: the system prompt, then every turn.
    pub fn messages(&self) -> Vec<Message> {
        std::iter::once(Message::system(self.system.as_str())).chain(self.turns.iter().cloned()).collect()
    }
}

/// A reply read out of a completion: the stop signal ends the conversation, an empty reply is
/// malformed (retried).
fn read_turn(endpoint: &str, completion: Completion, stop: &str) -> Result<UserTurn, ChatError> {
    let text = completion.content.trim();
    if text.contains(stop) {
        return Ok(UserTurn::Ends(text.replace(stop, " ").trim().to_string()));
    }
    if text.is_empty() {
        return Err(ChatError::Malformed { endpoint: endpoint.to_string(), detail: "an empty reply".into() });
    }
    Ok(UserTurn::Says(text.to_string()))
}

/// Everything the user model needs besides its chat client.
#[derive(Debug, Clone)]
pub struct UserModelSettings {
    /// How the model is reached.
    pub chat: ChatSettings,
    /// The most replies the user gives in one episode.
    pub max_turns: usize,
    /// The text with which the user ends the conversation.
    pub stop_signal: String,
}

/// The model playing the user, shared by every episode of a process.
#[derive(Debug)]
pub struct UserModel {
    chat: Arc<ChatClient>,
    runtime: Option<Runtime>,
    max_turns: usize,
    stop_signal: Arc<str>,
    deadline: Duration,
    replies: AtomicU64,
    fallbacks: AtomicU64,
}

impl UserModel {
    /// A user model over `settings.chat.endpoints` (at least one), with its own runtime thread.
    pub fn new(settings: UserModelSettings) -> Result<Arc<Self>, UserModelError> {
        let deadline = settings.chat.worst_case() + Duration::from_secs(1);
        let chat = ChatClient::new("simulated user", settings.chat, ChatMetrics::user_model())
            .map_err(UserModelError::Client)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("user-model")
            .enable_all()
            .build()
            .map_err(|e| UserModelError::Client(format!("runtime: {e}")))?;
        Ok(Arc::new(Self {
            chat: Arc::new(chat),
            runtime: Some(runtime),
            max_turns: settings.max_turns,
            stop_signal: settings.stop_signal.into(),
            deadline,
            replies: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
        }))
    }

    /// From a typed `[user_model]`: `None` when the rule-based user plays (`player = "rules"`).
    pub fn from_section(cfg: &UserModelConfig) -> Result<Option<Arc<Self>>, UserModelError> {
        if cfg.player == Player::Rules {
            return Ok(None);
        }
        let settings = UserModelSettings {
            chat: cfg.chat_settings()?,
            max_turns: cfg.max_turns,
            stop_signal: cfg.stop_signal.clone(),
        };
        Self::new(settings).map(Some)
    }

    /// From a loaded configuration's `[user_model]`: `None` when the rule-based user plays.
    pub fn from_config(cfg: &ReagentConfig) -> Result<Option<Arc<Self>>, UserModelError> {
        Self::from_section(&UserModelConfig::from_config(cfg)?)
    }

    /// The most replies the user gives in one episode.
    pub fn max_turns(&self) -> usize {
        self.max_turns
    }

    /// The text with which the user ends the conversation.
    pub fn stop_signal(&self) -> &str {
        &self.stop_signal
    }

    /// Replies the model gave.
    pub fn replies(&self) -> u64 {
        self.replies.load(Ordering::Relaxed)
    }

    /// Turns the rule-based user answered because the model failed.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// Counts and logs a turn the rule-based user answered instead, because of `error`.
    pub fn fell_back(&self, error: &UserModelError) {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        metrics::USER_MODEL_FALLBACKS.with_label_values(&[error.kind()]).inc();
        tracing::warn!(error = %error, "simulated user model failed; the rule-based user answers this turn");
    }

    /// The user's next turn in `conversation` (which ends with the agent's message). Blocks the
    /// calling thread until the model answers or every attempt has failed.
    pub fn reply(&self, conversation: &Conversation) -> Result<UserTurn, UserModelError> {
        let runtime = self.runtime.as_ref().ok_or(UserModelError::Stopped)?;
        let (chat, stop, messages) = (self.chat.clone(), self.stop_signal.clone(), conversation.messages());
        let (tx, rx) = sync_channel(1);
        let task = runtime.spawn(async move {
            let turn = chat.complete(&messages, |endpoint, c| read_turn(endpoint, c, &stop)).await;
            // The caller may have stopped waiting; then nobody needs the turn.
            let _ = tx.send(turn);
        });
        let wait = || rx.recv_timeout(self.deadline);
        let received = match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(wait),
            _ => wait(),
        };
        match received {
            Ok(Ok(turn)) => {
                self.replies.fetch_add(1, Ordering::Relaxed);
                metrics::USER_MODEL_REPLIES.inc();
                Ok(turn)
            }
            Ok(Err(e)) => Err(UserModelError::Exhausted { attempts: e.attempts, last: e.last }),
            Err(RecvTimeoutError::Timeout) => {
                task.abort();
                Err(UserModelError::Deadline { after_ms: self.deadline.as_millis() as u64 })
            }
            Err(RecvTimeoutError::Disconnected) => Err(UserModelError::Stopped),
        }
    }
}

impl Drop for UserModel {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is refused inside another runtime: let it go instead.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion(text: &str) -> Completion {
        Completion { content: text.into(), reasoning: None }
    }

    #[test]
    fn the_conversation_is_role_flipped_after_a_fixed_greeting() {
        let mut c = Conversation::new("persona and goal", "I need to cancel an order.");
        c.agent_said("What is your name?");
        c.user_said("Ada Lovelace.");
        let messages = c.messages();
        let roles: Vec<(&str, &str)> = messages.iter().map(|m| (m.role, m.content.as_str())).collect();
        let want = [
            ("system", "persona and goal"),
            ("user", GREETING),
            ("assistant", "I need to cancel an order."),
            ("user", "What is your name?"),
            ("assistant", "Ada Lovelace."),
        ];
        assert_eq!(roles, want);
        assert_eq!(c.replies(), 1, "the opening is not a reply");
    }

    #[test]
    fn the_stop_signal_ends_and_an_empty_reply_is_malformed() {
        let read = |t: &str| read_turn("e:1", completion(t), "###STOP###");
        assert_eq!(read(" Thanks! ").unwrap(), UserTurn::Says("Thanks!".into()));
        assert_eq!(read("Thanks, bye. ###STOP###").unwrap(), UserTurn::Ends("Thanks, bye.".into()));
        assert_eq!(read("###STOP###").unwrap(), UserTurn::Ends(String::new()));
        let err = read("  \n").unwrap_err();
        assert!(err.retryable() && err.to_string().contains("an empty reply"), "{err}");
    }
}
