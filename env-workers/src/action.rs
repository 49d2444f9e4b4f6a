//! The one action protocol every text family speaks.
//!
//! ```text
//!  <tool>name(arguments)</tool>    call a tool; arguments: a, b  or  key="v", k2=3
//!  <answer>…</answer>              the final answer; ends the episode
//!  anything else                   free text to the user (the simulated user, where there is one)
//! ```
//!
//! Text may surround one tag (reasoning before a call is fine); two action tags in one
//! message, an unclosed tag or an unparsable call is a format error: the agent gets an
//! observation saying what was wrong, never a panic.

use std::fmt;

/// What the agent did in one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A tool call.
    Tool(ToolCall),
    /// The final answer.
    Answer(String),
    /// Free text to the user.
    Say(String),
}

/// A parsed tool call: its name and its raw argument text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// The text between the parentheses, untouched.
    pub raw_args: String,
}

/// One argument of a call: positional or `key=value`; quotes removed and escapes resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// The key, for `key=value` arguments.
    pub key: Option<String>,
    /// The value.
    pub value: String,
}

/// Why a message is not a well-formed action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// More than one action tag.
    #[error("one action per message: found {0} action tags")]
    SeveralActions(usize),
    /// An opening tag without its closing tag.
    #[error("`<{0}>` is not closed by `</{0}>`")]
    Unclosed(&'static str),
    /// A tool call that is not `name(arguments)`.
    #[error("a tool call is written name(arguments), e.g. <tool>calc(2 + 3)</tool>; got {0:?}")]
    BadCall(String),
    /// Arguments that do not parse.
    #[error("bad arguments: {0}")]
    BadArgs(String),
    /// An empty answer.
    #[error("the answer is empty")]
    EmptyAnswer,
}

impl fmt::Display for ToolCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name, self.raw_args)
    }
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

fn between<'a>(msg: &'a str, open: &str, close: &str, tag: &'static str) -> Result<&'a str, FormatError> {
    let start = msg.find(open).map(|i| i + open.len()).ok_or(FormatError::Unclosed(tag))?;
    let len = msg[start..].find(close).ok_or(FormatError::Unclosed(tag))?;
    Ok(&msg[start..start + len])
}

/// Parses one agent message into an action.
pub fn parse(message: &str) -> Result<Action, FormatError> {
    let tools = count(message, "<tool>");
    let answers = count(message, "<answer>");
    if tools + answers > 1 {
        return Err(FormatError::SeveralActions(tools + answers));
    }
    if tools == 1 {
        let inner = between(message, "<tool>", "</tool>", "tool")?.trim();
        return parse_call(inner).map(Action::Tool);
    }
    if answers == 1 {
        let inner = between(message, "<answer>", "</answer>", "answer")?.trim();
        if inner.is_empty() {
            return Err(FormatError::EmptyAnswer);
        }
        return Ok(Action::Answer(inner.to_string()));
    }
    if message.contains("</tool>") {
        return Err(FormatError::Unclosed("tool"));
    }
    if message.contains("</answer>") {
        return Err(FormatError::Unclosed("answer"));
    }
    Ok(Action::Say(message.trim().to_string()))
}

fn parse_call(inner: &str) -> Result<ToolCall, FormatError> {
    let bad = || FormatError::BadCall(inner.chars().take(80).collect());
    let open = inner.find('(').ok_or_else(bad)?;
    if !inner.ends_with(')') {
        return Err(bad());
    }
    let name = inner[..open].trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(bad());
    }
    Ok(ToolCall { name: name.to_string(), raw_args: inner[open + 1..inner.len() - 1].trim().to_string() })
}

/// Splits raw arguments at top-level commas into positional or `key=value` arguments.
/// Values may be double-quoted (with `\"` and `\\` escapes) to hold commas or `=`.
pub fn parse_args(raw: &str) -> Result<Vec<Arg>, FormatError> {
    let mut out = Vec::new();
    if raw.trim().is_empty() {
        return Ok(out);
    }
    let mut parts = Vec::new();
    let (mut cur, mut in_quotes, mut escaped, mut depth) = (String::new(), false, false, 0i32);
    for c in raw.chars() {
        match c {
            _ if escaped => {
                cur.push(c);
                escaped = false;
                continue;
            }
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '(' | '[' if !in_quotes => depth += 1,
            ')' | ']' if !in_quotes => depth -= 1,
            ',' if !in_quotes && depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        if !(c == '\\' && in_quotes) {
            cur.push(c);
        }
    }
    if in_quotes {
        return Err(FormatError::BadArgs("unterminated quote".into()));
    }
    parts.push(cur);
    for p in parts {
        let p = p.trim();
        if p.is_empty() {
            return Err(FormatError::BadArgs("empty argument".into()));
        }
        let (key, value) = match split_key(p) {
            Some((k, v)) => (Some(k.to_string()), v),
            None => (None, p),
        };
        out.push(Arg { key, value: unquote(value.trim()) });
    }
    Ok(out)
}

fn split_key(p: &str) -> Option<(&str, &str)> {
    let eq = p.find('=')?;
    let key = p[..eq].trim();
    (!key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !p[..eq].contains('"'))
        .then(|| (key, &p[eq + 1..]))
}

fn unquote(v: &str) -> String {
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        v[1..v.len() - 1].to_string()
    } else {
        v.to_string()
    }
}

/// Looks up an argument by key, or else by position.
pub fn arg<'a>(args: &'a [Arg], key: &str, position: usize) -> Option<&'a str> {
    args.iter()
        .find(|a| a.key.as_deref() == Some(key))
        .or_else(|| args.iter().filter(|a| a.key.is_none()).nth(position))
        .map(|a| a.value.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_kinds() {
        assert_eq!(
            parse("let me add <tool>calc(2 + 3)</tool>").unwrap(),
            Action::Tool(ToolCall { name: "calc".into(), raw_args: "2 + 3".into() })
        );
        assert_eq!(parse("<answer> 5 </answer>").unwrap(), Action::Answer("5".into()));
        assert_eq!(parse("what is your zip code?").unwrap(), Action::Say("what is your zip code?".into()));
    }

    #[test]
    fn format_errors_say_what_is_wrong() {
        assert_eq!(parse("<tool>a()</tool><answer>1</answer>"), Err(FormatError::SeveralActions(2)));
        assert_eq!(parse("<tool>calc(1"), Err(FormatError::Unclosed("tool")));
        assert!(matches!(parse("<tool>calc 1</tool>"), Err(FormatError::BadCall(_))));
        assert_eq!(parse("<answer></answer>"), Err(FormatError::EmptyAnswer));
        assert_eq!(parse("oops</answer>"), Err(FormatError::Unclosed("answer")));
    }

    #[test]
    fn arguments_positional_keyed_and_quoted() {
        let args = parse_args(r#"name="Lee, Ann", zip=12345, "x=\"y\"""#).unwrap();
        assert_eq!(arg(&args, "name", 9), Some("Lee, Ann"));
        assert_eq!(arg(&args, "zip", 9), Some("12345"));
        assert_eq!(arg(&args, "nope", 0), Some("x=\"y\""));
        assert!(parse_args("a,,b").is_err());
        assert!(parse_args("\"open").is_err());
        assert_eq!(parse_args("f(1, 2), 3").unwrap().len(), 2, "commas inside parentheses do not split");
    }
}
