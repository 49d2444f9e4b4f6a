//! Weights: the bytes the weight store carries and safetensors files round-trip bitwise, and
//! loading is strict about names and shapes.

use policy::weights::{self, OwnedTensor};
use policy::{LoadedModel, ModelConfig};
use protocol::weights::WeightSet;
use protocol::wire::{DType, PolicyVersion};
use tch::{Device, Kind};

use crate::common::{fixture_dir, fixture_model};

fn tiny_fresh(seed: i64, value_head: bool) -> LoadedModel {
    let mut c = ModelConfig::tiny();
    c.num_hidden_layers = 2;
    policy::seed::seeded(seed, || LoadedModel::fresh(&c, Device::Cpu, value_head)).unwrap()
}

fn assert_same(a: &LoadedModel, b: &LoadedModel) {
    let (va, vb) = (a.vs.variables(), b.vs.variables());
    assert_eq!(va.len(), vb.len());
    for (name, t) in &va {
        assert!(t.equal(&vb[name]), "{name} differs");
    }
}

#[test]
fn named_tensor_bytes_round_trip_bitwise_in_f32_and_bf16() {
    for kind in [Kind::Float, Kind::BFloat16] {
        let mut src = tiny_fresh(1, true);
        let mut dst = tiny_fresh(2, true);
        src.vs.set_kind(kind);
        dst.vs.set_kind(kind);
        let exported = weights::export(&src.vs).unwrap();
        let expected = if kind == Kind::Float { DType::F32 } else { DType::BF16 };
        assert!(exported.iter().all(|t| t.dtype == expected));
        assert!(exported.windows(2).all(|w| w[0].name < w[1].name), "sorted by name");
        assert!(exported.iter().any(|t| t.name == "value_head.weight"));
        weights::import(&mut dst.vs, exported.iter().map(OwnedTensor::as_named)).unwrap();
        assert_same(&src, &dst);
        assert_eq!(weights::export(&dst.vs).unwrap(), exported, "bytes identical");
    }
}

/// A fetched set keeps its chunks apart; tensors across chunk boundaries are imported piece by
/// piece (chunks of 1,000 bytes: whole f32 and bf16 elements) or, where a boundary splits an
/// element (999 bytes), joined first. Either way the variables come out bitwise as exported,
/// and a bf16 set imported into f32 variables gives the bf16 values widened.
#[test]
fn a_weight_set_in_chunks_imports_bitwise_whatever_the_chunk_boundaries() {
    for (kind, chunk_bytes) in
        [(Kind::Float, 1_000), (Kind::Float, 999), (Kind::BFloat16, 1_000), (Kind::BFloat16, 999)]
    {
        let mut src = tiny_fresh(5, false);
        src.vs.set_kind(kind);
        let exported = weights::export(&src.vs).unwrap();
        let named: Vec<_> = exported.iter().map(OwnedTensor::as_named).collect();
        let set = WeightSet::build(PolicyVersion(3), &named, chunk_bytes).unwrap();
        let spanning = set.specs().iter().filter(|s| set.pieces(s).count() > 1).count();
        assert!(spanning >= 3, "the test needs tensors across chunks ({spanning})");
        let mut dst = tiny_fresh(6, false);
        dst.vs.set_kind(kind);
        weights::import_weight_set(&mut dst.vs, &set).unwrap();
        assert_same(&src, &dst);
        let mut wide = tiny_fresh(7, false);
        weights::import_weight_set(&mut wide.vs, &set).unwrap();
        for (name, t) in src.vs.variables() {
            assert!(t.to_kind(Kind::Float).equal(&wide.vs.variables()[&name]), "{name} widened from {kind:?}");
        }
    }
}

#[test]
fn safetensors_files_and_model_dirs_round_trip_bitwise() {
    let dir = tempfile::tempdir().unwrap();
    let src = tiny_fresh(3, true);
    src.save_dir(dir.path()).unwrap();
    let back = LoadedModel::from_dir(dir.path(), Device::Cpu, true).unwrap();
    assert_same(&src, &back);
    assert_eq!(back.model.config(), src.model.config());
    // The fixture, written by transformers, saves and reloads too.
    let f = fixture_model(false);
    let path = dir.path().join("fixture.safetensors");
    weights::save_safetensors(&f.vs, &path).unwrap();
    let mut again = LoadedModel::fresh(f.model.config(), Device::Cpu, false).unwrap();
    weights::load_safetensors(&mut again.vs, &[&path]).unwrap();
    assert_same(&f, &again);
}

#[test]
fn loading_is_strict_about_names_and_shapes() {
    let src = tiny_fresh(4, false);
    let good = weights::export(&src.vs).unwrap();
    let mut dst = tiny_fresh(5, true);
    // A language-model checkpoint has no value head: that is allowed.
    weights::import(&mut dst.vs, good.iter().map(OwnedTensor::as_named)).unwrap();

    let missing: Vec<_> = good.iter().filter(|t| t.name != "model.norm.weight").cloned().collect();
    let err = weights::import(&mut dst.vs, missing.iter().map(OwnedTensor::as_named)).unwrap_err();
    assert!(err.to_string().contains("lack model.norm.weight"), "{err}");

    let mut extra = good.clone();
    extra.push(OwnedTensor { name: "model.extra".into(), shape: vec![1], dtype: DType::F32, data: vec![0; 4] });
    let err = weights::import(&mut dst.vs, extra.iter().map(OwnedTensor::as_named)).unwrap_err();
    assert!(err.to_string().contains("model.extra"), "{err}");

    let mut reshaped = good.clone();
    let t = reshaped.iter_mut().find(|t| t.name == "model.norm.weight").unwrap();
    t.shape = vec![t.shape[0] / 2, 2];
    let err = weights::import(&mut dst.vs, reshaped.iter().map(OwnedTensor::as_named)).unwrap_err();
    assert!(err.to_string().contains("model.norm.weight is [64, 2]"), "{err}");

    let mut short = good;
    short[0].data.pop();
    let err = weights::import(&mut dst.vs, short.iter().map(OwnedTensor::as_named)).unwrap_err();
    assert!(err.to_string().contains("does not fit shape"), "{err}");

    let empty = tempfile::tempdir().unwrap();
    assert!(LoadedModel::from_dir(empty.path(), Device::Cpu, false).is_err());
    assert!(LoadedModel::from_dir(&fixture_dir().join("nope"), Device::Cpu, false).is_err());
}
