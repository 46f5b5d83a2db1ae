//! goodput: the truth about an LLM-serving fleet, from its engines' /metrics.
//!
//! Modules follow the data flow of DESIGN.md §2, one direction, no back edges:
//!
//! ```text
//! config ─► scrape ─► parse ─► adapt ─► window ─► evaluate ─► report ─► enrich ─► export ─► serve
//!  (YAML)   (HTTP)   (text)   (engine   (rings of  (PromQL,    (one      (GPU join, (families)  (/metrics,
//!                             → canonical) snapshots) SLOs, slo)  tick)     alerts)               JSON API)
//! gpu (NVML thread, dcgm-exporter) ─────────────────────────────────────► enrich
//! alert: rules and state (pure) ─► delivery to Alertmanager (I/O)
//! ```
//!
//! Everything from [`parse`] to [`evaluate`] and [`slo`] is pure: no I/O, no wall clock.
//! [`daemon`] drives it live; [`replay`] drives the same code in virtual time over a
//! recording; [`sim`] is the engine simulator behind `goodput demo` and the ground-truth tests.

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
pub mod redact;
pub mod replay;
pub mod report;
pub mod scrape;
pub mod serve;
pub mod sim;
pub mod slo;
pub mod window;

pub use adapt::{EngineHint, adapt};
pub use canonical::{Engine, Snapshot};
pub use config::Config;
pub use evaluate::{EvalConfig, evaluate_target};
pub use parse::{Limits, parse};
pub use report::Report;
