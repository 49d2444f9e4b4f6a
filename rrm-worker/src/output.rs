//! The Agent-RRM output format: exactly three blocks, in order, with only whitespace around
//! them.
//!
//! ```text
//!  <think>reasoning trace</think>
//!  <critique>concise, actionable, never the answer</critique>
//!  <score>0.35</score>
//! ```
//!
//! Two leniencies, for how servers deliver reasoning models' output: a response that starts
//! inside the think block (the chat template opened `<think>` in the prompt) is read as if it
//! had opened it, and a server that moves the think block into a separate `reasoning_content`
//! field (vLLM and SGLang reasoning parsers) has that used as the trace.

/// The three blocks of a judge's answer. The score is as written: range checks are the
/// caller's (out-of-range scores are retried, then clipped).
#[derive(Debug, Clone, PartialEq)]
pub struct Blocks {
    /// The `<think>` block.
    pub trace: String,
    /// The `<critique>` block.
    pub critique: String,
    /// The `<score>` block, parsed.
    pub score: f32,
}

/// Renders blocks in the exact format (for test servers and fixtures).
pub fn render(trace: &str, critique: &str, score: impl std::fmt::Display) -> String {
    format!("<think>{trace}</think>\n<critique>{critique}</critique>\n<score>{score}</score>")
}

/// Splits `text` at the block `tag`: what comes before its opening, its content, what follows.
fn block<'a>(text: &'a str, tag: &str) -> Result<(&'a str, &'a str, &'a str), String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let start = text.find(&open).ok_or_else(|| format!("no <{tag}> block"))?;
    let body_start = start + open.len();
    let len = text[body_start..].find(&close).ok_or_else(|| format!("<{tag}> is not closed by </{tag}>"))?;
    let (before, body, after) =
        (&text[..start], &text[body_start..body_start + len], &text[body_start + len + close.len()..]);
    if body.contains(&open) || after.contains(&open) {
        return Err(format!("more than one <{tag}> block"));
    }
    Ok((before, body, after))
}

fn only_space(text: &str, where_: &str) -> Result<(), String> {
    let stray = text.trim();
    if stray.is_empty() {
        return Ok(());
    }
    let shown: String = stray.chars().take(60).collect();
    Err(format!("unexpected text {where_}: {shown:?}"))
}

/// Parses a judge's answer. `reasoning` is the server's separate reasoning field, if any.
pub fn parse(content: &str, reasoning: Option<&str>) -> Result<Blocks, String> {
    let text = content.trim();
    let (trace, rest) = if text.contains("<think>") {
        let (before, trace, rest) = block(text, "think")?;
        only_space(before, "before <think>")?;
        (trace.to_string(), rest)
    } else if let Some(end) = text.find("</think>") {
        (text[..end].to_string(), &text[end + "</think>".len()..])
    } else if let Some(r) = reasoning.filter(|r| !r.trim().is_empty()) {
        (r.trim().trim_start_matches("<think>").trim_end_matches("</think>").to_string(), text)
    } else {
        return Err("no <think> block".into());
    };
    let (before, critique, rest) = block(rest, "critique")?;
    only_space(before, "between </think> and <critique>")?;
    let (before, score, after) = block(rest, "score")?;
    only_space(before, "between </critique> and <score>")?;
    only_space(after, "after </score>")?;
    if critique.trim().is_empty() {
        return Err("the critique is empty".into());
    }
    let score_text = score.trim();
    let score: f32 = score_text.parse().map_err(|_| format!("the score {score_text:?} is not a number"))?;
    if !score.is_finite() {
        return Err(format!("the score {score_text:?} is not finite"));
    }
    Ok(Blocks { trace: trace.trim().to_string(), critique: critique.trim().to_string(), score })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_format_round_trips() {
        let b = parse(&render("t", "c", 0.25), None).unwrap();
        assert_eq!(b, Blocks { trace: "t".into(), critique: "c".into(), score: 0.25 });
        let b = parse("  <think>\n a \n</think><critique>b</critique><score> 1 </score>\n", None).unwrap();
        assert_eq!((b.trace.as_str(), b.score), ("a", 1.0));
    }

    #[test]
    fn out_of_range_scores_parse_for_the_caller_to_judge() {
        assert_eq!(parse(&render("t", "c", 7), None).unwrap().score, 7.0);
        assert_eq!(parse(&render("t", "c", -0.5), None).unwrap().score, -0.5);
    }

    #[test]
    fn reasoning_servers_are_understood() {
        let b = parse("the trace</think><critique>c</critique><score>0.5</score>", None).unwrap();
        assert_eq!(b.trace, "the trace");
        let b = parse("<critique>c</critique><score>0.5</score>", Some("separate trace")).unwrap();
        assert_eq!(b.trace, "separate trace");
    }

    #[test]
    fn anything_else_is_malformed_and_says_why() {
        let cases = [
            ("<critique>c</critique><score>0.5</score>", "no <think> block"),
            ("<think>t</think><score>0.5</score>", "no <critique> block"),
            ("<think>t</think><critique>c</critique>", "no <score> block"),
            ("<think>t</think><critique>c</critique><score>high</score>", "is not a number"),
            ("<think>t</think><critique>c</critique><score>NaN</score>", "not finite"),
            ("<think>t</think><critique> </critique><score>0.5</score>", "critique is empty"),
            ("<think>t</think><critique>c</critique><score>0.5</score> ok?", "after </score>"),
            ("Sure! <think>t</think><critique>c</critique><score>0.5</score>", "before <think>"),
            ("<think>t</think>x<critique>c</critique><score>0.5</score>", "between </think> and <critique>"),
            ("<think>t</think><critique>c</critique><score>0.5</score><score>1</score>", "more than one <score>"),
            ("<think>t</think><critique>c<score>0.5</score>", "not closed by </critique>"),
            ("", "no <think> block"),
        ];
        for (text, why) in cases {
            let err = parse(text, None).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }
}
