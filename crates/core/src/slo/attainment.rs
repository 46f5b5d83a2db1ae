//! Share of one histogram's observations at or under a threshold.

use super::counts::{HistogramClause, good_counts};
use super::{Bounded, Clause};
use crate::canonical::Histogram;

/// Share of observations ≤ `threshold` in a histogram of (raw) increases: the counts of
/// [`good_counts`] over the observations. Exact when the threshold is a bucket boundary,
/// otherwise bracketed by the two neighbouring boundaries with a linear interpolation
/// inside the bucket as the estimate. `None` when the window holds no observations, or
/// when the histogram has no `+Inf` bucket.
pub fn attainment(h: &Histogram, threshold: f64) -> Option<Bounded> {
    let (observed, good) = good_counts(h, threshold)?;
    HistogramClause { clause: Clause::Joint, observed, good }.share()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::Bucket;
    use crate::slo::threshold_on_boundary;

    fn hist(b: &[(f64, f64)]) -> Histogram {
        Histogram {
            buckets: b.iter().map(|&(le, count)| Bucket { le, count }).collect(),
            sum: 0.0,
            count: b.last().unwrap().1,
        }
    }

    #[test]
    fn on_a_boundary_is_exact() {
        let h = hist(&[(0.1, 10.0), (0.25, 30.0), (0.5, 36.0), (f64::INFINITY, 40.0)]);
        assert_eq!(attainment(&h, 0.25), Some(Bounded::exact(0.75)));
        assert_eq!(attainment(&h, 0.25 * (1.0 + 1e-12)), Some(Bounded::exact(0.75)));
        assert_eq!(threshold_on_boundary(&h, 0.5), Some(0.5));
        assert_eq!(threshold_on_boundary(&h, 0.2), None);
    }

    #[test]
    fn between_boundaries_is_bracketed_and_interpolated() {
        let h = hist(&[(0.1, 10.0), (0.25, 30.0), (0.5, 36.0), (f64::INFINITY, 40.0)]);
        let a = attainment(&h, 0.2).unwrap();
        assert_eq!((a.lower, a.upper), (0.25, 0.75));
        // 10 + 20 × (0.2 − 0.1)/(0.25 − 0.1) = 23.333… of 40
        assert!((a.estimate - (10.0 + 20.0 * (0.1 / 0.15)) / 40.0).abs() < 1e-12);
        // Below the lowest boundary, the bucket is taken to start at 0.
        let a = attainment(&h, 0.05).unwrap();
        assert_eq!((a.lower, a.estimate, a.upper), (0.0, 0.125, 0.25));
        // Above the highest finite boundary: nothing is known about the +Inf bucket.
        let a = attainment(&h, 2.0).unwrap();
        assert_eq!((a.lower, a.estimate, a.upper), (0.9, 0.9, 1.0));
    }

    #[test]
    fn empty_or_malformed_windows_have_no_attainment() {
        assert_eq!(attainment(&hist(&[(0.1, 0.0), (f64::INFINITY, 0.0)]), 0.1), None);
        assert_eq!(attainment(&hist(&[(0.1, 1.0), (0.5, 2.0)]), 0.1), None);
    }
}
