//! The worker loop against a real redis-server: every trajectory reaches the scored stream
//! exactly once with the verdict its feedback mode asks for, even when a worker dies holding a
//! batch; critique replies go back for initial attempts in the modes that refine; a graceful
//! stop finishes the batch in flight (and one read with the last forward); judge failures are failed verdicts, never zeros.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::sync::Arc;
use std::time::Duration;

use crate::common::{batch, id_counts, link, list_and_ttl, pending, produce, read_scored, scored, server, LIMIT};
use env_workers::chat::ChatSettings;
use episode::RefineWhich;
use protocol::codec::Codec;
use protocol::keys::{Keys, LEARNER_GROUP, RRM_GROUP};
use protocol::link::RedisLink;
use protocol::wire::{Attempt, FeedbackMode, RunId, Trajectory, Verdict};
use rrm_worker::openai::{OpenAiJudge, OpenAiSettings};
use rrm_worker::{Judge, JudgeFuture, Plan, ReferenceJudge, Worker, WorkerSettings};
use testkit::chat::{Reply, TestChatServer};
use testkit::fast_queue;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// The reference judge behind a gate: it reports each call, then waits for the gate to open.
struct Gated {
    entered: mpsc::UnboundedSender<()>,
    open: watch::Receiver<bool>,
}

impl Judge for Gated {
    fn id(&self) -> &str {
        "gated-reference"
    }

    fn judge<'a>(&'a self, t: &'a Trajectory) -> JudgeFuture<'a> {
        Box::pin(async move {
            let _ = self.entered.send(());
            let mut open = self.open.clone();
            let _ = open.wait_for(|o| *o).await;
            ReferenceJudge::new().judge(t).await
        })
    }
}

fn gated() -> (Arc<Gated>, mpsc::UnboundedReceiver<()>, watch::Sender<bool>) {
    let (entered, calls) = mpsc::unbounded_channel();
    let (gate, open) = watch::channel(false);
    (Arc::new(Gated { entered, open }), calls, gate)
}

fn settings(mode: FeedbackMode, refine: RefineWhich) -> WorkerSettings {
    WorkerSettings { plan: Plan { mode, refine }, max_concurrency: 4, critique_reply_ttl: Duration::from_secs(120) }
}

async fn worker(link: &RedisLink, run: &str, name: &str, judge: Arc<dyn Judge>, mode: FeedbackMode) -> Worker {
    worker_refining(link, run, name, judge, mode, RefineWhich::All).await
}

async fn worker_refining(
    link: &RedisLink,
    run: &str,
    name: &str,
    judge: Arc<dyn Judge>,
    mode: FeedbackMode,
    refine: RefineWhich,
) -> Worker {
    Worker::new(link, &RunId::new(run).unwrap(), name, fast_queue(), judge, settings(mode, refine)).await.unwrap()
}

fn is_initial(t: &Trajectory) -> bool {
    t.attempt == Attempt::Initial
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_batch_loses_and_duplicates_nothing() {
    tokio::time::timeout(LIMIT * 2, async {
        let srv = server();
        let link = link(&srv);
        let run = "kill";
        let items = batch(run, 40);
        produce(&link, run, &items).await;

        // Worker A takes a batch and dies holding it, mid-judgement.
        let (gate_judge, mut calls, _gate) = gated();
        let doomed = worker(&link, run, "rrm-a", gate_judge, FeedbackMode::Critique).await;
        let cancel = CancellationToken::new();
        let a = tokio::spawn(doomed.run(cancel.clone()));
        calls.recv().await.expect("worker A started judging");
        a.abort();
        assert!(a.await.unwrap_err().is_cancelled());

        // Worker B does everything, reclaiming A's batch after the idle timeout.
        let b = worker(&link, run, "rrm-b", Arc::new(ReferenceJudge::new()), FeedbackMode::Critique).await;
        let b = tokio::spawn(b.run(cancel.clone()));
        let scored = scored(&link, run, items.len()).await;
        cancel.cancel();
        let stats = b.await.unwrap().unwrap();

        let counts = id_counts(&scored);
        assert_eq!(counts.len(), items.len(), "every trajectory id is on the scored stream");
        assert!(counts.values().all(|c| *c == 1), "none twice: {counts:?}");
        assert_eq!(stats.judged + stats.not_requested, items.len() as u64);
        let keys = Keys::new(&RunId::new(run).unwrap());
        for s in &scored {
            let t = &s.trajectory;
            let (reply, ttl) = list_and_ttl(&link, &keys.critique_reply(t.id)).await;
            if is_initial(t) {
                let Verdict::Judged(j) = &s.verdict else { panic!("initial attempts are judged: {:?}", s.verdict) };
                assert_eq!(j.judge_id, "reference");
                assert_eq!(reply.len(), 1, "one critique reply for {}", t.id);
                let sent: Verdict = Codec::default().decode(&reply[0]).unwrap();
                assert_eq!(&sent, &s.verdict, "the reply carries the forwarded verdict");
                assert!(ttl > 0 && ttl <= 120, "the reply expires: ttl {ttl}");
            } else {
                assert_eq!(s.verdict, Verdict::NotRequested, "refined attempts are not judged in critique mode");
                assert!(reply.is_empty(), "no reply for refined attempts");
            }
        }
        assert_eq!(pending(&link, &keys.rollouts(), RRM_GROUP).await, 0, "nothing left pending");
    })
    .await
    .expect("the test finishes in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_mode_gets_its_verdicts_and_replies() {
    tokio::time::timeout(LIMIT * 2, async {
        let srv = server();
        let link = link(&srv);
        for mode in [FeedbackMode::Outcome, FeedbackMode::Score, FeedbackMode::Unified] {
            let run = mode.as_str();
            let items = batch(run, 12);
            produce(&link, run, &items).await;
            let cancel = CancellationToken::new();
            let w = worker(&link, run, "rrm-0", Arc::new(ReferenceJudge::new()), mode).await;
            let w = tokio::spawn(w.run(cancel.clone()));
            let scored = scored(&link, run, items.len()).await;
            cancel.cancel();
            w.await.unwrap().unwrap();
            assert_eq!(id_counts(&scored).len(), items.len());
            let keys = Keys::new(&RunId::new(run).unwrap());
            for s in &scored {
                match mode {
                    FeedbackMode::Outcome => assert_eq!(s.verdict, Verdict::NotRequested),
                    _ => assert!(matches!(s.verdict, Verdict::Judged(_)), "{mode}: {:?}", s.verdict),
                }
                let (reply, _) = list_and_ttl(&link, &keys.critique_reply(s.trajectory.id)).await;
                let want = usize::from(mode.refines() && is_initial(&s.trajectory));
                assert_eq!(reply.len(), want, "{mode}: replies only for initial attempts in modes that refine");
            }
        }
    })
    .await
    .expect("the test finishes in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_finishes_the_batch_in_flight() {
    tokio::time::timeout(LIMIT, async {
        let srv = server();
        let link = link(&srv);
        let run = "stop";
        let items = batch(run, 6);
        produce(&link, run, &items).await;
        let (judge, mut calls, gate) = gated();
        let cancel = CancellationToken::new();
        let w = worker(&link, run, "rrm-0", judge, FeedbackMode::Score).await;
        let mut handle = tokio::spawn(w.run(cancel.clone()));
        calls.recv().await.expect("judging started");
        cancel.cancel();
        let early = tokio::time::timeout(Duration::from_millis(200), &mut handle).await;
        assert!(early.is_err(), "the worker waits for its batch to be judged");
        gate.send(true).unwrap();
        let stats = handle.await.unwrap().unwrap();
        assert_eq!(stats.batches, 1);
        let keys = Keys::new(&RunId::new(run).unwrap());
        assert_eq!(read_scored(&link, &keys.scored()).await.len(), items.len(), "the batch was forwarded");
        assert_eq!(pending(&link, &keys.rollouts(), RRM_GROUP).await, 0);
        assert_eq!(pending(&link, &keys.scored(), LEARNER_GROUP).await, 0, "nothing delivered to the learner yet");
    })
    .await
    .expect("the test finishes in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_after_a_forward_finishes_the_batch_read_with_it() {
    tokio::time::timeout(LIMIT, async {
        let srv = server();
        let link = link(&srv);
        let run = "carried";
        let per_read = fast_queue().read_count;
        let items = batch(run, 2 * per_read);
        produce(&link, run, &items).await;
        let mut w = worker(&link, run, "rrm-0", Arc::new(ReferenceJudge::new()), FeedbackMode::Score).await;
        assert_eq!(w.step().await.unwrap(), per_read);
        let keys = Keys::new(&RunId::new(run).unwrap());
        // The first batch was forwarded and the second read with it: delivered, in progress.
        assert_eq!(read_scored(&link, &keys.scored()).await.len(), per_read);
        assert_eq!(pending(&link, &keys.rollouts(), RRM_GROUP).await, per_read as u64);
        let cancel = CancellationToken::new();
        cancel.cancel();
        let stats = w.run(cancel).await.unwrap();
        assert_eq!(stats.batches, 2, "the batch read with the last forward was handled after the stop");
        let scored = read_scored(&link, &keys.scored()).await;
        assert_eq!(scored.len(), items.len());
        assert!(id_counts(&scored).values().all(|&n| n == 1), "a trajectory forwarded twice");
        assert_eq!(pending(&link, &keys.rollouts(), RRM_GROUP).await, 0, "nothing left in progress");
    })
    .await
    .expect("the test finishes in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judge_failures_become_failed_verdicts_not_zeros() {
    tokio::time::timeout(LIMIT, async {
        let srv = server();
        let link = link(&srv);
        let chat = TestChatServer::start().await.unwrap();
        chat.set_default(Reply::Status(500, "boom".into()));
        let judge = OpenAiJudge::new(OpenAiSettings {
            chat: ChatSettings {
                endpoints: vec![chat.url()],
                model: "m".into(),
                api_key: None,
                timeout: Duration::from_secs(5),
                retries: 1,
                backoff: Duration::from_millis(1),
                backoff_max: Duration::from_millis(2),
                endpoint_cooldown: Duration::ZERO,
                max_concurrency: 4,
                max_tokens: 64,
                temperature: 0.0,
            },
            prompt: rrm_worker::PromptFormat::Trajectory,
            max_prompt_chars: 20_000,
        })
        .unwrap();
        let run = "fail";
        let items = batch(run, 4);
        produce(&link, run, &items).await;
        let cancel = CancellationToken::new();
        let w =
            tokio::spawn(worker(&link, run, "rrm-0", Arc::new(judge), FeedbackMode::Unified).await.run(cancel.clone()));
        let scored = scored(&link, run, items.len()).await;
        cancel.cancel();
        let stats = w.await.unwrap().unwrap();
        assert_eq!(stats.failed, items.len() as u64);
        let keys = Keys::new(&RunId::new(run).unwrap());
        for s in &scored {
            let Verdict::Failed { judge_id, reason, attempts } = &s.verdict else { panic!("{:?}", s.verdict) };
            assert_eq!((judge_id.as_str(), *attempts), ("openai:m", 2));
            assert!(reason.contains("http status 500"), "{reason}");
            assert!(s.score().is_none(), "a failure carries no score");
            let (reply, _) = list_and_ttl(&link, &keys.critique_reply(s.trajectory.id)).await;
            if is_initial(&s.trajectory) {
                let sent: Verdict = Codec::default().decode(&reply[0]).unwrap();
                assert!(matches!(sent, Verdict::Failed { .. }), "the actor hears of the failure at once");
            }
        }
        assert_eq!(chat.request_count(), items.len() * 2, "each trajectory tried twice");
    })
    .await
    .expect("the test finishes in time");
}
