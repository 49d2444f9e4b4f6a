//! One OpenAI-compatible chat endpoint's configuration, the nested table every chat client
//! reads (`[rrm.openai]` for the judge, `[user_model.openai]` for the simulated user): its
//! checks, which name the bad key under the table (`rrm.openai.retries`), and the API key, read
//! from the environment variable the config names and refused where it would cross the network
//! in the clear. A nested table rather than flattened keys, so that unknown keys stay refused
//! (serde's `flatten` and `deny_unknown_fields` do not mix).
//!
//! ```text
//!  endpoints       http:// or https:// URLs, no whitespace (a list, or comma-separated from an env override)
//!  api_key_env     empty, or an environment variable's name (never the key itself)
//!  timeout_ms ≥ 1   retries ≤ 20   backoff_max_ms ≥ backoff_ms   max_tokens ≥ 1
//!  key set ∧ http:// to a host other than loopback ∧ ¬allow_insecure_api_key ──► refused
//! ```

use std::time::Duration;

use protocol::config::{ConfigError, Section};
use serde::{Deserialize, Deserializer, Serialize};

use super::ChatSettings;

/// A list, or one comma-separated string (what an environment variable can carry).
pub fn list_or_csv<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        List(Vec<String>),
        Text(String),
    }
    Ok(match Form::deserialize(d)? {
        Form::List(items) => items,
        Form::Text(text) => text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
    })
}

/// `[<section>.openai]`: how one chat client reaches its OpenAI-compatible servers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatEndpoint {
    /// Base URLs of the servers; an environment override may give them comma-separated.
    #[serde(deserialize_with = "list_or_csv")]
    pub endpoints: Vec<String>,
    /// The model name sent with each request.
    pub model: String,
    /// The NAME of the environment variable holding the API key; empty sends none.
    pub api_key_env: String,
    /// Send the key over plain `http://` to a host other than this machine.
    pub allow_insecure_api_key: bool,
    /// Deadline of one request, connecting included.
    pub timeout_ms: u64,
    /// Further attempts after the first fails.
    pub retries: u32,
    /// First backoff once every endpoint has failed; doubles.
    pub backoff_ms: u64,
    /// Largest backoff.
    pub backoff_max_ms: u64,
    /// How long a failed endpoint is passed over while others are healthy.
    pub endpoint_cooldown_ms: u64,
    /// The most tokens the model may generate per request.
    pub max_tokens: u32,
}

/// Whether `name` can be an environment variable's name.
fn env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl ChatEndpoint {
    /// Checks every key; the first problem is returned, naming its key under `table`
    /// (`rrm.openai`).
    pub fn validate(&self, table: &str) -> Result<(), ConfigError> {
        let t = Section(table);
        for url in &self.endpoints {
            let ok = (url.starts_with("http://") || url.starts_with("https://")) && !url.contains(char::is_whitespace);
            t.check(ok, "endpoints", "URLs starting with http:// or https://", format!("{url:?}"))?;
        }
        let key_env_ok = self.api_key_env.is_empty() || env_name(&self.api_key_env);
        let expected = "the name of an environment variable ([A-Za-z_][A-Za-z0-9_]*)";
        t.check(key_env_ok, "api_key_env", expected, &self.api_key_env)?;
        t.check(self.timeout_ms >= 1, "timeout_ms", "an integer >= 1", self.timeout_ms)?;
        t.check(self.retries <= 20, "retries", "an integer in 0..=20", self.retries)?;
        let expected = format!("an integer >= backoff_ms ({})", self.backoff_ms);
        t.check(self.backoff_max_ms >= self.backoff_ms, "backoff_max_ms", &expected, self.backoff_max_ms)?;
        t.check(self.max_tokens >= 1, "max_tokens", "an integer >= 1", self.max_tokens)
    }

    /// Checks what a client in use needs: at least one endpoint and a model name; `why` says
    /// what put it in use (`judge = "openai"`).
    pub fn require(&self, table: &str, why: &str) -> Result<(), ConfigError> {
        let t = Section(table);
        t.check(!self.endpoints.is_empty(), "endpoints", &format!("at least one URL with {why}"), "[]")?;
        t.check(!self.model.trim().is_empty(), "model", &format!("a model name with {why}"), "\"\"")
    }

    /// The API key from the variable `api_key_env` names (which must then be set and not
    /// empty); refused when it would go over plain `http://` to a host other than this machine,
    /// unless `allow_insecure_api_key`. The key is never part of an error.
    pub fn api_key(&self, table: &str) -> Result<Option<String>, ConfigError> {
        if self.api_key_env.is_empty() {
            return Ok(None);
        }
        let t = Section(table);
        let key = std::env::var(&self.api_key_env).ok().filter(|k| !k.trim().is_empty());
        let expected = "the name of a set, non-empty environment variable";
        let found = format!("{} (unset or empty)", self.api_key_env);
        let key = key.ok_or_else(|| t.invalid("api_key_env", expected, found))?;
        if !self.allow_insecure_api_key {
            if let Some(url) = self.endpoints.iter().find(|u| exposes_key(u)) {
                return Err(t.invalid(
                    "endpoints",
                    format!(
                        "https:// (or http:// to localhost) when api_key_env is set; \
                         {table}.allow_insecure_api_key = true sends the key in the clear anyway"
                    ),
                    protocol::secret::redact_url(url),
                ));
            }
        }
        Ok(Some(key))
    }

    /// The client's settings, with the API key read from its variable (refused where it would
    /// cross the network in the clear) and what the section adds: requests in flight at once
    /// and the sampling temperature.
    pub fn settings(&self, table: &str, max_concurrency: usize, temperature: f32) -> Result<ChatSettings, ConfigError> {
        Ok(ChatSettings {
            endpoints: self.endpoints.clone(),
            model: self.model.clone(),
            api_key: self.api_key(table)?,
            timeout: Duration::from_millis(self.timeout_ms),
            retries: self.retries,
            backoff: Duration::from_millis(self.backoff_ms),
            backoff_max: Duration::from_millis(self.backoff_max_ms),
            endpoint_cooldown: Duration::from_millis(self.endpoint_cooldown_ms),
            max_concurrency,
            max_tokens: self.max_tokens,
            temperature,
        })
    }
}

/// Whether a bearer token sent to `url` crosses the network unencrypted: plain `http://` to a
/// host other than this machine's loopback.
pub fn exposes_key(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let host = protocol::secret::host_port(&format!("http://{rest}"));
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default().to_string(),
        None => host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h).to_string(),
    };
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    !loopback
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "user_model.openai";

    fn keys(endpoints: &[&str], api_key_env: &str, allow: bool) -> ChatEndpoint {
        ChatEndpoint {
            endpoints: endpoints.iter().map(|e| e.to_string()).collect(),
            model: String::new(),
            api_key_env: api_key_env.into(),
            allow_insecure_api_key: allow,
            timeout_ms: 1,
            retries: 0,
            backoff_ms: 1,
            backoff_max_ms: 1,
            endpoint_cooldown_ms: 0,
            max_tokens: 1,
        }
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        assert!(exposes_key("http://10.0.0.5:8000"));
        assert!(exposes_key("http://u:p@judge"));
        assert!(!exposes_key("http://127.0.0.2:8000/v1"));
        assert!(!exposes_key("https://10.0.0.5"));
        assert!(!exposes_key("http://[::1]:8000"));
    }

    #[test]
    fn a_key_is_refused_over_plain_http_off_loopback_and_never_shown() {
        // PATH is set in every test process: it stands in for the key's variable.
        let remote = ["http://user-model.example:8000/v1"];
        let err = keys(&remote, "PATH", false).api_key(T).unwrap_err().to_string();
        assert!(
            err.contains("`user_model.openai.endpoints`") && err.contains("user_model.openai.allow_insecure_api_key"),
            "{err}"
        );
        let path = std::env::var("PATH").unwrap();
        assert!(!err.contains(&path), "the key is never in an error");
        assert_eq!(keys(&remote, "PATH", true).api_key(T).unwrap().as_deref(), Some(path.as_str()));
        let local = ["http://127.0.0.1:8000"];
        assert!(keys(&local, "PATH", false).api_key(T).unwrap().is_some());
        assert_eq!(keys(&remote, "", false).api_key(T).unwrap(), None, "no key: nothing to expose");
        let err = keys(&local, "REAGENT_TEST_UNSET_KEY_VAR", false).api_key(T).unwrap_err().to_string();
        assert!(err.contains("user_model.openai.api_key_env") && err.contains("unset or empty"), "{err}");
    }

    #[test]
    fn bad_values_name_the_key_under_the_table() {
        let err = |k: ChatEndpoint| k.validate(T).unwrap_err().to_string();
        assert!(err(keys(&["ftp://x"], "", false)).contains("`user_model.openai.endpoints`"));
        assert!(err(keys(&[], "sk-123", false)).contains("user_model.openai.api_key_env"));
        let k = ChatEndpoint { retries: 21, ..keys(&[], "", false) };
        assert!(err(k).contains("`user_model.openai.retries`: expected an integer in 0..=20"));
        let k = ChatEndpoint { backoff_ms: 9, ..keys(&[], "", false) };
        assert!(err(k).contains("user_model.openai.backoff_max_ms"));
        let k = ChatEndpoint { max_tokens: 0, ..keys(&[], "", false) };
        assert!(err(k).contains("user_model.openai.max_tokens"));
        assert!(keys(&[], "", false).validate(T).is_ok());
    }

    #[test]
    fn a_client_in_use_needs_endpoints_and_a_model() {
        let why = "player = \"openai\"";
        let err = keys(&[], "", false).require(T, why).unwrap_err().to_string();
        assert!(err.contains("`user_model.openai.endpoints`: expected at least one URL with player"), "{err}");
        let named = |model: &str| ChatEndpoint { model: model.into(), ..keys(&["http://a:1"], "", false) };
        assert!(named(" ").require(T, why).unwrap_err().to_string().contains("user_model.openai.model"));
        assert!(named("m").require(T, why).is_ok());
    }
}
