//! Grouped-query self-attention with rotary embeddings, and the boolean masks it takes.
//!
//! ```text
//!  x ─ q_proj ─ [B,T,H,d] ─ (q_norm) ─ rope ─┐
//!  x ─ k_proj ─ [B,T,K,d] ─ (k_norm) ─ rope ─┼─ (cache) ─ repeat_kv ×H/K ─ softmax(qkᵀ/√d + mask) v ─ o_proj
//!  x ─ v_proj ─ [B,T,K,d] ───────────────────┘
//! ```
//!
//! The per-head norms (`q_norm`, `k_norm`: RMSNorm over `head_dim`) are Qwen3's.
//!
//! A query may attend to a key when the key is a real token (not padding) at or before it.
//! Every query may also attend to itself, so that padding queries — whose outputs nobody
//! reads — still have one key and never produce NaN.

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

    /// `x`: `[B, T, hidden]`; `mask`: `[B, 1, T, T_keys]` (true = may attend); with a cache,
    /// this layer's keys and values are appended to it and attention covers all of them.
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        cos_sin: &(Tensor, Tensor),
        mask: &Tensor,
        cache: Option<(&mut KvCache, usize)>,
    ) -> Tensor {
        let (b, t) = (x.size()[0], x.size()[1]);
        let heads = |p: &Linear, n: i64, norm: Option<&RmsNorm>| {
            let x = p.forward(x).view([b, t, n, self.head_dim]);
            norm.map_or(x.shallow_clone(), |norm| norm.forward(&x)).transpose(1, 2)
        };
        let (q_norm, k_norm) = self.qk_norm.as_ref().map(|(q, k)| (q, k)).unzip();
        let (cos, sin) = cos_sin;
        let q = rope::apply(&heads(&self.q, self.heads, q_norm), cos, sin);
        let k = rope::apply(&heads(&self.k, self.kv_heads, k_norm), cos, sin);
        let v = heads(&self.v, self.kv_heads, None);
        let (k, v) = match cache {
            Some((cache, layer)) => cache.append(layer, &k, &v),
            None => (k, v),
        };
        let rep = self.heads / self.kv_heads;
        let (k, v) = (repeat_kv(&k, rep), repeat_kv(&v, rep));
        let out = Tensor::scaled_dot_product_attention(&q, &k, &v, Some(mask), 0.0, false, None, false);
        self.o.forward(&out.transpose(1, 2).contiguous().view([b, t, self.heads * self.head_dim]))
    }
}

/// Repeats each key/value head `rep` times along the head axis (transformers' `repeat_kv`).
fn repeat_kv(x: &Tensor, rep: i64) -> Tensor {
    if rep == 1 {
        return x.shallow_clone();
    }
    let s = x.size();
    x.unsqueeze(2).expand([s[0], s[1], rep, s[2], s[3]], false).reshape([s[0], s[1] * rep, s[2], s[3]])
}

/// The attention mask for queries in slots `start..start+t` over keys in slots
/// `0..key_real.size(1)`: `[B, 1, t, T_keys]`, true where key ≤ query and the key is real, or
/// key = query.
pub(crate) fn causal_mask(key_real: &Tensor, start: i64, t: i64) -> Tensor {
    let device = key_real.device();
    let tk = key_real.size()[1];
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
