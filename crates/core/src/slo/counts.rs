//! The one definition of attainment from histograms (docs/architecture.md#joint-attainment),
//! as counts: per clause, the clause histogram's observations and those at or under its
//! threshold (bracketed between bucket bounds, interpolated inside the bucket); jointly, the
//! Fréchet bounds of the clause shares with the failed requests counted as bad.
//!
//! Counts add up, so a window (`evaluate::slo`, from raw increases), an error-budget period
//! (`budget::tally`, from the sum of its intervals' counts) and the recording rules of
//! `goodput rules` (the same ratios in PromQL) read one definition: [`HistogramCounts::attainment`].

use std::collections::BTreeMap;

use super::{Bounded, Clause, joint, restate};
use crate::canonical::Histogram;

/// Relative tolerance for "the threshold is a bucket boundary": configs say `200ms`,
/// engines print `0.2` or `0.20000000000000001`.
const ON_BOUNDARY: f64 = 1e-9;

fn same(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= ON_BOUNDARY * a.abs().max(b.abs())
}

/// The bucket boundary equal to `threshold`, if there is one.
pub fn threshold_on_boundary(h: &Histogram, threshold: f64) -> Option<f64> {
    h.buckets.iter().map(|b| b.le).find(|&le| le.is_finite() && same(le, threshold))
}

/// Whether [`good_counts`] at `threshold` stops at the bucket bounded by `le`: it walks the
/// buckets upwards and stops at the first for which this holds. So what a bracket reads of
/// a histogram is every bucket below that first bound, the bound itself, and `+Inf` (the
/// total); the alert-only windows keep no other bucket (`window::Kept`).
pub fn stops_at(le: f64, threshold: f64) -> bool {
    (le.is_finite() && same(le, threshold)) || threshold < le
}

/// One clause's histogram over a span: its observations, and how many of them were at or
/// under the threshold, as counts (`lower`, `estimate`, `upper`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramClause {
    pub clause: Clause,
    pub observed: f64,
    pub good: Bounded,
}

/// A histogram of (raw) increases against a threshold: its observations, and how many of
/// them were at or under the threshold as counts (`lower`, `estimate`, `upper`). `None`
/// without observations, or without a `+Inf` bucket.
///
/// Exact when the threshold is a bucket boundary; otherwise `lower` and `upper` are the
/// cumulative counts at the two neighbouring boundaries and the estimate interpolates
/// linearly inside the bucket, as `histogram_quantile` does (the lowest bucket starts at 0
/// for positive bounds). Above the highest finite boundary the upper count is every
/// observation and the estimate the lower count: nothing is known about how the `+Inf`
/// bucket is spread.
pub fn good_counts(h: &Histogram, threshold: f64) -> Option<(f64, Bounded)> {
    let inf = h.buckets.last().filter(|b| b.le == f64::INFINITY)?;
    let total = inf.count;
    if total.is_nan() || total <= 0.0 {
        return None;
    }
    // Cumulative counts may dip by float noise or a torn scrape; PromQL's monotonicity fix
    // would take the running max, and so do we.
    let mut prev_le = 0.0_f64;
    let mut prev_count = 0.0_f64;
    for (i, b) in h.buckets.iter().enumerate() {
        let count = b.count.max(prev_count).min(total);
        if stops_at(b.le, threshold) {
            if b.le.is_finite() && same(b.le, threshold) {
                return Some((total, Bounded::exact(count)));
            }
            let estimate = if b.le.is_infinite() {
                prev_count
            } else {
                let start = if i == 0 { prev_le.min(b.le) } else { prev_le };
                let span = b.le - start;
                let frac = if span > 0.0 { ((threshold - start) / span).clamp(0.0, 1.0) } else { 1.0 };
                prev_count + (count - prev_count) * frac
            };
            return Some((total, Bounded { lower: prev_count, estimate, upper: count }));
        }
        prev_le = b.le;
        prev_count = count;
    }
    Some((total, Bounded::exact(total)))
}

impl HistogramClause {
    /// The clause's counts in `h` ([`good_counts`]); no observations observe nothing.
    pub fn of(clause: Clause, h: &Histogram, threshold: f64) -> HistogramClause {
        let (observed, good) = good_counts(h, threshold).unwrap_or((0.0, Bounded::exact(0.0)));
        HistogramClause { clause, observed, good }
    }

    /// The share of the observations at or under the threshold; `None` without any.
    pub fn share(&self) -> Option<Bounded> {
        if self.observed.is_nan() || self.observed <= 0.0 {
            return None;
        }
        let share = |v: f64| (v / self.observed).clamp(0.0, 1.0);
        let (lower, upper) = (share(self.good.lower), share(self.good.upper));
        Some(Bounded { lower, estimate: share(self.good.estimate).clamp(lower, upper), upper })
    }
}

/// One SLO's histograms over a span, as counts.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramCounts {
    /// Requests that finished in the span (every finish reason); `None` when the engine
    /// counts no finishes.
    pub finished: Option<f64>,
    /// … of which failed or were aborted (never good).
    pub failed: f64,
    /// The SLO's clauses, in TTFT, TPOT, E2E order.
    pub clauses: Vec<HistogramClause>,
    /// Requests running or waiting at the span's start: at most this many finished
    /// requests got their first token before it (see [`restate`]). `None` leaves the TTFT
    /// bracket as measured.
    pub in_flight_at_start: Option<f64>,
}

/// Attainment per clause and jointly.
#[derive(Debug, Clone, PartialEq)]
pub struct Attained {
    /// Each clause's share of its own histogram's observations.
    pub clauses: BTreeMap<Clause, Bounded>,
    /// Every clause met and the request not failed, among the finished requests.
    pub joint: Bounded,
}

impl HistogramCounts {
    /// The failed share of the finished requests: 0 when none finished (or none are counted).
    pub fn failed_share(&self) -> f64 {
        match self.finished {
            Some(n) if n > 0.0 => (self.failed / n).clamp(0.0, 1.0),
            _ => 0.0,
        }
    }

    /// Attainment per clause and jointly; `None` while a clause has no observation (there
    /// is no share to report) or the SLO has no clause.
    ///
    /// Joint attainment counts the requests that finished in the span; TTFT counted those
    /// whose first token came in it. With [`HistogramCounts::in_flight_at_start`] the TTFT
    /// bracket is restated for the finished population before the joint bounds are taken.
    pub fn attainment(&self) -> Option<Attained> {
        if self.clauses.is_empty() {
            return None;
        }
        let mut clauses = BTreeMap::new();
        let mut marginals = Vec::with_capacity(self.clauses.len());
        for c in &self.clauses {
            let share = c.share()?;
            clauses.insert(c.clause, share);
            let marginal = match (c.clause, self.finished, self.in_flight_at_start) {
                (Clause::Ttft, Some(n), Some(outsiders)) => restate(share, c.observed, n, outsiders),
                _ => share,
            };
            marginals.push(marginal);
        }
        let joint = joint(&marginals, self.failed_share());
        Some(Attained { clauses, joint })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::Bucket;

    fn hist(b: &[(f64, f64)]) -> Histogram {
        Histogram {
            buckets: b.iter().map(|&(le, count)| Bucket { le, count }).collect(),
            sum: 0.0,
            count: b.last().unwrap().1,
        }
    }

    fn counts(clauses: Vec<HistogramClause>, finished: f64, failed: f64) -> HistogramCounts {
        HistogramCounts { finished: Some(finished), failed, clauses, in_flight_at_start: None }
    }

    #[test]
    fn clause_counts_are_the_cumulative_counts_at_the_neighbouring_bounds() {
        let h = hist(&[(0.1, 10.0), (0.25, 30.0), (0.5, 36.0), (f64::INFINITY, 40.0)]);
        let c = HistogramClause::of(Clause::Ttft, &h, 0.25);
        assert_eq!((c.observed, c.good), (40.0, Bounded::exact(30.0)));
        let c = HistogramClause::of(Clause::Ttft, &h, 0.2);
        assert_eq!((c.good.lower, c.good.upper), (10.0, 30.0));
        assert!((c.good.estimate - (10.0 + 20.0 * (0.1 / 0.15))).abs() < 1e-12);
        let c = HistogramClause::of(Clause::Ttft, &h, 2.0);
        assert_eq!(c.good, Bounded { lower: 36.0, estimate: 36.0, upper: 40.0 });
        let empty = HistogramClause::of(Clause::Ttft, &hist(&[(0.1, 0.0), (f64::INFINITY, 0.0)]), 0.1);
        assert_eq!((empty.observed, empty.share()), (0.0, None));
    }

    #[test]
    fn joint_attainment_counts_failures_and_bounds_the_clauses() {
        let ttft = HistogramClause { clause: Clause::Ttft, observed: 100.0, good: Bounded::exact(95.0) };
        let tpot = HistogramClause {
            clause: Clause::Tpot,
            observed: 100.0,
            good: Bounded { lower: 80.0, estimate: 85.0, upper: 90.0 },
        };
        let a = counts(vec![ttft, tpot], 100.0, 5.0).attainment().unwrap();
        assert_eq!(a.clauses[&Clause::Ttft], Bounded::exact(0.95));
        assert!((a.joint.lower - (0.95 + 0.8 - 1.0 - 0.05)).abs() < 1e-12, "{a:?}");
        assert_eq!(a.joint.upper, 0.9);
        assert!((a.joint.estimate - 0.95 * 0.95 * 0.85).abs() < 1e-12);
        // A clause without observations: nothing to report.
        let quiet = HistogramClause { observed: 0.0, ..tpot };
        assert!(counts(vec![ttft, quiet], 100.0, 0.0).attainment().is_none());
        assert!(counts(vec![], 100.0, 0.0).attainment().is_none());
    }

    #[test]
    fn ttft_is_restated_for_the_finished_population_only_in_the_joint() {
        let ttft = HistogramClause { clause: Clause::Ttft, observed: 100.0, good: Bounded::exact(90.0) };
        let mut c = counts(vec![ttft], 110.0, 0.0);
        c.in_flight_at_start = Some(12.0);
        let a = c.attainment().unwrap();
        assert_eq!(a.clauses[&Clause::Ttft], Bounded::exact(0.9), "the clause as measured");
        assert!((a.joint.lower - (1.0 - 22.0 / 110.0)).abs() < 1e-12, "{a:?}");
        assert!((a.joint.upper - 102.0 / 110.0).abs() < 1e-12, "{a:?}");
    }
}
