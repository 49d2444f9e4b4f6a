//! What the two question-answering families (`webnav`, `searchqa`) share: word pools for
//! generated names ([`names`]), the outcome of a final answer (reward = exact match, F1 shown),
//! phrase matching on word boundaries over normalised text (what "supported by an observation"
//! means), and the argument helpers of their one-string tools.

pub mod names;

use crate::action;
use crate::env::Outcome;
use crate::rng::Rng;
use crate::scoring::{exact_match, f1, normalize};

/// Flaw text for free text: neither QA family has a user to talk to.
pub const NO_USER: &str = "there is no user to talk to here; call a tool, e.g. <tool>name(argument)</tool>, or answer with <answer>…</answer>";

/// Flaw text for any message after the answer.
pub const OVER: &str = "the episode is over; no further actions are accepted";

/// The outcome of a final answer: reward 1 on exact match (after normalisation), else 0; the
/// token F1 is shown in the summary so that near misses stay visible. The truth is not revealed.
pub fn answer_outcome(answer: &str, truth: &str) -> Outcome {
    let em = exact_match(answer, truth);
    let f = f1(answer, truth);
    let shown: String = answer.chars().take(80).collect();
    Outcome { reward: em, success: em >= 1.0, summary: format!("answer {shown:?}: exact match {em:.0}, F1 {f:.2}") }
}

/// Normalised text with a space at each end, so that phrases match on word boundaries.
pub fn padded(text: &str) -> String {
    format!(" {} ", normalize(text))
}

/// Whether the normalised, non-empty `phrase` occurs in `padded_hay` (from [`padded`]) as
/// whole words.
pub fn mentions(padded_hay: &str, phrase: &str) -> bool {
    if phrase.is_empty() {
        return false;
    }
    padded_hay.match_indices(phrase).any(|(i, _)| {
        let before = padded_hay[..i].ends_with(' ');
        let after = padded_hay[i + phrase.len()..].starts_with(' ');
        before && after
    })
}

/// Everything observed so far in an episode, normalised, for the verifiers' support checks.
#[derive(Debug, Clone)]
pub struct Observed(String);

impl Default for Observed {
    fn default() -> Self {
        Self::new("")
    }
}

impl Observed {
    /// Starts from a text the agent was given (e.g. the question), or nothing.
    pub fn new(given: &str) -> Self {
        Self(padded(given))
    }

    /// Adds one observation's text.
    pub fn add(&mut self, text: &str) {
        self.0.push_str(&normalize(text));
        self.0.push(' ');
    }

    /// Whether the normalised `phrase` was observed as whole words.
    pub fn has(&self, phrase: &str) -> bool {
        mentions(&self.0, phrase)
    }
}

/// The one text argument of a single-argument tool (`open`, `find`, `search`): the value of
/// the sole argument, positional or `key=…` (quotes removed), or else the raw text, so that
/// `search(a, b)` searches for "a, b". `None` when there is no text at all.
pub fn text_argument(raw: &str) -> Option<String> {
    let text = match action::parse_args(raw) {
        Ok(args) if args.len() == 1 => args[0].value.clone(),
        _ => raw.trim().to_string(),
    };
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// One word of `pool` ("" for an empty pool).
pub fn pick<'a>(rng: &mut Rng, pool: &[&'a str]) -> &'a str {
    pool.get(rng.below(pool.len())).copied().unwrap_or("")
}

/// `n` distinct items of `pool` in random order (all of them when `n` is larger).
pub fn sample<'a>(rng: &mut Rng, pool: &[&'a str], n: usize) -> Vec<&'a str> {
    let mut items = pool.to_vec();
    rng.shuffle(&mut items);
    items.truncate(n);
    items
}

/// `n` distinct names "a b" with `a` from `firsts` and `b` from `seconds`, drawn from only a
/// few words of each pool so that names share words (namesakes are the distractors).
pub fn pair_names(rng: &mut Rng, firsts: &[&str], seconds: &[&str], n: usize) -> Vec<String> {
    let k = (n as f64).sqrt().ceil() as usize + 1;
    let a = sample(rng, firsts, k);
    let b = sample(rng, seconds, n.div_ceil(a.len().max(1)) + 1);
    let mut pairs: Vec<String> = a.iter().flat_map(|f| b.iter().map(move |l| format!("{f} {l}"))).collect();
    rng.shuffle(&mut pairs);
    pairs.truncate(n);
    pairs
}

/// A URL path segment for a name: lowercase words joined by `-`.
pub fn slug(name: &str) -> String {
    normalize(name).split(' ').collect::<Vec<_>>().join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_match_whole_words_only() {
        let hay = padded("Ada Lovelace works in Office B-214.");
        assert!(mentions(&hay, "ada lovelace"));
        assert!(mentions(&hay, "b 214"));
        assert!(!mentions(&hay, "lace"));
        assert!(!mentions(&hay, ""));
        let mut first = Observed::default();
        first.add("Acme Corp");
        assert!(first.has("acme corp") && first.has("acme"));
        let mut seen = Observed::new("Who founded Acme Corp?");
        seen.add("Acme Corp was founded by Ada Lovelace.");
        assert!(seen.has("ada lovelace") && seen.has("acme corp") && !seen.has("lovelace ada"));
    }

    #[test]
    fn outcomes_reward_exact_match_and_show_f1() {
        let o = answer_outcome("the Brightwater", "Brightwater");
        assert_eq!((o.reward, o.success), (1.0, true));
        let o = answer_outcome("Port Brightwater", "Brightwater");
        assert_eq!((o.reward, o.success), (0.0, false));
        assert!(o.summary.ends_with("F1 0.67"), "{}", o.summary);
    }

    #[test]
    fn text_arguments_and_slugs() {
        assert_eq!(text_argument("\"/people/ada\"").as_deref(), Some("/people/ada"));
        assert_eq!(text_argument("url=/x").as_deref(), Some("/x"));
        assert_eq!(text_argument("a, b").as_deref(), Some("a, b"));
        assert_eq!(text_argument("  "), None);
        assert_eq!(slug("Department of Computer Science"), "department-of-computer-science");
    }
}
