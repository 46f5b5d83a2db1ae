//! SLOs over one window of one model: per-clause attainment, joint attainment with
//! failures counted as bad, goodput and burn rate (docs/architecture.md#joint-attainment).

use super::range::ModelRange;
use super::ratios;
use crate::canonical::GaugeKind;
use crate::canonical::{CounterKind, FinishReason, HistogramKind};
use crate::report::{SloReport, SloStatus, SloValues};
use crate::slo::{Clause, HistogramClause, HistogramCounts, Slo, burn_rate};

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
    let counts = match counts(spec, m) {
        Ok(c) => c,
        Err(why) => return SloStatus::NotEvaluable { reason: why.to_string() },
    };
    let Some(a) = counts.attainment() else { return SloStatus::NoTraffic };
    let joint = a.joint;
    let mut attainment = a.clauses;
    attainment.insert(Clause::Joint, joint);
    SloStatus::Evaluated(SloValues {
        attainment,
        burn_rate: burn_rate(joint, spec.objective.get()),
        goodput_requests_per_second: requests_per_second.map(|r| joint.scale(r)),
        goodput_tokens_per_second: output_tokens_per_second.map(|r| joint.scale(r)),
        requests: counts.finished.unwrap_or(f64::NAN),
        failed: counts.failed,
    })
}

/// Why an SLO is not evaluable from histograms over a window no scrape reached.
pub const NO_SCRAPE: &str =
    "no successful scrape of this model in the window (the target is down or no longer serves it)";

/// Why an SLO cannot be evaluated from one model's histograms. Its text is the reason the
/// report, page and `inspect` show.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotEvaluable {
    /// No scrape reached the window ([`NO_SCRAPE`]).
    #[error("{}", NO_SCRAPE)]
    NoScrape,
    /// A clause's histogram is absent or was dropped as unreadable.
    #[error("{}: {}, or none usable (see scrape warnings)", clause.as_str(), missing_reason(*kind))]
    NoHistogram { clause: Clause, kind: HistogramKind },
}

/// One SLO's histogram counts over one model's range ([`HistogramCounts`]: the one
/// definition of attainment from histograms), or why the SLO cannot be evaluated on it.
pub fn counts(spec: &Slo, m: &ModelRange) -> Result<HistogramCounts, NotEvaluable> {
    // Without a scrape in the window nothing is known of the engine's histograms: saying
    // the engine has none would blame the engine for a target that is down.
    if m.span().is_none() {
        return Err(NotEvaluable::NoScrape);
    }
    let mut clauses = Vec::new();
    for (clause, threshold) in spec.clauses() {
        let kind = histogram_of(clause);
        let Some(h) = ratios::histogram(m, kind) else {
            // The adapter also drops a histogram it cannot read honestly (no +Inf bucket,
            // NaN counts): that is counted in llm_slo_scrape_warnings_total.
            return Err(NotEvaluable::NoHistogram { clause, kind });
        };
        clauses.push(HistogramClause::of(clause, &h, threshold.as_secs_f64()));
    }
    Ok(HistogramCounts {
        finished: ratios::counter_all(m, CounterKind::RequestsFinished),
        failed: ratios::counter(m, CounterKind::RequestsFinished, |r| r.is_some_and(FinishReason::is_failure))
            .unwrap_or(0.0),
        clauses,
        in_flight_at_start: in_flight_at_start(m),
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
