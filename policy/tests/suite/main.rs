//! The policy crate's integration tests, in one binary so libtorch is linked once: configs,
//! tokenizers and the models' own chat templates, parity with Hugging Face transformers on the
//! committed `qwen2-tiny` fixture and on SmolLM2-135M-Instruct's real weights, KV-cache generation,
//! and weight round trips.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod chat_templates;
mod common;
mod config;
mod families;
mod generate;
mod head;
mod parity;
mod qwen3_tokenizer;
mod smollm2;
mod tokenizer;
mod training;
mod weights;
