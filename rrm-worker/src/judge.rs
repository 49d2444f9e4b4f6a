//! The [`Judge`] trait every RRM backend implements, and [`build`], which picks the backend the
//! configuration names.
//!
//! ```text
//!  Trajectory (whole multi-turn episode) ──judge()──► Judgement { trace, critique, score ∈ [0,1] }
//!                                                └──► JudgeError (the worker records Verdict::Failed)
//! ```
//!
//! The trait is object-safe: `judge` returns a boxed future, so a worker holds an
//! `Arc<dyn Judge>` without knowing the backend.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use protocol::config::ReagentConfig;
use protocol::wire::{Judgement, Trajectory};

use crate::config::{JudgeKind, RrmConfig};
use crate::error::{JudgeError, RrmError};
use crate::openai::OpenAiJudge;
use crate::reference::ReferenceJudge;

/// What [`Judge::judge`] returns: a boxed, sendable future.
pub type JudgeFuture<'a> = Pin<Box<dyn Future<Output = Result<Judgement, JudgeError>> + Send + 'a>>;

/// A reasoning reward model: judges a whole trajectory, giving a reasoning trace, a critique
/// that never reveals the answer, and a score in [0, 1].
pub trait Judge: Send + Sync {
    /// Which judge (backend and model), as recorded in judgements and failed verdicts.
    fn id(&self) -> &str;

    /// Judges `trajectory`. A returned judgement's score is in [0, 1]; a judge that never
    /// answers well returns an error, never a made-up score.
    fn judge<'a>(&'a self, trajectory: &'a Trajectory) -> JudgeFuture<'a>;
}

/// [`build`], where the reference judge also judges the job's `http` tasks with their
/// environment servers ([`crate::reference::servers`]): connects to them and refuses, naming
/// the keys, a job whose feedback mode needs a `verify` its servers do not serve.
pub async fn build_for_job(job: &ReagentConfig, cfg: &RrmConfig) -> Result<Arc<dyn Judge>, RrmError> {
    match cfg.judge {
        JudgeKind::Reference => {
            let builtin = ReferenceJudge { reveal_outcome: cfg.reveal_outcome };
            Ok(Arc::new(crate::reference::servers::connect_checked(job, builtin).await?))
        }
        JudgeKind::Openai => build(cfg),
    }
}

/// The judge `cfg.judge` names, ready to use (for `openai`, the API key is read from the
/// environment variable `cfg.openai.api_key_env` names).
pub fn build(cfg: &RrmConfig) -> Result<Arc<dyn Judge>, RrmError> {
    Ok(match cfg.judge {
        JudgeKind::Reference => Arc::new(ReferenceJudge { reveal_outcome: cfg.reveal_outcome }),
        JudgeKind::Openai => Arc::new(OpenAiJudge::from_config(cfg)?),
    })
}
