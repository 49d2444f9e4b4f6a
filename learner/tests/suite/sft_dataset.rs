//! The cold start on a user's own data (issue 15): the demonstrations file (chats in the
//! OpenAI format) is tokenized with the loss on exactly the assistant's tokens, every
//! malformed line is refused naming its file, line and field, and a short SFT on the sample
//! demonstrations lowers the loss; a short SFT on the sample dataset's own reference episodes
//! trains and evaluates on its held-out tasks, which `episode` and the dataset agree on.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::path::{Path, PathBuf};

use env_workers::families::dataset::{self, sample, HELD_OUT_FROM};
use episode::{SystemPrompt, HELD_OUT_SEED_BASE};
use learner::sft::{self, episodes_file, micro_model, ExperimentSize, SftConfig};
use policy::{ByteTokenizer, Tokenizer};
use protocol::wire::{Role, TaskFamily};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/dataset")
}

fn install_sample() {
    dataset::load_config(&sample::table(&examples().join(sample::TASKS_FILE))).unwrap().unwrap();
}

fn short_run(episodes: Option<PathBuf>, steps: u64) -> SftConfig {
    SftConfig {
        model: micro_model(),
        family: TaskFamily::Dataset,
        difficulties: vec![1, 2],
        refine_share: 0.0,
        steps,
        time_limit: None,
        eval_every: 0,
        eval_tasks: 4,
        eval_difficulties: vec![1],
        episodes,
        ..SftConfig::experiment(ExperimentSize::Micro)
    }
}

#[test]
fn the_held_out_seeds_agree() {
    assert_eq!(HELD_OUT_FROM, HELD_OUT_SEED_BASE);
}

#[test]
fn demonstrations_train_on_exactly_the_assistant_tokens() {
    let file = examples().join(sample::EPISODES_FILE);
    let line = std::fs::read_to_string(&file).unwrap().lines().next().unwrap().to_string();
    let turns = episodes_file::parse_line(&file, 1, &line).unwrap();
    assert_eq!(turns[0].0, Role::System);
    let rollout = short_run(None, 1).rollout;
    assert_eq!(rollout.system_prompt, SystemPrompt::Omit);
    let tok = ByteTokenizer;
    let seq = episodes_file::sequence(&turns, &tok, &rollout).unwrap();
    assert_eq!((seq.ids.len(), seq.logprobs.len()), (seq.loss_mask.len(), seq.ids.len()));
    // The trained tokens, decoded, are the assistant messages each closed by the end-of-turn
    // marker; the system turn is left out as rollout.system_prompt = "omit" says.
    let end = tok.chat_template().end_of_turn;
    let mut want = Vec::new();
    for (role, text) in &turns {
        if *role == Role::Agent {
            want.extend(tok.encode(text).unwrap());
            want.extend(&end);
        }
    }
    let trained: Vec<u32> = seq.ids.iter().zip(&seq.loss_mask).filter(|(_, m)| **m).map(|(i, _)| *i).collect();
    assert_eq!(trained, want);
    let system = &turns[0].1;
    assert!(!tok.decode(&seq.ids, true).contains(system.as_str()), "the system turn is omitted");
    let full =
        episodes_file::sequence(&turns, &tok, &episode::RolloutConfig { system_prompt: SystemPrompt::Full, ..rollout })
            .unwrap();
    assert!(tok.decode(&full.ids, true).contains(system.as_str()));
}

#[test]
fn every_malformed_line_is_refused_with_file_line_and_field() {
    let good = r#"{"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<answer>4</answer>"}]}"#;
    let cases = [
        ("", "(line)", "empty"),
        ("not json", "(line)", "not a JSON object"),
        (r#"{"msgs": []}"#, "msgs", "unknown field"),
        (r#"{"messages": []}"#, "messages", "non-empty list"),
        (r#"{"messages": [{"role": "user", "content": "q"}]}"#, "messages", "no assistant message"),
        (
            r#"{"messages": [{"role": "bot", "content": "q"}]}"#,
            "messages[0].role",
            "one of system, user, assistant, tool",
        ),
        (r#"{"messages": [{"role": "assistant"}]}"#, "messages[0].content", "expected a string"),
        (r#"{"messages": [{"role": "assistant", "content": " "}]}"#, "messages[0].content", "empty"),
        (
            r#"{"messages": [{"role": "assistant", "content": "", "tool_calls": []}]}"#,
            "messages[0].tool_calls",
            "<tool>name(arguments)</tool>",
        ),
        (r#"{"messages": [{"role": "assistant", "content": "a", "weight": 1}]}"#, "messages[0].weight", "unknown key"),
        (
            &format!(
                r#"{{"messages": [{{"role": "user", "content": "{}"}}, {{"role": "assistant", "content": "a"}}]}}"#,
                "x".repeat(3000)
            ),
            "messages",
            "more than max_context_tokens",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let rollout = short_run(None, 1).rollout;
    for (bad, field, says) in cases {
        let path = dir.path().join("demos.jsonl");
        std::fs::write(&path, format!("{good}\n{bad}\n")).unwrap();
        let e = episodes_file::load(&path, &ByteTokenizer, &rollout).unwrap_err().to_string();
        let head = format!("episodes file {}, line 2, field `{field}`: ", path.display());
        assert!(e.starts_with(&head) && e.contains(says), "{bad}: {e}");
    }
    let path = dir.path().join("empty.jsonl");
    std::fs::write(&path, "").unwrap();
    assert!(episodes_file::load(&path, &ByteTokenizer, &rollout).unwrap_err().to_string().contains("holds no chats"));
    let missing = dir.path().join("missing.jsonl");
    assert!(episodes_file::load(&missing, &ByteTokenizer, &rollout).unwrap_err().to_string().contains("missing.jsonl"));
    // The run refuses to start on a bad file: nothing is trained.
    std::fs::write(&path, format!("{good}\n{{\"messages\": 1}}\n")).unwrap();
    let e = sft::train(&short_run(Some(path.clone()), 5), |_| panic!("no update may run")).unwrap_err();
    assert!(e.to_string().contains("line 2, field `messages`"), "{e}");
}

#[test]
fn a_short_sft_on_the_sample_demonstrations_lowers_the_loss() {
    install_sample();
    let cfg = short_run(Some(examples().join(sample::EPISODES_FILE)), 60);
    let mut losses = Vec::new();
    let (_, report) = sft::train(&cfg, |p| losses.push(p.loss)).unwrap();
    assert_eq!(report.steps, 60);
    let first: f64 = losses[..5].iter().sum::<f64>() / 5.0;
    let last: f64 = losses[losses.len() - 5..].iter().sum::<f64>() / 5.0;
    assert!(first > 4.0 && last < first / 2.0, "loss {first:.2} → {last:.2}");
    assert_eq!(report.final_eval[0].report.episodes, 4, "evaluated on the sample's held-out tasks");
}

#[test]
fn a_short_sft_on_the_sample_datasets_reference_episodes_trains() {
    install_sample();
    let mut losses = Vec::new();
    let (_, report) = sft::train(&short_run(None, 30), |p| losses.push(p.loss)).unwrap();
    assert_eq!(report.steps, 30);
    assert!(losses.iter().all(|l| l.is_finite()) && losses[29] < losses[0], "{losses:?}");
}

#[test]
fn reference_episodes_of_a_regex_dataset_are_refused() {
    // Its own process (nextest): this installs a different dataset from the other tests'.
    if std::env::var_os("NEXTEST").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("re.jsonl");
    std::fs::write(&file, "{\"id\": \"a\", \"question\": \"Capital of France?\", \"answer\": \"(?i)paris\"}\n")
        .unwrap();
    let table: toml::Table = toml::from_str(&format!(
        "files = [{{ path = {:?}, match = \"regex\" }}]\neval_percent = 0",
        file.display().to_string()
    ))
    .unwrap();
    dataset::load_config(&table).unwrap().unwrap();
    let e = short_run(None, 1).validate().unwrap_err().to_string();
    assert!(e.contains("sft.family") && e.contains("match = \"regex\""), "{e}");
    assert!(short_run(Some(file), 1).validate().is_ok(), "an episodes file needs no reference answers");
}
