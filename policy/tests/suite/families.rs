//! Qwen3 and Llama 3 against Hugging Face transformers: for each family, with untied and tied
//! embeddings, the logits `Qwen3ForCausalLM` / `LlamaForCausalLM` computed (f32, eager
//! attention) for a batch with one left-padded row are reproduced within 1e-4 at every real
//! position (fixtures from scripts/make_family_fixtures.py). And Qwen3-8B's real
//! `config.json` loads and counts its parameters.
//!
//! Qwen3-8B's parameters, counted independently of `ModelConfig::num_parameters` from its
//! public config (hidden h = 4096, L = 36 layers, 32 query heads and 8 key/value heads of
//! d = 128, MLP width m = 12288, vocabulary V = 151936, untied embeddings, no biases):
//!
//! ```text
//!  attention  q 4096·(32·128) + k, v 2·4096·(8·128) + o (32·128)·4096 = 41,943,040
//!  q_norm, k_norm 2·128                                               =        256
//!  MLP 3·4096·12288                                                   = 150,994,944
//!  two RMSNorms 2·4096                                                =      8,192
//!  per layer                                                            192,946,432
//!  × 36 layers                                                        6,946,071,552
//!  embed_tokens + lm_head 2·151936·4096                               1,244,659,712
//!  final norm                                                                 4,096
//!  total                                                              8,190,735,360  (8.19e9)
//! ```

use std::path::PathBuf;

use policy::{LoadedModel, ModelConfig};
use tch::{Device, Tensor};

use crate::common::max_abs_diff;

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

fn golden(name: &str, tensor: &str) -> Tensor {
    let all = Tensor::read_safetensors(dir(name).join("golden.safetensors")).expect("golden file");
    all.into_iter().find(|(n, _)| n == tensor).map(|(_, t)| t).expect("golden tensor")
}

/// The largest |Δlogit| over real positions (row 1 is left-padded by 3).
fn logit_error(name: &str, m: &LoadedModel) -> f64 {
    let out = m.model.forward(&golden(name, "input_ids"), Some(&golden(name, "attention_mask"))).unwrap();
    let expected = golden(name, "logits");
    let full = max_abs_diff(&out.logits.get(0), &expected.get(0));
    let padded = max_abs_diff(&out.logits.get(1).narrow(0, 3, 7), &expected.get(1).narrow(0, 3, 7));
    full.max(padded)
}

#[test]
fn qwen3_and_llama3_logits_match_transformers_tied_and_untied() {
    for name in ["qwen3-tiny", "qwen3-tiny-tied", "llama3-tiny", "llama3-tiny-tied"] {
        let m = LoadedModel::from_dir(&dir(name), Device::Cpu, false).expect("the fixture loads");
        let tied = name.ends_with("-tied");
        assert_eq!(m.model.config().tie_word_embeddings, tied, "{name}");
        assert_eq!(m.vs.variables().contains_key("lm_head.weight"), !tied, "{name}");
        let count: i64 = m.vs.variables().values().map(|v| v.numel() as i64).sum();
        assert_eq!(count, m.model.config().num_parameters(), "{name}: parameter count");
        let error = logit_error(name, &m);
        eprintln!("{name}: max |Δlogit| vs transformers {error:.2e}");
        assert!(error < 1e-4, "{name}: {error}");
    }
}

#[test]
fn the_families_differences_are_what_parity_rests_on() {
    let qwen3 = ModelConfig::from_file(&dir("qwen3-tiny").join("config.json")).unwrap();
    assert_eq!(
        (qwen3.model_type.as_str(), qwen3.head_dim, qwen3.hidden_size / qwen3.num_attention_heads),
        ("qwen3", 16, 8)
    );
    assert!(qwen3.qk_norm() && !qwen3.qkv_bias() && !qwen3.o_bias());
    let m = LoadedModel::from_dir(&dir("qwen3-tiny"), Device::Cpu, false).unwrap();
    let names = m.vs.variables();
    assert!(
        names.contains_key("model.layers.1.self_attn.q_norm.weight")
            && !names.contains_key("model.layers.0.self_attn.q_proj.bias")
    );

    // Without Llama 3's frequency rescaling the same weights give other logits: the fixture
    // exercises it.
    let llama = ModelConfig::from_file(&dir("llama3-tiny").join("config.json")).unwrap();
    let scaling = llama.rope_scaling.expect("llama3 rope scaling");
    assert_eq!((scaling.factor, scaling.original_max_position_embeddings), (8.0, 64));
    let unscaled = ModelConfig { rope_scaling: None, ..llama };
    let mut plain = LoadedModel::fresh(&unscaled, Device::Cpu, false).unwrap();
    policy::weights::load_safetensors(
        &mut plain.vs,
        &policy::pretrained::safetensors_files(&dir("llama3-tiny")).unwrap(),
    )
    .unwrap();
    assert!(logit_error("llama3-tiny", &plain) > 1e-3, "rope scaling made no difference");
}

#[test]
fn qwen3_8b_config_loads_and_counts_its_parameters() {
    // Qwen3-8B's config.json (public values; fields that do not shape the model trimmed).
    let json = r#"{
      "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
      "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
      "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
      "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
      "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
      "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
      "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
      "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
    }"#;
    let c = ModelConfig::from_json_str(json).unwrap();
    assert_eq!((c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads), (4096, 36, 32, 8));
    assert_eq!((c.head_dim, c.intermediate_size, c.vocab_size, c.tie_word_embeddings), (128, 12288, 151_936, false));
    assert_eq!(c.rope_theta, 1e6);
    assert!(c.qk_norm() && !c.qkv_bias());
    // (That the formula counts what a Qwen3 model holds is checked on the fixtures above.)
    assert_eq!(c.num_parameters(), 8_190_735_360, "see the module header");
}

#[test]
fn llama3_scaling_and_qwen3_defaults_are_read_and_checked() {
    let base = std::fs::read_to_string(dir("llama3-tiny").join("config.json")).unwrap();
    let field_of = |json: &str| match ModelConfig::from_json_str(json) {
        Err(policy::PolicyError::Config { field, .. }) => field,
        other => panic!("expected a config error, got {other:?}"),
    };
    assert_eq!(field_of(&base.replace("\"low_freq_factor\": 1.0,", "")), "rope_parameters.low_freq_factor");
    assert_eq!(
        field_of(&base.replace("\"high_freq_factor\": 4.0", "\"high_freq_factor\": 0.5")),
        "rope_scaling.high_freq_factor"
    );
    assert_eq!(field_of(&base.replace("\"llama3\"", "\"yarn\"")), "rope_parameters.rope_type");
    // The legacy spelling (transformers 4: `rope_scaling` with `type`) reads the same.
    let c = ModelConfig::from_json_str(&base).unwrap();
    let legacy = base
        .replace("\"rope_parameters\"", "\"rope_theta\": 10000.0, \"rope_scaling\"")
        .replace("\"rope_theta\": 10000.0,\n    \"rope_type\"", "\"type\"");
    assert!(legacy.contains("\"type\": \"llama3\"") && !legacy.contains("rope_parameters"));
    assert_eq!(ModelConfig::from_json_str(&legacy).unwrap(), c);
    // Our config.json round-trips, scaling included.
    assert_eq!(ModelConfig::from_json_str(&c.to_json_string()).unwrap(), c);
    // A Qwen3 config without head_dim takes transformers' default of 128.
    let qwen3 = std::fs::read_to_string(dir("qwen3-tiny").join("config.json")).unwrap();
    let no_head_dim = qwen3.replace("\"head_dim\": 16,", "").replace("\"hidden_size\": 32", "\"hidden_size\": 256");
    assert_eq!(ModelConfig::from_json_str(&no_head_dim).unwrap().head_dim, 128);
}
