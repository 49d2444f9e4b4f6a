//! `[dataset]` as a user meets it through the `reagent` binary: a malformed line stops the
//! process before it starts, naming the file, the line and the field; `actor.family =
//! "dataset"` without files is refused; a real `reagent env-worker` process serves the sample
//! dataset's tasks over TCP; `reagent sft --family dataset --episodes FILE` trains on the
//! sample demonstrations and writes its model and report.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use env_workers::families::dataset::{self, sample};
use env_workers::service::EnvClient;
use protocol::rpc::{EnvAction, Start, StepReply};
use protocol::wire::{TaskFamily, TaskSpec};

fn sample_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/dataset").join(name)
}

/// A job file whose `[dataset]` is the file at `path` (numeric answers).
fn dataset_toml(path: &Path) -> String {
    let mut job = toml::Table::new();
    job.insert("dataset".into(), sample::table(path).into());
    toml::to_string(&job).unwrap()
}

/// Runs `reagent --config <toml> args…` to completion, without the caller's `REAGENT__*`.
fn reagent(dir: &Path, toml: &str, args: &[&str]) -> Output {
    let config = dir.join("job.toml");
    std::fs::write(&config, toml).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reagent"));
    cmd.arg("--config").arg(&config).args(args).stdin(Stdio::null());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("REAGENT__")) {
        cmd.env_remove(k);
    }
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn a_malformed_line_stops_every_command_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.jsonl");
    std::fs::write(&file, "{\"id\": 1, \"question\": \"2+2?\", \"answer\": \"4\"}\n{\"id\": 2, \"question\": \"3+3?\", \"answer\": \"six\"}\n")
        .unwrap();
    for args in [&["config", "show"][..], &["env-worker", "--listen", "127.0.0.1:0"][..]] {
        let out = reagent(dir.path(), &dataset_toml(&file), args);
        let all = text(&out);
        assert!(!out.status.success(), "{args:?}: {all}");
        let want = format!("dataset file {}, line 2, field `answer`: \"six\" is not a number", file.display());
        assert!(all.contains(&want), "{args:?}: {all}");
    }
    let out = reagent(dir.path(), "[actor]\nfamily = [\"math\", \"dataset\"]\n", &["config", "show"]);
    assert!(!out.status.success() && text(&out).contains("actor.family"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_env_worker_process_serves_the_sample_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dataset_toml(&sample_file(sample::TASKS_FILE));
    let config = dir.path().join("job.toml");
    std::fs::write(&config, &toml).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_reagent"))
        .arg("--config")
        .arg(&config)
        .args(["env-worker", "--listen", "127.0.0.1:0"])
        .env("REAGENT__METRICS__LISTEN", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr: std::net::SocketAddr =
        line.trim().strip_prefix("env-worker listening on ").expect("the address line").parse().unwrap();
    // This process loads the same files, to know the answers.
    let catalog = dataset::load_config(&sample::table(&sample_file(sample::TASKS_FILE))).unwrap().unwrap();
    let client = EnvClient::connect(addr, Duration::from_secs(5), None).await.unwrap();
    for seed in [1, 2, 3, dataset::HELD_OUT_FROM] {
        let task = catalog.task(seed, 1).unwrap();
        let opened = client.open(TaskSpec { family: TaskFamily::Dataset, seed, difficulty: 1 }).await.unwrap();
        let Start::Text(prompt) = opened.start else { panic!("a text task") };
        assert_eq!(prompt.user, task.question);
        let answer = EnvAction::Text(format!("<answer>{}</answer>", task.answer_text));
        let StepReply::Text(obs) = client.step(opened.session, answer).await.unwrap() else { panic!("text") };
        assert_eq!(obs.end.unwrap().reward, 1.0, "{}", task.id);
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn sft_trains_on_the_sample_demonstrations() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("sft");
    let episodes = sample_file(sample::EPISODES_FILE);
    let args = [
        "sft",
        "--size",
        "micro",
        "--steps",
        "20",
        "--eval-tasks",
        "2",
        "--refine-share",
        "0",
        "--family",
        "dataset",
        "--episodes",
        episodes.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ];
    let out = reagent(dir.path(), &dataset_toml(&sample_file(sample::TASKS_FILE)), &args);
    let report = std::fs::read_to_string(out_dir.join("sft_report.json"));
    assert!(report.is_ok(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_str(&report.unwrap()).unwrap();
    assert_eq!(report["steps"], 20);
    assert!(report["final_loss"].as_f64().unwrap() < report["first_loss"].as_f64().unwrap(), "{report}");
    assert!(out_dir.join("model/model.safetensors").exists());
}
