//! The request path's evidence: one [`RequestRecord`] per request a tap measured or an engine
//! span described (docs/request-path.md).
//!
//! Histograms from /metrics only bound per-request compliance; these records know it. The
//! tap (in the daemon) and the OTLP receiver produce them (the receiver through [`span`],
//! which maps an engine's request span); the request store turns them into exact
//! per-window attainment, goodput and latency quantiles. Everything here is pure: the
//! producers stamp the times, this module only reads them.

mod record;
pub mod span;

pub use record::{EngineTimes, ItlGap, RequestRecord, Source, Status, TokenCount};
pub use span::{AttrValue, NotRecorded, SpanInput, record_from_span};
