//! AdamW with decoupled weight decay, warm-up and global gradient-norm clipping.
//!
//! ```python
//! import torch
//! w = torch.nn.Parameter(torch.tensor([[0.5, -0.3, 0.8], [0.1, 0.2, -0.7]]))
//! b = torch.nn.Parameter(torch.tensor([0.05, -0.02]))
//! opt = torch.optim.AdamW([{"params": [w], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}],
//!                         lr=0.01, betas=(0.9, 0.999), eps=1e-8, foreach=False)
//! def lr_at(step, peak=0.01, warmup=2):
//!     return peak * (step + 1) / warmup if step < warmup else peak
//! x = torch.tensor([[1.0, 2.0, -1.0], [0.5, -0.5, 3.0]])
//! for step in range(4):
//!     for g in opt.param_groups: g["lr"] = lr_at(step)
//!     opt.zero_grad()
//!     y = x @ w.t() + b
//!     loss = ((y - torch.tensor([[1.0, -1.0], [0.0, 2.0]])) ** 2).sum() * (step + 1)
//!     loss.backward()
//!     print(torch.nn.utils.clip_grad_norm_([w, b], max_norm=1.0, foreach=False))
//!     opt.step()
//! print(w, b, opt.state[w]["exp_avg"], opt.state[w]["exp_avg_sq"], opt.state[b]["exp_avg"], opt.state[b]["exp_avg_sq"])
//! ```

use learner::optim::{AdamW, AdamWConfig, LrSchedule, Param};
use tch::Tensor;

use crate::golden::{assert_close, t2, values};

fn setup() -> AdamW {
    let w = t2(&[&[0.5, -0.3, 0.8], &[0.1, 0.2, -0.7]]).set_requires_grad(true);
    let b = Tensor::from_slice(&[0.05f32, -0.02]).set_requires_grad(true);
    let params =
        vec![Param { name: "w".into(), tensor: w, decay: true }, Param { name: "b".into(), tensor: b, decay: false }];
    let config = AdamWConfig {
        schedule: LrSchedule { warmup_steps: 2, ..LrSchedule::constant(0.01) },
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.1,
        max_grad_norm: Some(1.0),
    };
    AdamW::new(params, config)
}

fn train_step(opt: &mut AdamW, step: usize) -> f64 {
    let x = t2(&[&[1.0, 2.0, -1.0], &[0.5, -0.5, 3.0]]);
    let target = t2(&[&[1.0, -1.0], &[0.0, 2.0]]);
    opt.zero_grad();
    let (w, b) = (&opt.params()[0].tensor, &opt.params()[1].tensor);
    let y = x.matmul(&w.tr()) + b;
    let loss = (y - target).square().sum(tch::Kind::Float) * (step + 1) as f64;
    loss.backward();
    opt.step().unwrap().grad_norm
}

#[test]
fn adamw_matches_torch_optim_adamw() {
    let mut opt = setup();
    let norms: Vec<f32> = (0..4).map(|i| train_step(&mut opt, i) as f32).collect();
    assert_close(&norms, &[39.845_177, 79.190_91, 117.289_23, 154.392_29], 1e-6);
    let p = opt.params();
    let w = [0.533_188_7, -0.264_003_2, 0.762_253_7, 0.064_957_514, 0.164_346_64, -0.662_595];
    assert_close(&values(&p[0].tensor), &w, 1e-6);
    assert_close(&values(&p[1].tensor), &[0.014_998_899, 0.015_012_247], 1e-6);
    let state = opt.state();
    assert_eq!(state.step, 4);
    let m_w = [-0.007_245_147, -0.088_051_64, 0.178_888_32, 0.001_445_173_9, 0.111_194_13, -0.254_154];
    let v_w = [1.776_914_6e-6, 2.620_566_5e-4, 1.081_409_4e-3, 7.303_554_4e-8, 4.175_888e-4, 2.180_524_6e-3];
    assert_close(&values(&state.tensors[0].1), &m_w, 1e-6);
    assert_close(&values(&state.tensors[1].1), &v_w, 1e-6);
    assert_close(&values(&state.tensors[2].1), &[0.017_275_304, -0.034_656_085], 1e-6);
    assert_close(&values(&state.tensors[3].1), &[1.007_708_8e-5, 4.049_796e-5], 1e-6);
}

#[test]
fn restored_state_continues_bitwise_like_the_original() {
    let mut a = setup();
    for i in 0..2 {
        train_step(&mut a, i);
    }
    let mut b = setup();
    tch::no_grad(|| {
        for (dst, src) in b.params().iter().zip(a.params()) {
            dst.tensor.shallow_clone().copy_(&src.tensor);
        }
    });
    let saved = a.state();
    let copy = learner::optim::OptimizerState {
        step: saved.step,
        tensors: saved.tensors.iter().map(|(n, t)| (n.clone(), t.copy())).collect(),
    };
    b.load_state(&copy).unwrap();
    for i in 2..4 {
        train_step(&mut a, i);
        train_step(&mut b, i);
    }
    for (x, y) in a.params().iter().zip(b.params()) {
        assert!(x.tensor.equal(&y.tensor), "{} differs after restore", x.name);
    }
    let missing = learner::optim::OptimizerState { step: 1, tensors: Vec::new() };
    assert!(b.load_state(&missing).is_err());
}

#[test]
fn a_non_finite_gradient_skips_the_update() {
    let mut opt = setup();
    let before = values(&opt.params()[0].tensor);
    opt.zero_grad();
    let loss = (&opt.params()[0].tensor * f64::NAN).sum(tch::Kind::Float);
    loss.backward();
    let err = opt.step().unwrap_err();
    assert!(err.to_string().contains("non-finite gradient norm"), "{err}");
    assert_eq!(values(&opt.params()[0].tensor), before);
    assert_eq!(opt.steps(), 0);
}

/// Mixed precision: bf16 parameters (the CUDA path, forced on the CPU) given the same gradients
/// as fp32 parameters get the same update in their fp32 masters, and the bf16 working copies
/// are the masters rounded. Golden values of torch.optim.AdamW on fp32 parameters:
///
/// ```python
/// import torch
/// w = torch.nn.Parameter(torch.tensor([[0.5, -0.25, 0.75], [0.125, 0.0625, -0.5]]))
/// b = torch.nn.Parameter(torch.tensor([0.03125, -0.015625]))
/// opt = torch.optim.AdamW([{"params": [w], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}],
///                         lr=1e-3, betas=(0.9, 0.999), eps=1e-8, foreach=False)
/// gw = torch.tensor([[1.0, -2.0, 0.5], [0.25, -0.125, 4.0]]); gb = torch.tensor([-0.5, 2.0])
/// for step in range(3):
///     opt.zero_grad()
///     ((w * gw * (step + 1)).sum() + (b * gb * (step + 1)).sum()).backward()
///     print(torch.nn.utils.clip_grad_norm_([w, b], max_norm=1.0, foreach=False))
///     opt.step()
/// print(w, b, opt.state[w]["exp_avg"], opt.state[w]["exp_avg_sq"])
/// ```
///
/// The torch wheel of `.libtorch` is the CUDA build and does not import without cuDNN on a
/// CPU-only machine, so these values were computed with a float32 transcription of that
/// snippet's arithmetic (`_single_tensor_adamw` and `clip_grad_norm_`, each operation rounded
/// to float32). Every value used is exact in bf16, so bf16 gradients equal the fp32 ones.
#[test]
fn bf16_parameters_step_their_fp32_masters_like_torch_adamw_on_fp32() {
    use tch::Kind;
    let w = t2(&[&[0.5, -0.25, 0.75], &[0.125, 0.0625, -0.5]]).to_kind(Kind::BFloat16).set_requires_grad(true);
    let b = Tensor::from_slice(&[0.03125f32, -0.015625]).to_kind(Kind::BFloat16).set_requires_grad(true);
    let params =
        vec![Param { name: "w".into(), tensor: w, decay: true }, Param { name: "b".into(), tensor: b, decay: false }];
    let config = AdamWConfig { schedule: LrSchedule::constant(1e-3), weight_decay: 0.1, ..AdamWConfig::default() };
    let mut opt = AdamW::new(params, config);
    assert!(opt.has_masters());
    let gw = t2(&[&[1.0, -2.0, 0.5], &[0.25, -0.125, 4.0]]).to_kind(Kind::BFloat16);
    let gb = Tensor::from_slice(&[-0.5f32, 2.0]).to_kind(Kind::BFloat16);
    let mut norms = Vec::new();
    for step in 0..3 {
        opt.zero_grad();
        let k = (step + 1) as f64;
        let (pw, pb) = (&opt.params()[0].tensor, &opt.params()[1].tensor);
        let loss = (pw * &gw * k).sum(Kind::Float) + (pb * &gb * k).sum(Kind::Float);
        loss.backward();
        norms.push(opt.step().unwrap().grad_norm as f32);
    }
    assert_close(&norms, &[5.057_482_2, 10.114_964, 15.172_447], 1e-6);
    let masters = opt.master_weights();
    let want_w = [0.496_850_34, -0.246_925_3, 0.746_775_3, 0.121_962_79, 0.065_480_955, -0.502_849_64];
    assert_close(&values(&masters[0].1), &want_w, 1e-6);
    assert_close(&values(&masters[1].1), &[0.034_249_995, -0.018_625], 1e-6);
    let state = opt.state();
    let m_w = [0.053_583_97, -0.107_167_94, 0.026_791_984, 0.013_395_992, -0.006_697_996, 0.214_335_87];
    let v_w = [1.171_704_4e-4, 4.686_817_7e-4, 2.929_261e-5, 7.323_152_7e-6, 1.830_788_2e-6, 1.874_727e-3];
    assert_close(&values(&state.tensors[0].1), &m_w, 1e-6);
    assert_close(&values(&state.tensors[1].1), &v_w, 1e-6);
    for (p, (_, master)) in opt.params().iter().zip(&masters) {
        assert_eq!(master.kind(), Kind::Float, "{}: the master is fp32", p.name);
        assert_eq!(p.tensor.kind(), Kind::BFloat16, "{}: the working copy stays bf16", p.name);
        assert!(p.tensor.equal(&master.to_kind(Kind::BFloat16)), "{}: the working copy is the master rounded", p.name);
    }
}
