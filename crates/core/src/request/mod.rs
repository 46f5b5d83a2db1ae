//! The request path's evidence: one [`RequestRecord`] per request a tap measured or an engine
//! span described (docs/request-path.md), and the store that turns them into exact numbers.
//!
//! Histograms from /metrics only bound per-request compliance; these records know it. The
//! tap (in the daemon) and the OTLP receiver produce them (the receiver through [`span`],
//! which maps an engine's request span); the [`RequestStore`] keeps what the windows need in
//! bounded memory and evaluates exact per-window attainment, goodput, burn rate and latency
//! quantiles, which [`attach`] puts into the tick's report beside the histogram-derived
//! values. Everything here is pure: the producers stamp the times, this module only reads
//! them, and the caller passes "now" in.
//!
//! The tap's measurement lives here too, apart from its I/O: [`route`] says which requests
//! are measured, [`sse`] decodes event streams, [`meter`] turns a request's bytes and their
//! arrival times into a record, [`body`] reads (and with `inject_usage` edits) request
//! bodies, and [`strip`] removes the usage event the edit caused.

pub mod body;
pub mod event;
pub mod meter;
#[cfg(test)]
mod native_tests;
mod record;
mod reject;
pub mod route;
pub mod span;
pub mod sse;
pub mod strip;
#[cfg(test)]
mod tests;

mod attach;
#[cfg(test)]
mod attach_tests;
mod attribute;
#[cfg(test)]
mod attribute_tests;
mod compact;
mod evaluate;
mod judge;
mod pair;
#[cfg(test)]
mod pair_tests;
mod ranked;
mod reload;
mod ring;
mod running;
mod saved;
mod sketch;
mod store;
#[cfg(test)]
mod store_tests;
mod tally;
#[cfg(test)]
mod work_tests;

pub use crate::report::request::{
    ARRIVAL_SLOT_MS, ArrivalCell, Basis, DataSource, FINISH_SLOT_MS, InboxCounts, QuantileMethod, RequestPathReport,
    RequestQuantile, RequestSlo, RequestWindow, SeriesCounters,
};
pub use attach::{attach, preferred, preferred_slo};
pub use attribute::model_at_entry;
pub use compact::{Compact, Invalid};
pub use evaluate::{ALL_UNOBSERVABLE, SeriesWindows};
pub use judge::{CLAUSES, ClauseCounts, Judgement, Measured, SloCounts, Verdict, judge, tpot_vacuous};
pub use meter::{End, Meter, Unmeasured};
pub use pair::{GapReference, PAIR_WAIT_MS, Partner, TtftGap, Unpaired};
pub use record::{EngineTimes, ItlGap, MAX_REQUEST_ID, RequestRecord, Source, Status, TokenCount, request_id};
pub use reject::Reject;
pub use reload::Rebuilt;
pub use ring::{SLOTS_PER_WINDOW, slots_for};
pub use route::Route;
pub use running::Work;
pub use saved::{LegacySavedRequests, SavedRequests, SavedRequestsRef};
pub use sketch::{MAX_BINS, RELATIVE_ERROR, Sketch, nearest_rank};
pub use span::{AttrValue, NotRecorded, SpanInput, record_from_span};
pub use store::{
    BYTES_PER_RECORD, DEFAULT_MAX_RECORDS_PER_SERIES, DEFAULT_MAX_SERIES_PER_TARGET, MAX_CLOCK_SKEW_MS, RequestStore,
    SeriesKey, StoreConfig,
};
