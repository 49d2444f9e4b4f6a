//! Tokenizers: byte-level round trips (property tests), decoding arbitrary ids, the chat
//! template's loss mask, and the `tokenizer.json` wrapper against the Python `tokenizers`
//! encodings kept in the fixture.

use std::sync::OnceLock;

use policy::tokenizer::ChatTemplate;
use policy::{ByteTokenizer, HfTokenizer, Tokenizer};
use proptest::prelude::*;
use protocol::wire::Role;

use crate::common::fixture_dir;

/// The fixture's tokenizer, loaded once.
fn hf() -> &'static HfTokenizer {
    static TOKENIZER: OnceLock<HfTokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| HfTokenizer::from_file(&fixture_dir().join("tokenizer.json")).unwrap())
}

/// Text made of pieces that stress tag matching: tags, broken tags, control-token names,
/// multi-byte characters.
fn tricky_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("<tool>".to_string()),
        Just("</tool>".to_string()),
        Just("<answer>".to_string()),
        Just("</answer>".to_string()),
        Just("<".to_string()),
        Just("</".to_string()),
        Just("<tool".to_string()),
        Just("<|end|>".to_string()),
        Just("<|agent|>".to_string()),
        Just("é🙂".to_string()),
        "[a-z ()=,]{0,4}",
    ];
    prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Agent), Just(Role::Tool)]
}

/// Checks that `template` marks exactly each agent turn's text and end-of-turn ids.
fn check_mask(tok: &dyn Tokenizer, template: &ChatTemplate, turns: &[(Role, String)]) {
    let refs: Vec<(Role, &str)> = turns.iter().map(|(r, t)| (*r, t.as_str())).collect();
    let chat = template.render(tok, &refs).unwrap();
    assert_eq!(chat.ids.len(), chat.loss_mask.len());
    let opening = template.opening(turns.first().map_or(Role::System, |t| t.0)).len();
    let mut expected = vec![false; opening];
    for (role, text) in turns {
        let text_len = tok.encode(text).unwrap().len();
        let footer = template.footer(*role).len();
        let trained = if *role == Role::Agent { text_len + template.end_of_turn.len() } else { 0 };
        expected.extend(std::iter::repeat_n(false, template.header(*role).len()));
        expected.extend(std::iter::repeat_n(true, trained));
        expected.extend(std::iter::repeat_n(false, text_len + footer - trained));
    }
    assert_eq!(chat.loss_mask, expected);
    // The masked ids are exactly the agent texts, each followed by its end of turn.
    let masked: Vec<u32> = chat.ids.iter().zip(&chat.loss_mask).filter(|(_, &m)| m).map(|(&i, _)| i).collect();
    let mut agent = Vec::new();
    for (_, text) in turns.iter().filter(|(r, _)| *r == Role::Agent) {
        agent.extend(tok.encode(text).unwrap());
        agent.extend(&template.end_of_turn);
    }
    assert_eq!(masked, agent);
    for (i, start) in chat.turn_starts.iter().enumerate() {
        let header = template.header(turns[i].0);
        assert_eq!(&chat.ids[*start..*start + header.len()], header);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_string_round_trips_through_the_byte_tokenizer(s in any::<String>(), t in tricky_text()) {
        for text in [&s, &t] {
            let ids = ByteTokenizer.encode(text).unwrap();
            prop_assert!(ids.iter().all(|&i| (i as usize) < ByteTokenizer::VOCAB_SIZE));
            prop_assert_eq!(&ByteTokenizer.decode(&ids, false), text);
            prop_assert_eq!(&ByteTokenizer.decode(&ids, true), text, "text never yields control tokens");
        }
    }

    #[test]
    fn any_ids_decode_without_panicking(ids in prop::collection::vec(any::<u32>(), 0..64),
                                        small in prop::collection::vec(0u32..300, 0..64)) {
        let hf = hf();
        for ids in [&ids, &small] {
            let _ = ByteTokenizer.decode(ids, false);
            let _ = ByteTokenizer.decode(ids, true);
            let _ = hf.decode(ids, false);
            let _ = hf.decode(ids, true);
        }
    }

    #[test]
    fn the_loss_mask_marks_exactly_the_agent_tokens(turns in prop::collection::vec((role(), tricky_text()), 0..6)) {
        check_mask(&ByteTokenizer, &ByteTokenizer.chat_template(), &turns);
        let hf = hf();
        check_mask(hf, &hf.chat_template(), &turns);
    }
}

#[test]
fn the_byte_chat_template_renders_a_conversation() {
    let t = ByteTokenizer;
    let turns = [(Role::System, "s"), (Role::User, "q"), (Role::Agent, "<answer>4</answer>")];
    let chat = t.chat_template().render(&t, &turns).unwrap();
    let sp = |n| ByteTokenizer::special(n).unwrap();
    let expected = vec![
        sp("<|bos|>"),
        sp("<|system|>"),
        u32::from(b's'),
        sp("<|end|>"),
        sp("<|user|>"),
        u32::from(b'q'),
        sp("<|end|>"),
        sp("<|agent|>"),
        sp("<answer>"),
        u32::from(b'4'),
        sp("</answer>"),
        sp("<|end|>"),
    ];
    assert_eq!(chat.ids, expected);
    assert_eq!(chat.loss_mask.iter().filter(|&&m| m).count(), 4, "<answer> 4 </answer> <|end|>");
    assert_eq!(chat.turn_starts, vec![1, 4, 7]);
    let prompt = t.chat_template().generation_prompt(&t, &turns[..2]).unwrap();
    assert_eq!(prompt, [&expected[..7], &[sp("<|agent|>")]].concat());
    assert_eq!(t.chat_template().stop_sequences(), vec![vec![ByteTokenizer::END]]);
}

#[test]
fn the_hf_tokenizer_matches_python_tokenizers() {
    let text = std::fs::read_to_string(fixture_dir().join("tokenizer_cases.json")).unwrap();
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let tok = hf();
    assert!(!cases.is_empty());
    for case in cases {
        let s = case["text"].as_str().unwrap();
        let ids: Vec<u32> = case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        assert_eq!(tok.encode(s).unwrap(), ids, "{s:?}");
        assert_eq!(tok.decode(&ids, false), s);
    }
    let sp = tok.special_ids();
    assert_eq!((sp.bos, sp.eos, sp.end_of_turn), (None, 0, 2), "<|endoftext|>, <|im_end|>");
    assert!(tok.vocab_size() <= 300);
    let template = tok.chat_template();
    assert_eq!(template.header(Role::Agent)[0], 1, "<|im_start|>");
    assert_eq!(tok.decode(template.header(Role::Agent), false), "<|im_start|>assistant\n");
    assert_eq!(tok.decode(&template.separator, false), "\n");
}

#[test]
fn a_tokenizer_without_chatml_markers_is_refused() {
    let json = std::fs::read_to_string(fixture_dir().join("tokenizer.json")).unwrap();
    let renamed = json.replace("<|im_start|>", "<|start|>");
    let err = HfTokenizer::from_json_str(&renamed).unwrap_err().to_string();
    assert!(err.contains("im_start"), "{err}");
    assert!(HfTokenizer::from_json_str("{").is_err());
}
