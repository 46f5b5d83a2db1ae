//! SLOs over one window of one model: per-clause attainment, joint attainment with
//! failures counted as bad, goodput and burn rate (docs/architecture.md#joint-attainment).

use std::collections::BTreeMap;

use super::range::ModelRange;
use super::ratios;
use crate::canonical::GaugeKind;
use crate::canonical::{CounterKind, FinishReason, HistogramKind};
use crate::report::{SloReport, SloStatus, SloValues};
use crate::slo::{Bounded, Clause, Slo, attainment, burn_rate, joint, restate};

/// The histogram a clause is measured on.
pub fn histogram_of(clause: Clause) -> HistogramKind {
    match clause {
        Clause::Ttft => HistogramKind::Ttft,
        Clause::Tpot => HistogramKind::Tpot,
        Clause::E2e | Clause::Joint => HistogramKind::E2e,
    }
}

/// Why a clause can't be evaluated on an engine that lacks its histogram.
pub fn missing_reason(kind: HistogramKind) -> &'static str {
    match kind {
        HistogramKind::Ttft => "the engine exposes no TTFT histogram (TGI has none)",
        HistogramKind::Tpot => {
            "the engine exposes no per-request TPOT histogram (vLLM < 0.11, SGLang and TGI have none; per-step ITL is a different quantity)"
        }
        _ => "the engine exposes no end-to-end latency histogram",
    }
}

/// Evaluates one SLO on one model's range. `requests_per_second` and
/// `output_tokens_per_second` are the window's PromQL rates, which goodput scales.
pub fn evaluate(
    spec: &Slo,
    m: &ModelRange,
    requests_per_second: Option<f64>,
    output_tokens_per_second: Option<f64>,
) -> SloReport {
    let status = status(spec, m, requests_per_second, output_tokens_per_second);
    SloReport { slo: spec.name.clone(), objective: spec.objective.get(), status }
}

fn status(
    spec: &Slo,
    m: &ModelRange,
    requests_per_second: Option<f64>,
    output_tokens_per_second: Option<f64>,
) -> SloStatus {
    let mut per_clause: BTreeMap<Clause, Bounded> = BTreeMap::new();
    for (clause, threshold) in spec.clauses() {
        let kind = histogram_of(clause);
        let threshold = threshold.as_secs_f64();
        let Some(h) = ratios::histogram(m, kind) else {
            // The adapter also drops a histogram it cannot read honestly (no +Inf bucket,
            // NaN counts): that is counted in llm_slo_scrape_warnings_total.
            let reason = format!("{}: {}, or none usable (see scrape warnings)", clause.as_str(), missing_reason(kind));
            return SloStatus::NotEvaluable { reason };
        };
        match attainment(&h, threshold) {
            Some(a) => {
                per_clause.insert(clause, a);
            }
            None => return SloStatus::NoTraffic,
        }
    }
    let requests = ratios::counter_all(m, CounterKind::RequestsFinished);
    let failed = ratios::counter(m, CounterKind::RequestsFinished, |r| r.is_some_and(FinishReason::is_failure));
    let failed_share = ratios::ratio(failed, requests).unwrap_or(0.0);
    let mut clauses: Vec<(Clause, Bounded)> = per_clause.iter().map(|(c, b)| (*c, *b)).collect();
    // Joint attainment counts the requests that finished in the window; TTFT counted
    // those whose first token came in it. Restate TTFT for the finished population, with
    // the requests in flight at the window's first scrape as the possible difference.
    if let (Some(n), Some(outsiders)) = (requests, in_flight_at_start(m))
        && let Some((_, ttft)) = clauses.iter_mut().find(|(c, _)| *c == Clause::Ttft)
        && let Some(observed) =
            ratios::histogram(m, HistogramKind::Ttft).and_then(|h| h.buckets.last().map(|b| b.count))
    {
        *ttft = restate(*ttft, observed, n, outsiders);
    }
    let clauses: Vec<Bounded> = clauses.into_iter().map(|(_, b)| b).collect();
    let joint = joint(&clauses, failed_share);
    per_clause.insert(Clause::Joint, joint);
    SloStatus::Evaluated(SloValues {
        attainment: per_clause,
        burn_rate: burn_rate(joint, spec.objective.get()),
        goodput_requests_per_second: requests_per_second.map(|r| joint.scale(r)),
        goodput_tokens_per_second: output_tokens_per_second.map(|r| joint.scale(r)),
        requests: requests.unwrap_or(f64::NAN),
        failed: failed.unwrap_or(0.0),
    })
}

/// Requests running or waiting at the first scrape of the window: an upper bound on the
/// finished requests whose first token came before it. `None` without those gauges, in
/// which case the TTFT bracket is used as measured (an approximation at window edges).
fn in_flight_at_start(m: &ModelRange) -> Option<f64> {
    let first = |k| m.gauge(k).map(|g| g.first);
    match (first(GaugeKind::Running), first(GaugeKind::Waiting)) {
        (None, None) => None,
        (r, w) => Some(r.unwrap_or(0.0) + w.unwrap_or(0.0)),
    }
}
