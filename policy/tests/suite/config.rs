//! Config loading: real config.json files of both transformers generations, the built-in
//! sizes, and errors that name the field.

use policy::{ModelConfig, PolicyError};

use crate::common::fixture_dir;

const LEGACY_QWEN25: &str = r#"{
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936
}"#;

fn field_of(json: &str) -> String {
    match ModelConfig::from_json_str(json) {
        Err(PolicyError::Config { field, .. }) => field,
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn the_fixture_config_of_transformers_5_loads() {
    let c = ModelConfig::from_file(&fixture_dir().join("config.json")).unwrap();
    assert_eq!((c.vocab_size, c.hidden_size, c.num_hidden_layers), (300, 64, 2));
    assert_eq!((c.num_attention_heads, c.num_key_value_heads, c.head_dim), (4, 2, 16));
    assert_eq!(c.rope_theta, 1000.0, "read from rope_parameters");
    assert!(c.qkv_bias() && !c.o_bias() && !c.tie_word_embeddings);
}

#[test]
fn a_qwen25_config_of_transformers_4_loads_and_round_trips() {
    let c = ModelConfig::from_json_str(LEGACY_QWEN25).unwrap();
    assert_eq!((c.rope_theta, c.head_dim, c.tie_word_embeddings), (1e6, 64, true));
    // Qwen2.5-0.5B has 494 M parameters.
    assert!((490_000_000..500_000_000).contains(&c.num_parameters()), "{}", c.num_parameters());
    assert_eq!(ModelConfig::from_json_str(&c.to_json_string()).unwrap(), c);
    let llama =
        LEGACY_QWEN25.replace("\"qwen2\"", "\"llama\"").replace("\"rope_scaling\": null", "\"attention_bias\": true");
    let l = ModelConfig::from_json_str(&llama).unwrap();
    assert!(l.qkv_bias() && l.o_bias());
}

#[test]
fn errors_name_the_field() {
    let with = |from: &str, to: &str| {
        assert!(LEGACY_QWEN25.contains(from), "{from}");
        LEGACY_QWEN25.replace(from, to)
    };
    assert_eq!(field_of(&with("\"hidden_size\": 896", "\"hidden_size\": \"wide\"")), "hidden_size");
    assert_eq!(field_of(&with("\"vocab_size\": 151936", "\"other\": 1")), "vocab_size");
    assert_eq!(field_of("42"), "config.json");
    assert_eq!(field_of(&with("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3")), "num_key_value_heads");
    assert_eq!(field_of(&with("\"intermediate_size\": 4864", "\"intermediate_size\": -1")), "intermediate_size");
    assert_eq!(field_of(&with("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"")), "hidden_act");
    assert_eq!(field_of(&with("\"model_type\": \"qwen2\"", "\"model_type\": \"gpt2\"")), "model_type");
    assert_eq!(field_of(&with("\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": 0")), "rms_norm_eps");
    assert_eq!(field_of(&with("\"use_sliding_window\": false", "\"use_sliding_window\": true")), "use_sliding_window");
    let scaled = with("\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0}");
    assert_eq!(field_of(&scaled), "rope_scaling.rope_type");
    let nested =
        with("\"rope_scaling\": null", "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 5.0}");
    assert_eq!(field_of(&nested), "rope_theta", "two disagreeing thetas");
    let message =
        ModelConfig::from_json_str(&with("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"")).unwrap_err();
    assert!(message.to_string().starts_with("config field `hidden_act`"), "{message}");
}

#[test]
fn the_built_in_sizes_are_as_advertised() {
    let tiny = ModelConfig::builtin("tiny").unwrap();
    let small = ModelConfig::builtin("small").unwrap();
    assert!((1_000_000..3_000_000).contains(&tiny.num_parameters()), "{}", tiny.num_parameters());
    assert!((20_000_000..30_000_000).contains(&small.num_parameters()), "{}", small.num_parameters());
    assert!(tiny.vocab_size as usize >= policy::ByteTokenizer::VOCAB_SIZE);
    let built = policy::LoadedModel::fresh(&tiny, tch::Device::Cpu, true).unwrap();
    let counted: i64 = built.vs.variables().values().map(|t| t.numel() as i64).sum();
    assert_eq!(counted, tiny.num_parameters() + tiny.hidden_size + 1, "value head adds hidden + 1");
    assert!(ModelConfig::builtin("huge").is_err());
}
