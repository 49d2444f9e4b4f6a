//! The dataset family through the env-worker service over loopback TCP: the committed sample
//! dataset is what `dataset_sample` writes, loads from `[dataset]`, and its episodes play
//! through the service — tool results, rewards under the numeric match, the held-out split —
//! and verify remotely as in-process. A `dataset` task in a process without a dataset is a
//! typed error, not a crash.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use env_workers::families::dataset::{self, sample, Split, HELD_OUT_FROM};
use env_workers::service::{serve, EnvClient, ServeOptions, SessionTable, TableConfig};
use env_workers::{registry, Environment, Limits};
use protocol::rpc::{EnvAction, Start, StepReply};
use protocol::wire::{Observation, TaskFamily, TaskSpec};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(5);

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/dataset")
}

/// Loads the committed sample as `[dataset]` would, and installs it in this process.
fn load_sample() -> Arc<dataset::Catalog> {
    dataset::load_config(&sample::table(&examples().join(sample::TASKS_FILE))).unwrap().unwrap()
}

fn spec(seed: u64, difficulty: u32) -> TaskSpec {
    TaskSpec { family: TaskFamily::Dataset, seed, difficulty }
}

fn text(reply: StepReply) -> Observation {
    match reply {
        StepReply::Text(o) => o,
        other => panic!("a text observation, got {other:?}"),
    }
}

#[test]
fn the_committed_sample_is_what_the_generator_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (tasks, episodes) = sample::write(dir.path()).unwrap();
    for (written, name) in [(tasks, sample::TASKS_FILE), (episodes, sample::EPISODES_FILE)] {
        let committed = std::fs::read_to_string(examples().join(name)).unwrap();
        assert_eq!(committed, std::fs::read_to_string(written).unwrap(), "regenerate examples/dataset/{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_episodes_play_through_the_env_worker() {
    let catalog = load_sample();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let table = Arc::new(SessionTable::new(TableConfig::default()));
    let stop = CancellationToken::new();
    let server = tokio::spawn(serve(listener, table, ServeOptions::default(), stop.clone()));
    let client = EnvClient::connect(addr, TIMEOUT, None).await.unwrap();

    let (mut solved, mut wrong) = (0, 0);
    for (seed, difficulty) in (0..12).map(|s| (s * 7919, 1 + (s % 2) as u32)).chain([(HELD_OUT_FROM, 1)]) {
        let task = catalog.task(seed, difficulty).unwrap();
        assert_eq!(Split::of_id(&task.id, sample::SAMPLE_EVAL_PERCENT), Split::of_seed(seed), "{}", task.id);
        let opened = client.open(spec(seed, difficulty)).await.unwrap();
        let Start::Text(prompt) = opened.start else { panic!("a text task") };
        assert_eq!(prompt.user, task.question);
        assert!(prompt.system.contains("calc(expression)"));
        // A calculation, then the right answer (every other seed: a wrong one).
        let step = |m: &str| client.step(opened.session, EnvAction::Text(m.to_string()));
        let result = text(step("<tool>calc(40 + 2)</tool>").await.unwrap());
        assert_eq!((result.text.as_str(), result.flaw), ("42", None));
        let free = text(step("I think so").await.unwrap());
        assert!(free.flaw.unwrap().contains("no user"));
        let answer = if seed % 2 == 0 { task.answer_text.clone() } else { format!("{}+1", task.answer_text) };
        let end = text(step(&format!("<answer>{answer}</answer>")).await.unwrap()).end.unwrap();
        if seed % 2 == 0 {
            assert_eq!((end.reward, end.success), (1.0, true), "{}: {}", task.id, end.summary);
            solved += 1;
        } else {
            assert_eq!(end.reward, 0.0, "{}", task.id);
            wrong += 1;
        }
        assert!(client.close(opened.session).await.unwrap());

        // The worker's verifier agrees with this process's.
        let messages = vec!["<tool>calc(40 + 2)</tool>".to_string(), format!("<answer>{answer}</answer>")];
        let remote = client.verify(spec(seed, difficulty), messages.clone()).await.unwrap();
        let local = registry::make(spec(seed, difficulty), Limits::default()).unwrap().verify(&messages);
        assert_eq!(remote, local);
    }
    assert!(solved > 0 && wrong > 0);
    // No task at difficulty 3 in the sample: a typed error naming what is missing.
    let e = client.open(spec(5, 3)).await.unwrap_err().to_string();
    assert!(e.contains("dataset has no training tasks at difficulty 3"), "{e}");
    stop.cancel();
    server.await.unwrap().unwrap();
}

#[test]
fn the_reference_judge_judges_dataset_tasks() {
    load_sample();
    let reference = registry::make(spec(3, 1), Limits::default()).unwrap().reference();
    let judged = env_workers::judge::judge_messages(spec(3, 1), &reference, true).unwrap();
    assert_eq!(judged.score, 1.0, "{}", judged.trace);
    let judged = env_workers::judge::judge_messages(spec(3, 1), &["<answer>-1</answer>".into()], true).unwrap();
    assert!(judged.score < 0.5 && judged.critique.contains("did not solve"), "{}", judged.critique);
}
