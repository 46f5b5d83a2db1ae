//! Capacity, found online (docs/capacity.md): where goodput leaves throughput for each
//! target and model, from the SLO attainment that live traffic actually got.
//!
//! The [`CapacityBook`] takes each tick's report (`CapacityBook::feed`, in `feed`) and keeps, per target and model, a
//! bounded [`history::History`] of evaluation intervals (one per [`SPACING`]). From it come
//! a model-free saturation signal ([`saturation`]) and, per SLO, the highest request rate
//! at which attainment still met the objective, with p10/p50/p90 ([`estimate`]). Pure:
//! the caller passes the reports in; time is the report's, randomness a fixed seed.

pub mod estimate;
mod feed;
pub mod history;
pub mod saturation;
pub mod stats;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::slo::Slo;
use estimate::{Estimate, Fit, Point};
use history::{History, Interval, Judged};
pub use saturation::Reason;
use saturation::{Saturation, TREND_INTERVALS};

/// One history interval per this much time at most: ticks closer together only update
/// the report. Four intervals per minute resolve a ramp of a few minutes.
pub const SPACING: Duration = Duration::from_secs(15);

/// Models per target the book keeps a history for, as the budget book caps its ledgers.
pub const MAX_MODELS_PER_TARGET: usize = 64;

/// How the capacity of an SLO was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
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

impl RateEstimate {
    fn new(end: Option<End>, e: Estimate) -> RateEstimate {
        RateEstimate {
            end,
            p10: e.p10,
            p50: e.p50,
            p90: e.p90,
            censored: e.censored,
            below_data: e.below_data,
            bins: e.bins,
        }
    }
}

/// One SLO's capacity for one target and model.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// Requests judged exactly but not yet counted, per series: at most this many cells
/// (one per SLO, 5 s of arrivals and 1 s of finishes), far more than the interval a
/// request waits for (half a window) holds.
const MAX_PENDING: usize = 4_096;

/// Exactly judged requests that wait for the interval of their arrival: the first at or
/// after `t_ms`.
#[derive(Debug, Clone, Copy)]
struct Pending {
    t_ms: i64,
    slo: usize,
    judged: Judged,
}

/// One target and model.
#[derive(Debug, Default)]
struct Series {
    /// Exactly judged requests whose interval is yet to come.
    pending: Vec<Pending>,
    history: History,
    /// SLO names in the order of each interval's `slos`.
    slos: Vec<String>,
    saturation: Saturation,
    /// The report as of the newest interval.
    latest: Option<CapacityReport>,
}

/// The book's knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityConfig {
    pub fit: Fit,
    /// KV usage counted as critical (the `kv_cache.critical` band limit).
    pub kv_critical: f64,
}

impl Default for CapacityConfig {
    fn default() -> Self {
        CapacityConfig { fit: Fit::default(), kv_critical: 0.90 }
    }
}

/// Every target and model's history, fed one report per tick.
#[derive(Debug, Default)]
pub struct CapacityBook {
    cfg: CapacityConfig,
    slos: Vec<Slo>,
    series: BTreeMap<(String, String), Series>,
}

impl CapacityBook {
    pub fn new(slos: Vec<Slo>, cfg: CapacityConfig) -> CapacityBook {
        CapacityBook { cfg, slos, series: BTreeMap::new() }
    }
}

/// Whether the engine was working off a backlog: completions more than 10 % above
/// arrivals. The requests that finished then were judged at the load that queued them, not
/// at the low rate that arrives while the queue drains; counted at that rate, they would
/// pull the capacity far down after every peak.
fn draining(i: &Interval) -> bool {
    let (a, f) = (i.arrival_rate as f64, i.finished_rate as f64);
    f > a * (1.0 + saturation::LAG_SHARE) && f - a > 0.05
}

/// The report of one series after its newest interval.
fn assess(target: &str, model: &str, s: &Series, slos: &[&Slo], now_ms: i64, cfg: &CapacityConfig) -> CapacityReport {
    let recent = s.history.recent(TREND_INTERVALS);
    let arrivals: Vec<f64> = recent.iter().map(|i| i.arrival_rate as f64).collect();
    let arrival_rate = arrivals.last().copied().filter(|r| r.is_finite());
    let same = s.history.same_workload(now_ms, 4 * TREND_INTERVALS);
    let slos = slos
        .iter()
        .enumerate()
        .map(|(k, slo)| {
            let used: Vec<(&Interval, f64, Judged)> = same
                .iter()
                .filter(|(i, _)| !draining(i))
                .filter_map(|(i, w)| i.slos.get(k).filter(|j| j.total > 0.0).map(|j| (*i, *w, *j)))
                .collect();
            let exact = !used.is_empty() && used.iter().all(|(_, _, j)| j.exact);
            let points = |good: fn(&Judged) -> f32| -> Vec<Point> {
                used.iter()
                    .map(|(i, w, j)| Point {
                        rate: i.arrival_rate as f64,
                        held: i.held_rate as f64,
                        total: j.total as f64 * w,
                        good: good(j) as f64 * w,
                    })
                    .collect()
            };
            let objective = slo.objective.get();
            let fit = |good: fn(&Judged) -> f32| estimate::estimate(&points(good), objective, &cfg.fit);
            let (method, estimates) = if exact {
                (Method::Empirical, fit(|j| j.good_lower).map(|e| RateEstimate::new(None, e)).into_iter().collect())
            } else {
                let ends = [(End::Lower, fit(|j| j.good_lower)), (End::Upper, fit(|j| j.good_upper))];
                (
                    Method::Bounds,
                    ends.into_iter().filter_map(|(end, e)| Some(RateEstimate::new(Some(end), e?))).collect(),
                )
            };
            let weight: f64 = used.iter().map(|(_, w, j)| w * j.total as f64).sum();
            let age = (weight > 0.0).then(|| {
                used.iter().map(|(i, w, j)| w * j.total as f64 * (now_ms - i.t_ms) as f64 / 1000.0).sum::<f64>()
                    / weight
            });
            let mut cap = SloCapacity {
                slo: slo.name.clone(),
                objective,
                method,
                estimates,
                headroom: None,
                intervals_used: used.len(),
                age_seconds: age,
            };
            cap.headroom = match (cap.conservative(), arrival_rate) {
                (Some(e), Some(r)) if r > 0.0 => Some(e.p10 / r),
                _ => None,
            };
            cap
        })
        .collect();
    CapacityReport {
        target: target.to_string(),
        model: model.to_string(),
        arrival_rate,
        rising: saturation::rising(&arrivals),
        saturated: s.saturation.saturated,
        reasons: s.saturation.reasons.clone(),
        slos,
        intervals: s.history.len(),
    }
}

#[cfg(test)]
mod tests;
