//! Policy models for Reagent, shared by the actors (inference) and the learner (training): a
//! Llama/Qwen2-style causal LM, its tokenizer, KV-cache sampling, a value head and safetensors
//! I/O. Filled by the policy/learner issue; for now it holds the libtorch probe that
//! `reagent doctor` uses, so that the libtorch link is exercised from the first day.

pub mod probe;
pub mod mlp;
