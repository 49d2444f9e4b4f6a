//! The configuration keys every chat client shares (`[rrm]` for the judge, `[user_model]` for
//! the simulated user): their checks, which name the bad key under the client's section, and
//! the API key, read from the environment variable the config names and refused where it would
//! cross the network in the clear.
//!
//! ```text
//!  endpoints       http:// or https:// URLs, no whitespace (a list, or comma-separated from an env override)
//!  api_key_env     empty, or an environment variable's name (never the key itself)
//!  timeout_ms ≥ 1   retries ≤ 20   backoff_max_ms ≥ backoff_ms
//!  key set ∧ http:// to a host other than loopback ∧ ¬allow_insecure_api_key ──► refused
//! ```

use protocol::config::{ConfigError, Section};
use serde::{Deserialize, Deserializer};

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

/// The shared keys of one client's section, borrowed for checking.
#[derive(Debug, Clone, Copy)]
pub struct ClientKeys<'a> {
    /// The section's name (`rrm`, `user_model`), prefixed to every key named in an error.
    pub section: &'a str,
    /// `endpoints`.
    pub endpoints: &'a [String],
    /// `api_key_env`.
    pub api_key_env: &'a str,
    /// `allow_insecure_api_key`.
    pub allow_insecure_api_key: bool,
    /// `timeout_ms`.
    pub timeout_ms: u64,
    /// `retries`.
    pub retries: u32,
    /// `backoff_ms`.
    pub backoff_ms: u64,
    /// `backoff_max_ms`.
    pub backoff_max_ms: u64,
}

/// Whether `name` can be an environment variable's name.
fn env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl ClientKeys<'_> {
    /// A [`ConfigError::Invalid`] for `<section>.<key>`.
    pub fn invalid(&self, key: &str, expected: impl Into<String>, found: impl ToString) -> ConfigError {
        Section(self.section).invalid(key, expected, found)
    }

    fn check(&self, ok: bool, key: &str, expected: &str, found: impl ToString) -> Result<(), ConfigError> {
        Section(self.section).check(ok, key, expected, found)
    }

    /// Checks every shared key; the first problem is returned, naming its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for url in self.endpoints {
            let ok = (url.starts_with("http://") || url.starts_with("https://")) && !url.contains(char::is_whitespace);
            self.check(ok, "endpoints", "URLs starting with http:// or https://", format!("{url:?}"))?;
        }
        let key_env_ok = self.api_key_env.is_empty() || env_name(self.api_key_env);
        let expected = "the name of an environment variable ([A-Za-z_][A-Za-z0-9_]*)";
        self.check(key_env_ok, "api_key_env", expected, self.api_key_env)?;
        self.check(self.timeout_ms >= 1, "timeout_ms", "an integer >= 1", self.timeout_ms)?;
        self.check(self.retries <= 20, "retries", "an integer in 0..=20", self.retries)?;
        let expected = format!("an integer >= backoff_ms ({})", self.backoff_ms);
        self.check(self.backoff_max_ms >= self.backoff_ms, "backoff_max_ms", &expected, self.backoff_max_ms)
    }

    /// The API key from the variable `api_key_env` names (which must then be set and not
    /// empty); refused when it would go over plain `http://` to a host other than this machine,
    /// unless `allow_insecure_api_key`. The key is never part of an error.
    pub fn api_key(&self) -> Result<Option<String>, ConfigError> {
        if self.api_key_env.is_empty() {
            return Ok(None);
        }
        let key = std::env::var(self.api_key_env).ok().filter(|k| !k.trim().is_empty());
        let expected = "the name of a set, non-empty environment variable";
        let found = format!("{} (unset or empty)", self.api_key_env);
        let key = key.ok_or_else(|| self.invalid("api_key_env", expected, found))?;
        if !self.allow_insecure_api_key {
            if let Some(url) = self.endpoints.iter().find(|u| exposes_key(u)) {
                return Err(self.invalid(
                    "endpoints",
                    format!(
                        "https:// (or http:// to localhost) when api_key_env is set; \
                         {}.allow_insecure_api_key = true sends the key in the clear anyway",
                        self.section
                    ),
                    protocol::secret::redact_url(url),
                ));
            }
        }
        Ok(Some(key))
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

    fn keys<'a>(endpoints: &'a [String], api_key_env: &'a str, allow: bool) -> ClientKeys<'a> {
        ClientKeys {
            section: "user_model",
            endpoints,
            api_key_env,
            allow_insecure_api_key: allow,
            timeout_ms: 1,
            retries: 0,
            backoff_ms: 1,
            backoff_max_ms: 1,
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
        let remote = ["http://user-model.example:8000/v1".to_string()];
        let err = keys(&remote, "PATH", false).api_key().unwrap_err().to_string();
        assert!(err.contains("`user_model.endpoints`") && err.contains("user_model.allow_insecure_api_key"), "{err}");
        let path = std::env::var("PATH").unwrap();
        assert!(!err.contains(&path), "the key is never in an error");
        assert_eq!(keys(&remote, "PATH", true).api_key().unwrap().as_deref(), Some(path.as_str()));
        let local = ["http://127.0.0.1:8000".to_string()];
        assert!(keys(&local, "PATH", false).api_key().unwrap().is_some());
        assert_eq!(keys(&remote, "", false).api_key().unwrap(), None, "no key: nothing to expose");
        let err = keys(&local, "REAGENT_TEST_UNSET_KEY_VAR", false).api_key().unwrap_err().to_string();
        assert!(err.contains("user_model.api_key_env") && err.contains("unset or empty"), "{err}");
    }

    #[test]
    fn bad_values_name_the_key_under_the_section() {
        let urls = ["ftp://x".to_string()];
        assert!(keys(&urls, "", false).validate().unwrap_err().to_string().contains("`user_model.endpoints`"));
        assert!(keys(&[], "sk-123", false).validate().unwrap_err().to_string().contains("user_model.api_key_env"));
        let k = ClientKeys { retries: 21, ..keys(&[], "", false) };
        assert!(k.validate().unwrap_err().to_string().contains("`user_model.retries`: expected an integer in 0..=20"));
        let k = ClientKeys { backoff_ms: 9, ..keys(&[], "", false) };
        assert!(k.validate().unwrap_err().to_string().contains("user_model.backoff_max_ms"));
        assert!(keys(&[], "", false).validate().is_ok());
    }
}
