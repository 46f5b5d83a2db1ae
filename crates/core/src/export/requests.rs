//! The request path's samples (docs/metrics.md#exact-values-from-requests).
//!
//! Request-derived quantiles, attainment, goodput, burn rate and window counts go into the
//! same families as the histogram-derived ones, told apart by `source` (`tap`, `otlp`; the
//! histogram-derived series say `source="metrics"`): [`emit_window`]. The families only the
//! request path has come from [`emit_window_own`] (coverage, TTFT gap) and [`emit_path`]
//! (cumulative counters, the inbox and store).

use super::{
    Emit, Label, Labels, QUANTILE_LABEL, SLO_EVALUABLE, WINDOW_REQUESTS, latency_family, quantile_label, slo_values,
};
use crate::report::{SloStatus, WindowReport};
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

/// The request-derived values of one window, into the families they share with the
/// histogram-derived ones. `base` is the window's target, model and window labels.
pub fn emit_window(base: &[Label<'_>], w: &WindowReport, out: &mut impl Emit) {
    for r in &w.requests {
        let source = ("source", r.source.as_str());
        for l in &r.latency {
            if let Some(family) = latency_family(l.metric) {
                let q = quantile_label(l.quantile);
                out.sample(family, Labels::new(base, &[source, (QUANTILE_LABEL, &q)]), l.value);
            }
        }
        for s in &r.slos {
            let slo = [source, ("slo", s.slo.as_str())];
            let values = match &s.status {
                SloStatus::Evaluated(v) => v,
                SloStatus::NotEvaluable { .. } => {
                    out.sample(SLO_EVALUABLE, Labels::new(base, &slo), 0.0);
                    continue;
                }
                SloStatus::NoTraffic => {
                    out.sample(SLO_EVALUABLE, Labels::new(base, &slo), 1.0);
                    continue;
                }
            };
            out.sample(SLO_EVALUABLE, Labels::new(base, &slo), 1.0);
            slo_values(base, &slo, values, out);
        }
        // Counted for every SLO row, as the histogram path does; `unobservable` is the
        // requests left out of the joint population.
        for s in &r.slos {
            let joint = s.counts.get(&crate::slo::Clause::Joint).copied().unwrap_or_default();
            for (outcome, n) in [("finished", r.requests), ("failed", r.failed), ("unobservable", joint.unobservable)] {
                let own = [source, ("slo", s.slo.as_str()), ("outcome", outcome)];
                out.sample(WINDOW_REQUESTS, Labels::new(base, &own), n as f64);
            }
        }
    }
}

/// The families only the request path has, of one window: each source's coverage and TTFT
/// gap. `base` is the window's target, model and window labels.
pub fn emit_window_own(base: &[Label<'_>], w: &WindowReport, out: &mut impl Emit) {
    for r in &w.requests {
        let source = ("source", r.source.as_str());
        out.sample(COVERAGE, Labels::new(base, &[source]), r.coverage);
        let Some(gap) = &r.ttft_gap else { continue };
        let reference = ("reference", gap.reference.as_str());
        if let Some(mean) = gap.mean {
            out.sample(TTFT_GAP, Labels::new(base, &[reference, ("stat", "mean")]), mean);
        }
        for &(q, v) in &gap.quantiles {
            let q = quantile_label(q);
            out.sample(TTFT_GAP, Labels::new(base, &[reference, ("stat", "quantile"), (QUANTILE_LABEL, &q)]), v);
        }
    }
}

/// The request path's counters since start: per series, the inbox and the store.
pub fn emit_path(p: &RequestPathReport, out: &mut impl Emit) {
    for s in &p.series {
        let series = [("target", s.target.as_str()), ("model", s.model.as_str()), ("source", s.source.as_str())];
        let known = KNOWN_STATUSES.iter().map(|st| st.label());
        let seen = s
            .requests
            .keys()
            .filter(|k| KNOWN_STATUSES.iter().all(|st| st.label() != k.as_str()))
            .map(|k| std::borrow::Cow::Borrowed(k.as_str()));
        for status in known.chain(seen) {
            let n = s.requests.get(status.as_ref()).copied().unwrap_or(0);
            out.sample(REQUESTS_TOTAL, Labels::new(&series, &[("status", &status)]), n as f64);
        }
        for (slo, n) in &s.good_requests {
            let own = [("slo", slo.as_str()), series[2]];
            out.sample(GOOD_REQUESTS_TOTAL, Labels::new(&series[..2], &own), *n as f64);
        }
        out.sample(HELD, Labels::new(&series, &[]), s.records_held as f64);
        out.sample(EVICTED, Labels::new(&series, &[]), s.evicted_by_cap as f64);
    }
    if let Some(inbox) = p.inbox {
        out.sample(INBOX, Labels::new(&[], &[("outcome", "accepted")]), inbox.accepted as f64);
        out.sample(INBOX, Labels::new(&[], &[("outcome", "dropped")]), inbox.dropped as f64);
    }
    for (reason, n) in &p.rejected {
        out.sample(REJECTED, Labels::new(&[], &[("reason", reason)]), *n as f64);
    }
}

/// HELP text and TYPE of a request-path family.
pub fn family_meta(name: &str) -> Option<(&'static str, &'static str)> {
    FAMILIES.iter().find(|f| f.0 == name).map(|f| (f.1, f.2))
}
