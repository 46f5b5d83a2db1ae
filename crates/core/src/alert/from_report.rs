//! Fills the rules' [`AlertInput`]s from one tick's [`Report`].
//!
//! A target that is down becomes one input without a model (its windows hold stale data,
//! and only `LLMTargetDown` applies); a target that is up gives one input per model.

use super::input::{AlertInput, KvUsage, SloReport, WindowInput};
use crate::canonical::HistogramKind;
use crate::report::{self, Report, SloStatus, TargetReport, WindowReport};
use crate::slo::Bounded;

/// One input per target (down) or per target and model (up).
pub fn inputs(report: &Report) -> Vec<AlertInput> {
    let mut out = Vec::new();
    for t in &report.targets {
        if !t.health.up {
            out.push(AlertInput {
                target: t.target.clone(),
                model: String::new(),
                up: false,
                waiting_now: None,
                windows: vec![],
            });
            continue;
        }
        out.extend(model_inputs(t));
    }
    out
}

fn model_inputs(t: &TargetReport) -> impl Iterator<Item = AlertInput> + '_ {
    t.models.iter().map(|m| {
        // The shortest window's last scrape is "now".
        let waiting_now = m.windows.iter().min_by_key(|w| w.window).and_then(|w| w.waiting.map(|g| g.last));
        AlertInput {
            target: t.target.clone(),
            model: m.model.clone(),
            up: true,
            waiting_now,
            windows: m.windows.iter().map(window).collect(),
        }
    })
}

fn p99(w: &WindowReport, kind: HistogramKind) -> Option<f64> {
    w.latency.iter().find(|q| q.metric == kind && q.quantile == 0.99).map(|q| q.value).filter(|v| !v.is_nan())
}

fn window(w: &WindowReport) -> WindowInput {
    WindowInput {
        window: w.window,
        coverage: w.coverage,
        output_tokens_per_second: w.output_tokens_per_second,
        preemptions_per_second: w.preemptions_per_second,
        ttft_p99: p99(w, HistogramKind::Ttft),
        tpot_p99: p99(w, HistogramKind::Tpot),
        waiting_at_start: w.waiting.map(|g| g.first),
        kv_usage: w.kv_cache.as_ref().map(|k| KvUsage { last: k.last, max: k.max }),
        slos: w.slos.iter().map(slo).collect(),
    }
}

fn slo(s: &report::SloReport) -> SloReport {
    let nan = Bounded { lower: f64::NAN, estimate: f64::NAN, upper: f64::NAN };
    match &s.status {
        SloStatus::Evaluated(v) => SloReport {
            slo: s.slo.clone(),
            objective: s.objective,
            evaluable: true,
            attainment: v.attainment.clone(),
            burn_rate: v.burn_rate,
            goodput_requests_per_second: v.goodput_requests_per_second,
            goodput_tokens_per_second: v.goodput_tokens_per_second,
            requests: v.requests,
        },
        SloStatus::NotEvaluable { .. } | SloStatus::NoTraffic => SloReport {
            slo: s.slo.clone(),
            objective: s.objective,
            evaluable: false,
            attainment: Default::default(),
            burn_rate: nan,
            goodput_requests_per_second: None,
            goodput_tokens_per_second: None,
            requests: 0.0,
        },
    }
}
