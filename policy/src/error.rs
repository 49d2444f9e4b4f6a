//! The policy crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong in the policy crate: bad configs, files, tokenizers, inputs,
/// weights, and libtorch itself.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A model config value is missing, malformed or unsupported; names the field.
    #[error("config field `{field}`: {detail}")]
    Config {
        /// The field, as in Hugging Face's `config.json` (a dotted path for nested fields).
        field: String,
        /// What is wrong and what was expected.
        detail: String,
    },
    /// A file could not be read or written.
    #[error("cannot access {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The tokenizers library could not load, parse or encode; says what was being done.
    #[error("tokenizer: {what}: {source}")]
    Tokenizer {
        /// What was being done (`cannot load tokenizer.json`, `cannot encode`).
        what: String,
        /// The library's error.
        #[source]
        source: tokenizers::Error,
    },
    /// A tokenizer loaded but is not one this crate can drive (no ChatML framing tokens).
    #[error("tokenizer: {0}")]
    UnsupportedTokenizer(String),
    /// A chat template does not compile, fails to render, or frames turns in a way episodes
    /// cannot follow; says which and why.
    #[error("chat template: {0}")]
    ChatTemplate(String),
    /// A caller passed tensors or ids of the wrong shape, kind or range.
    #[error("bad input: {0}")]
    Input(String),
    /// Weights do not fit the model: a missing, unexpected or misshapen tensor, an unsupported
    /// kind, a shard index that names no usable file.
    #[error("weights: {0}")]
    Weights(String),
    /// A sharded checkpoint's `model.safetensors.index.json` is not JSON.
    #[error("weights: {path} is not JSON: {source}")]
    WeightIndex {
        /// The index file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// libtorch reported an error.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
}

/// The crate's result type.
pub type Result<T, E = PolicyError> = std::result::Result<T, E>;

impl PolicyError {
    /// A config error for `field`.
    pub(crate) fn config(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::Config { field: field.into(), detail: detail.into() }
    }

    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}
