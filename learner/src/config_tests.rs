//! The `[learner]` section as `config/default.toml` carries it, checked against the defaults.

use super::*;

/// The section's text for `config/default.toml` (without the `[learner]` header line).
const DEFAULT_SECTION: &str = r#"
# How the RRM's judgement is used (DESIGN.md section 3): "outcome" (environment reward only),
# "critique" (Reagent-C: a refined attempt after the critique; outcome reward), "score"
# (Reagent-R: outcome + score_weight * score) or "unified" (Reagent-U: both attempts, each
# rewarded with outcome + score_weight * score).
feedback = "outcome"
# The weight of the RRM score in the reward (lambda; 0.3 in the paper's code).
score_weight = 0.3
# "grpo" (group-normalised outcome advantages, the paper's default) or "gae" (value head).
advantage = "grpo"
# Initial and refined attempts are normalised in separate GRPO groups.
separate_attempt_groups = true
# GRPO divides by the group's standard deviation (false: Dr. GRPO, mean-centred only).
grpo_std_normalize = true
# epsilon in (r - mean) / (std + epsilon).
grpo_eps = 1e-6
# GAE discount and lambda (advantage = "gae").
gamma = 0.99
gae_lambda = 0.95
# PPO ratio clipped to [1 - clip_low, 1 + clip_high] (asymmetric, "clip-higher").
clip_low = 0.2
clip_high = 0.28
# KL penalty to the frozen reference policy (k3 estimator); 0 disables it.
kl_coef = 0.001
# Entropy bonus.
entropy_coef = 0.0
# Value loss weight and clipping range (advantage = "gae"); value_clip = 0 disables clipping.
value_coef = 0.5
value_clip = 0.2
# Stale trajectories: the importance weight pi_learner / pi_behaviour is truncated at is_cap;
# those more than max_staleness policy versions behind are dropped (and counted).
is_cap = 2.0
max_staleness = 4
# AdamW: peak learning rate, linear warm-up, then "constant" or "cosine" decay to
# min_lr_ratio * lr at total_steps (cosine needs total_steps > warmup_steps).
lr = 1e-6
warmup_steps = 0
lr_decay = "constant"
total_steps = 0
min_lr_ratio = 0.0
beta1 = 0.9
beta2 = 0.999
adam_eps = 1e-8
# Decoupled weight decay, applied to matrices only (not biases or norm gains).
weight_decay = 0.01
# Global gradient-norm clip; 0 disables.
max_grad_norm = 1.0
# Seed of the learner's random number generators.
seed = 0
# Publish weights every this many updates, and checkpoint every this many.
publish_every = 1
checkpoint_every = 10
# Newest checkpoints kept (2 or more lets a corrupt newest one fall back to its predecessor).
keep_checkpoints = 3
# Where the learner's state comes from at start: "auto" (the newest intact checkpoint, else a
# fresh start), "never" (fresh; refused if checkpoints exist), or a checkpoint directory.
resume = "auto"
"#;

#[test]
fn the_documented_section_is_the_default() {
    let parsed: LearnerConfig = toml::from_str(DEFAULT_SECTION).unwrap();
    assert_eq!(parsed, LearnerConfig::default());
    parsed.validate().unwrap();
}

#[test]
fn unknown_keys_and_bad_values_name_the_key() {
    let err = toml::from_str::<LearnerConfig>(&format!("{DEFAULT_SECTION}\nclip_hgh = 0.3\n")).unwrap_err();
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
    let with = |v: &str| toml::from_str::<LearnerConfig>(&DEFAULT_SECTION.replace(r#"resume = "auto""#, v));
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
