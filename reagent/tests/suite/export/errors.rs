//! What a user gets wrong, named; and the files checked against the safetensors format by a
//! reader of our own (no Python).

use std::path::Path;

use serde_json::Value;

use super::common::{builtin, export, ok, run_dir, trained};

fn stderr(out: &std::process::Output) -> String {
    assert!(!out.status.success(), "expected a failure, got: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Checks one safetensors file against the format: header length, JSON header with
/// `format: pt`, data offsets back to back covering the rest exactly, sizes matching shapes.
/// Returns the tensor names.
fn check_safetensors(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).expect("read");
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    assert_eq!(n % 8, 0, "header padded to 8");
    let header: serde_json::Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).expect("JSON header");
    assert_eq!(header["__metadata__"]["format"], "pt");
    let mut spans: Vec<(u64, u64, String)> = Vec::new();
    for (name, t) in header.iter().filter(|(k, _)| *k != "__metadata__") {
        let [a, b] = [0, 1].map(|i| t["data_offsets"][i].as_u64().unwrap());
        let numel: u64 = t["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).product();
        assert_eq!(t["dtype"], "F32", "{name}");
        assert_eq!(b - a, numel * 4, "{name}: bytes fit the shape");
        spans.push((a, b, name.clone()));
    }
    spans.sort();
    let mut end = 0;
    for (a, b, name) in &spans {
        assert_eq!(*a, end, "{name} starts where the previous ended");
        end = *b;
    }
    assert_eq!(8 + n + end as usize, bytes.len(), "data covers the file");
    spans.into_iter().map(|s| s.2).collect()
}

#[test]
fn files_follow_the_safetensors_format_without_the_value_head() {
    let tmp = tempfile::tempdir().expect("tmp");
    let model = trained(builtin("micro"), 1);
    let run = run_dir(tmp.path(), "micro", &model, 1);
    let out = tmp.path().join("hf");
    ok(&export(&["--run", run.to_str().unwrap(), "--out", out.to_str().unwrap()]));
    let names = check_safetensors(&out.join("model.safetensors"));
    let mut expected: Vec<String> =
        model.vs.variables().into_keys().filter(|n| !n.starts_with("value_head.")).collect();
    expected.sort();
    let mut names = names;
    names.sort();
    assert_eq!(names, expected);
    let config: Value = serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(
        (config["architectures"][0].as_str(), config["vocab_size"].as_i64()),
        (Some("Qwen2ForCausalLM"), Some(320))
    );
    let generation: Value =
        serde_json::from_slice(&std::fs::read(out.join("generation_config.json")).unwrap()).unwrap();
    assert_eq!(generation["eos_token_id"], serde_json::json!([259, 257]));
}

#[test]
fn mistakes_are_named() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (run, out) = (tmp.path().join("run"), tmp.path().join("hf"));
    let (run_s, out_s) = (run.to_str().unwrap(), out.to_str().unwrap());
    assert!(stderr(&export(&["--run", run_s, "--out", out_s])).contains("config.toml"));

    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("config.toml"), "[learner]\nmodel = \"micro\"\n").unwrap();
    let e = stderr(&export(&["--run", run_s, "--out", out_s]));
    assert!(e.contains("no checkpoint in") && e.contains("--checkpoint"), "{e}");

    let model = trained(builtin("micro"), 1);
    let run = run_dir(tmp.path(), "micro", &model, 4);
    let e = stderr(&export(&["--run", run.to_str().unwrap(), "--version", "9", "--out", out_s]));
    assert!(e.contains("policy version 9") && e.contains("versions 4"), "{e}");

    let e = stderr(&export(&["--run", run.to_str().unwrap(), "--out", out_s, "--max-shard-size", "5XB"]));
    assert!(e.contains("unknown unit"), "{e}");

    std::fs::write(run.join("config.toml"), "[learner]\nmodel = \"tiny\"\n").unwrap();
    let e = stderr(&export(&["--run", run.to_str().unwrap(), "--out", out_s]));
    assert!(e.contains("does not fit the run's model"), "{e}");

    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "x").unwrap();
    std::fs::write(run.join("config.toml"), "[learner]\nmodel = \"micro\"\n").unwrap();
    let e = stderr(&export(&["--run", run.to_str().unwrap(), "--out", out_s]));
    assert!(e.contains("not empty"), "{e}");
}
