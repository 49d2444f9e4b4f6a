//! The policy crate's integration tests, in one binary so libtorch is linked once: configs,
//! tokenizers and the chat template, parity with Hugging Face transformers on the committed
//! `qwen2-tiny` fixture, KV-cache generation, and weight round trips.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod common;
mod config;
mod families;
mod generate;
mod head;
mod parity;
mod qwen3_tokenizer;
mod tokenizer;
mod training;
mod weights;
