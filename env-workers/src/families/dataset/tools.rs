//! The built-in tools a dataset task may offer (its `tools` field). Each is stateless and
//! needs nothing but its arguments, so any task can have it.
//!
//! ```text
//!  "calc"   calc(expression)   exact arithmetic (the math family's calculator): calc(12 * (3 + 4)) → 84
//! ```

use crate::families::math::{calc, calc_argument};

/// A built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// Exact arithmetic over rationals.
    Calc,
}

impl Tool {
    /// Every built-in tool.
    pub const ALL: [Tool; 1] = [Tool::Calc];

    /// The name a task file and a tool call use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Calc => "calc",
        }
    }

    /// The tool by name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The names of every tool, for error messages.
    pub fn names() -> String {
        Self::ALL.map(Tool::name).join(", ")
    }

    /// How the system prompt describes it.
    pub fn usage(self) -> &'static str {
        match self {
            Self::Calc => {
                "  calc(expression)  evaluates + - * / and parentheses exactly; numbers may be integers,\n                    decimals or fractions a/b; results are an integer or a fraction in lowest terms."
            }
        }
    }

    /// An example call, for the protocol section of the system prompt and for flaw texts.
    pub fn example(self) -> &'static str {
        match self {
            Self::Calc => "<tool>calc(12 * (3 + 4))</tool>",
        }
    }

    /// Runs one call: its result, or what was wrong with it.
    pub fn call(self, raw_args: &str) -> Result<String, String> {
        match self {
            Self::Calc => {
                let expr = calc_argument(raw_args).map_err(str::to_string)?;
                calc::evaluate(expr).map(|v| v.to_string()).map_err(|e| format!("calc error: {e}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calc_computes_exactly_and_explains_errors() {
        assert_eq!(Tool::Calc.call("2 + 3 * 4"), Ok("14".into()));
        assert_eq!(Tool::Calc.call("expression=\"7 / 2\""), Ok("7/2".into()));
        assert_eq!(Tool::Calc.call("1/0"), Err("calc error: division by zero at position 2".into()));
        assert!(Tool::Calc.call("").unwrap_err().contains("got nothing"));
        assert_eq!(Tool::from_name("calc"), Some(Tool::Calc));
        assert_eq!(Tool::from_name("search"), None);
    }
}
