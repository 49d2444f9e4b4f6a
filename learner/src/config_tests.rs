//! The `[learner]` section as `config/default.toml` carries it, checked against the defaults.

use super::*;

/// The `[learner]` section of the embedded `config/default.toml`.
fn default_section() -> String {
    let mut section = protocol::config::ReagentConfig::from_toml_str("").unwrap().learner;
    // The role's own keys and [learner.service] are read by `crate::role`.
    for key in crate::role::ROLE_KEYS.iter().chain(&["service"]) {
        section.remove(*key);
    }
    toml::to_string(&section).unwrap()
}

#[test]
fn the_documented_section_is_the_default() {
    let parsed: LearnerConfig = toml::from_str(&default_section()).unwrap();
    assert_eq!(parsed, LearnerConfig::default());
    parsed.validate().unwrap();
}

#[test]
fn unknown_keys_and_bad_values_name_the_key() {
    let err = toml::from_str::<LearnerConfig>(&format!("{}\nclip_hgh = 0.3\n", default_section())).unwrap_err();
    assert!(err.to_string().contains("clip_hgh"), "{err}");

    let bad = |f: fn(&mut LearnerConfig)| {
        let mut c = LearnerConfig::default();
        f(&mut c);
        c.validate().unwrap_err().to_string()
    };
    assert!(bad(|c| c.clip_low = 1.5).starts_with("config key `learner.clip_low`: expected a number in (0, 1)"));
    assert!(bad(|c| c.is_cap = 0.5).contains("learner.is_cap"));
    assert!(bad(|c| c.lr = f64::NAN).contains("learner.lr"));
    assert!(bad(|c| c.lr_decay = LrDecay::Cosine).contains("learner.total_steps"));
    assert!(bad(|c| c.keep_checkpoints = 0).contains("learner.keep_checkpoints"));
    assert!(bad(|c| c.gamma = 1.01).contains("learner.gamma"));
}

#[test]
fn resume_parses_every_form_and_configs_convert() {
    let with = |v: &str| toml::from_str::<LearnerConfig>(&default_section().replace(r#"resume = "auto""#, v));
    assert_eq!(with(r#"resume = "never""#).unwrap().resume, ResumeMode::Never);
    assert_eq!(
        with(r#"resume = "runs/x/step-0000000010""#).unwrap().resume,
        ResumeMode::Path("runs/x/step-0000000010".into())
    );
    assert!(with(r#"resume = """#).is_err());

    let c = LearnerConfig { value_clip: 0.0, max_grad_norm: 0.0, ..LearnerConfig::default() };
    assert_eq!(c.loss_config().value_clip, None);
    assert_eq!(c.adamw_config().max_grad_norm, None);
    assert_eq!(LearnerConfig::default().loss_config(), LossConfig::default());
    assert_eq!(config_hash("a").len(), 64);
}

#[test]
fn the_proximal_policy_is_chosen_by_name_and_reaches_the_update() {
    let text = format!("{}\n", default_section()).replace("proximal = \"current\"", "proximal = \"behaviour\"");
    let parsed: LearnerConfig = toml::from_str(&text).unwrap();
    assert_eq!(parsed.proximal, Proximal::Behaviour);
    let update = crate::update::UpdateConfig::new(&parsed, 0.7, 0, 0).unwrap();
    assert_eq!(update.proximal, Proximal::Behaviour);
    let err = toml::from_str::<LearnerConfig>(&text.replace("\"behaviour\"", "\"behavior\"")).unwrap_err();
    assert!(err.to_string().contains("behavior"), "{err}");
}
