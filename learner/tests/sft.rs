//! Supervised cold start (issue 4): settings. The suite's short SFT run — the agent-token loss
//! falls, held-out tasks the untrained model cannot solve (it solves none: `episode::tests`) are
//! solved, the checkpoint loads and plays alike — is the first half of `tests/inproc.rs`, which
//! then trains with GRPO from it. The full-length experiment (five minutes of `tiny`, greedy
//! success on held-out difficulty-1 `math`) is `reagent sft --size tiny`; its figures are in
//! BENCHMARKS.md.

use learner::sft::{ExperimentSize, SftConfig};

#[test]
fn bad_settings_name_their_key() {
    let base = SftConfig::experiment(ExperimentSize::Tiny);
    let err = SftConfig { batch_size: 0, ..base.clone() }.validate().unwrap_err().to_string();
    assert!(err.contains("sft.batch_size"), "{err}");
    let err = SftConfig { difficulties: vec![4], ..base.clone() }.validate().unwrap_err().to_string();
    assert!(err.contains("sft.difficulties"), "{err}");
    let err = SftConfig { lr: f64::NAN, ..base }.validate().unwrap_err().to_string();
    assert!(err.contains("sft.lr"), "{err}");
}
