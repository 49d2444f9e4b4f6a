//! Mixed precision on the CPU (the GPU path forced with `precision = bf16`): the model computes
//! in bf16, AdamW keeps fp32 masters and moments, and 50 updates at lr 1e-6 move the masters as
//! far as the same 50 updates move an fp32 model, with the loss curve following the fp32 one.
//!
//! Why this can fail: updating bf16 weights in place (the learner before fp32 masters) rounds
//! every step of 1e-6 on weights of size ~0.02–0.2 (bf16 spacing 1.2e-4–9.8e-4 there) to
//! nothing, so the bf16 run moves by ~0 where the fp32 run moves by ~5e-5 per weight: a relative
//! difference of ~1, where this test allows 1e-2. Adam normalises each coordinate's step, so
//! bf16's ~0.4 % gradient error changes the distance moved far less than that.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use episode::{reference_episode, RolloutConfig, SystemPrompt, TrajectoryMeta};
use learner::optim::{AdamW, AdamWConfig, LrSchedule};
use learner::tensors::{flatten, Sequence, TokenBatch};
use policy::{ByteTokenizer, LoadedModel, ModelConfig, Tokenizer};
use protocol::wire::{ActorId, PolicyVersion, RunId, TaskFamily, TaskSpec};
use tch::{Device, Kind, Tensor};

const STEPS: usize = 50;

fn batch() -> Vec<Sequence> {
    let meta = TrajectoryMeta {
        run_id: RunId::new("p").unwrap(),
        actor_id: ActorId("a".into()),
        policy_version: PolicyVersion(0),
    };
    let cfg = RolloutConfig { system_prompt: SystemPrompt::Omit, ..RolloutConfig::default() };
    (0..4)
        .map(|seed| {
            let spec = TaskSpec { family: TaskFamily::Math, seed, difficulty: 1 };
            flatten(&reference_episode(spec, &ByteTokenizer, &cfg, &meta).unwrap().trajectory).unwrap()
        })
        .collect()
}

/// Trains a `micro` model drawn from seed 5 in `kind` for [`STEPS`] SFT updates on `seqs`;
/// returns the loss curve and the fp32 weights' distance from where they started.
fn train(kind: Kind, seqs: &[Sequence]) -> (Vec<f64>, f64, AdamW) {
    let m = policy::seed::seeded(5, || LoadedModel::fresh_as(&ModelConfig::micro(), Device::Cpu, kind, false)).unwrap();
    let config = AdamWConfig { schedule: LrSchedule::constant(1e-6), ..AdamWConfig::default() };
    let mut opt = AdamW::from_named(m.vs.variables(), config);
    assert_eq!(opt.has_masters(), kind != Kind::Float);
    let start: Vec<Tensor> = opt.master_weights().iter().map(|(_, t)| t.copy()).collect();
    let refs: Vec<&Sequence> = seqs.iter().collect();
    let tokens = TokenBatch::new(&refs, ByteTokenizer.special_ids().pad, Device::Cpu).unwrap();
    let mut losses = Vec::new();
    for _ in 0..STEPS {
        opt.zero_grad();
        let loss = tokens.nll(&m.model).unwrap();
        loss.backward();
        losses.push(loss.double_value(&[]));
        opt.step().unwrap();
    }
    let moved: f64 = opt
        .master_weights()
        .iter()
        .zip(&start)
        .map(|((_, now), before)| {
            assert_eq!(now.kind(), Kind::Float);
            (now - before).square().sum(Kind::Double).double_value(&[])
        })
        .sum::<f64>()
        .sqrt();
    (losses, moved, opt)
}

#[test]
fn bf16_compute_with_fp32_masters_moves_the_weights_as_far_as_fp32() {
    let seqs = batch();
    let (f32_losses, f32_moved, _) = train(Kind::Float, &seqs);
    let (bf16_losses, bf16_moved, opt) = train(Kind::BFloat16, &seqs);
    // 50 Adam steps of 1e-6 over ~0.17 M weights with a gradient: about 5e-5 · √n.
    assert!(f32_moved > 1e-3, "the fp32 run moved its weights by {f32_moved}");
    let rel = (bf16_moved - f32_moved).abs() / f32_moved;
    assert!(rel <= 1e-2, "bf16 masters moved {bf16_moved}, fp32 weights {f32_moved}: relative difference {rel}");
    for (i, (a, b)) in bf16_losses.iter().zip(&f32_losses).enumerate() {
        assert!((a - b).abs() <= 2e-2 * b.abs(), "step {i}: bf16 loss {a}, fp32 loss {b}");
    }
    // The working copies are bf16 and are the masters rounded.
    for (p, (_, master)) in opt.params().iter().zip(opt.master_weights()) {
        assert_eq!(p.tensor.kind(), Kind::BFloat16);
        assert!(p.tensor.equal(&master.to_kind(Kind::BFloat16)), "{} is its master rounded", p.name);
    }
}
