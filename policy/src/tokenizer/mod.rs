//! Tokenizers behind one trait: the byte-level tokenizer of the built-in models (256 byte
//! tokens plus the action protocol's special tokens) and a Hugging Face `tokenizer.json`
//! (e.g. SmolLM2's, Qwen2.5's), with the chat template that turns a conversation into ids and a loss mask.

mod byte;
mod chat;
pub mod framing;
mod hf;
mod jinja;

pub use byte::ByteTokenizer;
pub use chat::{ChatTemplate, RenderedChat, RenderedTurn};
pub use hf::{HfTokenizer, CHATML_TEMPLATE};
pub use jinja::{ChatMessage, JinjaTemplate};

use crate::error::Result;

/// The ids a caller needs beyond ordinary text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialIds {
    /// Put in front of every rendered conversation, if the tokenizer has one.
    pub bos: Option<u32>,
    /// End of a document; generation stops on it.
    pub eos: u32,
    /// Fills padded positions (never attended to, so any id would do; this one is harmless).
    pub pad: u32,
    /// Ends a turn; generation of an agent turn stops on it, and it is trained on.
    pub end_of_turn: u32,
}

/// Text to ids and back. Implementations are cheap to share across threads.
pub trait Tokenizer: Send + Sync {
    /// The ids of `text`, without any special tokens added around it.
    fn encode(&self, text: &str) -> Result<Vec<u32>>;
    /// The text of `ids`; never panics, whatever the ids (unknown ids become U+FFFD or are
    /// dropped). With `skip_special`, control tokens (bos, eos, pad, turn markers) are left
    /// out.
    fn decode(&self, ids: &[u32], skip_special: bool) -> String;
    /// The special ids.
    fn special_ids(&self) -> SpecialIds;
    /// How many ids the tokenizer can produce (the model's `vocab_size` must be at least this).
    fn vocab_size(&self) -> usize;
    /// How turns are framed for this tokenizer's models.
    fn chat_template(&self) -> ChatTemplate;
    /// The model's own Jinja chat template, where it has one: what renders a conversation
    /// exactly as `apply_chat_template` does (the built-in byte-level models have none).
    fn jinja(&self) -> Option<&JinjaTemplate> {
        None
    }
}
