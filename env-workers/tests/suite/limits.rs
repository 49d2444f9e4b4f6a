//! The message limit every text episode obeys (`Limits::max_message_chars`, 4,096 characters
//! by default): a longer agent message is refused with a flawed observation that names both
//! lengths, changes nothing and ends nothing (only its turn is spent); a message at the limit is
//! the environment's to judge. Characters are counted, not bytes. In every text family, in
//! process and through the env-worker service.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::Duration;

use env_workers::registry::{make, DIFFICULTIES};
use env_workers::service::{serve, EnvClient, ServeOptions, SessionTable, TableConfig};
use env_workers::{Environment, FindingKind, Guarded, Limits, Source, TaskFamily, TaskSpec};
use protocol::rpc::{EnvAction, StepReply};
use tokio_util::sync::CancellationToken;

const LIMIT: usize = 4096;
const TEXT_FAMILIES: [TaskFamily; 4] = [TaskFamily::Math, TaskFamily::Retail, TaskFamily::Webnav, TaskFamily::Searchqa];

/// `message` padded with trailing spaces to `chars` characters.
fn padded(message: &str, chars: usize) -> String {
    let n = message.chars().count();
    assert!(n <= chars, "{n} characters already");
    format!("{message}{}", " ".repeat(chars - n))
}

fn refusal(chars: usize) -> String {
    format!("message of {chars} characters is over the limit of {LIMIT}; nothing was done")
}

/// Plays the reference, with the given final message instead of the reference's, and returns
/// whether the episode was solved.
fn play(env: &mut Guarded, reference: &[String], last: &str) -> bool {
    let (_, calls) = reference.split_last().expect("an answer");
    for call in calls {
        assert!(env.step(call).end.is_none(), "{call}");
    }
    env.step(last).end.expect("the last message ends the episode").success
}

#[test]
fn the_default_limit_is_4096_characters() {
    assert_eq!(Limits::default().max_message_chars, LIMIT);
}

#[test]
fn an_answer_one_character_over_the_limit_is_refused_and_changes_nothing() {
    for family in TEXT_FAMILIES {
        for difficulty in DIFFICULTIES {
            for seed in 0..5 {
                let spec = TaskSpec { family, seed, difficulty };
                let mut env = make(spec, Limits::default()).unwrap();
                let reference = env.reference();
                let answer = reference.last().unwrap();
                // The answer, then two-byte characters up to 4,097 characters (8,000-odd bytes).
                let over = format!("{answer}{}", "é".repeat(LIMIT + 1 - answer.chars().count()));
                assert_eq!(over.chars().count(), LIMIT + 1);
                // The control: under a limit one character higher, this message ends the episode.
                let mut roomier = make(spec, Limits { max_message_chars: LIMIT + 1, ..Limits::default() }).unwrap();
                assert!(roomier.step(&over).end.is_some(), "{spec:?}: the answer would not end the episode anyway");
                let obs = env.step(&over);
                assert_eq!(obs.from, Source::Env, "{spec:?}");
                assert_eq!(obs.flaw.as_deref(), Some(refusal(LIMIT + 1).as_str()), "{spec:?}");
                assert!(obs.end.is_none() && !env.is_over() && env.turns() == 1, "{spec:?}: {obs:?}");
                // Nothing was done: the reference still solves the task from where it was.
                assert!(play(&mut env, &reference, answer), "{spec:?}: the refused message changed the task");
            }
        }
    }
}

#[test]
fn an_answer_of_exactly_the_limit_is_judged_by_the_environment() {
    for family in TEXT_FAMILIES {
        for seed in 0..5 {
            let spec = TaskSpec { family, seed, difficulty: 1 };
            let mut env = make(spec, Limits::default()).unwrap();
            let reference = env.reference();
            let at = padded(reference.last().unwrap(), LIMIT);
            assert!(play(&mut env, &reference, &at), "{spec:?}: a 4,096-character answer did not solve the task");
        }
    }
}

#[test]
fn verification_applies_the_same_limits() {
    for family in TEXT_FAMILIES {
        let spec = TaskSpec { family, seed: 2, difficulty: 1 };
        let env = make(spec, Limits::default()).unwrap();
        let reference = env.reference();
        assert!(env.verify(&reference).is_empty(), "{spec:?}: the reference is flawless");
        // Messages past the turn limit were never played: they change nothing.
        let mut padded_out = reference.clone();
        padded_out.extend(vec!["x".repeat(100_000); 64]);
        let short = make(spec, Limits { max_turns: reference.len(), ..Limits::default() }).unwrap();
        assert!(short.verify(&padded_out).is_empty(), "{spec:?}: messages past max_turns were verified");
        // A message over the length limit ends the replay with a format finding at its index.
        let mut over = reference.clone();
        over[0] = "x".repeat(LIMIT + 1);
        let findings = env.verify(&over);
        let last = findings.last().expect("a finding");
        assert_eq!((last.step, last.kind), (0, FindingKind::FormatError), "{spec:?}: {findings:?}");
        assert!(last.detail.contains("over the limit of 4096"), "{}", last.detail);
    }
}

#[test]
fn a_lower_limit_counts_characters_not_bytes() {
    let limits = Limits { max_message_chars: 10, ..Limits::default() };
    let mut env = make(TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 1 }, limits).unwrap();
    // Ten characters of two bytes each are within a limit of ten.
    assert!(env.step(&"é".repeat(10)).flaw.is_none_or(|f| !f.contains("over the limit")));
    let obs = env.step(&"é".repeat(11));
    assert_eq!(obs.flaw.as_deref(), Some("message of 11 characters is over the limit of 10; nothing was done"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_env_worker_service_enforces_the_same_limit() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let table = std::sync::Arc::new(SessionTable::new(TableConfig::default()));
    let stop = CancellationToken::new();
    let options = ServeOptions { grace: Duration::from_millis(200), ..ServeOptions::default() };
    let server = tokio::spawn(serve(listener, table, options, stop.clone()));
    let client = EnvClient::connect(addr, Duration::from_secs(5), None).await.unwrap();

    let spec = TaskSpec { family: TaskFamily::Retail, seed: 3, difficulty: 2 };
    let reference = make(spec, Limits::default()).unwrap().reference();
    let opened = client.open(spec).await.unwrap();
    let step = |m: String| {
        let client = &client;
        async move {
            match client.step(opened.session, EnvAction::Text(m)).await.unwrap() {
                StepReply::Text(obs) => obs,
                other => panic!("a text observation, not {other:?}"),
            }
        }
    };
    let obs = step("x".repeat(LIMIT + 1)).await;
    assert_eq!(obs.flaw.as_deref(), Some(refusal(LIMIT + 1).as_str()));
    let (last, calls) = reference.split_last().unwrap();
    for call in calls {
        assert!(step(call.clone()).await.end.is_none());
    }
    let end = step(padded(last, LIMIT)).await.end.expect("the answer ends the episode");
    assert!(end.success, "{end:?}");
    drop(client);
    stop.cancel();
    server.await.unwrap().unwrap();
}
