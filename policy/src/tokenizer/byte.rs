//! The byte-level tokenizer of the built-in models: ids 0–255 are the bytes of UTF-8 text,
//! then the special tokens. The action protocol's tags (`<tool>`, `</tool>`, `<answer>`,
//! `</answer>`) are single tokens and are recognised in text; the control tokens (`<|bos|>`,
//! roles, …) are never produced from text, so no message can forge a turn boundary.
//!
//! ```text
//!  0..=255  bytes     256 <|bos|>   257 <|eos|>    258 <|pad|>    259 <|end|>
//!  260 <|system|>     261 <|user|>  262 <|agent|>  263 <|tool|>
//!  264 <tool>         265 </tool>   266 <answer>   267 </answer>
//! ```

use protocol::wire::Role;

use super::{ChatTemplate, SpecialIds, Tokenizer};
use crate::error::Result;

/// Special tokens in id order, starting at 256.
const SPECIALS: [&str; 12] = [
    "<|bos|>",
    "<|eos|>",
    "<|pad|>",
    "<|end|>",
    "<|system|>",
    "<|user|>",
    "<|agent|>",
    "<|tool|>",
    "<tool>",
    "</tool>",
    "<answer>",
    "</answer>",
];

/// Index in [`SPECIALS`] of the first action tag; those before it are control tokens.
const FIRST_TAG: usize = 8;

/// The byte-level tokenizer. Stateless; `decode(encode(s)) == s` for every string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByteTokenizer;

impl ByteTokenizer {
    /// Number of ids: 256 bytes and the special tokens.
    pub const VOCAB_SIZE: usize = 256 + SPECIALS.len();
    /// Beginning of a conversation.
    pub const BOS: u32 = 256;
    /// End of a document.
    pub const EOS: u32 = 257;
    /// Padding.
    pub const PAD: u32 = 258;
    /// End of a turn.
    pub const END: u32 = 259;
    /// `<tool>`.
    pub const TOOL_OPEN: u32 = 264;
    /// `</tool>`.
    pub const TOOL_CLOSE: u32 = 265;
    /// `<answer>`.
    pub const ANSWER_OPEN: u32 = 266;
    /// `</answer>`.
    pub const ANSWER_CLOSE: u32 = 267;

    /// The id of a special token by its text (`"<|agent|>"`, `"<tool>"`, …).
    pub fn special(name: &str) -> Option<u32> {
        SPECIALS.iter().position(|s| *s == name).map(|i| 256 + i as u32)
    }

    /// The role token that opens a turn of `role`.
    pub fn role_id(role: Role) -> u32 {
        256 + match role {
            Role::System => 4,
            Role::User => 5,
            Role::Agent => 6,
            Role::Tool => 7,
        }
    }

    /// Encodes without allocating a `Result` (byte-level encoding cannot fail).
    pub fn encode_str(text: &str) -> Vec<u32> {
        let bytes = text.as_bytes();
        let mut ids = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'<' {
                let tag = SPECIALS[FIRST_TAG..].iter().position(|t| bytes[i..].starts_with(t.as_bytes()));
                if let Some(k) = tag {
                    ids.push(256 + (FIRST_TAG + k) as u32);
                    i += SPECIALS[FIRST_TAG + k].len();
                    continue;
                }
            }
            ids.push(u32::from(bytes[i]));
            i += 1;
        }
        ids
    }
}

impl Tokenizer for ByteTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(Self::encode_str(text))
    }

    fn decode(&self, ids: &[u32], skip_special: bool) -> String {
        let mut bytes = Vec::with_capacity(ids.len());
        for &id in ids {
            match id {
                0..=255 => bytes.push(id as u8),
                _ => match SPECIALS.get(id as usize - 256) {
                    Some(_) if skip_special && (id as usize) < 256 + FIRST_TAG => {}
                    Some(s) => bytes.extend_from_slice(s.as_bytes()),
                    None => bytes.extend_from_slice(char::REPLACEMENT_CHARACTER.to_string().as_bytes()),
                },
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn special_ids(&self) -> SpecialIds {
        SpecialIds { bos: Some(Self::BOS), eos: Self::EOS, pad: Self::PAD, end_of_turn: Self::END }
    }

    fn vocab_size(&self) -> usize {
        Self::VOCAB_SIZE
    }

    fn chat_template(&self) -> ChatTemplate {
        let header = |r| vec![Self::role_id(r)];
        ChatTemplate {
            start: vec![Self::BOS],
            default_system: Vec::new(),
            headers: [header(Role::System), header(Role::User), header(Role::Agent), header(Role::Tool)],
            footers: std::array::from_fn(|_| vec![Self::END]),
            end_of_turn: vec![Self::END],
            separator: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_tags_are_single_tokens_and_control_tokens_are_not_read_from_text() {
        let ids = ByteTokenizer::encode_str("a<tool>calc(1)</tool><answer>2</answer><|end|>");
        assert_eq!(ids[0], u32::from(b'a'));
        assert_eq!(ids[1], ByteTokenizer::TOOL_OPEN);
        assert!(ids.contains(&ByteTokenizer::TOOL_CLOSE));
        assert!(ids.contains(&ByteTokenizer::ANSWER_OPEN) && ids.contains(&ByteTokenizer::ANSWER_CLOSE));
        assert!(!ids.contains(&ByteTokenizer::END), "<|end|> in text stays bytes");
        assert_eq!(ByteTokenizer.decode(&ids, false), "a<tool>calc(1)</tool><answer>2</answer><|end|>");
    }

    #[test]
    fn decode_skips_control_tokens_on_request_and_replaces_unknown_ids() {
        let t = ByteTokenizer;
        let ids = [ByteTokenizer::BOS, 104, 105, ByteTokenizer::TOOL_OPEN, ByteTokenizer::END, 9999];
        assert_eq!(t.decode(&ids, true), "hi<tool>\u{FFFD}");
        assert_eq!(t.decode(&ids, false), "<|bos|>hi<tool><|end|>\u{FFFD}");
        assert_eq!(ByteTokenizer::special("<|agent|>"), Some(ByteTokenizer::role_id(Role::Agent)));
        assert_eq!(ByteTokenizer::VOCAB_SIZE, 268);
    }
}
