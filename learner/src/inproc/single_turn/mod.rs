//! Single-turn GRPO in process: a prompt, one completion, a reward read from the completion —
//! the like-for-like counterpart of TRL's GRPOTrainer that `reagent bench trl` runs beside it on
//! the same random tiny Qwen2.
//!
//! ```text
//!  task.rs     reverse-a-word prompts and their reward (re-implemented in scripts/trl_grpo.py)
//!  model.rs    the shared model directory both sides load (config.json + safetensors + tokenizer)
//!  trainer.rs  sample group_size completions per prompt ─ reward ─ one GRPO update
//! ```

pub mod model;
pub mod task;
pub mod trainer;

pub use model::{shared_model_config, write_shared_model, SHARED_MODEL_PARAMETERS};
pub use task::{draw_tasks, parity_cases, reward, ReverseTask};
pub use trainer::{SingleTurnConfig, SingleTurnTrainer, StepStats};
