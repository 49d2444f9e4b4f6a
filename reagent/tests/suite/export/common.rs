//! A run directory with a trained checkpoint, and `reagent export` run on it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use learner::checkpoint::{CheckpointData, CheckpointStore};
use learner::optim::OptimizerState;
use policy::{LoadedModel, ModelConfig};
use protocol::wire::PolicyVersion;
use tch::nn::OptimizerConfig;
use tch::{Device, Kind, Tensor};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The venv's python with transformers (scripts/hf_venv.sh makes it if missing;
/// scripts/setup.sh makes it too).
pub fn hf_python() -> PathBuf {
    let setup = Command::new("bash").arg(repo().join("scripts/hf_venv.sh")).output().expect("bash runs");
    assert!(setup.status.success(), "scripts/hf_venv.sh: {}", String::from_utf8_lossy(&setup.stderr));
    std::env::var_os("REAGENT_HF_VENV").map_or_else(|| repo().join("target/hf-venv"), PathBuf::from).join("bin/python")
}

/// The Qwen2 fixture of the policy crate (config.json, model.safetensors, tokenizer.json).
pub fn qwen2_fixture() -> PathBuf {
    repo().join("policy/fixtures/qwen2-tiny")
}

/// `model` after `steps` Adam steps on the log-likelihood of fixed sequences (so the exported
/// weights are trained ones, not an initialisation transformers could redraw).
pub fn trained(mut model: LoadedModel, steps: usize) -> LoadedModel {
    let vocab = model.model.config().vocab_size.min(256);
    let ids = Tensor::arange(24, (Kind::Int64, Device::Cpu)).view([2, 12]).remainder(vocab);
    let mut opt = tch::nn::Adam::default().build(&model.vs, 1e-2).expect("adam");
    for _ in 0..steps {
        let loss = -model.model.token_logprobs(&ids, None, 1.0).expect("log-probs").mean(Kind::Float);
        opt.backward_step(&loss);
    }
    model.vs.freeze();
    model
}

/// A run directory whose config names `model` as learner.model and whose learner checkpointed
/// `trained` as `version` at step 3.
pub fn run_dir(root: &Path, model: &str, trained: &LoadedModel, version: u64) -> PathBuf {
    let run = root.join("run");
    std::fs::create_dir_all(&run).expect("run dir");
    std::fs::write(run.join("config.toml"), format!("[run]\nid = \"export\"\n\n[learner]\nmodel = {model:?}\n"))
        .expect("config.toml");
    let weights = trained.vs.variables().into_iter().collect();
    let data = CheckpointData {
        step: 3,
        policy_version: PolicyVersion(version),
        weights,
        optimizer: OptimizerState { step: 3, tensors: Vec::new() },
        rng: BTreeMap::new(),
        config_hash: "export-test".into(),
        consumption: Default::default(),
    };
    CheckpointStore::new(run.join("checkpoints"), 3).save(&data).expect("checkpoint");
    run
}

/// A fresh built-in model of `name`.
pub fn builtin(name: &str) -> LoadedModel {
    let cfg = ModelConfig::builtin(name).expect("built-in");
    policy::seed::seeded(7, || LoadedModel::fresh(&cfg, Device::Cpu, true)).expect("model")
}

/// `reagent export` with `args`.
pub fn export(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reagent")).arg("export").args(args).output().expect("reagent runs")
}

/// Asserts success and returns stdout.
pub fn ok(out: &Output) -> String {
    assert!(out.status.success(), "reagent export failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
