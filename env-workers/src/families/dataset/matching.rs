//! How a final answer is compared with a task's `answer`, chosen per file (`match` in
//! `[dataset] files`):
//!
//! ```text
//!  exact    normalised text equal: lowercase, punctuation and a/an/the dropped, spaces collapsed
//!           ("The Eiffel Tower!" = "eiffel tower")
//!  numeric  both are numbers and equal exactly: 7 = 7.0 = 14/2 = +7; 1,000 = 1000
//!  regex    `answer` is a regular expression the whole trimmed final answer must match
//!           (anchored: "7|seven" accepts "seven", not "seventy")
//! ```

use std::fmt;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::families::math::Rational;
use crate::scoring::normalize;

/// The comparison of one file's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchMode {
    /// Normalised text equality (the SQuAD exact match).
    Exact,
    /// Exact numeric equality of integers, decimals and fractions.
    Numeric,
    /// A regular expression matching the whole answer.
    Regex,
}

impl MatchMode {
    /// The mode's name as config spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::Numeric => "numeric",
            Self::Regex => "regex",
        }
    }
}

impl fmt::Display for MatchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A task's expected answer, ready to compare.
#[derive(Debug, Clone)]
pub enum Answer {
    /// `exact`: the normalised text and the text as written.
    Text(String, String),
    /// `numeric`: the exact value.
    Number(Rational),
    /// `regex`: the anchored pattern and its source.
    Pattern(Regex, String),
}

/// A number as a final answer may write it: `7`, `7.0`, `14/2`, `-3/4`, or with thousands
/// separators (`1,000`, `12,345.5`). `None` when it is not one.
pub fn parse_number(text: &str) -> Option<Rational> {
    let text = text.trim();
    let grouped = text.contains(',');
    let plain = if grouped { ungroup(text)? } else { text.to_string() };
    Rational::parse_answer(&plain)
}

/// `1,234,567.5` without its commas, when every comma separates a group of three digits.
fn ungroup(text: &str) -> Option<String> {
    let (sign, rest) = match text.strip_prefix(['-', '+']) {
        Some(r) => (&text[..1], r),
        None => ("", text),
    };
    let (int, frac) = rest.split_once('.').map_or((rest, None), |(i, f)| (i, Some(f)));
    let groups: Vec<&str> = int.split(',').collect();
    let first_ok = (1..=3).contains(&groups[0].len());
    let digits = |g: &str| g.bytes().all(|b| b.is_ascii_digit());
    let ok = first_ok && groups.iter().all(|g| digits(g)) && groups[1..].iter().all(|g| g.len() == 3);
    ok.then(|| format!("{sign}{}{}", groups.concat(), frac.map(|f| format!(".{f}")).unwrap_or_default()))
}

impl Answer {
    /// The expected answer `text` under `mode`; the error says why it cannot be one.
    pub fn parse(mode: MatchMode, text: &str) -> Result<Self, String> {
        match mode {
            MatchMode::Exact => {
                let n = normalize(text);
                if n.is_empty() {
                    return Err(format!("{text:?} is empty once normalised (lowercase, no punctuation or articles)"));
                }
                Ok(Self::Text(n, text.trim().to_string()))
            }
            MatchMode::Numeric => parse_number(text).map(Self::Number).ok_or_else(|| {
                format!("{text:?} is not a number (match = \"numeric\" wants e.g. 7, 7.0, 14/2 or 1,000)")
            }),
            MatchMode::Regex => Regex::new(&format!("^(?:{text})$"))
                .map(|r| Self::Pattern(r, text.to_string()))
                .map_err(|e| format!("not a valid regular expression: {e}")),
        }
    }

    /// Whether the final answer `given` is correct.
    pub fn accepts(&self, given: &str) -> bool {
        match self {
            Self::Text(truth, _) => normalize(given) == *truth,
            Self::Number(truth) => parse_number(given).is_some_and(|v| v == *truth),
            Self::Pattern(re, _) => re.is_match(given.trim()),
        }
    }

    /// A final answer that is correct, for reference episodes; `None` for a pattern (a
    /// regular expression names the answers it accepts, not one of them).
    pub fn reference(&self) -> Option<String> {
        match self {
            Self::Text(_, written) => Some(written.clone()),
            Self::Number(v) => Some(v.to_string()),
            Self::Pattern(..) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(mode: MatchMode, truth: &str, given: &str) -> bool {
        Answer::parse(mode, truth).unwrap().accepts(given)
    }

    #[test]
    fn numeric_answers_match_in_every_written_form() {
        for given in ["7", "7.0", "14/2", " +7 ", "7.000", "21/3"] {
            assert!(accepts(MatchMode::Numeric, "7", given), "{given}");
        }
        for given in ["7.1", "seven", "7 apples", "", "1/0"] {
            assert!(!accepts(MatchMode::Numeric, "7", given), "{given}");
        }
        assert!(accepts(MatchMode::Numeric, "1,000", "1000"));
        assert!(accepts(MatchMode::Numeric, "-1234567.5", "-1,234,567.50"));
        assert!(!accepts(MatchMode::Numeric, "1000", "1,00"), "commas only between groups of three");
        assert!(accepts(MatchMode::Numeric, "0.25", "1/4"));
    }

    #[test]
    fn exact_answers_match_after_normalisation_only() {
        assert!(accepts(MatchMode::Exact, "The Eiffel Tower", "eiffel tower!"));
        assert!(!accepts(MatchMode::Exact, "Eiffel Tower", "tower"));
        assert!(!accepts(MatchMode::Exact, "7", "7.0"), "exact is not numeric");
    }

    #[test]
    fn regex_answers_match_the_whole_answer() {
        assert!(accepts(MatchMode::Regex, "7|seven", " seven "));
        assert!(!accepts(MatchMode::Regex, "7|seven", "seventy"));
        assert!(accepts(MatchMode::Regex, r"(?i)paris(, france)?", "Paris, France"));
    }

    #[test]
    fn bad_expected_answers_say_why() {
        assert!(Answer::parse(MatchMode::Numeric, "about 7").unwrap_err().contains("not a number"));
        assert!(Answer::parse(MatchMode::Regex, "(7").unwrap_err().contains("regular expression"));
        assert!(Answer::parse(MatchMode::Exact, "the").unwrap_err().contains("empty"));
    }

    #[test]
    fn references_are_correct_answers() {
        for (mode, truth) in [(MatchMode::Exact, "The Tower"), (MatchMode::Numeric, "14/2")] {
            let a = Answer::parse(mode, truth).unwrap();
            assert!(a.accepts(&a.reference().unwrap()), "{mode}");
        }
        assert!(Answer::parse(MatchMode::Regex, "7").unwrap().reference().is_none());
    }
}
