//! The supervisor with test children: a panicking child is restarted, one that keeps failing
//! escalates, and a graceful leave stops workers before services.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::handle::Handle;

/// A child that fails during its first `fail_first` starts — a panic in `post_start`, or an
/// error from `pre_start` (it cannot start at all) with `fail_in_pre_start` — leaves on drain
/// (as a worker does) and notes when it stopped.
struct Flaky;

#[derive(Clone)]
struct FlakyArgs {
    name: &'static str,
    starts: Arc<AtomicUsize>,
    fail_first: usize,
    fail_in_pre_start: bool,
    drain: CancellationToken,
    stops: Arc<Mutex<Vec<&'static str>>>,
}

impl Actor for Flaky {
    type Msg = ();
    type State = (usize, FlakyArgs);
    type Arguments = FlakyArgs;

    async fn pre_start(&self, myself: ActorRef<()>, args: FlakyArgs) -> Result<Self::State, ActorProcessingErr> {
        let n = args.starts.fetch_add(1, Ordering::SeqCst) + 1;
        if args.fail_in_pre_start && n <= args.fail_first {
            return Err(format!("{} start {n} cannot start on purpose", args.name).into());
        }
        if args.name.starts_with("worker") {
            let (drain, me) = (args.drain.clone(), myself.clone());
            tokio::spawn(async move {
                drain.cancelled().await;
                me.stop(None);
            });
        }
        Ok((n, args))
    }

    async fn post_start(&self, _: ActorRef<()>, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        if !state.1.fail_in_pre_start && state.0 <= state.1.fail_first {
            panic!("{} start {} fails on purpose", state.1.name, state.0);
        }
        Ok(())
    }

    async fn post_stop(&self, _: ActorRef<()>, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        state.1.stops.lock().unwrap().push(state.1.name);
        Ok(())
    }
}

fn policy(max_restarts: usize) -> RestartPolicy {
    RestartPolicy {
        max_restarts,
        window: Duration::from_secs(60),
        backoff_min: Duration::from_millis(1),
        backoff_max: Duration::from_millis(5),
    }
}

fn flaky(name: &'static str, fail_first: usize, drain: &CancellationToken) -> FlakyArgs {
    FlakyArgs {
        name,
        starts: Arc::default(),
        fail_first,
        fail_in_pre_start: false,
        drain: drain.clone(),
        stops: Arc::default(),
    }
}

fn args(children: Vec<Arc<dyn ChildSpec>>, policy: RestartPolicy, drain: &CancellationToken) -> SupervisorArgs {
    SupervisorArgs {
        children,
        policy,
        drain: drain.clone(),
        service_stop_timeout: Duration::from_secs(5),
        record: Arc::default(),
    }
}

fn worker(a: &FlakyArgs) -> Arc<dyn ChildSpec> {
    let a = a.clone();
    Arc::new(Child::<Flaky>::worker(a.name, move || (Flaky, a.clone())))
}

/// Waits, with a deadline, until `cond` holds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
}

#[tokio::test]
async fn a_child_that_panics_is_restarted_and_the_process_leaves_cleanly() {
    let drain = CancellationToken::new();
    let w = flaky("worker-0", 1, &drain);
    let run = tokio::spawn(supervise(args(vec![worker(&w)], policy(3), &drain), Duration::from_secs(10)));
    until("the worker was started a second time", || w.starts.load(Ordering::SeqCst) == 2).await;
    drain.cancel();
    let restarts = tokio::time::timeout(Duration::from_secs(10), run).await.unwrap().unwrap().unwrap();
    assert_eq!(restarts, 1);
    assert_eq!(w.starts.load(Ordering::SeqCst), 2, "not restarted again after leaving");
    assert_eq!(*w.stops.lock().unwrap(), ["worker-0"], "the second instance left on drain");
}

#[tokio::test]
async fn a_worker_that_cannot_start_at_first_is_retried_instead_of_ending_the_process() {
    let drain = CancellationToken::new();
    let w = FlakyArgs { fail_in_pre_start: true, ..flaky("worker-0", 2, &drain) };
    let run = tokio::spawn(supervise(args(vec![worker(&w)], policy(3), &drain), Duration::from_secs(10)));
    until("the worker started on its third try", || w.starts.load(Ordering::SeqCst) == 3).await;
    assert!(!run.is_finished(), "the process goes on");
    drain.cancel();
    let restarts = tokio::time::timeout(Duration::from_secs(10), run).await.unwrap().unwrap().unwrap();
    assert_eq!(restarts, 2);
    assert_eq!(*w.stops.lock().unwrap(), ["worker-0"], "the instance that started left on drain");
}

#[tokio::test]
async fn a_worker_that_never_starts_escalates() {
    let drain = CancellationToken::new();
    let w = FlakyArgs { fail_in_pre_start: true, ..flaky("worker-0", usize::MAX, &drain) };
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        supervise(args(vec![worker(&w)], policy(2), &drain), Duration::from_secs(10)),
    )
    .await
    .expect("escalation ends the supervisor without a drain");
    assert!(matches!(outcome, Err(ActorError::Escalated { failures: 3, .. })), "{outcome:?}");
}

#[tokio::test]
async fn a_child_that_keeps_failing_escalates_with_an_error_naming_it() {
    let drain = CancellationToken::new();
    let w = flaky("worker-0", usize::MAX, &drain);
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        supervise(args(vec![worker(&w)], policy(2), &drain), Duration::from_secs(10)),
    )
    .await
    .expect("escalation ends the supervisor without a drain");
    match outcome {
        Err(ActorError::Escalated { child, failures, .. }) => assert_eq!((child.as_str(), failures), ("worker-0", 3)),
        other => panic!("expected an escalation, got {other:?}"),
    }
    assert_eq!(w.starts.load(Ordering::SeqCst), 3, "two restarts, then no more");
}

#[tokio::test]
async fn a_graceful_leave_stops_workers_before_services_in_reverse_start_order() {
    let drain = CancellationToken::new();
    let stops: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let with_stops = |mut a: FlakyArgs| {
        a.stops = stops.clone();
        a
    };
    let (s1, s2) = (with_stops(flaky("service-a", 0, &drain)), with_stops(flaky("service-b", 0, &drain)));
    let (w1, w2) = (with_stops(flaky("worker-0", 0, &drain)), with_stops(flaky("worker-1", 0, &drain)));
    let service = |a: &FlakyArgs| -> Arc<dyn ChildSpec> {
        let a = a.clone();
        Arc::new(Child::<Flaky>::service(a.name, Handle::new("test"), move || (Flaky, a.clone())))
    };
    let children = vec![service(&s1), service(&s2), worker(&w1), worker(&w2)];
    let run = tokio::spawn(supervise(args(children, policy(0), &drain), Duration::from_secs(10)));
    until("every child started", || [&s1, &s2, &w1, &w2].iter().all(|a| a.starts.load(Ordering::SeqCst) == 1)).await;
    drain.cancel();
    assert_eq!(tokio::time::timeout(Duration::from_secs(10), run).await.unwrap().unwrap().unwrap(), 0);
    let stops = stops.lock().unwrap().clone();
    assert_eq!(stops.len(), 4, "{stops:?}");
    assert!(stops[..2].iter().all(|s| s.starts_with("worker")), "workers leave first: {stops:?}");
    assert_eq!(&stops[2..], ["service-b", "service-a"], "services stop in reverse start order");
}
