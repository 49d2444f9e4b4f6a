//! What the supervisor knows of a child: its name, whether it is a service or a worker, and
//! how to start it again (a factory for fresh arguments, and the [`Handle`] to point at it).
//!
//! Workers (rollout actors) leave by themselves once the drain token is cancelled; services
//! (policy, weight sync, publisher) are drained by the supervisor after every worker has left,
//! in the reverse of their start order.

use futures::future::BoxFuture;
use ractor::{Actor, ActorCell};

use crate::error::{ActorError, Result};
use crate::handle::Handle;

/// How a child takes part in a graceful leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildKind {
    /// Serves the workers; drained by the supervisor once they have all left.
    Service,
    /// Does the work; stops by itself when the drain token is cancelled.
    Worker,
}

/// A child the supervisor can start, and start again after a failure.
pub trait ChildSpec: Send + Sync + 'static {
    /// Its name, for logs, metrics and escalation errors.
    fn name(&self) -> &str;
    /// Service or worker.
    fn kind(&self) -> ChildKind;
    /// Starts a fresh instance linked to `supervisor` (`spawn_linked`).
    fn start(&self, supervisor: ActorCell) -> BoxFuture<'_, Result<ActorCell>>;
}

type Factory<A> = Box<dyn Fn() -> (A, <A as Actor>::Arguments) + Send + Sync>;

/// A child of actor type `A`, made afresh by a factory at every (re)start.
pub struct Child<A: Actor> {
    name: String,
    kind: ChildKind,
    make: Factory<A>,
    handle: Option<Handle<A::Msg>>,
}

impl<A: Actor> Child<A> {
    /// A service whose current instance `handle` always points at.
    pub fn service(
        name: impl Into<String>,
        handle: Handle<A::Msg>,
        make: impl Fn() -> (A, A::Arguments) + Send + Sync + 'static,
    ) -> Self {
        Self { name: name.into(), kind: ChildKind::Service, make: Box::new(make), handle: Some(handle) }
    }

    /// A worker (nobody calls it; it leaves by itself on drain).
    pub fn worker(name: impl Into<String>, make: impl Fn() -> (A, A::Arguments) + Send + Sync + 'static) -> Self {
        Self { name: name.into(), kind: ChildKind::Worker, make: Box::new(make), handle: None }
    }
}

impl<A: Actor> ChildSpec for Child<A> {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ChildKind {
        self.kind
    }

    fn start(&self, supervisor: ActorCell) -> BoxFuture<'_, Result<ActorCell>> {
        Box::pin(async move {
            let (actor, args) = (self.make)();
            let (actor, _join) = A::spawn_linked(None, actor, args, supervisor)
                .await
                .map_err(|e| ActorError::Spawn { what: self.name.clone(), detail: e.to_string() })?;
            if let Some(handle) = &self.handle {
                handle.set(actor.clone());
            }
            Ok(actor.get_cell())
        })
    }
}
