//! The weights of cached decoding, fused: per layer, `q_proj`, `k_proj` and `v_proj` stacked
//! into one projection and `gate_proj` with `up_proj` into another, so that a decode step runs
//! two matrix products where it ran five (at a few rows per step, each operation's fixed cost
//! outweighs its arithmetic).
//!
//! ```text
//!  qkv.weight     = cat(q_proj.weight, k_proj.weight, v_proj.weight)   [(H + 2K)·d, hidden]
//!  gate_up.weight = cat(gate_proj.weight, up_proj.weight)              [2·intermediate, hidden]
//! ```
//!
//! With a bf16 model they also hold the LM head's weight cast to f32 (the head's logits are f32
//! products of bf16 values, [`crate::head`]).
//!
//! They are copies taken once per generation call, after the last optimizer step: the var
//! store, checkpoints and exports keep the separate Hugging Face tensors, and training uses
//! those.

use tch::Tensor;

use super::layers::Linear;

/// One layer's fused projections.
#[derive(Debug)]
pub(crate) struct FusedLayer {
    /// `q_proj ‖ k_proj ‖ v_proj`; `None` where per-head norms (Qwen3) sit between the
    /// projections and the rotation, which then run separately.
    pub(crate) qkv: Option<Linear>,
    /// `gate_proj ‖ up_proj`.
    pub(crate) gate_up: Linear,
}

/// Every layer's fused projections, for [`super::CausalLm::step`].
#[derive(Debug)]
pub(crate) struct FusedWeights {
    pub(crate) layers: Vec<FusedLayer>,
    /// The LM head's weight in f32 when the model's kind is another (the logits are f32
    /// products: [`crate::head`]), cast once here rather than at every decode step.
    pub(crate) head_f32: Option<Tensor>,
}

/// Stacks linear layers' outputs into one (weights and biases concatenated along the output
/// axis, without gradient). All or none of `parts` have a bias.
pub(crate) fn stack(parts: &[&Linear]) -> Linear {
    tch::no_grad(|| {
        let weights: Vec<&Tensor> = parts.iter().map(|p| p.weight()).collect();
        let biases: Option<Vec<&Tensor>> = parts.iter().map(|p| p.bias()).collect();
        Linear::from_tensors(Tensor::cat(&weights, 0), biases.map(|b| Tensor::cat(&b, 0)))
    })
}
