//! The result of one evaluation tick: what every output (/metrics, the JSON API,
//! `replay`, alerts, the demo's terminal summary) reads.
//!
//! The daemon publishes one `Report` per tick through an `ArcSwap`; readers never block
//! the evaluator.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::canonical::{Engine, HistogramKind};
use crate::duration::Window;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Evaluation instant, Unix milliseconds.
    pub t_ms: i64,
    pub targets: Vec<TargetReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    pub target: String,
    /// `None` until the first successful scrape.
    pub engine: Option<Engine>,
    pub health: Health,
    pub models: Vec<ModelReport>,
}

/// Scrape health of one target.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Health {
    pub up: bool,
    /// Why the last scrape failed, for humans.
    pub last_error: Option<String>,
    pub last_scrape_duration_seconds: Option<f64>,
    /// Failed scrapes by machine-readable reason (`timeout`, `connect`, `http_status`,
    /// `body_too_large`, `parse_error`, …), since the daemon started.
    pub errors_total: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelReport {
    pub model: String,
    pub windows: Vec<WindowReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WindowReport {
    #[serde(serialize_with = "serialize_window")]
    pub window: Window,
    /// PromQL-exact quantiles of every latency histogram the engine has.
    pub latency: Vec<LatencyQuantile>,
    /// `rate(prompt_tokens[w])`, summed over shards.
    pub input_tokens_per_second: Option<f64>,
    /// `rate(generation_tokens[w])`.
    pub output_tokens_per_second: Option<f64>,
    /// `rate(requests_finished[w])` over every finish reason.
    pub requests_per_second: Option<f64>,
    pub kv_cache: Option<KvReport>,
}

fn serialize_window<S: serde::Serializer>(w: &Window, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&w.label())
}

#[derive(Debug, Clone, Serialize)]
pub struct LatencyQuantile {
    #[serde(serialize_with = "serialize_kind")]
    pub metric: HistogramKind,
    pub quantile: f64,
    /// `histogram_quantile(q, sum by (le) (rate(x_bucket[w])))`; NaN when PromQL gives NaN.
    pub value: f64,
    /// Bounds of the bucket that holds the quantile, when there is one.
    pub bracket: Option<(f64, f64)>,
}

fn serialize_kind<S: serde::Serializer>(k: &HistogramKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.as_str())
}

/// KV-cache bands (DESIGN.md §1): underloaded < 0.70 ≤ low < 0.75 ≤ target ≤ 0.85 < high ≤ 0.90 < critical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KvBand {
    Underloaded,
    Low,
    Target,
    High,
    Critical,
}

impl KvBand {
    pub const ALL: [KvBand; 5] = [KvBand::Underloaded, KvBand::Low, KvBand::Target, KvBand::High, KvBand::Critical];

    pub fn as_str(self) -> &'static str {
        match self {
            KvBand::Underloaded => "underloaded",
            KvBand::Low => "low",
            KvBand::Target => "target",
            KvBand::High => "high",
            KvBand::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct KvReport {
    pub last: f64,
    pub mean: f64,
    pub max: f64,
    /// Share of the window spent in each band (sums to 1).
    pub band_time: BTreeMap<KvBand, f64>,
}

/// One SLO over one window of one target and model.
#[derive(Debug, Clone, Serialize)]
pub struct SloReport {
    pub slo: String,
    pub objective: f64,
    pub status: SloStatus,
}

/// Whether an SLO could be evaluated, and what came out.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SloStatus {
    Evaluated(SloValues),
    /// The engine lacks a quantity a clause needs (TGI has no TTFT); never silently passed.
    NotEvaluable { reason: String },
    /// No request finished in the window, so there is no share to report.
    NoTraffic,
}

#[derive(Debug, Clone, Serialize)]
pub struct SloValues {
    /// Per clause, and `joint` for all clauses together with failures counted as bad.
    pub attainment: BTreeMap<crate::slo::Clause, crate::slo::Bounded>,
    pub burn_rate: crate::slo::Bounded,
    pub goodput_requests_per_second: Option<crate::slo::Bounded>,
    pub goodput_tokens_per_second: Option<crate::slo::Bounded>,
    /// Requests finished in the window (raw increase), and how many of them failed.
    pub requests: f64,
    pub failed: f64,
}
