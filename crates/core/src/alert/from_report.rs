//! Fills the rules' [`AlertInput`]s from one tick's [`Report`].
//!
//! A target that is down becomes one input without a model, whose windows are the request
//! sources still measuring it ([`super::down`]: only `LLMTargetDown` applies, and it says
//! so); a target that is up gives one input per model, with
//! the SLOs whose scope covers that target and model, and only their per-window results.
//! Where requests were measured for a window, its SLO quantities come from them: the
//! readings [`latency`], [`slo_status`] and [`tokens_per_second`], which the summary and
//! the status page show too, so that every surface has one value per quantity and tick.

use super::input::{AlertInput, CapacityInput, KvUsage, SloReport, Sources, WindowInput};
use super::table::LATENCY_ALERT_QUANTILE;
use crate::canonical::HistogramKind;
use crate::report::{Report, SloStatus, TargetReport, WindowReport};
use crate::request::{DataSource, RequestWindow};
use crate::slo::{Bounded, Slo};

/// One input per target (down) or per target and model (up). `slos` is every configured
/// SLO; each input keeps those that apply to it.
pub fn inputs(report: &Report, slos: &[Slo]) -> Vec<AlertInput> {
    let mut out = Vec::new();
    for t in &report.targets {
        if !t.health.up {
            out.push(AlertInput {
                target: t.target.clone(),
                model: String::new(),
                up: false,
                waiting_now: None,
                slos: vec![],
                windows: super::down::measuring(t),
                capacity: vec![],
            });
            continue;
        }
        out.extend(model_inputs(t, slos));
    }
    // By target and model: a search of the list per input is quadratic in a fleet's size.
    let by_key: std::collections::HashMap<(&str, &str), &crate::capacity::CapacityReport> =
        report.capacity.iter().map(|c| ((c.target.as_str(), c.model.as_str()), c)).collect();
    for input in &mut out {
        input.capacity =
            by_key.get(&(input.target.as_str(), input.model.as_str())).map_or_else(Vec::new, |c| capacity(c));
    }
    out
}

/// The capacity of each SLO of one target and model with an estimate and a current rate.
fn capacity(c: &crate::capacity::CapacityReport) -> Vec<CapacityInput> {
    c.slos
        .iter()
        .filter_map(|s| {
            let e = s.conservative()?;
            Some(CapacityInput {
                slo: s.slo.clone(),
                headroom: s.headroom?,
                capacity: e.p10,
                arrival_rate: c.arrival_rate?,
                censored: s.censored(),
                rising: c.rising,
                method: s.method.as_str(),
            })
        })
        .collect()
}

fn model_inputs<'a>(t: &'a TargetReport, slos: &'a [Slo]) -> impl Iterator<Item = AlertInput> + 'a {
    t.models.iter().map(move |m| {
        // The shortest window's last scrape is "now" (the shortest that has the gauge).
        let waiting_now =
            m.windows.iter().filter_map(|w| w.waiting.map(|g| (w.window, g.last))).min_by_key(|x| x.0).map(|x| x.1);
        let slos: Vec<Slo> = slos.iter().filter(|s| s.applies_to(&t.target, &m.model)).cloned().collect();
        AlertInput {
            target: t.target.clone(),
            model: m.model.clone(),
            up: true,
            waiting_now,
            windows: m.windows.iter().map(|w| window(w, &slos)).collect(),
            slos,
            capacity: vec![],
        }
    })
}

/// The request windows of `w` in the order every surface reads them: the tap, then engine
/// spans, each when it saw a request finish in the window
/// (docs/alerts.md#which-source-alerts-read).
pub fn request_order(w: &WindowReport) -> impl Iterator<Item = &RequestWindow> {
    w.requests.iter().filter(|r| r.source != DataSource::Metrics && r.requests > 0)
}

/// A latency quantile of `w` as every surface shows it, with its source: from the first
/// request source that measured it (exact, or within the sketch's 2 %), else from the
/// histograms.
pub fn latency(w: &WindowReport, kind: HistogramKind, q: f64) -> Option<(f64, DataSource)> {
    request_order(w).find_map(|r| r.quantile(kind, q).map(|v| (v, r.source))).or_else(|| {
        w.latency
            .iter()
            .find(|l| l.metric == kind && l.quantile == q)
            .map(|l| l.value)
            .filter(|v| !v.is_nan())
            .map(|v| (v, DataSource::Metrics))
    })
}

/// One SLO over `w` as every surface shows it, with its source: from the first request
/// source that evaluated it, else the histograms' result (evaluated or why not), else the
/// first request source's reason. `None` when nothing in `w` names the SLO.
pub fn slo_status<'a>(w: &'a WindowReport, name: &str) -> Option<(DataSource, &'a SloStatus)> {
    let from_requests = |evaluated: bool| {
        request_order(w).find_map(|r| {
            let x = r.slos.iter().find(|x| x.slo == name)?;
            (!evaluated || matches!(x.status, SloStatus::Evaluated(_))).then_some((r.source, &x.status))
        })
    };
    from_requests(true)
        .or_else(|| w.slos.iter().find(|x| x.slo == name).map(|h| (DataSource::Metrics, &h.status)))
        .or_else(|| from_requests(false))
}

/// The output throughput of `source` over `w`: for a request source, of the requests its
/// goodput counts.
pub fn tokens_per_second(w: &WindowReport, source: DataSource) -> Option<f64> {
    match source {
        DataSource::Metrics => w.output_tokens_per_second,
        s => request_order(w).find(|r| r.source == s).map(|r| r.output_tokens_per_second),
    }
}

/// Why a request source's joint attainment lies outside the histograms' bracket over the
/// same window, to show beside it (docs/accuracy.md#brackets-and-sources); `None` inside it,
/// or for the histograms themselves. The tap judges the requests that finished at the
/// client in the window, spans and histograms what the engine observed: only spans outside
/// the bracket mean the two did not see the same requests.
pub fn outside_bracket(source: DataSource, exact: Bounded, bracket: Bounded) -> Option<&'static str> {
    // Float noise of the two shares' divisions is not a finding.
    const NOISE: f64 = 1e-9;
    let below = exact.upper < bracket.lower - NOISE;
    let above = exact.lower > bracket.upper + NOISE;
    match (source, below, above) {
        (DataSource::Metrics, _, _) | (_, false, false) => None,
        (DataSource::Tap, true, _) => Some(TAP_BELOW),
        (DataSource::Tap, _, true) => Some(TAP_ABOVE),
        (DataSource::Otlp, _, _) => Some(SPANS_OUTSIDE),
    }
}

/// The tap's share under the histograms' bracket.
pub const TAP_BELOW: &str = "below the histograms' bracket: the tap also counts what the engine never records (failed connections and retries, client aborts, time queued outside the engine)";
/// The tap's share over the histograms' bracket.
pub const TAP_ABOVE: &str = "above the histograms' bracket: the histograms also count requests the tap did not see (other clients, requests in flight at the window's edges)";
/// The spans' share outside the histograms' bracket.
pub const SPANS_OUTSIDE: &str = "outside the histograms' bracket though both are the engine's: they did not see the same requests (spans dropped or sampled, requests finished between the window's start and its first scrape)";

/// The SLO quantities from the first source that has each (docs/alerts.md#which-source-alerts-read):
/// the tap, which sees what clients see (errors, aborts, rejections and the time outside the
/// engine); then engine spans, which miss aborted and rejected requests; then the
/// histograms. The SLO rules wait for the coverage of every source they read.
fn window(w: &WindowReport, slos: &[Slo]) -> WindowInput {
    let primary = request_order(w).next().map_or(DataSource::Metrics, |r| r.source);
    let coverage = |s: DataSource| request_order(w).find(|r| r.source == s).map_or(w.coverage, |r| r.coverage);
    let mut sources = Sources::default();
    for s in [DataSource::Metrics].into_iter().chain(request_order(w).map(|r| r.source)) {
        if let Some(t) = tokens_per_second(w, s) {
            sources.tokens_per_second.insert(s, t);
        }
    }
    let mut read = vec![coverage(primary)];
    let ttft = latency(w, HistogramKind::Ttft, LATENCY_ALERT_QUANTILE);
    let tpot = latency(w, HistogramKind::Tpot, LATENCY_ALERT_QUANTILE);
    for (x, field) in [(ttft, &mut sources.ttft_p99), (tpot, &mut sources.tpot_p99)] {
        if let Some((_, s)) = x {
            *field = s;
            read.push(coverage(s));
        }
    }
    let slos: Vec<SloReport> = slos
        .iter()
        .filter_map(|s| {
            let (source, status) = slo_status(w, &s.name)?;
            if matches!(status, SloStatus::Evaluated(_)) {
                read.push(coverage(source));
            }
            if source != DataSource::Metrics {
                sources.slos.insert(s.name.clone(), source);
            }
            Some(slo(&s.name, status))
        })
        .collect();
    WindowInput {
        window: w.window,
        coverage: w.coverage,
        slo_source: primary,
        slo_coverage: read.into_iter().fold(1.0, f64::min),
        output_tokens_per_second: tokens_per_second(w, primary),
        preemptions_per_second: w.preemptions_per_second,
        ttft_p99: ttft.map(|x| x.0),
        tpot_p99: tpot.map(|x| x.0),
        waiting_at_start: w.waiting.map(|g| g.first),
        kv_usage: w.kv_cache.as_ref().map(|k| KvUsage { last: k.last, max: k.max }),
        slos,
        sources,
    }
}

fn slo(name: &str, status: &SloStatus) -> SloReport {
    let nan = Bounded { lower: f64::NAN, estimate: f64::NAN, upper: f64::NAN };
    match status {
        SloStatus::Evaluated(v) => SloReport {
            slo: name.to_string(),
            evaluable: true,
            attainment: v.attainment.clone(),
            burn_rate: v.burn_rate,
            goodput_requests_per_second: v.goodput_requests_per_second,
            goodput_tokens_per_second: v.goodput_tokens_per_second,
            requests: v.requests,
        },
        SloStatus::NotEvaluable { .. } | SloStatus::NoTraffic => SloReport {
            slo: name.to_string(),
            evaluable: false,
            attainment: Default::default(),
            burn_rate: nan,
            goodput_requests_per_second: None,
            goodput_tokens_per_second: None,
            requests: 0.0,
        },
    }
}
