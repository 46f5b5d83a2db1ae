//! The status page's memory of recent evaluations: per target and model, a ring of the few
//! numbers its charts draw over time (docs/status-page.md#history, docs/limits.md), the
//! capacity and arrivals of the report's capacity section among them.
//!
//! Each published report appends one point to every series, from the model's shortest
//! window; a series its report lacks (a target down, a model gone) gets a gap, so that
//! every ring advances one step per evaluation and the charts share their time axis. A
//! series that has been nothing but gaps for a whole ring is dropped, so memory is bounded
//! by the (target, model) pairs seen within the last ring × the ring's length.

use std::collections::{BTreeMap, VecDeque};

use crate::alert::from_report;
use crate::canonical::HistogramKind;
use crate::capacity::CapacityReport;
use crate::report::{Report, SloStatus, WindowReport};
use crate::request::DataSource;

/// Evaluations kept per series by default: 15 minutes at the default 5 s interval.
pub const DEFAULT_RING_LEN: usize = 180;

/// The latency quantile the charts draw, when the config evaluates it.
pub const CHART_QUANTILE: f64 = 0.99;

/// The recent history of every (target, model) the reports showed.
#[derive(Debug)]
pub struct History {
    ring_len: usize,
    series: BTreeMap<(String, String), Series>,
}

/// One (target, model): columns of equal length, oldest first, `NaN` where a value was
/// missing. `f32` halves the memory; the charts draw a few hundred pixels.
#[derive(Debug, Default)]
pub struct Series {
    pub t_ms: VecDeque<i64>,
    /// Output tokens per second.
    pub throughput: VecDeque<f32>,
    /// The [`Series::quantile`] of TTFT and TPOT, seconds.
    pub ttft: VecDeque<f32>,
    pub tpot: VecDeque<f32>,
    /// KV-cache utilization at the last scrape, in [0, 1].
    pub kv: VecDeque<f32>,
    /// Per SLO, goodput in output tokens per second as `[lower, estimate, upper]`.
    pub goodput: Vec<(String, VecDeque<[f32; 3]>)>,
    /// Requests arriving per second, from the capacity report (docs/capacity.md).
    pub arrivals: VecDeque<f32>,
    /// Whether the engine was saturated (`llm_slo_saturated`).
    pub saturated: VecDeque<bool>,
    /// Per SLO, the conservative end's capacity in requests/s as `[p10, p50, p90]`; a
    /// censored estimate, a lower bound only, keeps its p10 alone: `[p10, NaN, NaN]`.
    pub capacity: Vec<(String, VecDeque<[f32; 3]>)>,
    /// The latency quantile drawn: [`CHART_QUANTILE`], or the highest evaluated.
    pub quantile: f64,
    /// The sources of the newest point: throughput and goodput (one source for both, so
    /// that goodput is read beside the throughput of the same requests), TTFT and TPOT
    /// (`alert::from_report`'s readings, the values the summary and the alerts show).
    pub sources: Option<PointSources>,
    /// Gaps in a row at the end; the series is dropped when they fill the ring.
    gaps: usize,
}

impl Series {
    pub fn len(&self) -> usize {
        self.t_ms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t_ms.is_empty()
    }
}

impl History {
    pub fn new(ring_len: usize) -> History {
        History { ring_len: ring_len.max(2), series: BTreeMap::new() }
    }

    pub fn ring_len(&self) -> usize {
        self.ring_len
    }

    pub fn get(&self, target: &str, model: &str) -> Option<&Series> {
        self.series.get(&(target.to_string(), model.to_string()))
    }

    /// Number of series held.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Appends one point per series from `report`, and a gap to every series it lacks.
    pub fn record(&mut self, report: &Report) {
        let cap = self.ring_len;
        let mut seen = std::collections::BTreeSet::new();
        // Looked up once per model: a scan per model would be quadratic in targets.
        let capacity: BTreeMap<(&str, &str), &CapacityReport> =
            report.capacity.iter().map(|c| ((c.target.as_str(), c.model.as_str()), c)).collect();
        for t in &report.targets {
            for m in t.models.iter() {
                let Some(w) = m.primary_window() else { continue };
                let key = (t.target.clone(), m.model.clone());
                let s = self.series.entry(key.clone()).or_default();
                push_point(s, cap, report.t_ms, w);
                push_capacity(s, cap, capacity.get(&(t.target.as_str(), m.model.as_str())).copied());
                seen.insert(key);
            }
        }
        self.series.retain(|k, s| {
            if !seen.contains(k) {
                push_gap(s, cap, report.t_ms);
            }
            s.gaps < cap
        });
    }

    /// Bytes the rings hold now, for docs/limits.md's bound and its test.
    pub fn heap_bytes(&self) -> usize {
        self.series
            .iter()
            .map(|((t, m), s)| {
                t.capacity()
                    + m.capacity()
                    + s.t_ms.capacity() * 8
                    + (s.throughput.capacity() + s.ttft.capacity() + s.tpot.capacity() + s.kv.capacity()) * 4
                    + s.arrivals.capacity() * 4
                    + s.saturated.capacity()
                    + [&s.goodput, &s.capacity]
                        .into_iter()
                        .flatten()
                        .map(|(n, g)| n.capacity() + g.capacity() * 12)
                        .sum::<usize>()
            })
            .sum()
    }
}

fn push<T>(ring: &mut VecDeque<T>, cap: usize, v: T) {
    if ring.len() == cap {
        ring.pop_front();
    } else if ring.capacity() == 0 {
        // The whole ring at once: growing by doubling would hold 256 slots for 180.
        ring.reserve_exact(cap);
    }
    ring.push_back(v);
}

fn f(v: Option<f64>) -> f32 {
    v.filter(|v| v.is_finite()).map_or(f32::NAN, |v| v as f32)
}

/// Where the newest point of a [`Series`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointSources {
    pub throughput: DataSource,
    pub ttft: Option<DataSource>,
    pub tpot: Option<DataSource>,
}

fn push_point(s: &mut Series, cap: usize, t_ms: i64, w: &WindowReport) {
    // Only quantiles the config evaluates exist: 0.99 when it is one, else the highest.
    let qs = || w.latency.iter().filter(|l| l.metric == HistogramKind::Ttft).map(|l| l.quantile);
    let highest = qs().fold(f64::NAN, f64::max);
    s.quantile = if qs().any(|q| q == CHART_QUANTILE) || highest.is_nan() { CHART_QUANTILE } else { highest };
    push(&mut s.t_ms, cap, t_ms);
    // Throughput and goodput of one source: the first request source with requests in the
    // window, else the histograms.
    let source = from_report::request_order(w).next().map_or(DataSource::Metrics, |r| r.source);
    let ttft = from_report::latency(w, HistogramKind::Ttft, s.quantile);
    let tpot = from_report::latency(w, HistogramKind::Tpot, s.quantile);
    s.sources = Some(PointSources { throughput: source, ttft: ttft.map(|x| x.1), tpot: tpot.map(|x| x.1) });
    push(&mut s.throughput, cap, f(from_report::tokens_per_second(w, source)));
    push(&mut s.ttft, cap, f(ttft.map(|x| x.0)));
    push(&mut s.tpot, cap, f(tpot.map(|x| x.0)));
    push(&mut s.kv, cap, f(w.kv_cache.as_ref().map(|k| k.last)));
    let len = s.t_ms.len();
    let own = from_report::request_order(w).find(|r| r.source == source);
    for slo in &w.slos {
        let status = match own {
            Some(r) => r.slos.iter().find(|x| x.slo == slo.slo).map(|x| &x.status),
            None => Some(&slo.status),
        };
        let g = match status {
            Some(SloStatus::Evaluated(v)) => v.goodput_tokens_per_second,
            _ => None,
        };
        let point = g.map_or([f32::NAN; 3], |g| [f(Some(g.lower)), f(Some(g.estimate)), f(Some(g.upper))]);
        push_named(&mut s.goodput, cap, len, &slo.slo, point);
    }
    pad(&mut s.goodput, cap, len);
    s.gaps = 0;
}

fn push_gap(s: &mut Series, cap: usize, t_ms: i64) {
    push(&mut s.t_ms, cap, t_ms);
    for ring in [&mut s.throughput, &mut s.ttft, &mut s.tpot, &mut s.kv] {
        push(ring, cap, f32::NAN);
    }
    push(&mut s.arrivals, cap, f32::NAN);
    push(&mut s.saturated, cap, false);
    for (_, ring) in s.goodput.iter_mut().chain(&mut s.capacity) {
        push(ring, cap, [f32::NAN; 3]);
    }
    s.gaps += 1;
}

/// The capacity columns of the point [`push_point`] just added: the arrivals, whether the
/// engine was saturated, and per SLO the estimate the headroom is read from.
fn push_capacity(s: &mut Series, cap: usize, c: Option<&CapacityReport>) {
    let len = s.t_ms.len();
    push(&mut s.arrivals, cap, f(c.and_then(|c| c.arrival_rate)));
    push(&mut s.saturated, cap, c.is_some_and(|c| c.saturated));
    for slo in c.map_or(&[][..], |c| &c.slos) {
        let point = match slo.conservative() {
            Some(e) if slo.censored() => [f(Some(e.p10)), f32::NAN, f32::NAN],
            Some(e) => [f(Some(e.p10)), f(Some(e.p50)), f(Some(e.p90))],
            None => [f32::NAN; 3],
        };
        push_named(&mut s.capacity, cap, len, &slo.slo, point);
    }
    pad(&mut s.capacity, cap, len);
}

/// Appends `point` to the column `name`, creating it padded so that its points line up in
/// time with the `len` of the others.
fn push_named(cols: &mut Vec<(String, VecDeque<[f32; 3]>)>, cap: usize, len: usize, name: &str, point: [f32; 3]) {
    match cols.iter_mut().find(|(n, _)| n == name) {
        Some((_, ring)) => push(ring, cap, point),
        None => {
            let mut ring = VecDeque::with_capacity(cap);
            ring.extend(std::iter::repeat_n([f32::NAN; 3], len - 1));
            ring.push_back(point);
            cols.push((name.to_string(), ring));
        }
    }
}

/// A gap in every column the newest point did not reach.
fn pad(cols: &mut [(String, VecDeque<[f32; 3]>)], cap: usize, len: usize) {
    for (_, ring) in cols.iter_mut().filter(|(_, r)| r.len() < len) {
        push(ring, cap, [f32::NAN; 3]);
    }
}

#[cfg(test)]
mod tests;
