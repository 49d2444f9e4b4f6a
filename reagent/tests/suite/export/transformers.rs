//! Exported directories loaded by transformers: logits at 1e-4 on a padded batch, the same
//! token ids from AutoTokenizer.

use std::path::Path;
use std::process::Command;

use policy::{ByteTokenizer, HfTokenizer, LoadedModel, Tokenizer};
use serde_json::{json, Value};
use tch::{Device, Kind, Tensor};

use super::common::{builtin, export, hf_python, ok, qwen2_fixture, repo, run_dir, trained};

/// Two rows, the second left-padded by four: ids below 256 so every vocabulary has them.
fn batch() -> (Tensor, Tensor) {
    let ids = Tensor::from_slice(&[
        72i64, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, //
        0, 0, 0, 0, 52, 50, 32, 43, 32, 49, 61, 63,
    ])
    .view([2, 12]);
    let mask = Tensor::from_slice(&[1i64; 12]).view([1, 12]).repeat([2, 1]);
    let _ = mask.get(1).narrow(0, 0, 4).fill_(0);
    (ids, mask)
}

fn to_rows(t: &Tensor) -> Vec<Vec<i64>> {
    Vec::<Vec<i64>>::try_from(t).expect("rows")
}

/// Runs scripts/hf_logits.py on `dir`; returns transformers' logits and its report.
fn transformers_logits(dir: &Path, texts: &[&str]) -> (Tensor, Value) {
    let (ids, mask) = batch();
    let tmp = tempfile::tempdir().expect("tmp");
    let input = tmp.path().join("batch.json");
    let body = json!({ "input_ids": to_rows(&ids), "attention_mask": to_rows(&mask), "texts": texts });
    std::fs::write(&input, body.to_string()).expect("batch.json");
    let out = tmp.path().join("logits.safetensors");
    let run = Command::new(hf_python())
        .arg(repo().join("scripts/hf_logits.py"))
        .args([dir.as_os_str(), input.as_os_str(), out.as_os_str()])
        .output()
        .expect("python runs");
    assert!(run.status.success(), "hf_logits.py: {}", String::from_utf8_lossy(&run.stderr));
    let report: Value = serde_json::from_slice(&run.stdout).expect("hf_logits.py prints JSON");
    let logits = Tensor::read_safetensors(&out).expect("logits").remove(0).1;
    (logits, report)
}

/// Largest |ours − transformers'| over real (unpadded) positions.
fn max_gap(model: &LoadedModel, theirs: &Tensor) -> f64 {
    let (ids, mask) = batch();
    let ours = tch::no_grad(|| model.model.forward(&ids, Some(&mask))).expect("forward").logits;
    assert_eq!(ours.size(), theirs.size(), "logits shapes");
    let real = mask.to_kind(Kind::Float).unsqueeze(-1);
    ((ours.to_kind(Kind::Float) - theirs) * real).abs().max().double_value(&[])
}

fn encoded(tok: &dyn Tokenizer, texts: &[&str]) -> Value {
    json!(texts.iter().map(|t| tok.encode(t).expect("encode")).collect::<Vec<_>>())
}

#[test]
fn a_built_in_size_exports_sharded_and_matches_transformers() {
    let tmp = tempfile::tempdir().expect("tmp");
    let model = trained(builtin("tiny"), 3);
    let run = run_dir(tmp.path(), "tiny", &model, 5);
    let out = tmp.path().join("hf");
    let printed =
        ok(&export(&["--run", run.to_str().unwrap(), "--out", out.to_str().unwrap(), "--max-shard-size", "2MB"]));
    assert!(printed.contains("policy version 5"), "{printed}");
    let index: Value =
        serde_json::from_slice(&std::fs::read(out.join("model.safetensors.index.json")).unwrap()).unwrap();
    let shards: std::collections::BTreeSet<&str> =
        index["weight_map"].as_object().unwrap().values().filter_map(Value::as_str).collect();
    assert!(shards.len() >= 3, "a 6.4 MB model in 2 MB shards: {shards:?}");
    assert!(!out.join("model.safetensors").exists());

    let texts = ["hi <answer>42</answer>", "héllo\n\t<tool>x</tool>"];
    let (theirs, report) = transformers_logits(&out, &texts);
    assert_eq!(report["architecture"], "Qwen2ForCausalLM");
    let gap = max_gap(&model, &theirs);
    assert!(gap <= 1e-4, "logits differ by {gap}");
    assert_eq!(report["token_ids"], encoded(&ByteTokenizer, &texts));
}

#[test]
fn the_qwen2_fixture_after_training_matches_transformers() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fixture = qwen2_fixture();
    let base = LoadedModel::from_dir(&fixture, Device::Cpu, false).expect("fixture");
    let model = trained(base, 3);
    let run = run_dir(tmp.path(), fixture.to_str().unwrap(), &model, 2);
    let out = tmp.path().join("hf");
    ok(&export(&["--run", run.to_str().unwrap(), "--version", "2", "--out", out.to_str().unwrap()]));
    for name in ["config.json", "model.safetensors", "generation_config.json", "tokenizer.json"] {
        assert!(out.join(name).is_file(), "{name} missing");
    }
    let texts = ["Hello world", "a + b = c"];
    let (theirs, report) = transformers_logits(&out, &texts);
    let gap = max_gap(&model, &theirs);
    assert!(gap <= 1e-4, "logits differ by {gap}");
    let untrained = LoadedModel::from_dir(&fixture, Device::Cpu, false).expect("fixture");
    assert!(max_gap(&untrained, &theirs) > 1e-3, "the export holds the trained weights, not the fixture's");
    let tok = HfTokenizer::from_file(&fixture.join("tokenizer.json")).expect("tokenizer");
    assert_eq!(report["token_ids"], encoded(&tok, &texts));
}
