//! The PPO objective: clipped surrogate (both clip sides, asymmetric bounds), truncated
//! importance weights, k3 KL, entropy, clipped value loss, sequence-mean-of-token-mean.
//!
//! ```python
//! import torch
//! # B=3 sequences, T=4 tokens; sequence 2 is fully masked.
//! logp  = torch.tensor([[-1.0, -0.5, -2.0, -0.1], [-0.3, -1.2, -0.7, -3.0], [-1.0]*4], requires_grad=True)
//! behav = torch.tensor([[-1.5, -0.4, -1.0, -0.1], [-0.3, -1.0, -1.4, -0.5], [-2.0]*4])
//! prox  = torch.tensor([[-1.2, -0.45, -1.9, -0.2], [-0.35, -1.1, -0.4, -2.5], [-1.0]*4])
//! ref   = torch.tensor([[-1.1, -0.6, -1.5, -0.3], [-0.2, -1.0, -1.0, -2.0], [0.0]*4])
//! adv   = torch.tensor([[1.0, -1.0, -0.5, 2.0], [-0.5, 1.5, -2.0, 1.0], [1.0]*4])
//! mask  = torch.tensor([[1., 1., 1., 0.], [1., 1., 1., 1.], [0.]*4])
//! ent   = torch.tensor([[0.6, 0.5, 0.4, 0.3], [0.2, 0.1, 0.9, 0.8], [1.0]*4])
//! lo, hi, cap = 0.2, 0.28, 2.0
//! def smtm(x, m):
//!     c = m.sum(1); per = (x * m).sum(1) / c.clamp(min=1); has = (c > 0).float()
//!     return (per * has).sum() / has.sum().clamp(min=1)
//! def surrogate(lp, old, a):
//!     ratio = torch.exp((lp - old).clamp(-20, 20))
//!     l1 = -a * ratio; l2 = -a * ratio.clamp(1 - lo, 1 + hi)
//!     return torch.maximum(l1, l2), (l2 > l1).float()
//! s, act = surrogate(logp, behav, adv)                          # plain PPO: old = behaviour
//! print(smtm(s, mask), (act * mask).sum() / mask.sum())
//! w = torch.exp((prox - behav).clamp(-20, 20)).clamp(max=cap)   # truncated IS weight
//! s2, act2 = surrogate(logp, prox, adv)
//! pol = smtm(w * s2, mask)
//! kl_tok = ((ref - logp).exp() - (ref - logp) - 1).clamp(-10, 10)
//! kl = smtm(kl_tok, mask); e = smtm(ent, mask)
//! values = torch.tensor([[0.5, 0.1, -0.2, 0.0], [1.0, 0.3, 0.8, 0.2], [0.]*4], requires_grad=True)
//! old_v  = torch.tensor([[0.2, 0.3, 0.0, 0.0], [0.9, 0.1, 0.1, 0.2], [0.]*4])
//! ret    = torch.tensor([[0.4, 0.0, 0.5, 0.0], [1.5, 0.2, 0.0, -0.3], [0.]*4])
//! vc = old_v + (values - old_v).clamp(-0.2, 0.2)
//! val = smtm(0.5 * torch.maximum((values - ret) ** 2, (vc - ret) ** 2), mask)
//! total = pol + 0.001 * kl - 0.01 * e + 0.5 * val
//! total.backward()
//! approx = ((torch.exp(logp - prox) - 1 - (logp - prox)) * mask).sum() / mask.sum()
//! logits = torch.tensor([[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]]); lp = logits.log_softmax(-1)
//! print(-(lp.exp() * lp).sum(-1))
//! ```

use learner::loss::terms::{
    clipped_surrogate, kl_k3, seq_mean_token_mean, token_entropy, truncated_importance_weights,
};
use learner::loss::{ppo_loss, LossConfig, LossInputs, ValueInputs};
use tch::{Kind, Tensor};

use crate::golden::{assert_close, assert_scalar, t2, values};

struct Batch {
    logp: Tensor,
    behav: Tensor,
    prox: Tensor,
    reference: Tensor,
    adv: Tensor,
    mask: Tensor,
    entropy: Tensor,
}

fn batch() -> Batch {
    Batch {
        logp: t2(&[&[-1.0, -0.5, -2.0, -0.1], &[-0.3, -1.2, -0.7, -3.0], &[-1.0; 4]]).set_requires_grad(true),
        behav: t2(&[&[-1.5, -0.4, -1.0, -0.1], &[-0.3, -1.0, -1.4, -0.5], &[-2.0; 4]]),
        prox: t2(&[&[-1.2, -0.45, -1.9, -0.2], &[-0.35, -1.1, -0.4, -2.5], &[-1.0; 4]]),
        reference: t2(&[&[-1.1, -0.6, -1.5, -0.3], &[-0.2, -1.0, -1.0, -2.0], &[0.0; 4]]),
        adv: t2(&[&[1.0, -1.0, -0.5, 2.0], &[-0.5, 1.5, -2.0, 1.0], &[1.0; 4]]),
        mask: t2(&[&[1.0, 1.0, 1.0, 0.0], &[1.0; 4], &[0.0; 4]]),
        entropy: t2(&[&[0.6, 0.5, 0.4, 0.3], &[0.2, 0.1, 0.9, 0.8], &[1.0; 4]]),
    }
}

fn config() -> LossConfig {
    LossConfig { entropy_coef: 0.01, ..LossConfig::default() }
}

#[test]
fn clipped_surrogate_clips_each_side_at_its_own_bound() {
    let b = batch();
    let (loss, active) = clipped_surrogate(&b.logp, &b.behav, &b.adv, 0.2, 0.28);
    let masked = values(&(loss * &b.mask));
    // (0,0): r = e^0.5 = 1.65, A = 1 → clipped at 1 + 0.28 (not 1.2): loss −1.28.
    // (0,2): r = e^−1 = 0.37, A = −0.5 → clipped at 1 − 0.2: loss 0.5 · 0.8 = 0.4.
    // (1,2): r = e^0.7 = 2.01, A = −2 → the pessimistic unclipped branch: 2 · e^0.7.
    let want = [-1.28, 0.904_837_4, 0.4, 0.0, 0.5, -1.228_096, 4.027_505_4, -0.082_085, 0.0, 0.0, 0.0, 0.0];
    assert_close(&masked, &want, 1e-6);
    assert_eq!(values(&(active * &b.mask)), [1.0, 0., 1.0, 0., 0., 0., 0., 0., 0., 0., 0., 0.]);
}

#[test]
fn plain_ppo_aggregates_as_sequence_mean_of_token_mean() {
    let b = batch();
    let parts = ppo_loss(&inputs_of(&b), &config()).unwrap();
    // ((−1.28 + 0.9048374 + 0.4) / 3 + (0.5 − 1.228096 + 4.0275054 − 0.082085) / 4) / 2
    assert_scalar(&parts.total, 0.406_305_13, 1e-6);
    let s = parts.stats();
    assert_close(&[s.clip_fraction as f32, s.is_weight_mean as f32, s.tokens as f32], &[2.0 / 7.0, 1.0, 7.0], 1e-6);
    // (0,0) clipped above 1 + clip_high, (0,2) below 1 − clip_low.
    assert_close(&[s.clip_high_fraction as f32, s.clip_low_fraction as f32], &[1.0 / 7.0, 1.0 / 7.0], 1e-6);
    // KL(behaviour ‖ current), k3 per token: Σ (e^{l−b} − (l−b) − 1) over the 7 trained tokens / 7,
    // the same as approx_kl here (the behaviour policy is the proximal one).
    let k3 = |d: f64| d.exp() - d - 1.0;
    let want_kl = [(-1.5, -1.0), (-0.4, -0.5), (-1.0, -2.0), (-0.3, -0.3), (-1.0, -1.2), (-1.4, -0.7), (-0.5, -3.0)]
        .iter()
        .map(|(b, l): &(f64, f64)| k3(l - b))
        .sum::<f64>()
        / 7.0;
    assert_close(&[s.kl_behaviour as f32, s.approx_kl as f32], &[want_kl as f32, want_kl as f32], 1e-6);

    // Clipped tokens get no gradient; every other trained token does, padding none.
    parts.total.backward();
    let grad = values(&b.logp.grad());
    let clipped = [0, 2];
    for (i, (g, m)) in grad.iter().zip(values(&b.mask)).enumerate() {
        if clipped.contains(&i) || m == 0.0 {
            assert_eq!(*g, 0.0, "token {i}: clipped or padding, gradient {g}");
        } else {
            assert!(g.abs() > 1e-4, "token {i}: trained and unclipped, gradient {g}");
        }
    }
}

#[test]
fn full_objective_with_staleness_kl_entropy_and_value() {
    let b = batch();
    let v = t2(&[&[0.5, 0.1, -0.2, 0.0], &[1.0, 0.3, 0.8, 0.2], &[0.0; 4]]).set_requires_grad(true);
    let old_v = t2(&[&[0.2, 0.3, 0.0, 0.0], &[0.9, 0.1, 0.1, 0.2], &[0.0; 4]]);
    let ret = t2(&[&[0.4, 0.0, 0.5, 0.0], &[1.5, 0.2, 0.0, -0.3], &[0.0; 4]]);
    let inputs = LossInputs {
        logp: &b.logp,
        behaviour_logp: &b.behav,
        prox_logp: Some(&b.prox),
        advantages: &b.adv,
        mask: &b.mask,
        ref_logp: Some(&b.reference),
        entropy: Some(&b.entropy),
        value: Some(ValueInputs { values: &v, old_values: &old_v, returns: &ret }),
    };
    let parts = ppo_loss(&inputs, &config()).unwrap();
    let s = parts.stats();
    let got = [s.policy, s.kl, s.entropy, s.value, s.total, s.clip_fraction, s.approx_kl, s.is_weight_mean];
    let want = [0.205_403_39, 0.124_608_54, 0.5, 0.114_375_01, 0.257_715_5, 1.0 / 7.0, 0.025_846_703, 0.957_008_5];
    assert_close(&got.map(|x| x as f32), &want, 2e-6);
    assert_close(&[s.is_truncated_fraction as f32], &[1.0 / 7.0], 1e-6);

    parts.total.backward();
    let grad_logp = [
        -0.274_771_03,
        0.150_822_1,
        0.030_548_5,
        0.0,
        0.062_486_853,
        -0.153_539_67,
        3.239_773e-5,
        -0.010_475_41,
        0.0,
        0.0,
        0.0,
        0.0,
    ];
    assert_close(&values(&b.logp.grad()), &grad_logp, 2e-6);
    let grad_v = [0.008_333_333, 0.0, -0.058_333_334, 0.0, -0.031_25, 0.003_125, 0.05, 0.031_25, 0.0, 0.0, 0.0, 0.0];
    assert_close(&values(&v.grad()), &grad_v, 2e-6);
}

#[test]
fn truncated_importance_weights_cap_and_carry_no_gradient() {
    let b = batch();
    let prox = b.prox.set_requires_grad(true);
    let (w, truncated) = truncated_importance_weights(&prox, &b.behav, 2.0);
    let want = [1.349_858_8, 0.951_229_5, 0.406_569_66, 0.904_837_4, 0.951_229_5, 0.904_837_4, 2.0, 0.135_335_28];
    assert_close(&values(&w)[..8], &want, 1e-6);
    assert_eq!(values(&truncated)[6], 1.0);
    assert!(!w.requires_grad());
}

#[test]
fn k3_kl_and_entropy() {
    let b = batch();
    let kl = values(&(kl_k3(&b.logp, &b.reference) * &b.mask));
    let want = [0.004_837_4, 0.004_837_4, 0.148_721_22, 0.0, 0.005_170_94, 0.021_402_717, 0.040_818_214, 0.718_281_7];
    assert_close(&kl[..8], &want, 1e-6);
    // By hand: identical policies have zero KL; e^1 − 1 − 1 = 0.7182818 for a log-ratio of 1.
    assert_eq!(values(&kl_k3(&b.logp, &b.logp)), vec![0.0; 12]);
    let logits = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 0.0, 0.0, 0.0]).reshape([1, 2, 3]);
    assert_close(&values(&token_entropy(&logits)), &[0.832_395_6, 3f32.ln()], 1e-6);
}

#[test]
fn all_masked_and_empty_batches_give_zero_not_nan() {
    let x = t2(&[&[f32::NAN, 1.0], &[2.0, 3.0]]).set_requires_grad(true);
    let mask = Tensor::zeros([2, 2], (Kind::Float, tch::Device::Cpu));
    let logp = t2(&[&[f32::NEG_INFINITY, -1.0], &[-1.0, -1.0]]).set_requires_grad(true);
    let inputs = LossInputs {
        logp: &logp,
        behaviour_logp: &x,
        prox_logp: Some(&x),
        advantages: &x,
        mask: &mask,
        ref_logp: Some(&x),
        entropy: Some(&x),
        value: None,
    };
    let parts = ppo_loss(&inputs, &config()).unwrap();
    assert_eq!(parts.stats().total, 0.0);
    parts.total.backward();
    assert_eq!(values(&logp.grad()), [0.0; 4]);

    let empty = Tensor::zeros([0, 5], (Kind::Float, tch::Device::Cpu));
    assert_eq!(values(&seq_mean_token_mean(&empty, &empty)), [0.0]);
    let bad_mask = Tensor::ones([3, 3], (Kind::Float, tch::Device::Cpu));
    let b = batch();
    let mismatched = LossInputs { mask: &bad_mask, ..inputs_of(&b) };
    assert!(ppo_loss(&mismatched, &config()).is_err());
}

fn inputs_of(b: &Batch) -> LossInputs<'_> {
    LossInputs {
        logp: &b.logp,
        behaviour_logp: &b.behav,
        prox_logp: None,
        advantages: &b.adv,
        mask: &b.mask,
        ref_logp: None,
        entropy: None,
        value: None,
    }
}
