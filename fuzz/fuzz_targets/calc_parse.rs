//! The math family's calculator (`calc` tool) on arbitrary expressions.
//!
//! Properties: evaluation never panics (no overflow, no division by zero, no deep recursion);
//! an expression that has a value has the same value in parentheses, and its value written out
//! evaluates to itself.

#![no_main]

use env_workers::families::math::calc::evaluate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|expr: &str| {
    let _ = env_workers::families::math::calc::signature(expr);
    let Ok(value) = evaluate(expr) else { return };
    assert_eq!(evaluate(&format!("({expr})")), Ok(value), "parentheses changed {expr:?}");
    let written = value.to_string();
    assert_eq!(evaluate(&written), Ok(value), "{written:?} (the value of {expr:?}) does not evaluate to itself");
});
