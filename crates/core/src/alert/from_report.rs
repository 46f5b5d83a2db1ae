//! Fills the rules' [`AlertInput`]s from one tick's [`Report`].
//!
//! A target that is down becomes one input without a model (its windows hold stale data,
//! and only `LLMTargetDown` applies); a target that is up gives one input per model, with
//! the SLOs whose scope covers that target and model, and only their per-window results.
//! Where requests were measured for a window, its SLO quantities come from them
//! ([`from_requests`]).

use super::input::{AlertInput, CapacityInput, KvUsage, SloReport, WindowInput};
use super::table::LATENCY_ALERT_QUANTILE;
use crate::canonical::HistogramKind;
use crate::report::{Report, SloStatus, TargetReport, WindowReport};
use crate::request::{self, DataSource, RequestWindow};
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
                windows: vec![],
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

fn p99(w: &WindowReport, kind: HistogramKind) -> Option<f64> {
    w.latency
        .iter()
        .find(|q| q.metric == kind && q.quantile == LATENCY_ALERT_QUANTILE)
        .map(|q| q.value)
        .filter(|v| !v.is_nan())
}

fn window(w: &WindowReport, slos: &[Slo]) -> WindowInput {
    let mut input = WindowInput {
        window: w.window,
        coverage: w.coverage,
        slo_source: DataSource::Metrics,
        slo_coverage: w.coverage,
        output_tokens_per_second: w.output_tokens_per_second,
        preemptions_per_second: w.preemptions_per_second,
        ttft_p99: p99(w, HistogramKind::Ttft),
        tpot_p99: p99(w, HistogramKind::Tpot),
        waiting_at_start: w.waiting.map(|g| g.first),
        kv_usage: w.kv_cache.as_ref().map(|k| KvUsage { last: k.last, max: k.max }),
        slos: w.slos.iter().filter(|r| slos.iter().any(|s| s.name == r.slo)).map(|r| slo(&r.slo, &r.status)).collect(),
    };
    if let Some(primary) = request::preferred(w) {
        from_requests(&mut input, w, primary, slos);
    }
    input
}

/// The SLO quantities from requests (docs/alerts.md#which-source-alerts-read): the tap,
/// which sees what clients see (errors, aborts, rejections and the time outside the engine);
/// then engine spans, which miss aborted and rejected requests; then the histograms. Each
/// quantity comes from the first of them that has it, and the SLO rules wait for the
/// coverage of every source they read.
fn from_requests(input: &mut WindowInput, w: &WindowReport, primary: &RequestWindow, slos: &[Slo]) {
    let order: Vec<&RequestWindow> = std::iter::once(primary)
        .chain(w.requests.iter().filter(|r| r.source != primary.source && r.requests > 0))
        .collect();
    let mut read = vec![primary.coverage];
    input.slo_source = primary.source;
    input.output_tokens_per_second = Some(primary.output_tokens_per_second);
    for (field, kind) in [(&mut input.ttft_p99, HistogramKind::Ttft), (&mut input.tpot_p99, HistogramKind::Tpot)] {
        match order.iter().find_map(|r| r.quantile(kind, LATENCY_ALERT_QUANTILE).map(|v| (v, r.coverage))) {
            Some((v, coverage)) => {
                *field = Some(v);
                read.push(coverage);
            }
            None if field.is_some() => read.push(w.coverage),
            None => {}
        }
    }
    input.slos = slos
        .iter()
        .filter_map(|s| {
            let exact = order.iter().find_map(|r| {
                let x = r.slos.iter().find(|x| x.slo == s.name)?;
                matches!(x.status, SloStatus::Evaluated(_)).then_some((x, r.coverage))
            });
            if let Some((x, coverage)) = exact {
                read.push(coverage);
                return Some(slo(&x.slo, &x.status));
            }
            if let Some(h) = w.slos.iter().find(|x| x.slo == s.name) {
                if matches!(h.status, SloStatus::Evaluated(_)) {
                    read.push(w.coverage);
                }
                return Some(slo(&h.slo, &h.status));
            }
            order.iter().find_map(|r| r.slos.iter().find(|x| x.slo == s.name)).map(|x| slo(&x.slo, &x.status))
        })
        .collect();
    input.slo_coverage = read.into_iter().fold(1.0, f64::min);
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
