//! A Hugging Face `tokenizer.json` (the `tokenizers` crate) behind [`Tokenizer`], framed by the
//! model's own Jinja chat template ([`super::jinja`], read off by [`super::framing`]): SmolLM2's
//! default system turn, Qwen's tool-result wrapping and any other template whose turns can be
//! framed one by one come out as `apply_chat_template` writes them.
//!
//! [`HfTokenizer::from_dir`] takes the template from the model directory (`chat_template.jinja`
//! or `tokenizer_config.json`); a bare `tokenizer.json` ([`HfTokenizer::from_file`]) is framed
//! with plain ChatML (`<|im_start|>role\n…<|im_end|>\n`) and must have those two tokens. Agent
//! turns are kept verbatim (the learner trains on the ids that were sampled). Special tokens
//! written in text are matched by the `tokenizers` crate like any added token. Checked against
//! real tokenizers and `apply_chat_template` in policy/tests/suite/qwen3_tokenizer.rs and
//! chat_templates.rs.

use std::path::Path;

use super::framing::{id_framing, text_framing};
use super::jinja::JinjaTemplate;
use super::{ChatTemplate, SpecialIds, Tokenizer};
use crate::error::{PolicyError, Result};

/// Plain ChatML, for a `tokenizer.json` that comes without a chat template.
pub const CHATML_TEMPLATE: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// A `tokenizer.json` tokenizer and its model's chat template.
pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
    special: SpecialIds,
    framing: ChatTemplate,
    jinja: JinjaTemplate,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizer").field("special", &self.special).finish_non_exhaustive()
    }
}

impl HfTokenizer {
    /// Loads a model directory's `tokenizer.json` with the directory's chat template
    /// (`chat_template.jinja` or `tokenizer_config.json`), or plain ChatML when it has none.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        let inner = tokenizers::Tokenizer::from_file(&path)
            .map_err(|source| PolicyError::Tokenizer { what: format!("cannot load {}", path.display()), source })?;
        let jinja = JinjaTemplate::from_dir(dir).map_err(|e| in_dir(dir, e))?;
        Self::new(inner, jinja).map_err(|e| in_dir(dir, e))
    }

    /// Loads a `tokenizer.json`, framed with plain ChatML.
    pub fn from_file(path: &Path) -> Result<Self> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|source| PolicyError::Tokenizer { what: format!("cannot load {}", path.display()), source })?;
        Self::new(inner, None)
    }

    /// Loads a `tokenizer.json` from its text, framed with plain ChatML.
    pub fn from_json_str(json: &str) -> Result<Self> {
        let inner: tokenizers::Tokenizer = json
            .parse()
            .map_err(|source| PolicyError::Tokenizer { what: "cannot parse tokenizer.json".into(), source })?;
        Self::new(inner, None)
    }

    fn new(inner: tokenizers::Tokenizer, jinja: Option<JinjaTemplate>) -> Result<Self> {
        let id = |t: &str| inner.token_to_id(t);
        let jinja = match jinja {
            Some(j) => j,
            None if id("<|im_start|>").is_some() && id("<|im_end|>").is_some() => {
                JinjaTemplate::new(CHATML_TEMPLATE, Vec::new())?
            }
            None => {
                return Err(PolicyError::UnsupportedTokenizer(
                    "no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json) and no \
                     <|im_start|>/<|im_end|> tokens for plain ChatML"
                        .into(),
                ))
            }
        };
        let text = text_framing(&jinja)?;
        let specials: std::collections::HashSet<u32> =
            inner.get_added_tokens_decoder().iter().filter(|(_, t)| t.special).map(|(&i, _)| i).collect();
        let encode = |s: &str| -> Result<Vec<u32>> {
            let enc = inner
                .encode(s, false)
                .map_err(|source| PolicyError::Tokenizer { what: "cannot encode".into(), source })?;
            Ok(enc.get_ids().to_vec())
        };
        let framing = id_framing(&text, &encode, &|i| specials.contains(&i))?;
        let end_of_turn = *framing
            .end_of_turn
            .last()
            .ok_or_else(|| PolicyError::ChatTemplate("the assistant's turn has no end-of-turn token".into()))?;
        let eos = id("<|endoftext|>").or_else(|| jinja.token("eos_token").and_then(id)).unwrap_or(end_of_turn);
        let special = SpecialIds { bos: None, eos, pad: eos, end_of_turn };
        Ok(Self { inner, special, framing, jinja })
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
        self.framing.clone()
    }

    fn jinja(&self) -> Option<&JinjaTemplate> {
        Some(&self.jinja)
    }
}

/// `e` with the model directory it concerns.
fn in_dir(dir: &Path, e: PolicyError) -> PolicyError {
    match e {
        PolicyError::ChatTemplate(m) => PolicyError::ChatTemplate(format!("{}: {m}", dir.display())),
        other => other,
    }
}
