//! Property: over many tasks of every text family and difficulty, played as the reference
//! solution or corrupted (truncated, steps dropped, repeated, swapped or garbled, wrong answers,
//! the right answer given without the work), the reference judge's critique never contains the
//! answer nor the solution's key values (the reference's answer, every argument of its tool
//! calls, the ids and numbers it states, and for math every intermediate value), holds no digit,
//! and the score is deterministic, in [0, 1], and 1 exactly when nothing was found.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use env_workers::action::{self, Action};
use env_workers::families::math;
use env_workers::{registry, Environment, Limits};
use proptest::prelude::*;
use protocol::wire::{TaskFamily, TaskSpec};
use rrm_worker::ReferenceJudge;

const FAMILIES: [TaskFamily; 4] = [TaskFamily::Math, TaskFamily::Retail, TaskFamily::Webnav, TaskFamily::Searchqa];

/// How the reference messages are spoiled.
#[derive(Debug, Clone)]
enum Corruption {
    Keep,
    Truncate(usize),
    Drop(usize),
    Repeat(usize),
    Swap(usize),
    Garble(usize),
    Chatter(usize),
    WrongAnswer(String),
    AnswerOnly,
}

fn corruption() -> impl Strategy<Value = Corruption> {
    prop_oneof![
        Just(Corruption::Keep),
        any::<usize>().prop_map(Corruption::Truncate),
        any::<usize>().prop_map(Corruption::Drop),
        any::<usize>().prop_map(Corruption::Repeat),
        any::<usize>().prop_map(Corruption::Swap),
        any::<usize>().prop_map(Corruption::Garble),
        any::<usize>().prop_map(Corruption::Chatter),
        prop_oneof![Just("0"), Just("-1/2"), Just("12.5"), Just("nobody"), Just("the Silent River"), Just("done")]
            .prop_map(|a| Corruption::WrongAnswer(a.to_string())),
        Just(Corruption::AnswerOnly),
    ]
}

fn apply(reference: &[String], c: &Corruption) -> Vec<String> {
    let mut m = reference.to_vec();
    let n = m.len().max(1);
    match c {
        Corruption::Keep => {}
        Corruption::Truncate(k) => m.truncate(k % n),
        Corruption::Drop(k) => {
            m.remove(k % n);
        }
        Corruption::Repeat(k) => m.insert(k % n, m[k % n].clone()),
        Corruption::Swap(k) if n > 1 => m.swap(k % (n - 1), k % (n - 1) + 1),
        Corruption::Swap(_) => {}
        Corruption::Garble(k) => m[k % n] = format!("<tool>{}", m[k % n]),
        Corruption::Chatter(k) => m.insert(k % n, "Let me think about this for a moment.".into()),
        Corruption::WrongAnswer(a) => {
            m.pop();
            m.push(format!("<answer>{a}</answer>"));
        }
        Corruption::AnswerOnly => m = m.split_off(m.len() - 1),
    }
    m
}

/// Lowercase words separated by single spaces, padded with a space on both sides.
fn words(text: &str) -> String {
    let mapped: String = text.chars().map(|c| if c.is_alphanumeric() { c.to_ascii_lowercase() } else { ' ' }).collect();
    format!(" {} ", mapped.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// What a critique must never contain: the answer and the solution's key values.
fn secrets(spec: TaskSpec, reference: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for message in reference {
        match action::parse(message) {
            Ok(Action::Answer(a)) => out.push(a),
            Ok(Action::Tool(call)) => {
                out.push(call.raw_args.clone());
                out.extend(action::parse_args(&call.raw_args).into_iter().flatten().map(|a| a.value));
            }
            Ok(Action::Say(text)) => out.extend(
                text.split_whitespace()
                    .filter(|w| w.chars().any(|c| c.is_ascii_digit() || c == '#' || c == '@'))
                    .map(String::from),
            ),
            Err(_) => {}
        }
    }
    if spec.family == TaskFamily::Math {
        let task = math::generate(spec.seed, spec.difficulty);
        out.push(task.answer.to_string());
        out.extend(task.steps.iter().map(|s| s.value.to_string()));
    }
    out.retain(|s| words(s).trim() != "");
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_critique_never_reveals_the_answer(
        family in 0usize..4,
        seed in 0u64..1_000_000,
        difficulty in 1u32..=3,
        c in corruption(),
    ) {
        let spec = TaskSpec { family: FAMILIES[family], seed, difficulty };
        let reference = registry::make(spec, Limits::default()).unwrap().reference();
        let messages = apply(&reference, &c);
        let j = ReferenceJudge::judge_messages(spec, &messages).unwrap();

        let critique = words(&j.critique);
        for secret in secrets(spec, &reference) {
            prop_assert!(
                !critique.contains(&words(&secret)),
                "{:?} {:?}: the critique reveals {:?}: {}", spec, c, secret, j.critique
            );
        }
        prop_assert!(!j.critique.chars().any(|ch| ch.is_ascii_digit()), "a digit in: {}", j.critique);
        prop_assert!((0.0..=1.0).contains(&j.score));
        prop_assert_eq!(j.critique.starts_with("No flaw found"), j.score == 1.0, "{}", j.trace);
        if matches!(c, Corruption::Keep) {
            prop_assert_eq!(j.score, 1.0, "the reference solution is flawless: {}", j.trace);
        }
        let again = ReferenceJudge::judge_messages(spec, &messages).unwrap();
        prop_assert_eq!((&again.trace, &again.critique, again.score), (&j.trace, &j.critique, j.score));
    }
}
