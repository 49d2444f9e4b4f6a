//! The `calc` tool: arithmetic over exact [`Rational`]s, evaluated by a hand-written
//! recursive-descent parser (the private `parser` module) while it parses — never `eval`, no
//! allocation on the way — with errors that say what and where, and a [`Sink`] for the verifier.
//!
//! ```text
//!  expr    := term (('+' | '-') term)*
//!  term    := unary (('*' | '/') unary)*
//!  unary   := ('-' | '+') unary | primary
//!  primary := number | '(' expr ')'
//!  number  := digits ['.' digits] | '.' digits          e.g. 12, 2.5 (= 5/2), .5
//! ```
//!
//! `a/b` literals are divisions and come out exact (`7/3` stays 7/3). `×`, `÷` and `−` are read
//! as `*`, `/` and `-`. Positions in error messages are 1-based character columns of the
//! expression. Nesting (parentheses and unary signs) is limited to [`MAX_DEPTH`] so that no
//! input can exhaust the stack.

use std::fmt;

use super::rational::Rational;

/// Deepest nesting of parentheses and unary signs accepted.
pub const MAX_DEPTH: usize = 64;

/// Why an expression has no value; the message says where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalcError {
    /// Nothing to evaluate.
    Empty,
    /// A character that cannot come here.
    Unexpected {
        /// The character found.
        found: char,
        /// Its 1-based column.
        position: usize,
        /// What could have come instead.
        expected: &'static str,
    },
    /// The expression stopped early.
    UnexpectedEnd {
        /// What was still needed.
        expected: &'static str,
    },
    /// A `(` never closed.
    Unclosed {
        /// Column of the `(`.
        position: usize,
    },
    /// A decimal point with no digits after it.
    BadNumber {
        /// Column where the number starts.
        position: usize,
    },
    /// A division whose divisor is zero.
    DivisionByZero {
        /// Column of the `/`.
        position: usize,
    },
    /// A number or result too large for exact arithmetic.
    Overflow,
    /// More than [`MAX_DEPTH`] nested parentheses or signs.
    TooDeep,
}

impl fmt::Display for CalcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "the expression is empty"),
            Self::Unexpected { found, position, expected } => {
                write!(f, "unexpected '{found}' at position {position}: expected {expected}")
            }
            Self::UnexpectedEnd { expected } => write!(f, "unexpected end of expression: expected {expected}"),
            Self::Unclosed { position } => write!(f, "'(' at position {position} is never closed"),
            Self::BadNumber { position } => {
                write!(f, "malformed number at position {position}: digits must follow '.'")
            }
            Self::DivisionByZero { position } => write!(f, "division by zero at position {position}"),
            Self::Overflow => write!(f, "a number or result is too large for exact arithmetic"),
            Self::TooDeep => write!(f, "the expression nests more than {MAX_DEPTH} levels deep"),
        }
    }
}

impl std::error::Error for CalcError {}

/// Receives what the parser saw: the number literals and the value of every operation.
/// The verifier uses it to know which numbers an agent typed and which values it computed.
pub trait Sink {
    /// A number literal as written (`2.5` arrives as 5/2).
    fn literal(&mut self, value: Rational);
    /// The value of one binary operation or negation.
    fn node(&mut self, value: Rational);
    /// A division of one literal by another (`7/3`), which may be a fraction copied from a
    /// result rather than a computation; reported instead of [`Sink::node`].
    fn fraction(&mut self, value: Rational, numerator: Rational, denominator: Rational);
}

impl Sink for () {
    fn literal(&mut self, _: Rational) {}
    fn node(&mut self, _: Rational) {}
    fn fraction(&mut self, _: Rational, _: Rational, _: Rational) {}
}

/// A [`Sink`] that keeps everything, in the order seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// The number literals.
    pub literals: Vec<Rational>,
    /// The value of every operation but literal fractions, in the order computed.
    pub nodes: Vec<Rational>,
    /// Literal fractions: (value, numerator, denominator).
    pub fractions: Vec<(Rational, Rational, Rational)>,
}

impl Sink for Trace {
    fn literal(&mut self, value: Rational) {
        self.literals.push(value);
    }
    fn node(&mut self, value: Rational) {
        self.nodes.push(value);
    }
    fn fraction(&mut self, value: Rational, numerator: Rational, denominator: Rational) {
        self.fractions.push((value, numerator, denominator));
    }
}

/// Evaluates `expr` exactly.
pub fn evaluate(expr: &str) -> Result<Rational, CalcError> {
    evaluate_with(expr, &mut ())
}

/// Evaluates `expr` exactly, reporting literals and operation values to `sink`.
pub fn evaluate_with<S: Sink>(expr: &str, sink: &mut S) -> Result<Rational, CalcError> {
    super::parser::parse(expr, sink)
}

/// What a call computes, for spotting repeats: its number literals (sorted) and its value. Two
/// calls with the same signature, like `12 + 5` and `5+12`, compute the same thing.
pub fn signature(expr: &str) -> Result<(Vec<Rational>, Rational), CalcError> {
    let mut trace = Trace::default();
    let value = evaluate_with(expr, &mut trace)?;
    let mut literals = trace.literals;
    literals.sort_by_key(|v| (v.numer(), v.denom()));
    Ok((literals, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn val(s: &str) -> String {
        evaluate(s).map(|v| v.to_string()).unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn hand_computed_goldens() {
        assert_eq!(val("2 + 3 * 4"), "14");
        assert_eq!(val("(2 + 3) * 4"), "20");
        assert_eq!(val("7/3"), "7/3");
        assert_eq!(val("2.5 * 4"), "10");
        assert_eq!(val("1/2 + 1/3 - 1/6"), "2/3");
        assert_eq!(val("-(-3) - -2"), "5");
        assert_eq!(val("100 / 8 / 5"), "5/2");
        assert_eq!(val("12 × (3 − 1) ÷ 8"), "3");
        assert_eq!(val("  .5+0.25 "), "3/4");
        assert_eq!(val("(7/3) / 4"), "7/12");
    }

    #[test]
    fn error_messages_say_what_and_where() {
        assert_eq!(
            val("12 + 5)"),
            "error: unexpected ')' at position 7: expected an operator or the end (no '(' is open)"
        );
        assert_eq!(val("(12 + 5"), "error: '(' at position 1 is never closed");
        assert_eq!(val("12 +"), "error: unexpected end of expression: expected a number or '('");
        assert_eq!(val("3 / (2 - 2)"), "error: division by zero at position 3");
        assert_eq!(val("2 (3)"), "error: unexpected '(' at position 3: expected an operator (+ - * /) or the end");
        assert_eq!(val("é + 1"), "error: unexpected 'é' at position 1: expected a number or '('");
        assert_eq!(val("1 + x"), "error: unexpected 'x' at position 5: expected a number or '('");
        assert_eq!(val("2. + 1"), "error: malformed number at position 1: digits must follow '.'");
        assert_eq!(val("   "), "error: the expression is empty");
        assert_eq!(val("(1 2)"), "error: unexpected '2' at position 4: expected an operator or ')'");
    }

    #[test]
    fn huge_or_deep_input_is_an_error_not_a_crash() {
        assert_eq!(evaluate(&"9".repeat(60)), Err(CalcError::Overflow));
        assert_eq!(evaluate(&format!("{0} * {0} * {0}", "9".repeat(30))), Err(CalcError::Overflow));
        assert_eq!(evaluate(&"(".repeat(10_000)), Err(CalcError::TooDeep));
        assert_eq!(evaluate(&"-".repeat(10_000)), Err(CalcError::TooDeep));
        assert_eq!(val(&format!("{}1{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH))), "1");
    }

    #[test]
    fn the_trace_holds_literals_and_operation_values() {
        let mut t = Trace::default();
        assert_eq!(evaluate_with("(12 + 5) * 2.5", &mut t), Ok(Rational::new(85, 2).unwrap()));
        assert_eq!(t.literals, [Rational::int(12), Rational::int(5), Rational::new(5, 2).unwrap()]);
        assert_eq!(t.nodes, [Rational::int(17), Rational::new(85, 2).unwrap()]);
        let mut t = Trace::default();
        let third = Rational::new(7, 3).unwrap();
        assert_eq!(evaluate_with("7/3 * 3 + (6) / 2", &mut t), Ok(Rational::int(10)));
        assert_eq!(t.fractions, [(third, Rational::int(7), Rational::int(3))]);
        assert_eq!(t.nodes, [Rational::int(7), Rational::int(3), Rational::int(10)]);
    }
}
