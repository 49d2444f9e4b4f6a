//! The `math` family (GSM8K-like): multi-step arithmetic word problems solved with a calculator.
//!
//! ```text
//!  user: "Mia has 12 litres of juice. … How many litres of juice does Mia have now?"
//!  agent: <tool>calc(12 + 5)</tool>        ──► tool: 17
//!  agent: <tool>calc(17 * 3)</tool>        ──► tool: 51
//!  agent: <answer>51</answer>              ──► end: reward 1 (exactly equal) else 0
//! ```
//!
//! - Problems come from [`generate()`]: difficulty sets the number of operations (2, 3–4, 5–6)
//!   and the size of the numbers (20, 100, 1000); fractions appear from difficulty 2.
//! - The one tool, `calc(expression)`, is [`calc::evaluate`] over exact [`Rational`]s; results
//!   print as `17` or `7/3`. Also accepted: `calc("…")` and `calc(expression=…)`.
//! - The answer is parsed with [`Rational::parse_answer`] (`7`, `7.0`, `14/2`, `-3/4`) and
//!   compared exactly: reward 1.0 when equal to the truth, else 0.0.
//! - Free text, an unknown tool, a malformed expression, division by zero or overflow each give
//!   a flawed observation that says what was wrong; the episode goes on.
//! - The verifier's rules are in the [`verify` module](mod@verify).

pub mod calc;
pub mod generate;
mod parser;
pub mod rational;
mod tables;
pub mod verify;

use protocol::wire::TaskSpec;

use crate::action::{self, Action};
use crate::env::{Environment, Observation, Outcome, Prompt};
use crate::verify::Finding;
pub use generate::{generate, Task};
pub use rational::Rational;

/// The system prompt: role, tool and protocol.
pub const SYSTEM_PROMPT: &str = "You solve arithmetic word problems with a calculator.

Tool:
  calc(expression)  evaluates + - * / and parentheses exactly; numbers may be integers (12),
                    decimals (2.5) or fractions (7/3). Results are exact: an integer or a
                    fraction a/b in lowest terms.

Protocol, one action per message:
  <tool>calc(12 * (3 + 4))</tool>   call the calculator; its result is the next message
  <answer>84</answer>               your final answer; ends the episode

Compute every step with calc, using only numbers from the problem or from earlier results.
The answer is a single exact number: an integer, a fraction a/b or an exact decimal, no units.
There is no user to talk to.";

const NO_USER: &str =
    "there is no user to talk to here; call a tool, e.g. <tool>calc(12 * (3 + 4))</tool>, or answer with <answer>…</answer>";
const TOOLS: &str = "the only tool here is calc(expression), e.g. <tool>calc(12 * (3 + 4))</tool>";

/// One math task: the generated problem and the episode's state.
#[derive(Debug, Clone)]
pub struct MathEnv {
    spec: TaskSpec,
    task: Task,
    prompt: Prompt,
    over: bool,
}

impl MathEnv {
    /// The task for `spec` (its difficulty is clamped to 1..=3; the registry rejects others).
    pub fn new(spec: TaskSpec) -> Self {
        let task = generate(spec.seed, spec.difficulty);
        let prompt = Prompt { system: SYSTEM_PROMPT.to_string(), user: task.text.clone() };
        Self { spec, task, prompt, over: false }
    }

    /// The generated problem, its reference steps and its answer.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// A fresh episode of the same task.
    pub fn fresh(&self) -> Self {
        Self { over: false, ..self.clone() }
    }

    fn answer(&mut self, text: &str) -> Observation {
        self.over = true;
        let outcome = match Rational::parse_answer(text) {
            None => Outcome {
                reward: 0.0,
                success: false,
                summary: format!(
                    "the answer {:?} is not a number (write an integer, a fraction a/b or an exact decimal); the task is unsolved",
                    text.chars().take(40).collect::<String>()
                ),
            },
            Some(v) if v == self.task.answer => {
                Outcome { reward: 1.0, success: true, summary: format!("the answer {v} is correct") }
            }
            Some(v) => Outcome { reward: 0.0, success: false, summary: format!("the answer {v} is wrong") },
        };
        Observation::end(outcome)
    }
}

/// The expression inside `calc(…)`: the raw text, or a quoted or `expression=` form.
pub fn calc_argument(raw: &str) -> Result<&str, &'static str> {
    let mut arg = raw.trim();
    if let Some(rest) = arg.strip_prefix("expression") {
        if let Some(rest) = rest.trim_start().strip_prefix('=') {
            arg = rest.trim();
        }
    }
    if arg.len() >= 2 && arg.starts_with('"') && arg.ends_with('"') {
        arg = arg[1..arg.len() - 1].trim();
    }
    if arg.is_empty() {
        return Err("calc takes one expression, e.g. calc(12 * (3 + 4)); got nothing");
    }
    Ok(arg)
}

impl Environment for MathEnv {
    fn spec(&self) -> TaskSpec {
        self.spec
    }

    fn prompt(&self) -> &Prompt {
        &self.prompt
    }

    fn step(&mut self, message: &str) -> Observation {
        if self.over {
            return Observation::flawed("the episode is over; no further actions are accepted");
        }
        match action::parse(message) {
            Err(e) => Observation::flawed(format!("format error: {e}")),
            Ok(Action::Say(_)) => Observation::flawed(NO_USER),
            Ok(Action::Answer(text)) => self.answer(&text),
            Ok(Action::Tool(call)) if call.name != "calc" => {
                Observation::flawed(format!("unknown tool `{}`; {TOOLS}", call.name))
            }
            Ok(Action::Tool(call)) => match calc_argument(&call.raw_args).map(calc::evaluate) {
                Err(why) => Observation::flawed(why),
                Ok(Ok(value)) => Observation::tool(value.to_string()),
                Ok(Err(e)) => Observation::flawed(format!("calc error: {e}")),
            },
        }
    }

    fn reference(&self) -> Vec<String> {
        let mut out: Vec<String> =
            self.task.steps.iter().map(|s| format!("<tool>calc({})</tool>", s.expression)).collect();
        out.push(format!("<answer>{}</answer>", self.task.answer));
        out
    }

    fn verify(&self, agent_messages: &[String]) -> Vec<Finding> {
        verify::verify(&mut self.fresh(), agent_messages)
    }
}

#[cfg(test)]
mod tests {
    use protocol::wire::TaskFamily;

    use super::*;
    use crate::env::Source;

    fn env(seed: u64) -> MathEnv {
        MathEnv::new(TaskSpec { family: TaskFamily::Math, seed, difficulty: 2 })
    }

    #[test]
    fn calc_results_free_text_and_errors() {
        let mut e = env(1);
        let ok = e.step("<tool>calc(2 + 3 * 4)</tool>");
        assert_eq!((ok.text.as_str(), ok.from, ok.flaw.is_none()), ("14", Source::Tool, true));
        assert_eq!(e.step("<tool>calc(expression=\"7 / 2\")</tool>").text, "7/2");
        assert!(e.step("hello?").flaw.unwrap().contains("no user"));
        assert!(e.step("<tool>search(x)</tool>").text.contains("unknown tool `search`; the only tool here is calc"));
        assert_eq!(
            e.step("<tool>calc()</tool>").text,
            "calc takes one expression, e.g. calc(12 * (3 + 4)); got nothing"
        );
        assert_eq!(e.step("<tool>calc(1/0)</tool>").text, "calc error: division by zero at position 2");
        assert!(e.step("<tool>calc(1").text.starts_with("format error: "));
        assert!(e.step("<tool>calc(2)</tool>").end.is_none(), "errors do not end the episode");
    }

    #[test]
    fn answers_are_compared_exactly() {
        let mut e = env(2);
        let truth = e.task().answer;
        let end = e.step(&format!("<answer> {truth} </answer>")).end.unwrap();
        assert_eq!((end.reward, end.success), (1.0, true));
        assert!(e.step("<answer>1</answer>").flaw.is_some(), "nothing is accepted after the end");
        let mut e = e.fresh();
        let wrong = truth.checked_add(Rational::ONE).unwrap();
        let end = e.step(&format!("<answer>{wrong}</answer>")).end.unwrap();
        assert_eq!((end.reward, end.success), (0.0, false));
        assert_eq!(end.summary, format!("the answer {wrong} is wrong"), "the truth is not revealed");
        let end = e.fresh().step("<answer>about seven</answer>").end.unwrap();
        assert!(end.summary.contains("is not a number"));
    }
}
