//! The per-trajectory verdict without Redis: what the plan skips (a solved initial attempt under
//! `critique` with `actor.refine = "failed"` included) is never judged, and a judge
//! that fails or misbehaves yields a failed verdict that says why, never a score.

use protocol::wire::{
    ActorId, Attempt, Episode, FeedbackMode, GroupId, Judgement, PolicyVersion, RunId, TaskFamily, TaskSpec, Timing,
    Trajectory, TrajectoryId, Verdict,
};

use env_workers::chat::ChatError;

use super::{verdict, Plan};
use crate::error::JudgeError;
use crate::judge::{Judge, JudgeFuture};

/// Answers with a fixed result; panics if it is asked when it should not be.
struct Fixed(Option<Result<Judgement, JudgeError>>);

impl Judge for Fixed {
    fn id(&self) -> &str {
        "fixed"
    }

    fn judge<'a>(&'a self, _: &'a Trajectory) -> JudgeFuture<'a> {
        let result = self.0.clone().expect("the plan said not to judge");
        Box::pin(async move { result })
    }
}

fn plan(mode: FeedbackMode) -> Plan {
    Plan { mode, refine: episode::RefineWhich::All }
}

fn judgement(score: f32) -> Judgement {
    Judgement { trace: "t".into(), critique: "c".into(), score, judge_id: "fixed".into(), latency_ms: 1 }
}

fn trajectory(attempt: Attempt) -> Trajectory {
    Trajectory {
        run_id: RunId::new("r").unwrap(),
        id: TrajectoryId(7),
        actor_id: ActorId("a".into()),
        task: TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 1 },
        group_id: GroupId(1),
        attempt,
        policy_version: PolicyVersion(0),
        episode: Episode::Text(Vec::new()),
        outcome_reward: 0.0,
        timing: Timing::default(),
    }
}

#[tokio::test]
async fn what_the_plan_skips_is_never_judged() {
    let t = trajectory(Attempt::Initial);
    assert_eq!(verdict(&Fixed(None), plan(FeedbackMode::Outcome), &t).await, Verdict::NotRequested);
    let refined = trajectory(Attempt::Refined { of: TrajectoryId(1) });
    assert_eq!(verdict(&Fixed(None), plan(FeedbackMode::Critique), &refined).await, Verdict::NotRequested);
    let judged = verdict(&Fixed(Some(Ok(judgement(0.75)))), plan(FeedbackMode::Critique), &t).await;
    assert_eq!(judged, Verdict::Judged(judgement(0.75)));

    // critique + refine = failed: a solved initial attempt is not refined, so not judged.
    let only_failed = Plan { mode: FeedbackMode::Critique, refine: episode::RefineWhich::Failed };
    let solved = Trajectory { outcome_reward: 1.0, ..t.clone() };
    assert_eq!(verdict(&Fixed(None), only_failed, &solved).await, Verdict::NotRequested);
    let judged = verdict(&Fixed(Some(Ok(judgement(0.25)))), only_failed, &t).await;
    assert_eq!(judged, Verdict::Judged(judgement(0.25)), "a failed one is");
}

#[tokio::test]
async fn failures_and_invalid_judgements_are_failed_verdicts() {
    let t = trajectory(Attempt::Initial);
    let err = JudgeError::Exhausted {
        attempts: 3,
        last: Box::new(JudgeError::Chat(ChatError::Timeout { endpoint: "h:1".into(), after_ms: 10 })),
    };
    let Verdict::Failed { judge_id, reason, attempts } =
        verdict(&Fixed(Some(Err(err))), plan(FeedbackMode::Score), &t).await
    else {
        panic!("a failure is a failed verdict")
    };
    assert_eq!((judge_id.as_str(), attempts), ("fixed", 3));
    assert!(reason.contains("no response within 10 ms"), "{reason}");

    let bad = verdict(&Fixed(Some(Ok(judgement(f32::NAN)))), plan(FeedbackMode::Score), &t).await;
    let Verdict::Failed { reason, .. } = bad else { panic!("an invalid score is never forwarded: {bad:?}") };
    assert!(reason.contains("judgement.score"), "{reason}");
}
