//! The supervisor of one actor process: it starts its children with `spawn_linked`, restarts a
//! failed child after a backoff ([`RestartPolicy`]), escalates — stops the process with an
//! error — when a child fails too often, and runs the graceful leave.
//!
//! ```text
//!  pre_start: start children in order (services first, then workers); a service that cannot
//!             start fails the process, a worker that cannot start is a failure like any other
//!  child failed ─► RestartPolicy::decide ─► Restart(backoff) ─► send_after ─► spawn_linked again
//!                                        └► Escalate ─► kill every child, stop: supervise() → Err
//!  drain token cancelled ─► Drain: workers finish in-flight work and stop by themselves
//!        └─ every worker gone ─► drain services in reverse start order ─► stop: supervise() → Ok
//! ```

mod child;
mod restart;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio_util::sync::CancellationToken;

pub use child::{Child, ChildKind, ChildSpec};
pub use restart::{Decision, FailureWindow, RestartPolicy};

use crate::error::{ActorError, Result};

/// The supervisor actor (field-less; its state is [`SupervisorState`]).
pub struct Supervisor;

/// What the supervisor is started with.
pub struct SupervisorArgs {
    /// The children, in start order.
    pub children: Vec<Arc<dyn ChildSpec>>,
    /// How failures are answered.
    pub policy: RestartPolicy,
    /// Cancelled to start the graceful leave; workers watch it too.
    pub drain: CancellationToken,
    /// How long each service may take to drain its mailbox and stop.
    pub service_stop_timeout: Duration,
    /// Where the supervisor records restarts and an escalation, for [`supervise`].
    pub record: Arc<Mutex<SupervisionRecord>>,
}

/// What happened under a supervisor, read once it has stopped.
#[derive(Debug, Default)]
pub struct SupervisionRecord {
    /// Children restarted after a failure.
    pub restarts: u64,
    /// Set when a child failed too often: why the process stops.
    pub escalation: Option<ActorError>,
    /// Set when the graceful leave completed (every child gone in order).
    pub left: bool,
}

/// The supervisor's messages.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// Start child `index` again (sent to itself after the backoff).
    Restart(usize),
    /// Begin the graceful leave (sent when the drain token is cancelled).
    Drain,
}

struct ChildState {
    spec: Arc<dyn ChildSpec>,
    cell: Option<ActorCell>,
    failures: FailureWindow,
}

/// The supervisor's state.
pub struct SupervisorState {
    children: Vec<ChildState>,
    policy: RestartPolicy,
    drain: CancellationToken,
    draining: bool,
    stop_timeout: Duration,
    record: Arc<Mutex<SupervisionRecord>>,
    stopped: CancellationToken,
}

impl SupervisorState {
    fn index_of(&self, cell: &ActorCell) -> Option<usize> {
        self.children.iter().position(|c| c.cell.as_ref().is_some_and(|own| own.get_id() == cell.get_id()))
    }

    fn record(&self) -> std::sync::MutexGuard<'_, SupervisionRecord> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The metric label of a child: its name without a trailing slot number.
fn kind_label(name: &str) -> &str {
    name.trim_end_matches(|c: char| c.is_ascii_digit()).trim_end_matches('-')
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut children = Vec::with_capacity(args.children.len());
        // Workers that could not start (an env-worker not up yet, say): treated as failures
        // once the state exists, so they get the restart policy rather than ending the process.
        let mut not_started = Vec::new();
        for spec in args.children {
            let cell = match spec.start(myself.get_cell()).await {
                Ok(cell) => Some(cell),
                Err(e) if spec.kind() == ChildKind::Worker => {
                    not_started.push((children.len(), e.to_string()));
                    None
                }
                Err(e) => {
                    myself.stop_children(Some("a sibling failed to start".into()));
                    return Err(e.into());
                }
            };
            tracing::debug!(child = spec.name(), started = cell.is_some(), "start");
            children.push(ChildState { spec, cell, failures: FailureWindow::default() });
        }
        let stopped = CancellationToken::new();
        let (drain, me, stop) = (args.drain.clone(), myself.clone(), stopped.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = drain.cancelled() => { let _ = me.cast(SupervisorMsg::Drain); }
                _ = stop.cancelled() => {}
            }
        });
        let mut state = SupervisorState {
            children,
            policy: args.policy,
            drain: args.drain,
            draining: false,
            stop_timeout: args.service_stop_timeout,
            record: args.record,
            stopped,
        };
        for (i, error) in not_started {
            on_failure(&myself, &mut state, i, error);
        }
        Ok(state)
    }

    async fn post_stop(&self, myself: ActorRef<Self::Msg>, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        state.stopped.cancel();
        myself.stop_children(Some("supervisor stopped".into()));
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Restart(i) => restart(&myself, state, i).await,
            SupervisorMsg::Drain => {
                if !state.draining {
                    tracing::info!("graceful leave: workers finish their in-flight work");
                    state.draining = true;
                    state.drain.cancel();
                }
                finish_drain_if_done(&myself, state).await;
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, error) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, format!("stopped unexpectedly ({})", reason.as_deref().unwrap_or("no reason given")))
            }
            _ => return Ok(()),
        };
        let Some(i) = state.index_of(&cell) else { return Ok(()) };
        state.children[i].cell = None;
        state.draining |= state.drain.is_cancelled();
        if state.draining {
            tracing::debug!(child = state.children[i].spec.name(), "left");
            finish_drain_if_done(&myself, state).await;
        } else {
            on_failure(&myself, state, i, error);
        }
        Ok(())
    }
}

/// Decides what a failure of child `i` leads to: a restart after the backoff, or escalation.
fn on_failure(myself: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, i: usize, error: String) {
    let policy = state.policy;
    let child = &mut state.children[i];
    let name = child.spec.name().to_string();
    match policy.decide(&mut child.failures, Instant::now()) {
        Decision::Restart(delay) => {
            tracing::warn!(child = %name, %error, recent_failures = child.failures.recent(), ?delay, "child failed; restarting");
            protocol::metrics::ACTOR_RESTARTS.with_label_values(&[kind_label(&name)]).inc();
            state.record().restarts += 1;
            myself.send_after(delay, move || SupervisorMsg::Restart(i));
        }
        Decision::Escalate(failures) => {
            tracing::error!(child = %name, %error, failures, window = ?policy.window, "child failed too often; stopping the process");
            state.record().escalation =
                Some(ActorError::Escalated { child: name, failures, window: policy.window, last_error: error });
            for c in state.children.iter_mut() {
                if let Some(cell) = c.cell.take() {
                    cell.kill();
                }
            }
            myself.stop(Some("escalated".into()));
        }
    }
}

/// Starts child `i` again, unless the process is leaving or it is already running.
async fn restart(myself: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, i: usize) {
    if state.draining || state.children.get(i).is_none_or(|c| c.cell.is_some()) {
        return;
    }
    let spec = state.children[i].spec.clone();
    match spec.start(myself.get_cell()).await {
        Ok(cell) => {
            tracing::info!(child = spec.name(), "restarted");
            state.children[i].cell = Some(cell);
        }
        Err(e) => on_failure(myself, state, i, e.to_string()),
    }
}

/// Once every worker has left, drains the services in reverse start order and stops.
async fn finish_drain_if_done(myself: &ActorRef<SupervisorMsg>, state: &mut SupervisorState) {
    let working = |c: &ChildState| c.spec.kind() == ChildKind::Worker && c.cell.is_some();
    if state.children.iter().any(working) {
        return;
    }
    for child in state.children.iter_mut().rev() {
        let Some(cell) = child.cell.take() else { continue };
        if let Err(e) = cell.drain_and_wait(Some(state.stop_timeout)).await {
            tracing::warn!(child = child.spec.name(), error = %e, "service did not drain in time; killing it");
            cell.kill();
        }
    }
    tracing::info!("every child has left");
    state.record().left = true;
    myself.stop(None);
}

/// A running supervisor, to wait for.
pub struct Supervised {
    actor: ActorRef<SupervisorMsg>,
    join: tokio::task::JoinHandle<()>,
    record: Arc<Mutex<SupervisionRecord>>,
    drain: CancellationToken,
}

impl Supervised {
    /// Starts a supervisor over `args`; every child has started when this returns.
    pub async fn start(args: SupervisorArgs) -> Result<Self> {
        let (record, drain) = (args.record.clone(), args.drain.clone());
        let (actor, join) = Actor::spawn(None, Supervisor, args)
            .await
            .map_err(|e| ActorError::Spawn { what: "supervisor".into(), detail: e.to_string() })?;
        Ok(Self { actor, join, record, drain })
    }

    /// Waits until the supervisor stops: `Ok` with the number of restarts after a graceful
    /// leave, the escalation error when a child failed too often. Once the drain token is
    /// cancelled the leave must end within `leave_deadline`, or every actor is killed and a
    /// timeout error comes back.
    pub async fn wait(self, leave_deadline: Duration) -> Result<u64> {
        let Self { actor, mut join, record, drain } = self;
        tokio::select! {
            _ = &mut join => {}
            _ = async { drain.cancelled().await; tokio::time::sleep(leave_deadline).await } => {
                for child in actor.get_children() {
                    child.kill();
                }
                actor.kill();
                let _ = join.await;
                return Err(ActorError::Timeout { what: "the graceful leave".into(), after: leave_deadline });
            }
        }
        let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
        match record.escalation.take() {
            Some(e) => Err(e),
            None if record.left => Ok(record.restarts),
            None => {
                Err(ActorError::Unavailable { actor: "supervisor", detail: "stopped without a graceful leave".into() })
            }
        }
    }
}

/// [`Supervised::start`] then [`Supervised::wait`].
pub async fn supervise(args: SupervisorArgs, leave_deadline: Duration) -> Result<u64> {
    Supervised::start(args).await?.wait(leave_deadline).await
}
