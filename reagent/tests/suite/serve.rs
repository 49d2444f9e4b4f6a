//! `reagent serve` as a real process on a free port: the rrm-worker's OpenAI-compatible judge
//! pointed at it end to end (a random built-in model, so the judgement is unparseable: the test
//! checks the protocol and the parse path, and that each attempt was answered with 200), then
//! the bad inputs a client can send: wrong key 401, malformed JSON and fields 400 naming the
//! field, a body over the limit 413, max_tokens over the limit 400; /v1/models and /metrics.
//! Then the official OpenAI Python client (scripts/openai_venv.sh, scripts/openai_client.py)
//! against `reagent serve` on SmolLM2-135M-Instruct: the request's temperature, seed, n,
//! max_tokens, stop, logprobs and top_logprobs honoured, streaming as server-sent events, and
//! unsupported fields refused by name.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use env_workers::chat::ChatSettings;
use protocol::wire::{
    ActorId, Attempt, Episode, GroupId, PolicyVersion, Role, RunId, TaskFamily, TaskSpec, Timing, Trajectory,
    TrajectoryId, Turn,
};
use rrm_worker::openai::{OpenAiJudge, OpenAiSettings};
use rrm_worker::{Judge, PromptFormat};
use serde_json::{json, Value};

const KEY: &str = "sk-serve-test";

/// The server process, killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `reagent serve` on the micro model and reads the address it prints (within 120 s).
fn start() -> Server {
    start_with(&["--model", "micro", "--max-tokens", "24", "--max-body-bytes", "65536", "--max-messages", "8"])
}

/// Starts `reagent serve` with `args` (and a free port, the CPU, a 60 s deadline).
fn start_with(args: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reagent"))
        .args(["serve", "--listen", "127.0.0.1:0", "--device", "cpu", "--deadline-s", "60"])
        .args(args)
        .env("REAGENT_SERVE_API_KEY", KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("reagent starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("http://").nth(1) {
                let _ = tx.send(format!("http://{}", rest.split("/v1").next().unwrap_or_default()));
            }
        }
    });
    let url = rx.recv_timeout(Duration::from_secs(120)).expect("reagent serve prints its address");
    Server { child, url }
}

fn trajectory() -> Trajectory {
    let turn = |role, text: &str| Turn {
        role,
        text: text.into(),
        token_ids: text.bytes().map(u32::from).collect(),
        logprobs: if role == Role::Agent { vec![-0.5; text.len()] } else { Vec::new() },
        loss_mask: vec![role == Role::Agent; text.len()],
    };
    Trajectory {
        run_id: RunId::new("serve-test").unwrap(),
        id: TrajectoryId::random(),
        actor_id: ActorId("actor-test".into()),
        task: TaskSpec { family: TaskFamily::Math, seed: 3, difficulty: 1 },
        group_id: GroupId(3),
        attempt: Attempt::Initial,
        policy_version: PolicyVersion(1),
        episode: Episode::Text(vec![turn(Role::User, "What is 2 + 3?"), turn(Role::Agent, "<answer>6</answer>")]),
        outcome_reward: 0.0,
        timing: Timing::default(),
    }
}

fn settings(url: &str) -> OpenAiSettings {
    OpenAiSettings {
        chat: ChatSettings {
            endpoints: vec![url.to_string()],
            model: "micro".into(),
            api_key: Some(KEY.into()),
            timeout: Duration::from_secs(60),
            retries: 1,
            backoff: Duration::from_millis(5),
            backoff_max: Duration::from_millis(20),
            endpoint_cooldown: Duration::from_millis(1),
            max_concurrency: 4,
            max_tokens: 16,
            temperature: 0.0,
        },
        prompt: PromptFormat::Trajectory,
        max_prompt_chars: 8_000,
    }
}

/// `reagent_serve_requests_total{route, status}` from the server's /metrics.
async fn served(client: &reqwest::Client, url: &str, route: &str, status: u16) -> f64 {
    let text = client.get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap();
    let needle = format!("reagent_serve_requests_total{{route=\"{route}\",status=\"{status}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&needle)).map_or(0.0, |v| v.trim().parse().unwrap())
}

async fn post(client: &reqwest::Client, url: &str, key: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let r = client
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_openai_judge_talks_to_reagent_serve_and_bad_input_is_refused() {
    let server = tokio::task::spawn_blocking(start).await.unwrap();
    let url = server.url.clone();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    tokio::time::timeout(Duration::from_secs(300), async {
        // The judge end to end: two attempts (retries 1), each answered 200, neither parseable.
        let judge = OpenAiJudge::new(settings(&url)).unwrap();
        let err = judge.judge(&trajectory()).await.expect_err("a random model writes no judgement");
        assert!(err.to_string().contains("malformed judge output"), "{err}");
        assert_eq!(served(&client, &url, "chat", 200).await, 2.0);

        // A well-formed request: choices, usage, finish reasons, n completions.
        let body = json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }], "max_tokens": 5, "n": 3 });
        let (status, v) = post(&client, &url, KEY, body.to_string()).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!((v["object"].as_str(), v["model"].as_str()), (Some("chat.completion"), Some("m")));
        let choices = v["choices"].as_array().unwrap();
        assert_eq!(choices.len(), 3);
        assert!(choices
            .iter()
            .all(|c| c["message"]["role"] == "assistant"
                && matches!(c["finish_reason"].as_str(), Some("stop" | "length"))));
        let completion = v["usage"]["completion_tokens"].as_u64().unwrap();
        assert!((3..=15).contains(&completion), "at most max_tokens each: {completion}");

        let models: Value =
            client.get(format!("{url}/v1/models")).bearer_auth(KEY).send().await.unwrap().json().await.unwrap();
        assert_eq!(models["data"][0]["id"], "micro");

        // Bad input.
        let (status, v) = post(&client, &url, "sk-wrong", body.to_string()).await;
        assert_eq!((status, v["error"]["type"].as_str()), (401, Some("authentication_error")));
        let r = client.get(format!("{url}/v1/models")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "no key");
        let (status, v) = post(&client, &url, KEY, "{\"messages\": [").await;
        assert_eq!((status, v["error"]["param"].as_str()), (400, Some("body")), "{v}");
        let (status, v) = post(&client, &url, KEY, r#"{"messages": [{"role": "user"}]}"#).await;
        assert_eq!((status, v["error"]["param"].as_str()), (400, Some("messages[0]")), "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains("content"), "{v}");
        let (status, v) = post(&client, &url, KEY, r#"{"messages": [{"role": "robot", "content": "x"}]}"#).await;
        assert_eq!((status, v["error"]["param"].as_str()), (400, Some("messages[0].role")), "{v}");
        let (status, v) =
            post(&client, &url, KEY, r#"{"messages": [{"role": "user", "content": "x"}], "max_tokens": 25}"#).await;
        assert_eq!((status, v["error"]["param"].as_str()), (400, Some("max_tokens")), "{v}");
        let many = json!({ "messages": vec![json!({ "role": "user", "content": "x" }); 9] });
        let (status, v) = post(&client, &url, KEY, many.to_string()).await;
        assert_eq!((status, v["error"]["param"].as_str()), (400, Some("messages")), "{v}");
        let big = json!({ "messages": [{ "role": "user", "content": "a".repeat(70_000) }] });
        let (status, _) = post(&client, &url, KEY, big.to_string()).await;
        assert_eq!(status, 413);
        assert_eq!(served(&client, &url, "chat", 413).await, 1.0);
    })
    .await
    .expect("finished within the test's deadline");
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What scripts/openai_client.py observed against a server at `url`.
fn openai_client(url: &str, key: &str) -> Value {
    let venv = std::env::var_os("REAGENT_OPENAI_VENV").map_or_else(|| repo().join("target/openai-venv"), PathBuf::from);
    let python = venv.join("bin/python");
    assert!(python.exists(), "no OpenAI client venv at {}: run `bash scripts/openai_venv.sh`", venv.display());
    let out = Command::new(python).arg(repo().join("scripts/openai_client.py")).args([url, key]).output().unwrap();
    assert!(out.status.success(), "openai_client.py failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect()
}

#[test]
fn the_official_openai_client_gets_what_it_asks_of_smollm2() {
    let dir = std::env::var_os("REAGENT_SMOLLM2").map_or_else(|| repo().join("target/smollm2"), PathBuf::from);
    assert!(
        dir.join("config.json").is_file(),
        "SmolLM2 is missing at {}: run `bash scripts/smollm2.sh`",
        dir.display()
    );
    let dir = dir.to_str().unwrap().to_string();
    // The server's own temperature is 0: every sampled figure below comes from the request's.
    let server = start_with(&["--model", &dir, "--temperature", "0", "--max-tokens", "64", "--api-key", KEY]);
    let v = openai_client(&server.url, KEY);

    // Greedy: the prompt is the model's chat template with its default system message (46 tokens,
    // as transformers' apply_chat_template makes it) and the answer is transformers' greedy one.
    let greedy = &v["greedy"];
    assert_eq!(greedy[0], greedy[1], "greedy is repeatable");
    assert_eq!(greedy[0]["prompt_tokens"], 46, "{greedy}");
    let text = greedy[0]["text"].as_str().unwrap();
    assert!(text.starts_with("17 + 25 = 32\n\nThis is a classic example"), "{text:?}");
    assert_eq!(
        (greedy[0]["finish_reason"].as_str(), greedy[0]["completion_tokens"].as_u64()),
        (Some("length"), Some(48))
    );

    // The request's temperature, n and seed: eight different stories, the same eight again for
    // the same seed, others for another seed.
    let sampled = &v["sampled"];
    let (a, again, b) = (strings(&sampled["seed11"]), strings(&sampled["seed11_again"]), strings(&sampled["seed12"]));
    assert_eq!(a.len(), 8);
    let distinct: std::collections::HashSet<_> = a.iter().collect();
    assert!(distinct.len() >= 6, "temperature 0.9 gave {} distinct of 8: {a:?}", distinct.len());
    assert_eq!(a, again, "the same seed gives the same completions");
    assert_ne!(a, b, "another seed gives others");

    // max_tokens ends a completion at the budget; stop cuts the text before the stop text.
    assert_eq!((v["cut"]["finish_reason"].as_str(), v["cut"]["completion_tokens"].as_u64()), (Some("length"), Some(5)));
    let stop = &v["stop"];
    assert_eq!((stop["text"].as_str(), stop["finish_reason"].as_str()), (Some("1, 2, 3"), Some("stop")), "{stop}");

    // Log-probs: one entry per token of the text, each the most likely of its three
    // alternatives at temperature 0, the alternatives in descending order.
    let lp = &v["logprobs"];
    let tokens = lp["tokens"].as_array().unwrap();
    let joined: String = tokens.iter().map(|t| t["token"].as_str().unwrap()).collect();
    assert_eq!(joined, lp["text"].as_str().unwrap());
    assert_eq!(lp["text"].as_str(), Some(text));
    for t in tokens {
        let tops = t["tops"].as_array().unwrap();
        let values: Vec<f64> = tops.iter().map(|p| p[1].as_f64().unwrap()).collect();
        assert_eq!(tops.len(), 3, "{t}");
        assert_eq!(tops[0][0], t["token"], "greedy takes the most likely token: {t}");
        assert!((values[0] - t["logprob"].as_f64().unwrap()).abs() < 1e-6, "{t}");
        assert!(values.windows(2).all(|w| w[0] >= w[1]) && values[0] <= 0.0, "{t}");
        assert_eq!(t["bytes"].as_array().unwrap().len(), t["token"].as_str().unwrap().len(), "{t}");
    }

    // Streaming: the same text, in pieces, then the finish reason and the usage.
    let streamed = &v["streamed"];
    let pieces = strings(&streamed["pieces"]);
    assert!(pieces.len() >= 10, "streamed in {} pieces", pieces.len());
    assert_eq!(pieces.concat(), text);
    assert_eq!(
        (streamed["finish_reason"].as_str(), streamed["completion_tokens"].as_u64()),
        (Some("length"), Some(48))
    );

    // Unsupported fields are refused by name.
    let params: Vec<&str> =
        v["refused"].as_array().unwrap().iter().map(|r| r["param"].as_str().unwrap_or("")).collect();
    assert_eq!(params, ["tools", "presence_penalty", "logit_bias", "guided_json"], "{}", v["refused"]);
    assert!(v["refused"].as_array().unwrap().iter().all(|r| r["status"] == 400));
}
