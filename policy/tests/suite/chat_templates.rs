//! The models' own chat templates (SmolLM2's, Qwen2.5's, Qwen3's) against transformers'
//! `apply_chat_template`, whose renderings are kept in policy/fixtures/chat_templates/*.json
//! (scripts/chat_template_golden.py says how they were made):
//! - [`JinjaTemplate`] renders every case's text exactly, default system messages, tool
//!   results and generation prompts included;
//! - [`HfTokenizer::from_dir`] turns that text into transformers' ids;
//! - the turn-by-turn framing episodes use ([`ChatTemplate`], read off each template) gives the
//!   same ids for every conversation our episodes can make: turns of system, user, assistant and
//!   tool, ending with a generation prompt. Where a template renders the last assistant turn of a
//!   finished conversation its own way (Qwen3's empty `<think>` block) or rewrites earlier ones
//!   (Qwen3 drops reasoning before the last user turn), the framing follows the generation
//!   prompt and the turns as they were generated (policy/src/tokenizer/framing.rs): those cases
//!   are compared as text only.
//!
//! The tokenizer directories are required: set-up makes them (scripts/smollm2.sh,
//! scripts/qwen_tokenizers.sh), and a missing one fails the test with the command to run.

use std::path::PathBuf;

use policy::tokenizer::{ChatMessage, JinjaTemplate};
use policy::{HfTokenizer, Tokenizer};
use protocol::wire::Role;
use serde_json::Value;

/// A template's fixture and the tokenizer directory it was rendered with.
struct Model {
    name: &'static str,
    fixture: Value,
    dir: PathBuf,
}

fn model(name: &'static str, env: &str, default_dir: &str, made_by: &str) -> Model {
    let fixture_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/chat_templates/{name}.json"));
    let fixture = serde_json::from_str(&std::fs::read_to_string(&fixture_path).unwrap()).unwrap();
    let dir = std::env::var_os(env)
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(default_dir), PathBuf::from);
    assert!(
        dir.join("tokenizer.json").is_file(),
        "{name}'s tokenizer is missing at {}: run `bash {made_by}` (part of `scripts/setup.sh all`)",
        dir.display()
    );
    Model { name, fixture, dir }
}

fn models() -> Vec<Model> {
    vec![
        model("smollm2", "REAGENT_SMOLLM2", "target/smollm2", "scripts/smollm2.sh"),
        model("qwen2_5", "REAGENT_QWEN2_5_TOKENIZER", "target/qwen2_5-tokenizer", "scripts/qwen_tokenizers.sh"),
        model("qwen3", "REAGENT_QWEN3_TOKENIZER", "target/qwen3-tokenizer", "scripts/qwen_tokenizers.sh"),
    ]
}

fn messages(case: &Value) -> Vec<ChatMessage> {
    case["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| ChatMessage::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|i| i.as_u64().unwrap() as u32).collect()
}

fn role(name: &str) -> Role {
    match name {
        "system" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Agent,
        "tool" => Role::Tool,
        other => panic!("no role {other}"),
    }
}

#[test]
fn templates_render_exactly_as_apply_chat_template() {
    for m in models() {
        let f = &m.fixture;
        let tokens =
            ["bos_token", "eos_token"].into_iter().filter_map(|k| f[k].as_str().map(|t| (k, t.to_string()))).collect();
        let template = JinjaTemplate::new(f["chat_template"].as_str().unwrap(), tokens).unwrap();
        let cases = f["cases"].as_array().unwrap();
        assert!(cases.len() >= 7, "{}: {} cases", m.name, cases.len());
        for case in cases {
            let gen = case["add_generation_prompt"].as_bool().unwrap();
            let text = template.render(&messages(case), gen).unwrap();
            assert_eq!(text, case["text"].as_str().unwrap(), "{} / {}", m.name, case["name"]);
        }
        // The directory's own template is the fixture's.
        let from_dir = JinjaTemplate::from_dir(&m.dir).unwrap().expect("the directory has a chat template");
        assert_eq!(from_dir.source(), f["chat_template"].as_str().unwrap(), "{}", m.name);
    }
}

#[test]
fn rendered_text_tokenizes_to_transformers_ids_and_turn_framing_agrees() {
    for m in models() {
        let tok = HfTokenizer::from_dir(&m.dir).unwrap();
        let jinja = tok.jinja().unwrap();
        let framing = tok.chat_template();
        let mut framed = 0;
        for case in m.fixture["cases"].as_array().unwrap() {
            let (name, gen) = (case["name"].as_str().unwrap(), case["add_generation_prompt"].as_bool().unwrap());
            let want = ids(&case["ids"]);
            let text = jinja.render(&messages(case), gen).unwrap();
            assert_eq!(tok.encode(&text).unwrap(), want, "{} / {name}: ids of the rendered text", m.name);
            let rewritten_by_qwen3 = m.name == "qwen3" && (!gen || name == "reasoning_in_history");
            if rewritten_by_qwen3 {
                continue;
            }
            let turns: Vec<(Role, String)> =
                messages(case).iter().map(|c| (role(&c.role), c.content.clone())).collect();
            let refs: Vec<(Role, &str)> = turns.iter().map(|(r, t)| (*r, t.as_str())).collect();
            let got = if gen {
                framing.generation_prompt(&tok, &refs).unwrap()
            } else {
                framing.render(&tok, &refs).unwrap().ids
            };
            assert_eq!(
                tok.decode(&got, false),
                case["text"].as_str().unwrap(),
                "{} / {name}: the framing's text",
                m.name
            );
            assert_eq!(got, want, "{} / {name}: the framing's ids", m.name);
            framed += 1;
        }
        assert!(framed >= 4, "{}: only {framed} cases compared turn by turn", m.name);
    }
}

#[test]
fn smollm2_frames_turns_with_its_default_system_message() {
    let m = &models()[0];
    let tok = HfTokenizer::from_dir(&m.dir).unwrap();
    let t = tok.chat_template();
    let text = |ids: &[u32]| tok.decode(ids, false);
    assert_eq!(
        text(&t.default_system),
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    );
    assert_eq!(text(t.header(Role::Agent)), "<|im_start|>assistant\n");
    assert_eq!(text(&t.end_of_turn), "<|im_end|>");
    assert_eq!(text(&t.separator), "\n");
    assert_eq!(t.stop_sequences(), vec![vec![tok.special_ids().end_of_turn]]);
    // A conversation that opens with its own system turn gets no default one.
    let with_system = t.render(&tok, &[(Role::System, "Be brief."), (Role::User, "Hi")]).unwrap();
    assert!(!text(&with_system.ids).contains("SmolLM"), "{}", text(&with_system.ids));
}
