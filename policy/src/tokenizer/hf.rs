//! A Hugging Face `tokenizer.json` (the `tokenizers` crate) behind [`Tokenizer`], framed with
//! ChatML (`<|im_start|>role\n…<|im_end|>\n`), as Qwen2/Qwen2.5 and Qwen3 models are.
//!
//! Only ChatML framing is implemented: the tokenizer must have `<|im_start|>` and
//! `<|im_end|>`. The agent's role is written `assistant`; tool results are a `tool` turn
//! (Qwen's Jinja template wraps them in a user turn instead — a simplification that only
//! matters for prompting a model trained on that exact form). Agent turns are kept verbatim:
//! Qwen3's template also drops the `<think>…</think>` part of agent turns before the last user
//! turn, which we do not (the learner trains on the ids that were sampled). Special tokens
//! written in text are matched by the `tokenizers` crate like any added token. Checked against
//! Qwen3's real tokenizer and `apply_chat_template` in policy/tests/suite/qwen3_tokenizer.rs.

use std::path::Path;

use protocol::wire::Role;

use super::{ChatTemplate, SpecialIds, Tokenizer};
use crate::error::{PolicyError, Result};

/// A `tokenizer.json` tokenizer with ChatML turn markers.
pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
    special: SpecialIds,
    im_start: u32,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizer").field("special", &self.special).finish_non_exhaustive()
    }
}

impl HfTokenizer {
    /// Loads a `tokenizer.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|source| PolicyError::Tokenizer { what: format!("cannot load {}", path.display()), source })?;
        Self::new(inner)
    }

    /// Loads a `tokenizer.json` from its text.
    pub fn from_json_str(json: &str) -> Result<Self> {
        let inner: tokenizers::Tokenizer = json
            .parse()
            .map_err(|source| PolicyError::Tokenizer { what: "cannot parse tokenizer.json".into(), source })?;
        Self::new(inner)
    }

    fn new(inner: tokenizers::Tokenizer) -> Result<Self> {
        let id = |t: &str| inner.token_to_id(t);
        let (Some(im_start), Some(im_end)) = (id("<|im_start|>"), id("<|im_end|>")) else {
            return Err(PolicyError::UnsupportedTokenizer(
                "tokenizer.json has no <|im_start|>/<|im_end|> tokens; only ChatML framing is implemented".into(),
            ));
        };
        let eos = id("<|endoftext|>").unwrap_or(im_end);
        let special = SpecialIds { bos: None, eos, pad: eos, end_of_turn: im_end };
        Ok(Self { inner, special, im_start })
    }

    /// The wrapped `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

impl Tokenizer for HfTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|source| PolicyError::Tokenizer { what: "cannot encode".into(), source })?;
        Ok(enc.get_ids().to_vec())
    }

    fn decode(&self, ids: &[u32], skip_special: bool) -> String {
        let known: Vec<u32> = ids.iter().copied().filter(|&i| self.inner.id_to_token(i).is_some()).collect();
        self.inner.decode(&known, skip_special).unwrap_or_else(|_| char::REPLACEMENT_CHARACTER.to_string())
    }

    fn special_ids(&self) -> SpecialIds {
        self.special
    }

    fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    fn chat_template(&self) -> ChatTemplate {
        let header = |name: &str| {
            let mut ids = vec![self.im_start];
            // Role names are plain ASCII; a tokenizer that cannot encode them has no vocabulary.
            ids.extend(self.encode(&format!("{name}\n")).unwrap_or_default());
            ids
        };
        ChatTemplate {
            start: Vec::new(),
            headers: [Role::System, Role::User, Role::Agent, Role::Tool].map(|r| header(chatml_role(r))),
            end_of_turn: vec![self.special.end_of_turn],
            separator: self.encode("\n").unwrap_or_default(),
        }
    }
}

/// The ChatML role name of `role`, as written in headers.
fn chatml_role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Agent => "assistant",
        Role::Tool => "tool",
    }
}
