//! An engine's capacity and saturation, as the capacity book reports them for one target
//! and model (docs/capacity.md).

use serde::{Deserialize, Serialize};

/// How the capacity of an SLO was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// From per-request outcomes (tap or engine spans): exact attainment per interval.
    Empirical,
    /// From histogram attainment brackets: once from each end.
    Bounds,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Empirical => "empirical",
            Method::Bounds => "bounds",
        }
    }
}

/// Which end of the attainment bracket an estimate comes from (`Bounds` only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum End {
    Lower,
    Upper,
}

impl End {
    pub fn as_str(self) -> &'static str {
        match self {
            End::Lower => "lower",
            End::Upper => "upper",
        }
    }
}

/// One estimate of one SLO's capacity, requests/s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateEstimate {
    /// `None` for `Empirical`; the attainment end for `Bounds`.
    pub end: Option<End>,
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
    /// No failing load has been seen: the values are lower bounds.
    pub censored: bool,
    /// Load failed from the lowest rate seen: the values are upper bounds.
    pub below_data: bool,
    /// Rate bins with enough requests.
    pub bins: usize,
}

/// One SLO's capacity for one target and model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloCapacity {
    pub slo: String,
    pub objective: f64,
    pub method: Method,
    /// One estimate (`Empirical`), or the lower then the upper end (`Bounds`); empty until
    /// a rate bin holds enough requests.
    pub estimates: Vec<RateEstimate>,
    /// The conservative capacity (p10 of the lower end) over the current arrival rate.
    pub headroom: Option<f64>,
    /// Intervals the estimate rests on (the current workload's, since the last reset).
    pub intervals_used: usize,
    /// Request-weighted mean age of those intervals, seconds.
    pub age_seconds: Option<f64>,
}

impl SloCapacity {
    /// The estimate headroom is read from: the only one, or the lower end.
    pub fn conservative(&self) -> Option<&RateEstimate> {
        self.estimates.first()
    }

    /// Whether failing load is yet to be proven: some end is censored. From a bracket, the
    /// lower end may fail only because the bracket is wide; the upper end failing proves
    /// attainment fell under the objective.
    pub fn censored(&self) -> bool {
        self.estimates.is_empty() || self.estimates.iter().any(|e| e.censored)
    }
}

/// Capacity and saturation of one target and model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    pub target: String,
    pub model: String,
    /// Arrivals per second in the newest interval.
    pub arrival_rate: Option<f64>,
    /// The arrival rate rose significantly over the last intervals.
    pub rising: bool,
    pub saturated: bool,
    /// Why, while saturated.
    pub reasons: Vec<Reason>,
    pub slos: Vec<SloCapacity>,
    /// Intervals in the history since the engine's current run began.
    pub intervals: usize,
}

/// Why an engine is called saturated. The first two are the signal; the rest corroborate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Requests waiting rise (Theil–Sen slope > 0, Mann–Kendall p < 0.05) and average ≥ 1.
    QueueGrowing,
    /// Completions stay more than 10 % under arrivals: Little's law diverges.
    CompletionsLag,
    /// KV-cache usage at or above the critical band.
    KvCritical,
    /// The engine preempts requests.
    Preemptions,
    /// p99 TTFT rises significantly over the same intervals.
    TtftRising,
}

impl Reason {
    pub const ALL: [Reason; 5] =
        [Reason::QueueGrowing, Reason::CompletionsLag, Reason::KvCritical, Reason::Preemptions, Reason::TtftRising];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::QueueGrowing => "queue_growing",
            Reason::CompletionsLag => "completions_lag",
            Reason::KvCritical => "kv_critical",
            Reason::Preemptions => "preemptions",
            Reason::TtftRising => "ttft_rising",
        }
    }
}
