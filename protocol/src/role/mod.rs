//! The one shape of a role process (`reagent learner | actor | rrm | env-worker`): each role's
//! entry point is `run_role(config, shutdown) -> Result<RoleReport, _>`, serves its metrics
//! endpoint through [`crate::http::Endpoint`], and the binary turns SIGTERM and SIGINT into the
//! `shutdown` token with [`cancel_on_signal`], then prints the [`RoleReport`] it gets back.
//!
//! ```text
//!  reagent <role> ─► cancel_on_signal(shutdown) ─► run_role(config, shutdown)
//!                                                    ├─ redis_url(&cfg.redis)?   (one message when empty)
//!                                                    ├─ http::Endpoint::start(metrics.listen)  (dropped on return)
//!                                                    └─ work until shutdown ─► RoleReport ─► printed + logged
//! ```

mod report;
mod signal;

pub use report::{Ended, RoleReport};
pub use signal::cancel_on_signal;

use crate::config::{ConfigError, RedisConfig};

/// What `redis.url` must hold, as every role, command and link says when it is empty.
pub const REDIS_URL_EXPECTED: &str = "the URL of the running job's Redis (redis:// or rediss://), which roles, \
     status and dlq join: set redis.url (or REAGENT__REDIS__URL), or use `reagent run`, which starts a private one";

/// `redis.url`, or the one error every role (and every [`crate::link::RedisLink`]) gives when it
/// is empty: a role joins a running job's Redis, it never starts one.
pub fn redis_url(redis: &RedisConfig) -> Result<&str, ConfigError> {
    redis.url().ok_or_else(|| ConfigError::invalid("redis.url", REDIS_URL_EXPECTED, "an empty string"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ReagentConfig;

    #[test]
    fn an_empty_redis_url_gets_the_one_message_naming_the_key_and_the_way_out() {
        for url in ["", "   "] {
            let cfg = ReagentConfig::from_toml_str(&format!("[redis]\nurl = {url:?}\n")).unwrap();
            let err = redis_url(&cfg.redis).unwrap_err().to_string();
            assert!(err.starts_with("config key `redis.url`: expected the URL of the running job's Redis"), "{err}");
            assert!(err.contains("REAGENT__REDIS__URL") && err.contains("reagent run"), "{err}");
            assert!(err.ends_with("found an empty string"), "{err}");
        }
        let cfg = ReagentConfig::from_toml_str("[redis]\nurl = \" redis://h:1 \"\n").unwrap();
        assert_eq!(redis_url(&cfg.redis).unwrap(), "redis://h:1");
    }
}
