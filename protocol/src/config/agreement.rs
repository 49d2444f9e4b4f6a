//! The sampler and the learner agree, or the run refuses to start (issue: learner fidelity).
//!
//! The learner recomputes log-probs at the temperature the actors sampled at and groups
//! trajectories by the actors' group size; a mismatch does not fail loudly later, it silently
//! trains on wrong importance weights or on groups that never complete. So every role checks,
//! when it loads the one configuration, that:
//!
//! ```text
//!  actor.temperature  ==  learner.service.temperature     (and > 0: greedy rollouts cannot be trained on)
//!  actor.group_size   ==  learner.service.group_size
//! ```
//!
//! The error names both keys and both values.

use super::{ConfigError, ReagentConfig};

fn number(table: &toml::Table, key: &str) -> Option<f64> {
    match table.get(key)? {
        toml::Value::Float(f) => Some(*f),
        toml::Value::Integer(i) => Some(*i as f64),
        _ => None,
    }
}

fn learner_service(cfg: &ReagentConfig) -> Option<&toml::Table> {
    cfg.learner.get("service").and_then(toml::Value::as_table)
}

fn disagree(a: &str, a_value: f64, b: &str, b_value: f64, why: &str) -> ConfigError {
    ConfigError::Disagree {
        a: a.into(),
        a_value: a_value.to_string(),
        b: b.into(),
        b_value: b_value.to_string(),
        why: why.into(),
    }
}

/// Checks the keys of the module header; a key absent from either section (a caller that built
/// a partial table by hand) is not checked, and its own section's check reports its form.
pub fn check(cfg: &ReagentConfig) -> Result<(), ConfigError> {
    let service = learner_service(cfg);
    let actor_t = number(&cfg.actor, "temperature");
    if let Some(t) = actor_t {
        if t == 0.0 {
            return Err(ConfigError::Invalid {
                key: "actor.temperature".into(),
                expected: "a number > 0 (greedy rollouts give every attempt of a group the same tokens and \
                           no behaviour log-probs to train on)"
                    .into(),
                found: "0".into(),
            });
        }
    }
    if let (Some(a), Some(l)) = (actor_t, service.and_then(|s| number(s, "temperature"))) {
        if a != l {
            return Err(disagree(
                "actor.temperature",
                a,
                "learner.service.temperature",
                l,
                "the learner recomputes log-probs at the temperature the actors sampled at",
            ));
        }
    }
    if let (Some(a), Some(l)) = (number(&cfg.actor, "group_size"), service.and_then(|s| number(s, "group_size"))) {
        if a != l {
            return Err(disagree(
                "actor.group_size",
                a,
                "learner.service.group_size",
                l,
                "the learner's GRPO group is complete when it holds the actors' attempts at one task",
            ));
        }
    }
    Ok(())
}
