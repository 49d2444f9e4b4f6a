//! A restart-proof reference to a supervised actor: the supervisor writes the new `ActorRef`
//! into the handle each time it (re)starts the child, and callers always reach the current one.
//! A call made while the actor is down (between a failure and its restart) waits for the
//! restart, within the call's deadline, instead of failing — so a policy restart stalls the
//! rollout slots rather than failing every one of them. Errors name the actor and the request.
//!
//! ```text
//!  supervisor ── spawn_linked ──► child v1 ── fails ──► (backoff) ── spawn_linked ──► child v2
//!        └── handle.set(v1) ─────────────────────────────────────────── handle.set(v2)
//!  rollout ── handle.call(op, timeout) ── v1 down? wait for v2 (deadline) ──► call v2
//! ```

use std::sync::Arc;
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{ActorRef, ActorStatus, Message, RpcReplyPort};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::{ActorError, Result};

/// The current `ActorRef` of a supervised actor; cheap to clone (clones share the slot).
pub struct Handle<M: Message> {
    name: &'static str,
    slot: Arc<watch::Sender<Option<ActorRef<M>>>>,
}

impl<M: Message> Clone for Handle<M> {
    fn clone(&self) -> Self {
        Self { name: self.name, slot: self.slot.clone() }
    }
}

impl<M: Message> std::fmt::Debug for Handle<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").field("actor", &self.name).field("up", &self.live().is_some()).finish()
    }
}

fn is_up<M: Message>(actor: &ActorRef<M>) -> bool {
    matches!(actor.get_status(), ActorStatus::Starting | ActorStatus::Running | ActorStatus::Upgrading)
}

impl<M: Message> Handle<M> {
    /// An empty handle for the actor called `name` (in errors and logs).
    pub fn new(name: &'static str) -> Self {
        Self { name, slot: Arc::new(watch::Sender::new(None)) }
    }

    /// The actor's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Points the handle at a (re)started actor, waking callers that wait for it.
    pub fn set(&self, actor: ActorRef<M>) {
        self.slot.send_replace(Some(actor));
    }

    /// The current actor if it is up.
    fn live(&self) -> Option<ActorRef<M>> {
        self.slot.borrow().as_ref().filter(|a| is_up(a)).cloned()
    }

    /// The current actor, waiting until `deadline` for it to be (re)started.
    async fn up_by(&self, deadline: Instant) -> Result<ActorRef<M>> {
        let mut changes = self.slot.subscribe();
        loop {
            if let Some(actor) = changes.borrow_and_update().as_ref().filter(|a| is_up(a)) {
                return Ok(actor.clone());
            }
            if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
                return Err(ActorError::Unavailable {
                    actor: self.name,
                    detail: "not running (starting or restarting)".into(),
                });
            }
        }
    }

    /// Sends `msg` to the actor if it is up, without waiting for an answer.
    pub fn cast(&self, msg: M) -> Result<()> {
        let actor =
            self.live().ok_or_else(|| ActorError::Unavailable { actor: self.name, detail: "not running".into() })?;
        actor.cast(msg).map_err(|e| ActorError::Unavailable { actor: self.name, detail: e.to_string() })
    }

    /// Sends the message `build` makes around a reply port and waits for the reply; the whole
    /// call, waiting for a restart included, takes at most `timeout`. `op` names the request in
    /// errors.
    pub async fn call<T: Send + 'static>(
        &self,
        op: &'static str,
        build: impl FnOnce(RpcReplyPort<T>) -> M,
        timeout: Duration,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        let actor = self.up_by(deadline).await?;
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        match actor.call(build, Some(left)).await {
            Ok(CallResult::Success(reply)) => Ok(reply),
            Ok(CallResult::Timeout) => {
                Err(ActorError::Timeout { what: format!("{} actor: {op}", self.name), after: timeout })
            }
            Ok(CallResult::SenderError) => {
                Err(ActorError::Unavailable { actor: self.name, detail: format!("dropped the reply to {op}") })
            }
            Err(e) => Err(ActorError::Unavailable { actor: self.name, detail: format!("{op}: {e}") }),
        }
    }
}

#[cfg(test)]
mod tests {
    use ractor::{Actor, ActorProcessingErr};

    use super::*;

    struct Echo;

    impl Actor for Echo {
        type Msg = RpcReplyPort<u32>;
        type State = u32;
        type Arguments = u32;

        async fn pre_start(&self, _: ActorRef<Self::Msg>, n: u32) -> Result<u32, ActorProcessingErr> {
            Ok(n)
        }

        async fn handle(
            &self,
            _: ActorRef<Self::Msg>,
            reply: Self::Msg,
            n: &mut u32,
        ) -> Result<(), ActorProcessingErr> {
            let _ = reply.send(*n);
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_call_while_the_actor_is_down_waits_for_its_restart_within_the_deadline() {
        let handle: Handle<RpcReplyPort<u32>> = Handle::new("echo");
        let short = Duration::from_millis(50);
        let err = handle.call("echo", |r| r, short).await.unwrap_err().to_string();
        assert!(err.contains("echo actor is unavailable"), "{err}");

        let (first, join) = Actor::spawn(None, Echo, 1).await.unwrap();
        handle.set(first.clone());
        assert_eq!(handle.call("echo", |r| r, short).await.unwrap(), 1);
        first.stop(None);
        join.await.unwrap();
        assert!(handle.cast(RpcReplyPort::from(tokio::sync::oneshot::channel().0)).is_err(), "down");

        let waiting = {
            let handle = handle.clone();
            tokio::spawn(async move { handle.call("echo", |r| r, Duration::from_secs(30)).await })
        };
        // On this single-threaded runtime, yielding lets the call run until it waits for a restart.
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        let (second, _) = Actor::spawn(None, Echo, 2).await.unwrap();
        handle.set(second.clone());
        assert_eq!(waiting.await.unwrap().unwrap(), 2, "the waiting call reached the restarted actor");
        second.stop(None);
    }
}
