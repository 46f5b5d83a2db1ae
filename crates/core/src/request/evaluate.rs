//! The store's windows at one instant: exact attainment, goodput, burn rate and latency
//! quantiles per series and window, and the cumulative counters
//! (docs/architecture.md#exact-attainment-from-requests).
//!
//! A window is evaluated from the stored records when they hold every request that
//! finished in `(t − w, t]` (no record of it was pushed out by the per-series cap): then
//! everything is exact, and quantiles are nearest-rank over the requests. Otherwise it is
//! the window's time slots: the counts are still exact, over the slot-aligned window
//! `(E − w, E]`, and quantiles come from sketches within 2 %. ITL is always from sketches
//! (its gaps are not stored one by one).

use std::collections::BTreeMap;

use super::compact::Compact;
use super::judge::{CLAUSES, ClauseCounts, Judgement, SloCounts, Verdict, judge};
use super::report::{
    ARRIVAL_SLOT_MS, ArrivalCell, Basis, DataSource, FINISH_SLOT_MS, QuantileMethod, RequestPathReport,
    RequestQuantile, RequestSlo, RequestWindow, SeriesCounters,
};
use super::ring::{Sketches, edge};
use super::sketch::{RELATIVE_ERROR, Sketch, nearest_rank};
use super::store::{Reject, RequestStore, Series, SeriesKey};
use super::tally::Tally;
use crate::canonical::HistogramKind;
use crate::duration::Window;
use crate::report::{SloStatus, SloValues};
use crate::slo::{Bounded, Clause, Slo, burn_rate};
use crate::window::LATENCY_HISTOGRAMS;

/// One series' windows, in the store's window order.
#[derive(Debug, Clone)]
pub struct SeriesWindows {
    pub key: SeriesKey,
    pub windows: Vec<(Window, RequestWindow)>,
}

impl RequestStore {
    /// Every series' windows at `now_ms`.
    pub fn evaluate(&self, now_ms: i64) -> Vec<SeriesWindows> {
        self.series
            .iter()
            .map(|(key, s)| SeriesWindows {
                key: key.clone(),
                windows: self
                    .cfg
                    .windows
                    .iter()
                    .enumerate()
                    .map(|(i, &w)| (w, self.window(s, key.source.into(), i, w, now_ms)))
                    .collect(),
            })
            .collect()
    }

    /// Counters and refusals, for /metrics and the API.
    pub fn counters(&self) -> RequestPathReport {
        let mut rejected: BTreeMap<String, u64> = Reject::ALL.iter().map(|r| (r.as_str().to_string(), 0)).collect();
        for (r, n) in &self.rejected {
            rejected.insert(r.as_str().to_string(), *n);
        }
        let series = self
            .series
            .iter()
            .map(|(k, s)| SeriesCounters {
                target: k.target.clone(),
                model: k.model.clone(),
                source: k.source.into(),
                requests: s.by_status.iter().map(|(st, n)| (st.label().into_owned(), *n)).collect(),
                good_requests: s.slos.iter().zip(&s.good).map(|(&i, n)| (self.cfg.slos[i].name.clone(), *n)).collect(),
                records_held: s.raw.len() as u64,
                evicted_by_cap: s.evicted_by_cap,
            })
            .collect();
        RequestPathReport { inbox: None, rejected, series }
    }

    fn window(&self, s: &Series, source: DataSource, i: usize, w: Window, now_ms: i64) -> RequestWindow {
        let slos: Vec<&Slo> = s.slos.iter().map(|&k| &self.cfg.slos[k]).collect();
        let slots = s.rings[i].window(now_ms, slos.len());
        let lo = edge(now_ms - w.millis());
        let sketch = QuantileMethod::Sketch { relative_error: RELATIVE_ERROR };
        let mut latency = Vec::new();
        let mut by_arrival = vec![BTreeMap::new(); slos.len()];
        let (basis, from, to, tally) = if lo >= s.complete_after {
            let hi = edge(now_ms);
            let (start, end) =
                (s.raw.partition_point(|c| c.finished <= lo), s.raw.partition_point(|c| c.finished <= hi));
            let mut tally = Tally::new(slos.len());
            let mut values: [Vec<f64>; 4] = Default::default();
            for c in s.raw.range(start..end) {
                let js: Vec<Judgement> = slos.iter().map(|slo| judge(c, slo)).collect();
                tally.add(c, &js);
                for (cells, j) in by_arrival.iter_mut().zip(&js) {
                    count_arrival(cells, c, j.joint);
                }
                values[0].extend(c.ttft());
                values[1].extend(c.tpot());
                values[3].push(c.e2e);
            }
            for (k, kind) in LATENCY_HISTOGRAMS.iter().enumerate() {
                if *kind == HistogramKind::Itl {
                    latency.extend(from_sketch(*kind, &slots.sketches[k], &self.cfg.quantiles, sketch));
                } else {
                    latency.extend(nearest(*kind, &mut values[k], &self.cfg.quantiles));
                }
            }
            (Basis::Records, lo, hi, tally)
        } else {
            latency.extend(sketch_quantiles(&slots.sketches, &self.cfg.quantiles));
            let slot_seconds = s.rings[i].width_ms() as f64 / 1000.0;
            (Basis::Slots { slot_seconds }, edge(slots.from_ms), edge(slots.to_ms), slots.tally)
        };
        let seconds = w.duration().as_secs_f64();
        let now = edge(now_ms);
        RequestWindow {
            source,
            coverage: ((now - s.first_started) / seconds).clamp(0.0, 1.0),
            basis,
            from_unix: from,
            to_unix: to,
            requests: tally.finished,
            failed: tally.failed,
            requests_per_second: tally.finished as f64 / seconds,
            output_tokens_per_second: tally.output_tokens as f64 / seconds,
            inexact_token_counts: tally.inexact_tokens,
            mean_ttft_seconds: tally.mean_ttft(),
            latency,
            slos: slos
                .iter()
                .zip(&tally.slos)
                .zip(by_arrival)
                .map(|((slo, c), cells)| RequestSlo {
                    by_arrival: cells.into_values().collect(),
                    ..slo_report(slo, c, &tally, seconds)
                })
                .collect(),
            ttft_gap: None,
        }
    }
}

/// Adds one request's joint verdict to the cell of its arrival and finish slots.
fn count_arrival(cells: &mut BTreeMap<(i64, i64), ArrivalCell>, c: &Compact, v: Verdict) {
    if v == Verdict::Unobservable {
        return;
    }
    let slot = |t: f64, width: i64| ((t * 1000.0).floor() as i64).div_euclid(width) * width;
    let (arrived_ms, finished_ms) = (slot(c.started(), ARRIVAL_SLOT_MS), slot(c.finished, FINISH_SLOT_MS));
    let cell =
        cells.entry((arrived_ms, finished_ms)).or_insert(ArrivalCell { arrived_ms, finished_ms, ..Default::default() });
    cell.population += 1;
    cell.good_lower += u32::from(v == Verdict::Good);
    cell.good_upper += u32::from(matches!(v, Verdict::Good | Verdict::Maybe));
}

fn nearest(kind: HistogramKind, values: &mut [f64], quantiles: &[f64]) -> Vec<RequestQuantile> {
    if values.is_empty() {
        return Vec::new();
    }
    values.sort_unstable_by(f64::total_cmp);
    let n = values.len() as u64;
    quantiles
        .iter()
        .map(|&q| RequestQuantile {
            metric: kind,
            quantile: q,
            value: values[nearest_rank(q, n) as usize - 1],
            method: QuantileMethod::NearestRank,
            observations: n,
        })
        .collect()
}

fn from_sketch(kind: HistogramKind, s: &Sketch, quantiles: &[f64], method: QuantileMethod) -> Vec<RequestQuantile> {
    quantiles
        .iter()
        .filter_map(|&q| {
            let value = s.quantile(q)?;
            Some(RequestQuantile { metric: kind, quantile: q, value, method, observations: s.count() })
        })
        .collect()
}

fn sketch_quantiles(sketches: &Sketches, quantiles: &[f64]) -> Vec<RequestQuantile> {
    let method = QuantileMethod::Sketch { relative_error: RELATIVE_ERROR };
    LATENCY_HISTOGRAMS.iter().zip(sketches).flat_map(|(k, s)| from_sketch(*k, s, quantiles, method)).collect()
}

fn share(n: u64, of: u64) -> f64 {
    n as f64 / of as f64
}

fn bracket(c: &ClauseCounts) -> Bounded {
    let lower = share(c.good_lower, c.population);
    // The estimate judges each request by its measured TPOT, as the counters do.
    Bounded { lower, estimate: lower, upper: share(c.good_upper, c.population) }
}

/// Why a request-derived SLO has no attainment though requests finished.
pub const ALL_UNOBSERVABLE: &str = "every request in the window succeeded without a measured value for one of the SLO's clauses (a non-streaming response has no TTFT or TPOT); see the clause counts";

fn slo_report(slo: &Slo, c: &SloCounts, tally: &Tally, seconds: f64) -> RequestSlo {
    let mut counts: BTreeMap<Clause, ClauseCounts> = BTreeMap::new();
    for (i, clause) in CLAUSES.iter().enumerate() {
        if slo.threshold(*clause).is_some() {
            counts.insert(*clause, c.clauses[i]);
        }
    }
    counts.insert(Clause::Joint, c.joint);
    let status = if tally.finished == 0 {
        SloStatus::NoTraffic
    } else if c.joint.population == 0 {
        SloStatus::NotEvaluable { reason: ALL_UNOBSERVABLE.to_string() }
    } else {
        let attainment: BTreeMap<Clause, Bounded> =
            counts.iter().filter(|(_, k)| k.population > 0).map(|(cl, k)| (*cl, bracket(k))).collect();
        let joint = bracket(&c.joint);
        let per_second = |lo: u64, hi: u64| Bounded {
            lower: lo as f64 / seconds,
            estimate: lo as f64 / seconds,
            upper: hi as f64 / seconds,
        };
        SloStatus::Evaluated(SloValues {
            attainment,
            burn_rate: burn_rate(joint, slo.objective.get()),
            goodput_requests_per_second: Some(per_second(c.joint.good_lower, c.joint.good_upper)),
            goodput_tokens_per_second: Some(per_second(c.good_tokens_lower, c.good_tokens_upper)),
            requests: tally.finished as f64,
            failed: tally.failed as f64,
        })
    };
    RequestSlo { slo: slo.name.clone(), objective: slo.objective.get(), status, counts, by_arrival: Vec::new() }
}
