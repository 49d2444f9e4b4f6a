//! The configuration as a command sees it: loaded from its layers, described by where it came
//! from, and the logging set-up derived from it and the command line.
//!
//! ```text
//!  embedded defaults ─► --config FILE ─► REAGENT__* variables ─► ReagentConfig (validated)
//!                                                  [dataset] files ─► checked and installed
//!                                                  --log-format ─► logging.format
//! ```

use std::path::Path;

use protocol::config::{ConfigError, LogFormat, ReagentConfig, ENV_PREFIX};
use protocol::wire::RunId;

use clap::Subcommand;

/// `reagent config …`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the resolved configuration (defaults, --config file and REAGENT__* variables
    /// merged) as TOML, ready to save as a job file, after checking every role's section as
    /// that role will read it ([learner], [actor], [rrm], [user_model], [env_worker]): an
    /// unknown key or a refused value fails here, naming the key.
    Show,
    /// Write the Redis ACL file of the per-role users (learner, actor, rrm, keda, replica,
    /// admin) for run.id, their passwords read from LEARNER_PASSWORD, ACTOR_PASSWORD,
    /// RRM_PASSWORD, KEDA_PASSWORD, REPLICA_PASSWORD and ADMIN_PASSWORD and stored as SHA-256 hashes (mode 0600). Kubernetes
    /// runs it in Redis's init container (SECURITY.md).
    RedisAcl {
        /// The file to write.
        #[arg(long, value_name = "FILE")]
        out: std::path::PathBuf,
    },
}

/// A loaded configuration (or why it did not load) and a description of its layers.
#[derive(Debug)]
pub struct Loaded {
    /// The validated configuration.
    pub config: Result<ReagentConfig, ConfigError>,
    /// Where it came from, e.g. `embedded defaults + job.toml + REAGENT__REDIS__URL`.
    pub source: String,
}

/// Loads the configuration the command line names, and with it the `[dataset]` files.
pub fn load(file: Option<&Path>) -> Loaded {
    let config = ReagentConfig::load(file).and_then(|c| load_dataset(&c).map(|()| c));
    Loaded { config, source: describe_source(file, std::env::vars().map(|(k, _)| k)) }
}

/// Reads, checks and installs `[dataset]` for this process (every role makes `dataset` tasks
/// from it): a malformed line is a configuration error naming its file, line and field, so no
/// command that needs the configuration starts. `actor.family` naming "dataset" with no files
/// is refused too.
pub fn load_dataset(config: &ReagentConfig) -> Result<(), ConfigError> {
    use env_workers::families::dataset::{self, DatasetError};
    let loaded = dataset::load_config(&config.dataset).map_err(|e| match e {
        DatasetError::Config { key, detail } => ConfigError::Key { key: format!("dataset.{key}"), detail },
        other => ConfigError::Key { key: "dataset.files".into(), detail: other.to_string() },
    })?;
    let names_dataset = |v: &toml::Value| v.as_str() == Some("dataset");
    let wanted = match config.actor.get("family") {
        Some(toml::Value::Array(items)) => items.iter().any(names_dataset),
        Some(v) => names_dataset(v),
        None => false,
    };
    if wanted && loaded.is_none() {
        return Err(ConfigError::invalid("actor.family", "\"dataset\" only with [dataset] files", "no files"));
    }
    Ok(())
}

/// The layers in effect: the defaults, the file, and the names (never the values, which may
/// hold passwords) of the environment overrides.
pub fn describe_source(file: Option<&Path>, env_names: impl IntoIterator<Item = String>) -> String {
    let mut parts = vec!["embedded defaults".to_string()];
    if let Some(f) = file {
        parts.push(f.display().to_string());
    }
    let prefix = format!("{ENV_PREFIX}__");
    let mut vars: Vec<String> = env_names.into_iter().filter(|k| k.starts_with(&prefix)).collect();
    vars.sort();
    parts.extend(vars);
    parts.join(" + ")
}

/// How to log: the format (the flag wins over the file), the filter, and the run id.
#[derive(Debug, Clone)]
pub struct Logging {
    /// Text or JSON.
    pub format: LogFormat,
    /// The tracing filter.
    pub filter: String,
    /// The run the lines belong to.
    pub run_id: RunId,
}

/// The logging set-up for `cli`; with no valid configuration, text at `info` for run `default`.
pub fn logging(log_format: Option<LogFormat>, config: Option<&ReagentConfig>) -> Logging {
    let fallback_run = || RunId::new("default").expect("`default` is a valid run id");
    let format = log_format.or(config.map(|c| c.logging.format)).unwrap_or(LogFormat::Text);
    match config {
        Some(c) => Logging {
            format,
            filter: c.logging.filter.clone(),
            run_id: RunId::new(c.run.id.clone()).unwrap_or_else(|_| fallback_run()),
        },
        None => Logging { format, filter: "info".into(), run_id: fallback_run() },
    }
}

/// `reagent config show`: the resolved configuration as TOML, with a comment naming its layers,
/// once every role's section has been read as the role reads it ([`check_role_sections`]).
pub fn show(config: &ReagentConfig, source: &str) -> anyhow::Result<String> {
    check_role_sections(config)?;
    Ok(format!("# resolved configuration: {source}\n\n{}", config.to_toml()))
}

/// Reads each role's section with the role's own reader: the learner's, the actor's, the RRM
/// worker's, the simulated user's and the env-worker's. The loader keeps these sections as
/// tables (a role types only its own when it starts); this finds a misspelt key or a refused
/// value in any of them before a role is deployed. `[launch]` is read by `reagent run` and
/// `doctor`, which also check its files.
pub fn check_role_sections(config: &ReagentConfig) -> anyhow::Result<()> {
    learner::role::LearnerRole::from_config(config)?;
    actors::config::ActorConfig::from_config(config)?;
    rrm_worker::RrmConfig::from_config(config)?;
    env_workers::user_model::config::UserModelConfig::from_config(config)?;
    env_workers::service::EnvWorkerConfig::from_table(&config.env_worker)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_names_file_and_overrides_but_not_other_variables() {
        let names = ["PATH", "REAGENT__REDIS__URL", "REAGENT__QUEUE__READ_COUNT"].map(String::from);
        let s = describe_source(Some(Path::new("job.toml")), names);
        assert_eq!(s, "embedded defaults + job.toml + REAGENT__QUEUE__READ_COUNT + REAGENT__REDIS__URL");
        assert_eq!(describe_source(None, []), "embedded defaults");
    }

    #[test]
    fn show_is_toml_that_loads_back() {
        let cfg = ReagentConfig::load_with_env(None, []).unwrap();
        let text = show(&cfg, "embedded defaults").unwrap();
        assert!(text.contains("[queue]"), "{text}");
        assert_eq!(ReagentConfig::from_toml_str(&text).unwrap(), cfg);
    }

    /// The loader keeps role sections as tables; `show` reads each as its role will, so a
    /// misspelt or refused key in any of them fails, naming it.
    #[test]
    fn show_refuses_what_a_role_would_refuse_naming_the_key() {
        for (toml, key) in [
            ("[learner]\nlrr = 1.0\n", "lrr"),
            ("[learner.service]\ncheckpoint_timeout_s = 0\n", "learner.service.checkpoint_timeout_s"),
            ("[actor]\nslots = \"lots\"\n", "actor.slots"),
            ("[rrm.openai]\nretries = 99\n", "rrm.openai.retries"),
            ("[user_model]\nplayer = \"somebody\"\n", "player"),
            ("[env_worker]\nmax_connections = 0\n", "env_worker.max_connections"),
        ] {
            let cfg = ReagentConfig::from_toml_str(toml).unwrap();
            let err = format!("{:#}", show(&cfg, "test").unwrap_err());
            assert!(err.contains(key), "{toml}: {err}");
        }
    }
}
