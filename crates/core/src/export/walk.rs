//! The walk over a [`Report`] that emits the samples /metrics and `goodput replay` both show
//! (docs/metrics.md), and the order their families come in.
//!
//! One walk emits them ([`emit_targets`], [`emit_report_wide`]) so the two outputs cannot
//! drift: the daemon writes each sample's text as it is emitted, replay collects them
//! ([`samples`]). Non-finite values are left out rather than exported: a NaN quantile (no
//! observations in the window) is *absent*, and so is the +Inf upper side of a bracket whose
//! quantile fell in the +Inf bucket (JSON, which replay prints, has no Inf).

use super::emit::{Collect, Emit, ExportSample, Finite, Label, Labels};
use super::families::*;
use super::registry::Family;
use super::slo::{METRICS, slo_status};
use super::{alerts, budget, capacity, gpu, limits, requests};
use crate::canonical::WarningReason;
use crate::report::{KvBand, Report, SCRAPE_ERROR_REASONS, TargetReport, WindowReport};

/// Every sample for a report, grouped by family, in a stable order: the per-target families,
/// then the report-wide ones, the GPU figures derived per window last.
pub fn samples(report: &Report) -> Vec<ExportSample> {
    let mut out = Collect::new(sample_rank);
    emit_targets(&report.targets, &mut out);
    emit_report_wide(report, &mut out);
    out.finish()
}

/// The order of [`samples`]' families.
pub(super) fn sample_rank(name: &str) -> Option<usize> {
    let tables =
        [FAMILIES, limits::FAMILIES, requests::FAMILIES, budget::FAMILIES, capacity::FAMILIES, alerts::FAMILIES];
    let before: usize = tables.iter().map(|t| t.len()).sum();
    position(&tables, name).or_else(|| gpu::reading_rank(name).map(|i| before + i))
}

/// The order /metrics writes the families of [`emit_targets`] in: the table of this module,
/// then the request path's, then the GPU figures in order of first appearance.
pub fn target_rank(name: &str) -> Option<usize> {
    position(&[FAMILIES, requests::FAMILIES], name)
}

/// The order /metrics writes the families of [`emit_report_wide`] in: the SLO limits, the
/// request path, budgets, capacity, alerts and GPUs.
pub fn report_rank(name: &str) -> Option<usize> {
    let tables = [limits::FAMILIES, requests::FAMILIES, budget::FAMILIES, capacity::FAMILIES, alerts::FAMILIES];
    let before: usize = tables.iter().map(|t| t.len()).sum();
    position(&tables, name).or_else(|| gpu::reading_rank(name).map(|i| before + i))
}

/// Emits the samples of `targets`, target by target: their windows, health, request-derived
/// values and GPU figures. Emitting the targets a slice at a time emits the same samples.
pub fn emit_targets(targets: &[TargetReport], out: &mut impl Emit) {
    let out = &mut Finite(out);
    for t in targets {
        target_samples(t, out);
    }
}

/// Emits the samples of `report` that belong to no one target: the SLO limits, the request
/// path's counters, budgets, capacity, alerts and GPUs.
pub fn emit_report_wide(report: &Report, out: &mut impl Emit) {
    let out = &mut Finite(out);
    limits::emit(&report.limits, out);
    if let Some(p) = &report.request_path {
        requests::emit_path(p, out);
    }
    budget::emit(&report.budgets, out);
    capacity::emit(&report.capacity, out);
    alerts::emit(&report.alerts, out);
    alerts::emit_readiness(&report.alert_readiness, out);
    gpu::emit_readings(&report.gpus, None, out);
}

fn target_samples(t: &TargetReport, out: &mut impl Emit) {
    for m in t.models.iter() {
        let model = [("target", t.target.as_str()), ("model", m.model.as_str())];
        last_scrape_samples(&model, &m.windows, out);
        for w in &m.windows {
            let label = w.window.label();
            let base = [model[0], model[1], ("window", label.as_str())];
            window_samples(&base, w, out);
            requests::emit_window_own(&base, w, out);
            if let Some(d) = &w.gpu {
                gpu::emit_derived(&base, d, out);
            }
        }
    }
    let target = [("target", t.target.as_str())];
    out.sample(TARGET_UP, Labels::new(&target, &[]), if t.health.up { 1.0 } else { 0.0 });
    if !t.health.labels.is_empty() {
        let info: Vec<Label<'_>> =
            TARGET_INFO_LABELS.iter().filter_map(|k| t.health.labels.get(*k).map(|v| (*k, v.as_str()))).collect();
        out.sample(TARGET_INFO, Labels::new(&target, &info), 1.0);
    }
    if let Some(d) = t.health.last_scrape_duration_seconds {
        out.sample(SCRAPE_DURATION, Labels::new(&target, &[]), d);
    }
    // Every known reason from the start, at 0 until it happens: a counter that appears
    // only with its first increment hides that increment from rate() and increase().
    let known = SCRAPE_ERROR_REASONS.iter().map(|r| (*r, t.health.errors_total.get(*r).copied().unwrap_or(0)));
    let other = t.health.errors_total.iter().filter(|(r, _)| !SCRAPE_ERROR_REASONS.contains(&r.as_str()));
    for (reason, n) in known.chain(other.map(|(r, n)| (r.as_str(), *n))) {
        out.sample(SCRAPE_ERRORS, Labels::new(&target, &[("reason", reason)]), n as f64);
    }
    if let Some(ms) = t.health.last_successful_scrape_ms {
        out.sample(LAST_SCRAPE_SUCCESS, Labels::new(&target, &[]), ms as f64 / 1000.0);
    }
    if let Some(ms) = t.health.last_evaluation_ms {
        out.sample(LAST_EVALUATION, Labels::new(&target, &[]), ms as f64 / 1000.0);
    }
    // Warnings follow the same from-0 convention as errors.
    let known =
        WarningReason::ALL.iter().map(|r| (r.as_str(), t.health.warnings_total.get(r.as_str()).copied().unwrap_or(0)));
    let other =
        t.health.warnings_total.iter().filter(|(r, _)| WarningReason::ALL.iter().all(|k| k.as_str() != r.as_str()));
    for (reason, n) in known.chain(other.map(|(r, n)| (r.as_str(), *n))) {
        out.sample(SCRAPE_WARNINGS, Labels::new(&target, &[("reason", reason)]), n as f64);
    }
}

/// Series of the last scrape, exported once per target and model without a `window` label
/// (docs/metrics.md#series-without-a-window): the KV-cache usage and band, the KV capacity,
/// and the running and waiting requests, each `stat="last"`. Every window that holds a
/// scrape ends with the same last scrape, so per window they would repeat one value. They
/// come from the first window that has them; a window without any scrape has none.
fn last_scrape_samples(model: &[Label<'_>], windows: &[WindowReport], out: &mut impl Emit) {
    let last = [("stat", "last")];
    if let Some(kv) = windows.iter().find_map(|w| w.kv_cache.as_ref()) {
        out.sample(KV_UTILIZATION, Labels::new(model, &last), kv.last);
        for band in KvBand::ALL {
            let value = if kv.band == band { 1.0 } else { 0.0 };
            out.sample(KV_CURRENT_BAND, Labels::new(model, &[("band", band.as_str())]), value);
        }
    }
    if let Some(v) = windows.iter().find_map(|w| w.kv_capacity_tokens) {
        out.sample(KV_CAPACITY, Labels::new(model, &[]), v);
    }
    for (family, stats) in
        [(RUNNING, windows.iter().find_map(|w| w.running)), (WAITING, windows.iter().find_map(|w| w.waiting))]
    {
        if let Some(s) = stats {
            out.sample(family, Labels::new(model, &last), s.last);
        }
    }
}

fn window_samples(base: &[Label<'_>], w: &WindowReport, out: &mut impl Emit) {
    for lq in &w.latency {
        let Some(family) = latency_family(lq.metric) else { continue };
        if lq.value.is_nan() {
            continue;
        }
        let q = quantile_label(lq.quantile);
        out.sample(family, Labels::new(base, &[METRICS, (QUANTILE_LABEL, &q)]), lq.value);
        if let Some((lower, upper)) = lq.bracket {
            for (side, v) in [("lower", lower), ("upper", upper)] {
                let own = [("metric", lq.metric.as_str()), (QUANTILE_LABEL, &q), ("side", side)];
                out.sample(BRACKET, Labels::new(base, &own), v);
            }
        }
    }
    if let Some(v) = w.input_tokens_per_second {
        out.sample(TOKENS, Labels::new(base, &[METRICS, ("direction", "input")]), v);
    }
    if let Some(v) = w.output_tokens_per_second {
        out.sample(TOKENS, Labels::new(base, &[METRICS, ("direction", "output")]), v);
    }
    if let Some(v) = w.requests_per_second {
        out.sample(REQUESTS, Labels::new(base, &[METRICS]), v);
    }
    for f in &w.finish_reasons {
        out.sample(FINISHED_BY_REASON, Labels::new(base, &[("finished_reason", f.reason.as_str())]), f.per_second);
    }
    for m in &w.latency_means {
        out.sample(LATENCY_MEAN, Labels::new(base, &[METRICS, ("metric", m.metric.as_str())]), m.seconds);
    }
    if let Some(kv) = &w.kv_cache {
        for (stat, v) in [("mean", kv.mean), ("max", kv.max)] {
            out.sample(KV_UTILIZATION, Labels::new(base, &[("stat", stat)]), v);
        }
        for band in KvBand::ALL {
            let share = kv.band_time.get(&band).copied().unwrap_or(0.0);
            out.sample(KV_BAND_TIME, Labels::new(base, &[("band", band.as_str())]), share);
        }
    }
    slo_samples(base, w, out);
    requests::emit_window(base, w, out);
    other_samples(base, w, out);
    out.sample(WINDOW_COVERAGE, Labels::new(base, &[]), w.coverage);
}

fn slo_samples(base: &[Label<'_>], w: &WindowReport, out: &mut impl Emit) {
    for s in &w.slos {
        let slo = [METRICS, ("slo", s.slo.as_str())];
        let Some(values) = slo_status(base, &slo, &s.status, out) else { continue };
        for (outcome, n) in [("finished", values.requests), ("failed", values.failed)] {
            out.sample(WINDOW_REQUESTS, Labels::new(base, &[slo[0], slo[1], ("outcome", outcome)]), n);
        }
    }
}

fn other_samples(base: &[Label<'_>], w: &WindowReport, out: &mut impl Emit) {
    for (family, stats) in [(RUNNING, w.running), (WAITING, w.waiting)] {
        for (stat, v) in stats.iter().flat_map(|s| [("mean", s.mean), ("max", s.max)]) {
            out.sample(family, Labels::new(base, &[("stat", stat)]), v);
        }
    }
    if let Some(v) = w.preemptions_per_second {
        out.sample(PREEMPTIONS, Labels::new(base, &[]), v);
    }
    if let Some(b) = &w.ttft_breakdown {
        let parts = [("total", Some(b.ttft)), ("queue", b.queue), ("prefill", b.prefill), ("other", b.other)];
        for (component, v) in parts {
            if let Some(v) = v {
                out.sample(TTFT_COMPONENT, Labels::new(base, &[("component", component)]), v);
            }
        }
    }
    for (direction, v) in [("input", w.mean_prompt_tokens), ("output", w.mean_output_tokens)] {
        if let Some(v) = v {
            out.sample(REQUEST_TOKENS_MEAN, Labels::new(base, &[("direction", direction)]), v);
        }
    }
    for &(le, share) in &w.prompt_length_mix {
        let le = format!("{le}");
        out.sample(PROMPT_LENGTH_SHARE, Labels::new(base, &[(PROMPT_TOKENS_LE_LABEL, &le)]), share);
    }
    for &(le, share) in &w.generation_length_mix {
        let le = format!("{le}");
        out.sample(GENERATION_LENGTH_SHARE, Labels::new(base, &[(GENERATION_TOKENS_LE_LABEL, &le)]), share);
    }
    if let Some(sd) = &w.spec_decode {
        if let Some(v) = sd.acceptance_ratio {
            out.sample(SPEC_ACCEPTANCE, Labels::new(base, &[]), v);
        }
        if let Some(v) = sd.mean_accepted_length {
            out.sample(SPEC_ACCEPTED_LENGTH, Labels::new(base, &[]), v);
        }
        for &(pos, v) in &sd.per_position {
            let pos = pos.to_string();
            out.sample(SPEC_POSITION, Labels::new(base, &[("position", &pos)]), v);
        }
        if let Some(v) = sd.speedup_estimate {
            out.sample(SPEC_SPEEDUP, Labels::new(base, &[]), v);
        }
    }
    if let Some(v) = w.prefix_cache_hit_ratio {
        out.sample(PREFIX_HIT, Labels::new(base, &[]), v);
    }
}

/// The position of `name` in `tables` taken one after the other.
fn position(tables: &[&[Family]], name: &str) -> Option<usize> {
    tables.iter().flat_map(|t| t.iter()).position(|f| f.name == name)
}
