//! Puts the store's windows into the tick's [`Report`], beside the histogram-derived values
//! of the same target, model and window, and works out the TTFT gap between the tap and the
//! engine (docs/metrics.md#exact-values-from-requests).
//!
//! A model the engine's /metrics does not name (a client's spelling of it) gets a model
//! entry of its own, with empty histogram windows.

use super::evaluate::SeriesWindows;
use super::report::{DataSource, RequestPathReport, RequestWindow, TtftGap};
use crate::canonical::HistogramKind;
use crate::report::{ModelReport, Report, SloStatus, SloValues, WindowReport};

/// Adds every series' windows to the report's targets, fills the TTFT gaps, and sets
/// `report.request_path`. Series of targets the report lacks are left out.
pub fn attach(report: &mut Report, series: Vec<SeriesWindows>, counters: RequestPathReport) {
    for s in series {
        let Some(t) = report.targets.iter_mut().find(|t| t.target == s.key.target) else { continue };
        let m = match t.models.iter().position(|m| m.model == s.key.model) {
            Some(i) => &mut t.models[i],
            None => {
                t.models.push(ModelReport { model: s.key.model.clone(), windows: Vec::new() });
                let last = t.models.len() - 1;
                &mut t.models[last]
            }
        };
        for (w, rw) in s.windows {
            let wr = match m.windows.iter().position(|x| x.window == w) {
                Some(i) => &mut m.windows[i],
                None => {
                    m.windows.push(WindowReport::empty(w));
                    let last = m.windows.len() - 1;
                    &mut m.windows[last]
                }
            };
            wr.requests.push(rw);
            wr.requests.sort_by_key(|r| r.source);
        }
    }
    for m in report.targets.iter_mut().flat_map(|t| &mut t.models) {
        for w in &mut m.windows {
            let gap = ttft_gap(w);
            if let Some(tap) = w.requests.iter_mut().find(|r| r.source == DataSource::Tap) {
                tap.ttft_gap = gap;
            }
        }
    }
    report.request_path = Some(counters);
}

/// The tap's TTFT against the engine's: spans when they measured TTFT in the window (the
/// same clock discipline, per request), else the histogram.
fn ttft_gap(w: &WindowReport) -> Option<TtftGap> {
    let tap = w.requests.iter().find(|r| r.source == DataSource::Tap)?;
    let tap_mean = tap.mean_ttft_seconds?;
    let otlp = w.requests.iter().find(|r| r.source == DataSource::Otlp && r.mean_ttft_seconds.is_some());
    let quantiles_of = |f: &dyn Fn(f64) -> Option<f64>| -> Vec<(f64, f64)> {
        tap.latency
            .iter()
            .filter(|l| l.metric == HistogramKind::Ttft)
            .filter_map(|l| f(l.quantile).map(|e| (l.quantile, l.value - e)))
            .collect()
    };
    if let Some(o) = otlp {
        return Some(TtftGap {
            reference: DataSource::Otlp,
            mean: o.mean_ttft_seconds.map(|m| tap_mean - m),
            quantiles: quantiles_of(&|q| o.quantile(HistogramKind::Ttft, q)),
        });
    }
    let hist = |q: f64| {
        w.latency
            .iter()
            .find(|l| l.metric == HistogramKind::Ttft && l.quantile == q)
            .map(|l| l.value)
            .filter(|v| v.is_finite())
    };
    let mean = w.ttft_breakdown.map(|b| tap_mean - b.ttft).filter(|v| v.is_finite());
    let quantiles = quantiles_of(&hist);
    (mean.is_some() || !quantiles.is_empty()).then_some(TtftGap { reference: DataSource::Metrics, mean, quantiles })
}

/// The request window a consumer should read for `w`: the first of tap, then otlp, that
/// saw a request finish in it (docs/alerts.md#which-source-alerts-read).
pub fn preferred(w: &WindowReport) -> Option<&RequestWindow> {
    w.requests.iter().filter(|r| r.source != DataSource::Metrics).find(|r| r.requests > 0)
}

/// One SLO's values over `w` from the [`preferred`] request source, when it evaluated them:
/// what the status page and the demo summary show beside the histogram bracket.
pub fn preferred_slo<'a>(w: &'a WindowReport, slo: &str) -> Option<(DataSource, &'a SloValues)> {
    let r = preferred(w)?;
    r.slos.iter().find(|s| s.slo == slo).and_then(|s| match &s.status {
        SloStatus::Evaluated(v) => Some((r.source, v)),
        _ => None,
    })
}
