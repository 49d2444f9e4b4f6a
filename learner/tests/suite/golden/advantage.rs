//! GRPO and GAE advantages.
//!
//! ```python
//! import torch
//! # GRPO as veRL's compute_grpo_outcome_advantage (eps 1e-6, torch.std unbiased),
//! # except that a group of one gets 0 (veRL leaves r / (1 + eps)).
//! scores = torch.tensor([1.0, 0.0, 1.0, 0.5, 0.3, 0.7, 0.7, 0.7, 2.0, -1.0])
//! index  = ["a", "a", "a", "a", "b", "c", "c", "c", "d", "d"]
//! out = torch.zeros_like(scores)
//! for g in set(index):
//!     idx = [i for i, k in enumerate(index) if k == g]
//!     s = scores[idx]
//!     if len(idx) > 1:
//!         out[idx] = (s - s.mean()) / (s.std() + 1e-6)      # Dr. GRPO: s - s.mean()
//! # GAE as CleanRL's ppo.py, T=4 steps x N=2 envs, dones[t] = the episode ended at step t.
//! r = torch.tensor([[1.0, 0.5], [1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
//! v = torch.tensor([[0.5, 0.2], [0.4, 0.1], [0.3, 0.3], [0.2, 0.6]])
//! d = torch.tensor([[0., 0.], [0., 1.], [1., 0.], [0., 0.]])
//! last = torch.tensor([0.9, -0.4]); g, lam = 0.99, 0.95
//! adv = torch.zeros_like(r); la = torch.zeros(2)
//! for t in reversed(range(4)):
//!     nv = last if t == 3 else v[t + 1]
//!     live = 1.0 - d[t]
//!     la = r[t] + g * nv * live - v[t] + g * lam * live * la
//!     adv[t] = la
//! print(adv.flatten().tolist(), (adv + v).flatten().tolist())
//! ```

use learner::advantage::{gae, grpo_advantages, token_advantages, GaeInputs, GRPO_EPS};

use crate::golden::{assert_close, t2, values};

const REWARDS: [f32; 10] = [1.0, 0.0, 1.0, 0.5, 0.3, 0.7, 0.7, 0.7, 2.0, -1.0];
const GROUPS: [&str; 10] = ["a", "a", "a", "a", "b", "c", "c", "c", "d", "d"];

#[test]
fn grpo_matches_verl_including_singleton_and_equal_groups() {
    let adv = grpo_advantages(&REWARDS, &GROUPS, GRPO_EPS, true).unwrap();
    let want = [
        0.783_347_8,
        -1.305_579_7,
        0.783_347_8,
        -0.261_115_94,
        0.0, // group b: one member, no baseline
        0.0, // group c: equal rewards
        0.0,
        0.0,
        0.707_106_5, // group d: ±1.5 / (2.1213203 + 1e-6)
        -0.707_106_5,
    ];
    assert_close(&adv, &want, 1e-6);
}

#[test]
fn dr_grpo_only_centres() {
    let adv = grpo_advantages(&REWARDS, &GROUPS, GRPO_EPS, false).unwrap();
    assert_close(&adv, &[0.375, -0.625, 0.375, -0.125, 0.0, 0.0, 0.0, 0.0, 1.5, -1.5], 1e-7);
}

#[test]
fn grpo_edge_cases() {
    assert!(grpo_advantages::<u8>(&[], &[], GRPO_EPS, true).unwrap().is_empty());
    assert_eq!(grpo_advantages(&[5.0], &[1], GRPO_EPS, true).unwrap(), [0.0]);
    assert!(grpo_advantages(&[1.0, 2.0], &[1], GRPO_EPS, true).is_err());
}

#[test]
fn sequence_advantages_broadcast_to_trained_tokens() {
    let mask = t2(&[&[0.0, 1.0, 1.0], &[1.0, 0.0, 0.0]]).to_kind(tch::Kind::Bool);
    let tokens = token_advantages(&[0.5, -2.0], &mask).unwrap();
    assert_eq!(values(&tokens), [0.0, 0.5, 0.5, -2.0, 0.0, 0.0]);
    assert!(token_advantages(&[0.5], &mask).is_err());
}

#[test]
fn gae_matches_cleanrl_across_episode_ends() {
    let rewards = [1.0, 0.5, 1.0, 0.0, 1.0, 1.0, 0.0, 2.0];
    let vals = [0.5, 0.2, 0.4, 0.1, 0.3, 0.3, 0.2, 0.6];
    let dones = [false, false, false, true, true, false, false, false];
    let inputs = GaeInputs { rewards: &rewards, values: &vals, dones: &dones, last_values: &[0.9, -0.4], num_envs: 2 };
    let out = gae(&inputs, 0.99, 0.95).unwrap();
    let want_adv = [2.358_806_8, 0.304_95, 1.555_35, -0.1, 0.7, 2.238_262_2, 0.691, 1.004];
    let want_ret = [2.858_806_8, 0.504_95, 1.955_35, 0.0, 1.0, 2.538_262, 0.891, 1.604];
    assert_close(&out.advantages, &want_adv, 1e-6);
    assert_close(&out.returns, &want_ret, 1e-6);
    // By hand, env 0 at t = 2 (done): δ = 1 − 0.3 = 0.7, and nothing flows back through it.
    assert!((out.advantages[4] - 0.7).abs() < 1e-7);
}

#[test]
fn gae_rejects_mismatched_lengths() {
    let bad = GaeInputs { rewards: &[1.0; 3], values: &[0.0; 3], dones: &[false; 3], last_values: &[0.0], num_envs: 2 };
    assert!(gae(&bad, 0.99, 0.95).is_err());
    let empty = GaeInputs { rewards: &[], values: &[], dones: &[], last_values: &[0.0], num_envs: 1 };
    assert!(gae(&empty, 0.99, 0.95).unwrap().advantages.is_empty());
}
