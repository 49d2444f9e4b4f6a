//! The chunked LM head ([`policy::head`]) against the full-logits computation it replaces:
//! log-probs and entropies of the sampled tokens, and every parameter's gradient through a loss
//! of both, agree within 1e-5 — whether the head runs in one chunk or in many (two-phase
//! backward), with tied and untied embeddings, at temperature 1 and 0.7.

use std::collections::BTreeMap;

use policy::logprob::{entropy, shifted_logprobs};
use policy::{LoadedModel, ModelConfig};
use tch::{Device, Kind, Tensor};

use crate::common::max_abs_diff;

fn model(tied: bool) -> LoadedModel {
    let mut c = ModelConfig::tiny();
    c.num_hidden_layers = 2;
    c.tie_word_embeddings = tied;
    policy::seed::seeded(3, || LoadedModel::fresh(&c, Device::Cpu, false)).unwrap()
}

/// Two rows, the second right-padded, and per-token loss weights for log-probs and entropies.
fn inputs() -> (Tensor, Tensor, Tensor, Tensor) {
    let ids = policy::seed::seeded(5, || Tensor::randint(300, [2, 13], (Kind::Int64, Device::Cpu)));
    let mask = Tensor::ones([2, 13], (Kind::Int64, Device::Cpu));
    let _ = mask.get(1).narrow(0, 9, 4).fill_(0);
    let a = policy::seed::seeded(6, || Tensor::randn([2, 12], (Kind::Float, Device::Cpu)));
    let b = policy::seed::seeded(7, || Tensor::randn([2, 12], (Kind::Float, Device::Cpu)));
    (ids, mask, a, b)
}

fn grads(m: &LoadedModel) -> BTreeMap<String, Tensor> {
    let out = m.vs.variables().into_iter().map(|(n, v)| (n, v.grad().copy())).collect();
    m.vs.variables().values().for_each(|v| {
        let mut g = v.grad();
        let _ = g.zero_();
    });
    out
}

/// The pre-chunking computation: full logits, log-softmax over the vocabulary.
fn reference(m: &LoadedModel, temperature: f64) -> (Tensor, Tensor, BTreeMap<String, Tensor>) {
    let (ids, mask, a, b) = inputs();
    let logits = m.model.forward(&ids, Some(&mask)).unwrap().logits;
    let logp = shifted_logprobs(&logits, &ids, temperature).unwrap();
    let ent = entropy(&logits.narrow(1, 0, 12), temperature).unwrap();
    ((&logp * &a).sum(Kind::Float) + (&ent * &b).sum(Kind::Float)).backward();
    (logp.detach(), ent.detach(), grads(m))
}

#[test]
fn chunked_scores_and_gradients_match_the_full_log_softmax() {
    for tied in [false, true] {
        for temperature in [1.0, 0.7] {
            let m = model(tied);
            let (logp_ref, ent_ref, grads_ref) = reference(&m, temperature);
            // 24 positions: one chunk (the head with autograd), and chunks of 5 (recomputed).
            for chunk in [64, 5] {
                let (ids, mask, a, b) = inputs();
                let s = m.model.token_scores_in_chunks(&ids, Some(&mask), temperature, true, chunk).unwrap();
                let ent = s.entropy.as_ref().unwrap();
                let case = format!("tied {tied}, T {temperature}, chunk {chunk}");
                assert!(max_abs_diff(&s.logp, &logp_ref) < 1e-5, "{case}: logp");
                assert!(max_abs_diff(ent, &ent_ref) < 1e-5, "{case}: entropy");
                ((&s.logp * &a).sum(Kind::Float) + (ent * &b).sum(Kind::Float)).backward();
                s.backward().unwrap();
                for (name, g) in grads(&m) {
                    let want = &grads_ref[&name];
                    let scale = want.abs().max().double_value(&[]).max(1e-3);
                    let diff = max_abs_diff(&g, want);
                    assert!(diff < 1e-5 * scale.max(1.0), "{case}: {name} gradient differs by {diff:.2e}");
                }
                assert_eq!(s.logp.size(), vec![2, 12]);
            }
        }
    }
}

#[test]
fn token_logprobs_without_gradient_match_and_bad_arguments_are_refused() {
    let m = model(false);
    let (ids, mask, _, _) = inputs();
    let (logp_ref, _, _) = reference(&m, 0.7);
    let lp = tch::no_grad(|| m.model.token_logprobs(&ids, Some(&mask), 0.7)).unwrap();
    assert!(max_abs_diff(&lp, &logp_ref) < 1e-5);
    assert!(m.model.token_scores_in_chunks(&ids, None, 1.0, false, 0).is_err(), "empty chunks");
    assert!(m.model.token_scores(&ids, None, 0.0, false).is_err(), "temperature 0");
    // Without gradient, a multi-chunk result needs no second phase.
    let s = tch::no_grad(|| m.model.token_scores_in_chunks(&ids, None, 1.0, false, 5)).unwrap();
    assert!(!s.logp.requires_grad() && s.entropy.is_none());
    s.backward().unwrap();
}
