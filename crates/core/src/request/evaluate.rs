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

use super::judge::{CLAUSES, ClauseCounts, SloCounts};
use super::ranked::Ranked;
use super::record::Source;
use super::reject::Reject;
use super::ring::{Reads, Sketches, SlotWindow, edge};
use super::running::{Running, Work};
use super::sketch::{RELATIVE_ERROR, Sketch};
use super::store::{RequestStore, Series, SeriesKey, StoreConfig};
use super::tally::Tally;
use crate::canonical::HistogramKind;
use crate::duration::Window;
use crate::report::request::{
    ArrivalCell, Basis, DataSource, QuantileMethod, RequestPathReport, RequestQuantile, RequestSlo, RequestWindow,
    SeriesCounters,
};
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
    /// Every series' windows at `now_ms`. A window the records cover reads its running sums
    /// ([`Running`]), moved to `now_ms` first; the others read their slots.
    pub fn evaluate(&mut self, now_ms: i64) -> Vec<SeriesWindows> {
        let RequestStore { cfg, series, pairs, work, .. } = self;
        let mut out = Vec::with_capacity(series.len());
        for (key, s) in series.iter_mut() {
            let slos: Vec<&Slo> = s.slos.iter().map(|&k| &cfg.slos[k]).collect();
            if s.running.len() != cfg.windows.len() {
                s.running = vec![None; cfg.windows.len()];
            }
            let mut windows = Vec::with_capacity(cfg.windows.len());
            for (i, &w) in cfg.windows.iter().enumerate() {
                let mut rw = window(cfg, s, &slos, key.source.into(), (i, w), now_ms, work);
                if key.source == Source::Tap {
                    // The gap's values are latencies: a window reporting none keeps its
                    // counts alone, as its latency families do.
                    let q = cfg.quantiles_at(w);
                    let (gap, (moved, steps)) = pairs.window(&key.target, &key.model, i, (rw.from_unix, rw.to_unix), q);
                    work.records += moved;
                    work.steps += steps;
                    rw.ttft_gap = gap;
                }
                windows.push((w, rw));
            }
            out.push(SeriesWindows { key: key.clone(), windows });
        }
        out
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
        let series_evicted =
            self.cfg.targets.iter().map(|t| (t.clone(), self.series_evicted.get(t).copied().unwrap_or(0))).collect();
        RequestPathReport { inbox: None, rejected, series_evicted, series }
    }
}

/// Window `i` (of length `w`) of series `s` at `now_ms`; adds the work it took to `work`.
fn window(
    cfg: &StoreConfig,
    s: &mut Series,
    slos: &[&Slo],
    source: DataSource,
    (i, w): (usize, Window),
    now_ms: i64,
    work: &mut Work,
) -> RequestWindow {
    let lo = edge(now_ms - w.millis());
    let sketch = QuantileMethod::Sketch { relative_error: RELATIVE_ERROR };
    let quantiles = cfg.quantiles_at(w);
    let mut latency = Vec::new();
    let from_records = lo >= s.complete_after;
    // What the window reads of its slots: all of them when the records no longer cover it;
    // else only the sketches of what the records do not keep (ITL's gaps); none without a
    // quantile to report.
    let reads = Reads {
        tally: !from_records,
        sketches: std::array::from_fn(|k| {
            let ranked =
                matches!(LATENCY_HISTOGRAMS[k], HistogramKind::Ttft | HistogramKind::Tpot | HistogramKind::E2e);
            let reported = !quantiles.is_empty();
            reported && !(from_records && ranked)
        }),
    };
    let slots: SlotWindow = s.rings[i].window(now_ms, slos.len(), reads);
    work.slots += slots.merged as u64;
    work.sketches += slots.sketches_merged as u64;
    let (basis, from, to, tally, by_arrival) = if from_records {
        let hi = edge(now_ms);
        // Only the window the capacity book reads keeps its requests by arrival: copied
        // into the report at every tick, another window's cells (as many as its length
        // holds arrival and finish slots) would be work and memory growing with it.
        let cells = cfg.arrival_window() == Some(w) && !slos.is_empty();
        let running = &mut s.running[i];
        let slid = running.as_mut().is_some_and(|r| r.keeps_cells() == cells && r.slide(&s.raw, lo, hi, slos, work));
        if !slid {
            *running = Some(Running::build(&s.raw, (lo, hi), slos, quantiles, cells, work));
        }
        let r = running.as_ref().expect("built");
        for (k, kind) in LATENCY_HISTOGRAMS.iter().enumerate() {
            let values = match (kind, &r.values) {
                (HistogramKind::Ttft, Some(v)) => &v[0],
                (HistogramKind::Tpot, Some(v)) => &v[1],
                (HistogramKind::E2e, Some(v)) => &v[2],
                (HistogramKind::Ttft | HistogramKind::Tpot | HistogramKind::E2e, None) => continue,
                _ => {
                    latency.extend(from_sketch(*kind, &slots.sketches[k], quantiles, sketch));
                    continue;
                }
            };
            latency.extend(nearest(*kind, values, quantiles));
        }
        let by_arrival: Vec<Vec<ArrivalCell>> = if cells {
            work.cells += r.by_arrival.iter().map(|c| c.len() as u64).sum::<u64>();
            r.by_arrival.iter().map(|c| c.values().copied().collect()).collect()
        } else {
            vec![Vec::new(); slos.len()]
        };
        (Basis::Records, lo, hi, r.tally.clone(), by_arrival)
    } else {
        // The slots serve this window now; its running sums would go stale.
        s.running[i] = None;
        latency.extend(sketch_quantiles(&slots.sketches, quantiles));
        let slot_seconds = s.rings[i].width_ms() as f64 / 1000.0;
        (
            Basis::Slots { slot_seconds },
            edge(slots.from_ms),
            edge(slots.to_ms),
            slots.tally,
            vec![Vec::new(); slos.len()],
        )
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
            .map(|((slo, c), cells)| RequestSlo { by_arrival: cells, ..slo_report(slo, c, &tally, seconds) })
            .collect(),
        ttft_gap: None,
    }
}

fn nearest(kind: HistogramKind, values: &Ranked, quantiles: &[f64]) -> Vec<RequestQuantile> {
    let n = values.len();
    quantiles
        .iter()
        .zip(values.quantiles())
        .map(|(&q, value)| RequestQuantile {
            metric: kind,
            quantile: q,
            value,
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
