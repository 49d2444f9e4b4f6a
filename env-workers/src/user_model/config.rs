//! `[user_model]`, typed: who plays the simulated user of environments that have one (`retail`),
//! and, for a model, how it is reached. Unknown keys are refused, there are no serde defaults
//! (every key is in `config/default.toml`, documented there), and [`UserModelConfig::validate`]
//! names the bad key (`user_model.max_turns`, `user_model.openai.retries`). How the model is
//! reached is the nested table `[user_model.openai]`, the same [`ChatEndpoint`] the judge reads.

use protocol::config::Section;
use protocol::config::{ConfigError, ReagentConfig};
use serde::{Deserialize, Serialize};

use crate::chat::{ChatEndpoint, ChatSettings};

/// Who plays the simulated user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Player {
    /// The rule-based user (deterministic; the default).
    Rules,
    /// An OpenAI-compatible chat model, with the rule-based user as the fallback on failure.
    Openai,
}

/// The `[user_model]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserModelConfig {
    /// `rules` or `openai`.
    pub player: Player,
    /// `openai`: how the model is reached (`[user_model.openai]`).
    pub openai: ChatEndpoint,
    /// `openai`: requests in flight at once, over every episode of this process.
    pub max_concurrency: usize,
    /// `openai`: sampling temperature of the user (0: greedy).
    pub temperature: f32,
    /// `openai`: the most replies the user gives in one episode; the agent's next message to it
    /// ends the episode.
    pub max_turns: usize,
    /// `openai`: the text with which the user ends the conversation.
    pub stop_signal: String,
}

/// The section these checks name keys under.
const SECTION: Section<'static> = Section("user_model");

/// The nested table of the model's endpoint.
const OPENAI: &str = "user_model.openai";

impl UserModelConfig {
    /// Types `[user_model]` of a loaded configuration and validates it.
    pub fn from_config(cfg: &ReagentConfig) -> Result<Self, ConfigError> {
        let section: Self = protocol::config::section("user_model", &cfg.user_model)?;
        section.validate()?;
        Ok(section)
    }

    /// Checks every value; the first problem is returned, naming its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.openai.validate(OPENAI)?;
        if self.player == Player::Openai {
            self.openai.require(OPENAI, "user_model.player = \"openai\"")?;
        }
        let n = self.max_concurrency;
        SECTION.check((1..=4_096).contains(&n), "max_concurrency", "an integer in 1..=4096", n)?;
        let t = self.temperature;
        SECTION.check(t.is_finite() && (0.0..=2.0).contains(&t), "temperature", "a number in 0..=2", t)?;
        SECTION.check((1..=1_000).contains(&self.max_turns), "max_turns", "an integer in 1..=1000", self.max_turns)?;
        let stop = &self.stop_signal;
        let ok = !stop.trim().is_empty() && stop.trim() == stop;
        SECTION.check(ok, "stop_signal", "a non-empty text without surrounding whitespace", format!("{stop:?}"))
    }

    /// The chat client's settings, with the API key read from its variable (refused where it
    /// would cross the network in the clear).
    pub fn chat_settings(&self) -> Result<ChatSettings, ConfigError> {
        self.openai.settings(OPENAI, self.max_concurrency, self.temperature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<UserModelConfig, ConfigError> {
        UserModelConfig::from_config(&ReagentConfig::from_toml_str(text)?)
    }

    #[test]
    fn the_documented_section_loads_with_the_rule_based_user() {
        let cfg = load("").unwrap();
        assert_eq!(cfg.player, Player::Rules);
        assert!(cfg.openai.endpoints.is_empty() && cfg.openai.api_key_env.is_empty());
        assert_eq!(cfg.stop_signal, "###STOP###");
    }

    #[test]
    fn a_model_needs_endpoints_and_a_name() {
        let err = load("[user_model]\nplayer = \"openai\"\n").unwrap_err().to_string();
        assert!(err.contains("`user_model.openai.endpoints`: expected at least one URL"), "{err}");
        let ok = "[user_model]\nplayer = \"openai\"\n[user_model.openai]\nendpoints = \"http://a:1, http://b:2\"\nmodel = \"m\"\n";
        assert_eq!(load(ok).unwrap().openai.endpoints, ["http://a:1", "http://b:2"]);
        let text =
            "[user_model]\nplayer = \"openai\"\n[user_model.openai]\nendpoints = [\"http://a\"]\nmodel = \" \"\n";
        let err = load(text).unwrap_err();
        assert!(err.to_string().contains("user_model.openai.model"), "{err}");
    }

    #[test]
    fn bad_values_and_unknown_keys_name_the_key() {
        let err = |text: &str| load(text).unwrap_err().to_string();
        assert!(
            err("[user_model]\nmax_turns = 0\n").contains("`user_model.max_turns`: expected an integer in 1..=1000")
        );
        assert!(err("[user_model]\ntemperature = -1.0\n").contains("user_model.temperature"));
        assert!(err("[user_model]\nstop_signal = \" \"\n").contains("user_model.stop_signal"));
        assert!(err("[user_model.openai]\nretries = 99\n").contains("user_model.openai.retries"));
        assert!(err("[user_model.openai]\nendpoints = [\"ftp://x\"]\n").contains("user_model.openai.endpoints"));
        assert!(err("[user_model.openai]\nmax_tokens = 0\n").contains("user_model.openai.max_tokens"));
        // A key of the old flat layout is refused by name, not silently ignored.
        assert!(err("[user_model]\nendpoints = [\"http://a\"]\n").contains("endpoints"));
        assert!(err("[user_model.openai]\ntemperature = 0.5\n").contains("temperature"));
        assert!(err("[user_model]\nmax_concurrency = 0\n").contains("user_model.max_concurrency"));
        assert!(err("[user_model]\nplayer = \"oracle\"\n").contains("user_model.player"));
        assert!(err("[user_model]\npersona = \"x\"\n").contains("persona"));
    }

    #[test]
    fn a_key_over_plain_http_off_loopback_is_refused() {
        // PATH is set in every test process: it stands in for the key's variable.
        let text =
            "[user_model]\nplayer = \"openai\"\n[user_model.openai]\nendpoints = [\"http://users.example:8000\"]\n\
                    model = \"m\"\napi_key_env = \"PATH\"\n";
        let err = load(text).unwrap().chat_settings().unwrap_err().to_string();
        assert!(
            err.contains("user_model.openai.endpoints") && err.contains("user_model.openai.allow_insecure_api_key"),
            "{err}"
        );
        let allowed = format!("{text}allow_insecure_api_key = true\n");
        assert!(load(&allowed).unwrap().chat_settings().unwrap().api_key.is_some());
    }
}
