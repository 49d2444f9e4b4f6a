//! One task of a dataset file and how one JSON line becomes one: every field checked, every
//! error naming the file, the line and the field.
//!
//! ```text
//!  {"id": "q17", "question": "…", "answer": "42", "tools": ["calc"], "difficulty": 2}
//!   id          non-empty string, or an integer (unique across every file)
//!   question    non-empty string: the user's message that opens the episode
//!   answer      string or number: the truth, under the file's match mode
//!   tools       optional list of built-in tool names (default: none)
//!   difficulty  optional 1, 2 or 3 (default 1): actor.difficulty draws among these
//! ```

use serde_json::{Map, Value};

use super::error::DatasetError;
use super::matching::{Answer, MatchMode};
use super::tools::Tool;
use crate::registry::DIFFICULTIES;

/// The fields a line may have.
pub const FIELDS: [&str; 5] = ["id", "question", "answer", "tools", "difficulty"];

/// One task.
#[derive(Debug, Clone)]
pub struct Task {
    /// Its id (unique in the dataset; decides its split).
    pub id: String,
    /// The question, the episode's first user message.
    pub question: String,
    /// The expected answer as written in the file.
    pub answer_text: String,
    /// The expected answer, ready to compare.
    pub answer: Answer,
    /// The tools the episode offers.
    pub tools: Vec<Tool>,
    /// 1, 2 or 3.
    pub difficulty: u32,
}

/// Where a line is, for errors.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    /// The file as configured.
    pub file: &'a str,
    /// The 1-based line number.
    pub line: usize,
}

impl At<'_> {
    fn err(&self, field: &str, detail: impl Into<String>) -> DatasetError {
        DatasetError::line(self.file, self.line, field, detail)
    }
}

fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

fn text(at: At<'_>, obj: &Map<String, Value>, field: &str, numbers_too: bool) -> Result<String, DatasetError> {
    let kinds = if numbers_too { "a non-empty string or a number" } else { "a non-empty string" };
    match obj.get(field) {
        None => Err(at.err(field, "missing (every line needs id, question and answer)")),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(Value::Number(n)) if numbers_too => Ok(n.to_string()),
        Some(other) => Err(at.err(field, format!("expected {kinds}, found {}", shown(other)))),
    }
}

fn tools(at: At<'_>, value: Option<&Value>) -> Result<Vec<Tool>, DatasetError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(at.err("tools", format!("expected a list of tool names, found {}", shown(other)))),
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let tool = item.as_str().and_then(Tool::from_name).ok_or_else(|| {
            at.err("tools", format!("{} is not a built-in tool (the built-in tools: {})", shown(item), Tool::names()))
        })?;
        if out.contains(&tool) {
            return Err(at.err("tools", format!("{:?} is listed twice", tool.name())));
        }
        out.push(tool);
    }
    Ok(out)
}

fn difficulty(at: At<'_>, value: Option<&Value>) -> Result<u32, DatasetError> {
    match value {
        None | Some(Value::Null) => Ok(1),
        Some(v) => v
            .as_u64()
            .and_then(|d| u32::try_from(d).ok())
            .filter(|d| DIFFICULTIES.contains(d))
            .ok_or_else(|| at.err("difficulty", format!("expected 1, 2 or 3, found {}", shown(v)))),
    }
}

/// Parses line `at` of a file whose answers compare under `mode`.
pub fn parse_line(at: At<'_>, line: &str, mode: MatchMode) -> Result<Task, DatasetError> {
    if line.trim().is_empty() {
        return Err(at.err("(line)", "the line is empty (one JSON object per line; remove blank lines)"));
    }
    let obj: Map<String, Value> =
        serde_json::from_str(line).map_err(|e| at.err("(line)", format!("not a JSON object: {e}")))?;
    if let Some(unknown) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(at.err(unknown, format!("unknown field (the fields: {})", FIELDS.join(", "))));
    }
    let id = match obj.get("id") {
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => n.to_string(),
        _ => text(at, &obj, "id", false)?,
    };
    let question = text(at, &obj, "question", false)?;
    let answer_text = text(at, &obj, "answer", true)?;
    let answer = Answer::parse(mode, &answer_text).map_err(|why| at.err("answer", why))?;
    Ok(Task {
        id,
        question,
        answer_text,
        answer,
        tools: tools(at, obj.get("tools"))?,
        difficulty: difficulty(at, obj.get("difficulty"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: At<'static> = At { file: "q.jsonl", line: 3 };

    fn err(line: &str, mode: MatchMode) -> String {
        parse_line(AT, line, mode).unwrap_err().to_string()
    }

    #[test]
    fn a_full_line_and_a_minimal_one() {
        let t = parse_line(
            AT,
            r#"{"id": "q1", "question": " 3 + 4? ", "answer": 7, "tools": ["calc"], "difficulty": 2}"#,
            MatchMode::Numeric,
        )
        .unwrap();
        assert_eq!((t.id.as_str(), t.question.as_str(), t.answer_text.as_str()), ("q1", "3 + 4?", "7"));
        assert_eq!((t.tools, t.difficulty), (vec![Tool::Calc], 2));
        assert!(t.answer.accepts("14/2"));
        let t = parse_line(AT, r#"{"id": 17, "question": "Capital of France?", "answer": "Paris"}"#, MatchMode::Exact)
            .unwrap();
        assert_eq!((t.id.as_str(), t.tools.len(), t.difficulty), ("17", 0, 1));
    }

    #[test]
    fn every_error_names_file_line_and_field() {
        let n = MatchMode::Numeric;
        let cases = [
            ("", "(line)", "empty"),
            ("[1, 2]", "(line)", "not a JSON object"),
            (r#"{"id": "a", "question": "q""#, "(line)", "not a JSON object"),
            (r#"{"question": "q", "answer": "1"}"#, "id", "missing"),
            (r#"{"id": "", "question": "q", "answer": "1"}"#, "id", "non-empty string"),
            (r#"{"id": 1.5, "question": "q", "answer": "1"}"#, "id", "found 1.5"),
            (r#"{"id": "a", "answer": "1"}"#, "question", "missing"),
            (r#"{"id": "a", "question": ["q"], "answer": "1"}"#, "question", "found [\"q\"]"),
            (r#"{"id": "a", "question": "q"}"#, "answer", "missing"),
            (r#"{"id": "a", "question": "q", "answer": "seven"}"#, "answer", "not a number"),
            (r#"{"id": "a", "question": "q", "answer": "1", "tools": "calc"}"#, "tools", "list of tool names"),
            (r#"{"id": "a", "question": "q", "answer": "1", "tools": ["search"]}"#, "tools", "not a built-in tool"),
            (r#"{"id": "a", "question": "q", "answer": "1", "tools": ["calc", "calc"]}"#, "tools", "twice"),
            (r#"{"id": "a", "question": "q", "answer": "1", "difficulty": 4}"#, "difficulty", "found 4"),
            (r#"{"id": "a", "question": "q", "answer": "1", "difficulty": "2"}"#, "difficulty", "found \"2\""),
            (r#"{"id": "a", "question": "q", "answer": "1", "level": 2}"#, "level", "unknown field"),
        ];
        for (line, field, says) in cases {
            let e = err(line, n);
            let head = format!("dataset file q.jsonl, line 3, field `{field}`: ");
            assert!(e.starts_with(&head) && e.contains(says), "{line}: {e}");
        }
        assert!(err(r#"{"id": "a", "question": "q", "answer": "(x"}"#, MatchMode::Regex).contains("regular expression"));
    }
}
