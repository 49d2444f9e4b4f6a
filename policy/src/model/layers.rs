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

    /// A layer over given tensors (not variables of a store).
    pub(crate) fn from_tensors(weight: Tensor, bias: Option<Tensor>) -> Self {
        Self { weight, bias }
    }

    pub(crate) fn weight(&self) -> &Tensor {
        &self.weight
    }

    pub(crate) fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Tensor {
        x.linear(&self.weight, self.bias.as_ref())
    }
}

/// Root-mean-square normalisation, computed in f32 and cast back, exactly as
/// transformers' `Qwen2RMSNorm`/`LlamaRMSNorm`:
/// `weight * (x.float() * rsqrt(mean(x.float()²) + eps)).to(x.dtype)`. In f32 (the CPU's kind)
/// there is nothing to cast, and torch's one-call `rms_norm` computes the same (to rounding)
/// with one operation instead of seven.
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
        if kind == Kind::Float && self.weight.kind() == Kind::Float {
            return x.rms_norm([self.weight.size()[0]], Some(&self.weight), self.eps);
        }
        self.stepwise(x)
    }

    /// The formula step by step, as transformers writes it (any kind).
    fn stepwise(&self, x: &Tensor) -> Tensor {
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

    /// `gate_proj ‖ up_proj` as one layer (see [`super::fused`]).
    pub(crate) fn fused_gate_up(&self) -> Linear {
        super::fused::stack(&[&self.gate, &self.up])
    }

    /// The MLP; with `gate_up` (from [`Mlp::fused_gate_up`]) one product replaces two.
    pub(crate) fn forward(&self, x: &Tensor, gate_up: Option<&Linear>) -> Tensor {
        let hidden = match gate_up {
            Some(gate_up) => {
                let both = gate_up.forward(x);
                let inter = both.size().last().copied().unwrap_or(0) / 2;
                both.narrow(-1, 0, inter).silu() * both.narrow(-1, inter, inter)
            }
            None => self.gate.forward(x).silu() * self.up.forward(x),
        };
        self.down.forward(&hidden)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_call_rms_norm_matches_the_formula() {
        tch::manual_seed(3);
        let vs = tch::nn::VarStore::new(tch::Device::Cpu);
        let norm = RmsNorm::new(vs.root() / "n", 16, 1e-6);
        tch::no_grad(|| {
            norm.weight.shallow_clone().copy_(&(Tensor::rand([16], (Kind::Float, tch::Device::Cpu)) + 0.5))
        });
        let x = (Tensor::randn([3, 5, 16], (Kind::Float, tch::Device::Cpu)) * 3.0).set_requires_grad(true);
        let grads = |y: Tensor| Tensor::run_backward(&[(&y * &y).sum(Kind::Float)], &[&x, &norm.weight], false, false);
        let (fast, slow) = (norm.forward(&x), norm.stepwise(&x));
        let gap = |a: &Tensor, b: &Tensor| (a - b).abs().max().double_value(&[]);
        assert!(gap(&fast, &slow) < 1e-5, "outputs differ by {}", gap(&fast, &slow));
        for (i, (a, b)) in grads(fast).iter().zip(&grads(slow)).enumerate() {
            assert!(gap(a, b) < 1e-4, "gradient {i} differs by {}", gap(a, b));
        }
    }
}
