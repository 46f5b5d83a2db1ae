//! goodput-core: the pure core of goodput. Everything a sample goes through between the
//! bytes of a scrape and the samples on /metrics, with no I/O, no async runtime and no
//! wall clock: the caller passes in bodies, times and configuration, and gets values back.
//! The daemon drives it live, `goodput replay` in virtual time, and the tests directly.
//!
//! Modules in data-flow order (docs/architecture.md):
//!
//! ```text
//! parse ─► adapt ─► window ─► evaluate ─► report ─► enrich ─► export
//! (text)   (engine  (rings of (PromQL,    (one      (GPU join, (samples for
//!          → canonical) scrapes) SLOs)    tick)     alerts)    /metrics, replay)
//! ```
//!
//! The request path's records ([`request`]: from a tap or engine spans) feed evaluate beside
//! the windows. [`budget`] keeps each SLO's error budget over its period (weeks) as
//! bucketed counts, fed from both. [`capacity`] keeps each engine's history of load and
//! attainment and finds where goodput leaves throughput (docs/capacity.md).
//!
//! Beside the flow: [`target`] (one target's windows and scrape health), [`canonical`] (the engine-neutral vocabulary), [`duration`] (windows and
//! the one duration syntax), [`slo`] (SLO math: thresholds, brackets, joint bounds),
//! [`alert`] (rules and their state machine), [`gpu`] (GPU readings and MFU/HBM/cost math),
//! [`probe`] (what `goodput check --probe` says about one scrape), [`redact`] (credentials
//! never printed), [`kahan`] (Prometheus's compensated float sum, used wherever series are
//! added).

#![forbid(unsafe_code)]

pub mod parse;

pub mod adapt;
pub mod canonical;

pub mod target;
pub mod window;

pub mod evaluate;
pub mod slo;

pub mod budget;
pub mod capacity;
pub mod report;
pub mod request;

pub mod alert;
pub mod enrich;
pub mod gpu;

pub mod export;

pub mod duration;
pub mod kahan;
pub mod probe;
pub mod redact;

pub use adapt::{EngineHint, adapt};
pub use canonical::{Engine, Snapshot};
pub use evaluate::{EvalConfig, evaluate_target};
pub use parse::{Limits, parse};
pub use report::Report;
