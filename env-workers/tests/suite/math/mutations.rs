//! Mutated reference trajectories, each flagged with the right finding at the right step. A task
//! where the mutation happens to coincide with the truth is skipped, and counted: every test
//! asserts how many of its 900 tasks (300 seeds × 3 difficulties) it actually checked.

use env_workers::families::math::Rational;
use env_workers::{Environment, FindingKind};

use super::{answer, each_task, findings};

/// Changes the last digit of the expression in `call`, e.g. `calc(17 * 3)` → `calc(17 * 4)`.
fn mistype(call: &str) -> String {
    let mut bytes = call.as_bytes().to_vec();
    if let Some(d) = bytes.iter_mut().rev().find(|b| b.is_ascii_digit()) {
        *d = b'0' + (*d - b'0' + 1) % 10;
    }
    String::from_utf8(bytes).expect("ascii")
}

#[test]
fn a_wrong_operand_is_flagged_at_its_step() {
    let (mut checked, mut coincidences) = (0, 0);
    each_task(|env, mut messages| {
        let steps = &env.task().steps;
        let k = (env.spec().seed as usize) % steps.len();
        messages[k] = mistype(&messages[k]);
        let found = findings(env, &messages);
        if found.iter().all(|f| f.1 != FindingKind::WrongArguments) {
            coincidences += 1; // the mistyped value happens to be another step's value
            return;
        }
        checked += 1;
        assert!(found.contains(&(k, FindingKind::WrongArguments)), "{messages:?}: {found:?}");
        assert!(found.iter().all(|(step, kind)| *step >= k && *kind != FindingKind::WrongAnswer), "{found:?}");
    });
    assert!(coincidences * 20 < checked, "{coincidences} coincidences in {checked}");
}

#[test]
fn a_repeated_call_is_flagged_at_the_duplicate() {
    each_task(|env, mut messages| {
        let k = (env.spec().seed as usize) % env.task().steps.len();
        messages.insert(k + 1, messages[k].clone());
        assert_eq!(findings(env, &messages), [(k + 1, FindingKind::RedundantCall)], "{messages:?}");
    });
}

#[test]
fn dropping_the_last_step_and_answering_what_was_there_is_a_skipped_step() {
    let mut skipped = 0;
    each_task(|env, mut messages| {
        let task = env.task();
        let n = task.steps.len();
        let previous = task.steps[n - 2].value;
        let earlier_values: Vec<Rational> = task.steps[..n - 1].iter().map(|s| s.value).collect();
        if previous == task.answer || earlier_values.contains(&task.answer) {
            skipped += 1;
            return;
        }
        messages.truncate(n - 1);
        messages.push(answer(previous));
        let want = [(n - 1, FindingKind::WrongAnswer), (n - 1, FindingKind::SkippedStep)];
        assert_eq!(findings(env, &messages), want, "{messages:?}");
    });
    assert!(skipped < 30, "{skipped} coincidences");
}

#[test]
fn answering_the_truth_without_computing_it_is_unsupported() {
    let (mut checked, mut coincidences) = (0, 0);
    each_task(|env, mut messages| {
        let task = env.task();
        let n = task.steps.len();
        if task.steps[..n - 1].iter().any(|s| s.value == task.answer) || task.numbers.contains(&task.answer) {
            coincidences += 1; // the answer is on the page without the last step
            return;
        }
        checked += 1;
        messages.remove(n - 1);
        assert_eq!(findings(env, &messages), [(n - 1, FindingKind::UnsupportedAnswer)], "{messages:?}");
    });
    // Of the 900 tasks, 839 were checked when this was written (61 coincidences).
    assert!(checked >= 750, "only {checked} tasks checked ({coincidences} coincidences)");
}

#[test]
fn a_skipped_middle_step_is_reported_where_the_solution_moved_on() {
    let (mut whole, mut fractions, mut coincidences) = (0, 0, 0);
    each_task(|env, mut messages| {
        let task = env.task();
        let k = (env.spec().seed as usize) % (task.steps.len() - 1);
        let dropped = task.steps[k].value;
        if task.steps.iter().enumerate().any(|(j, s)| j != k && s.value == dropped) {
            coincidences += 1; // another step has the dropped value: nothing is missing
            return;
        }
        messages.remove(k);
        let last = messages.len() - 1;
        messages[last] = answer(task.answer.checked_add(Rational::ONE).expect("small"));
        let found = env.verify(&messages);
        assert!(found.iter().any(|f| (f.step, f.kind) == (last, FindingKind::WrongAnswer)), "{found:?}");
        let skipped: Vec<_> = found.iter().filter(|f| f.kind == FindingKind::SkippedStep).collect();
        if !dropped.is_integer() {
            // The next step types the fraction `(a/b)` itself: a made-up number, not a skip.
            fractions += 1;
            assert!(skipped.is_empty(), "{found:?}");
            assert!(found.iter().any(|f| f.step >= k && f.kind == FindingKind::Fabrication), "{found:?}");
            return;
        }
        whole += 1;
        assert_eq!(skipped.len(), 1, "{found:?}");
        assert_eq!(skipped[0].step, k, "{found:?}");
        assert!(skipped[0].detail.contains(&format!("step {} of the solution ({dropped})", k + 1)), "{found:?}");
    });
    // Of the 900 tasks, when this was written: 780 whole, 114 fractions, 6 coincidences.
    let counts = format!("{whole} whole, {fractions} fractions, {coincidences} coincidences");
    assert!(whole >= 600 && fractions >= 50 && coincidences < 30, "both kinds of dropped step are checked: {counts}");
}

#[test]
fn a_fabricated_answer_is_flagged_at_the_answer() {
    each_task(|env, mut messages| {
        let last = messages.len() - 1;
        let made_up = env.task().answer.checked_mul(Rational::int(1000)).and_then(|v| v.checked_add(Rational::int(7)));
        messages[last] = answer(made_up.expect("small"));
        let want = [(last, FindingKind::WrongAnswer), (last, FindingKind::Fabrication)];
        assert_eq!(findings(env, &messages), want);
    });
}

#[test]
fn no_answer_is_giving_up_and_chatter_is_the_wrong_tool() {
    each_task(|env, mut messages| {
        let answer = messages.pop().expect("an answer");
        let last = messages.len() - 1;
        assert_eq!(findings(env, &messages), [(last, FindingKind::GaveUpEarly)]);
        messages.push(answer);
        messages.insert(1, "Let me think about this.".into());
        messages.insert(3, "<tool>python(1 + 1)</tool>".into());
        messages.insert(4, "<tool>calc(1 +* 2)</tool>".into());
        messages.insert(5, "<tool>calc(1 + 2".into());
        let want = [(1, FindingKind::WrongTool), (3, FindingKind::WrongTool), (4, FindingKind::WrongArguments)];
        let found = findings(env, &messages);
        assert_eq!(found[..3], want);
        assert_eq!(found[3..], [(5, FindingKind::FormatError)]);
    });
}
