//! `reagent config redis-acl --out FILE`: the Redis ACL file of the per-role users for this
//! run, from passwords in the environment (Kubernetes fills them from the `reagent-redis`
//! Secret in Redis's init container). The file holds SHA-256 hashes only, mode 0600.

use std::path::Path;

use anyhow::{bail, Result};
use protocol::acl::{acl_file, AclUser};
use protocol::config::ReagentConfig;
use protocol::secret::PLACEHOLDER_PASSWORD;

/// The variable holding `user`'s password: `LEARNER_PASSWORD`, …, `ADMIN_PASSWORD`.
pub fn password_variable(user: AclUser) -> String {
    format!("{}_PASSWORD", user.name().to_uppercase())
}

/// Reads every user's password from `env`, refusing missing ones and (unless the configuration
/// allows it) the placeholder; returns the ACL file's text.
pub fn render(cfg: &ReagentConfig, env: impl Fn(&str) -> Option<String>) -> Result<String> {
    let mut users = Vec::new();
    for user in AclUser::ALL {
        let name = password_variable(user);
        let Some(password) = env(&name).filter(|p| !p.is_empty()) else {
            bail!("{name} is unset or empty: every Redis user needs a password (SECURITY.md)");
        };
        if password == PLACEHOLDER_PASSWORD && !cfg.redis.allow_placeholder_password {
            bail!(
                "{name} is the placeholder {PLACEHOLDER_PASSWORD:?}: set real passwords in the reagent-redis \
                 Secret (docs/kubernetes.md, \"Set the Redis passwords\"), or redis.allow_placeholder_password = true \
                 for a throw-away cluster"
            );
        }
        users.push((user, password));
    }
    let listed: Vec<(AclUser, &str)> = users.iter().map(|(u, p)| (*u, p.as_str())).collect();
    Ok(acl_file(&listed, &cfg.run.id))
}

/// Writes the ACL file to `out` (0600).
pub fn write(cfg: &ReagentConfig, out: &Path) -> Result<()> {
    let text = render(cfg, |n| std::env::var(n).ok())?;
    protocol::redis_server::write_private(out, &text)?;
    println!("wrote {} Redis users for run {} to {}", AclUser::ALL.len(), cfg.run.id, out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_user_needs_a_real_password() {
        let cfg = ReagentConfig::from_toml_str("[run]\nid = \"main\"\n").unwrap();
        let all = |pw: &'static str| move |_: &str| Some(pw.to_string());
        let text = render(&cfg, all("s3cret-pw")).unwrap();
        assert_eq!(text.lines().count(), 1 + AclUser::ALL.len());
        assert!(!text.contains("s3cret-pw") && text.contains("reagent:{main}:rollouts"), "{text}");
        let err = render(&cfg, all("change-me")).unwrap_err().to_string();
        assert!(err.contains("LEARNER_PASSWORD") && err.contains("placeholder"), "{err}");
        let smoke = ReagentConfig::from_toml_str("[redis]\nallow_placeholder_password = true\n").unwrap();
        assert!(render(&smoke, all("change-me")).is_ok());
        let err = render(&cfg, |n: &str| (n != "KEDA_PASSWORD").then(|| "x".to_string())).unwrap_err();
        assert!(err.to_string().contains("KEDA_PASSWORD"), "{err}");
    }
}
