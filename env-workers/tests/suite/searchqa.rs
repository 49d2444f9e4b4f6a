//! The searchqa family: the BM25 golden values, the reference solves every task and verifies
//! clean, mutated references are flagged at the right step, garbage never panics, tasks are
//! deterministic, and searching is fast.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use env_workers::families::searchqa::bm25::{tokenize, Bm25};
use env_workers::families::searchqa::SearchqaEnv;
use env_workers::registry::make;
use env_workers::scoring::normalize;
use env_workers::{Environment, Finding, FindingKind, Limits, TaskFamily, TaskSpec};
use proptest::prelude::*;

use FindingKind::*;

fn spec(seed: u64, difficulty: u32) -> TaskSpec {
    TaskSpec { family: TaskFamily::Searchqa, seed, difficulty }
}

fn env(seed: u64, difficulty: u32) -> SearchqaEnv {
    SearchqaEnv::new(spec(seed, difficulty))
}

fn search(query: &str) -> String {
    format!("<tool>search(\"{query}\")</tool>")
}

fn kinds(findings: &[Finding]) -> Vec<(usize, FindingKind)> {
    findings.iter().map(|f| (f.step, f.kind)).collect()
}

/// Golden BM25 scores, computed by hand.
///
/// Corpus: d0 = "cat sat" (|d0| = 2), d1 = "cat cat dog" (3), d2 = "dog bird fish" (3);
/// N = 3, avgdl = 8/3. k1 = 1.2, b = 0.75.
///   IDF(cat) = IDF(dog) = ln(1 + (3 − 2 + 0.5)/(2 + 0.5)) = ln(1.6)   = 0.4700036
///   IDF(bird) = IDF(fish) = ln(1 + (3 − 1 + 0.5)/(1 + 0.5)) = ln(8/3) = 0.9808293
///   K(d) = k1·(1 − b + b·|d|/avgdl):  K(d0) = 1.2·(0.25 + 0.75·0.75) = 0.975
///                                     K(d1) = K(d2) = 1.2·(0.25 + 0.75·1.125) = 1.3125
///   "cat":  d0 = 0.4700036·1·2.2/(1 + 0.975)    = 0.4700036·1.1139241 = 0.5235484
///           d1 = 0.4700036·2·2.2/(2 + 1.3125)   = 0.4700036·1.3283019 = 0.6243067
///   "cat dog": d1 = 0.6243067 + 0.4700036·2.2/2.3125 = 0.6243067 + 0.4471386 = 1.0714453
///              d2 = 0.4471386
///   "bird": d2 = 0.9808293·2.2/2.3125 = 0.9331135
#[test]
fn bm25_matches_hand_computed_scores() {
    let index = Bm25::new(&["cat sat", "Cat, CAT dog!", "dog bird fish"]);
    let close = |got: Vec<f64>, want: [f64; 3]| {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    };
    close(index.scores("cat"), [0.5235484, 0.6243067, 0.0]);
    close(index.scores("cat dog"), [0.5235484, 1.0714453, 0.4471386]);
    close(index.scores("dog cat cat"), [0.5235484, 1.0714453, 0.4471386]);
    close(index.scores("bird"), [0.0, 0.0, 0.9331135]);
    close(index.scores("unknown words"), [0.0, 0.0, 0.0]);
    let top: Vec<usize> = index.top_k("fish cat", 3).into_iter().map(|(d, _)| d).collect();
    assert_eq!(top, vec![2, 1, 0], "0.9331 > 0.6243 > 0.5235");
    assert_eq!(index.top_k("sat", 3).len(), 1, "documents without a query term are not returned");
    assert_eq!(tokenize("Ünïcode-words, 42x!").collect::<Vec<_>>(), vec!["ünïcode", "words", "42x"]);
}

#[test]
fn reference_solves_every_task_at_every_difficulty() {
    for d in 1..=3 {
        for seed in 0..1000 {
            let mut g = make(spec(seed, d), Limits::default()).unwrap();
            let reference = g.reference();
            assert_eq!(reference.len(), d as usize + 2, "seed {seed}: {} searches + answer", d + 1);
            let mut last = None;
            for m in &reference {
                let obs = g.step(m);
                assert!(obs.flaw.is_none(), "seed {seed} d {d}: {m} → {}", obs.text);
                last = Some(obs);
            }
            let end = last.unwrap().end.expect("the answer ends the episode");
            assert_eq!((end.reward, end.success), (1.0, true), "seed {seed} d {d}: {}", end.summary);
            assert_eq!(g.verify(&reference), vec![], "seed {seed} d {d}");
        }
    }
}

#[test]
fn a_search_that_leads_nowhere_is_a_wrong_argument_at_its_step() {
    for d in 1..=3 {
        for seed in 0..100 {
            let e = env(seed, d);
            let reference = e.reference();
            for k in 0..e.task().hops() {
                let mut msgs = reference.clone();
                msgs.insert(k, search("weather forecast tomorrow"));
                assert_eq!(kinds(&e.verify(&msgs)), vec![(k, WrongArguments)], "seed {seed} d {d} k {k}");
            }
        }
    }
}

#[test]
fn a_skipped_hop_is_a_skipped_step_at_its_step() {
    for d in 1..=3 {
        for seed in 0..100 {
            let e = env(seed, d);
            let reference = e.reference();
            for k in 0..e.task().hops() {
                let mut msgs = reference.clone();
                msgs.remove(k);
                let found = kinds(&e.verify(&msgs));
                assert!(found.contains(&(k, SkippedStep)), "seed {seed} d {d} k {k}: {found:?}");
                assert!(found.iter().all(|(s, _)| *s >= k), "nothing is flagged before the skip: {found:?}");
            }
        }
    }
}

#[test]
fn fabricated_answers_are_flagged() {
    for d in 1..=3 {
        for seed in 0..100 {
            let e = env(seed, d);
            let mut msgs = e.reference();
            let n = msgs.len() - 1;
            msgs[n] = "<answer>Zanzibar Quux</answer>".into();
            assert_eq!(kinds(&e.verify(&msgs)), vec![(n, WrongAnswer), (n, UnsupportedAnswer)]);
            // An entity of the world that no result of the reference episode shows.
            let mut g = e.fresh();
            let seen: String = e.reference().iter().map(|m| normalize(&g.step(m).text) + " ").collect();
            let seen = format!(" {} {seen}", normalize(&e.task().question));
            let unseen = e.task().world.entities.iter().find(|x| !seen.contains(&format!(" {} ", normalize(&x.name))));
            let Some(unseen) = unseen else { continue };
            msgs[n] = format!("<answer>{}</answer>", unseen.name);
            assert_eq!(kinds(&e.verify(&msgs)), vec![(n, WrongAnswer), (n, Fabrication)], "seed {seed} d {d}");
        }
    }
}

#[test]
fn a_repeated_search_is_a_redundant_call() {
    for d in 1..=3 {
        for seed in 0..100 {
            let e = env(seed, d);
            let reference = e.reference();
            for k in 0..e.task().hops() {
                let mut msgs = reference.clone();
                let same_words = search(&format!("{}!", e.task().queries[k].to_uppercase()));
                msgs.insert(k + 1, same_words);
                assert_eq!(kinds(&e.verify(&msgs)), vec![(k + 1, RedundantCall)], "seed {seed} d {d} k {k}");
            }
        }
    }
}

#[test]
fn a_query_naming_an_unseen_entity_is_a_fabrication() {
    for d in 1..=3 {
        for seed in 0..100 {
            let e = env(seed, d);
            let t = e.task();
            let mut g = e.fresh();
            let first = g.step(&e.reference()[0]).text;
            let seen = format!(" {} {} ", normalize(&t.question), normalize(&first));
            let unseen = (0..t.world.entities.len())
                .filter(|i| !t.chain.contains(i))
                .map(|i| t.world.name(i))
                .find(|n| !seen.contains(&format!(" {} ", normalize(n))))
                .unwrap();
            let mut msgs = e.reference();
            msgs.insert(1, search(unseen));
            assert_eq!(kinds(&e.verify(&msgs)).first(), Some(&(1, Fabrication)), "seed {seed} d {d}");
        }
    }
}

#[test]
fn protocol_errors_and_giving_up() {
    let e = env(5, 2);
    let mut g = e.fresh();
    assert!(g.step("what now?").flaw.unwrap().contains("no user"));
    assert!(g.step("<tool>open(/)</tool>").text.contains("unknown tool `open`; the only tool here is search"));
    assert!(g.step("<tool>search()</tool>").flaw.is_some());
    assert_eq!(g.step(&search("weather forecast")).text, "no passage matches \"weather forecast\"");
    let msgs: Vec<String> = ["hi", "<tool>open(x)</tool>", "<tool>search(</tool>", "<tool>search()</tool>"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut with_end = msgs.clone();
    with_end.push("<answer>Zanzibar</answer>".into());
    with_end.push("<answer>again</answer>".into());
    let found = kinds(&e.verify(&with_end));
    let expected = [(0, WrongTool), (1, WrongTool), (2, FormatError), (3, WrongArguments), (4, WrongAnswer)];
    assert_eq!(found[..5], expected[..], "{found:?}");
    assert!(
        found.contains(&(5, FormatError)) && found.iter().filter(|f| f.1 == SkippedStep).count() == e.task().hops()
    );
    assert_eq!(kinds(&e.verify(&msgs)).last(), Some(&(3, GaveUpEarly)));
    assert_eq!(kinds(&e.verify(&[])), vec![(0, GaveUpEarly)]);
}

#[test]
fn same_seed_same_task_different_seeds_differ() {
    let episode = |seed: u64, d: u32| {
        let mut g = make(spec(seed, d), Limits::default()).unwrap();
        let mut out = vec![g.prompt().user.clone()];
        for m in g.reference() {
            out.push(g.step(&m).text);
        }
        out
    };
    let mut all = std::collections::HashSet::new();
    for seed in 0..200 {
        for d in 1..=3 {
            let a = episode(seed, d);
            assert_eq!(a, episode(seed, d), "seed {seed} d {d} replays identically");
            assert!(all.insert(a), "seed {seed} d {d} is a task of its own");
        }
    }
}

fn garbage() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        "\\PC{0,200}",
        "\\PC{0,80}".prop_map(|s| format!("<tool>search({s})</tool>")),
        "\\PC{0,80}".prop_map(|s| format!("<tool>{s}</tool>")),
        "\\PC{0,80}".prop_map(|s| format!("<answer>{s}</answer>")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn garbage_never_panics_and_always_gets_an_observation(
        seed in 0u64..1000, d in 1u32..=3, msgs in proptest::collection::vec(garbage(), 1..24)
    ) {
        let mut g = make(spec(seed, d), Limits::default()).unwrap();
        for m in &msgs {
            let obs = g.step(m);
            prop_assert!(!obs.text.is_empty());
        }
        let findings = g.verify(&msgs);
        prop_assert!(findings.iter().all(|f| f.step < msgs.len()));
    }
}
