//! Word problems from a seed: a person starts with an amount of something and a story of
//! events changes it; the question is how much is left. Each event is one or two arithmetic
//! operations, so the reference solution is one `calc` per operation in story order.
//!
//! | difficulty | operations | numbers up to | multipliers | divisions                         | decimals |
//! |---|---|---|---|---|---|
//! | 1 | 2      | 20   | 2–5  | 2–5, always exact                 | no |
//! | 2 | 3–4    | 100  | 2–9  | 2–9, a fraction about 1 time in 3 | no |
//! | 3 | 5–6    | 1000 | 2–12 | 2–12, a fraction about 1 time in 2 | amounts like 12.5 or 3.75, 1 time in 4 |
//!
//! Amounts never go to zero or below; every value is exact (see [`Rational`]).

use super::calc::signature;
use super::rational::{parse_number, Rational};
use super::tables::{Level, Theme, LEVELS, NAMES, THEMES};
use crate::rng::Rng;

/// A generated problem: the text, the reference computation and the truth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// The problem as the agent reads it (the first user message).
    pub text: String,
    /// The reference solution: one calculator step per operation, in story order.
    pub steps: Vec<Step>,
    /// The exact answer.
    pub answer: Rational,
    /// Every number written in `text`, in order.
    pub numbers: Vec<Rational>,
}

/// One operation of the reference solution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The `calc` argument, using only numbers from the problem or earlier results.
    pub expression: String,
    /// Its exact value.
    pub value: Rational,
}

/// An amount as written in the text and its value.
#[derive(Clone)]
struct Amount {
    text: String,
    value: Rational,
}

impl Amount {
    fn int(n: i64) -> Self {
        Self { text: n.to_string(), value: Rational::int(i128::from(n)) }
    }
}

struct Builder<'a> {
    rng: Rng,
    level: &'a Level,
    name: &'static str,
    theme: &'static Theme,
    current: Rational,
    sentences: Vec<String>,
    steps: Vec<Step>,
}

/// The problem for `seed` at `difficulty` (clamped to 1..=3).
pub fn generate(seed: u64, difficulty: u32) -> Task {
    const SALT: u64 = 0x6D61_7468; // "math"
    let difficulty = difficulty.clamp(1, 3);
    let level = &LEVELS[difficulty as usize - 1];
    let mut rng = Rng::new(seed, SALT + u64::from(difficulty));
    let name = *rng.pick(&NAMES);
    let theme = rng.pick(&THEMES);
    let start = rng.range(2, level.magnitude);
    let ops = rng.range(level.ops.0, level.ops.1) as usize;
    let mut b = Builder {
        rng,
        level,
        name,
        theme,
        current: Rational::int(i128::from(start)),
        sentences: vec![format!("{name} has {start} {}.", theme.unit)],
        steps: Vec::new(),
    };
    while b.steps.len() < ops {
        let two_allowed = ops - b.steps.len() >= 2;
        b.event(two_allowed);
    }
    b.sentences.push(format!("How many {} does {name} have now?", theme.unit));
    let text = b.sentences.join(" ");
    Task { numbers: numbers_in(&text), answer: b.current, steps: b.steps, text }
}

/// Every unsigned number written in `text` (`12`, `2.5`), in order.
pub fn numbers_in(text: &str) -> Vec<Rational> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit());
        if starts {
            // A sentence-ending full stop after a number is not a decimal point.
            let end = match parse_number(bytes, i) {
                Ok((value, end)) => {
                    out.push(value);
                    end
                }
                Err(_) => match parse_number(&bytes[..dot_or_end(bytes, i)], i) {
                    Ok((value, end)) => {
                        out.push(value);
                        end
                    }
                    Err(_) => i + 1,
                },
            };
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

fn dot_or_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..].iter().position(|b| *b == b'.').map_or(bytes.len(), |p| from + p)
}

impl Builder<'_> {
    /// A whole amount in `min..=max`, now and then (difficulty 3) with .25, .5 or .75 added.
    fn amount_from(&mut self, min: i64, max: i64) -> Amount {
        let whole = self.rng.range(min, max.max(min));
        if self.rng.unit() < self.level.decimal_chance {
            let (text, quarters) = *self.rng.pick(&[("5", 2), ("25", 1), ("75", 3)]);
            let value = Rational::new(i128::from(whole) * 4 + quarters, 4).unwrap_or(Rational::ONE);
            return Amount { text: format!("{whole}.{text}"), value };
        }
        Amount::int(whole)
    }

    /// Appends one event (two operations only when `two_allowed`).
    fn event(&mut self, two_allowed: bool) {
        for _ in 0..64 {
            let mark = (self.steps.len(), self.sentences.len(), self.current);
            let done = match self.rng.below(if two_allowed { 6 } else { 4 }) {
                0 => self.add(),
                1 => self.subtract(),
                2 => self.multiply(),
                3 => self.divide(),
                4 => self.gain_groups(),
                _ => self.give_groups(),
            };
            if done && !self.repeats_from(mark.0) {
                return;
            }
            if done {
                self.steps.truncate(mark.0);
                self.sentences.truncate(mark.1);
                self.current = mark.2;
            }
        }
        self.add();
    }

    /// Whether a step from `first` on computes what an earlier step did (the same numbers and
    /// value, see [`signature`]): the reference would then hold a redundant call.
    fn repeats_from(&self, first: usize) -> bool {
        let signatures: Vec<_> = self.steps.iter().map(|s| signature(&s.expression).ok()).collect();
        (first..signatures.len()).any(|i| signatures[..i].contains(&signatures[i]))
    }

    fn op(&mut self, symbol: char, rhs: &Amount) -> Rational {
        let lhs = if self.current.is_integer() { self.current.to_string() } else { format!("({})", self.current) };
        let value = match symbol {
            '+' => self.current.checked_add(rhs.value),
            '-' => self.current.checked_sub(rhs.value),
            '*' => self.current.checked_mul(rhs.value),
            _ => self.current.checked_div(rhs.value),
        }
        .unwrap_or(self.current);
        self.steps.push(Step { expression: format!("{lhs} {symbol} {}", rhs.text), value });
        self.current = value;
        value
    }

    fn add(&mut self) -> bool {
        let k = self.amount_from(2, self.level.magnitude);
        let (name, t) = (self.name, self.theme);
        let s = if self.rng.below(2) == 0 {
            format!("Then {name} {} {} more {}.", t.gain, k.text, t.unit)
        } else {
            format!("Next, {name} {} another {} {}.", t.gain, k.text, t.unit)
        };
        self.sentences.push(s);
        self.op('+', &k);
        true
    }

    fn subtract(&mut self) -> bool {
        let room = floor(self.current) - 1;
        if room < 2 {
            return false;
        }
        let k = self.amount_from(2, room.min(self.level.magnitude as i128) as i64);
        if !self.current.checked_sub(k.value).is_ok_and(|left| left.numer() > 0) {
            return false;
        }
        let (name, t) = (self.name, self.theme);
        let lead = if self.rng.below(2) == 0 { "After that, " } else { "" };
        self.sentences.push(format!("{lead}{name} {} {} {}.", t.loss, k.text, t.unit));
        self.op('-', &k);
        true
    }

    fn multiply(&mut self) -> bool {
        let k = Amount::int(self.rng.range(2, self.level.multiplier));
        let name = self.name;
        self.sentences.push(if self.rng.below(2) == 0 {
            format!("Then the amount {name} has becomes {} times as large.", k.text)
        } else {
            format!("{name}'s amount then grows to {} times what it was.", k.text)
        });
        self.op('*', &k);
        true
    }

    fn divide(&mut self) -> bool {
        let fraction = self.rng.unit() < self.level.fraction_chance;
        let divisors: Vec<i64> = (2..=self.level.divisor)
            .filter(|d| fraction || (self.current.is_integer() && self.current.numer() % i128::from(*d) == 0))
            .collect();
        if divisors.is_empty() {
            return false;
        }
        let k = Amount::int(*self.rng.pick(&divisors));
        let name = self.name;
        self.sentences.push(if self.rng.below(2) == 0 {
            format!("{name} divides everything into {} equal parts and keeps just one part.", k.text)
        } else {
            format!("Then {name} shares it all equally among {} people, {name} included, and keeps one share.", k.text)
        });
        self.op('/', &k);
        true
    }

    fn groups(&mut self) -> (Amount, Amount) {
        let count = Amount::int(self.rng.range(2, 9.min(self.level.magnitude / 2)));
        let each = self.amount_from(2, (self.level.magnitude / 4).max(5));
        (count, each)
    }

    fn gain_groups(&mut self) -> bool {
        let (count, each) = self.groups();
        let t = self.theme;
        self.sentences.push(format!(
            "{} then gets {} {} holding {} {} each.",
            self.name, count.text, t.container, each.text, t.unit
        ));
        self.group_total(&count, &each, '+');
        true
    }

    fn give_groups(&mut self) -> bool {
        let (count, each) = self.groups();
        let left = count.value.checked_mul(each.value).and_then(|total| self.current.checked_sub(total));
        if !left.is_ok_and(|left| left.numer() > 0) {
            return false;
        }
        let t = self.theme;
        self.sentences.push(format!(
            "{} fills {} {} with {} {} each and gives them away.",
            self.name, count.text, t.container, each.text, t.unit
        ));
        self.group_total(&count, &each, '-');
        true
    }

    /// `count * each`, then that total added to or taken from the amount.
    fn group_total(&mut self, count: &Amount, each: &Amount, symbol: char) {
        let total = count.value.checked_mul(each.value).unwrap_or(Rational::ONE);
        self.steps.push(Step { expression: format!("{} * {}", count.text, each.text), value: total });
        let as_amount = Amount { text: total.to_string(), value: total };
        let as_amount = if total.is_integer() { as_amount } else { Amount { text: format!("({total})"), ..as_amount } };
        self.op(symbol, &as_amount);
    }
}

/// The largest whole number not above `r` (amounts are positive).
fn floor(r: Rational) -> i128 {
    r.numer().div_euclid(r.denom())
}
