//! goodput: the truth about an LLM-serving fleet, from its engines' /metrics.
//!
//! This crate is the daemon around the pure core of [`goodput_core`]: everything here that
//! is not a re-export does I/O or keeps time. A sample's path, in file names
//! (docs/architecture.md):
//!
//! ```text
//! config ─► scrape ─► [core] parse ─► adapt ─► window ─► evaluate ─► report ─► enrich ─► export ─► serve
//!  (YAML)   (HTTP,                                                            (GPU join,           (/metrics,
//!           limits)                                                            alerts)              JSON API)
//! gpu::nvml (driver thread) ───────────────────────────────────────────────► enrich
//! otlp (engine spans) ─► [core] request::span ─► inbox
//! enrich's notifications ─► deliver (Alertmanager, webhook)
//! tap (proxy in front of an engine's API, [core] request::meter) ─► inbox::Inbox
//! ```
//!
//! Scrapes and the tap's upstream requests go over [`http1`]'s client connections; the tasks
//! that poll hyper's connections run [`wakes::in_task`], which keeps a hand-off between the
//! halves of a connection inside its task and runs what a poll put off
//! ([`wakes::after_poll`]: the tap's measurement) once the poll has written.
//! [`daemon`] drives the flow live on a clock; [`replay`] drives the same core in virtual
//! time over a recording; [`promql_rules`] writes the same SLOs and alerts as PromQL for
//! Prometheus. The core's modules are re-exported under their own names, so
//! `goodput::parse` is `goodput_core::parse`.

// A panic in the tap's measurement or in one target's evaluation is caught (catch_unwind)
// and costs that record or that tick; built to abort instead, the same bug would take down
// the daemon and every request going through its taps.
#[cfg(not(panic = "unwind"))]
compile_error!(
    "goodput must be built with panic = \"unwind\": the tap's measurement and the evaluator catch their own panics (docs/request-path.md#invisible-to-clients)"
);

pub use goodput_core::{
    adapt, alert, budget, canonical, capacity, duration, enrich, evaluate, export, parse, probe, redact, report,
    request, slo, target, window,
};

pub mod config;
pub mod discovery;
pub mod http1;
pub mod scrape;
pub mod wakes;

pub mod inbox;
#[cfg(feature = "test-hooks")]
pub mod seen;
pub mod tap;

pub mod otlp;

pub mod daemon;
pub mod gpu;
pub mod listen;
pub mod serve;
pub mod state;

pub mod deliver;
pub mod promql_rules;

pub mod replay;

pub use config::Config;

/// The crate version and the commit it was built from ("unknown" without git or
/// `GOODPUT_COMMIT`), as `llm_slo_build_info` and `goodput --version` show them.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const COMMIT: &str = env!("GOODPUT_COMMIT");
/// `VERSION (COMMIT)`, for `--version`.
pub const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GOODPUT_COMMIT"), ")");
pub use goodput_core::{Engine, EngineHint, EvalConfig, Limits, Report, Snapshot, evaluate_target};
