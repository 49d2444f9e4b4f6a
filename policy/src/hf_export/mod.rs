//! A trained model out to a Hugging Face model directory that transformers (and every tool
//! built on it) loads: what `reagent export` writes.
//!
//! ```text
//!  <out>/
//!    config.json                   the model's config + architectures, dtype, token ids
//!    model.safetensors             every weight but the value head, or, above max_shard_bytes,
//!    model-00001-of-0000N.safetensors …  shards listed in
//!    model.safetensors.index.json  {"metadata": {"total_size"}, "weight_map": {name: shard}}
//!    generation_config.json        bos / eos (end of document and end of turn) / pad ids
//!    tokenizer.json, tokenizer_config.json, …   the model's own HF tokenizer files, or for the
//!                                  built-in sizes the byte-level tokenizer as HF files
//! ```

mod byte_tokenizer;
pub mod safetensors;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

pub use self::byte_tokenizer::CHAT_TEMPLATE as BYTE_CHAT_TEMPLATE;
use crate::error::{PolicyError, Result};
use crate::pretrained::LoadedModel;
use crate::tokenizer::SpecialIds;
use crate::weights::{self, OwnedTensor};

/// transformers' default shard size (`max_shard_size="5GB"`).
pub const DEFAULT_MAX_SHARD_BYTES: u64 = 5_000_000_000;

/// Where the exported directory's tokenizer comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenizerSource {
    /// The built-in byte-level tokenizer, written as HF files.
    ByteLevel,
    /// A model directory whose tokenizer files (and `generation_config.json`) are copied.
    Dir(PathBuf),
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSummary {
    /// Every file written, by name.
    pub files: Vec<String>,
    /// Bytes of weights.
    pub weight_bytes: u64,
    /// Tensors written.
    pub tensors: usize,
    /// Safetensors files (1: unsharded).
    pub shards: usize,
}

/// The transformers class of a model type.
fn architecture(model_type: &str) -> &'static str {
    match model_type {
        "qwen3" => "Qwen3ForCausalLM",
        "llama" => "LlamaForCausalLM",
        _ => "Qwen2ForCausalLM",
    }
}

fn dtype_word(t: &OwnedTensor) -> &'static str {
    match t.dtype {
        protocol::wire::DType::BF16 => "bfloat16",
        protocol::wire::DType::F16 => "float16",
        _ => "float32",
    }
}

fn write_json(dir: &Path, name: &str, value: &Value, files: &mut Vec<String>) -> Result<()> {
    let path = dir.join(name);
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    std::fs::write(&path, text + "\n").map_err(|e| PolicyError::io(&path, e))?;
    files.push(name.to_string());
    Ok(())
}

/// Groups tensors (in name order) into shards of at most `max` bytes; a tensor larger than
/// `max` gets a shard of its own.
fn shard(tensors: &[OwnedTensor], max: u64) -> Vec<Vec<&OwnedTensor>> {
    let mut shards: Vec<Vec<&OwnedTensor>> = Vec::new();
    let mut size = 0u64;
    for t in tensors {
        let bytes = t.data.len() as u64;
        match shards.last_mut() {
            Some(last) if size + bytes <= max => last.push(t),
            _ => {
                shards.push(vec![t]);
                size = 0;
            }
        }
        size += bytes;
    }
    shards
}

/// Writes the weights (single file or shards plus index); returns the shard count.
fn write_weights(dir: &Path, tensors: &[OwnedTensor], max: u64, files: &mut Vec<String>) -> Result<usize> {
    let shards = shard(tensors, max.max(1));
    if shards.len() <= 1 {
        let all: Vec<&OwnedTensor> = tensors.iter().collect();
        safetensors::write(&dir.join("model.safetensors"), &all)?;
        files.push("model.safetensors".into());
        return Ok(1);
    }
    let n = shards.len();
    let mut map = BTreeMap::new();
    for (i, part) in shards.iter().enumerate() {
        let name = format!("model-{:05}-of-{n:05}.safetensors", i + 1);
        safetensors::write(&dir.join(&name), part)?;
        map.extend(part.iter().map(|t| (t.name.clone(), Value::String(name.clone()))));
        files.push(name);
    }
    let total: u64 = tensors.iter().map(|t| t.data.len() as u64).sum();
    let index = json!({ "metadata": { "total_size": total }, "weight_map": map });
    write_json(dir, "model.safetensors.index.json", &index, files)?;
    Ok(n)
}

/// `config.json`: the model's config with what transformers reads beside it.
fn config_json(model: &LoadedModel, ids: &SpecialIds, dtype: &str) -> Value {
    let cfg = model.model.config();
    let mut v: Value = serde_json::to_value(cfg).unwrap_or_default();
    if let Value::Object(map) = &mut v {
        map.insert("architectures".into(), json!([architecture(&cfg.model_type)]));
        map.insert("dtype".into(), json!(dtype));
        map.insert("bos_token_id".into(), json!(ids.bos));
        map.insert("eos_token_id".into(), json!(ids.eos));
        map.insert("pad_token_id".into(), json!(ids.pad));
        map.insert("use_cache".into(), json!(true));
    }
    v
}

/// Writes `model` (without its value head) and its tokenizer into `out` as a Hugging Face
/// model directory (see the module docs). `ids` are the tokenizer's special ids; shards hold at
/// most `max_shard_bytes` of weights each. `out` is created; existing files of the same names
/// are replaced.
pub fn write_model_dir(
    model: &LoadedModel,
    ids: &SpecialIds,
    tokenizer: &TokenizerSource,
    out: &Path,
    max_shard_bytes: u64,
) -> Result<ExportSummary> {
    std::fs::create_dir_all(out).map_err(|e| PolicyError::io(out, e))?;
    let tensors: Vec<OwnedTensor> =
        weights::export(&model.vs)?.into_iter().filter(|t| !t.name.starts_with("value_head.")).collect();
    let first = tensors.first().ok_or_else(|| PolicyError::Weights("the model has no weights to export".into()))?;
    let mut files = Vec::new();
    write_json(out, "config.json", &config_json(model, ids, dtype_word(first)), &mut files)?;
    let shards = write_weights(out, &tensors, max_shard_bytes, &mut files)?;
    let generation =
        json!({ "bos_token_id": ids.bos, "eos_token_id": [ids.end_of_turn, ids.eos], "pad_token_id": ids.pad });
    match tokenizer {
        TokenizerSource::ByteLevel => {
            write_json(out, "tokenizer.json", &byte_tokenizer::tokenizer_json(), &mut files)?;
            write_json(out, "tokenizer_config.json", &byte_tokenizer::tokenizer_config_json(), &mut files)?;
            write_json(out, "generation_config.json", &generation, &mut files)?;
        }
        TokenizerSource::Dir(dir) => {
            files.extend(crate::pretrained::copy_tokenizer_files(dir, out)?);
            if !files.iter().any(|f| f == "generation_config.json") {
                write_json(out, "generation_config.json", &generation, &mut files)?;
            }
        }
    }
    let weight_bytes = tensors.iter().map(|t| t.data.len() as u64).sum();
    Ok(ExportSummary { files, weight_bytes, tensors: tensors.len(), shards })
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::wire::DType;

    fn t(name: &str, bytes: usize) -> OwnedTensor {
        OwnedTensor { name: name.into(), shape: vec![bytes as i64 / 4], dtype: DType::F32, data: vec![0; bytes] }
    }

    #[test]
    fn shards_fill_up_to_the_limit_and_big_tensors_stand_alone() {
        let ts = [t("a", 40), t("b", 40), t("c", 200), t("d", 8)];
        let names: Vec<Vec<&str>> =
            shard(&ts, 100).iter().map(|s| s.iter().map(|t| t.name.as_str()).collect()).collect();
        assert_eq!(names, vec![vec!["a", "b"], vec!["c"], vec!["d"]]);
        assert_eq!(shard(&ts, 1000).len(), 1);
    }
}
