//! The recursive-descent parser behind [`calc`](super::calc): one method per grammar rule,
//! evaluating exactly as it goes and reporting to a [`Sink`]; see `calc` for the grammar.

use super::calc::{CalcError, Sink, MAX_DEPTH};
use super::rational::{parse_number, ArithError, NumberError, Rational};

/// Parses and evaluates the whole of `expr`.
pub(super) fn parse<S: Sink>(expr: &str, sink: &mut S) -> Result<Rational, CalcError> {
    let mut p = Parser { src: expr, pos: 0, depth: 0, bare: false, sink };
    p.skip_spaces();
    if p.peek().is_none() {
        return Err(CalcError::Empty);
    }
    let value = p.expr()?;
    match p.peek() {
        None => Ok(value),
        Some(')') => Err(p.unexpected(')', "an operator or the end (no '(' is open)")),
        Some(c) => Err(p.unexpected(c, "an operator (+ - * /) or the end")),
    }
}

struct Parser<'a, S> {
    src: &'a str,
    pos: usize,
    depth: usize,
    /// Whether the operand just parsed was a lone number literal.
    bare: bool,
    sink: &'a mut S,
}

fn arith(e: ArithError, position: usize) -> CalcError {
    match e {
        ArithError::Overflow => CalcError::Overflow,
        ArithError::DivisionByZero => CalcError::DivisionByZero { position },
    }
}

impl<S: Sink> Parser<'_, S> {
    /// The next non-space character, with `×`, `÷` and `−` read as ASCII operators.
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next().map(|c| match c {
            '×' => '*',
            '÷' => '/',
            '−' => '-',
            c => c,
        })
    }

    fn bump(&mut self) {
        if let Some(c) = self.src[self.pos..].chars().next() {
            self.pos += c.len_utf8();
        }
        self.skip_spaces();
    }

    fn skip_spaces(&mut self) {
        let rest = &self.src[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn column(&self, byte: usize) -> usize {
        self.src[..byte].chars().count() + 1
    }

    fn unexpected(&self, found: char, expected: &'static str) -> CalcError {
        CalcError::Unexpected { found, position: self.column(self.pos), expected }
    }

    fn enter(&mut self) -> Result<(), CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(CalcError::TooDeep);
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Rational, CalcError> {
        let mut value = self.term()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            let at = self.pos;
            self.bump();
            let rhs = self.term()?;
            value = if op == '+' { value.checked_add(rhs) } else { value.checked_sub(rhs) }
                .map_err(|e| arith(e, self.column(at)))?;
            self.sink.node(value);
            self.bare = false;
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<Rational, CalcError> {
        let mut value = self.unary()?;
        while let Some(op @ ('*' | '/')) = self.peek() {
            let (at, lhs, lhs_bare) = (self.pos, value, self.bare);
            self.bump();
            let rhs = self.unary()?;
            value = if op == '*' { value.checked_mul(rhs) } else { value.checked_div(rhs) }
                .map_err(|e| arith(e, self.column(at)))?;
            if op == '/' && lhs_bare && self.bare {
                self.sink.fraction(value, lhs, rhs);
            } else {
                self.sink.node(value);
            }
            self.bare = false;
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<Rational, CalcError> {
        match self.peek() {
            Some(sign @ ('-' | '+')) => {
                self.enter()?;
                self.bump();
                let inner = self.unary()?;
                self.depth -= 1;
                if sign == '+' {
                    return Ok(inner);
                }
                let value = inner.checked_neg().map_err(|_| CalcError::Overflow)?;
                self.sink.node(value);
                self.bare = false;
                Ok(value)
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Rational, CalcError> {
        const OPERAND: &str = "a number or '('";
        match self.peek() {
            None => Err(CalcError::UnexpectedEnd { expected: OPERAND }),
            Some('(') => {
                let open = self.pos;
                self.enter()?;
                self.bump();
                let value = self.expr()?;
                match self.peek() {
                    Some(')') => self.bump(),
                    None => return Err(CalcError::Unclosed { position: self.column(open) }),
                    Some(c) => return Err(self.unexpected(c, "an operator or ')'")),
                }
                self.depth -= 1;
                self.bare = false;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.pos;
                let (value, end) = parse_number(self.src.as_bytes(), start).map_err(|e| match e {
                    NumberError::TooLarge => CalcError::Overflow,
                    NumberError::MissingDigits => CalcError::BadNumber { position: self.column(start) },
                })?;
                self.pos = end;
                self.skip_spaces();
                self.sink.literal(value);
                self.bare = true;
                Ok(value)
            }
            Some(c) => Err(self.unexpected(c, OPERAND)),
        }
    }
}
