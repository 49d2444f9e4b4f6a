//! The model's building blocks with Hugging Face's parameter names: a linear layer
//! (`weight` `[out, in]`, optional `bias`), RMSNorm (`weight`) and the SwiGLU MLP
//! (`gate_proj`, `up_proj`, `down_proj`).

use tch::nn::{Init, Path};
use tch::{Kind, Tensor};

/// `y = x Wᵀ + b`, as `torch.nn.Linear`; fresh weights are N(0, std²), biases zero, as
/// transformers initialises Qwen2, Qwen3 and Llama.
#[derive(Debug)]
pub(crate) struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Linear {
    pub(crate) fn new(vs: Path, in_dim: i64, out_dim: i64, bias: bool, std: f64) -> Self {
        let weight = vs.var("weight", &[out_dim, in_dim], Init::Randn { mean: 0.0, stdev: std });
        let bias = bias.then(|| vs.var("bias", &[out_dim], Init::Const(0.0)));
        Self { weight, bias }
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Tensor {
        x.linear(&self.weight, self.bias.as_ref())
    }
}

/// Root-mean-square normalisation, computed in f32 and cast back, exactly as
/// transformers' `Qwen2RMSNorm`/`LlamaRMSNorm`:
/// `weight * (x.float() * rsqrt(mean(x.float()²) + eps)).to(x.dtype)`.
#[derive(Debug)]
pub(crate) struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    pub(crate) fn new(vs: Path, dim: i64, eps: f64) -> Self {
        Self { weight: vs.var("weight", &[dim], Init::Const(1.0)), eps }
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Tensor {
        let kind = x.kind();
        let h = x.to_kind(Kind::Float);
        let var = h.square().mean_dim(-1, true, Kind::Float);
        let h = h * (var + self.eps).rsqrt();
        &self.weight * h.to_kind(kind)
    }
}

/// The SwiGLU MLP: `down(silu(gate(x)) · up(x))`.
#[derive(Debug)]
pub(crate) struct Mlp {
    gate: Linear,
    up: Linear,
    down: Linear,
}

impl Mlp {
    pub(crate) fn new(vs: Path, hidden: i64, inter: i64, bias: bool, std: f64) -> Self {
        Self {
            gate: Linear::new(&vs / "gate_proj", hidden, inter, bias, std),
            up: Linear::new(&vs / "up_proj", hidden, inter, bias, std),
            down: Linear::new(&vs / "down_proj", inter, hidden, bias, std),
        }
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Tensor {
        self.down.forward(&(self.gate.forward(x).silu() * self.up.forward(x)))
    }
}
