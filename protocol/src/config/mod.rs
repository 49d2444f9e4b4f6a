//! Typed configuration: the embedded `config/default.toml`, then an optional TOML file, then
//! `REAGENT__SECTION__KEY` environment variables, each layer overriding the one before.
//!
//! ```text
//!  config/default.toml (embedded; every key, documented)  ◄── defaults live here and only here
//!        ▲ overridden by
//!  --config FILE.toml                                      ◄── a job's own settings
//!        ▲ overridden by
//!  REAGENT__QUEUE__HIGH_WATER_MARK=5000                    ◄── one-off overrides (k8s env)
//! ```
//!
//! Unknown keys are refused (`deny_unknown_fields`), so a misspelt key is an error rather than
//! a silently ignored setting; every error names the dotted key and the form expected.

mod agreement;
mod sections;
mod validate;

use std::collections::HashMap;
use std::path::Path;

pub use sections::{
    LogFormat, LoggingConfig, MetricsConfig, Precision, QueueConfig, ReagentConfig, RedisConfig, RunConfig,
    WeightsConfig,
};

/// The default job, embedded at build time: the base layer of every configuration.
pub const DEFAULT_TOML: &str = include_str!("../../../config/default.toml");

/// The prefix of environment overrides: `REAGENT__SECTION__KEY`.
pub const ENV_PREFIX: &str = "REAGENT";

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read or parsed as TOML.
    #[error("config file {path}: {detail}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        detail: String,
    },
    /// A key is unknown, missing or of the wrong type.
    #[error("config key `{key}`: {detail}")]
    Key {
        /// The dotted key.
        key: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Two keys that must agree do not (the sampler's and the learner's view of one setting).
    #[error("config keys `{a}` ({a_value}) and `{b}` ({b_value}) must be equal: {why}")]
    Disagree {
        /// The first key.
        a: String,
        /// Its value.
        a_value: String,
        /// The second key.
        b: String,
        /// Its value.
        b_value: String,
        /// Why they must agree.
        why: String,
    },
    /// A value is of the right type but out of range.
    #[error("config key `{key}`: expected {expected}, found {found}")]
    Invalid {
        /// The dotted key.
        key: String,
        /// The form expected.
        expected: String,
        /// What was there.
        found: String,
    },
}

impl ConfigError {
    /// A [`ConfigError::Invalid`]: `key` (dotted) holds `found` where `expected` was wanted. The
    /// one shape of a bad value, which every crate's own settings reuse.
    pub fn invalid(key: impl Into<String>, expected: impl Into<String>, found: impl ToString) -> Self {
        Self::Invalid { key: key.into(), expected: expected.into(), found: found.to_string() }
    }
}

/// A configuration section's name, for the checks of its values: every error names the key in
/// full (`learner.lr`). The one check helper of every crate's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section<'a>(pub &'a str);

impl Section<'_> {
    /// A [`ConfigError::Invalid`] for `<section>.<key>`.
    pub fn invalid(self, key: &str, expected: impl Into<String>, found: impl ToString) -> ConfigError {
        ConfigError::invalid(format!("{}.{key}", self.0), expected, found)
    }

    /// `Ok` when `ok`; otherwise `<section>.<key>` holds `found` where `expected` was wanted.
    pub fn check(self, ok: bool, key: &str, expected: &str, found: impl ToString) -> Result<(), ConfigError> {
        if ok {
            Ok(())
        } else {
            Err(self.invalid(key, expected, found))
        }
    }
}

impl ReagentConfig {
    /// Loads the defaults, `file` when given, and the process's `REAGENT__*` variables, then
    /// validates the result.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_with_env(file, std::env::vars())
    }

    /// As [`ReagentConfig::load`], with the environment given explicitly (tests, launchers).
    pub fn load_with_env(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut builder =
            config::Config::builder().add_source(config::File::from_str(DEFAULT_TOML, config::FileFormat::Toml));
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError::File { path: path.display().to_string(), detail: e.to_string() })?;
            toml::from_str::<toml::Table>(&text)
                .map_err(|e| ConfigError::File { path: path.display().to_string(), detail: e.to_string() })?;
            builder = builder.add_source(config::File::from_str(&text, config::FileFormat::Toml));
        }
        let prefix = format!("{ENV_PREFIX}__");
        let vars: HashMap<String, String> = env.into_iter().filter(|(k, _)| k.starts_with(&prefix)).collect();
        builder = builder.add_source(
            config::Environment::with_prefix(ENV_PREFIX)
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true)
                .source(Some(vars.into_iter().collect())),
        );
        let merged = builder.build().map_err(|e| ConfigError::Key { key: "(layers)".into(), detail: e.to_string() })?;
        let cfg: ReagentConfig = serde_path_to_error::deserialize(merged)
            .map_err(|e| ConfigError::Key { key: e.path().to_string(), detail: e.inner().to_string() })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parses a TOML text on top of the defaults (no file, no environment); for tests and tools.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let dir =
            tempfile::tempdir().map_err(|e| ConfigError::File { path: "(temp)".into(), detail: e.to_string() })?;
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text)
            .map_err(|e| ConfigError::File { path: path.display().to_string(), detail: e.to_string() })?;
        Self::load_with_env(Some(&path), std::iter::empty())
    }

    /// The resolved configuration as TOML, for a run directory and `reagent config show`.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# could not render config: {e}\n"))
    }
}

/// Deserializes the role section `name` (`learner`, `actor`, `rrm`) into the role crate's typed
/// struct. The struct should `deny_unknown_fields` and take no serde defaults: every key is in
/// `config/default.toml`. Errors name the dotted key (`actor.slots`).
pub fn section<T: serde::de::DeserializeOwned>(name: &str, table: &toml::Table) -> Result<T, ConfigError> {
    let value = toml::Value::Table(table.clone());
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let key = if path == "." { name.to_string() } else { format!("{name}.{path}") };
        ConfigError::Key { key, detail: e.inner().to_string() }
    })
}

#[cfg(test)]
mod tests;
