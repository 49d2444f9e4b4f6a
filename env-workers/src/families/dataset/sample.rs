//! The sample dataset the project writes itself (no download): GSM8K-style word problems from
//! the math family's generator, as a dataset file, and reference episodes of its training tasks
//! as chat messages in the OpenAI format (what `reagent sft --episodes` reads).
//!
//! ```text
//!  cargo run -p env-workers --example dataset_sample [DIR]      (DIR: examples/dataset)
//!   ─► DIR/sample.jsonl            {"id":"sample-001","question":"…","answer":"51","tools":["calc"],"difficulty":1}
//!   ─► DIR/sample_episodes.jsonl   {"messages":[{"role":"system",…},{"role":"user",…},
//!                                   {"role":"assistant","content":"<tool>calc(12 + 5)</tool>"},
//!                                   {"role":"tool","content":"17"}, …, {"role":"assistant","content":"<answer>51</answer>"}]}
//! ```
//!
//! The committed copies in `examples/dataset/` are checked against these functions by a test,
//! so they are what this code writes. Load the tasks with `match = "numeric"`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::split::Split;
use super::tools::Tool;
use crate::families::math::generate;

/// Tasks in the sample.
pub const SAMPLE_TASKS: u64 = 60;

/// The `eval_percent` the sample's episodes leave out (the default of `[dataset]`).
pub const SAMPLE_EVAL_PERCENT: u32 = 10;

/// The file names written by [`write`].
pub const TASKS_FILE: &str = "sample.jsonl";
/// See [`TASKS_FILE`].
pub const EPISODES_FILE: &str = "sample_episodes.jsonl";

/// One line of the tasks file, fields in the documented order.
#[derive(Serialize)]
struct TaskLine<'a> {
    id: String,
    question: &'a str,
    answer: String,
    tools: [&'a str; 1],
    difficulty: u32,
}

/// One chat message in the OpenAI format.
#[derive(Serialize)]
struct Message {
    role: &'static str,
    content: String,
}

/// One line of the episodes file.
#[derive(Serialize)]
struct Chat {
    messages: Vec<Message>,
}

fn id(i: u64) -> String {
    format!("sample-{i:03}")
}

fn difficulty(i: u64) -> u32 {
    if i % 3 == 2 {
        2
    } else {
        1
    }
}

/// The sample tasks as JSON lines.
pub fn tasks() -> serde_json::Result<String> {
    (1..=SAMPLE_TASKS)
        .map(|i| {
            let t = generate(i, difficulty(i));
            let line = TaskLine {
                id: id(i),
                question: &t.text,
                answer: t.answer.to_string(),
                tools: ["calc"],
                difficulty: difficulty(i),
            };
            serde_json::to_string(&line).map(|l| l + "\n")
        })
        .collect()
}

/// Reference episodes of the sample's training tasks (held-out ones left out, at
/// `eval_percent`), one chat per line.
pub fn episodes(eval_percent: u32) -> serde_json::Result<String> {
    (1..=SAMPLE_TASKS)
        .filter(|&i| Split::of_id(&id(i), eval_percent) == Split::Train)
        .map(|i| {
            let t = generate(i, difficulty(i));
            let say = |role: &'static str, content: String| Message { role, content };
            let mut messages = vec![say("system", super::system_prompt(&[Tool::Calc])), say("user", t.text.clone())];
            for step in &t.steps {
                messages.push(say("assistant", format!("<tool>calc({})</tool>", step.expression)));
                messages.push(say("tool", step.value.to_string()));
            }
            messages.push(say("assistant", format!("<answer>{}</answer>", t.answer)));
            serde_json::to_string(&Chat { messages }).map(|l| l + "\n")
        })
        .collect()
}

/// The `[dataset]` table that loads the sample's tasks at `path` (its [`TASKS_FILE`]), as a
/// job file would write it: `files = [{ path, match = "numeric" }]`, the sample's `eval_percent`.
pub fn table(path: &Path) -> toml::Table {
    let mut file = toml::Table::new();
    file.insert("path".into(), path.display().to_string().into());
    file.insert("match".into(), "numeric".into());
    let mut table = toml::Table::new();
    table.insert("files".into(), toml::Value::Array(vec![toml::Value::Table(file)]));
    table.insert("eval_percent".into(), i64::from(SAMPLE_EVAL_PERCENT).into());
    table
}

/// Writes [`TASKS_FILE`] and [`EPISODES_FILE`] into `dir` (created if missing).
pub fn write(dir: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let (tasks_path, episodes_path) = (dir.join(TASKS_FILE), dir.join(EPISODES_FILE));
    std::fs::write(&tasks_path, tasks()?)?;
    std::fs::write(&episodes_path, episodes(SAMPLE_EVAL_PERCENT)?)?;
    Ok((tasks_path, episodes_path))
}
