//! The single-turn task: reverse a short lowercase word. One prompt, one completion, a reward
//! read from the completion's text — the shape of task a GRPO trainer such as TRL's is compared
//! on. scripts/trl_grpo.py re-implements [`reward`] in a few lines; `reagent bench trl` hands it
//! [`parity_cases`] and stops unless both agree.
//!
//! ```text
//!  prompt  "Reverse: stone\n"      target "enots"
//!  letters = the completion's a–z characters, in order (everything else ignored)
//!  reward  = ½·(targets[i] == letters[i], summed over i) / len  +  ½·(target letters found anywhere) / len
//! ```
//!
//! The second half is dense on purpose: an untrained model's completions still get rewards that
//! differ within a group, so every step has a learning signal and does the same work as TRL's.

use crate::rng::SampleRng;

/// Shortest word drawn.
const MIN_LETTERS: u64 = 3;
/// Longest word drawn.
const MAX_LETTERS: u64 = 6;

/// One task: the word to reverse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReverseTask {
    /// Lowercase ASCII letters.
    pub word: String,
}

impl ReverseTask {
    /// The prompt the model completes.
    pub fn prompt(&self) -> String {
        format!("Reverse: {}\n", self.word)
    }

    /// The answer sought.
    pub fn target(&self) -> String {
        self.word.chars().rev().collect()
    }

    /// The reward of a completion (see the module header), in [0, 1].
    pub fn reward(&self, completion: &str) -> f64 {
        reward(completion, &self.target())
    }
}

/// `n` tasks drawn from `seed` (3 to 6 letters each): the same list on every call.
pub fn draw_tasks(seed: u64, n: usize) -> Vec<ReverseTask> {
    let mut rng = SampleRng::new(seed ^ 0x0005_1261_E7A5_0000);
    (0..n)
        .map(|_| {
            let len = MIN_LETTERS + rng.next_u64() % (MAX_LETTERS - MIN_LETTERS + 1);
            let word = (0..len).map(|_| char::from(b'a' + (rng.next_u64() % 26) as u8)).collect();
            ReverseTask { word }
        })
        .collect()
}

/// The reward of `completion` against `target` (see the module header); an empty target gets 0.
pub fn reward(completion: &str, target: &str) -> f64 {
    let letters: Vec<char> = completion.chars().filter(char::is_ascii_lowercase).collect();
    let target: Vec<char> = target.chars().collect();
    if target.is_empty() {
        return 0.0;
    }
    let in_place = target.iter().zip(&letters).filter(|(t, l)| t == l).count();
    let found = target.iter().filter(|t| letters.contains(t)).count();
    (in_place + found) as f64 / (2 * target.len()) as f64
}

/// Completions and targets the Python side must score as [`reward`] does: each kind of case
/// (exact, out of order, partial, noise between letters, non-ASCII, empty).
pub fn parity_cases() -> Vec<(String, String)> {
    [
        ("cba", "cba"),
        ("abc", "cba"),
        ("c-b a!", "cba"),
        ("xyz", "cba"),
        ("", "olleh"),
        ("OLLEH olleh", "olleh"),
        ("é\u{FFFD}<tool>ne", "enots"),
        ("eeeee", "enots"),
        ("s", "enots"),
    ]
    .into_iter()
    .map(|(c, t)| (c.to_string(), t.to_string()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reward_on_hand_worked_completions() {
        // (completion, target, in-place matches, target letters found, expected)
        let cases = [
            ("cba", "cba", 3, 3, 1.0),
            ("abc", "cba", 1, 3, 4.0 / 6.0),
            ("c-b a!", "cba", 3, 3, 1.0),
            ("xyz", "cba", 0, 0, 0.0),
            ("", "olleh", 0, 0, 0.0),
            // Upper case is ignored: the letters are "olleh".
            ("OLLEH olleh", "olleh", 5, 5, 1.0),
            // Letters "toolne": only index 2 in place (o = o); found e, n, o, t (not s).
            ("é\u{FFFD}<tool>ne", "enots", 1, 4, 5.0 / 10.0),
            // "eeeee": e in place at 0; of e,n,o,t,s only e is found.
            ("eeeee", "enots", 1, 1, 2.0 / 10.0),
            ("s", "enots", 0, 1, 1.0 / 10.0),
        ];
        for (completion, target, _, _, want) in cases {
            let got = reward(completion, target);
            assert!((got - want).abs() < 1e-12, "{completion:?} vs {target:?}: {got} ≠ {want}");
        }
        assert_eq!(reward("abc", ""), 0.0);
        assert_eq!(parity_cases().len(), cases.len());
    }

    #[test]
    fn tasks_are_reproducible_short_lowercase_words() {
        let a = draw_tasks(7, 200);
        assert_eq!(a, draw_tasks(7, 200));
        assert_ne!(a, draw_tasks(8, 200));
        assert!(a.iter().all(|t| (3..=6).contains(&t.word.len()) && t.word.chars().all(|c| c.is_ascii_lowercase())));
        let t = ReverseTask { word: "stone".into() };
        assert_eq!((t.prompt().as_str(), t.target().as_str()), ("Reverse: stone\n", "enots"));
        assert_eq!(t.reward("enots"), 1.0);
    }
}
