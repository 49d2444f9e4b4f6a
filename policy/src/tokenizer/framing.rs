//! A model's turn framing read off its own Jinja chat template: the [`ChatTemplate`] ids
//! (opening, default system turn, a header and a footer per role, the agent's end of turn) with
//! which episodes grow turn by turn, so that a conversation built turn by turn is, as text,
//! what `apply_chat_template` makes of it.
//!
//! The template is rendered on a probe conversation whose contents are marker words
//! (system, user, assistant, tool, assistant, user), and on its prefixes:
//!
//! ```text
//!  F   = render(all six)                      ─ the markers split F into openings, headers, footers
//!  R_k = render(first k + 1)                  ─ footer_k = what follows marker k when it is last
//!  header_k = F between marker k-1's footer and marker k
//!  G   = render(system, user; generation prompt) − R_1 ─ the agent's header (what it generates after)
//!  U   = render(user alone)                   ─ before the marker: start, default system, header(user)
//! ```
//!
//! How our turns map onto the template's roles: the agent is `assistant`; an environment
//! observation from a tool is a `tool` message, one from the user or the environment a `user`
//! message. Our action protocol (`<tool>…</tool>`, `<answer>…</answer>`) is the agent's text, not
//! the template's tool-call syntax. The checks below refuse a template whose turns are not
//! separable this way (a marker rendered twice or not at all, a footer that changes with what
//! follows, user headers that differ by position), naming what differed.
//!
//! Where a template renders the last agent turn differently from earlier ones (Qwen3 gives the
//! last one an empty `<think>` block), the framing follows the earlier ones and the generation
//! prompt: what the model saw when it generated, and what the later turns show it.

use super::jinja::{ChatMessage, JinjaTemplate};
use super::ChatTemplate;
use crate::error::{PolicyError, Result};

/// The probe conversation: OpenAI role names and marker contents.
const PROBE: [(&str, &str); 6] = [
    ("system", "Zq0probe"),
    ("user", "Zq1probe"),
    ("assistant", "Zq2probe"),
    ("tool", "Zq3probe"),
    ("assistant", "Zq4probe"),
    ("user", "Zq5probe"),
];

/// The framing's pieces as text, before tokenisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextFraming {
    /// Before the first turn.
    pub start: String,
    /// After `start` when the conversation opens without a system turn.
    pub default_system: String,
    /// Per role (system, user, agent, tool): what opens a turn.
    pub headers: [String; 4],
    /// Per role: what follows a turn's text.
    pub footers: [String; 4],
}

/// Reads the framing off `template` (see the module docs).
pub fn text_framing(template: &JinjaTemplate) -> Result<TextFraming> {
    let messages: Vec<ChatMessage> = PROBE.iter().map(|(r, c)| ChatMessage::new(r, c)).collect();
    let render = |n: usize, gen: bool| {
        template.render(&messages[..n], gen).map_err(|e| {
            let roles: Vec<&str> = PROBE[..n].iter().map(|p| p.0).collect();
            PolicyError::ChatTemplate(format!("the template cannot render a conversation of {roles:?}: {e}"))
        })
    };
    let full = render(PROBE.len(), false)?;
    let at: Vec<usize> =
        PROBE.iter().map(|(_, marker)| find_once(&full, marker, "the whole probe")).collect::<Result<_>>()?;
    if at.windows(2).any(|w| w[0] >= w[1]) {
        return Err(PolicyError::ChatTemplate("the template does not render the messages in order".into()));
    }
    let end = |k: usize| at[k] + PROBE[k].1.len();
    // footer_k: what follows marker k when its message is the last one.
    let mut footers = Vec::with_capacity(PROBE.len());
    for (k, (role, marker)) in PROBE.iter().enumerate() {
        let alone = render(k + 1, false)?;
        let pos = find_once(&alone, marker, "its prefix")?;
        let footer = alone[pos + marker.len()..].to_string();
        if !full[end(k)..].starts_with(&footer) {
            return Err(PolicyError::ChatTemplate(format!(
                "a {role} turn ends with {footer:?} when last, but not when more follows: turns cannot be framed one by one"
            )));
        }
        footers.push(footer);
    }
    let header = |k: usize| full[end(k - 1) + footers[k - 1].len()..at[k]].to_string();
    let (user, tool, user_later) = (header(1), header(3), header(5));
    if user != user_later {
        return Err(PolicyError::ChatTemplate(format!(
            "a user turn opens with {user:?} after the system turn but {user_later:?} after a tool turn"
        )));
    }
    for k in [2, 4] {
        if footers[k] != footers[2] {
            return Err(PolicyError::ChatTemplate("the assistant's turns end differently".into()));
        }
    }
    let context = render(2, false)?;
    let with_prompt = render(2, true)?;
    let agent = with_prompt
        .strip_prefix(context.as_str())
        .map(str::to_string)
        .ok_or_else(|| PolicyError::ChatTemplate("the generation prompt is not appended to the conversation".into()))?;
    if agent.is_empty() {
        return Err(PolicyError::ChatTemplate(
            "the generation prompt adds nothing: the assistant's turn has no header".into(),
        ));
    }
    let opening_with_system = &full[..at[0]];
    let start = match template.token("bos_token") {
        Some(bos) if template.source().contains("bos_token") && opening_with_system.starts_with(bos) => bos.to_string(),
        _ => String::new(),
    };
    let system = opening_with_system[start.len()..].to_string();
    let user_alone = template
        .render(&[ChatMessage::new(PROBE[1].0, PROBE[1].1)], false)
        .map_err(|e| PolicyError::ChatTemplate(format!("the template cannot render a lone user message: {e}")))?;
    let before_user = &user_alone[..find_once(&user_alone, PROBE[1].1, "a lone user message")?];
    let default_system = before_user
        .strip_prefix(start.as_str())
        .and_then(|rest| rest.strip_suffix(user.as_str()))
        .map(str::to_string)
        .ok_or_else(|| {
            PolicyError::ChatTemplate(format!(
                "a lone user message opens with {before_user:?}, which is not the start {start:?} then the user header {user:?}"
            ))
        })?;
    let framing = TextFraming {
        start,
        default_system,
        headers: [system, user, agent, tool],
        footers: [footers[0].clone(), footers[1].clone(), footers[2].clone(), footers[3].clone()],
    };
    // Turn by turn must give the template's text: the whole probe, and the generation prompts
    // after a user and after a tool turn (which show the agent's earlier turn as history).
    let roles: Vec<usize> = [0, 1, 2, 3, 2, 1].to_vec();
    let whole = framing.text(&roles, &PROBE.map(|p| p.1), false);
    if whole != full {
        return Err(PolicyError::ChatTemplate(format!(
            "turn by turn the probe reads {whole:?}, the template writes {full:?}: turns cannot be framed one by one"
        )));
    }
    for n in [2, 4] {
        let framed = framing.text(&roles[..n], &PROBE.map(|p| p.1)[..n], true);
        let written = render(n, true)?;
        if framed != written {
            return Err(PolicyError::ChatTemplate(format!(
                "turn by turn a generation prompt reads {framed:?}, the template writes {written:?}: the assistant's \
                 turn opens differently when generated and in the history"
            )));
        }
    }
    Ok(framing)
}

impl TextFraming {
    /// The text of turns (`roles` index headers and footers) with `contents`, and the agent's
    /// header after them with `generation_prompt`.
    fn text(&self, roles: &[usize], contents: &[&str], generation_prompt: bool) -> String {
        let mut out = self.start.clone();
        if roles.first() != Some(&0) {
            out.push_str(&self.default_system);
        }
        for (&r, content) in roles.iter().zip(contents) {
            out.push_str(&self.headers[r]);
            out.push_str(content);
            out.push_str(&self.footers[r]);
        }
        if generation_prompt {
            out.push_str(&self.headers[2]);
        }
        out
    }
}

/// The framing as ids: `encode` tokenises each piece; `is_special` tells which ids are special
/// tokens (the agent's footer up to its first special token is its end of turn).
pub fn id_framing(
    text: &TextFraming,
    encode: &dyn Fn(&str) -> Result<Vec<u32>>,
    is_special: &dyn Fn(u32) -> bool,
) -> Result<ChatTemplate> {
    let headers = [0, 1, 2, 3].map(|i| encode(&text.headers[i]));
    let footers = [0, 1, 2, 3].map(|i| encode(&text.footers[i]));
    let [h0, h1, h2, h3] = headers;
    let [f0, f1, f2, f3] = footers;
    let footers = [f0?, f1?, f2?, f3?];
    let agent_footer = &footers[2];
    let cut = agent_footer.iter().position(|&id| is_special(id)).ok_or_else(|| {
        PolicyError::ChatTemplate(format!(
            "the assistant's turn ends with {:?}, which holds no special token to stop generation on",
            text.footers[2]
        ))
    })?;
    Ok(ChatTemplate {
        start: encode(&text.start)?,
        default_system: encode(&text.default_system)?,
        headers: [h0?, h1?, h2?, h3?],
        end_of_turn: agent_footer[..=cut].to_vec(),
        separator: agent_footer[cut + 1..].to_vec(),
        footers,
    })
}

/// The byte offset of `marker`'s one occurrence in `text`.
fn find_once(text: &str, marker: &str, what: &str) -> Result<usize> {
    match (text.find(marker), text.matches(marker).count()) {
        (Some(pos), 1) => Ok(pos),
        (_, n) => Err(PolicyError::ChatTemplate(format!(
            "the template renders a message's content {n} times in {what}, not once: turns cannot be framed"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M-Instruct's template, as its tokenizer_config.json has it.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn smollm2_s_framing_has_its_default_system_turn() {
        let t = JinjaTemplate::new(SMOLLM2, vec![("bos_token", "<|im_start|>".into())]).unwrap();
        let f = text_framing(&t).unwrap();
        assert_eq!(f.start, "", "the template never writes bos_token");
        assert_eq!(
            f.default_system,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        );
        assert_eq!(f.headers, ["system", "user", "assistant", "tool"].map(|r| format!("<|im_start|>{r}\n")));
        assert_eq!(f.footers, std::array::from_fn(|_| "<|im_end|>\n".to_string()));
    }

    #[test]
    fn a_template_that_frames_turns_by_what_follows_is_refused() {
        // The separator depends on the next message (`\n` only between turns): a lone user
        // message has no opening the user header explains.
        let source = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% if not loop.last %}{{ '\\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";
        let e = text_framing(&JinjaTemplate::new(source, vec![]).unwrap()).unwrap_err().to_string();
        assert!(e.contains("a lone user message opens with"), "{e}");
        // A generated turn that opens with `[assistant]` but reads `[assistant]: ` in the history.
        let source = "{% for m in messages %}{% if m.role == 'assistant' %}[assistant]: {% else %}[{{ m.role }}]{% endif %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";
        let e = text_framing(&JinjaTemplate::new(source, vec![]).unwrap()).unwrap_err().to_string();
        assert!(e.contains("turn by turn the probe reads") && e.contains("[assistant]: Zq2probe"), "{e}");
        // A footer that changes with what follows.
        let source = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% if loop.last %}<end>{% endif %}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";
        let e = text_framing(&JinjaTemplate::new(source, vec![]).unwrap()).unwrap_err().to_string();
        assert!(e.contains("when last, but not when more follows"), "{e}");
        let twice = "{% for m in messages %}{{ m.content }}{{ m.content }}{% endfor %}";
        let e = text_framing(&JinjaTemplate::new(twice, vec![]).unwrap()).unwrap_err().to_string();
        assert!(e.contains("2 times"), "{e}");
    }
}
