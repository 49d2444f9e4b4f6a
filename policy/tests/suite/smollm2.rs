//! SmolLM2-135M-Instruct's real weights (a Llama: 30 layers, hidden 576, 9 heads, 3 KV heads,
//! tied embeddings; converted into target/smollm2 by scripts/smollm2.sh during set-up) in our
//! model, sampler and tokenizer wrapper, against Hugging Face `transformers` 5.23.0 on the same
//! directory (scripts/hf_venv.sh):
//!
//! - the logits of five prompts (chat-rendered, code, 512 tokens of prose, short, digits and
//!   unicode) at every position, within 1e-3 (f32);
//! - greedy generation (temperature 0, no stop tokens) of 64 tokens for three prompts, alone and
//!   batched (left-padded), token for token, and the log-probs it reports;
//! - KV-cache generation against recomputing the whole sequence at every step;
//! - [`HfTokenizer`]'s ids and decoding on code, unicode, digits, whitespace runs and special
//!   tokens written in text.
//!
//! The reference values come from scripts/smollm2_parity.py, which the first test to need them
//! runs in target/hf-venv (about 30 s):
//!
//! ```text
//! target/hf-venv/bin/python scripts/smollm2_parity.py target/smollm2 OUT_DIR
//! ```
//!
//! OUT_DIR is under cargo's temporary directory for integration tests (target/tmp/smollm2-parity),
//! named by a hash of the script, the model directory's stamp and the venv's pins, so the tests
//! of one run (separate processes under nextest) share one run of the script, and a later run
//! reuses it until one of those changes. The model directory and the venv are required: set-up
//! makes them, and a missing one fails the test with the command that makes it (never skips it).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use policy::{HfTokenizer, LoadedModel, Sampler, SamplingParams, Tokenizer};
use serde::Deserialize;
use tch::{Device, Kind, Tensor};

use crate::common::max_abs_diff;

/// The largest |Δ| allowed between our logits and transformers' (both f32).
const LOGIT_TOLERANCE: f64 = 1e-3;
const NEW_TOKENS: usize = 64;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where scripts/smollm2.sh puts the model (REAGENT_SMOLLM2 overrides both); panics with the
/// set-up command when it is missing.
fn model_dir() -> PathBuf {
    let dir = match std::env::var_os("REAGENT_SMOLLM2") {
        Some(dir) => PathBuf::from(dir),
        None => repo().join("target/smollm2"),
    };
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(
            dir.join(file).is_file(),
            "SmolLM2-135M-Instruct is missing at {} (no {file}): run `bash scripts/smollm2.sh` (part of \
             `scripts/setup.sh all`)",
            dir.display()
        );
    }
    dir
}

/// target/hf-venv (REAGENT_HF_VENV overrides both); panics with the set-up command when its
/// python is missing.
fn venv() -> PathBuf {
    let venv = match std::env::var_os("REAGENT_HF_VENV") {
        Some(dir) => PathBuf::from(dir),
        None => repo().join("target/hf-venv"),
    };
    assert!(
        venv.join("bin/python").is_file(),
        "the transformers venv is missing at {}: run `bash scripts/hf_venv.sh` (part of `scripts/setup.sh all`)",
        venv.display()
    );
    venv
}

fn model() -> LoadedModel {
    LoadedModel::from_dir(&model_dir(), Device::Cpu, false).expect("target/smollm2 loads")
}

#[derive(Debug, Deserialize)]
struct Cases {
    prompts: Vec<PromptCase>,
    greedy: Vec<GreedyCase>,
    tokenizer: Vec<TokenizerCase>,
}

#[derive(Debug, Deserialize)]
struct PromptCase {
    name: String,
    length: usize,
}

#[derive(Debug, Deserialize)]
struct GreedyCase {
    name: String,
    prompt_ids: Vec<u32>,
    tokens: Vec<u32>,
    logprobs: Vec<f32>,
    margins: Vec<f32>,
}

#[derive(Debug, Deserialize)]
struct TokenizerCase {
    text: String,
    ids: Vec<u32>,
    decoded: String,
    decoded_skip_special: String,
}

/// scripts/smollm2_parity.py's output directory (made once, see the module docs) and its
/// cases.json.
fn reference() -> &'static (PathBuf, Cases) {
    static REFERENCE: OnceLock<(PathBuf, Cases)> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let dir = parity_outputs();
        let path = dir.join("cases.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let cases: Cases = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        (dir, cases)
    })
}

/// What the outputs depend on: the script, the model directory (its stamp records every file's
/// sha256) and the venv's pins (its stamp's name).
fn inputs_key(model: &Path, venv: &Path) -> String {
    let mut h = DefaultHasher::new();
    let read = |p: &Path| std::fs::read(p).unwrap_or_default();
    read(&repo().join("scripts/smollm2_parity.py")).hash(&mut h);
    model.hash(&mut h);
    read(&model.join(".reagent-smollm2")).hash(&mut h);
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        let meta = std::fs::metadata(model.join(file)).ok();
        (meta.as_ref().map(|m| m.len()), meta.and_then(|m| m.modified().ok())).hash(&mut h);
    }
    let mut stamps: Vec<_> = std::fs::read_dir(venv)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.file_name())).filter(|n| n.to_string_lossy().starts_with(".reagent"))
        })
        .map(Iterator::collect)
        .unwrap_or_default();
    stamps.sort();
    stamps.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// Removes the lock directory when dropped, so a panicking holder frees it.
struct Lock(PathBuf);

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Runs scripts/smollm2_parity.py into target/tmp/smollm2-parity/KEY unless it is there, one
/// process at a time (a lock directory; tests that find it taken wait for the outputs).
fn parity_outputs() -> PathBuf {
    let (model, venv) = (model_dir(), venv());
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("smollm2-parity");
    let done = root.join(inputs_key(&model, &venv));
    let ready = |d: &Path| d.join("cases.json").is_file() && d.join("logits.safetensors").is_file();
    if ready(&done) {
        return done;
    }
    std::fs::create_dir_all(&root).unwrap();
    let lock_path = root.join("lock");
    let deadline = Instant::now() + Duration::from_secs(600);
    let _lock = loop {
        match std::fs::create_dir(&lock_path) {
            Ok(()) => break Lock(lock_path.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if ready(&done) {
                    return done;
                }
                // A holder that died without its Drop (killed) leaves the lock: older than the
                // script could take, it is stale.
                let age = std::fs::metadata(&lock_path)
                    .and_then(|m| m.modified())
                    .map(|t| SystemTime::now().duration_since(t).unwrap_or_default());
                if age.is_ok_and(|a| a > Duration::from_secs(300)) {
                    let _ = std::fs::remove_dir(&lock_path);
                }
                assert!(Instant::now() < deadline, "waited 10 min for {} to be released", lock_path.display());
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("cannot make {}: {e}", lock_path.display()),
        }
    };
    if ready(&done) {
        return done;
    }
    // Outputs of older inputs (~150 MB each) go.
    for entry in std::fs::read_dir(&root).unwrap().flatten() {
        if entry.path() != lock_path {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let partial = root.join(format!("partial-{}", std::process::id()));
    eprintln!("running scripts/smollm2_parity.py into {} (about 30 s)", done.display());
    let out = Command::new(venv.join("bin/python"))
        .arg(repo().join("scripts/smollm2_parity.py"))
        .arg(&model)
        .arg(&partial)
        .output()
        .expect("the venv's python runs");
    assert!(
        out.status.success(),
        "scripts/smollm2_parity.py failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&partial, &done).unwrap();
    done
}

/// transformers' `{name}.ids` and `{name}.logits`.
fn reference_tensors() -> Vec<(String, Tensor)> {
    let path = reference().0.join("logits.safetensors");
    Tensor::read_safetensors(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Greedy, 64 tokens, and nothing that stops a row early: no stop sequences, no EOS id (the
/// defaults), as transformers generated.
fn greedy_params() -> SamplingParams {
    SamplingParams { temperature: 0.0, top_p: 1.0, max_new_tokens: NEW_TOKENS, ..SamplingParams::default() }
}

fn ids_tensor(ids: &[u32]) -> Tensor {
    Tensor::from_slice(&ids.iter().map(|&i| i64::from(i)).collect::<Vec<_>>()).unsqueeze(0)
}

/// Where our tokens first differ from transformers', with its top-2 logit gap there.
fn first_divergence(ours: &[u32], case: &GreedyCase) -> Option<String> {
    let step = ours.iter().zip(&case.tokens).position(|(a, b)| a != b)?;
    Some(format!(
        "{}: step {step} gave {} where transformers gave {} (its top-2 logit gap there: {:.2e}); ours {:?}, \
         transformers' {:?}",
        case.name, ours[step], case.tokens[step], case.margins[step], ours, case.tokens
    ))
}

#[test]
fn smollm2_logits_match_transformers_on_real_weights() {
    let (_, cases) = reference();
    let m = model();
    assert_eq!(m.model.kind(), Kind::Float);
    let tensors = reference_tensors();
    let get = |name: &str| tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t).expect(name);
    let mut failures = Vec::new();
    for prompt in &cases.prompts {
        let ids = get(&format!("{}.ids", prompt.name));
        let expected = get(&format!("{}.logits", prompt.name));
        assert_eq!(ids.size(), vec![prompt.length as i64]);
        let ours = tch::no_grad(|| m.model.forward(&ids.unsqueeze(0), None).unwrap().logits.get(0));
        assert_eq!(ours.size(), expected.size(), "{}", prompt.name);
        let delta = max_abs_diff(&ours, expected);
        eprintln!("{:>14} ({:>3} tokens): max |Δlogit| vs transformers {delta:.2e}", prompt.name, prompt.length);
        if delta.is_nan() || delta > LOGIT_TOLERANCE {
            failures.push(format!("{}: {delta:.3e}", prompt.name));
        }
    }
    assert_eq!(cases.prompts.iter().map(|p| p.length).max(), Some(512), "the long prompt is 512 tokens");
    assert!(failures.is_empty(), "max |Δlogit| above {LOGIT_TOLERANCE}: {failures:?}");
}

#[test]
fn smollm2_greedy_generation_matches_transformers() {
    let (_, cases) = reference();
    let m = model();
    let prompts: Vec<Vec<u32>> = cases.greedy.iter().map(|c| c.prompt_ids.clone()).collect();
    assert_eq!(prompts.len(), 3);
    let mut failures = Vec::new();
    // Each prompt alone, then the three in one left-padded batch.
    let alone: Vec<_> = prompts
        .iter()
        .map(|p| Sampler::new(0).generate(&m.model, std::slice::from_ref(p), &greedy_params()).unwrap().remove(0))
        .collect();
    let batched = Sampler::new(0).generate(&m.model, &prompts, &greedy_params()).unwrap();
    for (how, gens) in [("alone", &alone), ("batched", &batched)] {
        for (case, gen) in cases.greedy.iter().zip(gens) {
            assert_eq!(gen.tokens.len(), NEW_TOKENS, "{how} {}: no stop token, so all 64 tokens", case.name);
            if let Some(d) = first_divergence(&gen.tokens, case) {
                failures.push(format!("{how} {d}"));
                continue;
            }
            // The largest |Δ|, or NaN if any is (f32::max would drop it).
            let lp = gen.logprobs.iter().zip(&case.logprobs).map(|(a, b)| (a - b).abs()).fold(0f32, |m, d| {
                if d.is_nan() || d > m {
                    d
                } else {
                    m
                }
            });
            eprintln!("{how:>7} {:>5}: 64 tokens equal transformers', max |Δlogprob| {lp:.2e}", case.name);
            if lp.is_nan() || f64::from(lp) > LOGIT_TOLERANCE {
                failures.push(format!("{how} {}: log-probs differ by {lp:.3e}", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "greedy generation differs from transformers':\n{}", failures.join("\n"));
}

#[test]
fn smollm2_kv_cache_generation_equals_full_recomputation() {
    let (_, cases) = reference();
    let m = model();
    for case in &cases.greedy {
        let gen = Sampler::new(0).generate(&m.model, std::slice::from_ref(&case.prompt_ids), &greedy_params()).unwrap();
        let tokens = &gen[0].tokens;
        let p = case.prompt_ids.len();
        let mut seq = case.prompt_ids.clone();
        if case.name == "short" {
            // Literally: the whole sequence so far, forward, argmax of the last position.
            for (step, &token) in tokens.iter().enumerate() {
                let last = tch::no_grad(|| m.model.forward(&ids_tensor(&seq), None).unwrap().logits.get(0).get(-1));
                let full = last.argmax(-1, false).int64_value(&[]);
                assert_eq!(
                    full,
                    i64::from(token),
                    "short: step {step}: the KV cache chose {token}, recomputation {full}"
                );
                let lp = last.log_softmax(-1, Kind::Float).double_value(&[i64::from(token)]);
                let reported = f64::from(gen[0].logprobs[step]);
                assert!((lp - reported).abs() < 1e-4, "short: step {step}: log-prob {reported}, recomputed {lp}");
                seq.push(token);
            }
        } else {
            // The same in one pass: by causality, position p - 1 + k of the whole sequence sees
            // exactly the prompt and the first k generated tokens.
            seq.extend(tokens);
            let logits = tch::no_grad(|| m.model.forward(&ids_tensor(&seq), None).unwrap().logits.get(0));
            let full =
                Vec::<i64>::try_from(&logits.narrow(0, p as i64 - 1, NEW_TOKENS as i64).argmax(-1, false)).unwrap();
            let ours: Vec<i64> = tokens.iter().map(|&t| i64::from(t)).collect();
            assert_eq!(ours, full, "{}: KV-cache tokens against one full forward", case.name);
        }
        eprintln!("{:>5}: 64 KV-cache tokens equal full recomputation", case.name);
    }
}

#[test]
fn smollm2_tokenizer_matches_transformers() {
    let (_, cases) = reference();
    let tok = HfTokenizer::from_file(&model_dir().join("tokenizer.json")).unwrap();
    assert_eq!(tok.vocab_size(), 49152);
    let mut failures = Vec::new();
    for case in &cases.tokenizer {
        let ids = tok.encode(&case.text).unwrap();
        if ids != case.ids {
            failures.push(format!("encode {:?}: ours {ids:?}, transformers' {:?}", case.text, case.ids));
        }
        for (skip, want) in [(false, &case.decoded), (true, &case.decoded_skip_special)] {
            let got = tok.decode(&case.ids, skip);
            if got != *want {
                failures
                    .push(format!("decode {:?} (skip special {skip}): ours {got:?}, transformers' {want:?}", case.ids));
            }
        }
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
    assert!(cases.tokenizer.iter().any(|c| c.text.contains("<|im_start|>")), "special tokens in text are covered");
    eprintln!(
        "{} texts: ids and decoding (with and without special tokens) equal transformers'",
        cases.tokenizer.len()
    );
}
