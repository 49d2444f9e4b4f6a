//! The calculator against random expression trees evaluated directly with [`Rational`]:
//! rendered with minimal or with full parentheses, the parser gives the same value or error.

use env_workers::families::math::calc::{evaluate, CalcError};
use env_workers::families::math::Rational;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Tree {
    Num(i128, Option<u8>),
    Neg(Box<Tree>),
    Bin(char, Box<Tree>, Box<Tree>),
}

impl Tree {
    fn value(&self) -> Result<Rational, CalcError> {
        let arith = |r: Result<Rational, _>| r.map_err(|_| CalcError::Overflow);
        match self {
            Tree::Num(n, None) => Ok(Rational::int(*n)),
            Tree::Num(n, Some(d)) => arith(Rational::new(n * 100 + i128::from(*d), 100)),
            Tree::Neg(t) => arith(t.value()?.checked_neg()),
            Tree::Bin(op, l, r) => {
                let (l, r) = (l.value()?, r.value()?);
                match op {
                    '+' => arith(l.checked_add(r)),
                    '-' => arith(l.checked_sub(r)),
                    '*' => arith(l.checked_mul(r)),
                    _ if r == Rational::ZERO => Err(CalcError::DivisionByZero { position: 0 }),
                    _ => arith(l.checked_div(r)),
                }
            }
        }
    }

    fn precedence(&self) -> u8 {
        match self {
            Tree::Bin('+' | '-', ..) => 1,
            Tree::Bin(..) => 2,
            Tree::Neg(_) => 3,
            Tree::Num(..) => 4,
        }
    }

    /// With only the parentheses precedence and left associativity need, or all of them.
    fn render(&self, all_parens: bool) -> String {
        let wrap = |t: &Tree, need: bool| {
            if need || (all_parens && t.precedence() < 4) {
                format!("({})", t.render(all_parens))
            } else {
                t.render(all_parens)
            }
        };
        match self {
            Tree::Num(n, None) => n.to_string(),
            Tree::Num(n, Some(d)) => format!("{n}.{d:02}"),
            Tree::Neg(t) => format!("-{}", wrap(t, t.precedence() < 3)),
            Tree::Bin(op, l, r) => {
                let p = self.precedence();
                format!("{} {op} {}", wrap(l, l.precedence() < p), wrap(r, r.precedence() <= p))
            }
        }
    }
}

fn tree() -> impl Strategy<Value = Tree> {
    let leaf = prop_oneof![
        (0i128..50).prop_map(|n| Tree::Num(n, None)),
        (0i128..1_000_000_000_000).prop_map(|n| Tree::Num(n, None)),
        (0i128..100, 0u8..100).prop_map(|(n, d)| Tree::Num(n, Some(d))),
    ];
    leaf.prop_recursive(6, 48, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|t| Tree::Neg(Box::new(t))),
            (prop::sample::select(vec!['+', '-', '*', '/']), inner.clone(), inner).prop_map(|(op, l, r)| Tree::Bin(
                op,
                Box::new(l),
                Box::new(r)
            )),
        ]
    })
}

fn same_outcome(parsed: Result<Rational, CalcError>, direct: &Result<Rational, CalcError>) -> bool {
    match (parsed, direct) {
        (Ok(a), Ok(b)) => a == *b,
        (Err(CalcError::DivisionByZero { .. }), Err(CalcError::DivisionByZero { .. })) => true,
        (Err(CalcError::Overflow), Err(CalcError::Overflow)) => true,
        _ => false,
    }
}

proptest! {
    #[test]
    fn the_parser_agrees_with_the_tree(t in tree()) {
        let direct = t.value();
        for text in [t.render(false), t.render(true)] {
            let parsed = evaluate(&text);
            prop_assert!(same_outcome(parsed, &direct), "{text}: parsed {parsed:?}, direct {direct:?}");
        }
    }
}
