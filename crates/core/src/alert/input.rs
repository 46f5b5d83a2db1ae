//! What the alert rules read: one plain [`AlertInput`] per target and model, filled by the
//! daemon from each tick's [`Report`](crate::report::Report).
//!
//! These are flat copies of what the rules need, so the rule engine does not depend on how
//! the report is assembled; [`super::from_report`] fills them from a report. Every measured
//! quantity is optional: a missing one keeps its rule quiet. An input carries only the SLOs
//! whose scope applies to its target and model, so no rule can judge it by another's SLO.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::duration::Window;
pub use crate::request::DataSource;

pub use crate::slo::{Bounded, Clause, Slo};

/// One SLO evaluated over one window; its definition is in [`AlertInput::slos`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SloReport {
    pub slo: String,
    /// False when the window lacks the histograms the SLO needs.
    pub evaluable: bool,
    pub attainment: BTreeMap<Clause, Bounded>,
    pub burn_rate: Bounded,
    pub goodput_requests_per_second: Option<Bounded>,
    pub goodput_tokens_per_second: Option<Bounded>,
    /// Requests finished in the window.
    pub requests: f64,
}

/// KV-cache usage (0–1) over a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KvUsage {
    pub last: f64,
    pub max: f64,
}

/// Everything measured over one window for one target and model.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowInput {
    pub window: Window,
    /// Share of the window covered by scrape data, in [0, 1] (docs/metrics.md#window-coverage).
    pub coverage: f64,
    /// Where the SLO quantities below (`slos`, the p99s, `output_tokens_per_second`) come
    /// from: requests a tap or engine spans measured when they exist, else the histograms
    /// (docs/alerts.md#which-source-alerts-read).
    pub slo_source: DataSource,
    /// Coverage of the sources the SLO quantities were read from (the lowest, when some
    /// fell back to another source): the SLO rules wait for it as the others wait for
    /// `coverage`.
    pub slo_coverage: f64,
    pub output_tokens_per_second: Option<f64>,
    pub preemptions_per_second: Option<f64>,
    pub ttft_p99: Option<f64>,
    pub tpot_p99: Option<f64>,
    /// Requests waiting at the start of the window (the oldest sample inside it).
    pub waiting_at_start: Option<f64>,
    pub kv_usage: Option<KvUsage>,
    pub slos: Vec<SloReport>,
    /// Which source each SLO quantity above came from, for the alerts' `source` annotation.
    pub sources: Sources,
}

/// Where the readings of a [`WindowInput`] came from: an alert names the source of the value
/// it read, and that value is the /metrics series of that source and window
/// (docs/alerts.md#what-an-alert-says-it-read). The default is the histograms for all.
#[derive(Debug, Clone, PartialEq)]
pub struct Sources {
    /// The sources of `ttft_p99` and `tpot_p99`.
    pub ttft_p99: DataSource,
    pub tpot_p99: DataSource,
    /// Each SLO read from requests, by name; the others are from the histograms.
    pub slos: BTreeMap<String, DataSource>,
    /// Output tokens per second of each source that has them over the window: the
    /// throughput beside a goodput of the same source.
    pub tokens_per_second: BTreeMap<DataSource, f64>,
}

impl Default for Sources {
    fn default() -> Sources {
        Sources {
            ttft_p99: DataSource::Metrics,
            tpot_p99: DataSource::Metrics,
            slos: BTreeMap::new(),
            tokens_per_second: BTreeMap::new(),
        }
    }
}

impl Sources {
    /// Where the SLO `name` was read from.
    pub fn slo(&self, name: &str) -> DataSource {
        self.slos.get(name).copied().unwrap_or(DataSource::Metrics)
    }
}

/// One SLO's capacity for one target and model (docs/capacity.md), as the headroom rule
/// reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityInput {
    pub slo: String,
    /// Conservative capacity (p10, lower end) over the current arrival rate.
    pub headroom: f64,
    /// That capacity, requests/s.
    pub capacity: f64,
    pub arrival_rate: f64,
    /// No failing load seen yet: the capacity is only a lower bound.
    pub censored: bool,
    /// Arrivals rose significantly over the last intervals.
    pub rising: bool,
    /// `empirical` or `bounds`.
    pub method: &'static str,
}

/// One target and model at one evaluation instant.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertInput {
    pub target: String,
    /// Empty when the target has no model yet (e.g. never scraped); the label is then left off.
    pub model: String,
    pub up: bool,
    /// Requests waiting now.
    pub waiting_now: Option<f64>,
    /// The SLOs that apply to this target and model (none for a target that is down).
    pub slos: Vec<Slo>,
    /// For a target that is down: one per request source (tap, spans) still measuring it
    /// ([`super::down::measuring`]), empty when nothing does.
    pub windows: Vec<WindowInput>,
    /// Capacity per SLO; empty until the capacity book has an estimate.
    pub capacity: Vec<CapacityInput>,
}

impl AlertInput {
    pub fn window(&self, w: Window) -> Option<&WindowInput> {
        self.windows.iter().find(|x| x.window == w)
    }

    pub fn slo(&self, w: Window, slo: &str) -> Option<&SloReport> {
        self.window(w)?.slos.iter().find(|s| s.slo == slo)
    }
}
