//! The request path's samples (docs/metrics.md#exact-values-from-requests).
//!
//! Request-derived quantiles, throughput, attainment, goodput, burn rate and window counts go into the
//! same families as the histogram-derived ones, told apart by `source` (`tap`, `otlp`; the
//! histogram-derived series say `source="metrics"`): [`emit_window`]. The families only the
//! request path has come from [`emit_window_own`] (coverage, TTFT gap) and [`emit_path`]
//! (cumulative counters, the inbox and store).

use super::emit::{Emit, Label, Labels};
use super::families::{
    QUANTILE_LABEL, REQUESTS, Source, TOKENS, Target, WINDOW_REQUESTS, latency_family, quantile_label,
};
use super::registry::{Family, LabelValue, Unit};
use super::slo::slo_status;
use crate::report::WindowReport;
use crate::request::{RequestPathReport, Status, Unmeasured};

pub const COVERAGE: &str = "llm_slo_request_window_coverage_ratio";
pub const TTFT_GAP: &str = "llm_slo_ttft_gap_seconds";
pub const TTFT_GAP_REQUESTS: &str = "llm_slo_ttft_gap_requests";
pub const REQUESTS_TOTAL: &str = "llm_slo_requests_total";
pub const GOOD_REQUESTS_TOTAL: &str = "llm_slo_good_requests_total";
pub const INBOX: &str = "llm_slo_request_inbox_records_total";
pub const REJECTED: &str = "llm_slo_request_store_rejected_total";
pub const HELD: &str = "llm_slo_request_store_records";
pub const EVICTED: &str = "llm_slo_request_store_evicted_total";
pub const SERIES_EVICTED: &str = "llm_slo_request_store_series_evicted_total";

crate::label_set! {
    pub Gap = [target, model, window, reference, stat, q];
    pub GapOutcome = [target, model, window, outcome];
    pub SeriesStatus = [target, model, source, status];
    pub SeriesSlo = [target, model, slo, source];
    pub Series = [target, model, source];
    pub Outcome = [outcome];
    pub Reason = [reason];
}

/// The reasons a tap forwards a request without a record (the daemon's tap families).
impl LabelValue for Unmeasured {
    const ALL: &'static [Unmeasured] = &Unmeasured::ALL;
    fn as_str(self) -> &'static str {
        Unmeasured::as_str(self)
    }
}

/// The request path's own families, in output order.
pub const FAMILIES: &[Family] = &[
    Family::gauge::<Source>(
        COVERAGE,
        Unit::Ratio,
        "Share of the window a request source has watched (0-1): time since the first request it reported for this target and model began, over the window.",
    ),
    Family::gauge::<Gap>(
        TTFT_GAP,
        Unit::Seconds,
        "Client-side TTFT from the tap minus the engine's TTFT of the same request (reference=response: the engine's times in the response, otlp: its span, by request id), over the requests paired in the window: stat=mean, min, or the q quantile of the per-request gaps.",
    ),
    Family::gauge::<GapOutcome>(
        TTFT_GAP_REQUESTS,
        Unit::Requests,
        "Tap requests with a TTFT that finished in the window, by whether they were paired with the engine's view of the same request (outcome=paired) or why not.",
    ),
    Family::counter::<SeriesStatus>(
        REQUESTS_TOTAL,
        Unit::Requests,
        "Requests a source measured since start, by how they ended (ok, http_<code>, stream_error, client_abort, upstream_reset, truncated).",
    ),
    Family::counter::<SeriesSlo>(
        GOOD_REQUESTS_TOTAL,
        Unit::Requests,
        "Requests a source measured since start that met every clause of the SLO, judged by the measured values.",
    ),
    Family::counter::<Outcome>(
        INBOX,
        Unit::Count,
        "Request records producers handed the daemon since start: accepted, or dropped because the inbox was full.",
    ),
    Family::counter::<Reason>(
        REJECTED,
        Unit::Count,
        "Request records the store refused since start, by reason: whole (unknown_target, invalid, future: in no window and no counter), or only their model name (model_too_long, unknown_model: counted under model=\"\" instead).",
    ),
    Family::gauge::<Series>(HELD, Unit::Count, "Request records held for exact windows (at most the per-series cap)."),
    Family::counter::<Series>(
        EVICTED,
        Unit::Count,
        "Request records pushed out by the per-series cap since start; windows reaching back past them are evaluated from time slots.",
    ),
    Family::counter::<Target>(
        SERIES_EVICTED,
        Unit::Count,
        "Request series (model and source) of a target pushed out since start to make room for a new one, the least recently seen first.",
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
        // Throughput over the very requests the source's goodput counts, so that goodput
        // is read beside a throughput of the same population (never above it).
        out.sample(TOKENS, Labels::new(base, &[source, ("direction", "output")]), r.output_tokens_per_second);
        out.sample(REQUESTS, Labels::new(base, &[source]), r.requests_per_second);
        for s in &r.slos {
            let slo = [source, ("slo", s.slo.as_str())];
            slo_status(base, &slo, &s.status, out);
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
        out.sample(TTFT_GAP_REQUESTS, Labels::new(base, &[("outcome", "paired")]), gap.paired as f64);
        for (why, n) in &gap.unpaired {
            out.sample(TTFT_GAP_REQUESTS, Labels::new(base, &[("outcome", why)]), *n as f64);
        }
        let reference = ("reference", gap.reference.as_str());
        for (stat, value) in [("mean", gap.mean), ("min", gap.min)] {
            if let Some(v) = value {
                out.sample(TTFT_GAP, Labels::new(base, &[reference, ("stat", stat)]), v);
            }
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
    for (target, n) in &p.series_evicted {
        out.sample(SERIES_EVICTED, Labels::new(&[], &[("target", target)]), *n as f64);
    }
}
