//! The HTTP environment protocol's client against the example server
//! (`examples/http_env/server.py`, a real Python process over real TCP): a whole episode, the
//! optional calls, the limits applied as an env-worker applies them, the shared token, a server
//! that never answers (the deadline) and one that is not there yet (the retries).
#![allow(clippy::unwrap_used, reason = "tests unwrap")]

use std::time::{Duration, Instant};

use env_workers::http_env::HttpEnv;
use env_workers::service::{EnvClient, Token};
use env_workers::{EnvError, Limits};
use protocol::rpc::{EnvAction, ServiceError, SessionId, Start, StepReply};
use protocol::wire::{FindingKind, TaskFamily, TaskSpec};
use testkit::PythonEnvServer;

const TOKEN: &str = "a-test-token-for-the-http-env";
const TIMEOUT: Duration = Duration::from_secs(10);

fn spec(seed: u64, difficulty: u32) -> TaskSpec {
    TaskSpec { family: TaskFamily::Http, seed, difficulty }
}

async fn connect(server: &PythonEnvServer, limits: Limits) -> HttpEnv {
    HttpEnv::connect(server.url(), TIMEOUT, Some(&Token::new(TOKEN)), limits).await.unwrap()
}

#[tokio::test]
async fn a_reference_episode_is_solved_and_verified_flawless() {
    let server = PythonEnvServer::start(&[], Some(TOKEN));
    let env = connect(&server, Limits::default()).await;
    assert!(env.info().verify && env.info().reference, "{:?}", env.info());
    let client = EnvClient::Http(env.clone());
    for difficulty in 1..=3 {
        let task = spec(40 + u64::from(difficulty), difficulty);
        let reference = env.reference(task).await.unwrap();
        assert_eq!(reference.len(), difficulty as usize + 1, "a conversion per quantity, then the answer");
        let opened = client.open(task).await.unwrap();
        let Start::Text(prompt) = opened.start else { panic!("a text task") };
        assert!(prompt.system.contains("convert(VALUE, FROM, TO)"), "{}", prompt.system);
        let mut end = None;
        for message in &reference {
            let StepReply::Text(obs) = client.step(opened.session, EnvAction::Text(message.clone())).await.unwrap()
            else {
                panic!("a text reply")
            };
            end = obs.end;
        }
        let end = end.expect("the answer ends the episode");
        assert!(end.success && end.reward == 1.0, "{end:?}");
        assert!(client.close(opened.session).await.unwrap(), "the session was open");
        assert!(!client.close(opened.session).await.unwrap(), "closing twice is no error");
        assert_eq!(client.verify(task, reference.clone()).await.unwrap(), vec![], "the reference is flawless");
        let wrong = vec![reference[0].clone(), "<answer>-1</answer>".to_string()];
        let findings = client.verify(task, wrong).await.unwrap();
        assert!(findings.iter().any(|f| f.kind == FindingKind::WrongAnswer && f.step == 1), "{findings:?}");
    }
}

#[tokio::test]
async fn the_limits_apply_as_around_built_in_environments() {
    let server = PythonEnvServer::start(&[], Some(TOKEN));
    let env = connect(&server, Limits { max_turns: 2, max_message_chars: 40 }).await;
    let opened = env.open(spec(7, 1)).await.unwrap();
    let long = "x".repeat(41);
    let refused = env.step(opened.session, &long).await.unwrap();
    assert!(refused.text.contains("over the limit of 40") && refused.flaw.is_some(), "{refused:?}");
    let last = env.step(opened.session, "no action").await.unwrap();
    let end = last.end.expect("the second message reaches max_turns = 2");
    assert!(!end.success && end.summary.contains("turn limit of 2"), "{end:?}");
    let after = env.step(opened.session, "<answer>1</answer>").await.unwrap();
    assert!(after.end.is_none() && after.text.contains("episode is over"), "{after:?}");
    // verify sees what could have been played: the long message ends the replay with a format
    // finding, and nothing past max_turns counts.
    let messages = vec!["<tool>convert(1, m, m)</tool>".to_string(), long, "<answer>1</answer>".into()];
    let findings = env.verify(spec(7, 1), &messages).await.unwrap();
    assert!(findings.iter().any(|f| f.kind == FindingKind::FormatError && f.step == 1), "{findings:?}");
    assert!(findings.iter().all(|f| f.step <= 1), "{findings:?}");
}

#[tokio::test]
async fn wrong_or_missing_tokens_are_refused_and_off_loopback_one_is_required() {
    let server = PythonEnvServer::start(&[], Some(TOKEN));
    for token in [None, Some(Token::new("wrong"))] {
        let err = HttpEnv::connect(server.url(), TIMEOUT, token.as_ref(), Limits::default()).await.unwrap_err();
        assert!(matches!(err, EnvError::Unauthorized { .. }), "{err}");
    }
    let err = HttpEnv::connect("http://10.255.255.1:9", TIMEOUT, None, Limits::default()).await.unwrap_err();
    assert!(err.to_string().contains("env_worker.token_env"), "{err}");
}

#[tokio::test]
async fn unknown_sessions_missing_verify_and_bad_tasks_are_errors_that_say_so() {
    let server = PythonEnvServer::start(&["--no-verify"], None);
    let env = HttpEnv::connect(server.url(), TIMEOUT, None, Limits::default()).await.unwrap();
    assert!(!env.info().verify);
    let err = env.verify(spec(1, 1), &[]).await.unwrap_err();
    assert!(matches!(err, EnvError::Unsupported { op: "verify", .. }), "{err}");
    let err = env.step(SessionId(5), "hi").await.unwrap_err();
    assert_eq!(err, EnvError::Service(ServiceError::UnknownSession(SessionId(5))));
    let err = env.open(spec(1, 9)).await.unwrap_err();
    assert!(err.to_string().contains("difficulty 9"), "{err}");
    let err = env.open(TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 1 }).await.unwrap_err();
    assert!(err.to_string().contains("math tasks are built in"), "{err}");
}

#[tokio::test]
async fn a_server_that_never_answers_fails_the_call_at_its_deadline() {
    // Accepted by the kernel's backlog, never read: the request is sent, no reply ever comes.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let deadline = Duration::from_millis(400);
    let started = Instant::now();
    let err = HttpEnv::connect(&url, deadline, None, Limits::default()).await.unwrap_err();
    assert!(matches!(err, EnvError::Timeout { op: "info", .. }), "{err}");
    assert!(started.elapsed() < deadline * 5, "gave up after {:?}", started.elapsed());
}

#[tokio::test]
async fn a_server_not_reached_is_retried_until_the_deadline_names_it() {
    let url = testkit::refused_url().unwrap();
    let started = Instant::now();
    let err = HttpEnv::connect(&url, Duration::from_millis(600), None, Limits::default()).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(err, EnvError::Rpc { op: "info", .. }), "{err}");
    assert!(err.to_string().contains(url.trim_start_matches("http://")), "names the server: {err}");
    // Retried with backoff (50, 100, 200 ms …) rather than given up at the first refusal.
    assert!(elapsed >= Duration::from_millis(150) && elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[test]
fn the_openapi_description_names_every_call_and_finding_kind_the_client_speaks() {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/env-http.openapi.yaml")).unwrap();
    assert!(spec.starts_with("openapi: 3.") && spec.contains(env_workers::http_env::wire::PROTOCOL));
    for op in ["info", "open", "step", "close", "verify", "reference"] {
        assert!(spec.contains(&format!("\n  /v1/{op}:\n")), "the path /v1/{op} is described");
    }
    let kinds = [
        "wrong_tool",
        "wrong_arguments",
        "redundant_call",
        "unsupported_answer",
        "contradiction",
        "fabrication",
        "format_error",
        "gave_up_early",
        "skipped_step",
        "wrong_answer",
    ];
    for kind in kinds {
        assert!(spec.contains(&format!("- {kind}\n")), "the finding kind {kind} is described");
        let body = format!(r#"{{"findings": [{{"step": 0, "kind": "{kind}"}}]}}"#);
        let reply: env_workers::http_env::wire::VerifyReply = serde_json::from_str(&body).unwrap();
        assert_eq!(reply.checked(1).unwrap().len(), 1, "{kind} is read by the client");
    }
}
