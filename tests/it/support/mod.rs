//! Helpers shared by the integration tests.
//!
//! It reaches `crate::tools` (tests/it/tools), a module of every binary that includes it.
#![allow(dead_code)]

pub mod prometheus;
pub mod recording;
