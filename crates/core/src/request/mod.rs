//! The request path's evidence: one [`RequestRecord`] per request a tap measured or an engine
//! span described (docs/request-path.md).
//!
//! Histograms from /metrics only bound per-request compliance; these records know it. The
//! tap (in the daemon) and the OTLP receiver produce them (the receiver through [`span`],
//! which maps an engine's request span); the request store turns them into exact
//! per-window attainment, goodput and latency quantiles. Everything here is pure: the
//! producers stamp the times, this module only reads them.
//!
//! The tap's measurement lives here too, apart from its I/O: [`route`] says which requests
//! are measured, [`sse`] decodes event streams, [`meter`] turns a request's bytes and their
//! arrival times into a record, [`body`] reads (and with `inject_usage` edits) request
//! bodies, and [`strip`] removes the usage event the edit caused.

pub mod body;
pub mod event;
pub mod meter;
mod record;
pub mod route;
pub mod span;
pub mod sse;
pub mod strip;
#[cfg(test)]
mod tests;

pub use meter::{End, Meter, Unmeasured};
pub use record::{EngineTimes, ItlGap, RequestRecord, Source, Status, TokenCount};
pub use route::Route;
pub use span::{AttrValue, NotRecorded, SpanInput, record_from_span};
