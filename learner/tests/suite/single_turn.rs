//! Single-turn GRPO in process (issue 14, section 3c): the trainer behind `reagent bench trl`
//! learns the reverse-a-word task from a random `micro` model.
//!
//! The learning test's power. Four fixed tasks, 8 completions of at most 16 tokens each, lr
//! 3e-3, 40 steps, two seeds. Measured (2026-11-24, release build): the mean sampled reward over
//! the first 10 steps was 0.057–0.076 and over the last 10 steps 0.319–0.387 on seeds 1–4 (a
//! rise of 0.25–0.32), and the greedy reward of the four prompts rose from 0 on every seed. The
//! test asks for a rise of 0.1 on each seed. Broken implementations:
//! - no update applied (or a zero gradient): the policy is the one it started as, and two means
//!   of 10 steps × 32 completions of the same policy differ by far less than 0.1 (the per-step
//!   mean reward's spread is about 0.03, the difference of two 10-step means about 0.015): fails;
//! - a gradient of the wrong sign: the reward falls rather than rises: fails;
//! - advantages not taken per prompt or log-probs of the wrong tokens: no steady signal, the same
//!   as no update: fails on both seeds but for a rise of several standard deviations by chance.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use learner::inproc::single_turn::{draw_tasks, SingleTurnConfig, SingleTurnTrainer};
use policy::{LoadedModel, ModelConfig};
use tch::Device;

#[test]
fn grpo_on_single_turn_tasks_raises_the_reward() {
    tch::set_num_threads(1);
    for seed in [1u64, 2] {
        let mut cfg = SingleTurnConfig::like_trl();
        cfg.learner.lr = 3e-3;
        cfg.seed = seed;
        cfg.max_new_tokens = 16;
        let model = policy::seed::seeded(seed as i64, || LoadedModel::fresh(&ModelConfig::micro(), Device::Cpu, false))
            .unwrap();
        let before = model.vs.variables()["model.embed_tokens.weight"].copy();
        let mut trainer = SingleTurnTrainer::new(model, cfg).unwrap();
        let tasks = draw_tasks(seed, 4);
        let greedy_before: f64 = trainer.greedy_rewards(&tasks).unwrap().iter().sum();
        let rewards: Vec<f64> = (0..40)
            .map(|_| {
                let s = trainer.step(&tasks).unwrap();
                assert_eq!(s.completions, 32);
                assert!(s.completion_tokens >= 32 && s.completion_tokens <= 32 * 16, "{s:?}");
                assert!(s.grad_norm.is_finite() && s.grad_norm > 0.0, "{s:?}");
                s.mean_reward
            })
            .collect();
        let mean = |r: &[f64]| r.iter().sum::<f64>() / r.len() as f64;
        let (first, last) = (mean(&rewards[..10]), mean(&rewards[30..]));
        assert!(
            last >= first + 0.1,
            "seed {seed}: mean reward {first:.3} over the first 10 steps, {last:.3} over the last 10"
        );
        let after = &trainer.model().vs.variables()["model.embed_tokens.weight"];
        assert!(!after.equal(&before), "seed {seed}: the weights did not change");
        let greedy_after: f64 = trainer.greedy_rewards(&tasks).unwrap().iter().sum();
        assert!(greedy_after > greedy_before, "seed {seed}: greedy reward {greedy_before} → {greedy_after}");
    }
}
