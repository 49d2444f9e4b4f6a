//! The PPO trust region acts: an update split into four minibatch steps takes its ratio against
//! the policy before the first step, so after the first step the ratio moves and the clip binds
//! (clip fraction > 0, split by side, proximal KL > 0); a single-step update has ratio 1 by
//! construction (clip fraction and proximal KL exactly 0). That clipped tokens get no gradient
//! is checked on the loss itself (`golden::loss`).
//!
//! Why this can fail: the learner before minibatches took one step per batch with the ratio
//! against the current policy, so its clip fraction was 0 on every update.
//!
//! And the cut into micro-batches (`micro_batch_tokens`: longest first within a token budget)
//! changes how much padding the passes compute, not the update: the loss and the gradient's
//! norm match the one-pass update's at 1e-5, and at most 0.1 % of the weights after the step
//! are more than 1 % of the learning rate from it. AdamW's first step moves each weight by about
//! ±lr·g/(|g| + ε), so a wrongly weighted micro-batch flips the sign of many: weighting every
//! other micro-batch 1.5× moved 9,561 of the micro model's 164,416 weights by more than 1 % of
//! lr. Summation order alone moves only weights whose gradient is near ε (one weight, by 3 % of
//! lr, in the batch here), so a bound on their count, not on the largest difference, is what
//! f32 arithmetic allows.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use env_workers::Limits;
use episode::{run_episodes, EpisodeTask, PolicyRef, RolloutConfig, SystemPrompt, TrajectoryMeta};
use learner::optim::AdamW;
use learner::update::{grpo_update, Models, UpdateConfig};
use learner::LearnerConfig;
use policy::{ByteTokenizer, LoadedModel, ModelConfig, Sampler, Tokenizer};
use protocol::wire::{ActorId, GroupId, PolicyVersion, RunId, ScoredTrajectory, TaskFamily, TaskSpec, Verdict};
use tch::{Device, Tensor};

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
    update_cut(minibatches, lr, 0).0
}

/// One update of the seeded micro model; its stats and the weights after it.
fn update_cut(
    minibatches: usize,
    lr: f64,
    token_budget: usize,
) -> (learner::update::UpdateStats, Vec<(String, Tensor)>) {
    let m = policy::seed::seeded(9, || LoadedModel::fresh(&ModelConfig::micro(), Device::Cpu, false)).unwrap();
    let items = batch(&m);
    let learner = LearnerConfig { lr, kl_coef: 0.0, minibatches, ..LearnerConfig::default() };
    let mut cfg = UpdateConfig::new(&learner, 0.7, ByteTokenizer.special_ids().pad, 0).unwrap();
    cfg.micro_batch_tokens = token_budget;
    let mut opt = AdamW::from_named(m.vs.variables(), learner.adamw_config());
    let stats = grpo_update(Models { policy: &m.model, reference: None }, &mut opt, &items, &cfg).unwrap();
    let mut weights: Vec<(String, Tensor)> = m.vs.variables().into_iter().collect();
    weights.sort_by(|a, b| a.0.cmp(&b.0));
    (stats, weights)
}

#[test]
fn micro_batches_by_length_cut_padding_and_leave_the_update_as_it_was() {
    let (one, w_one) = update_cut(1, 1e-2, 0);
    let longest = batch_longest();
    // A budget of two longest rows: several passes, each of like lengths.
    let (cut, w_cut) = update_cut(1, 1e-2, 2 * longest);
    assert_eq!(one.padded_tokens, 8 * longest, "one pass pads every row to the longest");
    assert!(cut.padded_tokens < one.padded_tokens && cut.padded_tokens >= cut.tokens, "{cut:?}");
    assert_eq!((cut.trained_tokens, cut.steps), (one.trained_tokens, one.steps));
    assert!((cut.loss.total - one.loss.total).abs() < 1e-5, "{} vs {}", cut.loss.total, one.loss.total);
    // The gradient's size (AdamW's first step does not see a uniform scale error; this does).
    let (g_cut, g_one) = (cut.optimizer.grad_norm, one.optimizer.grad_norm);
    assert!((g_cut - g_one).abs() <= 1e-5 * g_one, "gradient norm {g_cut} vs {g_one}");
    let (mut total, mut off) = (0i64, 0i64);
    for ((name, a), (_, b)) in w_one.iter().zip(&w_cut) {
        let diff = (a - b).abs();
        total += diff.numel() as i64;
        off += diff.gt(0.01 * 1e-2).sum(tch::Kind::Int64).int64_value(&[]);
        assert!(diff.max().double_value(&[]) < 1e-2, "{name}: a weight moved by more than lr after the cut update");
    }
    assert!(off * 1000 <= total, "{off} of {total} weights differ by more than 1 % of lr after the cut update");
}

/// The longest trajectory of [`batch`]'s, in tokens.
fn batch_longest() -> usize {
    let m = policy::seed::seeded(9, || LoadedModel::fresh(&ModelConfig::micro(), Device::Cpu, false)).unwrap();
    batch(&m).iter().map(|s| learner::tensors::flatten(&s.trajectory).unwrap().ids.len()).max().unwrap()
}

#[test]
fn four_minibatch_steps_make_the_clip_bind_and_one_step_cannot() {
    let four = update(4, 1e-2);
    assert_eq!(four.steps, 4, "four groups, four minibatches");
    assert_eq!(four.step, 4, "one optimizer step per minibatch");
    let l = four.loss;
    assert!(l.clip_fraction > 0.0, "the clip binds after the first step: {l:?}");
    assert!((l.clip_low_fraction + l.clip_high_fraction - l.clip_fraction).abs() < 1e-6, "{l:?}");
    assert!(l.approx_kl > 0.0, "the policy moved away from the proximal one: {l:?}");
    assert!(l.kl_behaviour > 0.0, "{l:?}");
    assert_eq!(four.trained_tokens as f64, l.tokens, "one epoch: each token once");

    let one = update(1, 1e-2);
    assert_eq!((one.steps, one.step), (1, 1));
    assert_eq!(one.loss.clip_fraction, 0.0, "a single step's ratio is 1");
    assert_eq!(one.loss.approx_kl, 0.0);
    assert_eq!(one.trained_tokens, four.trained_tokens, "the same batch");
}
