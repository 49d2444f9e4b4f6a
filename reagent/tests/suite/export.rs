//! `reagent export` as a user runs it: a run directory whose learner trained a few steps and
//! checkpointed, exported by the real binary, then loaded by Python transformers (venv of
//! scripts/hf_venv.sh, torch from .libtorch) whose logits on a padded batch must match ours at
//! 1e-4; for a built-in size (sharded, byte-level tokenizer written as HF files) and for the
//! Qwen2 fixture (its tokenizer files copied). Plus the files checked against the safetensors
//! format by our own reader, and the errors a user meets.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

pub mod common;
mod errors;
mod transformers;
