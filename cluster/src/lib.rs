//! The commands of `reagent`, one module each with its options (clap `Args`) and its `run`:
//! the roles (learner, actor, RRM worker, env-worker), the local launcher (`run`), the
//! supervised cold start and in-process training, the experiment, export, serving, status and
//! dead letters, doctor and the configuration. The `reagent` binary (`reagent/`) parses the
//! command line and calls them; the benches (`bench/`) build on them.
//!
//! ```text
//!  reagent/src/main.rs ─► cluster::{roles, launch, sft, train, experiment, export, serve, status, dlq, doctor, settings}
//!                     └─► bench (reagent bench …) ─► cluster::{launch::procs, progress, train, doctor}
//! ```

pub mod cli;
pub mod dlq;
pub mod doctor;
pub mod env_worker;
pub mod errors;
pub mod experiment;
pub mod export;
pub mod launch;
pub mod plot;
pub mod progress;
pub mod redis_acl;
pub mod roles;
pub mod serve;
pub mod settings;
pub mod sft;
pub mod status;
pub mod train;
