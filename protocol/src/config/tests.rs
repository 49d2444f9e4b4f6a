//! Config loading: defaults, layers, and errors that name the key.

use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn err_of(text: &str) -> String {
    ReagentConfig::from_toml_str(text).unwrap_err().to_string()
}

#[test]
fn defaults_load_and_validate() {
    let cfg = ReagentConfig::load_with_env(None, env(&[])).unwrap();
    assert_eq!(cfg.run.id, "default");
    assert_eq!(cfg.queue.high_water_mark, 32);
    assert_eq!(cfg.redis.url(), None);
    assert_eq!(cfg.logging.format, LogFormat::Text);
}

#[test]
fn file_overrides_defaults_key_by_key() {
    let cfg = ReagentConfig::from_toml_str("[queue]\nhigh_water_mark = 7\n").unwrap();
    assert_eq!(cfg.queue.high_water_mark, 7);
    assert_eq!(cfg.queue.read_count, 64, "untouched keys keep their defaults");
}

#[test]
fn environment_overrides_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.toml");
    std::fs::write(&path, "[queue]\nhigh_water_mark = 7\n").unwrap();
    let cfg = ReagentConfig::load_with_env(
        Some(&path),
        env(&[("REAGENT__QUEUE__HIGH_WATER_MARK", "9"), ("REAGENT__LOGGING__FORMAT", "json"), ("OTHER", "x")]),
    )
    .unwrap();
    assert_eq!(cfg.queue.high_water_mark, 9);
    assert_eq!(cfg.logging.format, LogFormat::Json);
}

#[test]
fn unknown_key_is_named() {
    let e = err_of("[queue]\nhigh_water_mrk = 7\n");
    assert!(e.contains("queue") && e.contains("high_water_mrk"), "{e}");
    let e = err_of("[queu]\nx = 1\n");
    assert!(e.contains("queu"), "{e}");
}

#[test]
fn unknown_environment_key_is_named() {
    let e = ReagentConfig::load_with_env(None, env(&[("REAGENT__QUEUE__NOPE", "1")])).unwrap_err().to_string();
    assert!(e.contains("nope"), "{e}");
}

#[test]
fn wrong_type_is_named() {
    let e = err_of("[queue]\nhigh_water_mark = \"lots\"\n");
    assert!(e.contains("queue.high_water_mark"), "{e}");
    let e = err_of("[logging]\nformat = \"xml\"\n");
    assert!(e.contains("logging.format"), "{e}");
}

#[test]
fn out_of_range_is_named_with_expected_form() {
    let e = err_of("[queue]\nhigh_water_mark = 0\n");
    assert!(e.contains("queue.high_water_mark") && e.contains(">= 1") && e.contains("found 0"), "{e}");
    let e = err_of("[queue]\nread_count = 100000\n");
    assert!(e.contains("queue.read_count") && e.contains("1..=10000"), "{e}");
    let e = err_of("[run]\nid = \"has space\"\n");
    assert!(e.contains("run.id"), "{e}");
    let e = err_of("[redis]\nurl = \"http://nope\"\n");
    assert!(e.contains("redis.url"), "{e}");
    let e = err_of("[metrics]\nlisten = \"not an address\"\n");
    assert!(e.contains("metrics.listen"), "{e}");
}

#[test]
fn broken_toml_names_the_file() {
    let e = err_of("[queue\n");
    assert!(e.contains("config file") && e.contains("config.toml"), "{e}");
}

#[test]
fn resolved_config_round_trips_through_toml() {
    let cfg = ReagentConfig::load_with_env(None, env(&[])).unwrap();
    assert_eq!(ReagentConfig::from_toml_str(&cfg.to_toml()).unwrap(), cfg);
}

#[derive(Debug, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct RoleSection {
    slots: u32,
    name: String,
}

/// The section's `slots`, `name` and `slot` keys only (the embedded defaults hold the real
/// actor keys, typed by the actors crate).
fn ours(table: &toml::Table) -> toml::Table {
    table
        .iter()
        .filter(|(k, _)| ["slots", "name", "slot"].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn role_sections_are_typed_by_their_crate_with_layers_and_named_keys() {
    let text = "[run]\nfeedback = \"score\"\n[actor]\nslots = 3\nname = \"a\"\n";
    let cfg = ReagentConfig::from_toml_str(text).unwrap();
    assert_eq!(cfg.run.feedback, crate::wire::FeedbackMode::Score);
    assert_eq!(section::<RoleSection>("actor", &ours(&cfg.actor)).unwrap(), RoleSection { slots: 3, name: "a".into() });

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.toml");
    std::fs::write(&path, text).unwrap();
    let cfg = ReagentConfig::load_with_env(Some(&path), env(&[("REAGENT__ACTOR__SLOTS", "9")])).unwrap();
    assert_eq!(
        section::<RoleSection>("actor", &ours(&cfg.actor)).unwrap().slots,
        9,
        "the environment layer reaches sections"
    );

    let cfg = ReagentConfig::from_toml_str("[actor]\nslots = \"many\"\nname = \"a\"\n").unwrap();
    let err = section::<RoleSection>("actor", &ours(&cfg.actor)).unwrap_err().to_string();
    assert!(err.contains("actor.slots"), "{err}");
    let cfg = ReagentConfig::from_toml_str("[actor]\nslots = 1\nname = \"a\"\nslot = 2\n").unwrap();
    let err = section::<RoleSection>("actor", &ours(&cfg.actor)).unwrap_err().to_string();
    assert!(err.contains("slot"), "{err}");
    assert!(err_of("[run]\nfeedback = \"both\"\n").contains("run.feedback"));
}

#[test]
fn sampler_and_learner_must_agree_naming_both_keys() {
    let e = err_of("[actor]\ntemperature = 1.0\n");
    assert!(
        e.contains("`actor.temperature` (1)") && e.contains("`learner.service.temperature` (0.7)"),
        "both keys and values are named: {e}"
    );
    let e = err_of("[actor]\ngroup_size = 4\n");
    assert!(e.contains("actor.group_size") && e.contains("learner.service.group_size"), "{e}");
    let e = err_of("[actor]\ntemperature = 0.0\n[learner.service]\ntemperature = 0.0\n");
    assert!(e.contains("actor.temperature") && e.contains("greedy"), "{e}");
    // Changed together, they load; an integer temperature is a number like any other.
    let ok = "[actor]\ntemperature = 1\ngroup_size = 4\n[learner.service]\ntemperature = 1.0\ngroup_size = 4\n";
    ReagentConfig::from_toml_str(ok).unwrap();
}
