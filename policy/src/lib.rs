//! Policy models for Reagent, shared by the actors (inference) and the learner (training): a
//! Qwen2/Qwen3/Llama-family causal LM with Hugging Face's parameter names and an optional value
//! head ([`model`]), its config ([`config`]), tokenizers and the chat template
//! ([`tokenizer`]), batched KV-cache sampling ([`generate`]), log-probs and entropies
//! ([`logprob`]; of the sampled tokens alone, without a full logits tensor: [`head`]),
//! safetensors and weight-store I/O ([`weights`], [`pretrained`]), the libtorch probe that
//! `reagent doctor` uses ([`probe`]), and the one lock under which libtorch's process-wide
//! generator is seeded ([`seed`]).
//!
//! Everything here is synchronous tch work: run it on a dedicated thread or in
//! `spawn_blocking`, never on the async runtime (CODE_STYLE.md rule 5).

pub mod config;
pub mod device;
pub mod error;
pub mod generate;
pub mod head;
pub mod hf_export;
pub mod logprob;
pub mod mlp;
pub mod model;
pub mod pretrained;
pub mod probe;
pub mod seed;
pub mod tokenizer;
pub mod weights;

pub use config::ModelConfig;
pub use error::{PolicyError, Result};
pub use generate::{Generation, PrefixCache, Row, Sampler, SamplingParams, StopReason};
pub use head::TokenScores;
pub use model::{CausalLm, ModelOutput};
pub use pretrained::LoadedModel;
pub use tokenizer::{ByteTokenizer, ChatTemplate, HfTokenizer, SpecialIds, Tokenizer};
