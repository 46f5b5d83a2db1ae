//! Joint attainment from marginals, and error-budget burn.

use super::Bounded;

/// Joint attainment of several clauses over the finished requests of a window, where a
/// share `failed` of those requests failed or was aborted (and so is never good).
///
/// Marginals cannot give the joint share; they bound it (Fréchet):
/// `max(0, Σ lowerᵢ − (n − 1) − failed) ≤ p ≤ min(min upperᵢ, 1 − failed)`, and the
/// estimate assumes independence: `(1 − failed) · Π estimateᵢ`.
pub fn joint(clauses: &[Bounded], failed: f64) -> Bounded {
    let failed = failed.clamp(0.0, 1.0);
    let n = clauses.len() as f64;
    let lower_sum: f64 = clauses.iter().map(|c| c.lower).sum();
    let lower = (lower_sum - (n - 1.0).max(0.0) - failed).max(0.0);
    let upper = clauses.iter().map(|c| c.upper).fold(1.0 - failed, f64::min);
    // Σ lower − (n − 1) rounds: exact marginals (1, 1, p) can put `lower` one ulp above
    // `upper = p`, and `clamp` panics on an inverted range.
    let lower = lower.min(upper);
    let estimate = (1.0 - failed) * clauses.iter().map(|c| c.estimate).product::<f64>();
    Bounded { lower, estimate: estimate.clamp(lower, upper), upper }
}

/// A clause bracket measured on one population of requests, restated for another.
///
/// TTFT is observed when a request's first token comes out; joint attainment counts the
/// requests that *finished* in the window. The finished requests missing from the TTFT
/// increase got their first token before the window, so they were running (or waiting
/// after a preemption) at its first scrape: at most `outsiders` of them. With `observed`
/// TTFT observations and `population` finished requests, TTFT-breaking finished requests
/// are at most `(1 − lower)·observed + outsiders`, and TTFT-meeting ones at most
/// `upper·observed + outsiders`. The estimate is kept: it is the best guess either way.
pub fn restate(b: Bounded, observed: f64, population: f64, outsiders: f64) -> Bounded {
    if population <= 0.0 {
        return b;
    }
    let lower = (1.0 - ((1.0 - b.lower) * observed + outsiders) / population).clamp(0.0, 1.0);
    let upper = ((b.upper * observed + outsiders) / population).clamp(0.0, 1.0);
    let (lower, upper) = (lower.min(b.lower), upper.max(b.upper));
    Bounded { lower, estimate: b.estimate.clamp(lower, upper), upper }
}

/// Error-budget burn rate `(1 − attainment) / (1 − objective)`: less attainment burns
/// faster, so the lower burn comes from the upper attainment.
pub fn burn_rate(attainment: Bounded, objective: f64) -> Bounded {
    let budget = 1.0 - objective;
    Bounded {
        lower: (1.0 - attainment.upper) / budget,
        estimate: (1.0 - attainment.estimate) / budget,
        upper: (1.0 - attainment.lower) / budget,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frechet_bounds_and_independence_estimate() {
        let ttft = Bounded { lower: 0.9, estimate: 0.95, upper: 0.97 };
        let tpot = Bounded { lower: 0.8, estimate: 0.85, upper: 0.9 };
        let j = joint(&[ttft, tpot], 0.0);
        assert!((j.lower - 0.7).abs() < 1e-12);
        assert_eq!(j.upper, 0.9);
        assert!((j.estimate - 0.95 * 0.85).abs() < 1e-12);
        // 5 % failed requests are never good.
        let j = joint(&[ttft, tpot], 0.05);
        assert!((j.lower - 0.65).abs() < 1e-12);
        assert!((j.estimate - 0.95 * 0.95 * 0.85).abs() < 1e-12);
        // Exact, disjoint-failure marginals collapse the bracket only when they must.
        let j = joint(&[Bounded::exact(1.0), Bounded::exact(1.0)], 0.0);
        assert_eq!(j, Bounded::exact(1.0));
        assert_eq!(joint(&[Bounded::exact(0.3), Bounded::exact(0.4)], 0.0).lower, 0.0);
    }

    #[test]
    fn rounding_never_inverts_the_bounds() {
        // 2.9682539682539684 − 2 rounds to just above 61/63 (found by tests/it/accuracy_*).
        let p = 61.0 / 63.0;
        let j = joint(&[Bounded::exact(1.0), Bounded::exact(1.0), Bounded::exact(p)], 0.0);
        assert!(j.lower <= j.estimate && j.estimate <= j.upper);
        assert_eq!(j.upper, p);
    }

    #[test]
    fn restating_widens_by_the_outsiders() {
        let ttft = Bounded { lower: 0.9, estimate: 0.95, upper: 0.98 };
        // 100 TTFT observations, 110 finished requests, 12 in flight at the window start:
        // breaking ≤ 0.1·100 + 12 = 22 of 110, meeting ≤ 98 + 12 = 110 of 110.
        let r = restate(ttft, 100.0, 110.0, 12.0);
        assert!((r.lower - (1.0 - 22.0 / 110.0)).abs() < 1e-12);
        assert_eq!(r.upper, 1.0);
        assert_eq!(r.estimate, 0.95);
        // Nobody outside, same population: unchanged.
        assert_eq!(restate(ttft, 100.0, 100.0, 0.0), ttft);
    }

    #[test]
    fn burn_inverts_the_bounds() {
        let b = burn_rate(Bounded { lower: 0.98, estimate: 0.985, upper: 0.99 }, 0.99);
        assert!((b.lower - 1.0).abs() < 1e-9);
        assert!((b.estimate - 1.5).abs() < 1e-9);
        assert!((b.upper - 2.0).abs() < 1e-9);
    }
}
