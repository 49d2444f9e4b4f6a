//! The reference judge's score: deterministic, in [0, 1], from the replayed outcome and the
//! step verifier's findings.
//!
//! ```text
//!  quality = Π over findings (1 − weight(kind))          1.0 when there is no finding
//!  score   = 0.5 + 0.5 · quality   when the replay solved the task
//!          = 0.5 · quality         when it did not
//! ```
//!
//! So a solved task always scores at least a failed one (a right answer by another route, which
//! the math verifier flags as off-route steps, still ranks above a wrong answer), a flawless
//! solution scores exactly 1, and every further finding lowers the score.

use protocol::wire::{Finding, FindingKind};

/// How much one finding of `kind` takes off the quality (a factor `1 − weight`).
pub fn weight(kind: FindingKind) -> f32 {
    match kind {
        FindingKind::GaveUpEarly => 0.4,
        FindingKind::WrongAnswer => 0.3,
        FindingKind::Fabrication | FindingKind::Contradiction => 0.25,
        FindingKind::UnsupportedAnswer => 0.2,
        FindingKind::SkippedStep => 0.15,
        FindingKind::WrongArguments | FindingKind::WrongTool | FindingKind::FormatError => 0.1,
        FindingKind::RedundantCall => 0.05,
    }
}

/// The process quality in (0, 1]: the product of `1 − weight` over the findings.
pub fn quality(findings: &[Finding]) -> f32 {
    findings.iter().map(|f| 1.0 - weight(f.kind)).product()
}

/// The score, rounded to three decimals.
pub fn score(solved: bool, findings: &[Finding]) -> f32 {
    let q = quality(findings);
    let raw = if solved { 0.5 + 0.5 * q } else { 0.5 * q };
    ((raw * 1000.0).round() / 1000.0).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(kind: FindingKind) -> Finding {
        Finding::new(0, kind, "")
    }

    #[test]
    fn flawless_success_is_one_and_findings_lower_it() {
        assert_eq!(score(true, &[]), 1.0);
        assert_eq!(score(true, &[f(FindingKind::RedundantCall)]), 0.975);
        assert_eq!(score(false, &[]), 0.5);
        assert_eq!(score(false, &[f(FindingKind::WrongAnswer)]), 0.35);
        assert_eq!(score(false, &[f(FindingKind::GaveUpEarly)]), 0.3);
    }

    #[test]
    fn a_solved_task_ranks_above_any_failure() {
        let many: Vec<Finding> = (0..40).map(|_| f(FindingKind::Fabrication)).collect();
        assert!(score(true, &many) >= score(false, &[]), "solved: at least 0.5; failed: at most 0.5");
        assert!(score(true, &many[..3]) > score(false, &[]));
        assert!(score(false, &many) >= 0.0 && score(false, &many) < score(false, &many[..1]));
    }
}
