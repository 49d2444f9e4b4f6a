//! How a role reaches and authenticates to Redis: the URL of `[redis]`, the ACL user and the
//! password read from the environment variable `redis.password_env` names, and TLS for
//! `rediss://` (the system's roots, or the CA in `redis.tls_ca_file`).
//!
//! ```text
//!  redis.url = "rediss://redis:6379"      redis.user = "actor"      redis.password_env = "REDIS_PASSWORD"
//!         │                                    │                               │ (Kubernetes Secret)
//!         └──────────────► ConnectionInfo ◄────┴───────── password ◄───────────┘
//!                               │  refused: the placeholder `change-me` (unless allowed)
//!                               ▼
//!           redis::Client (TLS with tls_ca_file's roots when set) + the redacted endpoint
//! ```
//!
//! The password lives only in the client; everything printed is [`redact_url`]'s form.

use redis::IntoConnectionInfo;

use crate::config::{ConfigError, RedisConfig};
use crate::error::{ProtocolError, Result};
use crate::secret::{redact_url, PLACEHOLDER_PASSWORD};

/// A client for the configured server and the form of its address that may be printed.
pub struct Target {
    /// The client; holds the password.
    pub client: redis::Client,
    /// `redis://user:***@host:port/db` (no password), for errors and logs.
    pub endpoint: String,
}

/// Builds the client `cfg` describes, reading the password from the process environment.
pub fn target(cfg: &RedisConfig) -> Result<Target> {
    target_with(cfg, |name| std::env::var(name).ok())
}

/// As [`target`], with the environment given as a lookup (tests, launchers).
pub fn target_with(cfg: &RedisConfig, env: impl Fn(&str) -> Option<String>) -> Result<Target> {
    let url = crate::role::redis_url(cfg)?;
    let open_err = |source| ProtocolError::Redis { endpoint: redact_url(url), op: "open", source };
    let mut info = url.into_connection_info().map_err(open_err)?;
    let mut redis_info = info.redis_settings().clone();
    let user = cfg.user.trim();
    if !user.is_empty() {
        redis_info = redis_info.set_username(user);
    }
    let name = cfg.password_env.trim();
    if !name.is_empty() {
        let password = env(name).filter(|p| !p.is_empty()).ok_or_else(|| {
            ConfigError::invalid(
                "redis.password_env",
                "the name of a set, non-empty environment variable holding the Redis password",
                format!("{name} (unset or empty)"),
            )
        })?;
        redis_info = redis_info.set_password(password);
    }
    if redis_info.password() == Some(PLACEHOLDER_PASSWORD) && !cfg.allow_placeholder_password {
        return Err(ConfigError::invalid(
            "redis.password_env",
            "a real Redis password (the placeholder is accepted only with \
             redis.allow_placeholder_password = true, as the cpu-smoke overlay sets)",
            format!("the placeholder password {PLACEHOLDER_PASSWORD:?}"),
        )
        .into());
    }
    info = info.set_redis_settings(redis_info);
    let endpoint = shown(url, user);
    if matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }) {
        // rustls needs one process-wide crypto provider; whoever installs it first wins.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let ca = cfg.tls_ca_file.trim();
    let client = if ca.is_empty() {
        redis::Client::open(info)
    } else {
        let pem = std::fs::read(ca).map_err(|e| {
            ConfigError::invalid("redis.tls_ca_file", "a readable PEM file of CA certificates", format!("{ca} ({e})"))
        })?;
        let certs = redis::TlsCertificates { client_tls: None, root_cert: Some(pem) };
        redis::Client::build_with_tls(info, certs)
    }
    .map_err(|source| ProtocolError::Redis { endpoint: endpoint.clone(), op: "open", source })?;
    Ok(Target { client, endpoint })
}

/// The redacted URL, naming the ACL user when one is configured apart from the URL.
fn shown(url: &str, user: &str) -> String {
    let base = redact_url(url);
    if user.is_empty() {
        base
    } else {
        format!("{base} (user {user})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ReagentConfig;

    fn redis(extra: &str) -> RedisConfig {
        ReagentConfig::from_toml_str(&format!("[redis]\n{extra}\n")).unwrap().redis
    }

    #[test]
    fn the_password_comes_from_the_named_variable_and_is_never_shown() {
        let cfg = redis("url = \"redis://127.0.0.1:6379\"\nuser = \"actor\"\npassword_env = \"PW\"");
        let t = target_with(&cfg, |n| (n == "PW").then(|| "hunter2".to_string())).unwrap();
        assert_eq!(t.endpoint, "redis://127.0.0.1:6379 (user actor)");
        let info = t.client.get_connection_info().redis_settings().clone();
        assert_eq!((info.username(), info.password()), (Some("actor"), Some("hunter2")));
        let err = target_with(&cfg, |_| None).err().unwrap().to_string();
        assert!(err.contains("redis.password_env") && err.contains("PW (unset or empty)"), "{err}");
    }

    #[test]
    fn the_placeholder_is_refused_unless_allowed() {
        let cfg = redis("url = \"redis://:change-me@127.0.0.1:6379\"");
        let err = target_with(&cfg, |_| None).err().unwrap().to_string();
        assert!(err.contains("placeholder") && !err.contains("change-me@"), "{err}");
        let allowed = redis("url = \"redis://:change-me@127.0.0.1:6379\"\nallow_placeholder_password = true");
        assert!(target_with(&allowed, |_| None).is_ok());
    }

    #[test]
    fn debug_toml_and_bad_url_errors_never_show_the_password() {
        let cfg = ReagentConfig::from_toml_str("[redis]\nurl = \"redis://admin:hunter2@h:1/0\"\n").unwrap();
        for text in [format!("{:?}", cfg.redis), format!("{cfg:?}"), cfg.to_toml()] {
            assert!(!text.contains("hunter2") && text.contains("redis://admin:***@h:1/0"), "{text}");
        }
        let bad = ReagentConfig::from_toml_str("[redis]\nurl = \"nope://:hunter2@h\"\n").unwrap_err().to_string();
        assert!(!bad.contains("hunter2") && bad.contains("redis.url"), "{bad}");
        let named = ReagentConfig::from_toml_str("[redis]\npassword_env = \"hunter 2\"\n").unwrap_err().to_string();
        assert!(!named.contains("hunter") && named.contains("redis.password_env"), "{named}");
    }

    #[test]
    fn a_missing_ca_file_names_the_key() {
        let cfg = redis("url = \"rediss://127.0.0.1:6379\"\ntls_ca_file = \"/nonexistent/ca.pem\"");
        let err = target_with(&cfg, |_| None).err().unwrap().to_string();
        assert!(err.contains("redis.tls_ca_file") && err.contains("/nonexistent/ca.pem"), "{err}");
    }
}
