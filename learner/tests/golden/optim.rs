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

use crate::{assert_close, t2, values};

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
