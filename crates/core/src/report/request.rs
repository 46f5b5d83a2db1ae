//! What the request store reports: per window and source, exact attainment, goodput and
//! latency quantiles from the requests themselves; per series, cumulative counters; and the
//! request path's own health. These ride in the [`Report`](super::Report) beside the
//! histogram-derived values (docs/metrics.md#exact-values-from-requests).

use std::collections::BTreeMap;

use serde::Serialize;

use super::status::SloStatus;
use crate::canonical::HistogramKind;
use crate::slo::Clause;

/// Where a value comes from: the engine's histograms, or requests a tap or engine spans
/// measured. The `source` label of the exported series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataSource {
    Tap,
    Otlp,
    Metrics,
}

impl DataSource {
    pub fn as_str(self) -> &'static str {
        match self {
            DataSource::Tap => "tap",
            DataSource::Otlp => "otlp",
            DataSource::Metrics => "metrics",
        }
    }
}

impl From<Source> for DataSource {
    fn from(s: Source) -> DataSource {
        match s {
            Source::Tap => DataSource::Tap,
            Source::Otlp => DataSource::Otlp,
        }
    }
}

/// How a window's numbers were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "basis", rename_all = "snake_case")]
pub enum Basis {
    /// From the stored records: exact over `(t − w, t]`.
    Records,
    /// From time slots of `slot_seconds` (the records were past the per-series cap): counts
    /// exact over `(from_unix, to_unix]`, which ends up to one slot before `t`; latency
    /// quantiles from sketches.
    Slots { slot_seconds: f64 },
}

/// How a quantile was computed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum QuantileMethod {
    /// The value of rank `⌈q·n⌉` among the `n` sorted values: exact, and always one of them.
    NearestRank,
    /// The nearest-rank value of a sketch, within `relative_error` of the exact one.
    Sketch { relative_error: f64 },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestQuantile {
    #[serde(serialize_with = "crate::report::request::kind_str")]
    pub metric: HistogramKind,
    pub quantile: f64,
    pub value: f64,
    #[serde(flatten)]
    pub method: QuantileMethod,
    /// Values the quantile was taken over (requests; ITL: token-bearing events).
    pub observations: u64,
}

pub(crate) fn kind_str<S: serde::Serializer>(k: &HistogramKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.as_str())
}

/// One SLO over one window from requests. `status` has the shape of the histogram-derived
/// one: attainment bounds equal (exact) unless some TPOT came from a counted token number.
#[derive(Debug, Clone, Serialize)]
pub struct RequestSlo {
    pub slo: String,
    pub objective: f64,
    pub status: SloStatus,
    /// The counts behind the attainment, per clause and `joint`.
    pub counts: BTreeMap<Clause, ClauseCounts>,
    /// The joint outcomes by when the requests arrived and finished, for the capacity
    /// book: it counts each request at the arrival rate of the moment it arrived
    /// (docs/capacity.md#history). Only when the window was evaluated from its records
    /// (empty from time slots, which do not keep arrival times); not exported.
    #[serde(skip)]
    pub by_arrival: Vec<ArrivalCell>,
}

/// Width of an [`ArrivalCell`]'s arrival slot: finer than the capacity book's spacing.
pub const ARRIVAL_SLOT_MS: i64 = 5_000;
/// Width of an [`ArrivalCell`]'s finish slot: fine enough that a book fed at any instant
/// misses or repeats at most a second of requests between two intervals.
pub const FINISH_SLOT_MS: i64 = 1_000;

/// Requests of one window that arrived in one [`ARRIVAL_SLOT_MS`] slot and finished in
/// one [`FINISH_SLOT_MS`] slot, judged jointly against one SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArrivalCell {
    /// Start of the arrival slot (finish − e2e), Unix ms.
    pub arrived_ms: i64,
    /// Start of the finish slot, Unix ms.
    pub finished_ms: i64,
    pub population: u32,
    pub good_lower: u32,
    pub good_upper: u32,
}

/// Who measured the request. The tap sees what the client sees (queueing and network
/// outside the engine, errors, aborts); engine spans see the engine's own timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Tap,
    Otlp,
}

impl Source {
    /// The `source` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Tap => "tap",
            Source::Otlp => "otlp",
        }
    }
}

/// One clause over a window: how many requests were judged, how many surely and possibly
/// met it, and how many could not be judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
pub struct ClauseCounts {
    /// Requests judged (good, bad or possibly good).
    pub population: u64,
    /// Requests that met the clause.
    pub good_lower: u64,
    /// … plus those that possibly met it (TPOT from an inexact token count).
    pub good_upper: u64,
    /// Requests left out because the clause was not measured.
    pub unobservable: u64,
}

/// Which engine side a window's pairs used: the `reference` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GapReference {
    Response,
    Otlp,
    /// Some pairs from responses, some from spans.
    Both,
    /// No request of the window was paired.
    None,
}

impl GapReference {
    pub fn as_str(self) -> &'static str {
        match self {
            GapReference::Response => "response",
            GapReference::Otlp => "otlp",
            GapReference::Both => "response_and_otlp",
            GapReference::None => "none",
        }
    }
}

/// The client-minus-engine TTFT of the tap's requests that finished in one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TtftGap {
    /// Where the engine's side of the pairs came from.
    pub reference: GapReference,
    /// Requests paired.
    pub paired: u64,
    /// Mean of the per-request gaps.
    pub mean: Option<f64>,
    /// The smallest gap: never below zero beyond the two clocks' resolution.
    pub min: Option<f64>,
    /// Per quantile level, the nearest-rank quantile of the per-request gaps.
    pub quantiles: Vec<(f64, f64)>,
    /// Tap requests with a TTFT that could not be paired, by reason (every reason, from 0).
    pub unpaired: BTreeMap<&'static str, u64>,
    /// Why there is no gap, when no request was paired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub absent: Option<&'static str>,
}

/// One source's requests over one window of one target and model.
#[derive(Debug, Clone, Serialize)]
pub struct RequestWindow {
    pub source: DataSource,
    /// Share of the window the source has been watching: time since the first request it
    /// reported for this target and model began, over the window, at most 1.
    pub coverage: f64,
    #[serde(flatten)]
    pub basis: Basis,
    /// The span counted, `(from_unix, to_unix]` on the requests' finish times.
    pub from_unix: f64,
    pub to_unix: f64,
    /// Requests finished in the span, and how many of them did not end `ok`.
    pub requests: u64,
    pub failed: u64,
    pub requests_per_second: f64,
    /// Output tokens of the span's requests per second (counted token numbers included as
    /// counted: a lower bound when `inexact_token_counts > 0`).
    pub output_tokens_per_second: f64,
    pub inexact_token_counts: u64,
    pub mean_ttft_seconds: Option<f64>,
    pub latency: Vec<RequestQuantile>,
    /// Every configured SLO whose scope covers this target and model.
    pub slos: Vec<RequestSlo>,
    /// Tap windows only: the client-side TTFT minus the engine's, paired per request;
    /// `None` when the tap measured no TTFT in the window.
    pub ttft_gap: Option<TtftGap>,
}

impl RequestWindow {
    /// The `q` quantile of `metric`, when the window has one.
    pub fn quantile(&self, metric: HistogramKind, q: f64) -> Option<f64> {
        self.latency.iter().find(|l| l.metric == metric && l.quantile == q).map(|l| l.value)
    }
}

/// Cumulative counts of one target, model and source since the daemon started.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesCounters {
    pub target: String,
    pub model: String,
    pub source: DataSource,
    /// By status label (`ok`, `http_503`, `client_abort`, …).
    pub requests: BTreeMap<String, u64>,
    /// By SLO: requests that met every clause, judged by the measured values.
    pub good_requests: BTreeMap<String, u64>,
    /// Records held for exact windows now, and how many the per-series cap pushed out.
    pub records_held: u64,
    pub evicted_by_cap: u64,
}

/// The request path's health and counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RequestPathReport {
    /// Records the inbox took and dropped (full) since start; `None` without an inbox.
    pub inbox: Option<InboxCounts>,
    /// Records the store refused, whole or their model name, by reason.
    pub rejected: BTreeMap<String, u64>,
    /// Per target: series pushed out to make room for a new one.
    pub series_evicted: BTreeMap<String, u64>,
    pub series: Vec<SeriesCounters>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct InboxCounts {
    pub accepted: u64,
    pub dropped: u64,
}
