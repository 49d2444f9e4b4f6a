//! The text task families (docs/architecture.md section 4), one module each; `dataset` plays a user's own
//! tasks from JSON-lines files.

pub mod dataset;
pub mod math;
pub mod qa;
pub mod retail;
pub mod searchqa;
pub mod webnav;
