//! Reading Hugging Face's `config.json`: both the transformers ≤ 4 form (`rope_theta`,
//! `rope_scaling`) and the transformers ≥ 5 form (`rope_parameters`), with HF's defaults for
//! absent optional fields, and errors that name the field.

use serde::Deserialize;

use super::{ModelConfig, RopeScaling};
use crate::error::{PolicyError, Result};

/// Parses `config.json` text into a checked [`ModelConfig`].
pub(super) fn parse(json: &str) -> Result<ModelConfig> {
    let de = &mut serde_json::Deserializer::from_str(json);
    let raw: Raw = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let detail = e.into_inner().to_string();
        // A missing field is reported at the enclosing object; name the field itself.
        let missing = detail.strip_prefix("missing field `").and_then(|r| r.split('`').next());
        let field = match (path.as_str(), missing) {
            (".", Some(name)) => name.to_string(),
            (".", None) => "config.json".to_string(),
            (_, Some(name)) => format!("{path}.{name}"),
            (_, None) => path,
        };
        PolicyError::config(field, detail)
    })?;
    raw.resolve()
}

/// What `config.json` may hold; turned into a [`ModelConfig`] by [`Raw::resolve`].
#[derive(Debug, Deserialize)]
struct Raw {
    #[serde(default = "qwen2")]
    model_type: String,
    vocab_size: i64,
    hidden_size: i64,
    intermediate_size: i64,
    num_hidden_layers: i64,
    num_attention_heads: i64,
    num_key_value_heads: Option<i64>,
    head_dim: Option<i64>,
    max_position_embeddings: i64,
    rope_theta: Option<f64>,
    rope_scaling: Option<RopeParameters>,
    rope_parameters: Option<RopeParameters>,
    #[serde(default = "default_eps")]
    rms_norm_eps: f64,
    #[serde(default)]
    tie_word_embeddings: bool,
    #[serde(default = "silu")]
    hidden_act: String,
    attention_bias: Option<bool>,
    #[serde(default)]
    mlp_bias: bool,
    #[serde(default = "default_init")]
    initializer_range: f64,
    #[serde(default)]
    use_sliding_window: bool,
    layer_types: Option<Vec<String>>,
}

/// `rope_parameters` (transformers ≥ 5) or `rope_scaling` (before).
#[derive(Debug, Deserialize)]
struct RopeParameters {
    #[serde(alias = "type")]
    rope_type: Option<String>,
    rope_theta: Option<f64>,
    factor: Option<f64>,
    low_freq_factor: Option<f64>,
    high_freq_factor: Option<f64>,
    original_max_position_embeddings: Option<i64>,
}

impl RopeParameters {
    /// Llama 3's scaling from these parameters (`field` names them in errors); `None` for the
    /// default rotary embedding; an error for any other kind.
    fn scaling(&self, field: &str) -> Result<Option<RopeScaling>> {
        match self.rope_type.as_deref() {
            None | Some("default") => Ok(None),
            Some("llama3") => {
                let need = |v: Option<f64>, name: &str| {
                    v.ok_or_else(|| PolicyError::config(format!("{field}.{name}"), "llama3 scaling needs it"))
                };
                let original = self.original_max_position_embeddings.ok_or_else(|| {
                    PolicyError::config(format!("{field}.original_max_position_embeddings"), "llama3 scaling needs it")
                })?;
                Ok(Some(RopeScaling {
                    rope_type: "llama3",
                    factor: need(self.factor, "factor")?,
                    low_freq_factor: need(self.low_freq_factor, "low_freq_factor")?,
                    high_freq_factor: need(self.high_freq_factor, "high_freq_factor")?,
                    original_max_position_embeddings: original,
                }))
            }
            Some(other) => Err(PolicyError::config(
                format!("{field}.rope_type"),
                format!("only the default and llama3 rotary embeddings are implemented, not {other:?}"),
            )),
        }
    }
}

fn qwen2() -> String {
    "qwen2".into()
}
fn silu() -> String {
    "silu".into()
}
fn default_eps() -> f64 {
    1e-6
}
fn default_init() -> f64 {
    0.02
}

impl Raw {
    fn resolve(self) -> Result<ModelConfig> {
        let mut rope_scaling = None;
        for (field, p) in [("rope_scaling", &self.rope_scaling), ("rope_parameters", &self.rope_parameters)] {
            if let Some(scaling) = p.as_ref().map(|p| p.scaling(field)).transpose()?.flatten() {
                rope_scaling = Some(scaling);
            }
        }
        let nested = self.rope_parameters.as_ref().and_then(|p| p.rope_theta);
        let rope_theta = match (self.rope_theta, nested) {
            (Some(a), Some(b)) if a != b => {
                return Err(PolicyError::config("rope_theta", format!("{a} disagrees with rope_parameters ({b})")))
            }
            (a, b) => a.or(b).unwrap_or(10_000.0),
        };
        if self.use_sliding_window {
            return Err(PolicyError::config("use_sliding_window", "sliding-window attention is not implemented"));
        }
        if let Some(t) = self.layer_types.iter().flatten().find(|t| *t != "full_attention") {
            return Err(PolicyError::config("layer_types", format!("only full_attention is implemented, not {t:?}")));
        }
        let heads = self.num_attention_heads;
        let head_dim = match self.head_dim {
            Some(d) => d,
            // Qwen3's configuration class defaults it (its configs always give it).
            None if self.model_type == "qwen3" => 128,
            None if heads > 0 && self.hidden_size % heads == 0 => self.hidden_size / heads,
            None => {
                return Err(PolicyError::config(
                    "num_attention_heads",
                    format!("{heads} does not divide hidden_size {} (and head_dim is not given)", self.hidden_size),
                ))
            }
        };
        let cfg = ModelConfig {
            model_type: self.model_type,
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            num_hidden_layers: self.num_hidden_layers,
            num_attention_heads: heads,
            num_key_value_heads: self.num_key_value_heads.unwrap_or(heads),
            head_dim,
            max_position_embeddings: self.max_position_embeddings,
            rope_theta,
            rope_scaling,
            rms_norm_eps: self.rms_norm_eps,
            tie_word_embeddings: self.tie_word_embeddings,
            hidden_act: self.hidden_act,
            attention_bias: self.attention_bias,
            mlp_bias: self.mlp_bias,
            initializer_range: self.initializer_range,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}
