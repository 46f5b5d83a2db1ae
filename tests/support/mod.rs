//! Helpers shared by the integration tests.
//!
//! A test binary that declares `mod support;` also declares `mod tools;` (tests/tools).
#![allow(dead_code)]

pub mod prometheus;
pub mod recording;
