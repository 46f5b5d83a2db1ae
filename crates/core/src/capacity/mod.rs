//! Capacity, found online (docs/capacity.md): where goodput leaves throughput for each
//! target and model, from the SLO attainment that live traffic actually got.
//!
//! The [`CapacityBook`] takes each tick's report (`CapacityBook::feed`, in `feed`) and keeps,
//! per target and model, a bounded [`history::History`] of evaluation intervals (one per
//! [`SPACING`]): the recent ones one by one, the older ones as sums. From it come
//! a model-free saturation signal ([`saturation`]) and, per SLO, the highest request rate
//! at which attainment still met the objective, with p10/p50/p90 ([`estimate`]). Pure:
//! the caller passes the reports in; time is the report's, randomness a fixed seed.

pub mod cells;
pub mod estimate;
mod feed;
mod fit;
pub mod history;
pub mod interval;
pub mod past;
pub mod prefix;
pub mod saturation;
pub mod saved;
pub mod stats;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::report::capacity::{CapacityReport, End, Method, RateEstimate, Reason, SloCapacity};
use crate::slo::Slo;
use estimate::{Estimate, Fit};
use history::{History, Judged};
use saturation::{Saturation, TREND_INTERVALS};

/// One history interval per this much time at most: ticks closer together only update
/// the report. Four intervals per minute resolve a ramp of a few minutes.
pub const SPACING: Duration = Duration::from_secs(15);

/// A series' estimates are made again at its first interval of each period this long, and
/// at every interval while its arrivals rise (the headroom alert's condition): one
/// interval among four adds a fifteen-minute window's worth of evidence to hours of
/// decayed history, and a bootstrap per interval was most of the book's cost
/// (docs/capacity.md#cost). A new engine run or new SLOs are estimated at once.
pub const REFRESH: Duration = Duration::from_secs(60);

/// Models per target the book keeps a history for, as the budget book caps its ledgers.
pub const MAX_MODELS_PER_TARGET: usize = 64;

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

/// Requests judged exactly but not yet counted, per series: at most this many cells
/// (one per SLO, 5 s of arrivals and 1 s of finishes), far more than the interval a
/// request waits for (half a window) holds.
const MAX_PENDING: usize = 4_096;

/// Exactly judged requests that wait for the interval of their arrival: the first at or
/// after `t_ms`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Pending {
    t_ms: i64,
    slo: usize,
    judged: Judged,
}

/// One target and model.
#[derive(Debug, Clone, Default)]
struct Series {
    /// Exactly judged requests whose interval is yet to come.
    pending: Vec<Pending>,
    history: History,
    /// SLO names in the order of each interval's `slos`.
    slos: Vec<String>,
    saturation: Saturation,
    /// The report as of the newest interval; its estimates as of the last refresh.
    latest: Option<CapacityReport>,
    /// Counts the history's restarts (a new engine run, new SLOs): estimates of an
    /// earlier one are not carried over.
    generation: u64,
    /// The generation the estimates in `latest` were made in.
    estimated: Option<u64>,
    /// Due for new estimates (see [`REFRESH`]): queued.
    stale: bool,
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
#[derive(Debug, Clone, Default)]
pub struct CapacityBook {
    cfg: CapacityConfig,
    slos: Vec<Slo>,
    series: BTreeMap<(String, String), Series>,
    /// Series whose estimates wait for a refresh, oldest first (docs/capacity.md#cost).
    queue: VecDeque<(String, String)>,
    /// The previous report's instant: how many ticks an interval's refreshes spread over.
    last_t_ms: Option<i64>,
    /// Estimates made since the book began (each a bootstrap over bins).
    pub estimates_made: u64,
}

impl CapacityBook {
    pub fn new(slos: Vec<Slo>, cfg: CapacityConfig) -> CapacityBook {
        CapacityBook { cfg, slos, ..CapacityBook::default() }
    }

    /// The work the histories took since the book began: intervals added, sums touched and
    /// read, and shares made for estimates (see [`history::History::work`]).
    pub fn work(&self) -> u64 {
        self.series.values().map(|s| s.history.work).sum()
    }

    /// Heap bytes of the histories: their recent intervals and older sums
    /// (docs/footprint.md#capacity-at-steady-state), from capacities.
    pub fn history_bytes(&self) -> usize {
        self.series.values().map(|s| s.history.heap_bytes()).sum()
    }
}

/// The report of one series after its newest interval, with the estimates carried over
/// from the last refresh ([`refresh`] makes new ones).
fn assess(target: &str, model: &str, s: &Series, slos: &[&Slo]) -> CapacityReport {
    let recent = s.history.recent(TREND_INTERVALS);
    let arrivals: Vec<f64> = recent.iter().map(|i| i.arrival_rate as f64).collect();
    let arrival_rate = arrivals.last().copied().filter(|r| r.is_finite());
    let now_ms = s.history.last().map_or(0, |i| i.t_ms);
    let carried = s.latest.as_ref().filter(|_| s.estimated == Some(s.generation));
    let slos = slos
        .iter()
        .enumerate()
        .map(|(k, slo)| {
            let sums = s.history.used(k);
            let exact = sums.used > 0 && sums.inexact == 0;
            let method = if exact { Method::Empirical } else { Method::Bounds };
            let estimates = carried
                .and_then(|c| c.slos.iter().find(|c| c.slo == slo.name && c.method == method))
                .map(|c| c.estimates.clone())
                .unwrap_or_default();
            let mut cap = SloCapacity {
                slo: slo.name.clone(),
                objective: slo.objective.get(),
                method,
                estimates,
                headroom: None,
                intervals_used: sums.used,
                age_seconds: s.history.age_seconds(&sums, now_ms),
            };
            cap.headroom = headroom(&cap, arrival_rate);
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

/// The conservative capacity (p10 of the lower end) over the current arrival rate.
fn headroom(cap: &SloCapacity, arrival_rate: Option<f64>) -> Option<f64> {
    match (cap.conservative(), arrival_rate) {
        (Some(e), Some(r)) if r > 0.0 => Some(e.p10 / r),
        _ => None,
    }
}

/// New estimates for `s`'s report, from its history decayed to its newest interval: the
/// cost is the recent intervals' shares, the older ones' sums and the bootstrap's draws
/// over bins, not the day's intervals.
fn refresh(s: &mut Series, cfg: &CapacityConfig) {
    let Some(report) = s.latest.as_mut() else { return };
    let scale = s.history.scale(s.history.last().map_or(0, |i| i.t_ms));
    for (k, cap) in report.slos.iter_mut().enumerate() {
        if k >= s.history.objectives().len() {
            continue;
        }
        let (lower, upper) = s.history.tables(k);
        let fit = |tables| estimate::estimate_tables(tables, scale, cap.objective, &cfg.fit);
        cap.estimates = match cap.method {
            Method::Empirical => fit(&lower).map(|e| RateEstimate::new(None, e)).into_iter().collect(),
            Method::Bounds => [(End::Lower, &lower), (End::Upper, &upper)]
                .into_iter()
                .filter_map(|(end, t)| Some(RateEstimate::new(Some(end), fit(t)?)))
                .collect(),
        };
        cap.headroom = headroom(cap, report.arrival_rate);
    }
    s.estimated = Some(s.generation);
    s.stale = false;
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod memory_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
#[path = "work_tests.rs"]
mod work_tests;
