//! Range checks that types alone cannot express; each error names the dotted key.

use super::{ConfigError, ReagentConfig};
use crate::wire::RunId;

fn invalid(key: &str, expected: &str, found: impl ToString) -> ConfigError {
    ConfigError::invalid(key, expected, found)
}

fn at_least(key: &str, value: u64, min: u64) -> Result<(), ConfigError> {
    if value < min {
        return Err(invalid(key, &format!("an integer >= {min}"), value));
    }
    Ok(())
}

/// A Redis URL the client can open, if one is set (the error shows it with its password masked).
fn redis_url(key: &str, url: Option<&str>, expected: &str) -> Result<(), ConfigError> {
    match url.map(|u| (u, redis::Client::open(u))) {
        Some((u, Err(e))) => Err(invalid(key, expected, format!("{:?} ({e})", crate::secret::redact_url(u)))),
        _ => Ok(()),
    }
}

impl ReagentConfig {
    /// Checks every value's range and form; the first problem is returned, naming its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        RunId::new(self.run.id.clone()).map_err(|e| invalid("run.id", &e.expected, &e.found))?;
        if self.run.dir.trim().is_empty() {
            return Err(invalid("run.dir", "a directory path", "an empty string"));
        }

        let r = &self.redis;
        redis_url(
            "redis.url",
            r.url(),
            "redis://[user@]host:port[/db] or rediss://…, or empty to start a private server",
        )?;
        let name = r.password_env.trim();
        let env_name = |n: &str| {
            n.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if !name.is_empty() && !env_name(name) {
            return Err(invalid(
                "redis.password_env",
                "the NAME of an environment variable ([A-Za-z_][A-Za-z0-9_]*), never the password",
                "a value that is not a variable name (not shown)",
            ));
        }
        at_least("redis.connect_timeout_ms", r.connect_timeout_ms, 1)?;
        at_least("redis.op_timeout_ms", r.op_timeout_ms, 1)?;
        at_least("redis.backoff_min_ms", r.backoff_min_ms, 1)?;
        at_least("redis.backoff_max_ms", r.backoff_max_ms, r.backoff_min_ms)?;

        let q = &self.queue;
        at_least("queue.max_payload_bytes", q.max_payload_bytes, 64)?;
        at_least("queue.high_water_mark", q.high_water_mark, 1)?;
        at_least("queue.backpressure_timeout_ms", q.backpressure_timeout_ms, 1)?;
        if !(1..=10_000).contains(&q.read_count) {
            return Err(invalid("queue.read_count", "an integer in 1..=10000", q.read_count));
        }
        at_least("queue.block_ms", q.block_ms, 1)?;
        at_least("queue.claim_idle_ms", q.claim_idle_ms, 1)?;
        at_least("queue.max_deliveries", q.max_deliveries, 1)?;
        at_least("queue.dead_letter_maxlen", q.dead_letter_maxlen, 1)?;
        at_least("queue.trim_every", q.trim_every, 1)?;

        let w = &self.weights;
        at_least("weights.chunk_bytes", w.chunk_bytes, 1024)?;
        at_least("weights.keep_versions", w.keep_versions, 1)?;
        at_least("weights.poll_interval_ms", w.poll_interval_ms, 1)?;
        let replica = "redis://host:port[/db] or rediss://… (a replica of redis.url), or empty";
        redis_url("weights.read_url", w.read_url(), replica)?;

        if tracing_subscriber::EnvFilter::try_new(&self.logging.filter).is_err() {
            return Err(invalid(
                "logging.filter",
                "a tracing filter such as \"info\" or \"info,protocol=debug\"",
                format!("{:?}", self.logging.filter),
            ));
        }
        let listen = self.metrics.listen.trim();
        if !listen.is_empty() && listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid("metrics.listen", "host:port such as 0.0.0.0:9100, or empty", format!("{listen:?}")));
        }
        super::agreement::check(self)
    }
}
