//! The JSON bodies of the HTTP environment protocol (`docs/env-http.openapi.yaml`), and their
//! checked conversion into the wire types the rest of Reagent uses. Anything a server sends is
//! untrusted: sizes, ranges and ids are checked here, and a bad body is an error that says what
//! was wrong.

use protocol::wire::{Finding, FindingKind, Observation, Outcome, Prompt, Source, TaskSpec};
use serde::{Deserialize, Serialize};

/// The protocol name and version a server must report from `GET /v1/info`.
pub const PROTOCOL: &str = "reagent-env/1";

/// Longest session id a server may hand out, in bytes.
pub const MAX_SESSION_ID: usize = 128;

/// `GET /v1/info`: what the server is and which optional calls it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Info {
    /// Must be [`PROTOCOL`].
    pub protocol: String,
    /// The environment's name, for logs.
    #[serde(default)]
    pub name: String,
    /// Whether `POST /v1/verify` is served (the reference judge needs it).
    #[serde(default)]
    pub verify: bool,
    /// Whether `POST /v1/reference` is served.
    #[serde(default)]
    pub reference: bool,
}

/// The task as the server sees it: the seed and difficulty (the family is always `http`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// The seed the server makes the task from.
    pub seed: u64,
    /// The difficulty knob.
    pub difficulty: u32,
}

impl From<TaskSpec> for Task {
    fn from(spec: TaskSpec) -> Self {
        Self { seed: spec.seed, difficulty: spec.difficulty }
    }
}

/// `POST /v1/open` and `POST /v1/reference`.
#[derive(Debug, Serialize)]
pub struct TaskRequest {
    /// The task.
    pub task: Task,
}

/// `POST /v1/open`'s answer.
#[derive(Debug, Deserialize)]
pub struct OpenReply {
    /// The server's session id (1–128 visible ASCII characters).
    pub session: String,
    /// The system prompt: role, tools, action protocol.
    pub system: String,
    /// The first user message: the task.
    pub user: String,
}

impl OpenReply {
    /// The session id (checked) and the prompt.
    pub fn checked(self) -> Result<(String, Prompt), String> {
        let ok =
            (1..=MAX_SESSION_ID).contains(&self.session.len()) && self.session.bytes().all(|b| b.is_ascii_graphic());
        if !ok {
            return Err(format!("session id {:?} is not 1-{MAX_SESSION_ID} visible ASCII characters", self.session));
        }
        Ok((self.session, Prompt { system: self.system, user: self.user }))
    }
}

/// `POST /v1/step` and `POST /v1/close`.
#[derive(Debug, Serialize)]
pub struct StepRequest<'a> {
    /// The server's session id.
    pub session: &'a str,
    /// The agent's message (absent for close).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'a str>,
}

/// Who produced an observation, as the protocol spells it.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Speaker {
    Tool,
    User,
    Env,
}

/// `POST /v1/step`'s answer.
#[derive(Debug, Deserialize)]
pub struct StepReply {
    text: String,
    from: Speaker,
    #[serde(default)]
    flaw: Option<String>,
    #[serde(default)]
    end: Option<End>,
}

#[derive(Debug, Deserialize)]
struct End {
    reward: f32,
    success: bool,
    #[serde(default)]
    summary: String,
}

impl StepReply {
    /// The observation; a reward outside [0, 1] is an error.
    pub fn checked(self) -> Result<Observation, String> {
        let from = match self.from {
            Speaker::Tool => Source::Tool,
            Speaker::User => Source::User,
            Speaker::Env => Source::Env,
        };
        let end = match self.end {
            Some(e) if !(0.0..=1.0).contains(&e.reward) => {
                return Err(format!("reward {} is outside [0, 1]", e.reward));
            }
            Some(e) => Some(Outcome { reward: e.reward, success: e.success, summary: e.summary }),
            None => None,
        };
        Ok(Observation { text: self.text, from, flaw: self.flaw, end })
    }
}

/// `POST /v1/close`'s answer.
#[derive(Debug, Deserialize)]
pub struct CloseReply {
    /// Whether the session was open.
    pub closed: bool,
}

/// `POST /v1/verify`.
#[derive(Debug, Serialize)]
pub struct VerifyRequest<'a> {
    /// The task.
    pub task: Task,
    /// The agent's messages, in order.
    pub messages: &'a [String],
}

/// The kinds of finding, as the protocol spells them.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    WrongTool,
    WrongArguments,
    RedundantCall,
    UnsupportedAnswer,
    Contradiction,
    Fabrication,
    FormatError,
    GaveUpEarly,
    SkippedStep,
    WrongAnswer,
}

impl From<Kind> for FindingKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::WrongTool => Self::WrongTool,
            Kind::WrongArguments => Self::WrongArguments,
            Kind::RedundantCall => Self::RedundantCall,
            Kind::UnsupportedAnswer => Self::UnsupportedAnswer,
            Kind::Contradiction => Self::Contradiction,
            Kind::Fabrication => Self::Fabrication,
            Kind::FormatError => Self::FormatError,
            Kind::GaveUpEarly => Self::GaveUpEarly,
            Kind::SkippedStep => Self::SkippedStep,
            Kind::WrongAnswer => Self::WrongAnswer,
        }
    }
}

#[derive(Debug, Deserialize)]
struct FindingBody {
    step: usize,
    kind: Kind,
    #[serde(default)]
    detail: String,
}

/// `POST /v1/verify`'s answer.
#[derive(Debug, Deserialize)]
pub struct VerifyReply {
    findings: Vec<FindingBody>,
}

impl VerifyReply {
    /// The findings; one past the end of `messages` is the latest step a finding may name.
    pub fn checked(self, messages: usize) -> Result<Vec<Finding>, String> {
        self.findings
            .into_iter()
            .map(|f| {
                if f.step > messages {
                    return Err(format!("a finding at step {} of an episode of {messages} messages", f.step));
                }
                Ok(Finding::new(f.step, f.kind.into(), f.detail))
            })
            .collect()
    }
}

/// `POST /v1/reference`'s answer.
#[derive(Debug, Deserialize)]
pub struct ReferenceReply {
    /// The agent messages of a correct episode.
    pub messages: Vec<String>,
}

/// An error body (`{"error": "..."}`), when the server sends one.
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_replies_become_observations_and_bad_rewards_are_refused() {
        let ok: StepReply =
            serde_json::from_str(r#"{"text": "4 km", "from": "tool", "end": {"reward": 1, "success": true}}"#).unwrap();
        let obs = ok.checked().unwrap();
        assert_eq!((obs.from, obs.end.map(|e| e.success)), (Source::Tool, Some(true)));
        let bad: StepReply =
            serde_json::from_str(r#"{"text": "", "from": "env", "end": {"reward": 7, "success": true}}"#).unwrap();
        assert!(bad.checked().unwrap_err().contains("reward 7 is outside [0, 1]"));
        assert!(serde_json::from_str::<StepReply>(r#"{"text": "", "from": "oracle"}"#).is_err());
    }

    #[test]
    fn session_ids_and_finding_steps_are_checked() {
        let open = |id: &str| OpenReply { session: id.into(), system: String::new(), user: String::new() };
        assert!(open("s-1").checked().is_ok());
        assert!(open("").checked().is_err());
        assert!(open("a b").checked().is_err());
        assert!(open(&"x".repeat(MAX_SESSION_ID + 1)).checked().is_err());
        let v: VerifyReply = serde_json::from_str(r#"{"findings": [{"step": 3, "kind": "wrong_answer"}]}"#).unwrap();
        assert_eq!(v.checked(3).unwrap()[0].kind, FindingKind::WrongAnswer);
        let v: VerifyReply = serde_json::from_str(r#"{"findings": [{"step": 4, "kind": "wrong_answer"}]}"#).unwrap();
        assert!(v.checked(3).unwrap_err().contains("step 4"));
    }
}
