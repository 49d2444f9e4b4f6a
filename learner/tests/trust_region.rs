//! The PPO trust region acts: an update split into four minibatch steps takes its ratio against
//! the policy before the first step, so after the first step the ratio moves and the clip binds
//! (clip fraction > 0, split by side, proximal KL > 0); a single-step update has ratio 1 by
//! construction (clip fraction and proximal KL exactly 0). That clipped tokens get no gradient
//! is checked on the loss itself (`golden::loss`).
//!
//! Why this can fail: the learner before minibatches took one step per batch with the ratio
//! against the current policy, so its clip fraction was 0 on every update.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use env_workers::Limits;
use episode::{run_episodes, EpisodeTask, PolicyRef, RolloutConfig, SystemPrompt, TrajectoryMeta};
use learner::optim::AdamW;
use learner::update::{grpo_update, Models, UpdateConfig};
use learner::LearnerConfig;
use policy::{ByteTokenizer, LoadedModel, ModelConfig, Sampler, Tokenizer};
use protocol::wire::{ActorId, GroupId, PolicyVersion, RunId, ScoredTrajectory, TaskFamily, TaskSpec, Verdict};
use tch::Device;

/// Eight sampled episodes in four groups of two, rewards 1 and 0 within each group (synthetic:
/// the untrained model solves nothing), so every group carries a learning signal.
fn batch(m: &LoadedModel) -> Vec<ScoredTrajectory> {
    let tasks: Vec<EpisodeTask> = (0..8)
        .map(|i| {
            EpisodeTask::initial(
                TaskSpec { family: TaskFamily::Math, seed: i / 2, difficulty: 1 },
                GroupId(u128::from(i / 2)),
            )
        })
        .collect();
    let cfg = RolloutConfig {
        system_prompt: SystemPrompt::Omit,
        max_new_tokens: 16,
        limits: Limits { max_turns: 2, max_message_chars: 4096 },
        ..RolloutConfig::default()
    };
    let meta = TrajectoryMeta {
        run_id: RunId::new("tr").unwrap(),
        actor_id: ActorId("a".into()),
        policy_version: PolicyVersion(0),
    };
    let policy = PolicyRef { model: &m.model, tokenizer: &ByteTokenizer };
    let played = tch::no_grad(|| run_episodes(policy, &tasks, &cfg, &meta, &mut Sampler::new(3))).unwrap();
    played
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let mut trajectory = e.trajectory;
            trajectory.outcome_reward = if i % 2 == 0 { 1.0 } else { 0.0 };
            ScoredTrajectory { trajectory, verdict: Verdict::NotRequested }
        })
        .collect()
}

fn update(minibatches: usize, lr: f64) -> learner::update::UpdateStats {
    let m = policy::seed::seeded(9, || LoadedModel::fresh(&ModelConfig::micro(), Device::Cpu, false)).unwrap();
    let items = batch(&m);
    let learner = LearnerConfig { lr, kl_coef: 0.0, minibatches, ..LearnerConfig::default() };
    let cfg = UpdateConfig::new(&learner, 0.7, ByteTokenizer.special_ids().pad, 0).unwrap();
    let mut opt = AdamW::from_named(m.vs.variables(), learner.adamw_config());
    grpo_update(Models { policy: &m.model, reference: None }, &mut opt, &items, &cfg).unwrap()
}

#[test]
fn four_minibatch_steps_make_the_clip_bind_and_one_step_cannot() {
    let four = update(4, 1e-2);
    assert_eq!(four.steps, 4, "four groups, four minibatches");
    assert_eq!(four.step, 4, "one optimizer step per minibatch");
    let l = four.loss;
    assert!(l.clip_fraction > 0.0, "the clip binds after the first step: {l:?}");
    assert!((l.clip_low_fraction + l.clip_high_fraction - l.clip_fraction).abs() < 1e-9, "{l:?}");
    assert!(l.approx_kl > 0.0, "the policy moved away from the proximal one: {l:?}");
    assert!(l.kl_behaviour > 0.0, "{l:?}");
    assert_eq!(four.trained_tokens as f64, l.tokens, "one epoch: each token once");

    let one = update(1, 1e-2);
    assert_eq!((one.steps, one.step), (1, 1));
    assert_eq!(one.loss.clip_fraction, 0.0, "a single step's ratio is 1");
    assert_eq!(one.loss.approx_kl, 0.0);
    assert_eq!(one.trained_tokens, four.trained_tokens, "the same batch");
}
