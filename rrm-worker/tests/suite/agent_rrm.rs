//! The `agent-rrm` prompt format against the test chat server: the request is the one prompt
//! the released Agent-RRM was trained on, and answers in that model's format are read, including
//! its failure shapes (missing blocks, a score outside [0, 1], text around the blocks, an answer
//! cut at the length limit). Every test runs under a deadline.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::future::Future;
use std::time::Duration;

use crate::common::{trajectory, Flaw};
use protocol::config::ReagentConfig;
use protocol::wire::{Attempt, Episode, Role, TaskFamily, TaskSpec, Trajectory};
use rrm_worker::openai::prompt::{agent_rrm, REWARD_MODEL_PROMPT};
use rrm_worker::openai::{OpenAiJudge, OpenAiSettings};
use rrm_worker::{Judge, JudgeError, PromptFormat, RrmConfig};
use testkit::chat::{Reply, TestChatServer};

const LIMIT: Duration = Duration::from_secs(30);

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f).await.expect("finished within the test's deadline")
}

/// What `[rrm]` gives with judge = "openai" and nothing else said about the prompt.
fn settings(endpoint: String) -> OpenAiSettings {
    let toml =
        format!("[rrm]\njudge = \"openai\"\n[rrm.openai]\nendpoints = [\"{endpoint}\"]\nretries = 2\nbackoff_ms = 1\n");
    let cfg = RrmConfig::from_config(&ReagentConfig::from_toml_str(&toml).unwrap()).unwrap();
    OpenAiSettings::from_config(&cfg).unwrap()
}

fn sample() -> Trajectory {
    trajectory("t", TaskSpec { family: TaskFamily::Math, seed: 11, difficulty: 2 }, Flaw::None, Attempt::Initial)
}

fn turns(t: &Trajectory) -> &[protocol::wire::Turn] {
    let Episode::Text(turns) = &t.episode else { panic!("a text episode") };
    turns
}

/// An answer laid out as the released model writes it: each block on its own lines, a blank line
/// between blocks.
fn released(trace: &str, critique: &str, score: &str) -> String {
    format!("<think>\n{trace}\n</think>\n\n<critique>\n{critique}\n</critique>\n\n<score>\n{score}\n</score>")
}

#[tokio::test]
async fn the_default_sends_the_released_prompt_with_the_task_and_the_final_message() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        let s = settings(server.url());
        assert_eq!(s.prompt, PromptFormat::AgentRrm, "agent-rrm is the default");
        let t = sample();
        OpenAiJudge::new(s).unwrap().judge(&t).await.unwrap();
        let r = &server.requests()[0];
        assert_eq!(r.message("system"), Some(REWARD_MODEL_PROMPT));
        assert_eq!(r.body["temperature"].as_f64(), Some(0.0));
        let task = &turns(&t).iter().find(|t| t.role == Role::User).unwrap().text;
        let last = &turns(&t).iter().rev().find(|t| t.role == Role::Agent).unwrap().text;
        assert_eq!(r.message("user").unwrap(), format!("Question: {task}\n\nAgent Trajectory: {last}"));
        assert_eq!(r.body["messages"].as_array().map(Vec::len), Some(2), "a system and a user message only");
    })
    .await;
}

#[tokio::test]
async fn answers_in_the_released_layout_become_judgements() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        server.push(Reply::Content(released("The agent verified each step.", "- No issues.", "0.85")));
        let j = OpenAiJudge::new(settings(server.url())).unwrap().judge(&sample()).await.unwrap();
        assert_eq!(
            (j.trace.as_str(), j.critique.as_str(), j.score),
            ("The agent verified each step.", "- No issues.", 0.85)
        );

        // The chat template opened <think> in the prompt, or a reasoning parser moved it aside.
        let server = TestChatServer::start().await.unwrap();
        let opened = released("Trace.", "Guessed the sum.", "0.3").replacen("<think>\n", "", 1);
        server.push(Reply::Content(opened));
        let content = "<critique>\nGuessed the sum.\n</critique>\n\n<score>\n0.3\n</score>".to_string();
        server.push(Reply::ContentWithReasoning { content, reasoning: "Trace.".into() });
        let judge = OpenAiJudge::new(settings(server.url())).unwrap();
        for _ in 0..2 {
            let j = judge.judge(&sample()).await.unwrap();
            assert_eq!((j.trace.as_str(), j.critique.as_str(), j.score), ("Trace.", "Guessed the sum.", 0.3));
        }
        assert_eq!(server.request_count(), 2, "both read at the first attempt");
    })
    .await;
}

#[tokio::test]
async fn each_failure_shape_is_refused_then_retried_and_never_becomes_a_score() {
    let shapes = [
        ("no think block", "<critique>\nc\n</critique>\n\n<score>\n0.9\n</score>".to_string()),
        ("no critique block", "<think>\nt\n</think>\n\n<score>\n0.9\n</score>".to_string()),
        ("no score block", "<think>\nt\n</think>\n\n<critique>\nc\n</critique>".to_string()),
        ("an empty critique", released("t", "", "0.9")),
        ("a score that is no number", released("t", "c", "9/10")),
        ("text before the blocks", format!("Here is my evaluation:\n{}", released("t", "c", "0.9"))),
        ("text after the blocks", format!("{}\nI hope this helps!", released("t", "c", "0.9"))),
        ("a second score block", format!("{}\n<score>1.0</score>", released("t", "c", "0.9"))),
        ("only prose", "The trajectory is good. Score: 0.9".to_string()),
    ];
    within(async {
        for (what, bad) in shapes {
            let server = TestChatServer::start().await.unwrap();
            server.push(Reply::Content(bad.clone())).push(Reply::Content(released("t", "Fine.", "0.4")));
            let judge = OpenAiJudge::new(settings(server.url())).unwrap();
            let j = judge.judge(&sample()).await.unwrap();
            assert_eq!((j.score, server.request_count()), (0.4, 2), "{what}: refused, and the retry answered");

            let server = TestChatServer::start().await.unwrap();
            server.set_default(Reply::Content(bad));
            let err = OpenAiJudge::new(settings(server.url())).unwrap().judge(&sample()).await.unwrap_err();
            assert!(matches!(err, JudgeError::Exhausted { attempts: 3, .. }), "{what}: {err}");
            assert_eq!(err.kind(), "malformed", "{what}: {err}");
        }
    })
    .await;
}

#[tokio::test]
async fn scores_outside_the_range_are_retried_then_clipped() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        server.push(Reply::Content(released("t", "Generous.", "1.5"))).push(Reply::Content(released("t", "c", "0.7")));
        let j = OpenAiJudge::new(settings(server.url())).unwrap().judge(&sample()).await.unwrap();
        assert_eq!((j.score, server.request_count()), (0.7, 2));

        for (written, clipped) in [("1.5", 1.0), ("-0.2", 0.0), ("85", 1.0)] {
            let server = TestChatServer::start().await.unwrap();
            server.set_default(Reply::Content(released("t", "c", written)));
            let j = OpenAiJudge::new(settings(server.url())).unwrap().judge(&sample()).await.unwrap();
            assert_eq!((j.score, server.request_count()), (clipped, 3), "{written}: every attempt made, then clipped");
        }
    })
    .await;
}

#[tokio::test]
async fn an_answer_cut_at_the_length_limit_is_never_used() {
    within(async {
        let server = TestChatServer::start().await.unwrap();
        server.set_default(Reply::Cut(released("t", "Looks right.", "1.0")));
        let err = OpenAiJudge::new(settings(server.url())).unwrap().judge(&sample()).await.unwrap_err();
        assert_eq!((err.kind(), err.attempts()), ("malformed", 3), "{err}");
        assert!(err.to_string().contains("finish_reason \"length\""), "{err}");
    })
    .await;
}

#[test]
fn long_questions_and_final_messages_keep_both_ends_within_the_budget() {
    let mut t = sample();
    if let Episode::Text(turns) = &mut t.episode {
        let user = turns.iter_mut().find(|t| t.role == Role::User).unwrap();
        user.text = format!("TASK-START {} TASK-END", "q".repeat(9_000));
        let last = turns.iter_mut().rev().find(|t| t.role == Role::Agent).unwrap();
        last.text = format!("FINAL-START {} FINAL-END", "a".repeat(30_000));
    }
    for max in [4_000, 6_000, 20_000] {
        let p = rrm_worker::openai::prompt::render(&t, PromptFormat::AgentRrm, max);
        assert_eq!(p.system, REWARD_MODEL_PROMPT);
        assert!(p.system.chars().count() + p.user.chars().count() <= max, "{max}");
        let (q, a) = p.user.split_once("\n\nAgent Trajectory: ").unwrap();
        assert!(q.starts_with("Question: TASK-START") && q.ends_with("TASK-END"), "{max}: {q}");
        assert!(a.starts_with("FINAL-START") && a.ends_with("FINAL-END"), "{max}");
        assert!(a.contains("characters from the middle of the agent's final message are omitted"), "{max}");
        assert!(p.omitted_chars > 0);
    }
    let short = rrm_worker::openai::prompt::render(&sample(), PromptFormat::AgentRrm, 60_000);
    assert_eq!(short.omitted_chars, 0);
    assert!(!short.user.contains('⟦'), "nothing is marked when nothing is left out");
}

#[test]
fn a_trajectory_without_an_agent_message_sends_an_empty_answer() {
    let mut t = sample();
    if let Episode::Text(turns) = &mut t.episode {
        turns.retain(|t| t.role != Role::Agent);
    }
    assert_eq!(agent_rrm::answer(&t), "");
    let p = rrm_worker::openai::prompt::render(&t, PromptFormat::AgentRrm, 60_000);
    assert!(p.user.ends_with("\n\nAgent Trajectory: "), "{}", p.user);
}
