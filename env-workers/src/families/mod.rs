//! The text task families (DESIGN.md section 4), one module each.

pub mod math;
pub mod qa;
pub mod retail;
pub mod searchqa;
pub mod webnav;
