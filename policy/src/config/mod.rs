//! The model's shape, with Hugging Face's `config.json` field names, so that a real Qwen2,
//! Qwen3 or Llama (3) checkpoint's config loads as it is, plus the built-in sizes `tiny` and `small` for the
//! byte-level tokenizer.
//!
//! Unknown fields are ignored, unlike the rest of Reagent's config (CODE_STYLE.md rule 7): a
//! `config.json` carries many fields that do not change the forward pass (`architectures`,
//! `torch_dtype`/`dtype`, `transformers_version`, token ids, `use_cache`, …) and their set grows
//! with every transformers release, so refusing unknown fields would refuse every real
//! checkpoint. The fields that *would* change the forward pass and that this model does not
//! implement (`rope_scaling` other than the default and Llama 3's, sliding-window attention, an
//! activation other than SiLU) are read and refused by name instead of being silently ignored.
//!
//! The families differ in three places: Qwen2 biases q/k/v (not o); Qwen3 has no biases and
//! RMS-normalises each query and key head (`q_norm`, `k_norm`, over `head_dim`, which its
//! configs give explicitly and need not be `hidden_size / num_attention_heads`); Llama 3.1+
//! rescales the rotary frequencies (`rope_scaling.rope_type = "llama3"`, see [`RopeScaling`]).

use std::path::Path;

use serde::Serialize;

use crate::error::{PolicyError, Result};
use crate::tokenizer::ByteTokenizer;

mod raw;

/// Llama 3's rotary frequency rescaling (`rope_type = "llama3"`), as transformers'
/// `_compute_llama3_parameters`: with wavelengths `λ = 2π / inv_freq`, frequencies whose λ exceed
/// `original_max_position_embeddings / low_freq_factor` are divided by `factor`, those below
/// `original_max_position_embeddings / high_freq_factor` are kept, and those between are
/// interpolated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RopeScaling {
    /// Always `"llama3"` (the one scaling implemented).
    pub rope_type: &'static str,
    /// How much the long wavelengths are stretched (8 in Llama 3.1).
    pub factor: f64,
    /// Sets the long-wavelength threshold (1 in Llama 3.1).
    pub low_freq_factor: f64,
    /// Sets the short-wavelength threshold (4 in Llama 3.1).
    pub high_freq_factor: f64,
    /// The context length of pre-training (8192 in Llama 3.1).
    pub original_max_position_embeddings: i64,
}

/// A Qwen2/Qwen3/Llama-family model's shape. Field names and meanings are Hugging Face's; see
/// [`ModelConfig::from_json_str`] for what is accepted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelConfig {
    /// `qwen2`, `qwen3` or `llama`: decides the attention biases (Qwen2: q/k/v biased, o not)
    /// and the per-head query/key norms (Qwen3).
    pub model_type: String,
    /// Rows of the embedding and of the LM head (at least the tokenizer's vocabulary).
    pub vocab_size: i64,
    /// Width of the residual stream.
    pub hidden_size: i64,
    /// Width of the SwiGLU MLP's inner layer.
    pub intermediate_size: i64,
    /// Number of decoder layers.
    pub num_hidden_layers: i64,
    /// Number of query heads.
    pub num_attention_heads: i64,
    /// Number of key/value heads (grouped-query attention; divides `num_attention_heads`).
    pub num_key_value_heads: i64,
    /// Width of one head (`hidden_size / num_attention_heads` unless given).
    pub head_dim: i64,
    /// Longest sequence the model was trained for; generation refuses to go past it.
    pub max_position_embeddings: i64,
    /// Base of the rotary embedding's frequencies.
    pub rope_theta: f64,
    /// Llama 3's rescaling of those frequencies, when the config asks for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rope_scaling: Option<RopeScaling>,
    /// Epsilon of RMSNorm.
    pub rms_norm_eps: f64,
    /// Whether the LM head reuses the embedding matrix (no `lm_head.weight`).
    pub tie_word_embeddings: bool,
    /// The MLP's activation; only `silu` is implemented.
    pub hidden_act: String,
    /// Llama's switch for biases on q/k/v/o (`None`: the model type's default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention_bias: Option<bool>,
    /// Llama's switch for biases on the MLP's projections.
    pub mlp_bias: bool,
    /// Standard deviation of the normal initialisation of fresh weights.
    pub initializer_range: f64,
}

impl RopeScaling {
    fn validate(&self) -> Result<()> {
        let field = |name: &str| format!("rope_scaling.{name}");
        if !(self.factor.is_finite() && self.factor >= 1.0) {
            return Err(PolicyError::config(field("factor"), format!("must be ≥ 1, got {}", self.factor)));
        }
        if !(self.low_freq_factor.is_finite() && self.low_freq_factor > 0.0) {
            return Err(PolicyError::config(
                field("low_freq_factor"),
                format!("must be > 0, got {}", self.low_freq_factor),
            ));
        }
        if !(self.high_freq_factor.is_finite() && self.high_freq_factor > self.low_freq_factor) {
            return Err(PolicyError::config(
                field("high_freq_factor"),
                format!("must exceed low_freq_factor {}, got {}", self.low_freq_factor, self.high_freq_factor),
            ));
        }
        if self.original_max_position_embeddings <= 0 {
            return Err(PolicyError::config(
                field("original_max_position_embeddings"),
                format!("must be a positive integer, got {}", self.original_max_position_embeddings),
            ));
        }
        Ok(())
    }
}

impl ModelConfig {
    /// Parses a Hugging Face `config.json`. Type errors and missing fields name the field;
    /// unsupported values are refused by name (see the module documentation).
    pub fn from_json_str(json: &str) -> Result<Self> {
        raw::parse(json)
    }

    /// Reads and parses a `config.json` file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError::io(path, e))?;
        Self::from_json_str(&text)
    }

    /// The config as `config.json` text that both this crate and transformers read.
    pub fn to_json_string(&self) -> String {
        // Serialising a struct of strings, numbers and options cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The built-in `tiny` model (about 1.6 M parameters) for tests and CPU runs, sized for
    /// the byte-level tokenizer.
    pub fn tiny() -> Self {
        Self::byte_level(128, 512, 6, 4, 2)
    }

    /// The built-in `small` model (about 25 M parameters), sized for the byte-level tokenizer.
    pub fn small() -> Self {
        Self::byte_level(512, 1536, 8, 8, 4)
    }

    /// The built-in `micro` model (two layers, 64 wide, about 0.17 M parameters): the smallest
    /// that learns `math` from reference episodes; about six times `tiny`'s tokens per second,
    /// for the test suite and quick CPU runs.
    pub fn micro() -> Self {
        Self::byte_level(64, 256, 2, 2, 1)
    }

    /// A built-in size by name: `micro`, `tiny` or `small`.
    pub fn builtin(name: &str) -> Result<Self> {
        match name {
            "micro" => Ok(Self::micro()),
            "tiny" => Ok(Self::tiny()),
            "small" => Ok(Self::small()),
            other => Err(PolicyError::config(
                "model",
                format!("unknown built-in size {other:?}; expected micro, tiny or small"),
            )),
        }
    }

    fn byte_level(hidden: i64, inter: i64, layers: i64, heads: i64, kv_heads: i64) -> Self {
        // The byte tokenizer's vocabulary, rounded up to a multiple of 64 for matmul-friendly
        // shapes; the spare rows are never produced by the tokenizer.
        let vocab = (ByteTokenizer::VOCAB_SIZE.div_ceil(64) * 64) as i64;
        Self {
            model_type: "qwen2".into(),
            vocab_size: vocab,
            hidden_size: hidden,
            intermediate_size: inter,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            head_dim: hidden / heads,
            max_position_embeddings: 4096,
            rope_theta: 10_000.0,
            rope_scaling: None,
            rms_norm_eps: 1e-6,
            tie_word_embeddings: false,
            hidden_act: "silu".into(),
            attention_bias: None,
            mlp_bias: false,
            initializer_range: 0.02,
        }
    }

    /// Whether q/k/v projections carry a bias (always for Qwen2; `attention_bias` for Qwen3 and
    /// Llama).
    pub fn qkv_bias(&self) -> bool {
        self.model_type == "qwen2" || self.attention_bias.unwrap_or(false)
    }

    /// Whether the output projection carries a bias (never for Qwen2; `attention_bias` for
    /// Qwen3 and Llama).
    pub fn o_bias(&self) -> bool {
        self.model_type != "qwen2" && self.attention_bias.unwrap_or(false)
    }

    /// Whether each query and key head is RMS-normalised before the rotary embedding (Qwen3's
    /// `q_norm`/`k_norm`).
    pub fn qk_norm(&self) -> bool {
        self.model_type == "qwen3"
    }

    /// The number of parameters (without a value head), for sizing and FLOPs estimates.
    pub fn num_parameters(&self) -> i64 {
        let (h, d, kv) = (self.hidden_size, self.head_dim, self.num_key_value_heads);
        let q = self.num_attention_heads * d;
        let attn = h * q + 2 * h * kv * d + q * h + if self.qkv_bias() { q + 2 * kv * d } else { 0 };
        let attn = attn + if self.o_bias() { h } else { 0 };
        let mlp = 3 * h * self.intermediate_size + if self.mlp_bias { 2 * self.intermediate_size + h } else { 0 };
        let qk_norm = if self.qk_norm() { 2 * d } else { 0 };
        let layer = attn + qk_norm + mlp + 2 * h;
        let embeddings = self.vocab_size * h * if self.tie_word_embeddings { 1 } else { 2 };
        self.num_hidden_layers * layer + embeddings + h
    }

    /// Bytes of f32 activations one token keeps for the backward pass of a training step: per
    /// decoder layer 8 × hidden (the two norms' inputs and outputs, the o-projection's output,
    /// the residual sums, the MLP's output), 4 × the query width (queries before and after the
    /// rotation, the attention's output before and after the head transpose), 3 × the key/value
    /// width (keys before and after the rotation, values) and 4 × intermediate (the MLP's gate,
    /// up, activated gate and product). The LM head is chunked and adds no `[T, vocab]` term.
    /// An estimate for sizing micro-batches: SmolLM2-135M comes to 1.64 MB a token, where a
    /// transformers forward of the same model kept 1.30 MB.
    pub fn activation_bytes_per_token(&self) -> u64 {
        let q = self.num_attention_heads * self.head_dim;
        let kv = self.num_key_value_heads * self.head_dim;
        let per_layer = 8 * self.hidden_size + 4 * q + 3 * kv + 4 * self.intermediate_size;
        (4 * self.num_hidden_layers * per_layer).max(1) as u64
    }

    /// Checks every value; the error names the first bad field.
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.model_type.as_str(), "qwen2" | "qwen3" | "llama") {
            return Err(PolicyError::config(
                "model_type",
                format!("expected qwen2, qwen3 or llama, got {:?}", self.model_type),
            ));
        }
        if let Some(r) = &self.rope_scaling {
            r.validate()?;
        }
        for (field, v) in [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
            ("max_position_embeddings", self.max_position_embeddings),
        ] {
            if v <= 0 {
                return Err(PolicyError::config(field, format!("must be a positive integer, got {v}")));
            }
        }
        if self.num_attention_heads % self.num_key_value_heads != 0 {
            return Err(PolicyError::config(
                "num_key_value_heads",
                format!(
                    "{} does not divide num_attention_heads {}",
                    self.num_key_value_heads, self.num_attention_heads
                ),
            ));
        }
        if self.head_dim % 2 != 0 {
            return Err(PolicyError::config(
                "head_dim",
                format!("rotary embeddings need an even head_dim, got {}", self.head_dim),
            ));
        }
        for (field, v) in [("rope_theta", self.rope_theta), ("rms_norm_eps", self.rms_norm_eps)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(PolicyError::config(field, format!("must be a finite positive number, got {v}")));
            }
        }
        if !(self.initializer_range.is_finite() && self.initializer_range >= 0.0) {
            return Err(PolicyError::config(
                "initializer_range",
                format!("must be finite and ≥ 0, got {}", self.initializer_range),
            ));
        }
        if self.hidden_act != "silu" {
            return Err(PolicyError::config(
                "hidden_act",
                format!("only silu is implemented, not {:?}", self.hidden_act),
            ));
        }
        Ok(())
    }
}
