//! From a [`Report`](crate::report::Report) to the flat list of samples that /metrics
//! and `goodput replay` both show (DESIGN.md §4).
//!
//! One function builds the list so the two outputs cannot drift. Non-finite values are
//! left out rather than exported: a NaN quantile (no observations in the window) is
//! *absent*, and so is the +Inf upper side of a bracket whose quantile fell in the +Inf
//! bucket (JSON, which replay prints, has no Inf).

use crate::canonical::HistogramKind;
use crate::report::{KvBand, Report, WindowReport};

/// One exported sample: family name, labels in order, value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ExportSample {
    pub name: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

pub const TTFT: &str = "llm_slo_ttft_seconds";
pub const TPOT: &str = "llm_slo_tpot_seconds";
pub const ITL: &str = "llm_slo_itl_seconds";
pub const E2E: &str = "llm_slo_e2e_seconds";
pub const BRACKET: &str = "llm_slo_quantile_bracket_seconds";
pub const TOKENS: &str = "llm_slo_tokens_per_second";
pub const REQUESTS: &str = "llm_slo_requests_per_second";
pub const KV_UTILIZATION: &str = "llm_slo_kv_cache_utilization_ratio";
pub const KV_BAND_TIME: &str = "llm_slo_kv_cache_band_time_ratio";
pub const TARGET_UP: &str = "llm_slo_target_up";
pub const SCRAPE_DURATION: &str = "llm_slo_scrape_duration_seconds";
pub const SCRAPE_ERRORS: &str = "llm_slo_scrape_errors_total";

/// Every family this module emits, in output order, with HELP and TYPE.
pub const FAMILIES: &[(&str, &str, &str)] = &[
    (
        TTFT,
        "Time to first token quantile over the window, PromQL-exact histogram_quantile of the engine's buckets.",
        "gauge",
    ),
    (TPOT, "Per-request time per output token quantile over the window (PromQL-exact).", "gauge"),
    (ITL, "Inter-token latency quantile over the window (PromQL-exact).", "gauge"),
    (E2E, "End-to-end request latency quantile over the window (PromQL-exact).", "gauge"),
    (
        BRACKET,
        "Bounds of the histogram bucket that holds each exported quantile; the quantile is interpolated inside.",
        "gauge",
    ),
    (
        TOKENS,
        "Token throughput, sum over shards of rate(tokens[window]); direction=input is prompt, output is generated.",
        "gauge",
    ),
    (REQUESTS, "Finished requests per second over the window, every finish reason.", "gauge"),
    (KV_UTILIZATION, "KV-cache usage (0-1) over the window's scrapes: last, mean, max.", "gauge"),
    (KV_BAND_TIME, "Share of the window's scrapes with KV-cache usage in each band.", "gauge"),
    (TARGET_UP, "1 when the last scrape of the target succeeded.", "gauge"),
    (SCRAPE_DURATION, "Duration of the last scrape of the target.", "gauge"),
    (SCRAPE_ERRORS, "Failed scrapes of the target since start, by reason.", "counter"),
];

/// HELP text and TYPE of an exported family.
pub fn family_meta(name: &str) -> Option<(&'static str, &'static str)> {
    FAMILIES.iter().find(|f| f.0 == name).map(|f| (f.1, f.2))
}

/// The quantile family of a latency histogram, if it is exported.
pub fn latency_family(kind: HistogramKind) -> Option<&'static str> {
    match kind {
        HistogramKind::Ttft => Some(TTFT),
        HistogramKind::Tpot => Some(TPOT),
        HistogramKind::Itl => Some(ITL),
        HistogramKind::E2e => Some(E2E),
        _ => None,
    }
}

/// The `quantile` label: shortest decimal that round-trips (`0.5`, `0.99`).
pub fn quantile_label(q: f64) -> String {
    format!("{q}")
}

/// Every sample for a report, grouped by family, in a stable order.
pub fn samples(report: &Report) -> Vec<ExportSample> {
    let mut by_family: Vec<Vec<ExportSample>> = vec![Vec::new(); FAMILIES.len()];
    let mut emit = |name: &'static str, labels: Vec<(&'static str, String)>, value: f64| {
        if !value.is_finite() {
            return;
        }
        if let Some(i) = FAMILIES.iter().position(|f| f.0 == name) {
            by_family[i].push(ExportSample { name, labels, value });
        }
    };
    for t in &report.targets {
        for m in &t.models {
            for w in &m.windows {
                let base = vec![("target", t.target.clone()), ("model", m.model.clone()), ("window", w.window.label())];
                window_samples(&base, w, &mut emit);
            }
        }
        let target = || vec![("target", t.target.clone())];
        emit(TARGET_UP, target(), if t.health.up { 1.0 } else { 0.0 });
        if let Some(d) = t.health.last_scrape_duration_seconds {
            emit(SCRAPE_DURATION, target(), d);
        }
        for (reason, n) in &t.health.errors_total {
            let mut l = target();
            l.push(("reason", reason.clone()));
            emit(SCRAPE_ERRORS, l, *n as f64);
        }
    }
    by_family.into_iter().flatten().collect()
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
        emit(family, with(&[("quantile", q.clone())]), lq.value);
        if let Some((lower, upper)) = lq.bracket {
            for (side, v) in [("lower", lower), ("upper", upper)] {
                let l =
                    with(&[("metric", lq.metric.as_str().to_string()), ("quantile", q.clone()), ("side", side.into())]);
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
    if let Some(kv) = &w.kv_cache {
        for (stat, v) in [("last", kv.last), ("mean", kv.mean), ("max", kv.max)] {
            emit(KV_UTILIZATION, with(&[("stat", stat.into())]), v);
        }
        for band in KvBand::ALL {
            let share = kv.band_time.get(&band).copied().unwrap_or(0.0);
            emit(KV_BAND_TIME, with(&[("band", band.as_str().into())]), share);
        }
    }
}

#[cfg(test)]
mod tests;
