//! Grouped-query self-attention with rotary embeddings, and the boolean masks it takes.
//!
//! ```text
//!  x ─ q_proj ─ [B,T,H,d] ─ (q_norm) ─ rope ─┐
//!  x ─ k_proj ─ [B,T,K,d] ─ (k_norm) ─ rope ─┼─ (cache) ─ softmax(qkᵀ/√d + mask) v ─ o_proj
//!  x ─ v_proj ─ [B,T,K,d] ───────────────────┘
//! ```
//!
//! The per-head norms (`q_norm`, `k_norm`: RMSNorm over `head_dim`) are Qwen3's. Query head
//! `h` reads key/value head `h / (H/K)` (transformers' `repeat_kv` order); torch's attention does
//! this itself (`enable_gqa`), so the K/V are never copied out to all `H` heads.
//!
//! A query may attend to a key when the key is a real token (not padding) at or before it.
//! Every query may also attend to itself, so that padding queries — whose outputs nobody
//! reads — still have one key and never produce NaN.
//!
//! Where every row is unpadded or right-padded (the learner's batches) no mask is built:
//! attention runs with `is_causal`, which gives real queries exactly the keys above and lets
//! torch pick a fused kernel (flash attention refuses any explicit mask and would leave the
//! math kernel, which keeps the `[B, H, T, T]` matrix for backward). Left-padded rows
//! (generation's prompts) and cached decoding keep the explicit mask.

use tch::nn::Path;
use tch::{Kind, Tensor};

use super::cache::KvCache;
use super::layers::{Linear, RmsNorm};
use super::rope;
use crate::config::ModelConfig;

/// One layer's attention (`self_attn.{q,k,v,o}_proj`).
#[derive(Debug)]
pub(crate) struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    /// Qwen3's per-head query and key norms.
    qk_norm: Option<(RmsNorm, RmsNorm)>,
    heads: i64,
    kv_heads: i64,
    head_dim: i64,
}

impl Attention {
    pub(crate) fn new(vs: Path, cfg: &ModelConfig) -> Self {
        let (h, d, std) = (cfg.hidden_size, cfg.head_dim, cfg.initializer_range);
        let q_dim = cfg.num_attention_heads * d;
        let kv_dim = cfg.num_key_value_heads * d;
        Self {
            q: Linear::new(&vs / "q_proj", h, q_dim, cfg.qkv_bias(), std),
            k: Linear::new(&vs / "k_proj", h, kv_dim, cfg.qkv_bias(), std),
            v: Linear::new(&vs / "v_proj", h, kv_dim, cfg.qkv_bias(), std),
            o: Linear::new(&vs / "o_proj", q_dim, h, cfg.o_bias(), std),
            qk_norm: cfg.qk_norm().then(|| {
                let norm = |name: &str| RmsNorm::new(&vs / name, d, cfg.rms_norm_eps);
                (norm("q_norm"), norm("k_norm"))
            }),
            heads: cfg.num_attention_heads,
            kv_heads: cfg.num_key_value_heads,
            head_dim: d,
        }
    }

    /// `q_proj ‖ k_proj ‖ v_proj` as one layer (see [`super::fused`]); `None` with per-head
    /// norms, which must see the queries and keys before the rotation.
    pub(crate) fn fused_qkv(&self) -> Option<Linear> {
        self.qk_norm.is_none().then(|| super::fused::stack(&[&self.q, &self.k, &self.v]))
    }

    /// `x`: `[B, T, hidden]`; `mask`: `[B, 1, T, T_keys]` (true = may attend), or `None` for
    /// plain causal attention over `T` unpadded or right-padded keys; with a cache,
    /// this layer's keys and values are appended to it and attention covers all of them. With
    /// `qkv` (from [`Attention::fused_qkv`]) one product and one rotation replace three and two.
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        cos_sin: &(Tensor, Tensor),
        mask: Option<&Tensor>,
        cache: Option<(&mut KvCache, usize)>,
        qkv: Option<&Linear>,
    ) -> Tensor {
        let (b, t) = (x.size()[0], x.size()[1]);
        let (q, k, v) = match qkv {
            Some(qkv) => self.project_fused(x, qkv, cos_sin),
            None => self.project(x, cos_sin),
        };
        let (k, v) = match cache {
            Some((cache, layer)) => cache.append(layer, &k, &v),
            None => (k, v),
        };
        let gqa = self.heads != self.kv_heads;
        let out = Tensor::scaled_dot_product_attention(&q, &k, &v, mask, 0.0, mask.is_none(), None, gqa);
        self.o.forward(&out.transpose(1, 2).contiguous().view([b, t, self.heads * self.head_dim]))
    }

    /// Rotated queries `[B, H, T, d]`, rotated keys and values `[B, K, T, d]`.
    fn project(&self, x: &Tensor, (cos, sin): &(Tensor, Tensor)) -> (Tensor, Tensor, Tensor) {
        let (b, t) = (x.size()[0], x.size()[1]);
        let heads = |p: &Linear, n: i64, norm: Option<&RmsNorm>| {
            let x = p.forward(x).view([b, t, n, self.head_dim]);
            norm.map_or(x.shallow_clone(), |norm| norm.forward(&x)).transpose(1, 2)
        };
        let (q_norm, k_norm) = self.qk_norm.as_ref().map(|(q, k)| (q, k)).unzip();
        let q = rope::apply(&heads(&self.q, self.heads, q_norm), cos, sin);
        let k = rope::apply(&heads(&self.k, self.kv_heads, k_norm), cos, sin);
        (q, k, heads(&self.v, self.kv_heads, None))
    }

    /// [`Attention::project`] through the fused projection: queries and keys rotated together.
    fn project_fused(&self, x: &Tensor, qkv: &Linear, (cos, sin): &(Tensor, Tensor)) -> (Tensor, Tensor, Tensor) {
        let (b, t) = (x.size()[0], x.size()[1]);
        let (h, kv) = (self.heads, self.kv_heads);
        let all = qkv.forward(x).view([b, t, h + 2 * kv, self.head_dim]).transpose(1, 2);
        let qk = rope::apply(&all.narrow(1, 0, h + kv), cos, sin);
        (qk.narrow(1, 0, h), qk.narrow(1, h, kv), all.narrow(1, h + kv, kv))
    }
}

/// The attention mask for queries in slots `start..start+t` over keys in slots
/// `0..key_real.size(1)`: `[B, 1, t, T_keys]`, true where key ≤ query and the key is real, or
/// key = query. A decode step — one query after the prompt, in the last slot — sees every real
/// key, and its own slot is real (generation marks every generated slot real), so its mask is
/// `key_real` as is: no per-step index arithmetic.
pub(crate) fn causal_mask(key_real: &Tensor, start: i64, t: i64) -> Tensor {
    let tk = key_real.size()[1];
    if t == 1 && start > 0 && start + 1 == tk {
        return key_real.view([-1, 1, 1, tk]);
    }
    let device = key_real.device();
    let q = Tensor::arange_start(start, start + t, (Kind::Int64, device)).unsqueeze(1);
    let k = Tensor::arange(tk, (Kind::Int64, device)).unsqueeze(0);
    let causal = k.le_tensor(&q).unsqueeze(0).logical_and(&key_real.unsqueeze(1));
    causal.logical_or(&k.eq_tensor(&q).unsqueeze(0)).unsqueeze(1)
}

/// Position ids from a `[B, T]` mask of real tokens: each real token's index among its row's
/// real tokens (so left padding does not shift positions); padding gets 0.
pub(crate) fn positions_from_mask(real: &Tensor) -> Tensor {
    (real.to_kind(Kind::Int64).cumsum(1, Kind::Int64) - 1).clamp_min(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// transformers' `repeat_kv`: each key/value head repeated `rep` times along the head axis.
    fn repeat_kv(x: &Tensor, rep: i64) -> Tensor {
        let s = x.size();
        x.unsqueeze(2).expand([s[0], s[1], rep, s[2], s[3]], false).reshape([s[0], s[1] * rep, s[2], s[3]])
    }

    #[test]
    fn grouped_query_attention_matches_expanded_key_values() {
        tch::manual_seed(7);
        let (b, h, kv, t, d) = (3, 4, 2, 6, 8);
        let q = Tensor::randn([b, h, t, d], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        let k = Tensor::randn([b, kv, t, d], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        let v = Tensor::randn([b, kv, t, d], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        let real = Tensor::from_slice(&[[false, true, true, true, true, true]; 3].concat()).view([b, t]);
        let mask = causal_mask(&real, 0, t);
        let attend = |gqa: bool| {
            let (keys, values) =
                if gqa { (k.shallow_clone(), v.shallow_clone()) } else { (repeat_kv(&k, 2), repeat_kv(&v, 2)) };
            let out = Tensor::scaled_dot_product_attention(&q, &keys, &values, Some(&mask), 0.0, false, None, gqa);
            let grads = Tensor::run_backward(&[(&out * &out).sum(Kind::Float)], &[&q, &k, &v], false, false);
            (out, grads)
        };
        let ((fused, fused_grads), (expanded, expanded_grads)) = (attend(true), attend(false));
        let gap = |a: &Tensor, b: &Tensor| (a - b).abs().max().double_value(&[]);
        assert!(gap(&fused, &expanded) < 1e-5, "outputs differ by {}", gap(&fused, &expanded));
        for (i, (a, e)) in fused_grads.iter().zip(&expanded_grads).enumerate() {
            assert!(gap(a, e) < 1e-5, "gradient {i} differs by {}", gap(a, e));
        }
    }

    #[test]
    fn a_decode_step_mask_is_the_general_mask() {
        let real = Tensor::from_slice(&[false, true, true, true, true, true, true, true]).view([2, 4]);
        let general = {
            let tk = real.size()[1];
            let q = Tensor::arange_start(3, 4, (Kind::Int64, tch::Device::Cpu)).unsqueeze(1);
            let k = Tensor::arange(tk, (Kind::Int64, tch::Device::Cpu)).unsqueeze(0);
            let causal = k.le_tensor(&q).unsqueeze(0).logical_and(&real.unsqueeze(1));
            causal.logical_or(&k.eq_tensor(&q).unsqueeze(0)).unsqueeze(1)
        };
        let fast = causal_mask(&real, 3, 1);
        assert_eq!(fast.size(), [2, 1, 1, 4]);
        assert!(fast.equal(&general), "{fast:?} against {general:?}");
    }
}
