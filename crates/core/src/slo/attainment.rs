//! Share of one histogram's observations at or under a threshold.

use super::Bounded;
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

/// Share of observations ≤ `threshold` in a histogram of (raw) increases.
///
/// Exact when the threshold is a bucket boundary. Otherwise the bracket spans the two
/// neighbouring boundaries, and the estimate interpolates linearly inside the bucket, as
/// `histogram_quantile` does (the lowest bucket starts at 0 for positive bounds). Above
/// the highest finite boundary the upper bound is 1 and the estimate is the lower bound:
/// nothing is known about how the `+Inf` bucket is spread. `None` when the window holds no
/// observations, or when the histogram has no `+Inf` bucket.
pub fn attainment(h: &Histogram, threshold: f64) -> Option<Bounded> {
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
        if b.le.is_finite() && same(b.le, threshold) {
            return Some(Bounded::exact(count / total));
        }
        if threshold < b.le {
            let lower = prev_count / total;
            let upper = count / total;
            let estimate = if b.le.is_infinite() {
                lower
            } else {
                let start = if i == 0 { prev_le.min(b.le) } else { prev_le };
                let span = b.le - start;
                let frac = if span > 0.0 { ((threshold - start) / span).clamp(0.0, 1.0) } else { 1.0 };
                (prev_count + (count - prev_count) * frac) / total
            };
            return Some(Bounded { lower, estimate, upper });
        }
        prev_le = b.le;
        prev_count = count;
    }
    Some(Bounded::exact(1.0))
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
