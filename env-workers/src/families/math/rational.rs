//! Exact rational numbers over `i128` for the math family: always normalised (denominator
//! positive, numerator and denominator coprime), every operation checked, so overflow is an
//! error value and never a panic or a silently wrong answer.
//!
//! Numbers are written as integers (`7`, `-3`), exact decimals (`2.5` = 5/2) or, for answers,
//! fractions (`-3/4`, `14/2`); they print as an integer when whole and as `a/b` otherwise.

use std::fmt;

/// Why an arithmetic operation has no exact `i128` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithError {
    /// A numerator or denominator went past `i128`.
    Overflow,
    /// Division by zero.
    DivisionByZero,
}

/// An exact rational: `num / den` with `den > 0` and `gcd(|num|, den) == 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rational {
    num: i128,
    den: i128,
}

fn gcd(a: i128, b: i128) -> u128 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `a / g` where `g` divides `a` and `g >= 1` (as `u128`, which may not fit `i128` only when
/// it is 2^127, i.e. `a == i128::MIN`).
fn div_exact(a: i128, g: u128) -> Result<i128, ArithError> {
    match i128::try_from(g) {
        Ok(g) => a.checked_div(g).ok_or(ArithError::Overflow),
        Err(_) => Ok(if a < 0 { -1 } else { 1 }),
    }
}

impl Rational {
    /// Zero.
    pub const ZERO: Self = Self { num: 0, den: 1 };
    /// One.
    pub const ONE: Self = Self { num: 1, den: 1 };

    /// The whole number `n`.
    pub const fn int(n: i128) -> Self {
        Self { num: n, den: 1 }
    }

    /// `num / den`, normalised; an error for a zero denominator or a value `i128` cannot hold.
    pub fn new(num: i128, den: i128) -> Result<Self, ArithError> {
        if den == 0 {
            return Err(ArithError::DivisionByZero);
        }
        let g = gcd(num, den).max(1);
        let (mut num, mut den) = (div_exact(num, g)?, div_exact(den, g)?);
        if den < 0 {
            num = num.checked_neg().ok_or(ArithError::Overflow)?;
            den = den.checked_neg().ok_or(ArithError::Overflow)?;
        }
        Ok(Self { num, den })
    }

    /// The numerator (carries the sign).
    pub fn numer(self) -> i128 {
        self.num
    }

    /// The denominator (always positive).
    pub fn denom(self) -> i128 {
        self.den
    }

    /// Whether this is a whole number.
    pub fn is_integer(self) -> bool {
        self.den == 1
    }

    /// `-self`.
    pub fn checked_neg(self) -> Result<Self, ArithError> {
        Ok(Self { num: self.num.checked_neg().ok_or(ArithError::Overflow)?, den: self.den })
    }

    /// `self + other`.
    pub fn checked_add(self, other: Self) -> Result<Self, ArithError> {
        let g = i128::try_from(gcd(self.den, other.den)).map_err(|_| ArithError::Overflow)?;
        let (ld, rd) = (self.den / g, other.den / g);
        let a = self.num.checked_mul(rd).ok_or(ArithError::Overflow)?;
        let b = other.num.checked_mul(ld).ok_or(ArithError::Overflow)?;
        let num = a.checked_add(b).ok_or(ArithError::Overflow)?;
        let den = self.den.checked_mul(rd).ok_or(ArithError::Overflow)?;
        Self::new(num, den)
    }

    /// `self - other`.
    pub fn checked_sub(self, other: Self) -> Result<Self, ArithError> {
        self.checked_add(other.checked_neg()?)
    }

    /// `self * other`, cross-reducing first so that intermediate products stay small.
    pub fn checked_mul(self, other: Self) -> Result<Self, ArithError> {
        let g1 = gcd(self.num, other.den).max(1);
        let g2 = gcd(other.num, self.den).max(1);
        let num = div_exact(self.num, g1)?.checked_mul(div_exact(other.num, g2)?).ok_or(ArithError::Overflow)?;
        let den = div_exact(self.den, g2)?.checked_mul(div_exact(other.den, g1)?).ok_or(ArithError::Overflow)?;
        Self::new(num, den)
    }

    /// `self / other`.
    pub fn checked_div(self, other: Self) -> Result<Self, ArithError> {
        if other.num == 0 {
            return Err(ArithError::DivisionByZero);
        }
        self.checked_mul(Self::new(other.den, other.num)?)
    }

    /// Parses an answer: optional sign, a number, optionally `/` and a second number, with
    /// surrounding spaces allowed: `7`, ` 7.0 `, `14/2`, `-3/4`, `2.5`. `None` when it is not one.
    pub fn parse_answer(text: &str) -> Option<Self> {
        let s = text.trim().as_bytes();
        let (negative, mut i) = match s.first() {
            Some(b'-') => (true, 1),
            Some(b'+') => (false, 1),
            _ => (false, 0),
        };
        let (mut value, end) = parse_number(s, i).ok()?;
        i = end;
        if s.get(i) == Some(&b'/') {
            let (den, end) = parse_number(s, i + 1).ok()?;
            value = value.checked_div(den).ok()?;
            i = end;
        }
        if i != s.len() {
            return None;
        }
        if negative {
            value = value.checked_neg().ok()?;
        }
        Some(value)
    }
}

/// Why the text at some position is not a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberError {
    /// No digit where a number should start, or none after the decimal point.
    MissingDigits,
    /// More digits than an exact `i128` rational holds.
    TooLarge,
}

/// Parses an unsigned integer or exact decimal (`12`, `2.5`, `.5`) starting at byte `start`;
/// returns its value and the byte just after it.
pub fn parse_number(s: &[u8], start: usize) -> Result<(Rational, usize), NumberError> {
    let mut i = start;
    let mut num: i128 = 0;
    let mut digits = 0usize;
    while let Some(d) = s.get(i).filter(|b| b.is_ascii_digit()) {
        num = num.checked_mul(10).and_then(|n| n.checked_add(i128::from(d - b'0'))).ok_or(NumberError::TooLarge)?;
        digits += 1;
        i += 1;
    }
    let mut den: i128 = 1;
    if s.get(i) == Some(&b'.') {
        i += 1;
        let mut decimals = 0usize;
        while let Some(d) = s.get(i).filter(|b| b.is_ascii_digit()) {
            num = num.checked_mul(10).and_then(|n| n.checked_add(i128::from(d - b'0'))).ok_or(NumberError::TooLarge)?;
            den = den.checked_mul(10).ok_or(NumberError::TooLarge)?;
            decimals += 1;
            i += 1;
        }
        if decimals == 0 {
            return Err(NumberError::MissingDigits);
        }
        digits += decimals;
    }
    if digits == 0 {
        return Err(NumberError::MissingDigits);
    }
    let value = Rational::new(num, den).map_err(|_| NumberError::TooLarge)?;
    Ok((value, i))
}

impl fmt::Display for Rational {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(n: i128, d: i128) -> Rational {
        Rational::new(n, d).unwrap()
    }

    #[test]
    fn normalises_sign_and_common_factors() {
        assert_eq!(r(14, 2), Rational::int(7));
        assert_eq!(r(3, -4), r(-3, 4));
        assert_eq!((r(-6, -8).numer(), r(-6, -8).denom()), (3, 4));
        assert_eq!(r(0, -5), Rational::ZERO);
        assert_eq!(Rational::new(1, 0), Err(ArithError::DivisionByZero));
        assert_eq!(r(i128::MIN, i128::MIN), Rational::ONE);
        assert_eq!(Rational::new(1, i128::MIN), Err(ArithError::Overflow));
    }

    #[test]
    fn arithmetic_is_exact() {
        // 1/6 + 1/3 = 1/2; 2/3 * 9/4 = 3/2; (5/2) / (5/4) = 2; 1/2 - 3/4 = -1/4
        assert_eq!(r(1, 6).checked_add(r(1, 3)), Ok(r(1, 2)));
        assert_eq!(r(2, 3).checked_mul(r(9, 4)), Ok(r(3, 2)));
        assert_eq!(r(5, 2).checked_div(r(5, 4)), Ok(Rational::int(2)));
        assert_eq!(r(1, 2).checked_sub(r(3, 4)), Ok(r(-1, 4)));
        assert_eq!(Rational::ONE.checked_div(Rational::ZERO), Err(ArithError::DivisionByZero));
    }

    #[test]
    fn overflow_is_an_error_not_a_panic() {
        let big = Rational::int(i128::MAX);
        assert_eq!(big.checked_add(Rational::ONE), Err(ArithError::Overflow));
        assert_eq!(big.checked_mul(Rational::int(2)), Err(ArithError::Overflow));
        assert_eq!(Rational::int(i128::MIN).checked_neg(), Err(ArithError::Overflow));
        assert_eq!(r(1, i128::MAX).checked_add(r(1, i128::MAX - 1)), Err(ArithError::Overflow));
        assert!(Rational::int(i128::MIN).checked_div(Rational::int(-1)).is_err());
    }

    #[test]
    fn parses_answers_in_the_accepted_forms() {
        for (text, want) in [("7", r(7, 1)), ("7.0", r(7, 1)), ("14/2", r(7, 1)), ("-3/4", r(-3, 4)), (" 7 ", r(7, 1))]
        {
            assert_eq!(Rational::parse_answer(text), Some(want), "{text}");
        }
        assert_eq!(Rational::parse_answer("2.5"), Some(r(5, 2)));
        assert_eq!(Rational::parse_answer("+.5"), Some(r(1, 2)));
        for bad in ["", "-", "7 liters", "1/0", "3/", "1,000", "2.", "seven", "1/2/3", "--1"] {
            assert_eq!(Rational::parse_answer(bad), None, "{bad:?}");
        }
        assert_eq!(Rational::parse_answer("99999999999999999999999999999999999999999999"), None);
    }

    #[test]
    fn prints_integers_plainly_and_fractions_as_a_over_b() {
        assert_eq!(r(7, 1).to_string(), "7");
        assert_eq!(r(-6, 8).to_string(), "-3/4");
        assert_eq!(r(5, 2).to_string(), "5/2");
    }
}
