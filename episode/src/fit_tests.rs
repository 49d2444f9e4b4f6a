//! Rollout limits against the reference episodes: the extent is the longest sampled part of a
//! reference message (measured independently here from the trained tokens' text), a rollout one
//! token short of it is named, and a fitted rollout is not.

use policy::ByteTokenizer;
use protocol::wire::{ActorId, Episode, PolicyVersion, Role, RunId, TaskFamily, TaskSpec};

use super::*;

fn compact() -> RolloutConfig {
    RolloutConfig::compact()
}

/// The longest reference message counted from its text: the byte tokenizer spends one token per
/// byte, except that each action tag (`<tool>`, `</tool>`, `<answer>`, `</answer>`) is one token;
/// plus the end-of-turn marker. Over the same 32 seeds.
fn longest_message_by_text(family: TaskFamily, difficulty: u32) -> usize {
    let meta = TrajectoryMeta {
        run_id: RunId::new("t").unwrap(),
        actor_id: ActorId("t".into()),
        policy_version: PolicyVersion(0),
    };
    let open = RolloutConfig { max_new_tokens: 100_000, ..compact() };
    let end = ByteTokenizer.chat_template().end_of_turn.len();
    (0..32)
        .map(|seed| {
            let ep = reference_episode(TaskSpec { family, seed, difficulty }, &ByteTokenizer, &open, &meta).unwrap();
            let Episode::Text(turns) = &ep.trajectory.episode else { panic!("a text family") };
            let tokens = |text: &str| {
                let tags = ["<tool>", "</tool>", "<answer>", "</answer>"];
                text.len() - tags.iter().map(|t| text.matches(t).count() * (t.len() - 1)).sum::<usize>() + end
            };
            turns.iter().filter(|t| t.role == Role::Agent).map(|t| tokens(&t.text)).max().unwrap()
        })
        .max()
        .unwrap()
}

#[test]
fn the_extent_is_the_longest_reference_message_and_a_token_short_is_named() {
    let extent = reference_extent(TaskFamily::Searchqa, &[1], &ByteTokenizer, &compact()).unwrap().unwrap();
    assert_eq!(extent.message, longest_message_by_text(TaskFamily::Searchqa, 1));
    assert!(extent.message > 48, "searchqa's messages outgrow math's cap: {extent:?}");
    assert!(extent.episode > extent.message);

    let mix = [(TaskFamily::Math, 1), (TaskFamily::Searchqa, 1)];
    let exact = RolloutConfig { max_new_tokens: extent.message, max_context_tokens: extent.episode, ..compact() };
    assert_eq!(shortfalls(&mix, &ByteTokenizer, &exact, usize::MAX).unwrap(), vec![]);

    let short = RolloutConfig { max_new_tokens: extent.message - 1, ..exact.clone() };
    let found = shortfalls(&mix, &ByteTokenizer, &short, usize::MAX).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].family, TaskFamily::Searchqa);
    let text = found[0].to_string();
    assert!(text.contains("searchqa") && text.contains("actor.max_new_tokens >= "), "{text}");

    // The model's own context limit counts as well as the configured one.
    let found = shortfalls(&mix, &ByteTokenizer, &exact, extent.episode - 1).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].max_context_tokens, extent.episode - 1);
}

#[test]
fn a_fitted_rollout_holds_every_family_and_math_keeps_the_compact_one() {
    let mut math = compact();
    fit_rollout(&mut math, TaskFamily::Math, &[1, 2, 3]).unwrap();
    assert_eq!((math.max_new_tokens, math.max_context_tokens), (48, 1024), "math fits the compact rollout");
    for family in [TaskFamily::Searchqa, TaskFamily::Retail, TaskFamily::Webnav] {
        let mut fitted = compact();
        fit_rollout(&mut fitted, family, &[1, 2]).unwrap();
        let mix = [(family, 1), (family, 2)];
        assert_eq!(shortfalls(&mix, &ByteTokenizer, &fitted, usize::MAX).unwrap(), vec![], "{family}");
        assert_eq!(shortfalls(&mix, &ByteTokenizer, &compact(), usize::MAX).unwrap().len(), 1, "{family}");
    }
    // Families without built-in reference episodes are not measured.
    for family in [TaskFamily::Http, TaskFamily::Dataset, TaskFamily::Cartpole] {
        assert_eq!(reference_extent(family, &[1], &ByteTokenizer, &compact()).unwrap(), None);
    }
}
