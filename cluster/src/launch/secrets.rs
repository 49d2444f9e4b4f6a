//! The Redis credentials of a local run, and where they go. With a private server every role
//! gets its own ACL user and a random password; with a configured URL that carries a password,
//! the password leaves the URL. Either way the password reaches role processes only in their
//! environment (`REAGENT_REDIS_PASSWORD`, readable by this user alone in /proc), never in
//! `config.toml`, which names that variable instead and is written with mode 0600.
//!
//! ```text
//!  private server:  users.acl (hashes) ◄── random password per user ──► child env
//!                   learner, actor, rrm: their own user; the launcher (status, eval): admin
//!  redis.url = redis://u:pw@h  ──►  config.toml: url = redis://u@h, password_env = REAGENT_REDIS_PASSWORD
//! ```

use std::path::Path;

use anyhow::{Context, Result};
use protocol::acl::{acl_file, random_password, AclUser};
use protocol::config::ReagentConfig;
use protocol::link::RedisLink;
use protocol::redis_server::ServerAuth;

/// The variable a role process reads its Redis password from.
pub const PASSWORD_ENV: &str = "REAGENT_REDIS_PASSWORD";

/// The private server's admin password, in its data directory (mode 0600).
pub const ADMIN_PASSWORD_FILE: &str = "admin.password";

/// The credentials role processes of this run get.
pub enum Credentials {
    /// The private server's users, one password each.
    PerRole(Vec<(AclUser, String)>),
    /// One password for every role (a configured URL's); user and URL as configured.
    Shared(String),
    /// Nothing to pass on: no password, or the configured `redis.password_env`, which the
    /// children inherit.
    Inherited,
}

impl Credentials {
    /// Random passwords for the private server's users.
    pub fn generate() -> Self {
        Self::PerRole(
            [AclUser::Learner, AclUser::Actor, AclUser::Rrm, AclUser::Admin].map(|u| (u, random_password())).into(),
        )
    }

    /// The private server's ACL file for run `run`, and the admin password its start-up check uses.
    pub fn server_auth(&self, run: &str) -> Option<ServerAuth> {
        let Self::PerRole(users) = self else { return None };
        let listed: Vec<(AclUser, &str)> = users.iter().map(|(u, p)| (*u, p.as_str())).collect();
        Some(ServerAuth { acl: acl_file(&listed, run), admin_password: self.password(AclUser::Admin)?.to_string() })
    }

    /// Keeps the private server's admin password in `<redis dir>/admin.password` (mode 0600),
    /// for `reagent status` and other operator commands while the run is up.
    pub fn save_admin_password(&self, redis_dir: &Path) -> Result<()> {
        if let (Self::PerRole(_), Some(p)) = (self, self.password(AclUser::Admin)) {
            protocol::redis_server::write_private(&redis_dir.join(ADMIN_PASSWORD_FILE), p)?;
        }
        Ok(())
    }

    fn password(&self, user: AclUser) -> Option<&str> {
        match self {
            Self::PerRole(users) => users.iter().find(|(u, _)| *u == user).map(|(_, p)| p.as_str()),
            Self::Shared(p) => Some(p),
            Self::Inherited => None,
        }
    }

    /// Takes a password out of `cfg.redis.url` (pointing `password_env` at [`PASSWORD_ENV`]);
    /// [`Credentials::Inherited`] when there is none.
    pub fn from_url(cfg: &mut ReagentConfig) -> Result<Self> {
        let url: redis::ConnectionInfo = redis::IntoConnectionInfo::into_connection_info(cfg.redis.url.as_str())
            .with_context(|| format!("redis.url {}", protocol::secret::redact_url(&cfg.redis.url)))?;
        let Some(password) = url.redis_settings().password().map(str::to_string) else {
            return Ok(Self::Inherited);
        };
        cfg.redis.url = without_password(&cfg.redis.url);
        cfg.redis.password_env = PASSWORD_ENV.into();
        Ok(Self::Shared(password))
    }

    /// Points `cfg` at the private server's password variable (the user comes per process).
    pub fn point_config(&self, cfg: &mut ReagentConfig) {
        if !matches!(self, Self::Inherited) {
            cfg.redis.password_env = PASSWORD_ENV.into();
        }
    }

    /// The environment of a `reagent <role>` process: its user and password; nothing for
    /// roles without Redis (env-workers).
    pub fn env_for(&self, role: &str) -> Vec<(&'static str, String)> {
        let Some(user) = AclUser::for_role(role) else { return Vec::new() };
        let mut env = Vec::new();
        if let Self::PerRole(_) = self {
            env.push(("REAGENT__REDIS__USER", user.name().to_string()));
        }
        if let Some(p) = self.password(user) {
            env.push((PASSWORD_ENV, p.to_string()));
        }
        env
    }

    /// The launcher's own link (waiting for weights, the final evaluation): admin on the
    /// private server, else the configured user.
    pub fn launcher_link(&self, cfg: &ReagentConfig) -> Result<RedisLink> {
        let mut redis = cfg.redis.clone();
        if let Self::PerRole(_) = self {
            redis.user = AclUser::Admin.name().into();
        }
        let password = self.password(AclUser::Admin).map(str::to_string);
        let target = protocol::redis_auth::target_with(&redis, |name| {
            if name == PASSWORD_ENV && password.is_some() {
                password.clone()
            } else {
                std::env::var(name).ok()
            }
        })?;
        Ok(RedisLink::from_target(target, (&redis).into()))
    }
}

/// `redis://user:pw@host/0` → `redis://user@host/0`.
fn without_password(url: &str) -> String {
    let redacted = protocol::secret::redact_url(url);
    redacted.replacen(&format!(":{}@", protocol::secret::MASK), "@", 1).replacen("://@", "://", 1)
}

/// The header of the run's `config.toml`: where the Redis password comes from.
pub fn config_header(credentials: &Credentials) -> String {
    let source = match credentials {
        Credentials::PerRole(_) => {
            "each role's own ACL user (REAGENT__REDIS__USER) and random password, set by `reagent run` in the \
             role's environment; users.acl in redis/ holds only hashes.\n# Operators (reagent status, reagent \
             dlq): REAGENT__REDIS__USER=admin REAGENT_REDIS_PASSWORD=$(cat redis/admin.password)"
        }
        Credentials::Shared(_) => "the password that was in redis.url, set by `reagent run` in each role's environment",
        Credentials::Inherited => "redis.password_env as configured (or none)",
    };
    format!(
        "# The resolved configuration of this run, which every role process reads (mode 0600).\n\
         # No password is written here: redis.password_env names the variable holding it, from\n# {source}.\n\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_leaves_the_url_for_the_environment() {
        let mut cfg = ReagentConfig::from_toml_str("[redis]\nurl = \"redis://ops:hunter2@h:1/0\"\n").unwrap();
        let creds = Credentials::from_url(&mut cfg).unwrap();
        assert_eq!(cfg.redis.url, "redis://ops@h:1/0");
        assert_eq!(cfg.redis.password_env, PASSWORD_ENV);
        assert_eq!(creds.env_for("actor"), vec![(PASSWORD_ENV, "hunter2".to_string())]);
        assert!(creds.env_for("env-worker").is_empty());
        assert_eq!(without_password("redis://:pw@h:1"), "redis://h:1");
    }

    #[test]
    fn private_roles_get_their_own_users() {
        let creds = Credentials::generate();
        let env = creds.env_for("rrm");
        assert_eq!(env[0], ("REAGENT__REDIS__USER", "rrm".to_string()));
        assert_ne!(env[1].1, creds.env_for("actor")[1].1, "distinct passwords");
        assert!(!creds.server_auth("r").unwrap().acl.contains(&env[1].1));
        let dir = tempfile::tempdir().unwrap();
        creds.save_admin_password(dir.path()).unwrap();
        let saved = dir.path().join(ADMIN_PASSWORD_FILE);
        assert_eq!(std::fs::read_to_string(&saved).unwrap(), creds.password(AclUser::Admin).unwrap());
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&saved).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
    }
}
