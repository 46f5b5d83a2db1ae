//! The request path's samples (docs/metrics.md#exact-values-from-requests).
//!
//! Request-derived quantiles, attainment, goodput, burn rate and window counts go into the
//! same families as the histogram-derived ones, told apart by `source` (`tap`, `otlp`; the
//! histogram-derived series say `source="metrics"`): [`window_samples`] emits them through
//! the caller's per-family sink so each family stays in one block. The families only the
//! request path has (coverage, TTFT gap, cumulative counters, the inbox and store) come from
//! [`samples`].

use super::{
    ATTAINMENT, BURN_RATE, ExportSample, GOODPUT_REQUESTS, GOODPUT_TOKENS, QUANTILE_LABEL, SLO_EVALUABLE,
    WINDOW_REQUESTS, latency_family, quantile_label,
};
use crate::report::{Report, SloStatus, TargetReport, WindowReport};
use crate::request::{RequestPathReport, Status};

pub const COVERAGE: &str = "llm_slo_request_window_coverage_ratio";
pub const TTFT_GAP: &str = "llm_slo_ttft_gap_seconds";
pub const REQUESTS_TOTAL: &str = "llm_slo_requests_total";
pub const GOOD_REQUESTS_TOTAL: &str = "llm_slo_good_requests_total";
pub const INBOX: &str = "llm_slo_request_inbox_records_total";
pub const REJECTED: &str = "llm_slo_request_store_rejected_total";
pub const HELD: &str = "llm_slo_request_store_records";
pub const EVICTED: &str = "llm_slo_request_store_evicted_total";

/// The request path's own families, in output order, with HELP and TYPE.
pub const FAMILIES: &[(&str, &str, &str)] = &[
    (
        COVERAGE,
        "Share of the window a request source has watched (0-1): time since the first request it reported for this target and model began, over the window.",
        "gauge",
    ),
    (
        TTFT_GAP,
        "Client-side TTFT from the tap minus the engine's TTFT (reference=otlp spans, else metrics histograms): stat=mean is the difference of means, stat=quantile the difference of the q quantiles.",
        "gauge",
    ),
    (
        REQUESTS_TOTAL,
        "Requests a source measured since start, by how they ended (ok, http_<code>, stream_error, client_abort, upstream_reset, truncated).",
        "counter",
    ),
    (
        GOOD_REQUESTS_TOTAL,
        "Requests a source measured since start that met every clause of the SLO, judged by the measured values.",
        "counter",
    ),
    (
        INBOX,
        "Request records producers handed the daemon since start: accepted, or dropped because the inbox was full.",
        "counter",
    ),
    (
        REJECTED,
        "Request records the store refused since start, by reason (unknown_target, too_many_series, invalid, future).",
        "counter",
    ),
    (HELD, "Request records held for exact windows (at most the per-series cap).", "gauge"),
    (
        EVICTED,
        "Request records pushed out by the per-series cap since start; windows reaching back past them are evaluated from time slots.",
        "counter",
    ),
];

/// The statuses shown from the start, at 0 until they happen (`http_<code>` appear as seen).
const KNOWN_STATUSES: [Status; 5] =
    [Status::Ok, Status::StreamError, Status::ClientAbort, Status::UpstreamReset, Status::Truncated];

type Labels = Vec<(&'static str, String)>;

/// The request-derived values of one window, into the shared families. `with` prefixes the
/// window's target, model and window labels.
pub fn window_samples(
    with: &impl Fn(&[(&'static str, String)]) -> Labels,
    w: &WindowReport,
    emit: &mut impl FnMut(&'static str, Labels, f64),
) {
    for r in &w.requests {
        let source = || ("source", r.source.as_str().to_string());
        for l in &r.latency {
            if let Some(family) = latency_family(l.metric) {
                emit(family, with(&[source(), (QUANTILE_LABEL, quantile_label(l.quantile))]), l.value);
            }
        }
        for s in &r.slos {
            let slo = || ("slo", s.slo.clone());
            let values = match &s.status {
                SloStatus::Evaluated(v) => v,
                SloStatus::NotEvaluable { .. } => {
                    emit(SLO_EVALUABLE, with(&[source(), slo()]), 0.0);
                    continue;
                }
                SloStatus::NoTraffic => {
                    emit(SLO_EVALUABLE, with(&[source(), slo()]), 1.0);
                    continue;
                }
            };
            emit(SLO_EVALUABLE, with(&[source(), slo()]), 1.0);
            for (clause, b) in &values.attainment {
                for (bound, v) in b.labelled() {
                    let l = with(&[source(), slo(), ("clause", clause.as_str().into()), ("bound", bound.into())]);
                    emit(ATTAINMENT, l, v);
                }
            }
            for (family, b) in [
                (GOODPUT_TOKENS, values.goodput_tokens_per_second),
                (GOODPUT_REQUESTS, values.goodput_requests_per_second),
            ] {
                for (bound, v) in b.iter().flat_map(|b| b.labelled()) {
                    emit(family, with(&[source(), slo(), ("bound", bound.into())]), v);
                }
            }
            for (bound, v) in values.burn_rate.labelled() {
                emit(BURN_RATE, with(&[source(), slo(), ("bound", bound.into())]), v);
            }
        }
        // Counted for every SLO row, as the histogram path does; `unobservable` is the
        // requests left out of the joint population.
        for s in &r.slos {
            let joint = s.counts.get(&crate::slo::Clause::Joint).copied().unwrap_or_default();
            for (outcome, n) in [("finished", r.requests), ("failed", r.failed), ("unobservable", joint.unobservable)] {
                emit(WINDOW_REQUESTS, with(&[source(), ("slo", s.slo.clone()), ("outcome", outcome.into())]), n as f64);
            }
        }
    }
}

/// The request path's own families, grouped by family in [`FAMILIES`] order.
pub fn samples(report: &Report) -> Vec<ExportSample> {
    grouped(|emit| {
        windows_samples(&report.targets, emit);
        if let Some(p) = &report.request_path {
            path_samples(p, &mut |name, labels, value| emit(name, labels, value));
        }
    })
}

/// What [`samples`] gives for `targets`' windows alone.
pub fn target_samples(targets: &[TargetReport]) -> Vec<ExportSample> {
    grouped(|emit| windows_samples(targets, emit))
}

/// What [`samples`] gives for the report's request path alone.
pub fn request_path_samples(report: &Report) -> Vec<ExportSample> {
    grouped(|emit| {
        if let Some(p) = &report.request_path {
            path_samples(p, &mut |name, labels, value| emit(name, labels, value));
        }
    })
}

/// The samples `make` emits, grouped by family in [`FAMILIES`] order.
fn grouped(make: impl FnOnce(&mut dyn FnMut(&'static str, Labels, f64))) -> Vec<ExportSample> {
    let mut by_family: Vec<Vec<ExportSample>> = vec![Vec::new(); FAMILIES.len()];
    let mut emit = |name: &'static str, labels: Labels, value: f64| {
        if value.is_finite()
            && let Some(i) = FAMILIES.iter().position(|f| f.0 == name)
        {
            by_family[i].push(ExportSample { name, labels, value });
        }
    };
    make(&mut emit);
    by_family.into_iter().flatten().collect()
}

fn windows_samples(targets: &[TargetReport], emit: &mut dyn FnMut(&'static str, Labels, f64)) {
    for t in targets {
        for m in &t.models {
            for w in &m.windows {
                let base =
                    || vec![("target", t.target.clone()), ("model", m.model.clone()), ("window", w.window.label())];
                for r in &w.requests {
                    let mut l = base();
                    l.push(("source", r.source.as_str().into()));
                    emit(COVERAGE, l, r.coverage);
                    let Some(gap) = &r.ttft_gap else { continue };
                    let mut l = base();
                    l.push(("reference", gap.reference.as_str().into()));
                    if let Some(mean) = gap.mean {
                        let mut l = l.clone();
                        l.push(("stat", "mean".into()));
                        emit(TTFT_GAP, l, mean);
                    }
                    for &(q, v) in &gap.quantiles {
                        let mut l = l.clone();
                        l.extend([("stat", "quantile".into()), (QUANTILE_LABEL, quantile_label(q))]);
                        emit(TTFT_GAP, l, v);
                    }
                }
            }
        }
    }
}

fn path_samples(p: &RequestPathReport, emit: &mut impl FnMut(&'static str, Labels, f64)) {
    for s in &p.series {
        let series =
            || vec![("target", s.target.clone()), ("model", s.model.clone()), ("source", s.source.as_str().into())];
        let known = KNOWN_STATUSES.iter().map(|st| st.label().into_owned());
        let seen = s.requests.keys().filter(|k| KNOWN_STATUSES.iter().all(|st| st.label() != k.as_str())).cloned();
        for status in known.chain(seen) {
            let mut l = series();
            l.push(("status", status.clone()));
            emit(REQUESTS_TOTAL, l, s.requests.get(&status).copied().unwrap_or(0) as f64);
        }
        for (slo, n) in &s.good_requests {
            let l = vec![
                ("target", s.target.clone()),
                ("model", s.model.clone()),
                ("slo", slo.clone()),
                ("source", s.source.as_str().into()),
            ];
            emit(GOOD_REQUESTS_TOTAL, l, *n as f64);
        }
        emit(HELD, series(), s.records_held as f64);
        emit(EVICTED, series(), s.evicted_by_cap as f64);
    }
    if let Some(inbox) = p.inbox {
        emit(INBOX, vec![("outcome", "accepted".into())], inbox.accepted as f64);
        emit(INBOX, vec![("outcome", "dropped".into())], inbox.dropped as f64);
    }
    for (reason, n) in &p.rejected {
        emit(REJECTED, vec![("reason", reason.clone())], *n as f64);
    }
}

/// HELP text and TYPE of a request-path family.
pub fn family_meta(name: &str) -> Option<(&'static str, &'static str)> {
    FAMILIES.iter().find(|f| f.0 == name).map(|f| (f.1, f.2))
}
