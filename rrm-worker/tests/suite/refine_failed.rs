//! `actor.refine = "failed"` through the worker against a real redis-server: in `critique` mode a
//! solved initial attempt, which no refined attempt follows, reaches the learner's stream
//! unjudged and without a reply (the judge is never called for it), while a failed one is judged
//! and replied to; with `refine = "all"`, and in `unified` and `score` modes, every initial
//! attempt is judged as before.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{batch, link, list_and_ttl, produce, scored, server, LIMIT};
use episode::RefineWhich;
use protocol::keys::Keys;
use protocol::link::RedisLink;
use protocol::wire::{Attempt, FeedbackMode, RunId, ScoredTrajectory, Trajectory, TrajectoryId, Verdict};
use rrm_worker::{Judge, JudgeFuture, Plan, ReferenceJudge, Worker, WorkerSettings, WorkerStats};
use testkit::fast_queue;
use tokio_util::sync::CancellationToken;

/// The reference judge, counting which trajectories it was asked about.
#[derive(Default)]
struct Counting {
    asked: Mutex<Vec<TrajectoryId>>,
}

impl Judge for Counting {
    fn id(&self) -> &str {
        "reference"
    }

    fn judge<'a>(&'a self, t: &'a Trajectory) -> JudgeFuture<'a> {
        self.asked.lock().unwrap().push(t.id);
        Box::pin(async move { ReferenceJudge::new().judge(t).await })
    }
}

/// What one worker did with one batch: the scored trajectories and the ids it judged.
struct Outcome {
    scored: Vec<ScoredTrajectory>,
    asked: HashSet<TrajectoryId>,
    stats: WorkerStats,
}

/// Publishes `items` on `run`'s rollouts stream and runs a worker with `plan` until every one
/// is on the scored stream.
async fn run_worker(link: &RedisLink, run: &str, plan: Plan, items: &[Trajectory]) -> Outcome {
    produce(link, run, items).await;
    let judge = Arc::new(Counting::default());
    let settings = WorkerSettings { plan, max_concurrency: 4, critique_reply_ttl: Duration::from_secs(120) };
    let w = Worker::new(link, &RunId::new(run).unwrap(), "rrm-0", fast_queue(), judge.clone(), settings).await.unwrap();
    let cancel = CancellationToken::new();
    let handle = tokio::spawn(w.run(cancel.clone()));
    let scored = scored(link, run, items.len()).await;
    cancel.cancel();
    let stats = handle.await.unwrap().unwrap();
    let asked: Vec<TrajectoryId> = judge.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), asked.iter().collect::<HashSet<_>>().len(), "no trajectory judged twice");
    Outcome { scored, asked: asked.into_iter().collect(), stats }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_critique_and_failed_a_solved_initial_attempt_is_forwarded_unjudged() {
    tokio::time::timeout(LIMIT * 3, async {
        let srv = server();
        let link = link(&srv);
        let run = "critique-failed";
        let items = batch(run, 20);
        let initial = |t: &Trajectory| t.attempt == Attempt::Initial;
        let solved_initial = items.iter().filter(|t| initial(t) && episode::solved(t)).count();
        let failed_initial = items.iter().filter(|t| initial(t) && !episode::solved(t)).count();
        assert!(solved_initial >= 2 && failed_initial >= 2, "the batch has both: {solved_initial} {failed_initial}");

        let plan = Plan { mode: FeedbackMode::Critique, refine: RefineWhich::Failed };
        let out = run_worker(&link, run, plan, &items).await;
        let keys = Keys::new(&RunId::new(run).unwrap());
        assert_eq!(out.scored.len(), items.len(), "every trajectory reaches the learner's stream");
        for s in &out.scored {
            let t = &s.trajectory;
            let (reply, _) = list_and_ttl(&link, &keys.critique_reply(t.id)).await;
            if initial(t) && !episode::solved(t) {
                assert!(matches!(s.verdict, Verdict::Judged(_)), "a failed initial attempt is judged: {:?}", s.verdict);
                assert!(out.asked.contains(&t.id), "the judge was asked about {}", t.id);
                assert_eq!(reply.len(), 1, "its actor gets the critique it waits for");
            } else {
                assert_eq!(s.verdict, Verdict::NotRequested, "solved initial and refined attempts are not judged");
                assert!(!out.asked.contains(&t.id), "the judge was not called for {}", t.id);
                assert!(reply.is_empty(), "no actor waits for {}", t.id);
            }
        }
        assert_eq!(out.asked.len(), failed_initial, "one judge call per failed initial attempt");
        assert_eq!(out.stats.unrefined_skipped, solved_initial as u64, "the skip is counted");
        assert_eq!(out.stats.not_requested, (items.len() - failed_initial) as u64);
        assert_eq!(out.stats.replies, failed_initial as u64);

        // Elsewhere every initial attempt is judged, solved ones included; a reply goes back
        // for each attempt the actor refines (unified + failed: the failed ones only).
        let others = [
            (Plan { mode: FeedbackMode::Critique, refine: RefineWhich::All }, true, true),
            (Plan { mode: FeedbackMode::Unified, refine: RefineWhich::Failed }, true, false),
            (Plan { mode: FeedbackMode::Score, refine: RefineWhich::Failed }, false, false),
        ];
        for (plan, replies_failed, replies_solved) in others {
            let run = format!("{}-{}", plan.mode, plan.refine);
            let out = run_worker(&link, &run, plan, &batch(&run, 20)).await;
            let keys = Keys::new(&RunId::new(run.clone()).unwrap());
            for s in out.scored.iter().filter(|s| initial(&s.trajectory)) {
                assert!(matches!(s.verdict, Verdict::Judged(_)), "{run}: {:?}", s.verdict);
                assert!(out.asked.contains(&s.trajectory.id), "{run}: the judge was asked");
                let (reply, _) = list_and_ttl(&link, &keys.critique_reply(s.trajectory.id)).await;
                let replies = if episode::solved(&s.trajectory) { replies_solved } else { replies_failed };
                assert_eq!(reply.len(), usize::from(replies), "{run}: a reply for each attempt refined");
            }
            assert_eq!(out.stats.unrefined_skipped, 0, "{run}: nothing skipped");
        }
    })
    .await
    .expect("the test finishes in time");
}
