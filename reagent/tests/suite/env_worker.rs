//! `reagent env-worker` as a real process: it prints its bound address, serves sessions over
//! TCP, and on SIGTERM refuses new sessions, lets the open one finish, and exits cleanly with
//! its report. With `[user_model]` it has a chat model (the testkit's chat test server) play the
//! retail user, and a bad section stops it naming the key.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use env_workers::service::EnvClient;
use env_workers::Environment;
use protocol::rpc::{EnvAction, ServiceError, StepReply};
use protocol::wire::{TaskFamily, TaskSpec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_sessions_and_leaves_gracefully_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reagent"))
        .args(["env-worker", "--listen", "127.0.0.1:0", "--grace-s", "20"])
        .env("REAGENT__METRICS__LISTEN", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("reagent starts");
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut line).unwrap();
    let addr: std::net::SocketAddr =
        line.trim().strip_prefix("env-worker listening on ").expect("the address line").parse().unwrap();

    let client = EnvClient::connect(addr, Duration::from_secs(5), None).await.unwrap();
    let spec = TaskSpec { family: TaskFamily::Math, seed: 7, difficulty: 1 };
    let opened = client.open(spec).await.unwrap();
    // Reference solutions are not served: the test makes its own.
    let reference = env_workers::registry::make(spec, env_workers::Limits::default()).unwrap().reference();

    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let started = Instant::now();
    loop {
        match client.open(spec).await {
            // Opened before the signal was handled: close it again.
            Ok(early) => assert!(client.close(early.session).await.unwrap()),
            Err(e) => {
                assert_eq!(e, env_workers::EnvError::Service(ServiceError::ShuttingDown));
                break;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(10), "new sessions still accepted after SIGTERM");
    }
    // The open episode is played to the end during the grace period.
    let mut last = None;
    for message in reference {
        last = Some(client.step(opened.session, EnvAction::Text(message)).await.unwrap());
    }
    let Some(StepReply::Text(obs)) = last else { panic!("a text reply") };
    assert_eq!(obs.end.map(|o| o.success), Some(true));
    assert!(client.close(opened.session).await.unwrap());

    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "env-worker did not exit after its last session closed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "clean exit, got {status}");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest.lines().last(), Some("env-worker shut down: sessions_left_open 0"), "its report: {rest}");
}

#[test]
fn off_loopback_it_refuses_to_start_without_a_token() {
    let out = Command::new(env!("CARGO_BIN_EXE_reagent"))
        .args(["env-worker", "--listen", "0.0.0.0:0"])
        .env("REAGENT__METRICS__LISTEN", "127.0.0.1:0")
        .env_remove("REAGENT_ENV_TOKEN")
        .output()
        .expect("reagent runs");
    assert!(!out.status.success(), "it started without a token");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("env_worker.token_env") && err.contains("REAGENT_ENV_TOKEN"), "{err}");
}

/// Starts `reagent env-worker` on a free loopback port with `env` set; returns the child and
/// its address.
fn start_with(env: &[(&str, &str)]) -> (std::process::Child, std::net::SocketAddr) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_reagent"));
    command
        .args(["env-worker", "--listen", "127.0.0.1:0"])
        .env("REAGENT__METRICS__LISTEN", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("reagent starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("env-worker listening on ").expect("the address line").parse().unwrap();
    (child, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_model_plays_the_retail_user_when_user_model_says_so() {
    let chat = testkit::chat::TestChatServer::start().await.unwrap();
    chat.set_default(testkit::chat::Reply::Content("It's order #W0000000, thanks.".into()));
    let url = chat.url();
    let (mut child, addr) = start_with(&[
        ("REAGENT__USER_MODEL__PLAYER", "openai"),
        ("REAGENT__USER_MODEL__OPENAI__ENDPOINTS", url.as_str()),
        ("REAGENT__USER_MODEL__OPENAI__MODEL", "user-sim"),
    ]);
    let client = EnvClient::connect(addr, Duration::from_secs(30), None).await.unwrap();
    let opened = client.open(TaskSpec { family: TaskFamily::Retail, seed: 4, difficulty: 1 }).await.unwrap();
    let reply = client.step(opened.session, EnvAction::Text("Which order is it?".into())).await.unwrap();
    let StepReply::Text(obs) = reply else { panic!("a text reply") };
    assert_eq!(obs.text, "It's order #W0000000, thanks.", "the model's reply, not the rule-based user's");
    let asked = chat.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].body["model"], "user-sim");
    assert!(asked[0].message("system").unwrap().contains("You are the customer"), "{:?}", asked[0].body);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_bad_user_model_section_refuses_to_start_naming_the_key_and_never_the_key() {
    let run = |env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_reagent"));
        command.args(["env-worker", "--listen", "127.0.0.1:0"]).env("REAGENT__METRICS__LISTEN", "127.0.0.1:0");
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().expect("reagent runs");
        assert!(!out.status.success(), "it started with {env:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&[("REAGENT__USER_MODEL__PLAYER", "openai")]);
    assert!(err.contains("user_model.openai.endpoints"), "{err}");
    let secret = "sk-never-printed-4242";
    let err = run(&[
        ("REAGENT__USER_MODEL__PLAYER", "openai"),
        ("REAGENT__USER_MODEL__OPENAI__ENDPOINTS", "http://users.example:8000"),
        ("REAGENT__USER_MODEL__OPENAI__MODEL", "user-sim"),
        ("REAGENT__USER_MODEL__OPENAI__API_KEY_ENV", "REAGENT_TEST_USER_MODEL_KEY"),
        ("REAGENT_TEST_USER_MODEL_KEY", secret),
    ]);
    assert!(err.contains("user_model.openai.endpoints") && err.contains("allow_insecure_api_key"), "{err}");
    assert!(!err.contains(secret), "the key is never printed: {err}");
}
