//! goodput: the truth about an LLM-serving fleet, from its engines' /metrics.
//!
//! Modules follow the data flow of DESIGN.md §2, one direction, no back edges:
//!
//! ```text
//! config ─► scrape ─► parse ─► adapt ─► window ─► evaluate ─► report ─► export / alert
//! ```
//!
//! Everything from [`parse`] to `evaluate` is pure: no I/O, no wall clock. The daemon,
//! `replay` and the tests drive the same code with real or virtual time.

pub mod adapt;
pub mod alert;
pub mod canonical;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod duration;
pub mod enrich;
pub mod evaluate;
pub mod export;
pub mod gpu;
pub mod logging;
pub mod parse;
pub mod probe;
pub mod replay;
pub mod report;
pub mod scrape;
pub mod serve;
pub mod sim;
pub mod slo;
pub mod window;
