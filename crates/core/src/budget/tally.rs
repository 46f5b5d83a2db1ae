//! What one interval adds to an SLO's period, and what the period's totals say.
//!
//! From histograms the interval's row is, per clause, the raw increase of the clause
//! histogram's observations and of those at or under the threshold (bracketed and
//! interpolated: [`HistogramCounts`], the definition a window's attainment uses), with the
//! finished and failed requests. The joint
//! attainment is worked out from the period's totals, not per interval: the marginals of a
//! few seconds describe different populations (TTFT is counted at the first token, the
//! finish at the end), while over a period of weeks the difference is the handful of
//! requests in flight at its edges.
//!
//! From requests (a tap, engine spans) each request is judged against the SLO as the
//! windows judge it ([`judge`]), so the row holds exact joint counts.

use crate::evaluate::range::ModelRange;
use crate::request::{Compact, Verdict, judge};
use crate::slo::{Bounded, Clause, HistogramClause, HistogramCounts, Slo, burn_rate};

/// Width of a histogram row: finished, failed, then four counts per clause.
pub fn histogram_width(slo: &Slo) -> usize {
    2 + 4 * slo.clauses().count()
}

/// Width of a request row: judged, surely good, possibly good.
pub const REQUEST_WIDTH: usize = 3;

/// One interval of one model's histograms against `slo`: `[finished, failed, (observed,
/// good lower, good estimate, good upper) per clause]`, the counts of [`HistogramCounts`].
/// `None` when the model lacks a clause's histogram (the SLO is not evaluable from metrics)
/// or a count is not a number.
pub fn histogram_row(m: &ModelRange, slo: &Slo) -> Option<Vec<f64>> {
    let c = crate::evaluate::slo::counts(slo, m).ok()?;
    let mut row = vec![c.finished.unwrap_or(0.0), c.failed];
    for k in &c.clauses {
        row.extend([k.observed, k.good.lower, k.good.estimate, k.good.upper]);
    }
    row.iter().all(|v| v.is_finite() && *v >= 0.0).then_some(row)
}

/// One request against `slo`: `None` when the SLO cannot judge it (a clause it did not
/// measure, on a request that succeeded), else its row.
pub fn request_row(c: &Compact, slo: &Slo) -> Option<[f64; REQUEST_WIDTH]> {
    match judge(c, slo).joint {
        Verdict::Good => Some([1.0, 1.0, 1.0]),
        Verdict::Maybe => Some([1.0, 0.0, 1.0]),
        Verdict::Bad => Some([1.0, 0.0, 0.0]),
        Verdict::Unobservable => None,
    }
}

/// An SLO over its period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeriodValues {
    /// Requests judged in the period: finished requests from histograms (or the clause
    /// observations when the engine counts no finishes), judged requests from a tap or spans.
    pub requests: f64,
    /// Joint attainment over the period.
    pub attainment: Bounded,
    /// Share of the period's error budget spent: `(1 − attainment) / (1 − objective)`; above
    /// 1 once overspent.
    pub consumed: Bounded,
    /// `1 − consumed`: negative once overspent, as Sloth and Pyrra show it.
    pub remaining: Bounded,
}

fn values(requests: f64, attainment: Bounded, objective: f64) -> PeriodValues {
    let consumed = burn_rate(attainment, objective);
    let remaining =
        Bounded { lower: 1.0 - consumed.upper, estimate: 1.0 - consumed.estimate, upper: 1.0 - consumed.lower };
    PeriodValues { requests, attainment, consumed, remaining }
}

/// The period from histogram totals ([`HistogramCounts::attainment`] of the summed rows);
/// `None` while a clause has no observation in it.
pub fn from_histogram_totals(t: &[f64], objective: f64) -> Option<PeriodValues> {
    let (finished, failed) = (t[0], t[1]);
    let clauses: Vec<HistogramClause> = t[2..]
        .chunks_exact(4)
        .map(|c| HistogramClause {
            // Which clause a column holds does not change the joint bounds.
            clause: Clause::E2e,
            observed: c[0],
            good: Bounded { lower: c[1], estimate: c[2], upper: c[3] },
        })
        .collect();
    let observed_max = clauses.iter().map(|c| c.observed).fold(0.0, f64::max);
    // The requests in flight at the period's edges, which TTFT and finishes count
    // differently, are a handful among weeks of traffic: the TTFT bracket is not restated.
    let counts =
        HistogramCounts { finished: (finished > 0.0).then_some(finished), failed, clauses, in_flight_at_start: None };
    let attained = counts.attainment()?;
    let requests = if finished > 0.0 { finished } else { observed_max };
    Some(values(requests, attained.joint, objective))
}

/// The period from request totals; `None` while no request was judged in it.
pub fn from_request_totals(t: &[f64], objective: f64) -> Option<PeriodValues> {
    let (judged, lower, upper) = (t[0], t[1], t[2]);
    if judged <= 0.0 {
        return None;
    }
    let lower = (lower / judged).clamp(0.0, 1.0);
    let upper = (upper / judged).clamp(lower, 1.0);
    // The estimate judges each request by its measured values, as the windows do.
    Some(values(judged, Bounded { lower, estimate: lower, upper }, objective))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_totals_give_the_exact_budget() {
        // 10,000 requests, 9,950 good, 99% objective: 50 bad of 100 allowed.
        let v = from_request_totals(&[10_000.0, 9_950.0, 9_950.0], 0.99).unwrap();
        assert!((v.consumed.estimate - 0.5).abs() < 1e-9, "{v:?}");
        assert!((v.remaining.estimate - 0.5).abs() < 1e-9);
        assert!(v.consumed.is_exact() && v.remaining.is_exact());
        // 10 possibly good widen it.
        let v = from_request_totals(&[10_000.0, 9_950.0, 9_960.0], 0.99).unwrap();
        assert!((v.consumed.lower - 0.4).abs() < 1e-9 && (v.consumed.upper - 0.5).abs() < 1e-9);
        assert!((v.remaining.lower - 0.5).abs() < 1e-9 && (v.remaining.upper - 0.6).abs() < 1e-9);
        // Overspent: negative remaining.
        let v = from_request_totals(&[1000.0, 970.0, 970.0], 0.99).unwrap();
        assert!((v.remaining.estimate + 2.0).abs() < 1e-9);
        assert!(from_request_totals(&[0.0, 0.0, 0.0], 0.99).is_none());
    }

    #[test]
    fn histogram_totals_bound_the_joint_budget() {
        // TTFT exact 0.995, TPOT bracketed [0.99, 0.999], 0.1% failed, 99% objective.
        let t = [100_000.0, 100.0, 100_000.0, 99_500.0, 99_500.0, 99_500.0, 100_000.0, 99_000.0, 99_500.0, 99_900.0];
        let v = from_histogram_totals(&t, 0.99).unwrap();
        // Fréchet: lower = 0.995 + 0.99 − 1 − 0.001 = 0.984, upper = min(0.995, 0.999, 0.999).
        assert!((v.attainment.lower - 0.984).abs() < 1e-9, "{v:?}");
        assert!((v.attainment.upper - 0.995).abs() < 1e-9);
        assert!((v.attainment.estimate - 0.999 * 0.995 * 0.995).abs() < 1e-9);
        assert!((v.consumed.upper - 1.6).abs() < 1e-9 && (v.consumed.lower - 0.5).abs() < 1e-9);
        assert_eq!(v.requests, 100_000.0);
        // A clause with no observation in the period: nothing to say yet.
        let mut quiet = t;
        quiet[6] = 0.0;
        assert!(from_histogram_totals(&quiet, 0.99).is_none());
    }
}
