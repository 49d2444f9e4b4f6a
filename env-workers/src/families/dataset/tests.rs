//! The dataset family's episodes, verifier and catalog checks, on small in-memory files.

use protocol::wire::{FindingKind, TaskFamily, TaskSpec};

use super::*;
use crate::env::Source;

fn catalog(lines: &str, mode: MatchMode, eval_percent: u32) -> Result<Catalog, DatasetError> {
    Catalog::from_texts(&[("t.jsonl".to_string(), lines.to_string(), mode)], eval_percent)
}

fn env(line: &str, mode: MatchMode) -> DatasetEnv {
    let c = catalog(line, mode, 0).unwrap();
    let spec = TaskSpec { family: TaskFamily::Dataset, seed: 3, difficulty: 1 };
    DatasetEnv::for_task(spec, c.task(3, 1).unwrap().clone())
}

const CALC_TASK: &str =
    r#"{"id": "q", "question": "Ann has 6 boxes of 8 pens. How many pens?", "answer": "48", "tools": ["calc"]}"#;

#[test]
fn an_episode_with_a_tool_and_a_numeric_answer() {
    let mut e = env(CALC_TASK, MatchMode::Numeric);
    assert_eq!(e.prompt().user, "Ann has 6 boxes of 8 pens. How many pens?");
    assert!(e.prompt().system.contains("calc(expression)"), "{}", e.prompt().system);
    let o = e.step("<tool>calc(6 * 8)</tool>");
    assert_eq!((o.text.as_str(), o.from, o.flaw.is_none()), ("48", Source::Tool, true));
    assert!(e.step("hello?").flaw.unwrap().contains("no user"));
    assert!(e.step("<tool>search(pens)</tool>").text.contains("unknown tool `search`; the tools here: <tool>calc("));
    assert!(e.step("<tool>calc(6 *)</tool>").text.starts_with("calc error: "));
    assert!(e.step("<answer>1").text.starts_with("format error: "));
    let end = e.step("<answer>96/2</answer>").end.unwrap();
    assert_eq!((end.reward, end.success), (1.0, true));
    assert!(e.step("<answer>48</answer>").flaw.is_some(), "nothing is accepted after the end");
    let wrong = env(CALC_TASK, MatchMode::Numeric).step("<answer>47</answer>").end.unwrap();
    assert_eq!((wrong.reward, wrong.success), (0.0, false));
    assert!(!wrong.summary.contains("48"), "the truth is not revealed: {}", wrong.summary);
}

#[test]
fn a_task_without_tools_offers_none() {
    let mut e = env(r#"{"id": "c", "question": "Capital of France?", "answer": "Paris"}"#, MatchMode::Exact);
    assert!(e.prompt().system.contains("There are no tools"));
    assert!(e.step("<tool>calc(1)</tool>").text.contains("this task offers no tools"));
    assert_eq!(e.step("<answer>paris.</answer>").end.unwrap().reward, 1.0);
    assert_eq!(e.reference(), ["<answer>Paris</answer>"]);
    let re = env(r#"{"id": "r", "question": "Capital of France?", "answer": "(?i)paris"}"#, MatchMode::Regex);
    assert!(re.reference().is_empty(), "a pattern names no one answer");
}

#[test]
fn the_verifier_reports_protocol_tool_and_answer_flaws() {
    let e = env(CALC_TASK, MatchMode::Numeric);
    let kinds = |msgs: &[&str]| -> Vec<(usize, FindingKind)> {
        let msgs: Vec<String> = msgs.iter().map(|m| m.to_string()).collect();
        e.verify(&msgs).into_iter().map(|f| (f.step, f.kind)).collect()
    };
    assert!(kinds(&e.reference().iter().map(String::as_str).collect::<Vec<_>>()).is_empty());
    assert!(kinds(&["<tool>calc(6 * 8)</tool>", "<answer>48</answer>"]).is_empty());
    assert_eq!(
        kinds(&[
            "hi",
            "<tool>calc(6*8)</tool>",
            "<tool>calc(6 * 8)</tool>",
            "<tool>calc(6/0)</tool>",
            "<answer>47</answer>",
            "x"
        ]),
        [
            (0, FindingKind::WrongTool),
            (2, FindingKind::RedundantCall),
            (3, FindingKind::WrongArguments),
            (4, FindingKind::WrongAnswer),
            (5, FindingKind::FormatError),
        ]
    );
    assert_eq!(
        kinds(&["<tool>search(x)</tool>", "<answer>"]),
        [(0, FindingKind::WrongTool), (1, FindingKind::FormatError), (1, FindingKind::GaveUpEarly)]
    );
    assert_eq!(kinds(&[]), [(0, FindingKind::GaveUpEarly)]);
}

#[test]
fn the_reference_judge_scores_dataset_episodes() {
    let e = env(CALC_TASK, MatchMode::Numeric);
    let findings = e.verify(&["<answer>48</answer>".to_string()]);
    assert_eq!(crate::judge::score(true, &findings), 1.0);
    let findings = e.verify(&["<answer>7</answer>".to_string()]);
    assert!(crate::judge::score(false, &findings) < 0.5);
}

#[test]
fn catalogs_refuse_duplicates_empty_files_and_all_held_out() {
    let dup = format!("{CALC_TASK}\n{}\n", CALC_TASK.replace("\"q\"", "\"r\""));
    assert!(catalog(&dup, MatchMode::Numeric, 0).is_ok());
    let e = catalog(&format!("{CALC_TASK}\n{CALC_TASK}\n"), MatchMode::Numeric, 0).unwrap_err().to_string();
    assert_eq!(e, "dataset file t.jsonl, line 2, field `id`: \"q\" is also the id of line 1 of t.jsonl");
    let e = catalog("", MatchMode::Exact, 0).unwrap_err().to_string();
    assert_eq!(e, "dataset file t.jsonl: has no tasks");
    let e = catalog(&format!("{CALC_TASK}\n\n"), MatchMode::Numeric, 0).unwrap_err().to_string();
    assert!(e.starts_with("dataset file t.jsonl, line 2, field `(line)`: the line is empty"), "{e}");
    let held = (0..).map(|i| format!("x{i}")).find(|id| Split::of_id(id, 90) == Split::HeldOut).unwrap();
    let one = format!("{{\"id\": \"{held}\", \"question\": \"q\", \"answer\": \"1\"}}");
    let e = catalog(&one, MatchMode::Exact, 90).unwrap_err().to_string();
    assert!(e.contains("every one of its 1 tasks is held out at eval_percent = 90; none is left to train on"), "{e}");
}

#[test]
fn seeds_draw_from_their_split_and_difficulty() {
    let lines: String = (0..200)
        .map(|i| {
            format!(
                "{{\"id\": \"t{i}\", \"question\": \"q{i}\", \"answer\": \"{i}\", \"difficulty\": {}}}\n",
                1 + i % 2
            )
        })
        .collect();
    let c = catalog(&lines, MatchMode::Numeric, 20).unwrap();
    for seed in (0..500).chain(HELD_OUT_FROM..HELD_OUT_FROM + 500) {
        for difficulty in [1, 2] {
            let t = c.task(seed, difficulty).unwrap();
            assert_eq!(t.difficulty, difficulty);
            assert_eq!(Split::of_id(&t.id, 20), Split::of_seed(seed), "seed {seed} plays {}", t.id);
        }
    }
    assert_eq!(c.task(1, 3).unwrap_err(), DatasetError::NoTasks { split: "training", difficulty: 3 });
    let held = c.counts()[&(Split::HeldOut, 1)];
    let evaluated: std::collections::HashSet<&str> =
        (0..held as u64).map(|i| c.task(HELD_OUT_FROM + i, 1).unwrap().id.as_str()).collect();
    assert_eq!(evaluated.len(), held, "evaluating |pool| seeds plays each held-out task once");
}

#[test]
fn config_keys_are_checked_and_named() {
    let table = |text: &str| -> toml::Table { toml::from_str(text).unwrap() };
    let ok = DatasetConfig::from_table(&table("files = [{ path = \"a.jsonl\", match = \"regex\" }]\neval_percent = 5"))
        .unwrap();
    assert_eq!(ok.files[0].mode, MatchMode::Regex);
    let e = DatasetConfig::from_table(&table("files = [{ path = \"a\", match = \"fuzzy\" }]\neval_percent = 5"));
    assert!(e.unwrap_err().to_string().starts_with("config key `dataset.files[0].match`: unknown variant `fuzzy`"));
    let e = DatasetConfig::from_table(&table("files = [{ path = \"a\" }]\neval_percent = 5")).unwrap_err();
    assert!(e.to_string().contains("missing field `match`"), "{e}");
    let e = DatasetConfig::from_table(&table("files = []\neval_percent = 95")).unwrap_err();
    assert_eq!(e.to_string(), "config key `dataset.eval_percent`: expected 0..=90, found 95");
    let e = DatasetConfig::from_table(&table("files = []\neval_percent = 5\nsplit = 3")).unwrap_err();
    assert!(e.to_string().contains("unknown field `split`"), "{e}");
    let missing = std::env::temp_dir().join("reagent-no-such-dataset.jsonl");
    let cfg = DatasetConfig {
        files: vec![FileConfig { path: missing.display().to_string(), mode: MatchMode::Exact }],
        eval_percent: 0,
    };
    assert!(Catalog::load(&cfg).unwrap_err().to_string().starts_with(&format!("dataset file {}: ", missing.display())));
}

#[test]
fn the_sample_dataset_loads_and_its_episodes_solve_their_tasks() {
    let c = catalog(&sample::tasks().unwrap(), MatchMode::Numeric, sample::SAMPLE_EVAL_PERCENT).unwrap();
    assert_eq!(c.tasks().len() as u64, sample::SAMPLE_TASKS);
    let episodes = sample::episodes(sample::SAMPLE_EVAL_PERCENT).unwrap();
    let held = c.tasks().iter().filter(|t| Split::of_id(&t.id, sample::SAMPLE_EVAL_PERCENT) == Split::HeldOut).count();
    assert!(held > 0, "the sample has held-out tasks");
    assert_eq!(episodes.lines().count(), c.tasks().len() - held, "held-out tasks have no episodes");
    for line in episodes.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let msgs = v["messages"].as_array().unwrap();
        let question = msgs[1]["content"].as_str().unwrap();
        let task = c.tasks().iter().find(|t| t.question == question).unwrap();
        let mut e =
            DatasetEnv::for_task(TaskSpec { family: TaskFamily::Dataset, seed: 0, difficulty: 1 }, task.clone());
        let mut reward = None;
        for (i, m) in msgs.iter().enumerate().skip(2) {
            let text = m["content"].as_str().unwrap();
            if m["role"] == "assistant" {
                let o = e.step(text);
                assert!(o.flaw.is_none(), "{}: {:?}", task.id, o.text);
                if let Some(next) = msgs.get(i + 1) {
                    assert_eq!(next["content"].as_str().unwrap(), o.text, "{}: the tool results are real", task.id);
                }
                reward = o.end.map(|end| end.reward);
            }
        }
        assert_eq!(reward, Some(1.0), "{}", task.id);
    }
}
