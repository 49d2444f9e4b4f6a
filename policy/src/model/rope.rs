//! Rotary position embeddings in Hugging Face's convention: frequencies
//! `θ^(-2i/d)`, the angle table duplicated (`cat(freqs, freqs)`), and `rotate_half`
//! (`cat(-x₂, x₁)`), so that checkpoints trained with transformers work unchanged.
//!
//! ```text
//!  inv_freq[i] = 1 / θ^(2i/d)              i < d/2, f32  (then Llama 3's rescaling, if any)
//!  angle[b,t]  = pos[b,t] · inv_freq        (per row: left-padded rows have their own positions)
//!  x'          = x·cos(angle‖angle) + rotate_half(x)·sin(angle‖angle)
//! ```

use tch::{Device, Kind, Tensor};

use crate::config::RopeScaling;

/// The rotary embedding's inverse frequencies.
#[derive(Debug)]
pub(crate) struct Rope {
    inv_freq: Tensor,
}

impl Rope {
    pub(crate) fn new(head_dim: i64, theta: f64, scaling: Option<&RopeScaling>, device: Device) -> Self {
        // As transformers: arange in int64, then float, then base ** (…/dim), in f32.
        let exponent =
            Tensor::arange_start_step(0, head_dim, 2, (Kind::Int64, device)).to_kind(Kind::Float) / head_dim as f64;
        let inv_freq = Tensor::pow_scalar(theta, &exponent).reciprocal();
        let inv_freq = match scaling {
            Some(s) => llama3(&inv_freq, s),
            None => inv_freq,
        };
        Self { inv_freq }
    }

    /// `cos` and `sin` for positions `[B, T]`, shaped `[B, 1, T, head_dim]` to broadcast over
    /// heads, in `kind`.
    pub(crate) fn cos_sin(&self, positions: &Tensor, kind: Kind) -> (Tensor, Tensor) {
        let freqs = positions.to_kind(Kind::Float).unsqueeze(-1) * &self.inv_freq;
        let emb = Tensor::cat(&[&freqs, &freqs], -1).unsqueeze(1);
        (emb.cos().to_kind(kind), emb.sin().to_kind(kind))
    }
}

/// Llama 3's rescaled frequencies, step by step as transformers' `_compute_llama3_parameters`
/// (in f32): long wavelengths divided by `factor`, short ones kept, the band between
/// interpolated.
fn llama3(inv_freq: &Tensor, s: &RopeScaling) -> Tensor {
    let old_len = s.original_max_position_embeddings as f64;
    let (low_wavelen, high_wavelen) = (old_len / s.low_freq_factor, old_len / s.high_freq_factor);
    // `scalar / tensor` as torch computes it: the scalar cast to f32, one division.
    let over = |num: f64, t: &Tensor| t.full_like(num) / t;
    let wavelen = over(2.0 * std::f64::consts::PI, inv_freq);
    let long = wavelen.gt(low_wavelen);
    let scaled = (inv_freq / s.factor).where_self(&long, inv_freq);
    let smooth: Tensor = (over(old_len, &wavelen) - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    let smoothed: Tensor = (smooth.neg() + 1.0) * &scaled / s.factor + &smooth * &scaled;
    let medium = wavelen.lt(high_wavelen).logical_not().logical_and(&long.logical_not());
    smoothed.where_self(&medium, &scaled)
}

/// `cat(-x[..., d/2:], x[..., :d/2])`.
fn rotate_half(x: &Tensor) -> Tensor {
    let half = x.size().last().copied().unwrap_or(0) / 2;
    let x1 = x.narrow(-1, 0, half);
    let x2 = x.narrow(-1, half, half);
    Tensor::cat(&[&x2.neg(), &x1], -1)
}

/// Rotates `x` (`[B, heads, T, d]`) by the angles whose `cos`/`sin` are given.
pub(crate) fn apply(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
    x * cos + rotate_half(x) * sin
}
