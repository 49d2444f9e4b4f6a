//! A model's own chat template: the Jinja source a Hugging Face model directory carries
//! (`chat_template.jinja`, or `tokenizer_config.json`'s `chat_template`), rendered with
//! minijinja as transformers' `apply_chat_template` renders it with Jinja2.
//!
//! What transformers sets up, and this module mirrors:
//! - `trim_blocks` and `lstrip_blocks` on, the template's final newline dropped;
//! - the context: `messages` (each `{role, content}`), `add_generation_prompt`, `bos_token`,
//!   `eos_token` (and `pad_token`, `unk_token` where the config names them);
//! - `raise_exception(message)` fails the render with the template's message;
//! - `tojson` is Python's `json.dumps(x, ensure_ascii=False)` (`", "` and `": "` separators,
//!   `indent=` honoured), not minijinja's HTML-safe one;
//! - Python's string and dict methods (`startswith`, `split`, `strip`, `items`, …) through
//!   minijinja-contrib's pycompat.
//!
//! Checked against `apply_chat_template` on SmolLM2's, Qwen2.5's and Qwen3's templates in
//! policy/tests/suite/chat_templates.rs.

use std::path::Path;

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{context, Environment, Error, ErrorKind};

use crate::error::{PolicyError, Result};

/// The name the template is stored under in its environment.
const NAME: &str = "chat_template";

/// One message as a chat template sees it, with OpenAI's role names (`system`, `user`,
/// `assistant`, `tool`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The message's text.
    pub content: String,
}

impl ChatMessage {
    /// A message of `role` with `content`.
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.to_string(), content: content.to_string() }
    }
}

/// A compiled chat template and the special tokens its context names.
pub struct JinjaTemplate {
    env: Environment<'static>,
    source: String,
    tokens: Vec<(&'static str, String)>,
}

impl std::fmt::Debug for JinjaTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JinjaTemplate").field("bytes", &self.source.len()).field("tokens", &self.tokens).finish()
    }
}

impl JinjaTemplate {
    /// Compiles `source`; `tokens` are the special tokens' names and text put in the context
    /// (`("bos_token", "<s>")`, …). A syntax error names the line.
    pub fn new(source: &str, tokens: Vec<(&'static str, String)>) -> Result<Self> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| PolicyError::ChatTemplate(format!("cannot configure the template syntax: {e}")))?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| PolicyError::ChatTemplate(format!("the chat template does not compile: {}", describe(&e))))?;
        Ok(Self { env, source: source.to_string(), tokens })
    }

    /// The chat template of a model directory, if it has one: `chat_template.jinja` (as
    /// transformers 5 saves it), else `tokenizer_config.json`'s `chat_template` (a string, or
    /// a list of named templates of which `default` is taken). Special tokens come from
    /// `tokenizer_config.json`.
    pub fn from_dir(dir: &Path) -> Result<Option<Self>> {
        let config_path = dir.join("tokenizer_config.json");
        let config: serde_json::Value = match std::fs::read_to_string(&config_path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| PolicyError::ChatTemplate(format!("{} is not JSON: {e}", config_path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::Value::Null,
            Err(e) => return Err(PolicyError::io(&config_path, e)),
        };
        let jinja_path = dir.join("chat_template.jinja");
        let source = match std::fs::read_to_string(&jinja_path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => template_in_config(&config)?,
            Err(e) => return Err(PolicyError::io(&jinja_path, e)),
        };
        let Some(source) = source else { return Ok(None) };
        let tokens = ["bos_token", "eos_token", "pad_token", "unk_token"]
            .into_iter()
            .filter_map(|name| token_text(&config[name]).map(|t| (name, t)))
            .collect();
        Self::new(&source, tokens).map(Some)
    }

    /// The template's source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The text of a special token the context names (`bos_token`, `eos_token`, …).
    pub fn token(&self, name: &str) -> Option<&str> {
        self.tokens.iter().find(|(n, _)| *n == name).map(|(_, t)| t.as_str())
    }

    /// The conversation as the model reads it; with `add_generation_prompt`, followed by what
    /// opens the assistant's reply.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        let messages: Vec<Value> =
            messages.iter().map(|m| context! { role => m.role.as_str(), content => m.content.as_str() }).collect();
        let mut pairs =
            vec![("messages", Value::from(messages)), ("add_generation_prompt", Value::from(add_generation_prompt))];
        pairs.extend(self.tokens.iter().map(|(name, text)| (*name, Value::from(text.as_str()))));
        let ctx = Value::from_pairs(pairs);
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| PolicyError::ChatTemplate(format!("the chat template is missing: {e}")))?;
        template.render(ctx).map_err(|e| PolicyError::ChatTemplate(format!("cannot render: {}", describe(&e))))
    }
}

/// `tokenizer_config.json`'s `chat_template`: a string, or the `default` of a list of
/// `{name, template}`.
fn template_in_config(config: &serde_json::Value) -> Result<Option<String>> {
    match &config["chat_template"] {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s.clone())),
        serde_json::Value::Array(named) => named
            .iter()
            .find(|t| t["name"] == "default")
            .and_then(|t| t["template"].as_str())
            .map(|s| Some(s.to_string()))
            .ok_or_else(|| {
                PolicyError::ChatTemplate("tokenizer_config.json's chat_template list has no `default` entry".into())
            }),
        other => Err(PolicyError::ChatTemplate(format!(
            "tokenizer_config.json's chat_template must be a string or a list, got {other}"
        ))),
    }
}

/// A special token as `tokenizer_config.json` writes it: its text, or `{"content": text, …}`.
fn token_text(v: &serde_json::Value) -> Option<String> {
    v.as_str().or_else(|| v["content"].as_str()).map(str::to_string)
}

/// A render or compile error with its template line.
fn describe(e: &Error) -> String {
    match e.line() {
        Some(line) => format!("{e} (template line {line})"),
        None => e.to_string(),
    }
}

/// The `raise_exception(message)` transformers gives templates.
fn raise_exception(message: String) -> std::result::Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, format!("the template raised: {message}")))
}

/// Python's `json.dumps(value, ensure_ascii=False, indent=indent)`, which transformers installs
/// as the `tojson` filter.
fn tojson(value: &Value, kwargs: Kwargs) -> std::result::Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    write_json(value, indent, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

fn write_json(value: &Value, indent: Option<usize>, depth: usize, out: &mut String) -> std::result::Result<(), Error> {
    let newline = |out: &mut String, depth: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * depth));
        }
    };
    let (open, close, is_map) = match value.kind() {
        ValueKind::Undefined | ValueKind::None => {
            out.push_str("null");
            return Ok(());
        }
        ValueKind::Bool => {
            out.push_str(if value.is_true() { "true" } else { "false" });
            return Ok(());
        }
        ValueKind::Number => {
            out.push_str(&python_number(value));
            return Ok(());
        }
        ValueKind::String => {
            write_json_string(value.as_str().unwrap_or_default(), out);
            return Ok(());
        }
        ValueKind::Map => ('{', '}', true),
        ValueKind::Seq | ValueKind::Iterable => ('[', ']', false),
        other => {
            return Err(Error::new(ErrorKind::InvalidOperation, format!("tojson cannot write a {other} value")));
        }
    };
    out.push(open);
    let items: Vec<Value> = value.try_iter()?.collect();
    for (i, item) in items.iter().enumerate() {
        out.push_str(if i == 0 {
            ""
        } else if indent.is_some() {
            ","
        } else {
            ", "
        });
        newline(out, depth + 1);
        if is_map {
            write_json_string(&item.to_string(), out);
            out.push_str(": ");
            write_json(&value.get_item(item)?, indent, depth + 1, out)?;
        } else {
            write_json(item, indent, depth + 1, out)?;
        }
    }
    if !items.is_empty() {
        newline(out, depth);
    }
    out.push(close);
    Ok(())
}

/// A number as Python prints it in JSON: integers bare, floats with a fractional part.
fn python_number(value: &Value) -> String {
    match value.as_i64() {
        Some(i) if !value.to_string().contains('.') => i.to_string(),
        _ => {
            let f = f64::try_from(value.clone()).unwrap_or(f64::NAN);
            if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 {
                format!("{f:.1}")
            } else {
                f.to_string()
            }
        }
    }
}

/// A JSON string with `ensure_ascii=False`: only `"`, `\` and control characters escaped.
fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(source: &str, messages: &[ChatMessage], gen: bool) -> String {
        JinjaTemplate::new(source, vec![("bos_token", "<s>".into())]).unwrap().render(messages, gen).unwrap()
    }

    #[test]
    fn whitespace_control_and_the_context_follow_transformers() {
        // trim_blocks eats the newline after a block tag; lstrip_blocks the indentation before
        // one; the final newline of the template is dropped.
        let source = "{{ bos_token }}\n{% for m in messages %}\n  {% if m.role == 'user' %}\nU:{{ m['content'] }}\n  {% endif %}\n{% endfor %}\n{% if add_generation_prompt %}A:{% endif %}\n";
        let msgs = [ChatMessage::new("user", "hi"), ChatMessage::new("user", "yo")];
        assert_eq!(render(source, &msgs, true), "<s>\nU:hi\nU:yo\nA:");
        assert_eq!(render(source, &msgs, false), "<s>\nU:hi\nU:yo\n");
    }

    #[test]
    fn python_methods_and_raise_exception_work() {
        let source = "{% for m in messages %}{% if m.content.startswith('x') %}{{ m.content.split('|')[-1].strip() }}{% else %}{{ raise_exception('bad ' + m.role) }}{% endif %}{% endfor %}";
        assert_eq!(render(source, &[ChatMessage::new("user", "x| tail ")], false), "tail");
        let err = JinjaTemplate::new(source, vec![]).unwrap().render(&[ChatMessage::new("user", "y")], false);
        let text = err.unwrap_err().to_string();
        assert!(text.contains("the template raised: bad user"), "{text}");
    }

    #[test]
    fn tojson_is_python_json_dumps() {
        let t = JinjaTemplate::new("{{ x | tojson }}|{{ x | tojson(indent=2) }}", vec![]).unwrap();
        let env = &t.env;
        let x = context! { name => "calc", n => 3, f => 0.5, ok => true, none => (), list => vec!["é\"\n", "<b>"] };
        let out = env.get_template(NAME).unwrap().render(context! { x => x }).unwrap();
        let (flat, indented) = out.split_once('|').unwrap();
        // json.dumps({"name": "calc", "n": 3, "f": 0.5, "ok": True, "none": None,
        //             "list": ["é\"\n", "<b>"]}, ensure_ascii=False)
        assert_eq!(flat, r#"{"name": "calc", "n": 3, "f": 0.5, "ok": true, "none": null, "list": ["é\"\n", "<b>"]}"#);
        assert_eq!(
            indented,
            "{\n  \"name\": \"calc\",\n  \"n\": 3,\n  \"f\": 0.5,\n  \"ok\": true,\n  \"none\": null,\n  \"list\": [\n    \"é\\\"\\n\",\n    \"<b>\"\n  ]\n}"
        );
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let e = JinjaTemplate::new("{% for m in messages %}", vec![]).unwrap_err().to_string();
        assert!(e.contains("does not compile") && e.contains("line 1"), "{e}");
        let bad = serde_json::json!({ "chat_template": [{ "name": "tool_use", "template": "x" }] });
        let e = template_in_config(&bad).unwrap_err().to_string();
        assert!(e.contains("no `default` entry"), "{e}");
        assert_eq!(
            token_text(&serde_json::json!({ "content": "<|im_end|>", "special": true })).as_deref(),
            Some("<|im_end|>")
        );
    }
}
