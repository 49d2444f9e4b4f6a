//! The retail family end to end: the reference solves every task and verifies clean, mutated
//! references are flagged at the right step, garbage never panics, the simulated user never
//! leaks a fact it was not asked for, episodes are independent and deterministic.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::collections::HashSet;

use env_workers::families::retail::RetailEnv;
use env_workers::registry::make;
use env_workers::{Environment, Finding, FindingKind as K, Limits, Observation, Source, TaskFamily, TaskSpec};
use proptest::prelude::*;

fn spec(seed: u64, difficulty: u32) -> TaskSpec {
    TaskSpec { family: TaskFamily::Retail, seed, difficulty }
}

fn env(seed: u64, difficulty: u32) -> RetailEnv {
    RetailEnv::new(spec(seed, difficulty))
}

fn play(env: &mut dyn Environment, messages: &[String]) -> Vec<Observation> {
    messages.iter().map(|m| env.step(m)).collect()
}

fn has(findings: &[Finding], step: usize, kind: K) -> bool {
    findings.iter().any(|f| f.step == step && f.kind == kind)
}

fn index_of(messages: &[String], needle: &str) -> Option<usize> {
    messages.iter().position(|m| m.contains(needle))
}

#[test]
fn reference_solves_every_task_and_verifies_clean() {
    for difficulty in 1..=3 {
        for seed in 0..1000 {
            let mut env = make(spec(seed, difficulty), Limits::default()).expect("retail is built");
            let reference = env.reference();
            assert!(reference.len() <= 8, "seed {seed}: {} messages", reference.len());
            let obs = play(&mut env, &reference);
            for (i, o) in obs.iter().enumerate() {
                assert!(o.flaw.is_none(), "seed {seed} d{difficulty} step {i}: {o:?}");
                assert_eq!(o.end.is_some(), i + 1 == obs.len(), "seed {seed} d{difficulty} step {i}");
            }
            let end = obs.last().and_then(|o| o.end.clone()).expect("ended");
            assert!(end.success && end.reward == 1.0, "seed {seed} d{difficulty}: {}", end.summary);
            let findings = env.verify(&reference);
            assert!(findings.is_empty(), "seed {seed} d{difficulty}: {findings:?}");
        }
    }
}

/// Applies `mutate` to the reference of every task it fits (it returns the mutated messages
/// and the step and kind expected), checks the finding, and returns how many tasks it fitted.
fn check_mutation(name: &str, mutate: impl Fn(&[String]) -> Option<(Vec<String>, usize, K)>) -> usize {
    let mut fitted = 0;
    for difficulty in 1..=3 {
        for seed in 0..200 {
            let env = env(seed, difficulty);
            let Some((messages, step, kind)) = mutate(&env.reference()) else { continue };
            fitted += 1;
            let findings = env.verify(&messages);
            assert!(
                has(&findings, step, kind),
                "{name}, seed {seed} d{difficulty}: want {kind:?} at {step}, got {findings:?}\n{messages:#?}"
            );
            let mut fresh = self::env(seed, difficulty);
            let solved = play(&mut fresh, &messages).iter().any(|o| o.end.as_ref().is_some_and(|e| e.success));
            let harmless = [K::RedundantCall, K::Fabrication].contains(&kind);
            assert!(!solved || harmless, "{name}, seed {seed} d{difficulty}: a flawed episode was rewarded");
        }
    }
    assert!(fitted > 20, "{name} fitted only {fitted} tasks");
    fitted
}

fn replace_at(messages: &[String], i: usize, from: &str, to: &str) -> Vec<String> {
    let mut out = messages.to_vec();
    out[i] = out[i].replacen(from, to, 1);
    out
}

#[test]
fn a_wrong_argument_is_flagged_at_its_step() {
    check_mutation("wrong reason", |m| {
        let i = index_of(m, "cancel_order(")?;
        let swapped = if m[i].contains("no longer needed") { "ordered by mistake" } else { "no longer needed" };
        let from = if m[i].contains("no longer needed") { "no longer needed" } else { "ordered by mistake" };
        Some((replace_at(m, i, from, swapped), i, K::WrongArguments))
    });
    check_mutation("wrong amount", |m| {
        let i = index_of(m, "<tool>refund(")?;
        Some((replace_at(m, i, "amount=\"", "amount=\"1"), i, K::WrongArguments))
    });
    check_mutation("wrong address", |m| {
        let i = index_of(m, "update_address(")?;
        Some((replace_at(m, i, "address=\"", "address=\"9"), i, K::WrongArguments))
    });
    check_mutation("refund instead of cancel", |m| {
        let i = index_of(m, "cancel_order(")?;
        (index_of(m, "<tool>refund(").is_none()).then_some(())?;
        let mut out = m.to_vec();
        out[i] = out[i].replace("cancel_order(", "refund(").replace("reason=", "amount=");
        Some((out, i, K::WrongTool))
    });
}

#[test]
fn a_wrong_fact_told_is_a_contradiction() {
    check_mutation("wrong total", |m| {
        let i = index_of(m, "The total of order")?;
        Some((replace_at(m, i, " is $", " is $1"), i, K::Contradiction))
    });
    check_mutation("wrong status", |m| {
        let i = index_of(m, "is currently")?;
        let words = ["pending", "shipped", "delivered", "cancelled"];
        let now = words.iter().find(|w| m[i].contains(*w))?;
        let other = words.iter().find(|w| *w != now)?;
        Some((replace_at(m, i, now, other), i, K::Contradiction))
    });
}

#[test]
fn a_skipped_step_is_flagged_at_the_end() {
    check_mutation("skipped write", |m| {
        let i = m
            .iter()
            .position(|s| ["cancel_order(", "<tool>refund(", "update_address("].iter().any(|t| s.contains(t)))?;
        let mut out = m.to_vec();
        out.remove(i);
        let end = out.len() - 1;
        Some((out, end, K::SkippedStep))
    });
    check_mutation("fact never told", |m| {
        let i = m.iter().position(|s| s.starts_with("The total") || s.contains("is currently"))?;
        let mut out = m.to_vec();
        out.remove(i);
        let end = out.len() - 1;
        Some((out, end, K::SkippedStep))
    });
    check_mutation("gave up after identifying", |m| {
        let mut out = m[..2].to_vec();
        out.push("<answer>done</answer>".into());
        Some((out, 2, K::GaveUpEarly))
    });
}

#[test]
fn a_fabricated_id_is_flagged_at_its_step() {
    check_mutation("fabricated order id", |m| {
        let i = index_of(m, "get_order(")?;
        let start = m[i].find("#W")?;
        let id = &m[i][start..start + 9];
        Some((replace_at(m, i, id, "#W0000001"), i, K::Fabrication))
    });
    check_mutation("fabricated zip or email", |m| {
        let mut out = m.to_vec();
        out[1] = if m[1].contains("email") {
            "<tool>find_user(email=\"someone@example.com\")</tool>".into()
        } else {
            let start = m[1].find("zip=\"")? + 5;
            m[1].replacen(&m[1][start..start + 5], "00000", 1)
        };
        Some((out, 1, K::Fabrication))
    });
}

#[test]
fn a_repeated_call_is_flagged_at_the_repeat() {
    check_mutation("repeated get_order", |m| {
        let i = index_of(m, "get_order(")?;
        let mut out = m.to_vec();
        out.insert(i + 1, m[i].clone());
        Some((out, i + 1, K::RedundantCall))
    });
    check_mutation("repeated find_user", |m| {
        let mut out = m.to_vec();
        out.insert(2, m[1].clone());
        Some((out, 2, K::RedundantCall))
    });
    check_mutation("repeated write", |m| {
        let i = m.iter().position(|s| ["cancel_order(", "update_address("].iter().any(|t| s.contains(t)))?;
        let mut out = m.to_vec();
        out.insert(i + 1, m[i].clone());
        Some((out, i + 1, K::RedundantCall))
    });
}

#[test]
fn protocol_and_order_errors_are_flagged() {
    let env = env(5, 2);
    let m = env.reference();
    let findings = env.verify(&["<tool>get_order(\"</tool>".to_string(), "<tool>fly()</tool>".into(), m[1].clone()]);
    assert!(has(&findings, 0, K::FormatError) && has(&findings, 1, K::WrongTool), "{findings:?}");
    let early = env.verify(&[m[0].clone(), "<tool>list_orders(user_id=\"x\")</tool>".into()]);
    assert!(has(&early, 1, K::Fabrication) || has(&early, 1, K::WrongTool), "{early:?}");
}

#[test]
fn the_user_reveals_exactly_what_is_asked() {
    for seed in 0..200 {
        let mut env = env(seed, 3);
        let facts = env.private_facts();
        let (name, zip, email) = (&facts[0], &facts[1], &facts[2]);
        assert!(facts.iter().all(|f| !env.prompt().user.contains(f.as_str())), "the opening leaks a fact");
        let r = env.step("Could you tell me your zip code?").text;
        assert!(r.contains(zip.as_str()) && !r.contains(name.as_str()) && !r.contains(email.as_str()), "{r}");
        let r = env.step("And your email, please.").text;
        assert!(r.contains(email.as_str()) && !r.contains(zip.as_str()), "{r}");
        let r = env.step("What is the order number?").text;
        assert!(r.contains("#W") && !r.contains(email.as_str()), "{r}");
        for fact in &facts[3..] {
            let r = env.step("Thanks for waiting, one moment.").text;
            assert!(!r.contains(fact.as_str()), "{fact} leaked: {r}");
        }
    }
}

const WORDS: [&str; 16] = [
    "hello",
    "thanks",
    "one moment",
    "let me check",
    "could you",
    "please",
    "help",
    "the",
    "I see",
    "sure",
    "?",
    "!",
    "ok",
    "wait",
    "can you",
    "déjà vu ☃",
];
const TRIGGERS: [&str; 12] =
    ["name", "zip", "postal", "postcode", "email", "e-mail", "order", "item", "product", "reason", "why", "address"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn unasked_facts_never_appear_in_user_replies(
        seed in 0u64..10_000, difficulty in 1u32..=3,
        messages in prop::collection::vec((prop::collection::vec(0usize..WORDS.len(), 0..8), "\\PC{0,12}"), 1..10),
    ) {
        let mut env = env(seed, difficulty);
        let facts: Vec<String> = env.private_facts().iter().map(|f| f.to_lowercase()).collect();
        for (words, noise) in messages {
            let text = format!("{} {noise}", words.iter().map(|&w| WORDS[w]).collect::<Vec<_>>().join(" "));
            let lower = text.to_lowercase();
            prop_assume!(!TRIGGERS.iter().any(|t| lower.contains(t)) && !text.contains('<'));
            let obs = env.step(&text);
            prop_assert_eq!(obs.from, Source::User);
            let reply = obs.text.to_lowercase();
            for fact in &facts {
                prop_assert!(!reply.contains(fact.as_str()), "{} leaked by {:?}: {}", fact, text, reply);
            }
        }
    }

    #[test]
    fn garbage_never_panics_and_always_gets_an_observation(
        seed in 0u64..10_000, difficulty in 1u32..=3,
        messages in prop::collection::vec(prop_oneof![
            any::<String>(),
            prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            ("[a-z_]{0,14}", "\\PC{0,30}").prop_map(|(n, a)| format!("<tool>{n}({a})</tool>")),
            (0usize..8, "[#W0-9a-z_\", =.$@]{0,30}").prop_map(|(t, a)| format!("<tool>{}({a})</tool>", [
                "find_user", "get_user", "list_orders", "get_order", "cancel_order", "refund", "update_address", "transfer_to_human"][t])),
            "\\PC{0,20}".prop_map(|a| format!("<answer>{a}</answer>")),
        ], 1..14),
    ) {
        let mut env = make(spec(seed, difficulty), Limits::default()).expect("built");
        for m in &messages {
            let obs = env.step(m);
            prop_assert!(!obs.text.trim().is_empty());
        }
        let findings = env.verify(&messages);
        prop_assert!(findings.iter().all(|f| f.step <= messages.len()));
    }
}

#[test]
fn a_transfer_ends_the_episode_and_later_steps_are_flawed() {
    for seed in 0..50 {
        let mut env = env(seed, 2);
        let reference = env.reference();
        let transfer = "<tool>transfer_to_human(summary=\"the customer needs more help\")</tool>".to_string();
        let mut early = reference[..2].to_vec();
        early.push(transfer.clone());
        let end = play(&mut env, &early).pop().and_then(|o| o.end).expect("a transfer ends the episode");
        assert!(!end.success && end.reward == 0.0, "{}", end.summary);
        assert!(env.step(&reference[2]).flaw.is_some(), "a step after the end is flawed");
        assert!(has(&env.verify(&early), 2, K::GaveUpEarly));
        let mut late = reference.clone();
        *late.last_mut().expect("non-empty") = transfer;
        let mut fresh = self::env(seed, 2);
        assert!(play(&mut fresh, &late).pop().and_then(|o| o.end).is_some_and(|e| e.success), "handing over once done");
        assert!(fresh.verify(&late).is_empty());
    }
}

#[test]
fn episodes_own_their_store() {
    for seed in 0..100 {
        let mut a = env(seed, 1);
        let reference = a.reference();
        let Some(i) = index_of(&reference, "cancel_order(") else { continue };
        play(&mut a, &reference);
        let mut b = env(seed, 1);
        let order = play(&mut b, &reference[1..i]).pop().expect("get_order ran").text;
        assert!(order.contains("status pending"), "{order}");
        assert!(!b.solved());
        assert!(a.verify(&reference).is_empty(), "verify replays on a fresh copy");
    }
}

#[test]
fn same_seed_same_task_and_observations_different_seed_different_task() {
    let mut tasks = HashSet::new();
    for seed in 0..300 {
        let (mut a, mut b) = (env(seed, 2), env(seed, 2));
        assert_eq!(a.prompt(), b.prompt());
        let mut messages = a.reference();
        messages.insert(1, "What is your name and why are you here?".into());
        assert_eq!(play(&mut a, &messages), play(&mut b, &messages));
        assert!(tasks.insert(a.reference().join("\n")), "seed {seed} repeats a task");
    }
    assert_ne!(env(1, 1).reference(), env(1, 2).reference(), "difficulty changes the task");
}
