//! The webnav family: the reference solves every task and verifies clean, mutated references are
//! flagged at the right step, garbage never panics, tasks are deterministic, and stepping is fast.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use env_workers::families::webnav::WebnavEnv;
use env_workers::registry::make;
use env_workers::{Environment, Finding, FindingKind, Limits, Source, TaskFamily, TaskSpec};
use proptest::prelude::*;

use FindingKind::*;

fn spec(seed: u64, difficulty: u32) -> TaskSpec {
    TaskSpec { family: TaskFamily::Webnav, seed, difficulty }
}

fn env(seed: u64, difficulty: u32) -> WebnavEnv {
    WebnavEnv::new(spec(seed, difficulty))
}

fn open(url: &str) -> String {
    format!("<tool>open(\"{url}\")</tool>")
}

fn kinds(findings: &[Finding]) -> Vec<(usize, FindingKind)> {
    findings.iter().map(|f| (f.step, f.kind)).collect()
}

/// A URL linked from the home page that is not on the reference route (another department).
fn off_route_url(e: &WebnavEnv) -> String {
    let site = &e.task().site;
    let id = site.links(0).iter().copied().find(|&id| site.is_page(id) && !e.task().chain.contains(&id)).unwrap();
    site.url(id).to_string()
}

#[test]
fn reference_solves_every_task_at_every_difficulty() {
    for d in 1..=3 {
        for seed in 0..1000 {
            let mut g = make(spec(seed, d), Limits::default()).unwrap();
            let reference = g.reference();
            assert_eq!(reference.len(), d as usize + 3, "seed {seed}: / + {} clicks + answer", d + 1);
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
fn an_off_route_page_is_a_wrong_argument_at_its_step() {
    for d in 1..=3 {
        for seed in 0..100 {
            let e = env(seed, d);
            let reference = e.reference();
            for k in 1..e.task().chain.len() {
                let mut msgs = reference.clone();
                msgs.insert(k, open(&off_route_url(&e)));
                assert_eq!(kinds(&e.verify(&msgs)), vec![(k, WrongArguments)], "seed {seed} d {d} k {k}");
            }
        }
    }
}

#[test]
fn a_skipped_page_is_a_skipped_step_at_its_step() {
    for d in 1..=3 {
        for seed in 0..100 {
            let e = env(seed, d);
            let reference = e.reference();
            for k in 0..e.task().chain.len() {
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
fn a_fabricated_answer_is_wrong_and_unsupported() {
    for d in 1..=3 {
        for seed in 0..100 {
            let e = env(seed, d);
            let mut msgs = e.reference();
            let n = msgs.len() - 1;
            msgs[n] = "<answer>Zanzibar Quux 4242</answer>".into();
            assert_eq!(kinds(&e.verify(&msgs)), vec![(n, WrongAnswer), (n, UnsupportedAnswer)]);
            let mut g = e.fresh();
            let end = msgs.iter().map(|m| g.step(m)).last().unwrap().end.unwrap();
            assert_eq!((end.reward, end.success), (0.0, false));
            assert!(end.summary.contains("F1 0.00") && !end.summary.contains(&e.task().answer), "{}", end.summary);
        }
    }
}

#[test]
fn a_repeated_open_is_a_redundant_call() {
    for d in 1..=3 {
        for seed in 0..100 {
            let e = env(seed, d);
            let reference = e.reference();
            for k in 0..e.task().chain.len() {
                let mut msgs = reference.clone();
                msgs.insert(k + 1, reference[k].clone());
                assert_eq!(kinds(&e.verify(&msgs)), vec![(k + 1, RedundantCall)], "seed {seed} d {d} k {k}");
            }
        }
    }
}

#[test]
fn guessed_urls_are_fabrications_and_dead_links_are_not() {
    let e = env(3, 2);
    let reference = e.reference();
    let mut g = e.fresh();
    let obs = g.step(&open("/people/nobody-at-all"));
    assert!(obs.text.starts_with("404: no page at /people/nobody-at-all") && obs.flaw.is_some());
    let mut msgs = reference.clone();
    msgs.insert(1, open("/people/nobody-at-all"));
    assert_eq!(kinds(&e.verify(&msgs)), vec![(1, Fabrication)]);
    // An existing page no seen link pointed to: a profile from another department.
    let site = &e.task().site;
    let other = (0..site.len())
        .map(|p| site.url(p))
        .find(|u| u.starts_with("/people/") && !e.task().chain.iter().any(|&c| site.url(c) == *u));
    let mut msgs = reference.clone();
    msgs.insert(1, open(other.unwrap()));
    assert_eq!(kinds(&e.verify(&msgs)), vec![(1, Fabrication)]);
    // A dead link that the home page shows: an honest 404, off the route.
    let mut g = e.fresh();
    g.step(&open("/"));
    let obs = g.step(&open("/archive"));
    assert_eq!((obs.text.as_str(), obs.flaw.is_none(), obs.from), ("404: no page at /archive", true, Source::Tool));
    let mut msgs = reference;
    msgs.insert(1, open("/archive"));
    assert_eq!(kinds(&e.verify(&msgs)), vec![(1, WrongArguments)]);
}

#[test]
fn find_back_and_protocol_errors() {
    let e = env(5, 1);
    let mut g = e.fresh();
    assert!(g.step("<tool>find(\"staff\")</tool>").flaw.unwrap().contains("no page is open"));
    assert!(g.step("<tool>back()</tool>").flaw.unwrap().contains("no previous page"));
    let home = g.step(&open("https://example.edu/")).text;
    assert!(home.starts_with(&e.task().univ));
    let found = g.step("<tool>find(DEPARTMENT OF)</tool>").text;
    assert!(found.contains("line(s) of / contain") && found.contains("- [Department of"), "{found}");
    assert!(g.step("<tool>find(zzzz)</tool>").text.starts_with("no line of / contains"));
    let dept = e.task().site.url(e.task().chain[1]).to_string();
    assert!(g.step(&open(&dept)).text.contains(&dept));
    assert_eq!(g.step("<tool>back()</tool>").text, home);
    let mut msgs: Vec<String> = ["hello?", "<tool>search(x)</tool>", "<tool>open(</tool>", "<tool>open()</tool>"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    msgs.extend([
        "<tool>find(x)</tool>".to_string(),
        open("/"),
        "<tool>find(x)</tool>".into(),
        "<tool>find(X)</tool>".into(),
    ]);
    let expected =
        [(0, WrongTool), (1, WrongTool), (2, FormatError), (3, WrongArguments), (4, WrongTool), (7, RedundantCall)];
    let mut with_end = msgs.clone();
    with_end.push("<answer>no idea</answer>".into());
    with_end.push("one more thing".into());
    let found = kinds(&e.verify(&with_end));
    assert_eq!(found[..expected.len()], expected[..], "{found:?}");
    assert!(found.contains(&(8, WrongAnswer)) && found.contains(&(9, FormatError)));
    assert_eq!(kinds(&e.verify(&msgs)).last(), Some(&(7, GaveUpEarly)));
    assert_eq!(kinds(&e.verify(&[])), vec![(0, GaveUpEarly)]);
}

#[test]
fn same_seed_same_task_different_seeds_differ() {
    let episode = |seed: u64, d: u32| {
        let mut g = make(spec(seed, d), Limits::default()).unwrap();
        let mut out = vec![g.prompt().system.clone(), g.prompt().user.clone()];
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
        "\\PC{0,80}".prop_map(|s| format!("<tool>open({s})</tool>")),
        "\\PC{0,80}".prop_map(|s| format!("<tool>find({s})</tool>")),
        "\\PC{0,80}".prop_map(|s| format!("<tool>{s}</tool>")),
        "\\PC{0,80}".prop_map(|s| format!("<answer>{s}</answer>")),
        Just("<tool>back()</tool>".to_string()),
        Just("<tool>open(\"/\")</tool>".to_string()),
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
