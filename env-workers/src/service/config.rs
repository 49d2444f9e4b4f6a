//! `[env_worker]`: how an env-worker authenticates and bounds its clients (connections,
//! requests in flight, sessions per connection, request sizes, timeouts), and how actors find
//! the token they present. Defaults live in `config/default.toml`.

use std::net::SocketAddr;
use std::time::Duration;

use protocol::config::ConfigError;
use serde::{Deserialize, Serialize};

use super::auth::Token;

/// The `[env_worker]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvWorkerConfig {
    /// Name of the environment variable holding the shared token; empty: no token.
    pub token_env: String,
    /// Whether a worker accepts the base manifests' placeholder token (`change-me…`): only the
    /// `cpu-smoke` overlay sets it.
    pub allow_placeholder_token: bool,
    /// Most authenticated connections served at once; more are closed after their handshake.
    pub max_connections: usize,
    /// Most connections in their handshake at once; more are closed at accept.
    pub max_pending_handshakes: usize,
    /// Most connections in their handshake from one peer address; more are closed at accept.
    pub max_pending_handshakes_per_peer: usize,
    /// Most requests of one connection in flight at once; more are refused.
    pub max_in_flight: usize,
    /// Most sessions one connection may hold open.
    pub max_sessions_per_connection: usize,
    /// Most sessions one `step_batch` may step.
    pub max_batch: usize,
    /// Largest request frame accepted, in bytes.
    pub max_request_bytes: usize,
    /// A connection must present its token within this long.
    pub handshake_timeout_ms: u64,
    /// A request frame, once begun, must arrive whole within this long (slow senders are cut).
    pub read_timeout_ms: u64,
    /// A connection that sends no request for this long is closed (its sessions with it).
    pub idle_timeout_s: u64,
    /// TCP keepalive probe interval; 0 turns keepalive off.
    pub keepalive_s: u64,
    /// Client deadlines further away than this are clamped to it.
    pub max_deadline_s: u64,
}

impl Default for EnvWorkerConfig {
    /// The values of `config/default.toml`, for tests and in-process servers.
    fn default() -> Self {
        Self {
            token_env: "REAGENT_ENV_TOKEN".into(),
            allow_placeholder_token: false,
            max_connections: 64,
            max_pending_handshakes: 256,
            max_pending_handshakes_per_peer: 64,
            max_in_flight: 32,
            max_sessions_per_connection: 64,
            max_batch: 256,
            max_request_bytes: 1 << 20,
            handshake_timeout_ms: 5000,
            read_timeout_ms: 10_000,
            idle_timeout_s: 300,
            keepalive_s: 60,
            max_deadline_s: 600,
        }
    }
}

fn at_least(key: &str, value: u64, min: u64) -> Result<(), ConfigError> {
    if value < min {
        return Err(ConfigError::invalid(format!("env_worker.{key}"), format!("at least {min}"), value));
    }
    Ok(())
}

impl EnvWorkerConfig {
    /// Types the `[env_worker]` table and checks it.
    pub fn from_table(table: &toml::Table) -> Result<Self, ConfigError> {
        let config: Self = protocol::config::section("env_worker", table)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks ranges, naming the bad key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        at_least("max_connections", self.max_connections as u64, 1)?;
        at_least("max_pending_handshakes", self.max_pending_handshakes as u64, 1)?;
        at_least("max_pending_handshakes_per_peer", self.max_pending_handshakes_per_peer as u64, 1)?;
        at_least("max_in_flight", self.max_in_flight as u64, 1)?;
        at_least("max_sessions_per_connection", self.max_sessions_per_connection as u64, 1)?;
        at_least("max_batch", self.max_batch as u64, 1)?;
        at_least("max_request_bytes", self.max_request_bytes as u64, 4096)?;
        if self.max_request_bytes > super::MAX_FRAME_BYTES {
            let most = format!("at most {}", super::MAX_FRAME_BYTES);
            return Err(ConfigError::invalid("env_worker.max_request_bytes", most, self.max_request_bytes));
        }
        at_least("handshake_timeout_ms", self.handshake_timeout_ms, 1)?;
        at_least("read_timeout_ms", self.read_timeout_ms, 1)?;
        at_least("idle_timeout_s", self.idle_timeout_s, 1)?;
        at_least("max_deadline_s", self.max_deadline_s, 1)?;
        if self.max_deadline_s > 86_400 {
            return Err(ConfigError::invalid("env_worker.max_deadline_s", "at most 86400", self.max_deadline_s));
        }
        Ok(())
    }

    /// The token from the environment variable named by `token_env`, if set and not empty.
    pub fn token(&self) -> Option<Token> {
        Token::from_env(&self.token_env)
    }

    /// The token a worker listening on `listen` requires: mandatory off loopback, where a
    /// missing one is an error naming `env_worker.token_env`; the placeholder `change-me…` is
    /// refused unless `env_worker.allow_placeholder_token`.
    pub fn token_for(&self, listen: SocketAddr) -> Result<Option<Token>, ConfigError> {
        match self.token() {
            Some(token) if token.is_placeholder() && !self.allow_placeholder_token => Err(ConfigError::invalid(
                "env_worker.allow_placeholder_token",
                format!(
                    "true to accept the placeholder token in {:?} (only for a throw-away cluster; set a real \
                     token in the reagent-env-token Secret, SECURITY.md)",
                    self.token_env
                ),
                "false",
            )),
            Some(token) => Ok(Some(token)),
            None if listen.ip().is_loopback() => Ok(None),
            None => Err(ConfigError::invalid(
                "env_worker.token_env",
                format!(
                    "the name of a set, non-empty environment variable holding the shared token (required: \
                     --listen {listen} is not a loopback address)"
                ),
                format!("{:?} (unset or empty)", self.token_env),
            )),
        }
    }

    /// Handshake deadline.
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    /// Whole-frame read deadline.
    pub fn read_timeout(&self) -> Duration {
        Duration::from_millis(self.read_timeout_ms)
    }

    /// Idle connection timeout.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_s)
    }

    /// Keepalive interval, if on.
    pub fn keepalive(&self) -> Option<Duration> {
        (self.keepalive_s > 0).then(|| Duration::from_secs(self.keepalive_s))
    }

    /// Largest client deadline honoured.
    pub fn max_deadline(&self) -> Duration {
        Duration::from_secs(self.max_deadline_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_required_off_loopback_and_the_error_names_the_key() {
        let config = EnvWorkerConfig { token_env: "REAGENT_TEST_UNSET_TOKEN_VAR".into(), ..EnvWorkerConfig::default() };
        assert_eq!(config.token_for("127.0.0.1:7100".parse().unwrap()).unwrap(), None);
        let err = config.token_for("0.0.0.0:7100".parse().unwrap()).unwrap_err();
        assert!(matches!(&err, ConfigError::Invalid { key, .. } if key == "env_worker.token_env"), "{err}");
        assert!(err.to_string().contains("REAGENT_TEST_UNSET_TOKEN_VAR"), "{err}");
    }

    #[test]
    fn the_defaults_are_those_of_the_default_config() {
        let cfg = protocol::config::ReagentConfig::from_toml_str("").unwrap();
        assert_eq!(EnvWorkerConfig::from_table(&cfg.env_worker).unwrap(), EnvWorkerConfig::default());
        let bad = protocol::config::ReagentConfig::from_toml_str("[env_worker]\nmax_batch = 0\n").unwrap();
        let err = EnvWorkerConfig::from_table(&bad.env_worker).unwrap_err();
        assert!(err.to_string().contains("env_worker.max_batch"), "{err}");
    }

    #[test]
    fn the_placeholder_token_is_refused_unless_allowed() {
        // A variable only this test reads.
        std::env::set_var("REAGENT_TEST_PLACEHOLDER_TOKEN", "change-me-env-token");
        let config =
            EnvWorkerConfig { token_env: "REAGENT_TEST_PLACEHOLDER_TOKEN".into(), ..EnvWorkerConfig::default() };
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let err = config.token_for(listen).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { key, .. } if key == "env_worker.allow_placeholder_token"),
            "{err}"
        );
        let allowed = EnvWorkerConfig { allow_placeholder_token: true, ..config };
        assert!(allowed.token_for(listen).unwrap().is_some_and(|t| t.is_placeholder()));
    }
}
