//! The model the end-to-end runs start from: the committed SFT fixture of the learner crate
//! (learner/fixtures/micro-math-sft, made by scripts/make_micro_sft_fixture.sh: the `micro`
//! model after 3,000 cold-start updates on difficulty-1 `math`, solving about 69 % of held-out
//! tasks greedily — enough for RL to have a signal, with room to rise).

use std::path::PathBuf;

/// The fixture's model directory (config.json + model.safetensors).
pub fn sft_model() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../learner/fixtures/micro-math-sft"))
}
