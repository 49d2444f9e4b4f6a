//! Fitting text into the judge's prompt budget: over it, the beginning and the end are kept and
//! a label in the middle says what was left out. Cuts keep the fence whole: a label line is kept
//! whole or dropped, and a quoted line cut at its start is quoted again.
//!
//! ```text
//!  lines (labels and quoted turn text), budget
//!    fits ─► joined
//!    else ─► [first half of the budget] ⟦… n characters … of k turns … omitted …⟧ [last half]
//! ```

use super::fence::{self, QUOTE};

/// Room kept for the label that reports an omitted middle.
pub const MARKER_ROOM: usize = 200;

/// Characters of [`QUOTE`].
const QUOTE_CHARS: usize = 2;

/// One line of a rendered trajectory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The line, without its newline: a label (`⟦…⟧`) or quoted turn text (`│ …`).
    pub text: String,
    /// The turn it belongs to (for saying how many turns an omission touched).
    pub turn: usize,
}

impl Line {
    fn quoted(&self) -> bool {
        self.text.starts_with(QUOTE.trim_end())
    }
}

/// The first `n` characters of `s`.
pub fn head(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

/// The last `n` characters of `s`.
pub fn tail(s: &str, n: usize) -> &str {
    let len = s.chars().count();
    if n >= len {
        return s;
    }
    s.char_indices().nth(len - n).map_or("", |(i, _)| &s[i..])
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Joins `lines` (each followed by a newline) within `budget` characters. Returns the text and
/// the characters left out of the middle (0 when everything fit).
pub fn fit_lines(lines: &[Line], budget: usize) -> (String, usize) {
    let sizes: Vec<usize> = lines.iter().map(|l| chars(&l.text) + 1).collect();
    let total: usize = sizes.iter().sum();
    if total <= budget {
        return (lines.iter().map(|l| format!("{}\n", l.text)).collect(), 0);
    }
    let keep = budget.saturating_sub(MARKER_ROOM);
    let (first, last) = (keep / 2, keep - keep / 2);
    let (cut_from, cut_to) = (first, total - last);
    let (mut head_text, mut tail_text) = (String::new(), String::new());
    let mut touched = std::collections::BTreeSet::new();
    let mut start = 0;
    for (line, size) in lines.iter().zip(&sizes) {
        let end = start + size;
        if end <= cut_from {
            head_text.push_str(&line.text);
            head_text.push('\n');
        } else if start >= cut_to {
            tail_text.push_str(&line.text);
            tail_text.push('\n');
        } else {
            touched.insert(line.turn);
            // A quoted line keeps what lies outside the omitted range; a label is dropped.
            // Each part, with its newline (and the quote put back on the end part), takes no
            // more characters than the line had outside the omitted range.
            if line.quoted() {
                let before = cut_from.saturating_sub(start);
                if before > QUOTE_CHARS {
                    head_text.push_str(head(&line.text, before - 1));
                    head_text.push('\n');
                }
                let after = end.saturating_sub(cut_to);
                if after > QUOTE_CHARS + 1 {
                    let body = line.text.strip_prefix(QUOTE).unwrap_or(&line.text);
                    tail_text.push_str(&format!("{QUOTE}{}\n", tail(body, after - 1 - QUOTE_CHARS)));
                }
            }
        }
        start = end;
    }
    let omitted = cut_to - cut_from;
    let marker = fence::label(&format!(
        "… {omitted} characters from the middle of the trajectory (all or part of {} turns) are omitted here to fit the judge's prompt budget …",
        touched.len()
    ));
    (format!("{head_text}{marker}\n{tail_text}"), omitted)
}

/// `text` within `budget` characters: whole, or its beginning and end around a label saying how
/// many characters of `what` were left out. Returns the text and the characters left out.
pub fn fit_text(text: &str, budget: usize, what: &str) -> (String, usize) {
    let total = chars(text);
    if total <= budget {
        return (text.to_string(), 0);
    }
    let keep = budget.saturating_sub(MARKER_ROOM);
    let (first, last) = (keep / 2, keep - keep / 2);
    let omitted = total - first - last;
    let marker = fence::label(&format!(
        "… {omitted} characters from the middle of {what} are omitted here to fit the judge's prompt budget …"
    ));
    (format!("{}\n{marker}\n{}", head(text, first), tail(text, last)), omitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(turn: usize, body: &str) -> Line {
        Line { text: format!("{QUOTE}{body}"), turn }
    }

    fn label(turn: usize, name: &str) -> Line {
        Line { text: fence::label(name), turn }
    }

    #[test]
    fn short_lines_are_whole() {
        let lines = [label(0, "user"), quoted(0, "hi")];
        assert_eq!(fit_lines(&lines, 100), ("⟦user⟧\n│ hi\n".to_string(), 0));
    }

    #[test]
    fn long_ones_keep_both_ends_say_so_and_stay_within_budget() {
        let lines: Vec<Line> =
            (0..50).flat_map(|i| [label(i, &format!("turn {i}")), quoted(i, &"é".repeat(100))]).collect();
        let (text, omitted) = fit_lines(&lines, 1_000);
        assert!(text.chars().count() <= 1_000, "{}", text.chars().count());
        assert!(text.starts_with("⟦turn 0⟧\n│ é") && text.ends_with(&format!("{}\n", "é".repeat(100))));
        assert!(omitted > 4_000 && text.contains(&format!("⟦… {omitted} characters from the middle")), "{text}");
        assert!(text.contains("turns) are omitted here"), "{text}");
    }

    #[test]
    fn one_huge_line_is_cut_in_its_middle_and_both_halves_stay_quoted() {
        let lines = [label(0, "agent, message 1"), quoted(0, &format!("{}{}", "x".repeat(5_000), "y".repeat(5_000)))];
        let (text, omitted) = fit_lines(&lines, 1_200);
        assert!(text.chars().count() <= 1_200);
        let out: Vec<&str> = text.lines().collect();
        assert_eq!(out.len(), 4, "{text}");
        assert!(out[0] == "⟦agent, message 1⟧" && out[1].starts_with("│ xxx") && out[3].starts_with("│ yyy"));
        assert!(out[2].starts_with("⟦… ") && out[2].contains("(all or part of 1 turns)"));
        assert!(omitted > 8_000, "{omitted}");
    }

    #[test]
    fn labels_caught_in_the_cut_are_dropped_never_halved() {
        let lines: Vec<Line> =
            (0..40).flat_map(|i| [label(i, &format!("a rather long label {i}")), quoted(i, "short")]).collect();
        for budget in [300, 450, 600, 777] {
            let (text, _) = fit_lines(&lines, budget);
            for line in text.lines() {
                let whole = line.starts_with('⟦') && line.ends_with('⟧');
                assert!(whole || line.starts_with('│'), "budget {budget}: {line:?}");
            }
        }
    }

    #[test]
    fn text_is_cut_in_its_middle_with_a_label() {
        assert_eq!(fit_text("abc", 10, "x"), ("abc".to_string(), 0));
        let (text, omitted) = fit_text(&"z".repeat(10_000), 1_000, "the agent's final message");
        assert!(text.chars().count() <= 1_000);
        assert_eq!(omitted, 10_000 - 800);
        assert!(text.contains("⟦… 9200 characters from the middle of the agent's final message are omitted"));
    }
}
