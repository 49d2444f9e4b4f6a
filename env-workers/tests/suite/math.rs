//! The math family end to end through the registry: the reference solves every task and
//! verifies clean, mutated references are flagged at the right step (`math/mutations.rs`), the
//! calculator agrees with directly computed expression trees (`math/calc_tree.rs`), garbage never
//! panics, and tasks are deterministic per seed.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

#[path = "math/calc_tree.rs"]
mod calc_tree;
#[path = "math/mutations.rs"]
mod mutations;

use std::collections::HashSet;

use env_workers::families::math::{MathEnv, Rational};
use env_workers::registry::{make, DIFFICULTIES};
use env_workers::{Environment, FindingKind, Guarded, Limits, Source, TaskFamily, TaskSpec};
use proptest::prelude::*;

pub(crate) fn spec(seed: u64, difficulty: u32) -> TaskSpec {
    TaskSpec { family: TaskFamily::Math, seed, difficulty }
}

pub(crate) fn guarded(seed: u64, difficulty: u32) -> Guarded {
    make(spec(seed, difficulty), Limits::default()).expect("math is built")
}

pub(crate) fn findings(env: &MathEnv, messages: &[String]) -> Vec<(usize, FindingKind)> {
    env.verify(messages).into_iter().map(|f| (f.step, f.kind)).collect()
}

pub(crate) fn answer(value: Rational) -> String {
    format!("<answer>{value}</answer>")
}

/// Runs `f` over 300 seeds at each difficulty with the task's env and reference.
pub(crate) fn each_task(mut f: impl FnMut(&MathEnv, Vec<String>)) {
    for difficulty in DIFFICULTIES {
        for seed in 0..300 {
            let env = MathEnv::new(spec(seed, difficulty));
            let reference = env.reference();
            f(&env, reference);
        }
    }
}

#[test]
fn the_reference_solves_every_task_and_verifies_clean() {
    for difficulty in DIFFICULTIES {
        for seed in 0..1000 {
            let mut env = guarded(seed, difficulty);
            let reference = env.reference();
            let (last, calls) = reference.split_last().expect("an answer");
            for call in calls {
                let obs = env.step(call);
                assert_eq!((obs.from, obs.flaw.as_deref()), (Source::Tool, None), "seed {seed}: {call} → {}", obs.text);
            }
            let end = env.step(last).end.expect("the answer ends the episode");
            assert!(end.success && end.reward == 1.0, "seed {seed} difficulty {difficulty}: {}", end.summary);
            assert_eq!(env.verify(&reference), [], "seed {seed} difficulty {difficulty}");
        }
    }
}

#[test]
fn difficulty_sets_the_number_of_operations() {
    for (difficulty, ops) in [(1, 2..=2), (2, 3..=4), (3, 5..=6)] {
        for seed in 0..200 {
            let steps = MathEnv::new(spec(seed, difficulty)).task().steps.len();
            assert!(ops.contains(&steps), "difficulty {difficulty} seed {seed}: {steps} operations");
        }
    }
    let fractions = (0..200).filter(|s| !MathEnv::new(spec(*s, 3)).task().answer.is_integer()).count();
    assert!(fractions > 20, "difficulty 3 has fractional answers sometimes ({fractions} of 200)");
}

#[test]
fn same_seed_same_task_and_observations_different_seeds_different_tasks() {
    for difficulty in DIFFICULTIES {
        let mut texts = HashSet::new();
        for seed in 0..200 {
            let (mut a, mut b) = (guarded(seed, difficulty), guarded(seed, difficulty));
            assert_eq!(a.prompt(), b.prompt());
            let mut messages = vec!["hello".to_string(), "<tool>calc(7 / 3 + 1)</tool>".into()];
            messages.extend(a.reference());
            for m in &messages {
                assert_eq!(a.step(m), b.step(m));
            }
            texts.insert(a.prompt().user.clone());
        }
        assert_eq!(texts.len(), 200, "difficulty {difficulty}: every seed gives a different problem");
    }
}

proptest! {
    #[test]
    fn garbage_never_panics_and_always_gets_an_observation(
        bytes in prop::collection::vec(any::<u8>(), 0..300),
        text in "\\PC{0,200}",
        inner in "[-+*/().0-9 a-z×÷<>]{0,40}",
        seed in any::<u64>(),
        difficulty in 1u32..=3,
    ) {
        let mut env = guarded(seed, difficulty);
        let messages = [
            String::from_utf8_lossy(&bytes).into_owned(),
            text.clone(),
            format!("<tool>calc({inner})</tool>"),
            format!("<tool>{inner}</tool>"),
            format!("<answer>{inner}</answer>"),
            format!("{text}<tool>calc({text})</tool>"),
        ];
        for m in &messages {
            let obs = env.step(m);
            prop_assert!(!obs.text.is_empty(), "{m:?}");
        }
        let _ = env.verify(&messages);
    }
}

#[test]
fn example_episode_for_the_readme() {
    let mut env = guarded(1, 2);
    let prompt = env.prompt().clone();
    println!("system (excerpt): {}", prompt.system.lines().take(4).collect::<Vec<_>>().join("\n  "));
    println!("user: {}", prompt.user);
    let mut messages = env.reference();
    messages.insert(1, "<tool>calc(100 + 72))</tool>".into()); // a slip, then the right call
    for message in &messages {
        let obs = env.step(message);
        println!(
            "agent: {message}\n  → {:?}{}: {}",
            obs.from,
            if obs.flaw.is_some() { " (flawed)" } else { "" },
            obs.text
        );
        if let Some(end) = obs.end {
            println!("reward {} (success: {})", end.reward, end.success);
            assert!(end.success);
        }
    }
    for finding in env.verify(&messages) {
        println!("finding: {finding}");
    }
}
