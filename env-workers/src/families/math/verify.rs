//! The math family's step verifier: replays an episode on a fresh copy of the task and reports
//! findings at the index of the agent message they concern.
//!
//! Terms: the **problem numbers** are the numbers written in the problem text; the **results**
//! are the values earlier successful `calc` calls returned; a value is **seen** when it is a
//! problem number or a result. A typed number is **supported** when it is seen or is the
//! numerator or denominator of a seen fraction (so `7/3` may be copied from a result `7/3`, and
//! `2.5` counts as the seen 5/2). The **route** is the values of the reference steps.
//!
//! Rules, per message in order:
//!
//! | message | finding |
//! |---|---|
//! | does not parse as an action | `FormatError` |
//! | after the episode ended | `FormatError` |
//! | free text (there is no user) or a tool other than `calc` | `WrongTool` |
//! | `calc` with no expression, a malformed one, division by zero or overflow | `WrongArguments` |
//! | `calc` typing a number that is not supported | `Fabrication` (e.g. a value worked out in the head) |
//! | `calc` with the same literal numbers and result as an earlier call | `RedundantCall` (nothing else) |
//! | `calc` whose result is off the route, unless one of its numbers is an earlier off-route result (the mistake was already reported where it was made) | `WrongArguments` |
//! | answer that is not a number | `FormatError` and `WrongAnswer` |
//! | answer equal to the truth but not seen | `UnsupportedAnswer` (right, but never computed) |
//! | answer not equal to the truth | `WrongAnswer`; plus `Fabrication` when the value is not seen; plus one `SkippedStep` per route step never computed (see below) |
//! | no answer at all | `GaveUpEarly` at the last message (0 when there is none) |
//!
//! A route step counts as computed when some call produced its value, as its result or as one of
//! its operations (a literal fraction in lowest terms like `7/3` whose value was already seen is
//! a copy, not an operation; a lone number computes nothing). Each value computed is matched to
//! the first route step with that value not yet matched, so a route that holds a value twice
//! needs it computed twice. A skipped step is
//! reported at the first message that computed a later route step (where the solution moved on
//! without it), or else at the answer.
//!
//! A correct solution that takes another route (e.g. distributing a product) gets
//! `WrongArguments` for its off-route values even though its answer is right; the reference
//! judge should weigh those below a wrong answer.

use super::calc::{evaluate_with, Trace};
use super::{calc_argument, MathEnv, Rational};
use crate::action::{self, Action};
use crate::env::Environment;
use crate::verify::{Finding, FindingKind};

struct Replay<'a> {
    route: &'a [Rational],
    problem: &'a [Rational],
    seen: Vec<Rational>,
    off_route: Vec<Rational>,
    /// For each route step, the first message that computed its value (each computed value is
    /// matched to the first route step with that value not yet matched).
    first_computed: Vec<Option<usize>>,
    calls: Vec<(Vec<Rational>, Rational, usize)>,
    findings: Vec<Finding>,
}

fn matches_typed(typed: Rational, value: Rational) -> bool {
    typed == value
        || (!value.is_integer()
            && typed.is_integer()
            && (typed.numer() == value.numer().abs() || typed.numer() == value.denom()))
}

fn list(values: &[Rational]) -> String {
    values.iter().map(Rational::to_string).collect::<Vec<_>>().join(", ")
}

/// Findings for `messages` replayed on `env`, which must be a fresh episode.
pub fn verify(env: &mut MathEnv, messages: &[String]) -> Vec<Finding> {
    let task = env.task().clone();
    let route: Vec<Rational> = task.steps.iter().map(|s| s.value).collect();
    let mut r = Replay {
        route: &route,
        problem: &task.numbers,
        seen: task.numbers.clone(),
        off_route: Vec::new(),
        first_computed: vec![None; route.len()],
        calls: Vec::new(),
        findings: Vec::new(),
    };
    let mut answered = false;
    for (i, message) in messages.iter().enumerate() {
        if answered {
            r.push(i, FindingKind::FormatError, "a message after the episode ended");
            continue;
        }
        let obs = env.step(message);
        match action::parse(message) {
            Err(e) => r.push(i, FindingKind::FormatError, format!("the message is not a valid action: {e}")),
            Ok(Action::Say(_)) => r.push(i, FindingKind::WrongTool, "free text, but there is no user here to talk to"),
            Ok(Action::Tool(call)) if call.name != "calc" => {
                r.push(i, FindingKind::WrongTool, format!("`{}` is not a tool here; only calc is", call.name))
            }
            Ok(Action::Tool(call)) => r.calc(i, &call.raw_args),
            Ok(Action::Answer(text)) => {
                r.answer(i, &text, task.answer);
                answered = true;
            }
        }
        answered |= obs.end.is_some();
    }
    if !answered {
        let detail = "the episode ends without an answer";
        r.push(messages.len().saturating_sub(1), FindingKind::GaveUpEarly, detail);
    }
    r.findings
}

impl Replay<'_> {
    fn push(&mut self, step: usize, kind: FindingKind, detail: impl Into<String>) {
        self.findings.push(Finding::new(step, kind, detail));
    }

    fn supported(&self, typed: Rational) -> bool {
        self.seen.iter().any(|v| matches_typed(typed, *v))
    }

    fn calc(&mut self, i: usize, raw: &str) {
        let expr = match calc_argument(raw) {
            Ok(expr) => expr,
            Err(why) => return self.push(i, FindingKind::WrongArguments, why),
        };
        let mut trace = Trace::default();
        let value = match evaluate_with(expr, &mut trace) {
            Ok(v) => v,
            Err(e) => return self.push(i, FindingKind::WrongArguments, format!("calc({expr}) fails: {e}")),
        };
        let mut key = trace.literals.clone();
        key.sort_by_key(|v| (v.numer(), v.denom()));
        if let Some(&(_, _, earlier)) = self.calls.iter().find(|(k, v, _)| *k == key && *v == value) {
            let detail = format!("calc({expr}) repeats the calculation of step {earlier} (= {value})");
            return self.push(i, FindingKind::RedundantCall, detail);
        }
        let unsupported: Vec<Rational> = trace.literals.iter().copied().filter(|l| !self.supported(*l)).collect();
        if !unsupported.is_empty() {
            let detail = format!(
                "calc({expr}) uses {} found neither in the problem nor in an earlier result",
                list(&unsupported)
            );
            self.push(i, FindingKind::Fabrication, detail);
        }
        self.calls.push((key, value, i));
        if !self.route.contains(&value) {
            let carried = trace.literals.iter().any(|l| {
                self.off_route.iter().any(|v| matches_typed(*l, *v))
                    && !self.problem.contains(l)
                    && !self.route.iter().any(|v| matches_typed(*l, *v))
            });
            if !carried {
                let detail =
                    format!("calc({expr}) = {value} is not a step toward the answer: an operand or operator is wrong");
                self.push(i, FindingKind::WrongArguments, detail);
            }
            self.off_route.push(value);
        }
        // A literal fraction in lowest terms (`7/3`) whose value was already seen is a copy of
        // it, not a division.
        let divided = trace.fractions.iter().filter(|(v, n, d)| {
            let lowest = !v.is_integer() && Rational::int(v.numer()) == *n && Rational::int(v.denom()) == *d;
            !(lowest && self.seen.contains(v))
        });
        // A lone number computes nothing.
        let values: Vec<Rational> = divided.map(|f| f.0).chain(trace.nodes).collect();
        for v in values {
            let slot = self.route.iter().zip(&self.first_computed).position(|(r, at)| *r == v && at.is_none());
            if let Some(j) = slot {
                self.first_computed[j] = Some(i);
            }
        }
        self.seen.push(value);
    }

    fn answer(&mut self, i: usize, text: &str, truth: Rational) {
        let Some(value) = Rational::parse_answer(text) else {
            self.push(i, FindingKind::FormatError, "the answer is not a single number");
            return self.push(i, FindingKind::WrongAnswer, "the answer is not a number, so it cannot be right");
        };
        let seen = self.seen.contains(&value);
        if value == truth {
            if !seen {
                let detail = format!("the answer {value} is right but no calc result nor problem number gives it");
                self.push(i, FindingKind::UnsupportedAnswer, detail);
            }
            return;
        }
        self.push(i, FindingKind::WrongAnswer, format!("the answer is {value}; the right answer is {truth}"));
        if !seen {
            let detail = format!("the answer {value} appears neither in the problem nor in any result");
            self.push(i, FindingKind::Fabrication, detail);
        }
        for (j, r) in self.route.iter().enumerate() {
            if self.first_computed[j].is_some() {
                continue;
            }
            let at = self.first_computed[j + 1..].iter().flatten().min().copied().unwrap_or(i);
            let detail = format!("step {} of the solution ({r}) was never computed", j + 1);
            self.findings.push(Finding::new(at, FindingKind::SkippedStep, detail));
        }
    }
}

#[cfg(test)]
mod tests {
    use protocol::wire::{TaskFamily, TaskSpec};

    use super::super::generate::{numbers_in, Step, Task};
    use super::*;
    use crate::env::Prompt;

    /// "12, then 5 more, then 3 times as much": 12 + 5 = 17, 17 * 3 = 51.
    fn env() -> MathEnv {
        let text = "Mia has 12 litres of juice. Then Mia makes 5 more litres of juice. Then the amount Mia has \
                    becomes 3 times as large. How many litres of juice does Mia have now?";
        let step = |e: &str, v| Step { expression: e.into(), value: Rational::int(v) };
        let task = Task {
            text: text.into(),
            steps: vec![step("12 + 5", 17), step("17 * 3", 51)],
            answer: Rational::int(51),
            numbers: numbers_in(text),
        };
        let prompt = Prompt { system: String::new(), user: text.into() };
        MathEnv { spec: TaskSpec { family: TaskFamily::Math, seed: 0, difficulty: 1 }, task, prompt, over: false }
    }

    fn kinds(messages: &[&str]) -> Vec<(usize, FindingKind)> {
        let messages: Vec<String> = messages.iter().map(|m| m.to_string()).collect();
        env().verify(&messages).into_iter().map(|f| (f.step, f.kind)).collect()
    }

    #[test]
    fn one_calc_for_the_whole_computation_is_fine() {
        assert_eq!(kinds(&["<tool>calc((12 + 5) * 3)</tool>", "<answer>51</answer>"]), []);
        assert_eq!(kinds(&["<tool>calc(3 * (5 + 12))</tool>", "<answer>51.0</answer>"]), []);
    }

    #[test]
    fn mental_arithmetic_is_a_fabricated_number() {
        assert_eq!(kinds(&["<tool>calc(17 * 3)</tool>", "<answer>51</answer>"]), [(0, FindingKind::Fabrication)]);
        assert_eq!(kinds(&["<answer>51</answer>"]), [(0, FindingKind::UnsupportedAnswer)]);
    }

    #[test]
    fn a_mistake_is_reported_where_it_was_made_not_where_it_was_carried() {
        use FindingKind::*;
        let found = kinds(&["<tool>calc(12 + 6)</tool>", "<tool>calc(18 * 3)</tool>", "<answer>54</answer>"]);
        let want = [(0, Fabrication), (0, WrongArguments), (2, WrongAnswer), (2, SkippedStep), (2, SkippedStep)];
        assert_eq!(found, want);
    }

    #[test]
    fn commuted_repeats_are_redundant() {
        let found = kinds(&[
            "<tool>calc(12 + 5)</tool>",
            "<tool>calc(5+12)</tool>",
            "<tool>calc(17*3)</tool>",
            "<answer>51</answer>",
        ]);
        assert_eq!(found, [(1, FindingKind::RedundantCall)]);
    }

    #[test]
    fn protocol_breaks_and_late_messages() {
        use FindingKind::*;
        let found = kinds(&["hi", "<tool>calc(12 +)</tool>", "<tool>sum(1)</tool>", "<answer>lots</answer>", "x"]);
        let want =
            [(0, WrongTool), (1, WrongArguments), (2, WrongTool), (3, FormatError), (3, WrongAnswer), (4, FormatError)];
        assert_eq!(found, want);
        assert_eq!(kinds(&[]), [(0, GaveUpEarly)]);
    }
}
