//! The model both sides of `reagent bench trl` start from: a random tiny Qwen2 (hidden 128,
//! intermediate 512, 4 layers, 4 heads / 2 KV heads, vocab 512, tied embeddings) drawn once
//! from a seed and written as a Hugging Face model directory — `config.json`,
//! `model.safetensors` and the byte-level tokenizer's files — that our loader and transformers
//! both read, so the initial weights and the token ids are the same on both sides.

use std::path::Path;

use policy::hf_export::{write_model_dir, TokenizerSource, DEFAULT_MAX_SHARD_BYTES};
use policy::{ByteTokenizer, LoadedModel, ModelConfig, Tokenizer};
use tch::{Device, Kind};

use crate::error::Result;

/// The shape; the byte-level tokenizer uses ids 0–267, the rest of the 512 rows are
/// never produced by the tokenizer (the model can still sample them; they decode to nothing).
pub fn shared_model_config() -> ModelConfig {
    let mut cfg = ModelConfig::tiny();
    cfg.vocab_size = 512;
    cfg.num_hidden_layers = 4;
    cfg.max_position_embeddings = 512;
    cfg.tie_word_embeddings = true;
    cfg
}

/// Parameters of [`shared_model_config`]: embedding 512·128; per layer q 128·128+128, k and v
/// 128·64+64 each, o 128·128, MLP 3·128·512, two norms 2·128; the final norm 128.
pub const SHARED_MODEL_PARAMETERS: i64 = 512 * 128 + 4 * (16_512 + 2 * 8_256 + 16_384 + 196_608 + 256) + 128;

/// Draws the model from `seed` (f32, on the CPU) and writes it with the byte-level tokenizer's
/// files into `dir`.
pub fn write_shared_model(dir: &Path, seed: u64) -> Result<()> {
    let model = policy::seed::seeded(seed as i64, || {
        LoadedModel::fresh_as(&shared_model_config(), Device::Cpu, Kind::Float, false)
    })?;
    write_model_dir(&model, &ByteTokenizer.special_ids(), &TokenizerSource::ByteLevel, dir, DEFAULT_MAX_SHARD_BYTES)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_directory_loads_with_the_expected_shape_and_weights() {
        let dir = tempfile::tempdir().unwrap();
        write_shared_model(dir.path(), 3).unwrap();
        for name in ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"] {
            assert!(dir.path().join(name).is_file(), "{name} missing");
        }
        let loaded = LoadedModel::from_dir(dir.path(), Device::Cpu, false).unwrap();
        let cfg = loaded.model.config();
        assert_eq!(cfg, &shared_model_config());
        assert_eq!(cfg.num_parameters(), SHARED_MODEL_PARAMETERS);
        let counted: i64 = loaded.vs.trainable_variables().iter().map(|t| t.numel() as i64).sum();
        assert_eq!(counted, 1_050_752);
        assert!(!loaded.vs.variables().contains_key("lm_head.weight"), "embeddings are tied");
        // The same seed writes the same weights; another seed others.
        let again = tempfile::tempdir().unwrap();
        write_shared_model(again.path(), 3).unwrap();
        let other = tempfile::tempdir().unwrap();
        write_shared_model(other.path(), 4).unwrap();
        let bytes = |d: &tempfile::TempDir| std::fs::read(d.path().join("model.safetensors")).unwrap();
        assert_eq!(bytes(&dir), bytes(&again));
        assert_ne!(bytes(&dir), bytes(&other));
    }
}
