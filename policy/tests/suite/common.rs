//! Helpers shared by the tests: the fixture's location and loaded model.

use std::path::PathBuf;

use policy::LoadedModel;
use tch::{Device, Tensor};

/// `policy/fixtures/qwen2-tiny`: a random Qwen2 made by transformers
/// (scripts/make_qwen2_fixture.py).
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/qwen2-tiny")
}

/// The fixture model on the CPU in f32.
pub fn fixture_model(with_value_head: bool) -> LoadedModel {
    LoadedModel::from_dir(&fixture_dir(), Device::Cpu, with_value_head).expect("the fixture loads")
}

/// A tensor of the fixture's golden file.
pub fn golden(name: &str) -> Tensor {
    let all = Tensor::read_safetensors(fixture_dir().join("golden.safetensors")).expect("golden file");
    all.into_iter().find(|(n, _)| n == name).map(|(_, t)| t).expect("golden tensor")
}

/// The largest absolute difference between two tensors.
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}
