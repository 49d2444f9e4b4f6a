//! The OpenAI-compatible judge against the scriptable test server: good answers, malformed
//! output (retried), out-of-range scores (retried, then clipped), slow and failing endpoints
//! (timeouts, failover), refused connections, and everything failing (a quick error, never a
//! hang). These use the `trajectory` prompt format; tests/agent_rrm.rs covers the released
//! model's format, tests/injection.rs the fence. Every test runs under a deadline.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::future::Future;
use std::time::{Duration, Instant};

use crate::common::{trajectory, Flaw};
use env_workers::chat::ChatSettings;
use protocol::wire::{Attempt, Role, TaskFamily, TaskSpec, Trajectory};
use rrm_worker::openai::{prompt, OpenAiJudge, OpenAiSettings};
use rrm_worker::{Judge, JudgeError, PromptFormat};
use testkit::chat::{Reply, TestChatServer};
use testkit::refused_url;

const LIMIT: Duration = Duration::from_secs(30);

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f).await.expect("finished within the test's deadline")
}

fn settings(endpoints: Vec<String>) -> OpenAiSettings {
    OpenAiSettings {
        chat: ChatSettings {
            endpoints,
            model: "agent-rrm-test".into(),
            api_key: None,
            timeout: Duration::from_secs(5),
            retries: 2,
            backoff: Duration::from_millis(5),
            backoff_max: Duration::from_millis(20),
            endpoint_cooldown: Duration::from_secs(60),
            max_concurrency: 8,
            max_tokens: 512,
            temperature: 0.0,
        },
        prompt: PromptFormat::Trajectory,
        max_prompt_chars: 60_000,
    }
}

/// `settings(endpoints)` with its chat settings changed by `f`.
fn with(endpoints: Vec<String>, f: impl FnOnce(&mut ChatSettings)) -> OpenAiSettings {
    let mut s = settings(endpoints);
    f(&mut s.chat);
    s
}

fn sample() -> Trajectory {
    let spec = TaskSpec { family: TaskFamily::Math, seed: 7, difficulty: 2 };
    trajectory("t", spec, Flaw::WrongAnswer, Attempt::Initial)
}

#[tokio::test]
async fn a_good_answer_becomes_a_judgement_and_the_request_carries_the_whole_trajectory() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        server.push(Reply::answer("step two is wrong", "Your second message miscalculates.", 0.25));
        let judge = OpenAiJudge::new(with(vec![server.url()], |c| c.api_key = Some("sk-test".into()))).unwrap();
        let t = sample();
        let j = judge.judge(&t).await.unwrap();
        assert_eq!(
            (j.trace.as_str(), j.critique.as_str(), j.score),
            ("step two is wrong", "Your second message miscalculates.", 0.25)
        );
        assert_eq!(j.judge_id, "openai:agent-rrm-test");

        let reqs = server.requests();
        assert_eq!(reqs.len(), 1);
        let r = &reqs[0];
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.authorization.as_deref(), Some("Bearer sk-test"));
        assert_eq!((r.body["model"].as_str(), r.body["temperature"].as_f64()), (Some("agent-rrm-test"), Some(0.0)));
        assert_eq!(r.message("system"), Some(prompt::INSTRUCTION));
        let user = r.message("user").unwrap();
        let protocol::wire::Episode::Text(turns) = &t.episode else { unreachable!() };
        for turn in turns {
            for line in turn.text.trim_end().lines() {
                let quoted = if line.is_empty() { "\n│\n".to_string() } else { format!("\n│ {line}\n") };
                assert!(user.contains(&quoted), "every line of every turn is in the prompt, quoted: {line:?}");
            }
        }
        let agents = turns.iter().filter(|t| t.role == Role::Agent).count();
        assert!(user.contains(&format!("\n⟦agent, message {agents}⟧\n")), "agent messages are numbered");
    })
    .await;
}

#[tokio::test]
async fn malformed_output_is_retried() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        server.push(Reply::Content("The score is 0.9".into())).push(Reply::NotJson).push(Reply::good("Fine.", 0.9));
        let judge = OpenAiJudge::new(settings(vec![server.url()])).unwrap();
        let j = judge.judge(&sample()).await.unwrap();
        assert_eq!((j.critique.as_str(), j.score), ("Fine.", 0.9));
        assert_eq!(server.request_count(), 3);
    })
    .await;
}

#[tokio::test]
async fn reasoning_fields_of_reasoning_servers_are_read() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        let content = "<critique>Good.</critique><score>1</score>".to_string();
        server.push(Reply::ContentWithReasoning { content, reasoning: "all steps check out".into() });
        let j = OpenAiJudge::new(settings(vec![server.url()])).unwrap().judge(&sample()).await.unwrap();
        assert_eq!((j.trace.as_str(), j.score), ("all steps check out", 1.0));
    })
    .await;
}

#[tokio::test]
async fn out_of_range_scores_are_retried_then_clipped() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        server.push(Reply::good("Too generous.", 7.0)).push(Reply::good("Right.", 0.6));
        let judge = OpenAiJudge::new(settings(vec![server.url()])).unwrap();
        let j = judge.judge(&sample()).await.unwrap();
        assert_eq!((j.score, server.request_count()), (0.6, 2), "retried, and the in-range answer kept");

        let server = TestChatServer::start().await.unwrap();
        server.set_default(Reply::good("Way off.", -3.0));
        let before = protocol::metrics::RRM_SCORES_CLIPPED.get();
        let judge = OpenAiJudge::new(settings(vec![server.url()])).unwrap();
        let j = judge.judge(&sample()).await.unwrap();
        assert_eq!((j.score, j.critique.as_str()), (0.0, "Way off."), "clipped after the last retry");
        assert_eq!(server.request_count(), 3, "every attempt was made first");
        assert!(protocol::metrics::RRM_SCORES_CLIPPED.get() > before, "clipping is counted");
    })
    .await;
}

#[tokio::test]
async fn a_slow_endpoint_times_out_and_the_other_answers() {
    within(async {
        let slow = TestChatServer::start().await.unwrap();
        slow.set_default(Reply::after(Duration::from_secs(20), Reply::good("late", 0.1)));
        let fast = TestChatServer::start().await.unwrap();
        fast.set_default(Reply::good("On time.", 0.8));
        let timeout = Duration::from_millis(300);
        let judge = OpenAiJudge::new(with(vec![slow.url(), fast.url()], |c| c.timeout = timeout)).unwrap();
        for _ in 0..3 {
            let started = Instant::now();
            let j = judge.judge(&sample()).await.unwrap();
            assert_eq!(j.critique, "On time.");
            assert!(started.elapsed() < Duration::from_secs(5), "bounded: {:?}", started.elapsed());
        }
        assert_eq!(slow.request_count(), 1, "one timeout in all: the slow endpoint cools down after it");
        assert_eq!(fast.request_count(), 3);
        assert_eq!(judge.in_flight(), [0, 0], "no request is left counted in flight");
    })
    .await;
}

#[tokio::test]
async fn a_hanging_endpoint_alone_is_a_timeout_error() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        server.set_default(Reply::Hang);
        let timeout = Duration::from_millis(200);
        let judge = OpenAiJudge::new(with(vec![server.url()], |c| (c.timeout, c.retries) = (timeout, 1))).unwrap();
        let started = Instant::now();
        let err = judge.judge(&sample()).await.unwrap_err();
        assert_eq!((err.kind(), err.attempts()), ("timeout", 2), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2), "bounded by the deadlines: {:?}", started.elapsed());
    })
    .await;
}

#[tokio::test]
async fn failing_and_refusing_endpoints_are_skipped_for_a_healthy_one() {
    within(async {
        let failing = TestChatServer::start().await.unwrap();
        failing.set_default(Reply::Status(500, "internal error".into()));
        let dropping = TestChatServer::start().await.unwrap();
        dropping.set_default(Reply::Drop);
        let healthy = TestChatServer::start().await.unwrap();
        healthy.set_default(Reply::good("Healthy.", 0.7));
        let endpoints = vec![refused_url().unwrap(), failing.url(), dropping.url(), healthy.url()];
        let judge = OpenAiJudge::new(with(endpoints, |c| c.retries = 3)).unwrap();
        for _ in 0..4 {
            assert_eq!(judge.judge(&sample()).await.unwrap().critique, "Healthy.");
        }
        assert!(failing.request_count() <= 1 && dropping.request_count() <= 1, "failed endpoints cool down");
        assert_eq!(healthy.request_count(), 4);
    })
    .await;
}

#[tokio::test]
async fn when_everything_fails_the_error_comes_quickly_and_says_why() {
    within(async {
        let failing = TestChatServer::start().await.unwrap();
        failing.set_default(Reply::Status(503, "overloaded".into()));
        let judge = OpenAiJudge::new(settings(vec![refused_url().unwrap(), failing.url()])).unwrap();
        let started = Instant::now();
        let err = judge.judge(&sample()).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert_eq!(err.attempts(), 3);
        assert!(matches!(err, JudgeError::Exhausted { .. }), "{err}");
        assert!(
            err.to_string().starts_with("no usable judgement after 3 attempts; last: endpoint 127.0.0.1:"),
            "{err}"
        );

        let server = TestChatServer::start().await.unwrap();
        server.set_default(Reply::Status(404, "model not found".into()));
        let err = OpenAiJudge::new(settings(vec![server.url()])).unwrap().judge(&sample()).await.unwrap_err();
        assert_eq!((err.kind(), server.request_count()), ("http_status", 1), "a 404 is not retried: {err}");
        assert!(err.to_string().contains("model not found"), "{err}");
    })
    .await;
}

#[tokio::test]
async fn concurrency_is_limited() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        server.set_default(Reply::after(Duration::from_millis(150), Reply::good("ok", 0.5)));
        let judge = OpenAiJudge::new(with(vec![server.url()], |c| c.max_concurrency = 2)).unwrap();
        let t = sample();
        let started = Instant::now();
        let all = futures::future::join_all((0..6).map(|_| judge.judge(&t))).await;
        assert!(all.iter().all(Result::is_ok));
        assert_eq!(server.peak_active(), 2, "two requests at once, never more");
        assert!(started.elapsed() >= Duration::from_millis(450), "six requests, two at a time, 150 ms each");
    })
    .await;
}

#[tokio::test]
async fn the_least_loaded_endpoint_takes_each_request() {
    within(async {
        let (a, b) = (TestChatServer::start().await.unwrap(), TestChatServer::start().await.unwrap());
        for s in [&a, &b] {
            s.set_default(Reply::after(Duration::from_millis(150), Reply::good("ok", 0.5)));
        }
        let judge = OpenAiJudge::new(settings(vec![a.url(), b.url()])).unwrap();
        let t = sample();
        let all = futures::future::join_all((0..4).map(|_| judge.judge(&t))).await;
        assert!(all.iter().all(Result::is_ok));
        assert_eq!((a.request_count(), b.request_count()), (2, 2));
        assert_eq!((a.peak_active(), b.peak_active()), (2, 2));
    })
    .await;
}

#[tokio::test]
async fn long_trajectories_are_cut_in_the_middle_within_the_budget() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        let mut t = sample();
        if let protocol::wire::Episode::Text(turns) = &mut t.episode {
            turns[2].text = format!("{}{}", "a".repeat(20_000), turns[2].text);
        }
        let judge =
            OpenAiJudge::new(OpenAiSettings { max_prompt_chars: 6_000, ..settings(vec![server.url()]) }).unwrap();
        judge.judge(&t).await.unwrap();
        let r = &server.requests()[0];
        let (system, user) = (r.message("system").unwrap(), r.message("user").unwrap());
        assert!(system.chars().count() + user.chars().count() <= 6_000);
        assert!(user.contains("characters from the middle of the trajectory"), "{user}");
        assert!(user.contains("Task family: math"), "the header is kept");
    })
    .await;
}
