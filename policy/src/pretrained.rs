//! A model directory as Hugging Face lays it out — `config.json`, `model.safetensors` (or
//! shards listed in `model.safetensors.index.json`) and, optionally, `tokenizer.json` — loaded
//! into a var store and a [`CausalLm`] on a device, or written back.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tch::nn::VarStore;
use tch::{Device, Kind};

use crate::config::ModelConfig;
use crate::device::kind_for;
use crate::error::{PolicyError, Result};
use crate::model::CausalLm;
use crate::tokenizer::{ByteTokenizer, HfTokenizer, Tokenizer};
use crate::weights;

/// A model and the var store that owns its weights.
#[derive(Debug)]
pub struct LoadedModel {
    /// The weights (what optimisers and [`weights::export`] use).
    pub vs: VarStore,
    /// The model.
    pub model: CausalLm,
}

impl LoadedModel {
    /// A freshly initialised model on `device`, in [`kind_for`]`(device)`.
    pub fn fresh(config: &ModelConfig, device: Device, with_value_head: bool) -> Result<Self> {
        Self::fresh_as(config, device, kind_for(device), with_value_head)
    }

    /// A freshly initialised model on `device` with weights of `kind` (initialised in f32,
    /// then cast, so a bf16 model is the rounding of the f32 one drawn from the same seed).
    pub fn fresh_as(config: &ModelConfig, device: Device, kind: Kind, with_value_head: bool) -> Result<Self> {
        let mut vs = VarStore::new(device);
        let model = CausalLm::new(&vs.root(), config, with_value_head)?;
        vs.set_kind(kind);
        Ok(Self { vs, model })
    }

    /// Loads a model directory (see the module docs) onto `device`, in [`kind_for`]`(device)`.
    /// A value head, which language-model checkpoints lack, keeps its fresh initialisation.
    pub fn from_dir(dir: &Path, device: Device, with_value_head: bool) -> Result<Self> {
        Self::from_dir_as(dir, device, kind_for(device), with_value_head)
    }

    /// [`LoadedModel::from_dir`] with weights of `kind`.
    pub fn from_dir_as(dir: &Path, device: Device, kind: Kind, with_value_head: bool) -> Result<Self> {
        let config = ModelConfig::from_file(&dir.join("config.json"))?;
        let mut loaded = Self::fresh_as(&config, device, kind, with_value_head)?;
        weights::load_safetensors(&mut loaded.vs, &safetensors_files(dir)?)?;
        Ok(loaded)
    }

    /// Writes `config.json` and `model.safetensors` into `dir` (created if missing).
    pub fn save_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| PolicyError::io(dir, e))?;
        let config = dir.join("config.json");
        std::fs::write(&config, self.model.config().to_json_string()).map_err(|e| PolicyError::io(&config, e))?;
        weights::save_safetensors(&self.vs, &dir.join("model.safetensors"))
    }

    /// [`LoadedModel::save_dir`], and the tokenizer files of `tokenizer_from` (the model
    /// directory it was loaded from) copied beside it, so that the saved directory tokenizes as
    /// its origin did. `None` (a built-in model): the byte-level tokenizer, which a directory
    /// without `tokenizer.json` means.
    pub fn save_dir_with_tokenizer(&self, dir: &Path, tokenizer_from: Option<&Path>) -> Result<()> {
        self.save_dir(dir)?;
        if let Some(from) = tokenizer_from {
            copy_tokenizer_files(from, dir)?;
        }
        Ok(())
    }
}

/// Tokenizer files a model directory may carry, copied as they are.
pub const TOKENIZER_FILES: [&str; 7] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "generation_config.json",
];

/// Copies those of [`TOKENIZER_FILES`] that `from` has into `to`; returns their names.
pub fn copy_tokenizer_files(from: &Path, to: &Path) -> Result<Vec<String>> {
    let mut copied = Vec::new();
    for name in TOKENIZER_FILES {
        let source = from.join(name);
        if source.is_file() {
            std::fs::copy(&source, to.join(name)).map_err(|e| PolicyError::io(&source, e))?;
            copied.push(name.to_string());
        }
    }
    Ok(copied)
}

/// The safetensors files of a model directory: `model.safetensors`, or every shard named in
/// `model.safetensors.index.json`'s `weight_map`.
pub fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let single = dir.join("model.safetensors");
    if single.exists() {
        return Ok(vec![single]);
    }
    let index = dir.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&index).map_err(|e| PolicyError::io(&index, e))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| PolicyError::WeightIndex { path: index.clone(), source })?;
    let map = json
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| PolicyError::Weights(format!("{} has no weight_map object", index.display())))?;
    let shards: BTreeSet<&str> = map.values().filter_map(|v| v.as_str()).collect();
    if shards.is_empty() || shards.iter().any(|s| s.contains('/') || s.contains("..")) {
        return Err(PolicyError::Weights(format!("{} lists no usable shard files", index.display())));
    }
    Ok(shards.into_iter().map(|s| dir.join(s)).collect())
}

/// The tokenizer of a model directory: its `tokenizer.json` with its chat template if it has one, else the
/// byte-level tokenizer of the built-in models.
pub fn tokenizer_for_dir(dir: &Path) -> Result<Box<dyn Tokenizer>> {
    if dir.join("tokenizer.json").exists() {
        Ok(Box::new(HfTokenizer::from_dir(dir)?))
    } else {
        Ok(Box::new(ByteTokenizer))
    }
}

/// Whether `path` is a model directory (holds `config.json`) rather than, say, a built-in size's
/// name: how `learner.model`, `actor.model` and `launch.sft_model` tell the two apart.
pub fn is_model_dir(path: &Path) -> bool {
    path.join("config.json").is_file()
}

/// The tokenizer of a model as configuration names it (`learner.model`, `actor.model`): a model
/// directory's ([`tokenizer_for_dir`]), or the byte-level tokenizer of a built-in size.
pub fn tokenizer_for_model(model: &str) -> Result<Box<dyn Tokenizer>> {
    let dir = Path::new(model);
    if is_model_dir(dir) {
        tokenizer_for_dir(dir)
    } else {
        Ok(Box::new(ByteTokenizer))
    }
}
