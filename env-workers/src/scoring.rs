//! Answer scoring shared by the QA families: normalisation, exact match and token F1 (the
//! SQuAD/HotpotQA definitions: lowercase, strip punctuation and articles, split on spaces).

/// Lowercases, drops punctuation and the articles a/an/the, and collapses spaces.
pub fn normalize(text: &str) -> String {
    let lowered: String =
        text.to_lowercase().chars().map(|c| if c.is_alphanumeric() || c.is_whitespace() { c } else { ' ' }).collect();
    lowered.split_whitespace().filter(|w| !matches!(*w, "a" | "an" | "the")).collect::<Vec<_>>().join(" ")
}

/// 1.0 when the normalised texts are equal, else 0.0.
pub fn exact_match(prediction: &str, truth: &str) -> f32 {
    f32::from(u8::from(normalize(prediction) == normalize(truth)))
}

/// Token-level F1 between normalised texts.
pub fn f1(prediction: &str, truth: &str) -> f32 {
    let p = normalize(prediction);
    let t = normalize(truth);
    let p: Vec<&str> = p.split_whitespace().collect();
    let t: Vec<&str> = t.split_whitespace().collect();
    if p.is_empty() || t.is_empty() {
        return f32::from(u8::from(p == t));
    }
    let mut remaining = t.clone();
    let mut common = 0usize;
    for w in &p {
        if let Some(i) = remaining.iter().position(|x| x == w) {
            remaining.swap_remove(i);
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f32 / p.len() as f32;
    let recall = common as f32 / t.len() as f32;
    2.0 * precision * recall / (precision + recall)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_squad_definitions() {
        assert_eq!(normalize("The  Eiffel-Tower!"), "eiffel tower");
        assert_eq!(exact_match("the Paris", "paris"), 1.0);
        // prediction "new york city", truth "york": common 1, p = 1/3, r = 1 → f1 = 0.5
        assert!((f1("new york city", "York") - 0.5).abs() < 1e-6);
        assert_eq!(f1("", ""), 1.0);
        assert_eq!(f1("a", "b"), 0.0);
    }
}
