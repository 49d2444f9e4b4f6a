//! The built-in models' byte-level tokenizer as Hugging Face tokenizer files, so an exported
//! built-in model loads with `AutoTokenizer` and gives the same ids as [`ByteTokenizer`].
//!
//! `tokenizer.json` is a byte-level BPE without merges: the ByteLevel pre-tokenizer maps each
//! byte to one printable character (GPT-2's byte-to-unicode table), and the vocabulary maps that
//! character to the byte's value, so every byte is its own id 0–255. The special tokens follow
//! as added tokens 256–267: the control tokens (`<|bos|>`, roles, …) as special, the action tags
//! (`<tool>`, `<answer>`, …) as ordinary added tokens recognised in text, as ours are.
//! `tokenizer_config.json` names bos/eos/pad and carries a chat template that frames turns as
//! [`ByteTokenizer::chat_template`] does (`<|bos|><|user|>…<|end|><|agent|>`).

use serde_json::{json, Map, Value};

use crate::tokenizer::{ByteTokenizer, Tokenizer};

/// GPT-2's byte-to-unicode table: printable bytes map to themselves, the rest to U+0100 on.
fn byte_char(b: u8) -> char {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(b) {
        return char::from(b);
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + rank).unwrap_or('\u{FFFD}')
}

/// The Jinja chat template of the byte-level framing (transformers' `apply_chat_template`).
pub const CHAT_TEMPLATE: &str = "<|bos|>{% for m in messages %}{% if m['role'] == 'assistant' %}<|agent|>\
{% else %}<|{{ m['role'] }}|>{% endif %}{{ m['content'] }}<|end|>{% endfor %}\
{% if add_generation_prompt %}<|agent|>{% endif %}";

/// The special tokens' text, id 256 on.
fn specials() -> Vec<(u32, String)> {
    (256..ByteTokenizer::VOCAB_SIZE as u32).map(|id| (id, ByteTokenizer.decode(&[id], false))).collect()
}

/// `tokenizer.json` for [`ByteTokenizer`].
pub fn tokenizer_json() -> Value {
    let vocab: Map<String, Value> = (0..=255u8).map(|b| (byte_char(b).to_string(), json!(b))).collect();
    let added: Vec<Value> = specials()
        .into_iter()
        .map(|(id, content)| {
            let special = content.starts_with("<|");
            json!({ "id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
                    "normalized": false, "special": special })
        })
        .collect();
    let byte_level =
        json!({ "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false });
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": byte_level,
        "post_processor": null,
        "decoder": byte_level,
        "model": { "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                   "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                   "vocab": vocab, "merges": [] }
    })
}

/// `tokenizer_config.json` for [`ByteTokenizer`].
pub fn tokenizer_config_json() -> Value {
    let name = |id: u32| ByteTokenizer.decode(&[id], false);
    let ids = ByteTokenizer.special_ids();
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": ids.bos.map(name),
        "eos_token": name(ids.eos),
        "pad_token": name(ids.pad),
        "add_bos_token": false,
        "clean_up_tokenization_spaces": false,
        "model_max_length": 4096,
        "chat_template": CHAT_TEMPLATE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_has_its_own_printable_character() {
        let chars: std::collections::BTreeSet<char> = (0..=255u8).map(byte_char).collect();
        assert_eq!(chars.len(), 256);
        assert_eq!((byte_char(b'a'), byte_char(b' '), byte_char(0)), ('a', '\u{120}', '\u{100}'));
    }

    #[test]
    fn specials_are_the_byte_tokenizers() {
        let s = specials();
        assert_eq!(s.first().map(|(i, t)| (*i, t.as_str())), Some((256, "<|bos|>")));
        assert_eq!(s.last().map(|(i, t)| (*i, t.as_str())), Some((267, "</answer>")));
    }
}
