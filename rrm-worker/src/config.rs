//! The `[rrm]` configuration section, typed: unknown keys are refused, there are no serde
//! defaults (every key is in `config/default.toml`, documented there), and [`RrmConfig::validate`]
//! names the bad key (`rrm.batch_size`, `rrm.openai.timeout_ms`). How an `openai` judge is
//! reached is the nested table `[rrm.openai]`, the same [`ChatEndpoint`] the simulated user reads.

use protocol::config::Section;
use std::time::Duration;

use env_workers::chat::ChatEndpoint;
use protocol::config::ReagentConfig;
use serde::{Deserialize, Serialize};

use crate::error::RrmError;

/// Which judge scores trajectories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JudgeKind {
    /// The deterministic judge built on the environments' step verifiers (built-in families).
    Reference,
    /// An OpenAI-compatible `/v1/chat/completions` server (vLLM or SGLang serving Agent-RRM,
    /// or any instruct model).
    Openai,
}

impl JudgeKind {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reference => "reference",
            Self::Openai => "openai",
        }
    }
}

/// What the OpenAI-compatible judge sends (`rrm.prompt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptFormat {
    /// The one prompt the released Agent-RRM was trained on: its system prompt, then
    /// `Question: …` and `Agent Trajectory: …` holding the agent's final message, as the released
    /// training code renders it.
    AgentRrm,
    /// Our instruction and the whole multi-turn trajectory, every turn fenced as data.
    Trajectory,
}

impl PromptFormat {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentRrm => "agent-rrm",
            Self::Trajectory => "trajectory",
        }
    }
}

/// `[rrm]`: the RRM scoring worker role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RrmConfig {
    /// `reference` or `openai`.
    pub judge: JudgeKind,
    /// This worker's consumer name in group `rrm`; empty means `<host name>-<process id>`.
    pub consumer: String,
    /// Trajectories read per batch (this role's XREADGROUP COUNT).
    pub batch_size: usize,
    /// Judgements in flight at once; for `openai`, HTTP requests in flight at once.
    pub max_concurrency: usize,
    /// Seconds a critique reply is kept for its actor.
    pub critique_reply_ttl_s: u64,
    /// `reference`: whether the critique says if the task was solved (default false: the
    /// released Agent-RRM has no ground truth and never reveals the answer; a critique that
    /// says "wrong" hands a refined attempt outcome feedback).
    pub reveal_outcome: bool,
    /// `openai`: the prompt format, `agent-rrm` or `trajectory`.
    pub prompt: PromptFormat,
    /// `openai`: the most characters of prompt (instruction and trajectory) per request.
    pub max_prompt_chars: usize,
    /// `openai`: how the judge is reached (`[rrm.openai]`); it always decodes greedily.
    pub openai: ChatEndpoint,
}

/// The section these checks name keys under.
const SECTION: Section<'static> = Section("rrm");

/// The nested table of the judge's endpoint.
pub const OPENAI: &str = "rrm.openai";

/// The smallest prompt budget accepted: the instruction plus room for a trajectory.
pub const MIN_PROMPT_CHARS: usize = 4_000;

impl RrmConfig {
    /// Types `[rrm]` of a loaded configuration and validates it.
    pub fn from_config(cfg: &ReagentConfig) -> Result<Self, RrmError> {
        let rrm: Self = protocol::config::section("rrm", &cfg.rrm)?;
        rrm.validate()?;
        Ok(rrm)
    }

    /// Checks every value; the first problem is returned, naming its key.
    pub fn validate(&self) -> Result<(), RrmError> {
        SECTION.check(
            !self.consumer.contains(char::is_whitespace),
            "consumer",
            "a name without spaces",
            &self.consumer,
        )?;
        SECTION.check(
            (1..=10_000).contains(&self.batch_size),
            "batch_size",
            "an integer in 1..=10000",
            self.batch_size,
        )?;
        SECTION.check(
            (1..=4_096).contains(&self.max_concurrency),
            "max_concurrency",
            "an integer in 1..=4096",
            self.max_concurrency,
        )?;
        SECTION.check(
            self.critique_reply_ttl_s >= 1,
            "critique_reply_ttl_s",
            "an integer >= 1",
            self.critique_reply_ttl_s,
        )?;
        self.openai.validate(OPENAI)?;
        if self.judge == JudgeKind::Openai {
            self.openai.require(OPENAI, "rrm.judge = \"openai\"")?;
        }
        let expected = format!("an integer >= {MIN_PROMPT_CHARS}");
        Ok(SECTION.check(
            self.max_prompt_chars >= MIN_PROMPT_CHARS,
            "max_prompt_chars",
            &expected,
            self.max_prompt_chars,
        )?)
    }

    /// The critique reply's expiry.
    pub fn critique_reply_ttl(&self) -> Duration {
        Duration::from_secs(self.critique_reply_ttl_s)
    }

    /// The consumer name to use: the configured one, else `<host name>-<process id>` (stable
    /// across container restarts in one pod, where the process id is the same).
    pub fn consumer_name(&self) -> String {
        if !self.consumer.is_empty() {
            return self.consumer.clone();
        }
        let host = std::env::var("HOSTNAME").ok().filter(|h| !h.trim().is_empty()).unwrap_or_else(|| "rrm".into());
        format!("{}-{}", host.trim(), std::process::id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<RrmConfig, RrmError> {
        RrmConfig::from_config(&ReagentConfig::from_toml_str(text).unwrap())
    }

    #[test]
    fn the_documented_section_loads_and_validates() {
        let cfg = load("").unwrap();
        assert_eq!(cfg.judge, JudgeKind::Reference);
        assert_eq!(cfg.prompt, PromptFormat::AgentRrm);
        assert!(!cfg.reveal_outcome, "the critique keeps the outcome to itself by default");
        assert!(cfg.openai.endpoints.is_empty() && cfg.openai.api_key_env.is_empty());
        assert!(cfg.consumer_name().ends_with(&format!("-{}", std::process::id())));
    }

    #[test]
    fn openai_needs_endpoints_and_a_model() {
        let err = load("[rrm]\njudge = \"openai\"\n").unwrap_err().to_string();
        assert!(err.starts_with("config key `rrm.openai.endpoints`: expected at least one URL"), "{err}");
        let text = "[rrm]\njudge = \"openai\"\n[rrm.openai]\nendpoints = [\"http://a:8000\", \"https://b/v1\"]\n";
        assert_eq!(load(text).unwrap().openai.endpoints.len(), 2);
        let err =
            load("[rrm]\njudge = \"openai\"\n[rrm.openai]\nendpoints = [\"http://a\"]\nmodel = \" \"\n").unwrap_err();
        assert!(err.to_string().contains("rrm.openai.model"), "{err}");
    }

    #[test]
    fn both_prompt_formats_load_by_their_config_names() {
        for format in [PromptFormat::AgentRrm, PromptFormat::Trajectory] {
            let cfg = load(&format!("[rrm]\nprompt = \"{}\"\n", format.as_str())).unwrap();
            assert_eq!(cfg.prompt, format);
        }
    }

    #[test]
    fn endpoints_may_come_comma_separated_from_the_environment() {
        let cfg = ReagentConfig::load_with_env(
            None,
            [("REAGENT__RRM__OPENAI__ENDPOINTS".to_string(), "http://a:1, http://b:2".to_string())],
        )
        .unwrap();
        assert_eq!(RrmConfig::from_config(&cfg).unwrap().openai.endpoints, ["http://a:1", "http://b:2"]);
    }

    #[test]
    fn bad_values_and_unknown_keys_name_the_key() {
        let err = |text: &str| load(text).unwrap_err().to_string();
        let retries = err("[rrm.openai]\nretries = 21\n");
        assert!(retries.contains("`rrm.openai.retries`: expected an integer in 0..=20, found 21"), "{retries}");
        assert!(err("[rrm.openai]\nendpoints = [\"ftp://x\"]\n").contains("rrm.openai.endpoints"));
        assert!(err("[rrm.openai]\napi_key_env = \"sk-123\"\n").contains("rrm.openai.api_key_env"));
        assert!(err("[rrm.openai]\nbackoff_ms = 10\nbackoff_max_ms = 5\n").contains("rrm.openai.backoff_max_ms"));
        assert!(err("[rrm.openai]\nmax_tokens = 0\n").contains("rrm.openai.max_tokens"));
        assert!(
            err("[rrm.openai]\nprompt = \"trajectory\"\n").contains("prompt"),
            "the prompt is the judge's, not the table's"
        );
        // A key of the old flat layout is refused by name, not silently ignored.
        assert!(err("[rrm]\nendpoints = [\"http://a\"]\n").contains("endpoints"));
        assert!(err("[rrm]\nmax_prompt_chars = 10\n").contains("rrm.max_prompt_chars"));
        assert!(err("[rrm]\nbatch_size = 0\n").contains("rrm.batch_size"));
        assert!(err("[rrm]\ntimeout = 5\n").contains("timeout"));
        assert!(err("[rrm]\njudge = \"oracle\"\n").contains("rrm.judge"));
        assert!(err("[rrm]\nprompt = \"chatml\"\n").contains("rrm.prompt"));
    }
}
