//! RRM scoring workers for Reagent (docs/architecture.md section 3, "The judge"): the [`Judge`] trait, the
//! reference judge built on the environments' step verifiers, the OpenAI-compatible judge, the
//! worker loop that forwards scored trajectories, and the role entry point.
//!
//! ```text
//!  {run}:rollouts ──group "rrm"──► Worker ──judge (per run.feedback)──► Judge
//!                                    │                                   ├─ ReferenceJudge (verify + replay)
//!                                    │                                   └─ OpenAiJudge (/v1/chat/completions)
//!                                    ├─ critique reply (initial attempts refined, modes that refine)
//!                                    └─ forward [XADD {run}:scored + XACK] ──► learner
//! ```

pub mod config;
pub mod error;
pub mod judge;
pub mod openai;
pub mod output;
pub mod reference;
pub mod role;
pub mod worker;

pub use config::{JudgeKind, PromptFormat, RrmConfig};
pub use error::{JudgeError, RrmError};
pub use judge::{build, Judge, JudgeFuture};
pub use openai::{OpenAiJudge, OpenAiSettings};
/// The judgement a judge returns, re-exported for its users.
pub use protocol::wire::Judgement;
pub use reference::ReferenceJudge;
pub use role::run_role;
pub use worker::{Plan, Worker, WorkerSettings, WorkerStats};
