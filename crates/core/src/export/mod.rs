//! From a [`Report`](crate::report::Report) to the flat list of samples that /metrics
//! and `goodput replay` both show (docs/metrics.md).
//!
//! One function builds the list so the two outputs cannot drift. Non-finite values are
//! left out rather than exported: a NaN quantile (no observations in the window) is
//! *absent*, and so is the +Inf upper side of a bracket whose quantile fell in the +Inf
//! bucket (JSON, which replay prints, has no Inf).

use crate::canonical::WarningReason;
use crate::report::{KvBand, Report, SCRAPE_ERROR_REASONS, SloStatus, TargetReport, WindowReport};

pub mod alerts;
pub mod budget;
pub mod capacity;
mod families;
pub mod gpu;
pub mod limits;
pub mod requests;

pub use families::*;

/// One exported sample: family name, labels in order, value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ExportSample {
    pub name: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

/// `source="metrics"`: the label that tells the histogram-derived quantiles, attainment,
/// goodput, burn rate and window counts from the request-derived ones beside them
/// (`tap`, `otlp`; [`requests`]).
fn metrics() -> (&'static str, String) {
    ("source", "metrics".to_string())
}

/// The [`QUANTILE_LABEL`] value: shortest decimal that round-trips (`0.5`, `0.99`).
pub fn quantile_label(q: f64) -> String {
    format!("{q}")
}

/// Every sample for a report, grouped by family, in a stable order.
pub fn samples(report: &Report) -> Vec<ExportSample> {
    let mut out = target_family_samples(&report.targets);
    out.extend(limits::samples(&report.limits));
    out.extend(requests::samples(report));
    out.extend(report_wide_samples(report));
    out.extend(target_gpu_samples(&report.targets));
    out
}

/// The samples of `targets` alone: what [`samples`] gives for them, without the families
/// of the report as a whole. A large report is rendered a slice of targets at a time
/// (the daemon's /metrics), so that its samples never all exist at once; with
/// [`report_samples`] these are the same samples as [`samples`], in each family in the
/// same order.
pub fn target_samples(targets: &[TargetReport]) -> Vec<ExportSample> {
    let mut out = target_family_samples(targets);
    out.extend(requests::target_samples(targets));
    out.extend(target_gpu_samples(targets));
    out
}

/// The samples of `report` that belong to no one target: the SLO limits, the request path,
/// budgets, capacity, alerts and GPUs ([`target_samples`]).
pub fn report_samples(report: &Report) -> Vec<ExportSample> {
    let mut out = limits::samples(&report.limits);
    out.extend(requests::request_path_samples(report));
    out.extend(report_wide_samples(report));
    out
}

fn report_wide_samples(report: &Report) -> Vec<ExportSample> {
    let mut out = budget::samples(&report.budgets);
    out.extend(capacity::samples(&report.capacity));
    out.extend(alerts::samples_of(&report.alerts));
    out.extend(alerts::readiness_samples(&report.alert_readiness));
    out.extend(gpu::gpu_samples(&report.gpus, None));
    out
}

fn target_gpu_samples(targets: &[TargetReport]) -> Vec<ExportSample> {
    let mut out = Vec::new();
    for t in targets {
        for m in &t.models {
            for w in &m.windows {
                if let Some(d) = &w.gpu {
                    out.extend(gpu::derived_samples(&t.target, &m.model, &w.window.label(), d));
                }
            }
        }
    }
    out
}

/// The families of this module for each target, grouped by family.
fn target_family_samples(targets: &[TargetReport]) -> Vec<ExportSample> {
    let mut by_family: Vec<Vec<ExportSample>> = vec![Vec::new(); FAMILIES.len()];
    let mut emit = |name: &'static str, labels: Vec<(&'static str, String)>, value: f64| {
        if !value.is_finite() {
            return;
        }
        if let Some(i) = FAMILIES.iter().position(|f| f.0 == name) {
            by_family[i].push(ExportSample { name, labels, value });
        }
    };
    for t in targets {
        for m in &t.models {
            let model = vec![("target", t.target.clone()), ("model", m.model.clone())];
            last_scrape_samples(&model, &m.windows, &mut emit);
            for w in &m.windows {
                let mut base = model.clone();
                base.push(("window", w.window.label()));
                window_samples(&base, w, &mut emit);
            }
        }
        let target = || vec![("target", t.target.clone())];
        emit(TARGET_UP, target(), if t.health.up { 1.0 } else { 0.0 });
        if !t.health.labels.is_empty() {
            let mut l = target();
            l.extend(TARGET_INFO_LABELS.iter().filter_map(|k| t.health.labels.get(*k).map(|v| (*k, v.clone()))));
            emit(TARGET_INFO, l, 1.0);
        }
        if let Some(d) = t.health.last_scrape_duration_seconds {
            emit(SCRAPE_DURATION, target(), d);
        }
        // Every known reason from the start, at 0 until it happens: a counter that appears
        // only with its first increment hides that increment from rate() and increase().
        let known = SCRAPE_ERROR_REASONS.iter().map(|r| (*r, t.health.errors_total.get(*r).copied().unwrap_or(0)));
        let other = t.health.errors_total.iter().filter(|(r, _)| !SCRAPE_ERROR_REASONS.contains(&r.as_str()));
        for (reason, n) in known.chain(other.map(|(r, n)| (r.as_str(), *n))) {
            let mut l = target();
            l.push(("reason", reason.to_string()));
            emit(SCRAPE_ERRORS, l, n as f64);
        }
        if let Some(ms) = t.health.last_successful_scrape_ms {
            emit(LAST_SCRAPE_SUCCESS, target(), ms as f64 / 1000.0);
        }
        if let Some(ms) = t.health.last_evaluation_ms {
            emit(LAST_EVALUATION, target(), ms as f64 / 1000.0);
        }
        // Warnings follow the same from-0 convention as errors.
        let known = WarningReason::ALL
            .iter()
            .map(|r| (r.as_str(), t.health.warnings_total.get(r.as_str()).copied().unwrap_or(0)));
        let other =
            t.health.warnings_total.iter().filter(|(r, _)| WarningReason::ALL.iter().all(|k| k.as_str() != r.as_str()));
        for (reason, n) in known.chain(other.map(|(r, n)| (r.as_str(), *n))) {
            let mut l = target();
            l.push(("reason", reason.to_string()));
            emit(SCRAPE_WARNINGS, l, n as f64);
        }
    }
    by_family.into_iter().flatten().collect()
}

/// Series of the last scrape, exported once per target and model without a `window` label
/// (docs/metrics.md#series-without-a-window): the KV-cache usage and band, the KV capacity,
/// and the running and waiting requests, each `stat="last"`. Every window that holds a
/// scrape ends with the same last scrape, so per window they would repeat one value. They
/// come from the first window that has them; a window without any scrape has none.
fn last_scrape_samples(
    model: &[(&'static str, String)],
    windows: &[WindowReport],
    emit: &mut impl FnMut(&'static str, Vec<(&'static str, String)>, f64),
) {
    let with = |extra: &[(&'static str, String)]| {
        let mut l = model.to_vec();
        l.extend_from_slice(extra);
        l
    };
    let last = || ("stat", "last".to_string());
    if let Some(kv) = windows.iter().find_map(|w| w.kv_cache.as_ref()) {
        emit(KV_UTILIZATION, with(&[last()]), kv.last);
        for band in KvBand::ALL {
            emit(KV_CURRENT_BAND, with(&[("band", band.as_str().into())]), if kv.band == band { 1.0 } else { 0.0 });
        }
    }
    if let Some(v) = windows.iter().find_map(|w| w.kv_capacity_tokens) {
        emit(KV_CAPACITY, with(&[]), v);
    }
    for (family, stats) in
        [(RUNNING, windows.iter().find_map(|w| w.running)), (WAITING, windows.iter().find_map(|w| w.waiting))]
    {
        if let Some(s) = stats {
            emit(family, with(&[last()]), s.last);
        }
    }
}

fn window_samples(
    base: &[(&'static str, String)],
    w: &WindowReport,
    emit: &mut impl FnMut(&'static str, Vec<(&'static str, String)>, f64),
) {
    let with = |extra: &[(&'static str, String)]| {
        let mut l = base.to_vec();
        l.extend_from_slice(extra);
        l
    };
    for lq in &w.latency {
        let Some(family) = latency_family(lq.metric) else { continue };
        if lq.value.is_nan() {
            continue;
        }
        let q = quantile_label(lq.quantile);
        emit(family, with(&[metrics(), (QUANTILE_LABEL, q.clone())]), lq.value);
        if let Some((lower, upper)) = lq.bracket {
            for (side, v) in [("lower", lower), ("upper", upper)] {
                let l = with(&[
                    ("metric", lq.metric.as_str().to_string()),
                    (QUANTILE_LABEL, q.clone()),
                    ("side", side.into()),
                ]);
                emit(BRACKET, l, v);
            }
        }
    }
    if let Some(v) = w.input_tokens_per_second {
        emit(TOKENS, with(&[("direction", "input".into())]), v);
    }
    if let Some(v) = w.output_tokens_per_second {
        emit(TOKENS, with(&[("direction", "output".into())]), v);
    }
    if let Some(v) = w.requests_per_second {
        emit(REQUESTS, with(&[]), v);
    }
    for f in &w.finish_reasons {
        emit(FINISHED_BY_REASON, with(&[("finished_reason", f.reason.as_str().into())]), f.per_second);
    }
    for m in &w.latency_means {
        emit(LATENCY_MEAN, with(&[metrics(), ("metric", m.metric.as_str().into())]), m.seconds);
    }
    if let Some(kv) = &w.kv_cache {
        for (stat, v) in [("mean", kv.mean), ("max", kv.max)] {
            emit(KV_UTILIZATION, with(&[("stat", stat.into())]), v);
        }
        for band in KvBand::ALL {
            let share = kv.band_time.get(&band).copied().unwrap_or(0.0);
            emit(KV_BAND_TIME, with(&[("band", band.as_str().into())]), share);
        }
    }
    slo_samples(&with, w, emit);
    requests::window_samples(&with, w, emit);
    other_samples(&with, w, emit);
    emit(WINDOW_COVERAGE, with(&[]), w.coverage);
}

fn slo_samples(
    with: &impl Fn(&[(&'static str, String)]) -> Vec<(&'static str, String)>,
    w: &WindowReport,
    emit: &mut impl FnMut(&'static str, Vec<(&'static str, String)>, f64),
) {
    for s in &w.slos {
        let slo = || ("slo", s.slo.clone());
        let values = match &s.status {
            SloStatus::Evaluated(v) => v,
            SloStatus::NotEvaluable { .. } => {
                emit(SLO_EVALUABLE, with(&[metrics(), slo()]), 0.0);
                continue;
            }
            SloStatus::NoTraffic => {
                emit(SLO_EVALUABLE, with(&[metrics(), slo()]), 1.0);
                continue;
            }
        };
        emit(SLO_EVALUABLE, with(&[metrics(), slo()]), 1.0);
        for (clause, b) in &values.attainment {
            for (bound, v) in b.labelled() {
                let l = with(&[metrics(), slo(), ("clause", clause.as_str().into()), ("bound", bound.into())]);
                emit(ATTAINMENT, l, v);
            }
        }
        for (family, b) in
            [(GOODPUT_TOKENS, values.goodput_tokens_per_second), (GOODPUT_REQUESTS, values.goodput_requests_per_second)]
        {
            for (bound, v) in b.iter().flat_map(|b| b.labelled()) {
                emit(family, with(&[metrics(), slo(), ("bound", bound.into())]), v);
            }
        }
        for (bound, v) in values.burn_rate.labelled() {
            emit(BURN_RATE, with(&[metrics(), slo(), ("bound", bound.into())]), v);
        }
        emit(WINDOW_REQUESTS, with(&[metrics(), slo(), ("outcome", "finished".into())]), values.requests);
        emit(WINDOW_REQUESTS, with(&[metrics(), slo(), ("outcome", "failed".into())]), values.failed);
    }
}

fn other_samples(
    with: &impl Fn(&[(&'static str, String)]) -> Vec<(&'static str, String)>,
    w: &WindowReport,
    emit: &mut impl FnMut(&'static str, Vec<(&'static str, String)>, f64),
) {
    for (family, stats) in [(RUNNING, w.running), (WAITING, w.waiting)] {
        for (stat, v) in stats.iter().flat_map(|s| [("mean", s.mean), ("max", s.max)]) {
            emit(family, with(&[("stat", stat.into())]), v);
        }
    }
    if let Some(v) = w.preemptions_per_second {
        emit(PREEMPTIONS, with(&[]), v);
    }
    if let Some(b) = &w.ttft_breakdown {
        let parts = [("total", Some(b.ttft)), ("queue", b.queue), ("prefill", b.prefill), ("other", b.other)];
        for (component, v) in parts {
            if let Some(v) = v {
                emit(TTFT_COMPONENT, with(&[("component", component.into())]), v);
            }
        }
    }
    for (direction, v) in [("input", w.mean_prompt_tokens), ("output", w.mean_output_tokens)] {
        if let Some(v) = v {
            emit(REQUEST_TOKENS_MEAN, with(&[("direction", direction.into())]), v);
        }
    }
    for &(le, share) in &w.prompt_length_mix {
        emit(PROMPT_LENGTH_SHARE, with(&[(PROMPT_TOKENS_LE_LABEL, format!("{le}"))]), share);
    }
    for &(le, share) in &w.generation_length_mix {
        emit(GENERATION_LENGTH_SHARE, with(&[(GENERATION_TOKENS_LE_LABEL, format!("{le}"))]), share);
    }
    if let Some(sd) = &w.spec_decode {
        if let Some(v) = sd.acceptance_ratio {
            emit(SPEC_ACCEPTANCE, with(&[]), v);
        }
        if let Some(v) = sd.mean_accepted_length {
            emit(SPEC_ACCEPTED_LENGTH, with(&[]), v);
        }
        for &(pos, v) in &sd.per_position {
            emit(SPEC_POSITION, with(&[("position", pos.to_string())]), v);
        }
        if let Some(v) = sd.speedup_estimate {
            emit(SPEC_SPEEDUP, with(&[]), v);
        }
    }
    if let Some(v) = w.prefix_cache_hit_ratio {
        emit(PREFIX_HIT, with(&[]), v);
    }
}

#[cfg(test)]
mod tests;
